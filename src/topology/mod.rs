//! The fabric's shape: switches (leaf or spine), the hosts attached to
//! each leaf by NIC, and the links between switches, with a count since a
//! leaf often has several links to one spine. Three inputs give the same
//! model: a small TOML (`toml_form`), `ibnetdiscover`'s text (`ibnet`) and
//! one `lldpctl -f json` file per host (`lldp`); docs/TOPOLOGY.md has their
//! rules. Only two-level trees are modelled: a switch with hosts is a leaf,
//! every other switch a spine, and every link joins a leaf to a spine.

mod build;
mod ibnet;
mod lldp;
mod toml_form;

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::io::Read;
use std::path::{Path, PathBuf};

use build::Builder;
pub use build::Problem;

/// Largest topology file read: ibnetdiscover of a few thousand switches
/// is a few MiB; `--topology /dev/zero` ends here instead of in swap.
pub const MAX_TEXT: u64 = 16 << 20;
/// Most switches a topology may name: above the largest two-level trees.
pub const MAX_SWITCHES: usize = 4096;

/// A switch's name as the input gives it (`leaf1`, a node description).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct SwitchName(pub String);

impl fmt::Display for SwitchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Hosts are attached to it.
    Leaf,
    /// Linked to leaves only.
    Spine,
}

/// One of a host's NICs and the leaf its cable goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    pub leaf: SwitchName,
    /// The NIC (`mlx5_0`, `eth0`) when the input names it (TOML does not).
    pub nic: Option<String>,
}

/// The links between one leaf and one spine.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Uplink {
    pub leaf: SwitchName,
    pub spine: SwitchName,
}

impl fmt::Display for Uplink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ↔ {}", self.leaf, self.spine)
    }
}

/// One way along an uplink's cables, leaf to spine or spine to leaf: a bad
/// optic or a port shaped one way slows only the traffic going that way.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Way {
    pub from: SwitchName,
    pub to: SwitchName,
}

impl Way {
    /// Both ways of an uplink, up first.
    pub fn both(uplink: &Uplink) -> [Way; 2] {
        let (leaf, spine) = (uplink.leaf.clone(), uplink.spine.clone());
        [Way { from: leaf.clone(), to: spine.clone() }, Way { from: spine, to: leaf }]
    }
}

impl fmt::Display for Way {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} → {}", self.from, self.to)
    }
}

/// A two-level tree of switches and the hosts on its leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub switches: BTreeMap<SwitchName, Level>,
    /// Each host's attachments, in the input's order.
    pub hosts: BTreeMap<String, Vec<Attachment>>,
    /// How many links join each leaf to each spine (at least one).
    pub uplinks: BTreeMap<Uplink, u32>,
}

/// What a path from one host to another crosses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Cables crossed: 2 through one leaf, 4 through a spine.
    pub hops: u32,
    /// The uplinks the path may take: both leaves' links to every spine
    /// that joins them (empty when the hosts share a leaf).
    pub uplinks: Vec<Uplink>,
}

/// Which input form a topology file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `[switch.NAME]` tables with `hosts` and `links`.
    Toml,
    /// A folder of `lldpctl -f json` files, one per host (HOST.json).
    Lldp,
    /// The text `ibnetdiscover` prints.
    Ibnetdiscover,
}

impl Format {
    /// The form a path is in: a folder is LLDP, `.toml` TOML, `.json` one
    /// host's LLDP, anything else ibnetdiscover's text.
    pub fn of(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            _ if path.is_dir() => Format::Lldp,
            Some("toml") => Format::Toml,
            Some("json") => Format::Lldp,
            _ => Format::Ibnetdiscover,
        }
    }
}

/// A topology problem, naming the file, the line and what would be valid.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("cannot read topology {path}: {cause}")]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("topology {path} is larger than {MAX_TEXT} bytes; one of {MAX_SWITCHES} switches is far smaller")]
    TooLarge { path: PathBuf },
    #[error("{path}:{line}: {problem}")]
    Line { path: PathBuf, line: usize, problem: Problem },
    #[error("{path}: places no host on a leaf switch; {}", build::VALID)]
    Empty { path: PathBuf },
    #[error(
        "host `{host}` of the hostfile is not placed by the topology {path}: attach it to a leaf \
         (TOML: add it to a leaf's `hosts`; ibnetdiscover: its HCA's node description begins with \
         the host name; LLDP: give {host}.json)"
    )]
    Unplaced { path: PathBuf, host: String },
}

/// Reads a topology file (or LLDP folder) in `format`, or the form its
/// path says when `None`.
pub fn read(path: &Path, format: Option<Format>) -> Result<Topology, TopologyError> {
    match format.unwrap_or_else(|| Format::of(path)) {
        Format::Toml => toml_form::parse(&read_text(path)?, path, Builder::default())?.finish(path),
        Format::Ibnetdiscover => ibnet::parse(&read_text(path)?, path)?.finish(path),
        Format::Lldp => lldp::read(path)?.finish(path),
    }
}

/// The topology of every host's `lldpctl -f json` text, as each worker
/// gathered it (`run --topology lldp`): the same model and errors as a
/// folder of those files without `links.toml`, each host named in them.
pub fn from_lldp_texts<'a>(
    texts: impl IntoIterator<Item = (&'a str, &'a str)>,
    source: &Path,
) -> Result<Topology, TopologyError> {
    lldp::from_hosts(texts, source)
}

/// A file's text, at most [`MAX_TEXT`] bytes.
fn read_text(path: &Path) -> Result<String, TopologyError> {
    let read = |cause| TopologyError::Read { path: path.to_path_buf(), cause };
    let mut text = String::new();
    std::fs::File::open(path).and_then(|f| f.take(MAX_TEXT + 1).read_to_string(&mut text)).map_err(read)?;
    if text.len() as u64 > MAX_TEXT {
        return Err(TopologyError::TooLarge { path: path.to_path_buf() });
    }
    Ok(text)
}

impl Topology {
    /// Every host of `hosts` the topology places, or the first one it does not.
    pub fn check_placed<'a>(&self, hosts: impl IntoIterator<Item = &'a str>, path: &Path) -> Result<(), TopologyError> {
        match hosts.into_iter().find(|h| !self.hosts.contains_key(*h)) {
            Some(host) => Err(TopologyError::Unplaced { path: path.to_path_buf(), host: host.to_string() }),
            None => Ok(()),
        }
    }

    fn leaves_of(&self, host: &str) -> Vec<&SwitchName> {
        self.hosts.get(host).into_iter().flatten().map(|a| &a.leaf).collect()
    }

    /// The path between two placed hosts; `None` when either is not
    /// placed or no spine joins their leaves.
    pub fn route(&self, from: &str, to: &str) -> Option<Route> {
        let (a, b) = (self.leaves_of(from), self.leaves_of(to));
        if a.is_empty() || b.is_empty() {
            return None;
        }
        if a.iter().any(|leaf| b.contains(leaf)) {
            return Some(Route { hops: 2, uplinks: Vec::new() });
        }
        let mut uplinks = Vec::new();
        for spine in self.spines() {
            let up = |leaf: &&SwitchName| Uplink { leaf: (*leaf).clone(), spine: spine.clone() };
            let (ups, downs): (Vec<Uplink>, Vec<Uplink>) = (
                a.iter().map(up).filter(|u| self.uplinks.contains_key(u)).collect(),
                b.iter().map(up).filter(|u| self.uplinks.contains_key(u)).collect(),
            );
            if !ups.is_empty() && !downs.is_empty() {
                uplinks.extend(ups.into_iter().chain(downs));
            }
        }
        uplinks.sort();
        uplinks.dedup();
        (!uplinks.is_empty()).then_some(Route { hops: 4, uplinks })
    }

    fn spines(&self) -> impl Iterator<Item = &SwitchName> {
        self.switches.iter().filter(|(_, l)| **l == Level::Spine).map(|(name, _)| name)
    }

    /// Hosts on a leaf, by name.
    fn hosts_on(&self, leaf: &SwitchName) -> Vec<&str> {
        let on = |a: &Vec<Attachment>| a.iter().any(|a| &a.leaf == leaf);
        self.hosts.iter().filter(|(_, a)| on(a)).map(|(h, _)| h.as_str()).collect()
    }

    /// The tree as `plan --topology` prints it: each spine, its leaves with
    /// their link count to it, each leaf's hosts; leaves without a spine last.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let leaf_line = |out: &mut String, leaf: &SwitchName, links: Option<u32>| {
            let hosts = self.hosts_on(leaf);
            // "×N" as report.html labels an uplink's cables.
            let links = links.map_or(String::new(), |n| format!(", ×{n} cable{}", if n == 1 { "" } else { "s" }));
            let _ = writeln!(out, "  leaf {leaf} ({} host(s){links}): {}", hosts.len(), hosts.join(", "));
        };
        for spine in self.spines() {
            let _ = writeln!(out, "spine {spine}");
            for (uplink, count) in self.uplinks.iter().filter(|(u, _)| &u.spine == spine) {
                leaf_line(&mut out, &uplink.leaf, Some(*count));
            }
        }
        let linked = |leaf: &SwitchName| self.uplinks.keys().any(|u| &u.leaf == leaf);
        let alone: Vec<&SwitchName> =
            self.switches.iter().filter(|(n, l)| **l == Level::Leaf && !linked(n)).map(|(n, _)| n).collect();
        if !alone.is_empty() {
            out.push_str("no spine\n");
            alone.into_iter().for_each(|leaf| leaf_line(&mut out, leaf, None));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Topology {
        let text = "[switch.l1]\nhosts = \"a[1-2]\"\n[switch.l2]\nhosts = \"b1\"\n[switch.l3]\nhosts = \"c1\"\n\
                    [switch.s1]\nlinks = [\"l1\", \"l1\", \"l2\"]\n[switch.s2]\nlinks = [\"l1\", \"l2\"]\n";
        let path = Path::new("t.toml");
        toml_form::parse(text, path, Builder::default()).unwrap().finish(path).unwrap()
    }

    fn up(leaf: &str, spine: &str) -> Uplink {
        Uplink { leaf: SwitchName(leaf.into()), spine: SwitchName(spine.into()) }
    }

    #[test]
    fn hosts_on_one_leaf_are_two_hops_and_cross_no_uplink() {
        assert_eq!(tree().route("a1", "a2"), Some(Route { hops: 2, uplinks: vec![] }));
    }

    #[test]
    fn hosts_on_two_leaves_cross_the_uplinks_of_every_spine_joining_them() {
        let route = tree().route("a1", "b1").unwrap();
        assert_eq!(route.hops, 4);
        assert_eq!(route.uplinks, [up("l1", "s1"), up("l1", "s2"), up("l2", "s1"), up("l2", "s2")]);
        assert_eq!(tree().uplinks[&up("l1", "s1")], 2, "a link listed twice is two links");
    }

    #[test]
    fn leaves_no_spine_joins_have_no_route() {
        assert_eq!(tree().route("a1", "c1"), None);
        assert_eq!(tree().route("a1", "nowhere"), None);
    }

    #[test]
    fn the_tree_lists_spines_leaves_uplinks_and_hosts() {
        assert_eq!(
            tree().render(),
            "spine s1\n  leaf l1 (2 host(s), ×2 cables): a1, a2\n  leaf l2 (1 host(s), ×1 cable): b1\n\
             spine s2\n  leaf l1 (2 host(s), ×1 cable): a1, a2\n  leaf l2 (1 host(s), ×1 cable): b1\n\
             no spine\n  leaf l3 (1 host(s)): c1\n"
        );
    }

    #[test]
    fn an_unplaced_host_is_named() {
        let e = tree().check_placed(["a1", "zz"], Path::new("t.toml")).unwrap_err();
        assert!(e.to_string().starts_with("host `zz` of the hostfile is not placed by the topology t.toml"), "{e}");
    }

    #[test]
    fn sizes_are_bounded() {
        let e = read(Path::new("/dev/zero"), Some(Format::Toml)).unwrap_err().to_string();
        assert!(e.starts_with("topology /dev/zero is larger than 16777216 bytes"), "{e}");
        let many: String = (0..=MAX_SWITCHES).map(|i| format!("[switch.s{i}]\n")).collect();
        let Err(e) = toml_form::parse(&many, Path::new("t.toml"), Builder::default()) else { panic!("accepted") };
        assert!(e.to_string().ends_with(": more than 4096 switches; a two-level tree has far fewer"), "{e}");
    }

    #[test]
    fn the_form_follows_the_path() {
        assert_eq!(Format::of(Path::new("f.toml")), Format::Toml);
        assert_eq!(Format::of(Path::new("n1.json")), Format::Lldp);
        assert_eq!(Format::of(Path::new("fabric.txt")), Format::Ibnetdiscover);
    }
}
