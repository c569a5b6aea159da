//! The fabric's shape: switches (leaf or spine), the hosts attached to
//! each leaf by NIC, and the links between switches, with a count since a
//! leaf often has several links to one spine. Three inputs give the same
//! model: a small TOML (`toml_form`), `ibnetdiscover`'s text (`ibnet`) and
//! one `lldpctl -f json` file per host (`lldp`); docs/TOPOLOGY.md has their
//! rules. Only two-level trees are modelled: a switch with hosts is a leaf,
//! every other switch a spine, and every link joins a leaf to a spine.

mod build;
mod by_guid;
mod guid;
mod ibnet;
mod lldp;
mod toml_form;

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::io::Read;
use std::path::{Path, PathBuf};

use build::Builder;
pub use build::Problem;
pub use by_guid::{GuidClash, ReportedHca};
pub use guid::{BadGuid, NodeGuid};

use crate::hostfile::Host;

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
    /// The NIC (`mlx5_0`, `eth0`) when the input names it (TOML's `nics`,
    /// ibnetdiscover, LLDP; not TOML's `hosts`).
    pub nic: Option<String>,
    /// The leaf's port its cable goes to, when the input says (ibnetdiscover).
    pub port: Option<u32>,
    /// The HCA's node GUID, when the input says (ibnetdiscover): what
    /// places it where its node description names no host
    /// ([`Topology::place_by_guid`]).
    pub guid: Option<NodeGuid>,
}

impl Attachment {
    /// A NIC (or a whole host, `nic` `None`) cabled to `leaf`, port and GUID unknown.
    pub fn on(leaf: &str, nic: Option<&str>) -> Attachment {
        Attachment { leaf: SwitchName(leaf.to_string()), nic: nic.map(str::to_string), port: None, guid: None }
    }

    /// Where its cable goes, as `plan --topology` and suspects say it:
    /// `rail3 port 17`, or the leaf alone.
    pub fn cable_end(&self) -> String {
        match self.port {
            Some(port) => format!("{} port {port}", self.leaf),
            None => self.leaf.to_string(),
        }
    }
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

/// One cable of an uplink, by the ports at its two ends, where the input
/// names them (ibnetdiscover): what an operator replaces or reads the
/// counters of (`perfquery`), where the uplink is several cables.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct UplinkCable {
    #[serde(flatten)]
    pub uplink: Uplink,
    pub leaf_port: u32,
    pub spine_port: u32,
}

impl fmt::Display for UplinkCable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Uplink { leaf, spine } = &self.uplink;
        write!(f, "{leaf} port {} ↔ {spine} port {}", self.leaf_port, self.spine_port)
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
    /// Each uplink cable whose ports the input names, in order.
    pub cables: Vec<UplinkCable>,
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
         the host name, or its HCA's node GUID is that of a device the host reports; LLDP: give {host}.json)"
    )]
    Unplaced { path: PathBuf, host: String },
    #[error(
        "NIC `{nic}` of host `{host}` (its rank {rank}'s `devices=`) is not placed by the topology {path}, \
         which places {placed} of that host: name the NICs as the hostfile's `devices=` does (TOML: \
         `nics = \"{host}:{nic}\"` on its leaf; ibnetdiscover: the HCA's node description `{host} {nic}`)"
    )]
    NicUnplaced { path: PathBuf, host: String, nic: String, rank: usize, placed: String },
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

/// The NIC a rank uses alone, by which the topology places it: its one
/// device of `devices=` where its host has several named NICs (a rail
/// fabric); `None` where the host's attachments place it as well.
fn own_nic<'h>(devices: &'h [String], attached: &[Attachment]) -> Option<&'h str> {
    let named = attached.iter().filter(|a| a.nic.is_some()).count();
    match devices {
        [device] if named >= 2 => Some(device),
        _ => None,
    }
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
    /// Whether the topology places every rank of `ranks` (each rank's host,
    /// in rank order): its host, and where the host has several named NICs
    /// and the rank one device of its own, that NIC; the first it does not
    /// place is the error.
    pub fn check_placed(&self, ranks: &[Host], path: &Path) -> Result<(), TopologyError> {
        for (rank, host) in ranks.iter().enumerate() {
            let Some(attached) = self.hosts.get(&host.name) else {
                return Err(TopologyError::Unplaced { path: path.to_path_buf(), host: host.name.clone() });
            };
            let own = own_nic(&host.devices, attached);
            if let (Some(nic), None) = (own, self.attachment(&host.name, own)) {
                let placed: Vec<&str> = attached.iter().filter_map(|a| a.nic.as_deref()).collect();
                let (host, nic, placed) = (host.name.clone(), nic.to_string(), placed.join(", "));
                return Err(TopologyError::NicUnplaced { path: path.to_path_buf(), host, nic, rank, placed });
            }
        }
        Ok(())
    }

    /// A host's attachment of `nic`; `None` for no NIC or one not placed.
    fn attachment(&self, host: &str, nic: Option<&str>) -> Option<&Attachment> {
        let nic = nic?;
        self.hosts.get(host)?.iter().find(|a| a.nic.as_deref() == Some(nic))
    }

    /// Where a rank of `host` using `devices` is cabled: its own NIC's
    /// attachment (see [`own_nic`]),
    /// else every attachment of its host (a rank using all of them, or a
    /// topology that names no NIC).
    pub fn attachments_of(&self, host: &str, devices: &[String]) -> Vec<&Attachment> {
        let all = self.hosts.get(host).map(Vec::as_slice).unwrap_or_default();
        match self.attachment(host, own_nic(devices, all)) {
            Some(own) => vec![own],
            None => all.iter().collect(),
        }
    }

    /// The path between two placed hosts, over all their NICs; `None` when
    /// either is not placed or no spine joins their leaves.
    pub fn route(&self, from: &str, to: &str) -> Option<Route> {
        let attached = |host| self.hosts.get(host).into_iter().flatten().collect::<Vec<_>>();
        self.route_between(&attached(from), &attached(to))
    }

    /// The path between two sets of attachments (two NICs, or all of two
    /// hosts'); `None` when either is empty or no spine joins their leaves.
    pub fn route_between(&self, from: &[&Attachment], to: &[&Attachment]) -> Option<Route> {
        let a: Vec<&SwitchName> = from.iter().map(|a| &a.leaf).collect();
        let b: Vec<&SwitchName> = to.iter().map(|a| &a.leaf).collect();
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

    /// The cables of `uplink` whose ports the input names.
    pub fn cables_of<'t>(&'t self, uplink: &'t Uplink) -> impl Iterator<Item = &'t UplinkCable> {
        self.cables.iter().filter(move |c| &c.uplink == uplink)
    }

    fn spines(&self) -> impl Iterator<Item = &SwitchName> {
        self.switches.iter().filter(|(_, l)| **l == Level::Spine).map(|(name, _)| name)
    }

    /// Hosts on a leaf, by name, each with the NICs (and ports) cabled to
    /// it where the input names them: `node01`, `node01:mlx5_3 port 1`.
    fn cabled_to(&self, leaf: &SwitchName) -> (usize, Vec<String>) {
        let (mut hosts, mut names) = (0, Vec::new());
        for (host, attached) in &self.hosts {
            let on: Vec<&Attachment> = attached.iter().filter(|a| &a.leaf == leaf).collect();
            hosts += usize::from(!on.is_empty());
            if on.iter().all(|a| a.nic.is_none()) {
                names.extend(on.first().map(|_| host.clone()));
                continue;
            }
            for a in on {
                let port = a.port.map_or(String::new(), |p| format!(" port {p}"));
                names.push(format!("{host}:{}{port}", a.nic.as_deref().unwrap_or("?")));
            }
        }
        (hosts, names)
    }

    /// The tree as `plan --topology` prints it: each spine, its leaves with
    /// their link count to it, each leaf's hosts; leaves without a spine last.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let leaf_line = |out: &mut String, leaf: &SwitchName, links: Option<u32>| {
            let (hosts, names) = self.cabled_to(leaf);
            // "×N" as report.html labels an uplink's cables.
            let links = links.map_or(String::new(), |n| format!(", ×{n} cable{}", if n == 1 { "" } else { "s" }));
            let _ = writeln!(out, "  leaf {leaf} ({hosts} host(s){links}): {}", names.join(", "));
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

    fn ranks(hostfile: &str) -> Vec<Host> {
        crate::hostfile::parse(hostfile, Path::new("hosts")).unwrap()
    }

    #[test]
    fn an_unplaced_host_is_named() {
        let e = tree().check_placed(&ranks("a1\nzz\n"), Path::new("t.toml")).unwrap_err();
        assert!(e.to_string().starts_with("host `zz` of the hostfile is not placed by the topology t.toml"), "{e}");
    }

    /// Two hosts of two NICs, NIC k on rail leaf k, both rails on one spine.
    fn rails() -> Topology {
        let text = "[switch.rail0]\nnics = \"n[1-2]:mlx5_0\"\n[switch.rail1]\nnics = [\"n1:mlx5_1\", \"n2:mlx5_1\"]\n\
                    [switch.spine]\nlinks = [\"rail0\", \"rail1\"]\n";
        let path = Path::new("r.toml");
        toml_form::parse(text, path, Builder::default()).unwrap().finish(path).unwrap()
    }

    #[test]
    fn a_rank_with_a_nic_of_its_own_is_placed_by_it() {
        let topology = rails();
        let four = ranks("n1 devices=mlx5_0,mlx5_1\nn2 devices=mlx5_0,mlx5_1\n");
        let [n1_0, n1_1, n2_0, n2_1] = [0, 1, 2, 3].map(|r| topology.attachments_of(&four[r].name, &four[r].devices));
        assert_eq!(n1_1.iter().map(|a| a.leaf.0.as_str()).collect::<Vec<_>>(), ["rail1"]);
        assert_eq!(topology.route_between(&n1_0, &n2_0), Some(Route { hops: 2, uplinks: vec![] }));
        assert_eq!(topology.route_between(&n1_1, &n2_1), Some(Route { hops: 2, uplinks: vec![] }));
        let cross = topology.route_between(&n1_0, &n2_1).unwrap();
        assert_eq!((cross.hops, cross.uplinks), (4, vec![up("rail0", "spine"), up("rail1", "spine")]));
        // A rank using every NIC of its host (slots=1) is on both rails.
        let whole = ranks("n1 slots=1 devices=mlx5_0,mlx5_1\n");
        assert_eq!(topology.attachments_of("n1", &whole[0].devices).len(), 2);
        topology.check_placed(&four, Path::new("r.toml")).unwrap();
    }

    #[test]
    fn a_nic_the_topology_does_not_place_is_named_with_those_it_does() {
        let e = rails().check_placed(&ranks("n1 devices=mlx5_0,mlx5_7\n"), Path::new("r.toml")).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "NIC `mlx5_7` of host `n1` (its rank 1's `devices=`) is not placed by the topology r.toml, \
                 which places mlx5_0, mlx5_1 of that host"
            ),
            "{e}"
        );
    }

    #[test]
    fn the_tree_lists_each_leafs_nics() {
        assert_eq!(
            rails().render(),
            "spine spine\n  leaf rail0 (2 host(s), ×1 cable): n1:mlx5_0, n2:mlx5_0\n\
             \x20 leaf rail1 (2 host(s), ×1 cable): n1:mlx5_1, n2:mlx5_1\n"
        );
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
