//! The small TOML form, for fabrics without discovery:
//! `[switch.leaf1] hosts = "node[01-16]"`, `[switch.spine1] links =
//! ["leaf1", "leaf2"]` (a leaf listed twice is two links). Host lists
//! expand as a hostfile line's do. On a rail fabric a leaf holds one NIC
//! of each host: `[switch.rail3] nics = "node[01-64]:mlx5_3"` (a list of
//! such strings where several host lists share a leaf).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{Attachment, Builder, Problem, TopologyError};
use crate::hostfile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    switch: BTreeMap<String, SwitchTable>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchTable {
    hosts: Option<String>,
    nics: Option<toml::Value>,
    #[serde(default)]
    links: Vec<String>,
}

/// `nics = "node[01-64]:mlx5_3"`, or a list of such strings.
fn nic_entries(value: &toml::Value) -> Result<Vec<&str>, Problem> {
    let not = || Problem::Nics { entry: value.to_string(), detail: "not a string or a list of strings".into() };
    match value {
        toml::Value::String(entry) => Ok(vec![entry]),
        toml::Value::Array(entries) => entries.iter().map(|e| e.as_str().ok_or_else(not)).collect(),
        _ => Err(not()),
    }
}

/// One `nics` entry: `HOSTLIST:NIC[,NIC…]`, each host's NICs by name.
fn nic_entry(entry: &str) -> Result<(Vec<String>, Vec<String>), Problem> {
    let bad = |detail: String| Problem::Nics { entry: entry.to_string(), detail };
    let (hosts, nics) =
        entry.rsplit_once(':').ok_or_else(|| bad("it has no `:` between the hosts and the NIC".into()))?;
    let hosts = hostfile::expand(hosts).map_err(|p| bad(p.to_string()))?;
    let nics = hostfile::device_list(nics).map_err(|p| bad(p.to_string()))?;
    Ok((hosts, nics))
}

/// Adds the switches, hosts and links of TOML `text` to `builder`.
pub(super) fn parse(text: &str, path: &Path, mut builder: Builder) -> Result<Builder, TopologyError> {
    let at = |line, problem| TopologyError::Line { path: path.to_path_buf(), line, problem };
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |span| line_at(text, span.start));
        let detail = e.message().to_string();
        let problem = match detail.starts_with("unknown field") || detail.starts_with("invalid type") {
            true => Problem::TomlShape { detail },
            false => Problem::Toml { detail },
        };
        at(line, problem)
    })?;
    for name in file.switch.keys() {
        builder.switch(name, table_line(text, name)).map_err(|p| at(table_line(text, name), p))?;
    }
    for (name, table) in &file.switch {
        let line = table_line(text, name);
        if let Some(hosts) = &table.hosts {
            let names = hostfile::expand(hosts).map_err(|p| at(line, Problem::Hostlist(p)))?;
            names.iter().for_each(|host| builder.attach(host, Attachment::on(name, None)));
        }
        let entries = table.nics.as_ref().map(nic_entries).transpose().map_err(|p| at(line, p))?;
        for entry in entries.unwrap_or_default() {
            let (hosts, nics) = nic_entry(entry).map_err(|p| at(line, p))?;
            for host in &hosts {
                nics.iter().for_each(|nic| builder.attach(host, Attachment::on(name, Some(nic))));
            }
        }
        table.links.iter().for_each(|other| builder.link(name, other, line));
    }
    Ok(builder)
}

/// The line (from 1) that byte `offset` of `text` is on.
pub(super) fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line of `[switch.NAME]` (quoted or not), where a switch's problems
/// are reported; 1 when written another way (an inline table).
fn table_line(text: &str, name: &str) -> usize {
    let headers = [format!("[switch.{name}]"), format!("[switch.\"{name}\"]")];
    let compact = |line: &str| line.split('#').next().unwrap_or("").replace([' ', '\t'], "");
    text.lines().position(|line| headers.contains(&compact(line))).map_or(1, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        let path = Path::new("t.toml");
        match parse(text, path, Builder::default()).and_then(|b| b.finish(path)) {
            Ok(_) => panic!("{text:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn syntax_and_shape_errors_name_the_line_and_the_valid_form() {
        let e = error("[switch.l1]\nhosts = \"a1\" x\n[switch.l2]\n");
        assert!(e.starts_with("t.toml:2: not valid TOML"), "{e}");
        let e = error("[switch.l1]\nhosts = \"a1\"\nports = 4\n");
        assert!(e.starts_with("t.toml:3: unknown field `ports`"), "{e}");
        assert!(e.contains("valid: [switch.NAME] tables with `hosts = \"node[01-16]\"`"), "{e}");
    }

    #[test]
    fn link_errors_name_the_switch_table_line() {
        let e = error("[switch.l1]\nhosts = \"a1\"\n\n[switch.s1]\nlinks = [\"l9\"]\n");
        assert_eq!(
            e,
            "t.toml:4: a link names switch `l9`, which no [switch.l9] table (or ibnetdiscover Switch block) defines"
        );
        let e = error("[switch.l1]\nhosts = \"a1\"\nlinks = [\"l2\"]\n[switch.l2]\nhosts = \"b1\"\n");
        assert!(e.starts_with("t.toml:1: the link between `l1` and `l2` joins two leaves"), "{e}");
    }

    #[test]
    fn bad_nics_entries_name_the_entry_and_the_valid_form() {
        let e = error("[switch.r0]\nnics = \"n[1-2]\"\n");
        assert_eq!(
            e,
            "t.toml:1: `nics` entry `n[1-2]`: it has no `:` between the hosts and the NIC; \
             valid: `nics = \"node[01-64]:mlx5_3\"` (hosts, `:`, their NIC)"
        );
        let e = error("[switch.r0]\nnics = \"n1:mlx5 0\"\n");
        assert!(e.starts_with("t.toml:1: `nics` entry `n1:mlx5 0`: "), "{e}");
        let e = error("[switch.r0]\nnics = 3\n");
        assert!(e.starts_with("t.toml:1: `nics` entry `3`: not a string or a list of strings"), "{e}");
    }

    #[test]
    fn a_bad_hostlist_and_an_empty_file_are_refused() {
        let e = error("[switch.l1]\nhosts = \"n[1-2],n1\"\n");
        assert_eq!(e, "t.toml:1: `hosts`: `n[1-2],n1` names host `n1` twice");
        assert!(error("").starts_with("t.toml: places no host on a leaf switch"), "{}", error(""));
    }
}
