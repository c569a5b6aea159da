//! Diagnostics on stderr that outlive stderr. `eprintln!` panics when its
//! write fails, and stderr is closed more often than one thinks:
//! `fabricbench run … 2>&-`, a pipe whose reader has gone, a worker whose
//! ssh or launcher is gone. A note nobody can read is dropped; the command
//! ends as it would have, with its own exit code (as stdout's readers going
//! away is handled in `report::terminal::stdout`).

use std::fmt;
use std::io::{self, Write};

/// `eprintln!` that drops the line when stderr cannot take it.
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {
        $crate::diag::line(::std::format_args!($($arg)*))
    };
}

/// One line on stderr, or nothing where stderr is closed.
pub fn line(args: fmt::Arguments) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// `text` as it is (no newline added), or nothing where stderr is closed.
pub fn text(text: impl fmt::Display) {
    let _ = write!(io::stderr().lock(), "{text}");
}

/// stderr as a writer that drops what it cannot write, for the log lines:
/// tracing-subscriber reports a failed write with `eprintln!`, which would
/// panic (a worker would die mid-stop with its phase still running).
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let _ = io::stderr().write_all(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}
