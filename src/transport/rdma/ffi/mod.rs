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
pub(crate) use cq::{Cq, Wc};
pub(crate) use port::query_port;
pub(crate) use qp::{Qp, QpModifyError, SendSpec, WrKind};
