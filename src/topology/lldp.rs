//! LLDP neighbours as `lldpctl -f json` prints them, one file per host
//! named after it (`node01.json`): each interface's neighbour chassis is
//! the leaf that NIC is cabled to. Hosts' LLDP says nothing of the links
//! between switches, so a folder's `links.toml` gives them in the TOML
//! form (`[switch.spine1] links = ["leaf1", "leaf2"]`); without it every
//! leaf is listed under "no spine".

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{read_text, toml_form, Attachment, Builder, Problem, Topology, TopologyError};

/// Most host files one folder may hold (as many as a hostfile's hosts).
const MAX_FILES: usize = crate::hostfile::MAX_HOSTS;
/// The links between switches beside the hosts' files.
const LINKS: &str = "links.toml";

/// Reads a folder of host files (and its links.toml), or one host's file.
pub(super) fn read(path: &Path) -> Result<Builder, TopologyError> {
    let mut builder = Builder::default();
    if !path.is_dir() {
        add_host(path, &mut builder)?;
        return Ok(builder);
    }
    let links = path.join(LINKS);
    if links.is_file() {
        builder = toml_form::parse(&read_text(&links)?, &links, builder)?;
        builder.links_file = Some(links);
    }
    for file in host_files(path)? {
        add_host(&file, &mut builder)?;
    }
    Ok(builder)
}

/// The folder's `*.json` files, sorted, at most [`MAX_FILES`].
fn host_files(dir: &Path) -> Result<Vec<PathBuf>, TopologyError> {
    let read = |cause| TopologyError::Read { path: dir.to_path_buf(), cause };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let file = entry.map_err(read)?.path();
        if file.extension().is_some_and(|e| e == "json") {
            if files.len() == MAX_FILES {
                return Err(TopologyError::TooLarge { path: dir.to_path_buf() });
            }
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}

/// Attaches the host a file is named after to each interface's chassis.
fn add_host(file: &Path, builder: &mut Builder) -> Result<(), TopologyError> {
    let host = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    add_text(&read_text(file)?, file, host, builder)
}

/// Builds the topology from each host's `lldpctl -f json` text as its
/// worker gathered it (`run --topology lldp`), parsed as the folder's files
/// are; errors name `lldpctl -f json on HOST` where a file's path would be.
pub(super) fn from_hosts<'a>(
    texts: impl IntoIterator<Item = (&'a str, &'a str)>,
    source: &Path,
) -> Result<Topology, TopologyError> {
    let mut builder = Builder::default();
    for (host, text) in texts {
        if text.len() as u64 > super::MAX_TEXT {
            return Err(TopologyError::TooLarge { path: gathered_on(host) });
        }
        add_text(text, &gathered_on(host), host, &mut builder)?;
    }
    builder.finish(source)
}

/// What stands for a file's path in errors about a host's gathered text.
fn gathered_on(host: &str) -> PathBuf {
    PathBuf::from(format!("`lldpctl -f json` on {host}"))
}

/// Attaches `host` to each interface's chassis in `text`, read from `file`.
fn add_text(text: &str, file: &Path, host: &str, builder: &mut Builder) -> Result<(), TopologyError> {
    let at = |line, bad: BadLldp| TopologyError::Line {
        path: file.to_path_buf(),
        line,
        problem: Problem::Form { detail: bad.to_string() },
    };
    let json: Value = serde_json::from_str(text).map_err(|e| at(e.line(), BadLldp::Json(e)))?;
    for (nic, neighbour) in interfaces(&json).map_err(|d| at(1, d))? {
        let line = text.lines().position(|l| l.contains(&format!("\"{nic}\""))).map_or(1, |i| i + 1);
        let chassis = neighbour.get("chassis").and_then(Value::as_object).and_then(|c| c.keys().next());
        let Some(chassis) = chassis else {
            return Err(at(line, BadLldp::NoChassis(nic.to_string())));
        };
        builder.switch(chassis, line).map_err(|problem| TopologyError::Line { path: file.into(), line, problem })?;
        builder.attach(host, Attachment::on(chassis, Some(nic)));
    }
    Ok(())
}

/// `lldp.interface` is an object of one interface, or a list of such
/// objects when there are several (as lldpctl prints them).
fn interfaces(json: &Value) -> Result<Vec<(&str, &Value)>, BadLldp> {
    let interface = json.pointer("/lldp/interface").ok_or(BadLldp::NoInterface)?;
    let objects: Vec<&Value> = match interface {
        Value::Array(list) => list.iter().collect(),
        one => vec![one],
    };
    let mut found = Vec::new();
    for object in objects {
        let map = object.as_object().ok_or(BadLldp::NotAnObject)?;
        found.extend(map.iter().map(|(nic, v)| (nic.as_str(), v)));
    }
    Ok(found)
}

/// What `lldpctl -f json` looks like, said by the errors about its shape.
const VALID: &str =
    "valid: the output of `lldpctl -f json`, `{\"lldp\": {\"interface\": {\"eth0\": {\"chassis\": …, \"port\": …}}}}`";

/// What is wrong with one host's `lldpctl -f json` output.
#[derive(Debug, thiserror::Error)]
enum BadLldp {
    #[error("not valid JSON: {0}")]
    Json(serde_json::Error),
    #[error("no `lldp.interface`; {VALID}")]
    NoInterface,
    #[error("`lldp.interface` holds a non-object; {VALID}")]
    NotAnObject,
    #[error("interface `{0}` has no `chassis` object naming its switch (`\"chassis\": {{\"leaf1\": {{…}}}}`)")]
    NoChassis(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_interface_or_a_list_of_them_is_read() {
        let one: Value = serde_json::from_str(r#"{"lldp":{"interface":{"eth0":{"chassis":{"l1":{}}}}}}"#).unwrap();
        assert_eq!(interfaces(&one).unwrap().len(), 1);
        let two: Value = serde_json::from_str(r#"{"lldp":{"interface":[{"eth0":{}},{"eth1":{}}]}}"#).unwrap();
        let nics: Vec<&str> = interfaces(&two).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(nics, ["eth0", "eth1"]);
        let e = interfaces(&serde_json::json!({"lldp": {}})).unwrap_err().to_string();
        assert!(e.starts_with("no `lldp.interface`; valid: the output of `lldpctl -f json`"), "{e}");
        let e = interfaces(&serde_json::json!({"lldp": {"interface": [3]}})).unwrap_err().to_string();
        assert!(e.starts_with("`lldp.interface` holds a non-object; valid: "), "{e}");
        assert_eq!(
            BadLldp::NoChassis("eth0".into()).to_string(),
            "interface `eth0` has no `chassis` object naming its switch (`\"chassis\": {\"leaf1\": {…}}`)"
        );
    }

    #[test]
    fn a_gathered_text_is_read_as_its_file_and_its_errors_name_the_host() {
        let good = r#"{"lldp":{"interface":{"eth0":{"chassis":{"leaf1":{}}}}}}"#;
        let t = from_hosts([("n1", good), ("n2", good)], Path::new("lldp")).unwrap();
        assert_eq!(t.hosts.keys().collect::<Vec<_>>(), ["n1", "n2"]);
        let Err(e) = from_hosts([("n1", good), ("n7", "{\n  \"lldp\": {}\n}")], Path::new("lldp")) else {
            panic!("accepted")
        };
        assert!(e.to_string().starts_with("`lldpctl -f json` on n7:1: no `lldp.interface`; valid: "), "{e}");
        let Err(e) = from_hosts([("n3", "{")], Path::new("lldp")) else { panic!("accepted") };
        assert!(e.to_string().starts_with("`lldpctl -f json` on n3:1: not valid JSON: "), "{e}");
    }
}
