//! Where sysfs is: /sys, or the folder FABRICBENCH_SYSFS_ROOT names — a
//! recorded device tree (tests/fixtures/hosts/NAME/sys) standing in for
//! hardware this machine lacks. Every reader of RDMA device, port, GID,
//! counter and NUMA files takes its paths from here, so one variable points
//! them all at the same tree; [`text`] and [`entries`] read its files and
//! folders the one way every reader wants (trimmed, nothing when missing).

pub mod pcie;

use std::path::{Path, PathBuf};

/// The variable that moves the sysfs root.
pub const ROOT_ENV: &str = "FABRICBENCH_SYSFS_ROOT";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{ROOT_ENV}={given}: {why} (it must name a folder laid out like /sys, e.g. tests/fixtures/hosts/mlx5-ib/sys)")]
pub struct RootError {
    pub given: String,
    pub why: &'static str,
}

/// The sysfs root: /sys unless FABRICBENCH_SYSFS_ROOT is set (empty counts
/// as unset); an error when it names no folder, rather than reading nothing.
pub fn root() -> Result<PathBuf, RootError> {
    root_from(std::env::var_os(ROOT_ENV).map(PathBuf::from))
}

fn root_from(given: Option<PathBuf>) -> Result<PathBuf, RootError> {
    let Some(dir) = given.filter(|d| !d.as_os_str().is_empty()) else { return Ok(PathBuf::from("/sys")) };
    let shown = dir.display().to_string();
    if !dir.exists() {
        return Err(RootError { given: shown, why: "no such folder" });
    }
    if !dir.is_dir() {
        return Err(RootError { given: shown, why: "not a folder" });
    }
    Ok(dir)
}

/// `class/infiniband` under a sysfs root.
pub fn infiniband(root: &Path) -> PathBuf {
    root.join("class/infiniband")
}

/// [`infiniband`] under [`root`], or under /sys when the root is invalid
/// (for readers that cannot fail: the probe reports the error).
pub fn infiniband_or_default() -> PathBuf {
    infiniband(&root().unwrap_or_else(|_| PathBuf::from("/sys")))
}

/// A sysfs attribute, trimmed; `None` when unreadable or empty.
pub fn text(path: &Path) -> Option<String> {
    let t = std::fs::read_to_string(path).ok()?;
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The names in a folder; none when it is missing.
pub fn entries(dir: &Path) -> Vec<String> {
    let Ok(list) = std::fs::read_dir(dir) else { return Vec::new() };
    list.flatten().filter_map(|e| e.file_name().into_string().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_or_empty_is_sys() {
        assert_eq!(root_from(None).unwrap(), Path::new("/sys"));
        assert_eq!(root_from(Some(PathBuf::new())).unwrap(), Path::new("/sys"));
        assert_eq!(infiniband(Path::new("/sys")), Path::new("/sys/class/infiniband"));
    }

    #[test]
    fn a_missing_or_plain_file_root_is_a_clear_error() {
        let e = root_from(Some("/no/such/tree".into())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "FABRICBENCH_SYSFS_ROOT=/no/such/tree: no such folder (it must name a folder laid out like /sys, \
             e.g. tests/fixtures/hosts/mlx5-ib/sys)"
        );
        let file = root_from(Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))).unwrap_err();
        assert_eq!(file.why, "not a folder");
        let tree = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/mlx5-ib/sys");
        assert_eq!(root_from(Some(tree.clone())).unwrap(), tree);
    }
}
