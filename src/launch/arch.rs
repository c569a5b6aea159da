//! Which fabricbench binary a host runs, by its `uname -m`: the release
//! binaries `scripts/dist` builds are named
//! `fabricbench-<version>-<arch>-linux-gnu`, one per architecture, so a
//! hostfile of x86-64 and aarch64 hosts runs from one launcher.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// At most this many entries of a dist folder are looked at: it holds a
/// handful of binaries and archives, not a tree to walk.
const MAX_DIST_ENTRIES: usize = 4096;
/// A binary to stage is read whole and copied to every host: a file past
/// this is not a fabricbench binary (a release one is about 50 MB).
const MAX_BINARY_BYTES: u64 = 1 << 30;

/// An architecture fabricbench is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    pub const ALL: [Arch; 2] = [Arch::X86_64, Arch::Aarch64];

    /// The architecture `uname -m` names; `None` for one fabricbench is not built for.
    pub fn from_uname(machine: &str) -> Option<Arch> {
        match machine.trim() {
            "x86_64" | "amd64" => Some(Arch::X86_64),
            "aarch64" | "arm64" => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The architecture of this running binary.
    pub fn this() -> Option<Arch> {
        Arch::from_uname(std::env::consts::ARCH)
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// The release binary's file name for this architecture.
    pub fn dist_name(self) -> String {
        format!("fabricbench-{}-{}-linux-gnu", env!("CARGO_PKG_VERSION"), self.name())
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The local binary to stage: its bytes' checksum names the remote copy.
#[derive(Clone, Debug)]
pub struct LocalBinary {
    path: PathBuf,
    sha256: String,
}

impl LocalBinary {
    pub fn of(path: &Path) -> Result<LocalBinary, DistError> {
        let size =
            std::fs::metadata(path).map_err(|cause| DistError::ReadLocal { path: path.to_path_buf(), cause })?.len();
        if size > MAX_BINARY_BYTES {
            return Err(DistError::TooLarge { path: path.to_path_buf(), size, limit: MAX_BINARY_BYTES });
        }
        let bytes = std::fs::read(path).map_err(|cause| DistError::ReadLocal { path: path.to_path_buf(), cause })?;
        let sha256 = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        Ok(LocalBinary { path: path.to_path_buf(), sha256 })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The remote copy's name: version and checksum, so builds never collide.
    pub fn file_name(&self) -> String {
        format!("fabricbench-{}-{}", env!("CARGO_PKG_VERSION"), &self.sha256[..16])
    }
}

/// Why the binaries to stage cannot be had, or none fits a host.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    // `cause`, not `source`, here and below: the message carries it, and a
    // chained source would print it twice.
    #[error("cannot read {}: {cause}", path.display())]
    ReadLocal { path: PathBuf, cause: std::io::Error },
    #[error("{} is {size} bytes, more than the {limit} a fabricbench binary may be", path.display())]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
    #[error("cannot read the dist folder {}: {cause}", dir.display())]
    ReadDist { dir: PathBuf, cause: std::io::Error },
    #[error("the dist folder {} holds no fabricbench binary (expected {expected}); build them with scripts/dist", dir.display())]
    EmptyDist { dir: PathBuf, expected: String },
    #[error(
        "{host} is {machine} (uname -m), and there is no fabricbench binary for it (have: {have}); \
         build {} with scripts/dist and pass its folder with --dist, or leave {host} out",
        Arch::from_uname(machine).map_or_else(|| format!("fabricbench for {machine}"), Arch::dist_name)
    )]
    NoBinary { host: String, machine: String, have: String },
}

/// The binaries to stage, one per architecture.
#[derive(Clone, Debug, Default)]
pub struct Binaries {
    by_arch: BTreeMap<Arch, LocalBinary>,
}

impl Binaries {
    /// The binaries of a dist folder (`--dist DIR`): only those it holds.
    pub fn from_dist(dir: &Path) -> Result<Binaries, DistError> {
        let found = dist_files(dir)?;
        if found.is_empty() {
            return Err(DistError::EmptyDist { dir: dir.to_path_buf(), expected: expected_names() });
        }
        Binaries::read(found)
    }

    /// The running binary for its own architecture, and the dist binaries
    /// beside it (a folder where `scripts/dist` put them, or an unpacked
    /// release) for the others.
    pub fn beside(exe: &Path) -> Result<Binaries, DistError> {
        let mut found = match exe.parent() {
            Some(dir) => dist_files(dir)?,
            None => BTreeMap::new(),
        };
        if let Some(arch) = Arch::this() {
            found.insert(arch, exe.to_path_buf());
        }
        Binaries::read(found)
    }

    fn read(paths: BTreeMap<Arch, PathBuf>) -> Result<Binaries, DistError> {
        let mut by_arch = BTreeMap::new();
        for (arch, path) in paths {
            by_arch.insert(arch, LocalBinary::of(&path)?);
        }
        Ok(Binaries { by_arch })
    }

    /// The binary for a host whose `uname -m` answered `machine`; the
    /// error names the host, its architecture and what to build.
    pub fn for_host(&self, host: &str, machine: &str) -> Result<&LocalBinary, DistError> {
        let missing = || DistError::NoBinary {
            host: host.to_string(),
            machine: machine.trim().to_string(),
            have: self.by_arch.keys().map(|a| a.name()).collect::<Vec<_>>().join(", "),
        };
        let arch = Arch::from_uname(machine).ok_or_else(missing)?;
        self.by_arch.get(&arch).ok_or_else(missing)
    }
}

fn expected_names() -> String {
    Arch::ALL.iter().map(|a| a.dist_name()).collect::<Vec<_>>().join(" or ")
}

/// The dist binaries a folder holds, by architecture.
fn dist_files(dir: &Path) -> Result<BTreeMap<Arch, PathBuf>, DistError> {
    let unreadable = |cause| DistError::ReadDist { dir: dir.to_path_buf(), cause };
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)?.take(MAX_DIST_ENTRIES) {
        let name = entry.map_err(unreadable)?.file_name();
        if let Some(arch) = Arch::ALL.into_iter().find(|a| name.to_str() == Some(a.dist_name().as_str())) {
            found.insert(arch, dir.join(name));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binaries(archs: &[Arch]) -> Binaries {
        let sh = LocalBinary::of(Path::new("/bin/sh")).unwrap();
        Binaries { by_arch: archs.iter().map(|a| (*a, sh.clone())).collect() }
    }

    /// `uname -m` as recorded on an x86-64 server, an arm64 server, a
    /// 32-bit Raspberry Pi and a POWER9 host.
    #[test]
    fn the_binary_follows_uname() {
        assert_eq!(Arch::from_uname("x86_64\n"), Some(Arch::X86_64));
        assert_eq!(Arch::from_uname("aarch64\n"), Some(Arch::Aarch64));
        assert_eq!(Arch::from_uname("armv7l\n"), None);
        assert_eq!(Arch::from_uname("ppc64le\n"), None);
        let both = binaries(&Arch::ALL);
        assert!(both.for_host("n1", "x86_64\n").is_ok());
        assert!(both.for_host("n2", "aarch64\n").is_ok());
        for machine in ["armv7l\n", "ppc64le\n"] {
            let e = both.for_host("pi4", machine).unwrap_err().to_string();
            assert!(e.contains("pi4") && e.contains(machine.trim()) && e.contains("scripts/dist"), "{e}");
        }
    }

    #[test]
    fn a_missing_architecture_names_host_arch_and_what_there_is() {
        let e = binaries(&[Arch::X86_64]).for_host("arm01", "aarch64").unwrap_err().to_string();
        assert!(e.contains("arm01 is aarch64") && e.contains("have: x86_64"), "{e}");
        assert!(e.contains(&Arch::Aarch64.dist_name()), "{e}");
    }

    #[test]
    fn name_carries_version_and_checksum() {
        let b = LocalBinary::of(Path::new("/bin/sh")).unwrap();
        assert!(b.file_name().starts_with(&format!("fabricbench-{}-", env!("CARGO_PKG_VERSION"))));
        assert_eq!(b.file_name().len(), "fabricbench-".len() + env!("CARGO_PKG_VERSION").len() + 1 + 16);
    }

    #[test]
    fn a_dist_folder_is_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(Binaries::from_dist(dir.path()), Err(DistError::EmptyDist { .. })));
        std::fs::write(dir.path().join(Arch::Aarch64.dist_name()), b"arm").unwrap();
        std::fs::write(dir.path().join("fabricbench-0.0.0-aarch64-linux-gnu"), b"old").unwrap();
        let found = Binaries::from_dist(dir.path()).unwrap();
        assert_eq!(found.by_arch.keys().copied().collect::<Vec<_>>(), [Arch::Aarch64]);
        assert!(found.for_host("n1", "x86_64").is_err());
        let missing = Binaries::from_dist(&dir.path().join("nope")).unwrap_err();
        // As a failed command prints it, with the chain of sources: the OS's reason once.
        let printed = format!("{:#}", anyhow::Error::from(missing));
        assert!(printed.contains("nope") && printed.matches("os error 2").count() == 1, "{printed}");
    }

    #[test]
    fn the_running_binary_serves_its_own_architecture() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fabricbench");
        std::fs::write(&exe, b"this").unwrap();
        std::fs::write(dir.path().join(Arch::Aarch64.dist_name()), b"arm").unwrap();
        let found = Binaries::beside(&exe).unwrap();
        assert!(found.for_host("n2", "aarch64").is_ok());
        assert_eq!(found.for_host("n1", std::env::consts::ARCH).unwrap().path(), exe);
    }
}
