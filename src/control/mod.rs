//! The control plane: wire messages, framing, the sans-IO coordinator and
//! the tokio layers that drive it and the worker's side of the protocol.

pub mod coordinator;
pub mod driver;
pub mod framing;
mod gather;
pub mod report_parts;
pub mod wire;
