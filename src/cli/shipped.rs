//! What the release ships beside the binary (scenarios, gate profiles),
//! found by name where the repository, the tarball or a package put it:
//! `run acceptance/rdma-all-pairs` and `--gate ndr-ib` work from any folder
//! once fabricbench is installed.

use std::path::{Component, Path, PathBuf};

/// One kind of shipped file, each in its own folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kit {
    Scenarios,
    Profiles,
}

impl Kit {
    fn folder(self) -> &'static str {
        match self {
            Kit::Scenarios => "scenarios",
            Kit::Profiles => "profiles",
        }
    }
}

/// Where a kind is looked for, in order: the current folder's (a checkout),
/// beside the binary (the release tarball), and the packages' share folder
/// (`/usr/bin/../share/fabricbench`).
pub fn dirs(kit: Kit) -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(kit.folder())];
    if let Some(bin) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        dirs.push(bin.join(kit.folder()));
        dirs.push(bin.join("../share/fabricbench").join(kit.folder()));
    }
    dirs
}

/// [`dirs`], after the kind's folder in the tree `scenario` was shipped in
/// (`…/profiles` for `…/scenarios/acceptance/tcp-all-pairs.toml`), so a
/// shipped scenario finds its profile from any folder.
pub fn dirs_beside(kit: Kit, scenario: &Path) -> Vec<PathBuf> {
    let tree = scenario.ancestors().skip(1).take(2).find(|a| a.file_name().is_some_and(|n| n == "scenarios"));
    let mut dirs: Vec<PathBuf> = tree.and_then(Path::parent).map(|root| root.join(kit.folder())).into_iter().collect();
    dirs.extend(self::dirs(kit));
    dirs
}

/// The scenario argument: a file that exists as given, else a shipped
/// scenario's name (`fan-in`, `acceptance/rdma-all-pairs`, with or without
/// `.toml`). A name without `.toml` that nothing matches is refused by clap
/// with what is shipped; a missing `.toml` path is left for the reader to
/// name, as any missing file.
pub fn scenario(given: &str) -> Result<PathBuf, String> {
    find(given, &dirs(Kit::Scenarios))
}

fn find(given: &str, dirs: &[PathBuf]) -> Result<PathBuf, String> {
    let path = Path::new(given);
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    // A name stays inside the kit's folders.
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
    let file = if given.ends_with(".toml") { given.to_string() } else { format!("{given}.toml") };
    match dirs.iter().map(|d| d.join(&file)).find(|p| plain && p.is_file()) {
        Some(found) => Ok(found),
        None if given.ends_with(".toml") => Ok(path.to_path_buf()),
        None => {
            let searched = dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ");
            Err(format!("no such file, and no shipped scenario of that name in {searched}; shipped: {}", names(dirs)))
        }
    }
}

/// Every scenario name in `dirs` (subfolders as `acceptance/…`), sorted.
fn names(dirs: &[PathBuf]) -> String {
    let mut names: Vec<String> = dirs.iter().flat_map(|d| tomls(d, "")).collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        "none found".into()
    } else {
        names.join(", ")
    }
}

/// The `.toml` stems under `dir`, one level of subfolders deep.
fn tomls(dir: &Path, prefix: &str) -> Vec<String> {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries
        .flat_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            match name.strip_suffix(".toml") {
                Some(stem) => vec![format!("{prefix}{stem}")],
                None if prefix.is_empty() && e.path().is_dir() => tomls(&e.path(), &format!("{name}/")),
                None => Vec::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> Vec<PathBuf> {
        vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")]
    }

    #[test]
    fn a_name_finds_the_shipped_file_with_or_without_toml() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        assert_eq!(find("fan-in", &shipped()).unwrap(), root.join("fan-in.toml"));
        assert_eq!(
            find("acceptance/tcp-all-pairs.toml", &shipped()).unwrap(),
            root.join("acceptance/tcp-all-pairs.toml")
        );
    }

    #[test]
    fn an_existing_path_is_taken_as_given() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/ring.toml");
        assert_eq!(find(path, &[]).unwrap(), PathBuf::from(path));
    }

    #[test]
    fn an_unknown_name_lists_the_shipped_ones_and_where_it_looked() {
        let e = find("acceptance/no-such", &shipped()).unwrap_err();
        assert!(e.contains("no shipped scenario of that name in"), "{e}");
        assert!(e.contains("acceptance/rdma-all-pairs, acceptance/rdma-incast-sweep"), "{e}");
        assert!(e.contains(", fan-in,"), "{e}");
    }

    #[test]
    fn a_missing_toml_path_is_left_for_the_reader_to_name() {
        assert_eq!(find("mine/clusterkit.toml", &shipped()).unwrap(), PathBuf::from("mine/clusterkit.toml"));
    }

    #[test]
    fn a_shipped_scenarios_profiles_are_those_of_its_tree_first() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let kit = root.join("scenarios/acceptance/tcp-all-pairs.toml");
        assert_eq!(dirs_beside(Kit::Profiles, &kit)[0], root.join("profiles"));
        assert_eq!(dirs_beside(Kit::Profiles, &root.join("scenarios/fan-in.toml"))[0], root.join("profiles"));
        assert_eq!(dirs_beside(Kit::Profiles, Path::new("/tmp/mine.toml")), dirs(Kit::Profiles), "not shipped");
    }

    #[test]
    fn a_name_does_not_leave_the_kit() {
        let inside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/acceptance");
        let e = find("../fan-in", &[inside]).unwrap_err();
        assert!(e.starts_with("no such file"), "{e}");
    }
}
