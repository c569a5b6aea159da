//! The only `unsafe` of the crate: a small safe wrapper over the few verbs
//! calls sideway's safe layer does not offer without allocating or panicking.
//! Every `unsafe` block says why it is sound in a `// SAFETY:` comment
//! (clippy's `undocumented_unsafe_blocks`, an error under `-D warnings`).
//!
//! * [`Arena`] (`arena`): page-aligned memory registered as one MR.
//! * [`Qp`] (`qp`): an extended RC QP that keeps its arena alive; send WRs
//!   ([`SendSpec`], [`WrKind`]) and a preallocated receive ring.
//! * [`Cq`] (`cq`): a CQ polled with `ibv_poll_cq`, or event-driven; [`Wc`] is one
//!   completion.
//! * [`query_port`] (`port`): `ibv_query_port` without sideway's conversions.
//! * `ud`: UD's Q_Key at INIT and the address handle (of a
//!   [`path::AddressPath`](super::path::AddressPath)) its sends name.
#![allow(unsafe_code)] // the crate denies it everywhere else (Cargo.toml [lints])

mod arena;
mod cq;
mod port;
mod qp;
mod ud;

pub(crate) use arena::{Arena, RegisterError};
pub(crate) use cq::{completion_vectors, Cq, Wc};
pub(crate) use port::query_port;
pub(crate) use qp::{Qp, QpModifyError, SendSpec, WrKind};

/// An error with every cause beneath it: sideway's own texts ("failed to
/// create completion queue") hide the errno, which is the innermost.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("failed to create completion queue")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn causes_are_shown_down_to_the_errno() {
        let e = Outer(std::io::Error::from_raw_os_error(libc::EINVAL));
        assert_eq!(super::with_causes(&e), "failed to create completion queue: Invalid argument (os error 22)");
    }
}
