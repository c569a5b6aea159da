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
/// The read and write buffers a connection starts with. Control frames
/// are mostly tens of bytes, and a larger frame reserves its own length
/// when its prefix arrives; tokio-util's default of 8 KiB each made 16 384
/// connections cost rank 0 256 MiB, most of its page faults.
const READ_BUFFER: usize = 1 << 10;
const WRITE_BUFFER: usize = 1 << 10;

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

/// `body` as one frame on the wire, length prefix first: for a peer that
/// writes raw bytes (a stranger in a test, a fuzz seed), not a [`FrameWriter`].
#[cfg(any(test, feature = "testing"))]
pub fn prefixed(body: &[u8]) -> Vec<u8> {
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    [&len.to_be_bytes()[..], body].concat()
}

/// `msg` as one frame on the wire, as [`FrameWriter`] writes it.
#[cfg(any(test, feature = "testing"))]
pub fn frame<M: Serialize>(msg: &M) -> Result<Vec<u8>, FrameError> {
    Ok(prefixed(&postcard::to_stdvec(msg).map_err(FrameError::Decode)?))
}

/// Reads typed messages from a byte stream.
pub struct FrameReader<R, M> {
    inner: FramedRead<R, LengthDelimitedCodec>,
    _msg: std::marker::PhantomData<fn() -> M>,
}

impl<R: AsyncRead + Unpin, M: DeserializeOwned> FrameReader<R, M> {
    pub fn new(read: R) -> Self {
        FrameReader { inner: FramedRead::with_capacity(read, codec(), READ_BUFFER), _msg: std::marker::PhantomData }
    }

    /// Reads `limit`-byte frames at most, the length prefix refused before
    /// anything is reserved (until a peer is authenticated: a Hello's worth).
    /// The buffer starts empty and grows only with what arrives: a stranger
    /// that sends nothing costs no buffer at all.
    pub fn with_limit(read: R, limit: usize) -> Self {
        let codec = LengthDelimitedCodec::builder().max_frame_length(limit).new_codec();
        FrameReader { inner: FramedRead::with_capacity(read, codec, 0), _msg: std::marker::PhantomData }
    }

    /// From now on frames up to [`MAX_FRAME`], read through the usual buffer.
    pub fn lift_limit(&mut self) {
        self.inner.decoder_mut().set_max_frame_length(MAX_FRAME);
        self.inner.read_buffer_mut().reserve(READ_BUFFER);
    }

    /// Bytes reserved for reading now (what this connection costs in memory).
    #[cfg(test)]
    fn buffered_capacity(&self) -> usize {
        self.inner.read_buffer().capacity()
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
        // Frames queued beyond this are flushed before more are taken.
        FrameWriter { inner: FramedWrite::with_capacity(write, codec(), WRITE_BUFFER), _msg: std::marker::PhantomData }
    }

    pub async fn send(&mut self, msg: &M) -> Result<(), FrameError> {
        self.feed(msg).await?;
        self.flush().await
    }

    async fn flush(&mut self) -> Result<(), FrameError> {
        SinkExt::<bytes::Bytes>::flush(&mut self.inner).await?;
        Ok(())
    }

    /// Buffers a frame without flushing it (unless the buffer is full).
    async fn feed(&mut self, msg: &M) -> Result<(), FrameError> {
        let bytes = postcard::to_stdvec(msg).map_err(FrameError::Decode)?;
        self.inner.feed(bytes::Bytes::from(bytes)).await?;
        Ok(())
    }
}

/// Writes every message queued until the queue closes or the peer goes away.
/// What is queued together goes out in one write: at thousands of ranks the
/// syscalls, not the bytes, are the cost.
pub async fn pump<W: AsyncWrite + Unpin, M: Serialize>(
    mut writer: FrameWriter<W, M>,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<M>,
) {
    while let Some(msg) = queue.recv().await {
        let mut sent = writer.feed(&msg).await;
        while let (Ok(()), Ok(msg)) = (&sent, queue.try_recv()) {
            sent = writer.feed(&msg).await;
        }
        if sent.is_ok() {
            sent = writer.flush().await;
        }
        if let Err(e) = sent {
            // Nothing after this frame can be sent: say why, once.
            tracing::error!("control connection: cannot send a frame: {e}");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::wire::HELLO_MAX;
    use tokio::io::AsyncWriteExt;

    /// What a connection that has not said Hello costs: nothing while it is
    /// silent, at most its frame (a Hello's worth) when it sends one slowly.
    #[tokio::test]
    async fn strangers_cost_only_what_they_sent_and_admitted_peers_the_usual_buffer() {
        let (mut stranger, ours) = tokio::io::duplex(64 << 10);
        let mut reader: FrameReader<_, u32> = FrameReader::with_limit(ours, HELLO_MAX);
        assert_eq!(reader.buffered_capacity(), 0, "silent: no buffer");

        // A frame of the largest first-frame size, cut short by one byte.
        stranger.write_all(&(HELLO_MAX as u32).to_be_bytes()).await.unwrap();
        stranger.write_all(&vec![7u8; HELLO_MAX - 1]).await.unwrap();
        let pending = tokio::time::timeout(std::time::Duration::from_millis(100), reader.next_frame()).await;
        assert!(pending.is_err(), "the frame is not complete");
        let held = reader.buffered_capacity();
        assert!((HELLO_MAX - 1..=2 * HELLO_MAX).contains(&held), "a cut-short frame holds {held} bytes");
        stranger.write_all(&[7]).await.unwrap();
        assert_eq!(reader.next_frame().await.unwrap().unwrap().len(), HELLO_MAX);

        // Admitted: frames of every size, through the usual buffer.
        reader.lift_limit();
        assert!(reader.buffered_capacity() >= READ_BUFFER);
        let big = postcard::to_stdvec(&u32::MAX).unwrap();
        stranger.write_all(&(big.len() as u32).to_be_bytes()).await.unwrap();
        stranger.write_all(&big).await.unwrap();
        assert_eq!(reader.next().await.unwrap().unwrap(), u32::MAX);

        // A length over the limit is refused before anything is reserved.
        let (mut stranger, ours) = tokio::io::duplex(64);
        let mut reader: FrameReader<_, u32> = FrameReader::with_limit(ours, HELLO_MAX);
        stranger.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
        assert!(reader.next_frame().await.unwrap().is_err());
        assert!(reader.buffered_capacity() < 64, "{}", reader.buffered_capacity());
    }
}
