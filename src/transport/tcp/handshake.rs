//! Connecting many TCP flow ends at once on one thread. Each end is a
//! nonblocking state machine (`Accepting`, `Dialing`) woken by readiness
//! from one epoll set, so a rank with thousands of ends needs no thread
//! per end — and none waits on another: a rank may hold both ends of a
//! flow, and a receiver waits for its sender, which a bounded pool of
//! blocking threads could leave queued behind it.

use std::time::{Duration, Instant};

use mio::{Events, Poll, Registry, Token};

use crate::transport::tcp::TcpError;

/// How often every end is looked at whatever the epoll set says: a
/// connection that never sends its preamble is refused on its own timer,
/// which no readiness announces.
const SWEEP: Duration = Duration::from_millis(50);

/// One end's part in connecting, driven by [`drive`].
pub trait Shake {
    type Output;
    /// Registers its sockets (and begins its dials) under `token`.
    fn start(&mut self, registry: &Registry, token: Token) -> Result<(), TcpError>;
    /// Moves on as far as it can without blocking; its result once done.
    fn advance(&mut self, registry: &Registry, token: Token, now: Instant) -> Option<Result<Self::Output, TcpError>>;
    /// Why it failed, when `timeout` has passed before it was done.
    fn expire(&mut self, timeout: Duration) -> TcpError;
}

/// Connects every end on the calling thread within `timeout` (each end
/// its own deadline, all begun together); each end's result, in order,
/// one failing end leaving the others be.
pub fn drive<S: Shake>(ends: Vec<S>, timeout: Duration) -> Vec<Result<S::Output, TcpError>> {
    let deadline = Instant::now() + timeout;
    let mut poll = match Poll::new() {
        Ok(poll) => poll,
        Err(e) => return ends.iter().map(|_| Err(TcpError::Poll { cause: clone_io(&e) })).collect(),
    };
    let mut live: Vec<Option<S>> = Vec::with_capacity(ends.len());
    let mut results: Vec<Option<Result<S::Output, TcpError>>> = Vec::with_capacity(ends.len());
    for (k, mut end) in ends.into_iter().enumerate() {
        match end.start(poll.registry(), Token(k)) {
            Ok(()) => (live.push(Some(end)), results.push(None)),
            Err(e) => (live.push(None), results.push(Some(Err(e)))),
        };
    }
    let mut events = Events::with_capacity(1024);
    let mut woken = vec![true; live.len()];
    let mut sweep = Instant::now() + SWEEP;
    loop {
        let now = Instant::now();
        for (k, slot) in live.iter_mut().enumerate() {
            let Some(end) = slot.as_mut().filter(|_| std::mem::take(&mut woken[k])) else { continue };
            let done = match end.advance(poll.registry(), Token(k), now) {
                None if now >= deadline => Some(Err(end.expire(timeout))),
                done => done,
            };
            if done.is_some() {
                results[k] = done;
                *slot = None;
            }
        }
        if live.iter().all(Option::is_none) {
            break;
        }
        if let Err(e) = poll.poll(&mut events, Some(sweep.min(deadline).saturating_duration_since(now))) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                fail_live(&mut live, &mut results, &e);
            }
        }
        events.iter().for_each(|event| woken[event.token().0] = true);
        let now = Instant::now();
        if now >= sweep || now >= deadline {
            sweep = now + SWEEP;
            woken.iter_mut().for_each(|w| *w = true);
        }
    }
    results.into_iter().map(|r| r.expect("every end ends")).collect()
}

/// Every end still connecting fails with the epoll set's own error.
fn fail_live<S: Shake>(
    live: &mut [Option<S>],
    results: &mut [Option<Result<S::Output, TcpError>>],
    e: &std::io::Error,
) {
    for (slot, result) in live.iter_mut().zip(results) {
        if slot.take().is_some() {
            *result = Some(Err(TcpError::Poll { cause: clone_io(e) }));
        }
    }
}

/// io::Error is not Clone; each end gets its own with the same kind and text.
fn clone_io(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}
