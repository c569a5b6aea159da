//! Embeds the commit the binary is built from, for run.json's `build`:
//! FABRICBENCH_GIT_COMMIT (`git rev-parse HEAD`, "unknown" outside a git
//! checkout or without git) and FABRICBENCH_GIT_DIRTY ("true" when tracked
//! files differ from that commit, "false", or "unknown").

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty());
    let dirty = match commit {
        Some(_) => git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| (!s.is_empty()).to_string()),
        None => None,
    };
    println!("cargo:rustc-env=FABRICBENCH_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
    println!("cargo:rustc-env=FABRICBENCH_GIT_DIRTY={}", dirty.as_deref().unwrap_or("unknown"));
    // Again when the commit moves (HEAD, its branch, the index) or the
    // sources change (which also rebuild the crate): a change elsewhere
    // alone (docs, tests) is marked at the next build of the sources.
    for path in ["build.rs", "Cargo.toml", "Cargo.lock", "src"] {
        println!("cargo:rerun-if-changed={path}");
    }
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for file in ["HEAD", "index", "packed-refs"].into_iter().chain(branch.as_deref()) {
        // A path that does not exist would rerun this on every build.
        if let Some(path) = git(&["rev-parse", "--git-path", file]).filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
