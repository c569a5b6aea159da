//! `ibnetdiscover`'s text: a `Switch` block per switch and a `Ca` block per
//! HCA, each port line naming its peer by GUID (`"S-…"`, `"H-…"`) with the
//! peer's node description after `#`. A switch is named by its node
//! description (`MF0;leaf1:MSB7700/U1` → `leaf1`); a host by the first word
//! of its HCA's (`node01 mlx5_0`: host node01, NIC mlx5_0), and every HCA
//! port keeps its node GUID, by which a run places the HCAs whose
//! descriptions name no host. Those are named by their id
//! (`H-0002c90300a1b2c0`): an HCA without a description, and HCAs of one
//! description (the firmware's `MT4123 ConnectX6 Mellanox Technologies`
//! where nothing set them), which cannot all be one host's one NIC.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{Attachment, Builder, NodeGuid, Problem, TopologyError};

/// One node block's header.
struct Node<'a> {
    guid: &'a str,
    switch: bool,
    description: &'a str,
}

/// Parses ibnetdiscover's text into switches, hosts and links.
pub(super) fn parse(text: &str, path: &Path) -> Result<Builder, TopologyError> {
    let at = |line, bad: BadLine| TopologyError::Line {
        path: path.to_path_buf(),
        line,
        problem: Problem::Form { detail: bad.to_string() },
    };
    let mut builder = Builder::default();
    let mut names = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(node) = header(line).map_err(|d| at(i + 1, d))? {
            if node.switch {
                let name = switch_name(node.description, node.guid);
                builder.switch(&name, i + 1).map_err(|p| TopologyError::Line {
                    path: path.into(),
                    line: i + 1,
                    problem: p,
                })?;
                names.insert(node.guid, name);
            }
        }
    }
    let mut current: Option<Node> = None;
    let mut hcas: Vec<(&str, Attachment)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(node) = header(line).map_err(|d| at(i + 1, d))? {
            current = Some(node);
            continue;
        }
        if !line.starts_with('[') {
            continue;
        }
        let Some(node) = current.as_ref().filter(|n| n.switch) else { continue };
        let port = port_line(line).map_err(|d| at(i + 1, d))?;
        let me = &names[node.guid];
        if let Some(peer) = port.peer.strip_prefix("S-") {
            let Some(other) = names.get(peer) else {
                return Err(at(i + 1, BadLine::UnknownSwitch { port: port.port, peer: peer.to_string() }));
            };
            // Both ends print the link: count it from its lower end only.
            if (node.guid, port.port) < (peer, port.peer_port) {
                builder.cable((me, port.port), (other, port.peer_port), i + 1);
            }
        } else if let Some(id) = port.peer.strip_prefix("H-") {
            let guid: NodeGuid = id.parse().map_err(|_| at(i + 1, BadLine::NodeId(port.peer.to_string())))?;
            let mut words = port.description.split_whitespace();
            let host = words.next().unwrap_or(port.peer);
            hcas.push((
                host,
                Attachment { port: Some(port.port), guid: Some(guid), ..Attachment::on(me, words.next()) },
            ));
        }
    }
    for (host, attachment) in named(hcas) {
        builder.attach(&host, attachment);
    }
    Ok(builder)
}

/// Each HCA port's host as its description names it, or as its id where
/// the description is also another HCA's.
fn named(hcas: Vec<(&str, Attachment)>) -> Vec<(String, Attachment)> {
    let mut guids: BTreeMap<(&str, Option<&str>), BTreeSet<NodeGuid>> = BTreeMap::new();
    for (host, a) in &hcas {
        guids.entry((host, a.nic.as_deref())).or_default().extend(a.guid);
    }
    let shared: Vec<bool> = hcas.iter().map(|(host, a)| guids[&(*host, a.nic.as_deref())].len() > 1).collect();
    let name = |(host, a): (&str, Attachment), shared| match a.guid {
        Some(guid) if shared => (format!("H-{:016x}", guid.0), Attachment { nic: None, ..a }),
        _ => (host.to_string(), a),
    };
    hcas.into_iter().zip(shared).map(|(hca, shared)| name(hca, shared)).collect()
}

/// `Switch 36 "S-7cfe…" # "leaf1" …` or `Ca 1 "H-0002…" # "node01 mlx5_0"`;
/// `None` for any other line.
fn header(line: &str) -> Result<Option<Node<'_>>, BadLine> {
    let switch = line.starts_with("Switch");
    if !switch && !line.starts_with("Ca") && !line.starts_with("Rt") {
        return Ok(None);
    }
    let (head, comment) = line.split_once('#').unwrap_or((line, ""));
    let id = quoted(head).ok_or(BadLine::NotA { what: "a node header", example: NODE_HEADER })?;
    let guid = id.get(2..).filter(|_| id.get(1..2) == Some("-")).ok_or_else(|| BadLine::NodeId(id.to_string()))?;
    Ok(Some(Node { guid, switch, description: quoted(comment).unwrap_or("") }))
}

/// One port line: `[35] "S-7cfe…"[1] # "spine1" lid 2 4xEDR`.
struct Port<'a> {
    port: u32,
    peer: &'a str,
    peer_port: u32,
    description: &'a str,
}

fn port_line(line: &str) -> Result<Port<'_>, BadLine> {
    let bad = || BadLine::NotA { what: "a port line", example: PORT_LINE };
    let (head, comment) = line.split_once('#').unwrap_or((line, ""));
    let (port, rest) = bracketed(head).ok_or_else(bad)?;
    let peer = quoted(rest).ok_or_else(bad)?;
    let after = &rest[rest.find(peer).map_or(0, |at| at + peer.len() + 1)..];
    let (peer_port, _) = bracketed(after).ok_or_else(bad)?;
    Ok(Port { port, peer, peer_port, description: quoted(comment).unwrap_or("") })
}

/// The number in the first `[N]` of `text`, and what follows it.
fn bracketed(text: &str) -> Option<(u32, &str)> {
    let open = text.find('[')?;
    let close = open + text[open..].find(']')?;
    Some((text[open + 1..close].trim().parse().ok()?, &text[close + 1..]))
}

/// The first `"…"` of `text`, without its quotes.
fn quoted(text: &str) -> Option<&str> {
    let open = text.find('"')?;
    let len = text[open + 1..].find('"')?;
    Some(&text[open + 1..open + 1 + len])
}

const NODE_HEADER: &str = "Switch 36 \"S-7cfe900300a5a2a0\" # \"leaf1\"";
const PORT_LINE: &str = "[1] \"H-0002c90300a1b2c0\"[1](2c90300a1b2c1) # \"node01 mlx5_0\" lid 4 4xEDR";

/// What is wrong with one line of ibnetdiscover's output.
#[derive(Debug, thiserror::Error)]
enum BadLine {
    #[error("not {what} of ibnetdiscover's output; valid: `{example}`")]
    NotA { what: &'static str, example: &'static str },
    #[error("`{0}` is not a node id like \"S-7cfe900300a5a2a0\"")]
    NodeId(String),
    #[error("port [{port}] names switch S-{peer}, which has no Switch block")]
    UnknownSwitch { port: u32, peer: String },
}

/// Mellanox switches describe themselves as `MF0;NAME:MODEL/U1`: the name
/// is between `;` and `:`. Any other description is the name; none, the GUID.
fn switch_name(description: &str, guid: &str) -> String {
    let inner = description.split_once(';').and_then(|(_, rest)| rest.split_once(':')).map(|(name, _)| name);
    match inner.unwrap_or(description).trim() {
        "" => format!("S-{guid}"),
        name => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        let path = Path::new("f.txt");
        parse(text, path).and_then(|b| b.finish(path)).map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn switch_names_come_from_their_descriptions() {
        assert_eq!(switch_name("MF0;leaf1:MSB7700/U1", "7c"), "leaf1");
        assert_eq!(switch_name("spine1", "7c"), "spine1");
        assert_eq!(switch_name("", "7c"), "S-7c");
    }

    #[test]
    fn bad_lines_name_the_line_and_the_valid_form() {
        let e = error("Switch 36 \"S-01\" # \"leaf1\"\n[1] H-02\n");
        assert!(e.starts_with("f.txt:2: not a port line of ibnetdiscover's output; valid: `[1] \"H-"), "{e}");
        let e = error("\nSwitch 36 S-01\n");
        assert!(e.starts_with("f.txt:2: not a node header"), "{e}");
        let e = error("Switch 36 \"S-01\" # \"leaf1\"\n[1] \"S-09\"[1] # \"x\"\n");
        assert_eq!(e, "f.txt:2: port [1] names switch S-09, which has no Switch block");
        let e = error("Switch 36 \"S-01\" # \"leaf1\"\n[1] \"H-node01\"[1](03) # \"node01\" lid 4\n");
        assert_eq!(e, "f.txt:2: `H-node01` is not a node id like \"S-7cfe900300a5a2a0\"");
    }

    #[test]
    fn each_uplink_cable_keeps_its_switch_ports() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/rails.ibnetdiscover");
        let topology = super::super::read(&path, None).unwrap();
        let cables: Vec<String> = topology.cables.iter().map(ToString::to_string).collect();
        let expected = [
            "rail0 port 39 ↔ spine1 port 1",
            "rail0 port 40 ↔ spine1 port 2",
            "rail1 port 39 ↔ spine1 port 3",
            "rail1 port 40 ↔ spine1 port 4",
        ];
        assert_eq!(cables, expected);
    }

    #[test]
    fn hcas_sharing_one_description_are_named_by_their_ids() {
        let text = "Switch 36 \"S-01\" # \"leaf1\"\n[1] \"H-0a\"[1](0) # \"MT4123 ConnectX6 Mellanox\"\n\
                    [2] \"H-0b\"[1](0) # \"MT4123 ConnectX6 Mellanox\"\n[3] \"H-0c\"[1](0) # \"node03 mlx5_0\"\n";
        let topology = parse(text, Path::new("f.txt")).unwrap().finish(Path::new("f.txt")).unwrap();
        let hosts: Vec<&str> = topology.hosts.keys().map(String::as_str).collect();
        assert_eq!(hosts, ["H-000000000000000a", "H-000000000000000b", "node03"]);
        assert_eq!(topology.hosts["H-000000000000000a"][0].nic, None);
        assert_eq!(topology.hosts["node03"][0].nic.as_deref(), Some("mlx5_0"));
    }

    #[test]
    fn an_hca_without_a_description_is_named_by_its_id_and_keeps_its_guid() {
        let text = "Switch 36 \"S-01\" # \"leaf1\"\n[3] \"H-0002c90300a1b2c0\"[1](03) # \"\" lid 4\n";
        let topology = parse(text, Path::new("f.txt")).unwrap().finish(Path::new("f.txt")).unwrap();
        let attached = &topology.hosts["H-0002c90300a1b2c0"];
        assert_eq!(attached[0].guid, Some(NodeGuid(0x0002_c903_00a1_b2c0)));
        assert_eq!((attached[0].nic.as_deref(), attached[0].port), (None, Some(3)));
    }
}
