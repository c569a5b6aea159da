//! `--stage`: copy this binary to a per-user cache on hosts where it is
//! missing or differs, the way pdcp does, named by version and checksum so
//! different builds never overwrite each other. Each host gets the binary
//! of its own architecture (`launch::arch`), asked in the same session.

use openssh::{Session, Stdio};
use tokio::io::AsyncWriteExt;

use crate::launch::arch::{Binaries, DistError};

/// Why a binary could not be staged on a host.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Dist(#[from] DistError),
    #[error("`{script}` failed on the host: {reason}")]
    Remote { script: String, reason: String },
    #[error("copy to {path} failed: {reason}")]
    Copy { path: String, reason: String },
    #[error("{path} has checksum {found:?} after the copy, expected {expected}")]
    Checksum { path: String, found: Option<String>, expected: String },
}

/// Staged binaries left unused this many days are removed from a host's
/// cache when it is next staged to: every build staged would otherwise stay
/// in each node's home for good (a debug build is 170 MB).
const STALE_DAYS: u32 = 7;

/// What staging did on one host.
pub struct Staged {
    pub remote_path: String,
    pub copied: bool,
}

/// Makes sure `host` has the binary of its architecture in
/// `~/.cache/fabricbench/`; returns its path.
pub async fn stage(session: &Session, host: &str, binaries: &Binaries) -> Result<Staged, StageError> {
    // One round trip: the architecture picks the binary, the home its place.
    let answer = run(session, "uname -m && printf %s \"$HOME\"").await?;
    let (machine, home) = answer.split_once('\n').unwrap_or((answer.as_str(), ""));
    let binary = binaries.for_host(host, machine)?;
    let dir = format!("{home}/.cache/fabricbench");
    let remote_path = format!("{dir}/{}", binary.file_name());
    // One round trip: the cache pruned, then this build's checksum if there.
    let check = format!("{}; {}", prune_script(&dir, &binary.file_name()), sha256_script(&remote_path));
    if first_word(run(session, &check).await).as_deref() == Some(binary.sha256()) {
        return Ok(Staged { remote_path, copied: false });
    }
    let bytes = tokio::fs::read(binary.path())
        .await
        .map_err(|cause| DistError::ReadLocal { path: binary.path().to_path_buf(), cause })?;
    // Write to a temporary name and rename, so a concurrent stage or a
    // running worker never sees half a binary. The name comes from mktemp,
    // not the shell's pid: hosts that share a home directory (NFS, or the
    // test bed's namespaces) have pids of their own, and two of them
    // copying as pid 214 renamed each other's file away.
    let (qdir, qpath) = (quote(&dir), quote(&remote_path));
    let script = format!(
        "mkdir -p {qdir} && t=$(mktemp {qpath}.tmp.XXXXXXXX) && \
         {{ cat > \"$t\" && chmod 755 \"$t\" && mv -f \"$t\" {qpath} || {{ rm -f \"$t\"; false; }}; }}"
    );
    let copy_failed = |reason: String| StageError::Copy { path: remote_path.clone(), reason };
    let mut child = session
        .shell(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .await
        .map_err(|e| copy_failed(format!("cannot start the copy: {e}")))?;
    let mut stdin = child.stdin().take().ok_or_else(|| copy_failed("no stdin for the copy".into()))?;
    stdin.write_all(&bytes).await.map_err(|e| copy_failed(format!("interrupted: {e}")))?;
    stdin.shutdown().await.map_err(|e| copy_failed(format!("interrupted: {e}")))?;
    drop(stdin);
    let out = child.wait_with_output().await.map_err(|e| copy_failed(e.to_string()))?;
    if !out.status.success() {
        return Err(copy_failed(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    match remote_sha256(session, &remote_path).await {
        Some(sum) if sum == binary.sha256() => Ok(Staged { remote_path, copied: true }),
        found => Err(StageError::Checksum { path: remote_path, found, expected: binary.sha256().to_string() }),
    }
}

/// Marks this run's binary as used (if there) and removes the staged
/// binaries and interrupted copies left unused for over [`STALE_DAYS`].
/// Best effort, in a subshell: a cache that cannot be pruned is no reason
/// to refuse the run, and a running worker keeps a removed binary open.
fn prune_script(dir: &str, keep: &str) -> String {
    let (qdir, qkeep) = (quote(dir), quote(keep));
    format!(
        "( cd {qdir} && touch -c {qkeep} && find . -maxdepth 1 -type f -name 'fabricbench-*' \
         ! -name {qkeep} -mtime +{STALE_DAYS} -exec rm -f {{}} + ) 2>/dev/null"
    )
}

fn sha256_script(path: &str) -> String {
    format!("sha256sum {} 2>/dev/null", quote(path))
}

fn first_word(output: Result<String, StageError>) -> Option<String> {
    output.ok()?.split_whitespace().next().map(str::to_string)
}

async fn remote_sha256(session: &Session, path: &str) -> Option<String> {
    first_word(run(session, &sha256_script(path)).await)
}

async fn run(session: &Session, script: &str) -> Result<String, StageError> {
    let failed = |reason: String| StageError::Remote { script: script.to_string(), reason };
    let out = session.shell(script).output().await.map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Single-quotes a word for the remote POSIX shell.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(quote("/home/o'neil/x"), "'/home/o'\\''neil/x'");
    }
}
