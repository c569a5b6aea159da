//! `--stage`: copy this binary to a per-user cache on hosts where it is
//! missing or differs, the way pdcp does, named by version and checksum so
//! different builds never overwrite each other.

use std::path::Path;

use openssh::{Session, Stdio};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

/// The local binary to stage: its bytes' checksum names the remote copy.
#[derive(Clone, Debug)]
pub struct LocalBinary {
    path: std::path::PathBuf,
    sha256: String,
}

impl LocalBinary {
    pub fn of(path: &Path) -> std::io::Result<LocalBinary> {
        let bytes = std::fs::read(path)?;
        let sha256 = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        Ok(LocalBinary { path: path.to_path_buf(), sha256 })
    }

    fn file_name(&self) -> String {
        format!("fabricbench-{}-{}", env!("CARGO_PKG_VERSION"), &self.sha256[..16])
    }
}

/// What staging did on one host.
pub struct Staged {
    pub remote_path: String,
    pub copied: bool,
}

/// Makes sure the host has the binary in `~/.cache/fabricbench/`; returns its path.
pub async fn stage(session: &Session, binary: &LocalBinary) -> Result<Staged, String> {
    let home = run(session, "printf %s \"$HOME\"").await?;
    let dir = format!("{home}/.cache/fabricbench");
    let remote_path = format!("{dir}/{}", binary.file_name());
    if remote_sha256(session, &remote_path).await.as_deref() == Some(binary.sha256.as_str()) {
        return Ok(Staged { remote_path, copied: false });
    }
    let bytes =
        tokio::fs::read(&binary.path).await.map_err(|e| format!("cannot read {}: {e}", binary.path.display()))?;
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
    let mut child = session
        .shell(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .await
        .map_err(|e| format!("cannot start the copy: {e}"))?;
    let mut stdin = child.stdin().take().ok_or("no stdin for the copy")?;
    stdin.write_all(&bytes).await.map_err(|e| format!("copy interrupted: {e}"))?;
    stdin.shutdown().await.map_err(|e| format!("copy interrupted: {e}"))?;
    drop(stdin);
    let out = child.wait_with_output().await.map_err(|e| format!("copy failed: {e}"))?;
    if !out.status.success() {
        return Err(format!("copy to {remote_path} failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    match remote_sha256(session, &remote_path).await {
        Some(sum) if sum == binary.sha256 => Ok(Staged { remote_path, copied: true }),
        other => Err(format!("{remote_path} has checksum {other:?} after the copy, expected {}", binary.sha256)),
    }
}

async fn remote_sha256(session: &Session, path: &str) -> Option<String> {
    let line = run(session, &format!("sha256sum {} 2>/dev/null", quote(path))).await.ok()?;
    line.split_whitespace().next().map(str::to_string)
}

async fn run(session: &Session, script: &str) -> Result<String, String> {
    let out = session.shell(script).output().await.map_err(|e| format!("`{script}` failed: {e}"))?;
    if !out.status.success() {
        return Err(format!("`{script}` failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
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

    #[test]
    fn name_carries_version_and_checksum() {
        let b = LocalBinary::of(Path::new("/bin/sh")).unwrap();
        assert!(b.file_name().starts_with(&format!("fabricbench-{}-", env!("CARGO_PKG_VERSION"))));
        assert_eq!(b.file_name().len(), "fabricbench-".len() + env!("CARGO_PKG_VERSION").len() + 1 + 16);
    }
}
