//! The control plane: wire messages, framing, the sans-IO coordinator, the
//! tokio layer that drives it, and the launcher's instructions to it.

pub mod coordinator;
pub mod driver;
pub mod framing;
mod gather;
pub mod instruction;
pub(crate) mod proofs;
pub(crate) mod report_parts;
#[cfg(any(test, feature = "testing"))]
pub mod sim;
pub mod wire;

/// Text from the network as it may be shown (a stranger's Hello, what a
/// stranger sent to a data port): control characters escaped, at most 64
/// characters.
pub fn printable(text: &str) -> String {
    const SHOWN: usize = 64;
    let mut shown: String = text.chars().take(SHOWN).flat_map(char::escape_debug).collect();
    if text.chars().count() > SHOWN {
        shown.push('…');
    }
    shown
}
