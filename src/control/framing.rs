//! Frames on the control connection: a 4-byte big-endian length, then a
//! postcard message. Frames over [`MAX_FRAME`] are refused before any
//! allocation, so a stranger cannot make the coordinator buffer gigabytes.

use futures::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

/// Largest control frame: ample for an endpoint table of thousands of flows.
pub const MAX_FRAME: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("undecodable frame: {0}")]
    Decode(postcard::Error),
}

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().max_frame_length(MAX_FRAME).new_codec()
}

/// Reads typed messages from a byte stream.
pub struct FrameReader<R, M> {
    inner: FramedRead<R, LengthDelimitedCodec>,
    _msg: std::marker::PhantomData<fn() -> M>,
}

impl<R: AsyncRead + Unpin, M: DeserializeOwned> FrameReader<R, M> {
    pub fn new(read: R) -> Self {
        FrameReader { inner: FramedRead::new(read, codec()), _msg: std::marker::PhantomData }
    }

    /// Reads `limit`-byte frames at most, the length prefix refused before
    /// anything is reserved (until a peer is authenticated: a Hello's worth).
    pub fn with_limit(read: R, limit: usize) -> Self {
        let codec = LengthDelimitedCodec::builder().max_frame_length(limit).new_codec();
        FrameReader { inner: FramedRead::new(read, codec), _msg: std::marker::PhantomData }
    }

    /// From now on frames up to [`MAX_FRAME`].
    pub fn lift_limit(&mut self) {
        self.inner.decoder_mut().set_max_frame_length(MAX_FRAME);
    }

    /// The next frame as it came, or `None` at a clean end of stream.
    pub async fn next_frame(&mut self) -> Option<Result<bytes::BytesMut, FrameError>> {
        Some(self.inner.next().await?.map_err(FrameError::from))
    }

    /// The next message, or `None` at a clean end of stream.
    pub async fn next(&mut self) -> Option<Result<M, FrameError>> {
        let frame = self.next_frame().await?;
        Some(frame.and_then(|bytes| postcard::from_bytes(&bytes).map_err(FrameError::Decode)))
    }
}

/// Writes typed messages to a byte stream.
pub struct FrameWriter<W, M> {
    inner: FramedWrite<W, LengthDelimitedCodec>,
    _msg: std::marker::PhantomData<fn(M)>,
}

impl<W: AsyncWrite + Unpin, M: Serialize> FrameWriter<W, M> {
    pub fn new(write: W) -> Self {
        FrameWriter { inner: FramedWrite::new(write, codec()), _msg: std::marker::PhantomData }
    }

    pub async fn send(&mut self, msg: &M) -> Result<(), FrameError> {
        let bytes = postcard::to_stdvec(msg).map_err(FrameError::Decode)?;
        self.inner.send(bytes::Bytes::from(bytes)).await?;
        Ok(())
    }
}

/// Writes every message queued until the queue closes or the peer goes away.
pub async fn pump<W: AsyncWrite + Unpin, M: Serialize>(
    mut writer: FrameWriter<W, M>,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<M>,
) {
    while let Some(msg) = queue.recv().await {
        if let Err(e) = writer.send(&msg).await {
            // Nothing after this frame can be sent: say why, once.
            tracing::error!("control connection: cannot send a frame: {e}");
            return;
        }
    }
}
