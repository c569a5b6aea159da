//! The control plane: wire messages, framing, the sans-IO coordinator, the
//! tokio layer that drives it, and the launcher's instructions to it.

pub mod coordinator;
pub mod driver;
pub mod framing;
mod gather;
pub mod instruction;
pub mod report_parts;
pub mod wire;
