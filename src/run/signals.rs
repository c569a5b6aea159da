//! The signals that stop a run: SIGINT (Ctrl-C), SIGTERM (Slurm's time
//! limit, scancel, CI runners), SIGHUP (a closed terminal) and SIGQUIT.
//! Each is caught, so the run stops its workers, keeps what was measured
//! and saves it; a second one shortens the wait for the workers. The first
//! one names the exit code: 128 + its number, as a shell reports a signal.

use std::fmt;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::exit::Exit;

/// A signal that stopped the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stop(Signal);

impl Stop {
    /// How the run ends: its exit code is 128 + the signal's number.
    pub fn exit(self) -> Exit {
        Exit::Stopped(self.0)
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

/// The stop signals received so far; clones share them.
#[derive(Clone)]
pub struct Signals {
    count: watch::Receiver<usize>,
    first: Arc<AtomicI32>,
}

impl Signals {
    /// Catches the stop signals from now on; inside a tokio runtime. From
    /// then on none of them ends the process by itself.
    pub fn listen() -> std::io::Result<Signals> {
        let (count, receiver) = watch::channel(0usize);
        let (count, first) = (Arc::new(count), Arc::new(AtomicI32::new(0)));
        for (kind, which) in [
            (SignalKind::interrupt(), Signal::SIGINT),
            (SignalKind::terminate(), Signal::SIGTERM),
            (SignalKind::hangup(), Signal::SIGHUP),
            (SignalKind::quit(), Signal::SIGQUIT),
        ] {
            let mut stream = signal(kind)?;
            let (count, first) = (count.clone(), first.clone());
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    let _ = first.compare_exchange(0, which as i32, Ordering::SeqCst, Ordering::SeqCst);
                    count.send_modify(|n| *n += 1);
                }
            });
        }
        Ok(Signals { count: receiver, first })
    }

    /// The first stop signal, if one came.
    pub fn first(&self) -> Option<Stop> {
        Signal::try_from(self.first.load(Ordering::SeqCst)).ok().map(Stop)
    }

    /// How many stop signals came so far.
    pub fn received(&self) -> usize {
        *self.count.borrow()
    }

    /// Resolves once `n` stop signals have come in all, with the first.
    pub async fn reach(&self, n: usize) -> Stop {
        let mut count = self.count.clone();
        // The senders live as long as the runtime: waiting cannot fail before.
        let _ = count.wait_for(|c| *c >= n).await;
        self.first().unwrap_or(Stop(Signal::SIGTERM))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        let codes: Vec<(String, u8)> = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT]
            .into_iter()
            .map(|s| (Stop(s).to_string(), Stop(s).exit().code()))
            .collect();
        let expected = [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129), ("SIGQUIT", 131)];
        assert_eq!(codes, expected.map(|(s, c)| (s.to_string(), c)));
    }

    #[tokio::test]
    async fn a_caught_signal_is_counted_and_named() {
        let signals = Signals::listen().unwrap();
        assert_eq!((signals.first(), signals.received()), (None, 0));
        nix::sys::signal::raise(Signal::SIGHUP).unwrap();
        let stop = tokio::time::timeout(std::time::Duration::from_secs(5), signals.reach(1)).await.unwrap();
        assert_eq!((stop.to_string(), signals.received()), ("SIGHUP".to_string(), 1));
    }
}
