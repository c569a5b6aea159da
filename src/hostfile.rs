//! Hostfiles in the forms cluster operators already have: plain lines,
//! OpenMPI (`host slots=N`), MPICH (`host:N`) and Slurm hostlist expressions
//! (`node[01-04,07]`), with `#` comments and optional `addr=` / `devices=`.
//!
//! Inside a Slurm allocation the hosts can also come from the environment
//! Slurm sets (`SLURM_JOB_NODELIST`, `SLURM_TASKS_PER_NODE`).
//!
//! One worker (rank) runs per host, in file order; `slots` is kept for
//! reference. Parsing touches no network.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One host of the job, in rank order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// The name used to reach the host's launcher (ssh destination, node name).
    pub name: String,
    /// The address the data plane and coordinator bind to, when it differs
    /// from `name` (e.g. an IPoIB address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// Slots declared by the hostfile (OpenMPI `slots=`, MPICH `:N`); 1 if none.
    pub slots: u32,
    /// RDMA devices to use on this host (`devices=mlx5_0,mlx5_1`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

impl Host {
    /// A host reached and bound by its name alone.
    pub fn named(name: &str) -> Host {
        Host { name: name.to_string(), addr: None, slots: 1, devices: Vec::new() }
    }

    /// The address the data plane binds to on this host.
    pub fn data_addr(&self) -> &str {
        self.addr.as_deref().unwrap_or(&self.name)
    }
}

/// A hostfile problem, naming the file, the line and what would be valid.
#[derive(Debug, thiserror::Error)]
pub enum HostfileError {
    #[error("cannot read hostfile {path}: {cause}")]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("{path}:{line}: {message}\n  valid forms: `host`, `host slots=N`, `host:N`, `node[01-04,07]`, optionally followed by `addr=IP` and `devices=dev1,dev2`")]
    Syntax { path: PathBuf, line: usize, message: String },
    #[error("{path}:{line}: host `{host}` is listed twice (first at line {first}); each host runs one worker")]
    Duplicate { path: PathBuf, line: usize, first: usize, host: String },
    #[error("{path}: no hosts (only blank lines or comments); list one host per line, e.g. `127.0.0.1`")]
    Empty { path: PathBuf },
    #[error("{var}=`{value}`: {message}")]
    SlurmEnv { var: &'static str, value: String, message: String },
}

/// Reads and parses a hostfile.
pub fn read(path: &Path) -> Result<Vec<Host>, HostfileError> {
    let text =
        std::fs::read_to_string(path).map_err(|cause| HostfileError::Read { path: path.to_path_buf(), cause })?;
    parse(&text, path)
}

/// Parses hostfile text; `path` is used in error messages only.
pub fn parse(text: &str, path: &Path) -> Result<Vec<Host>, HostfileError> {
    let mut hosts: Vec<(usize, Host)> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let syntax = |message: String| HostfileError::Syntax { path: path.to_path_buf(), line, message };
        for host in parse_line(content).map_err(syntax)? {
            if !seen.insert(host.name.clone()) {
                let first = hosts.iter().find(|(_, h)| h.name == host.name).map_or(line, |(l, _)| *l);
                return Err(HostfileError::Duplicate { path: path.to_path_buf(), line, first, host: host.name });
            }
            hosts.push((line, host));
        }
    }
    if hosts.is_empty() {
        return Err(HostfileError::Empty { path: path.to_path_buf() });
    }
    Ok(hosts.into_iter().map(|(_, h)| h).collect())
}

/// The nodes of a Slurm allocation, in its order: `nodelist` is
/// `SLURM_JOB_NODELIST` (a hostlist expression such as `node[01-03],gpu7`),
/// `tasks_per_node` is `SLURM_TASKS_PER_NODE` (`2(x3),1`), recorded as slots.
pub fn from_slurm(nodelist: &str, tasks_per_node: Option<&str>) -> Result<Vec<Host>, HostfileError> {
    let bad = |var, value: &str, message: String| HostfileError::SlurmEnv { var, value: value.to_string(), message };
    let names = expand_hostlist(nodelist.trim()).map_err(|m| bad("SLURM_JOB_NODELIST", nodelist, m))?;
    let slots = match tasks_per_node {
        Some(text) => {
            let counts = slurm_counts(text).map_err(|m| bad("SLURM_TASKS_PER_NODE", text, m))?;
            if counts.len() != names.len() {
                let message =
                    format!("gives {} count(s) for the {} node(s) of SLURM_JOB_NODELIST", counts.len(), names.len());
                return Err(bad("SLURM_TASKS_PER_NODE", text, message));
            }
            counts
        }
        None => vec![1; names.len()],
    };
    Ok(names.into_iter().zip(slots).map(|(name, slots)| Host { slots, ..Host::named(&name) }).collect())
}

/// Expands Slurm's compressed counts: `2(x3),1` is 2, 2, 2, 1.
fn slurm_counts(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text.trim().split(',') {
        let (count, times) = match part.split_once("(x") {
            Some((count, rest)) => {
                let times = rest.strip_suffix(')').ok_or_else(|| format!("`{part}` lacks its closing `)`"))?;
                (count, times.parse::<usize>().map_err(|_| format!("`{times}` in `{part}` is not a repeat count"))?)
            }
            None => (part, 1),
        };
        out.extend(std::iter::repeat_n(parse_slots(count)?, times));
    }
    Ok(out)
}

/// Parses one non-empty, comment-free line into one or more hosts.
fn parse_line(content: &str) -> Result<Vec<Host>, String> {
    let mut words = content.split_whitespace();
    let first = words.next().unwrap_or_default();
    let (names, mut slots) = split_mpich_slots(first)?;
    let mut addr = None;
    let mut devices = Vec::new();
    for word in words {
        let (key, value) = word.split_once('=').ok_or_else(|| format!("unexpected `{word}` after the host name"))?;
        if value.is_empty() {
            return Err(format!("`{key}=` needs a value"));
        }
        match key {
            "slots" | "max_slots" | "max-slots" => {
                let n = parse_slots(value)?;
                if key == "slots" {
                    slots = n;
                }
            }
            "addr" => addr = Some(value.to_string()),
            "devices" => devices = value.split(',').map(str::to_string).collect(),
            other => return Err(format!("unknown attribute `{other}` (valid: slots=N, addr=IP, devices=dev1,dev2)")),
        }
    }
    let names = expand_hostlist(names)?;
    if addr.is_some() && names.len() > 1 {
        return Err(format!("`addr=` names one address but `{}` expands to {} hosts", first, names.len()));
    }
    Ok(names.into_iter().map(|name| Host { name, addr: addr.clone(), slots, devices: devices.clone() }).collect())
}

/// Splits MPICH's `host:N`. A colon inside brackets or an IPv6 address is left alone.
fn split_mpich_slots(word: &str) -> Result<(&str, u32), String> {
    let looks_ipv6 = word.matches(':').count() > 1;
    match word.rsplit_once(':') {
        Some((name, n)) if !looks_ipv6 && !name.is_empty() => Ok((name, parse_slots(n)?)),
        _ => Ok((word, 1)),
    }
}

fn parse_slots(value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("slot count `{value}` is not a positive integer")),
    }
}

/// Expands a Slurm hostlist expression; a plain name expands to itself.
fn expand_hostlist(expr: &str) -> Result<Vec<String>, String> {
    if !expr.contains('[') && !expr.contains(',') {
        return validate_name(expr).map(|()| vec![expr.to_string()]);
    }
    hostlist_parser::parse(expr).map_err(|e| {
        let detail = e.to_string().lines().next().unwrap_or_default().to_string();
        format!("bad hostlist expression `{expr}`: {detail}")
    })
}

fn validate_name(name: &str) -> Result<(), String> {
    let ok = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '@'));
    if ok {
        Ok(())
    } else {
        Err(format!("`{name}` is not a host name (letters, digits, `.`, `-`, `_`, or a hostlist like node[01-04])"))
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.addr {
            Some(addr) => write!(f, "{} ({addr})", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Vec<Host> {
        parse(text, Path::new("hosts")).expect("valid hostfile")
    }

    fn err(text: &str) -> String {
        parse(text, Path::new("hosts")).expect_err("invalid hostfile").to_string()
    }

    fn names(hosts: &[Host]) -> Vec<&str> {
        hosts.iter().map(|h| h.name.as_str()).collect()
    }

    #[test]
    fn plain_lines_and_comments() {
        let hosts = ok("# rack 1\n127.0.0.1\n\n127.0.0.2  # second\n");
        assert_eq!(names(&hosts), ["127.0.0.1", "127.0.0.2"]);
        assert_eq!(hosts[0].slots, 1);
    }

    #[test]
    fn openmpi_and_mpich_slots() {
        let hosts = ok("a slots=4\nb:8\nc slots=2 max_slots=4\n");
        assert_eq!(hosts.iter().map(|h| h.slots).collect::<Vec<_>>(), [4, 8, 2]);
    }

    #[test]
    fn slurm_hostlist_keeps_order() {
        let hosts = ok("node[01-03,07]\n");
        assert_eq!(names(&hosts), ["node01", "node02", "node03", "node07"]);
    }

    #[test]
    fn addr_and_devices() {
        let hosts = ok("n1 addr=10.0.0.1 devices=mlx5_0,mlx5_1\n");
        assert_eq!(hosts[0].data_addr(), "10.0.0.1");
        assert_eq!(hosts[0].devices, ["mlx5_0", "mlx5_1"]);
    }

    #[test]
    fn ipv6_is_not_mpich() {
        let hosts = ok("::1\n");
        assert_eq!(names(&hosts), ["::1"]);
    }

    #[test]
    fn empty_file_is_an_error() {
        assert_eq!(
            err("# nothing\n\n"),
            "hosts: no hosts (only blank lines or comments); list one host per line, e.g. `127.0.0.1`"
        );
    }

    #[test]
    fn duplicate_names_both_lines() {
        assert_eq!(err("a\nb\na\n"), "hosts:3: host `a` is listed twice (first at line 1); each host runs one worker");
        assert!(err("n[1-2]\nn2\n").starts_with("hosts:2: host `n2` is listed twice"));
    }

    #[test]
    fn bad_slots_names_line_and_value() {
        let e = err("a\nb slots=zero\n");
        assert!(e.starts_with("hosts:2: slot count `zero` is not a positive integer"), "{e}");
        assert!(e.contains("valid forms"), "{e}");
        assert!(err("a:0\n").starts_with("hosts:1: slot count `0`"));
    }

    #[test]
    fn unknown_attribute_says_what_is_valid() {
        assert!(err("a color=red\n")
            .starts_with("hosts:1: unknown attribute `color` (valid: slots=N, addr=IP, devices=dev1,dev2)"));
        assert!(err("a b\n").starts_with("hosts:1: unexpected `b` after the host name"));
    }

    #[test]
    fn bad_hostlist_and_names() {
        assert!(err("node[01-\n").starts_with("hosts:1: bad hostlist expression `node[01-`"));
        assert!(err("h$t\n").starts_with("hosts:1: `h$t` is not a host name"));
        assert!(err("n[1-2] addr=1.2.3.4\n").contains("expands to 2 hosts"));
    }

    #[test]
    fn slurm_allocation_with_task_counts() {
        let hosts = from_slurm("node[1-3],gpu7", Some("2(x3),1")).unwrap();
        assert_eq!(names(&hosts), ["node1", "node2", "node3", "gpu7"]);
        assert_eq!(hosts.iter().map(|h| h.slots).collect::<Vec<_>>(), [2, 2, 2, 1]);
        assert_eq!(from_slurm("h1", None).unwrap(), [Host::named("h1")]);
    }

    #[test]
    fn slurm_errors_name_the_variable() {
        let e = from_slurm("node[1-3]", Some("2(x2)")).unwrap_err().to_string();
        assert_eq!(e, "SLURM_TASKS_PER_NODE=`2(x2)`: gives 2 count(s) for the 3 node(s) of SLURM_JOB_NODELIST");
        let e = from_slurm("node[1-", None).unwrap_err().to_string();
        assert!(e.starts_with("SLURM_JOB_NODELIST=`node[1-`: bad hostlist expression"), "{e}");
        let e = from_slurm("n[1-2]", Some("1(x2")).unwrap_err().to_string();
        assert_eq!(e, "SLURM_TASKS_PER_NODE=`1(x2`: `1(x2` lacks its closing `)`");
    }

    #[test]
    fn missing_file_names_path() {
        let e = read(Path::new("/nonexistent/hosts")).unwrap_err().to_string();
        assert!(e.starts_with("cannot read hostfile /nonexistent/hosts:"), "{e}");
    }
}
