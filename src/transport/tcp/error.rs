//! Why a TCP flow end failed: connecting or moving data. Its own file, so
//! the lane seam (`transport::task`) can name it without the rest of `tcp`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    #[error("cannot listen on {addr}: {cause}{hint}", hint = crate::fdlimit::hint(.cause))]
    Listen { addr: IpAddr, cause: std::io::Error },
    #[error("cannot connect stream {stream} from {local} to {peer}: {cause}{hint}", hint = crate::fdlimit::hint(.cause))]
    Connect { stream: u32, local: IpAddr, peer: SocketAddr, cause: std::io::Error },
    #[error("only {accepted} of {expected} streams connected within {timeout:?} ({refused} stranger(s) refused)")]
    Accept { accepted: usize, expected: u32, timeout: Duration, refused: u64 },
    #[error("cannot wait for connections: {cause}{hint}", hint = crate::fdlimit::hint(.cause))]
    Poll { cause: std::io::Error },
    #[error("stream to {peer} failed after {bytes} bytes: {cause}")]
    Stream { peer: String, bytes: u64, cause: std::io::Error },
}
