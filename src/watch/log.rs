//! An append-only file of JSON lines that rotates at a size: `events.jsonl`
//! becomes `events.jsonl.1` (and `.1` `.2`, up to [`KEPT`] old files; the
//! oldest goes), so a watch of months stays within (KEPT + 1) × the cap.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Rotated files kept beside the one written.
pub const KEPT: usize = 3;

#[derive(Debug, thiserror::Error)]
#[error("{path}: {cause}")]
pub struct LogError {
    path: String,
    cause: std::io::Error,
}

pub struct Log {
    path: PathBuf,
    file: File,
    /// Bytes in `file`.
    written: u64,
    /// Rotate before a line would take `written` past this.
    cap: u64,
    /// Each line reaches the disk before `append` returns (events), or only
    /// the kernel (the windows' lines, many more).
    durable: bool,
}

impl Log {
    /// Opens `path` to append to it (it may exist: a watch started again
    /// goes on with its files).
    pub fn open(path: &Path, cap: u64, durable: bool) -> Result<Log, LogError> {
        let fail = |cause| LogError { path: path.display().to_string(), cause };
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(fail)?;
        let written = file.metadata().map_err(fail)?.len();
        Ok(Log { path: path.to_path_buf(), file, written, cap, durable })
    }

    /// Writes `value` as one line, rotating first when it would not fit.
    pub fn append<T: Serialize>(&mut self, value: &T) -> Result<(), LogError> {
        let mut line = serde_json::to_vec(value).map_err(|e| self.fail(e.into()))?;
        line.push(b'\n');
        if self.written > 0 && self.written + line.len() as u64 > self.cap {
            self.rotate()?;
        }
        self.file.write_all(&line).map_err(|e| self.fail(e))?;
        self.written += line.len() as u64;
        if self.durable {
            self.file.sync_data().map_err(|e| self.fail(e))?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> Result<(), LogError> {
        let old = |k: usize| PathBuf::from(format!("{}.{k}", self.path.display()));
        for k in (1..KEPT).rev() {
            match std::fs::rename(old(k), old(k + 1)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(self.fail(e)),
                _ => {}
            }
        }
        std::fs::rename(&self.path, old(1)).map_err(|e| self.fail(e))?;
        *self = Log::open(&self.path, self.cap, self.durable)?;
        Ok(())
    }

    fn fail(&self, cause: std::io::Error) -> LogError {
        LogError { path: self.path.display().to_string(), cause }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_rotate_at_the_cap_and_the_oldest_file_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut log = Log::open(&path, 100, true).unwrap();
        // 20 lines of 28 bytes: 3 to a file, 7 files made, the last 4 kept.
        for n in 0..20 {
            log.append(&serde_json::json!({ "event": "appeared", "n": 10 + n })).unwrap();
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let lines = |p: &Path| read(p).lines().map(|l| l[l.len() - 3..l.len() - 1].to_string()).collect::<Vec<_>>();
        assert_eq!(lines(&path), ["28", "29"]);
        assert_eq!(lines(&dir.path().join("events.jsonl.1")), ["25", "26", "27"]);
        assert_eq!(lines(&dir.path().join("events.jsonl.3")), ["19", "20", "21"]);
        assert!(!dir.path().join("events.jsonl.4").exists(), "three old files kept");
        for file in std::fs::read_dir(dir.path()).unwrap() {
            assert!(file.unwrap().metadata().unwrap().len() <= 100);
        }
        // Opened again, it goes on where it was.
        let mut again = Log::open(&path, 100, false).unwrap();
        again.append(&serde_json::json!({ "event": "appeared", "n": 99 })).unwrap();
        assert_eq!(lines(&path), ["28", "29", "99"]);
    }
}
