//! `validate = true` (data validation, `transport::validation`): where it
//! can apply. Every message must be a payload that one end writes and the
//! other checks, in a window that measures bandwidth.

use super::locate::BadKey;
use super::rdma::Connection;
use super::{GroupSpec, Mode, Op, Transport};

/// Why `validate` cannot apply to group `g`, if it asks for it.
pub fn check(g: &GroupSpec) -> Result<(), BadKey> {
    if !g.validate {
        return Ok(());
    }
    why_not(g).map_or(Ok(()), |why| Err(BadKey::new("validate", why.to_string())))
}

fn why_not(g: &GroupSpec) -> Option<&'static str> {
    if g.mode == Mode::Latency {
        return Some(
            "applies to bandwidth groups: writing and checking each message inside a round trip would be \
             measured as latency",
        );
    }
    if g.transport == Transport::Tcp {
        return None;
    }
    let ud = g.rdma.as_ref().is_some_and(|r| r.connection == Connection::Ud);
    match g.effective_op() {
        _ if ud => Some("applies to RC: UD datagrams may be lost, so a receiver cannot tell which message it got"),
        Op::FetchAdd | Op::CmpSwap => {
            Some("atomics carry no payload of the sender's to check: validate write, read or send")
        }
        Op::WriteImm | Op::SendImm => Some("applies to write, read and send (not yet to their with-immediate forms)"),
        Op::Write | Op::Read | Op::Send => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::tests::err;

    const GROUP: &str = "[run]\nduration = \"1s\"\n[[group]]\nname = \"g\"\npattern = \"pairwise\"\nvalidate = true\n";

    #[test]
    fn validate_is_refused_where_it_cannot_apply_naming_group_and_key() {
        let at = "s.toml:6: group \"g\": field `validate`: ";
        let cases = [
            ("mode = \"latency\"", "applies to bandwidth groups"),
            ("transport = \"rdma\"\nop = \"fetch-add\"", "atomics carry no payload"),
            ("transport = \"rdma\"\nop = \"write-imm\"", "not yet to their with-immediate forms"),
            (
                "transport = \"rdma\"\nop = \"send\"\nmessage_size = 1024\n[group.rdma]\nconnection = \"UD\"",
                "applies to RC",
            ),
        ];
        for (extra, why) in cases {
            let e = err(&format!("{GROUP}{extra}\n"));
            assert!(e.starts_with(at) && e.contains(why), "{extra}: {e}");
        }
    }
}
