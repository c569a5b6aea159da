//! What every input form feeds: switches, hosts on them and links, each
//! with the line that gave it, so that a problem found only when the tree
//! is whole (a link between two leaves) still names its line.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Attachment, Level, SwitchName, Topology, TopologyError, Uplink, UplinkCable, MAX_SWITCHES};
use crate::hostfile;

/// What a valid topology is, for messages.
pub(super) const VALID: &str = "a two-level tree: hosts on leaf switches, each leaf linked to one or more spines";

/// One line's problem; [`TopologyError::Line`] adds the file and line.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("not valid TOML: {detail}")]
    Toml { detail: String },
    #[error(
        "{detail}; valid: [switch.NAME] tables with `hosts = \"node[01-16]\"` (or `nics = \"node[01-16]:mlx5_0\"`) and/or `links = [\"leaf1\", \"leaf2\"]`"
    )]
    TomlShape { detail: String },
    #[error("`hosts`: {0}")]
    Hostlist(hostfile::Problem),
    #[error("`nics` entry `{entry}`: {detail}; valid: `nics = \"node[01-64]:mlx5_3\"` (hosts, `:`, their NIC)")]
    Nics { entry: String, detail: String },
    #[error("a link names switch `{name}`, which no [switch.{name}] table (or ibnetdiscover Switch block) defines")]
    UnknownSwitch { name: String },
    #[error("switch `{name}` is linked to itself; a link joins a leaf to a spine")]
    SelfLink { name: String },
    #[error("the link between `{a}` and `{b}` joins two {level}s; {VALID}")]
    SameLevel { a: SwitchName, b: SwitchName, level: &'static str },
    #[error("more than {MAX_SWITCHES} switches; a two-level tree has far fewer")]
    TooManySwitches,
    #[error("{detail}")]
    Form { detail: String },
}

/// A link as the input gave it.
struct Link {
    a: SwitchName,
    b: SwitchName,
    line: usize,
    /// The ports of `a` and `b` it joins, where the input names them.
    ports: Option<(u32, u32)>,
}

/// The topology while an input is read.
#[derive(Default)]
pub struct Builder {
    /// Each switch and the line that defined it.
    switches: BTreeMap<SwitchName, usize>,
    hosts: BTreeMap<String, Vec<Attachment>>,
    links: Vec<Link>,
    /// The file the links came from when it is not the topology's own
    /// (an LLDP folder's links.toml), for their messages.
    pub links_file: Option<std::path::PathBuf>,
}

impl Builder {
    pub fn switch(&mut self, name: &str, line: usize) -> Result<(), Problem> {
        if self.switches.len() >= MAX_SWITCHES {
            return Err(Problem::TooManySwitches);
        }
        self.switches.entry(SwitchName(name.to_string())).or_insert(line);
        Ok(())
    }

    /// Attaches `host` to the attachment's leaf (a switch already
    /// defined); a NIC given twice is kept once.
    pub fn attach(&mut self, host: &str, attachment: Attachment) {
        let on = self.hosts.entry(host.to_string()).or_default();
        if !on.contains(&attachment) {
            on.push(attachment);
        }
    }

    /// One link between `a` and `b`; which is the leaf is known once every
    /// host is attached.
    pub fn link(&mut self, a: &str, b: &str, line: usize) {
        self.links.push(Link { a: SwitchName(a.to_string()), b: SwitchName(b.to_string()), line, ports: None });
    }

    /// [`Builder::link`] from port `a_port` of `a` to port `b_port` of `b`.
    pub fn cable(&mut self, (a, a_port): (&str, u32), (b, b_port): (&str, u32), line: usize) {
        self.link(a, b, line);
        self.links.last_mut().expect("just pushed").ports = Some((a_port, b_port));
    }

    /// The topology: a switch with hosts is a leaf, any other a spine;
    /// every link must join a leaf to a spine.
    pub fn finish(self, path: &Path) -> Result<Topology, TopologyError> {
        let links_file = self.links_file.as_deref().unwrap_or(path);
        let at = |line, problem| TopologyError::Line { path: links_file.to_path_buf(), line, problem };
        if self.hosts.is_empty() {
            return Err(TopologyError::Empty { path: path.to_path_buf() });
        }
        let leaf = |name: &SwitchName| self.hosts.values().flatten().any(|a| &a.leaf == name);
        let switches: BTreeMap<SwitchName, Level> = self
            .switches
            .keys()
            .map(|name| (name.clone(), if leaf(name) { Level::Leaf } else { Level::Spine }))
            .collect();
        let (mut uplinks, mut cables) = (BTreeMap::new(), Vec::new());
        for link in self.links {
            for end in [&link.a, &link.b] {
                if !switches.contains_key(end) {
                    return Err(at(link.line, Problem::UnknownSwitch { name: end.0.clone() }));
                }
            }
            if link.a == link.b {
                return Err(at(link.line, Problem::SelfLink { name: link.a.0 }));
            }
            let flip = |(a, b): (u32, u32)| (b, a);
            let (uplink, ports) = match (switches[&link.a], switches[&link.b]) {
                (Level::Leaf, Level::Spine) => (Uplink { leaf: link.a, spine: link.b }, link.ports),
                (Level::Spine, Level::Leaf) => (Uplink { leaf: link.b, spine: link.a }, link.ports.map(flip)),
                (same, _) => {
                    let level = if same == Level::Leaf { "leaves (switches with hosts)" } else { "spines" };
                    return Err(at(link.line, Problem::SameLevel { a: link.a, b: link.b, level }));
                }
            };
            if let Some((leaf_port, spine_port)) = ports {
                cables.push(UplinkCable { uplink: uplink.clone(), leaf_port, spine_port });
            }
            *uplinks.entry(uplink).or_insert(0) += 1;
        }
        cables.sort();
        Ok(Topology { switches, hosts: self.hosts, uplinks, cables })
    }
}
