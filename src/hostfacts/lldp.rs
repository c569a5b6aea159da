//! A host's LLDP neighbours as its own `lldpctl -f json` prints them, run
//! by the worker when the run gathers its topology from the hosts
//! (`run --topology lldp`). The text goes to rank 0 as printed: the
//! `topology` module parses it there exactly as a file of that folder form,
//! so both forms give the same errors. The command is bounded in time and
//! in output, and every way it can fail says what to install or check.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The program asked, found on PATH (tests put a recording there).
const LLDPCTL: &str = "lldpctl";
/// lldpctl answers from lldpd's memory in milliseconds; a stuck daemon
/// socket must not hold the run's probe (and so every phase) hostage.
pub const TIME_LIMIT: Duration = Duration::from_secs(10);
/// A host's neighbours are a few KiB per port; more is not lldpctl's output.
pub const MAX_OUTPUT: u64 = 4 << 20;
/// How much of stderr an error quotes.
const MAX_STDERR: u64 = 2048;

/// One host's `lldpctl -f json` text, or why there is none.
pub type LldpOutput = Result<String, LldpError>;

/// Why a host's lldpctl gave no neighbours; the host is named by whoever
/// reports it (rank 0 knows which rank sent it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum LldpError {
    #[error("cannot run `lldpctl -f json`: {0}; install lldpd (Debian/Ubuntu: apt install lldpd, RHEL: dnf install lldpd) and start it (systemctl enable --now lldpd)")]
    NotRunnable(String),
    #[error("`lldpctl -f json` failed ({status}): {stderr}; is lldpd running (systemctl status lldpd) and may this user read its socket?")]
    Failed { status: String, stderr: String },
    #[error("`lldpctl -f json` did not finish within {}s; is lldpd answering (systemctl status lldpd)?", TIME_LIMIT.as_secs())]
    TimedOut,
    #[error("`lldpctl -f json` printed more than {MAX_OUTPUT} bytes; a host's neighbours are far fewer")]
    TooLarge,
    #[error("`lldpctl -f json` printed text that is not UTF-8")]
    NotText,
}

/// Runs `lldpctl -f json` on this host.
pub fn of_this_host() -> LldpOutput {
    run(LLDPCTL, TIME_LIMIT)
}

/// Runs `program -f json`, killed after `limit`, its stdout read up to
/// [`MAX_OUTPUT`] bytes.
fn run(program: &str, limit: Duration) -> LldpOutput {
    let mut child = Command::new(program)
        .args(["-f", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LldpError::NotRunnable(e.to_string()))?;
    // Read both pipes off this thread, so a full pipe cannot stall the wait;
    // what is past the bound is read and dropped, so the program still ends.
    let bounded = |pipe: Option<Box<dyn Read + Send>>, max: u64| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.by_ref().take(max + 1).read_to_end(&mut bytes);
                let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            }
            bytes
        })
    };
    let out = bounded(child.stdout.take().map(|p| Box::new(p) as _), MAX_OUTPUT);
    let err = bounded(child.stderr.take().map(|p| Box::new(p) as _), MAX_STDERR);
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait().map_err(|e| LldpError::NotRunnable(e.to_string()))? {
            Some(status) => break status,
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(LldpError::TimedOut);
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    if !status.success() {
        let stderr = String::from_utf8_lossy(&err).trim().to_string();
        return Err(LldpError::Failed { status: status.to_string(), stderr });
    }
    if out.len() as u64 > MAX_OUTPUT {
        return Err(LldpError::TooLarge);
    }
    String::from_utf8(out).map_err(|_| LldpError::NotText)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_says_what_to_install() {
        let e = run("/nonexistent/lldpctl", TIME_LIMIT).unwrap_err().to_string();
        assert!(e.starts_with("cannot run `lldpctl -f json`: "), "{e}");
        assert!(e.contains("install lldpd"), "{e}");
    }

    #[test]
    fn a_failing_or_stuck_program_is_told_apart() {
        // `false` exits 1 whatever its arguments; `sleep` refuses `-f` at once, so a
        // stuck program is a script that ignores them.
        let Err(LldpError::Failed { status, .. }) = run("false", TIME_LIMIT) else { panic!("accepted") };
        assert!(status.contains('1'), "{status}");
        let dir = tempfile::tempdir().unwrap();
        let stuck = dir.path().join("stuck");
        std::fs::write(&stuck, "#!/bin/sh\nexec sleep 5\n").unwrap();
        let mut perms = std::fs::metadata(&stuck).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&stuck, perms).unwrap();
        let started = Instant::now();
        assert_eq!(run(stuck.to_str().unwrap(), Duration::from_millis(200)), Err(LldpError::TimedOut));
        assert!(started.elapsed() < Duration::from_secs(4), "killed at the limit");
        let flood = dir.path().join("flood");
        std::fs::write(&flood, format!("#!/bin/sh\nhead -c {} /dev/zero\n", 2 * MAX_OUTPUT)).unwrap();
        std::fs::set_permissions(&flood, std::fs::metadata(&stuck).unwrap().permissions()).unwrap();
        assert_eq!(run(flood.to_str().unwrap(), TIME_LIMIT), Err(LldpError::TooLarge));
    }
}
