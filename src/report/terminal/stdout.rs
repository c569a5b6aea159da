//! A command's output on stdout. A reader may close its end early
//! (`fabricbench plan … | head -1`): what it read, it got, so the rest goes
//! nowhere and the command ends as it would have. That is ripgrep's answer
//! (status 0 for a command that only prints), not coreutils' (killed by
//! SIGPIPE, 141), and not `println!`'s (a panic). SIGPIPE stays ignored, as
//! Rust leaves it: the launcher also writes to sockets and to ssh's and
//! workers' pipes, whose closing is an error it reports, not a reason to die.

use std::fmt::Display;
use std::io::{self, Write};

/// stdout failed for another reason than a closed reader (a full disk
/// under `> file`).
#[derive(Debug, thiserror::Error)]
#[error("cannot write to stdout: {0}")]
pub struct StdoutError(#[from] io::Error);

/// `print!("{text}")`, quiet once the reader has gone.
pub fn print(text: impl Display) -> Result<(), StdoutError> {
    let mut out = io::stdout().lock();
    closed_is_fine(write!(out, "{text}").and_then(|()| out.flush())).map_err(StdoutError)
}

/// `bytes` to stdout, quiet once the reader has gone.
pub fn write(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    closed_is_fine(out.write_all(bytes).and_then(|()| out.flush()))
}

fn closed_is_fine(written: io::Result<()>) -> io::Result<()> {
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
