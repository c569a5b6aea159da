//! Hostfiles in the forms cluster operators already have: plain lines,
//! OpenMPI (`host slots=N`), MPICH (`host:N`) and Slurm hostlist expressions
//! (`node[01-04,07]`), with `#` comments and optional `addr=` / `addrs=` /
//! `devices=` / `gpus=`.
//!
//! Inside a Slurm allocation the hosts can also come from the environment
//! Slurm sets (`SLURM_JOB_NODELIST`, `SLURM_TASKS_PER_NODE`).
//!
//! Every form parses to the job's **rank list**: a `Vec<Host>` in rank
//! order in which a host appears once per slot, its entries consecutive,
//! each carrying its slot index on the host (`slot`, from 0) and the RDMA
//! devices that rank uses (`devices`). Launchers start one worker per
//! entry. `host slots=N` (MPICH `host:N`, Slurm's tasks per node) is N
//! ranks on that host; `devices=` binds them, rank k of the host to the
//! k-th device listed, so that it runs one process per NIC as UCX and
//! multi-rail MPI users do. Without `slots`, a host with devices gets one
//! rank per device; `slots=1` keeps one rank that spreads its flows over
//! all the devices (multi-rail). Any other count of slots beside a device
//! list is refused, naming the line: ranks do not share devices round
//! robin, because a rank per NIC is what such a file means and a typo
//! should not silently double the load on one NIC. `gpus=0,1` (indices or
//! PCI bus ids) is one GPU per rank the same way, rank k of the host on the
//! k-th: the GPU its ends in GPU memory use, whatever their group's `gpu`.
//! `addrs=10.0.0.1,10.1.0.1` is one address per rank the same way (one
//! NIC's, e.g. IPoIB ib0…ib7): rank k's TCP data listens on and leaves from
//! the k-th, while the host's own address (`addr=`, else its name) keeps
//! the control plane, rank 0's coordinator included. Parsing touches no
//! network.

mod addrs;
mod count;
mod gpu;
mod hostlist;
mod problem;

use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use addrs::{addr_list, unicast};
use count::count_ranks;
pub use gpu::{GpuChoice, MAX_GPU_INDEX};
use hostlist::expand_hostlist;
pub use problem::{Problem, RankCount};

/// One rank of the job: its host and what it uses there, in rank order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// The name used to reach the host's launcher (ssh destination, node name).
    pub name: String,
    /// The host's address, when it differs from `name` (e.g. an IPoIB
    /// address): rank 0's coordinator listens on it, and the data plane
    /// binds to it unless `addrs=` gives the rank its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// Ranks on this host (OpenMPI `slots=`, MPICH `:N`, Slurm's tasks
    /// per node; one per device of `devices=` when not given); 1 if none.
    pub slots: u32,
    /// This rank's index among its host's ranks, from 0 (absent: 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slot: u32,
    /// RDMA devices this rank uses: its own one of `devices=mlx5_0,mlx5_1`
    /// (rank k of the host gets the k-th), or all of them with `slots=1`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// The GPU this rank's ends in GPU memory use, over its group's `gpu`:
    /// its own one of `gpus=0,1` (rank k of the host gets the k-th). At
    /// most one per rank once the hostfile is parsed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuChoice>,
    /// The address this rank's TCP data binds to, over the host's: its own
    /// one of `addrs=10.0.0.1,10.1.0.1` (rank k of the host gets the k-th).
    /// At most one per rank once the hostfile is parsed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addrs: Vec<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Host {
    /// A host reached and bound by its name alone.
    pub fn named(name: &str) -> Host {
        Host {
            name: name.to_string(),
            addr: None,
            slots: 1,
            slot: 0,
            devices: Vec::new(),
            gpus: Vec::new(),
            addrs: Vec::new(),
        }
    }

    /// The GPU the hostfile's `gpus=` gives this rank, if any.
    pub fn gpu(&self) -> Option<&GpuChoice> {
        self.gpus.first()
    }

    /// The host's address: where rank 0's coordinator listens, and where
    /// the data plane binds when the rank has no address of its own.
    pub fn host_addr(&self) -> &str {
        self.addr.as_deref().unwrap_or(&self.name)
    }

    /// The address the hostfile's `addrs=` gives this rank's data, if any.
    pub fn nic_addr(&self) -> Option<&str> {
        self.addrs.first().map(String::as_str)
    }
}

/// Most hosts a hostfile (or a Slurm allocation) may name: far above the
/// largest clusters, and checked before a hostlist expands, so a typo such
/// as `node[1-10000000]` is refused at once instead of filling memory.
pub const MAX_HOSTS: usize = 65_536;
/// Most ranks one run takes (the sum of every host's slots): as many as
/// hosts. A hostfile whose `slots` count cores (`slots=64` on 2 048 nodes)
/// is refused at the line that passes it, before anything expands.
pub const MAX_RANKS: usize = 65_536;
/// Above this many slots on a host without `devices=` or `addrs=`, the launcher warns
/// (see [`crowded`]): an OpenMPI hostfile's `slots` often count cores, and
/// that many workers on one host measure its CPUs, not its NICs.
pub const CROWDED_SLOTS: u32 = 8;
/// Longest RDMA device name: the kernel's IB_DEVICE_NAME_MAX less its NUL.
pub const MAX_DEVICE_NAME: usize = 63;
/// Longest host name: DNS's limit for a full name.
pub const MAX_NAME: usize = 253;
/// Largest hostfile read (and longest Slurm environment string): room for
/// MAX_HOSTS full lines; `-H /dev/zero` ends here instead of in swap.
pub const MAX_TEXT: u64 = 64 << 20;

/// A hostfile problem, naming the file, the line and what would be valid.
#[derive(Debug, thiserror::Error)]
pub enum HostfileError {
    #[error("cannot read hostfile {path}: {cause}")]
    Read { path: PathBuf, cause: std::io::Error },
    /// A line's form or size; the form's problems are followed by the valid forms.
    #[error("{path}:{line}: {problem}{}", if problem.is_limit() { "" } else { VALID_FORMS })]
    Line { path: PathBuf, line: usize, problem: Problem },
    #[error("{path}:{line}: host `{host}` is listed twice ({}); give a host's ranks once, as `{host} slots=N`", first_at(*first, *line))]
    Duplicate { path: PathBuf, line: usize, first: usize, host: String },
    #[error("{path}: no hosts (only blank lines or comments); list one host per line, e.g. `127.0.0.1`")]
    Empty { path: PathBuf },
    #[error("hostfile {path} is larger than {MAX_TEXT} bytes; a hostfile of {MAX_HOSTS} hosts is far smaller")]
    TooLarge { path: PathBuf },
    #[error("{var}=`{value}`: {problem}")]
    SlurmEnv { var: &'static str, value: String, problem: Problem },
}

const VALID_FORMS: &str = "\n  valid forms: `host`, `host slots=N`, `host:N`, `node[01-04,07]`, optionally followed by `addr=IP`, `addrs=IP1,IP2`, `devices=dev1,dev2` and `gpus=0,1`";

/// Where a repeated host was first named: an earlier line, or this one
/// (`n[1-2],n1`).
fn first_at(first: usize, line: usize) -> String {
    match first == line {
        true => "twice on this line".to_string(),
        false => format!("first at line {first}"),
    }
}

/// Reads and parses a hostfile.
pub fn read(path: &Path) -> Result<Vec<Host>, HostfileError> {
    let read = |cause| HostfileError::Read { path: path.to_path_buf(), cause };
    let mut text = String::new();
    std::fs::File::open(path).and_then(|f| f.take(MAX_TEXT + 1).read_to_string(&mut text)).map_err(read)?;
    if text.len() as u64 > MAX_TEXT {
        return Err(HostfileError::TooLarge { path: path.to_path_buf() });
    }
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
        let fail = |problem| match problem {
            Problem::Repeated { host, .. } => {
                HostfileError::Duplicate { path: path.to_path_buf(), line, first: line, host }
            }
            problem => HostfileError::Line { path: path.to_path_buf(), line, problem },
        };
        for host in parse_line(content, MAX_HOSTS - hosts.len()).map_err(fail)? {
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
    ranks(hosts).map_err(|(line, problem)| HostfileError::Line { path: path.to_path_buf(), line, problem })
}

/// The rank list of `hosts` (each with what names it in an error, such as
/// its line): every host once per slot, its ranks consecutive, rank k of
/// a host on its k-th device, its k-th GPU and its k-th address. The total
/// is counted before anything is expanded; past MAX_RANKS the error names
/// the host that passes it.
fn ranks<T: Copy>(hosts: Vec<(T, Host)>) -> Result<Vec<Host>, (T, Problem)> {
    let mut total = 0usize;
    for (at, host) in &hosts {
        total = total.saturating_add(host.slots as usize);
        if total > MAX_RANKS {
            return Err((*at, Problem::TooManyRanks { host: host.name.clone(), slots: host.slots, total }));
        }
    }
    let mut out = Vec::with_capacity(total);
    for (_, mut host) in hosts {
        // Each rank takes its own entries; the lists are not copied to every
        // rank (a host may list as many addresses as a run takes ranks).
        let (all_devices, all_gpus, all_addrs) =
            (std::mem::take(&mut host.devices), std::mem::take(&mut host.gpus), std::mem::take(&mut host.addrs));
        for slot in 0..host.slots {
            let own = slot as usize;
            let devices = match host.slots {
                1 => all_devices.clone(),
                _ => all_devices.get(own).cloned().into_iter().collect(),
            };
            let gpus = all_gpus.get(own).cloned().into_iter().collect();
            let addrs = all_addrs.get(own).cloned().into_iter().collect();
            out.push(Host { slot, devices, gpus, addrs, ..host.clone() });
        }
    }
    Ok(out)
}

/// The host names a Slurm hostlist expression (`node[01-16]`) names, in its
/// order, at most [`MAX_HOSTS`]; other inputs that list hosts (a topology
/// file) expand them exactly as a hostfile line does.
pub fn expand(expr: &str) -> Result<Vec<String>, Problem> {
    expand_hostlist(expr.trim(), MAX_HOSTS)
}

/// Warnings for hosts that run more than CROWDED_SLOTS ranks without
/// `devices=` or `addrs=` (which ask for a rank per NIC), one line each
/// (hosts appear once).
pub fn crowded(ranks: &[Host]) -> Vec<String> {
    ranks
        .iter()
        .filter(|h| h.slot == 0 && h.slots > CROWDED_SLOTS && h.devices.is_empty() && h.nic_addr().is_none())
        .map(|h| {
            format!(
                "host `{}` has slots={}: {} workers will run on it; an OpenMPI hostfile's slots often count cores — \
                 give `slots=1`, or `devices=` for one worker per NIC",
                h.name, h.slots, h.slots
            )
        })
        .collect()
}

/// The rank list of a Slurm allocation, in its order: `nodelist` is
/// `SLURM_JOB_NODELIST` (a hostlist expression such as `node[01-03],gpu7`),
/// `tasks_per_node` is `SLURM_TASKS_PER_NODE` (`2(x3),1`), each node's
/// slots (one rank per task; one per node when absent).
pub fn from_slurm(nodelist: &str, tasks_per_node: Option<&str>) -> Result<Vec<Host>, HostfileError> {
    let bad = |var, value: &str, problem| HostfileError::SlurmEnv { var, value: shorten(value), problem };
    for (var, value) in [("SLURM_JOB_NODELIST", Some(nodelist)), ("SLURM_TASKS_PER_NODE", tasks_per_node)] {
        if value.is_some_and(|v| v.len() as u64 > MAX_TEXT) {
            return Err(bad(var, value.unwrap_or_default(), Problem::TextTooLong));
        }
    }
    let names = expand_hostlist(nodelist.trim(), MAX_HOSTS).map_err(|e| bad("SLURM_JOB_NODELIST", nodelist, e))?;
    let slots = match tasks_per_node {
        Some(text) => {
            let counts = slurm_counts(text).map_err(|e| bad("SLURM_TASKS_PER_NODE", text, e))?;
            if counts.len() != names.len() {
                let problem = Problem::CountMismatch { counts: counts.len(), nodes: names.len() };
                return Err(bad("SLURM_TASKS_PER_NODE", text, problem));
            }
            counts
        }
        None => vec![1; names.len()],
    };
    let hosts = names.into_iter().zip(slots).map(|(name, slots)| ((), Host { slots, ..Host::named(&name) })).collect();
    ranks(hosts).map_err(|((), problem)| bad("SLURM_TASKS_PER_NODE", tasks_per_node.unwrap_or_default(), problem))
}

/// Expands Slurm's compressed counts: `2(x3),1` is 2, 2, 2, 1.
fn slurm_counts(text: &str) -> Result<Vec<u32>, Problem> {
    let mut out = Vec::new();
    for part in text.trim().split(',') {
        let (count, times) = match part.split_once("(x") {
            Some((count, rest)) => {
                let times = rest.strip_suffix(')').ok_or_else(|| Problem::Unclosed { part: part.to_string() })?;
                let bad = || Problem::BadRepeat { times: times.to_string(), part: part.to_string() };
                (count, times.parse::<usize>().map_err(|_| bad())?)
            }
            None => (part, 1),
        };
        if times > MAX_HOSTS - out.len() {
            return Err(Problem::TooManyNodes { part: part.to_string() });
        }
        out.extend(std::iter::repeat_n(parse_slots(count)?, times));
    }
    Ok(out)
}

/// Parses one non-empty, comment-free line into one or more hosts, at most `room`.
fn parse_line(content: &str, room: usize) -> Result<Vec<Host>, Problem> {
    let mut words = content.split_whitespace();
    let first = words.next().unwrap_or_default();
    let (names, mpich) = split_mpich_slots(first)?;
    let mut slots = mpich;
    let mut addr = None;
    let mut devices = Vec::new();
    let mut gpus = Vec::new();
    let mut addrs = Vec::new();
    for word in words {
        let (key, value) = word.split_once('=').ok_or_else(|| Problem::Unexpected { word: word.to_string() })?;
        if value.is_empty() {
            return Err(Problem::NoValue { key: key.to_string() });
        }
        match key {
            "slots" | "max_slots" | "max-slots" => {
                let n = parse_slots(value)?;
                if key == "slots" {
                    slots = Some(n);
                }
            }
            "addr" => addr = Some(unicast(value)?),
            "addrs" => addrs = addr_list(value)?,
            "devices" => devices = device_list(value)?,
            "gpus" => gpus = gpu_list(value)?,
            other => return Err(Problem::UnknownAttribute { key: other.to_string() }),
        }
    }
    let slots = count_ranks(first, slots, &devices, &addrs, &gpus)?;
    let names = expand_hostlist(names, room)?;
    if addr.is_some() && names.len() > 1 {
        return Err(Problem::AddrForMany { first: first.to_string(), hosts: names.len() });
    }
    // Two hosts cannot both own one NIC's address.
    if !addrs.is_empty() && names.len() > 1 {
        return Err(Problem::AddrsForMany { first: first.to_string(), hosts: names.len() });
    }
    let host = Host { addr, slots, devices, gpus, addrs, ..Host::named("") };
    Ok(names.into_iter().map(|name| Host { name, ..host.clone() }).collect())
}

/// `gpus=0,1` or `gpus=0000:1b:00.0,0000:1c:00.0`: distinct GPUs, each
/// read as a scenario's `gpu` is; no more than a host can have.
fn gpu_list(value: &str) -> Result<Vec<GpuChoice>, Problem> {
    let mut gpus: Vec<GpuChoice> = Vec::new();
    for entry in value.split(',') {
        if gpus.len() > MAX_GPU_INDEX {
            return Err(Problem::TooManyGpus { list: shorten(value) });
        }
        let gpu = GpuChoice::index_or_bus_id(entry)
            .ok_or_else(|| Problem::GpuEntry { list: shorten(value), entry: shorten(entry) })?;
        if gpus.contains(&gpu) {
            return Err(Problem::GpuTwice { list: shorten(value), entry: entry.to_string() });
        }
        gpus.push(gpu);
    }
    Ok(gpus)
}

/// `devices=mlx5_0,mlx5_1`: distinct RDMA device names, as the kernel forms
/// them (a topology's `nics` names them so too).
pub fn device_list(value: &str) -> Result<Vec<String>, Problem> {
    let mut devices: Vec<String> = Vec::new();
    for name in value.split(',') {
        let ok = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if name.is_empty() || name.len() > MAX_DEVICE_NAME || !ok {
            return Err(Problem::DeviceName { list: shorten(value), name: shorten(name) });
        }
        if devices.iter().any(|d| d == name) {
            return Err(Problem::DeviceTwice { list: shorten(value), name: name.to_string() });
        }
        devices.push(name.to_string());
    }
    Ok(devices)
}

/// Splits MPICH's `host:N`. A colon inside brackets or an IPv6 address is left alone.
fn split_mpich_slots(word: &str) -> Result<(&str, Option<u32>), Problem> {
    let looks_ipv6 = word.matches(':').count() > 1;
    match word.rsplit_once(':') {
        Some((name, n)) if !looks_ipv6 && !name.is_empty() => Ok((name, Some(parse_slots(n)?))),
        _ => Ok((word, None)),
    }
}

fn parse_slots(value: &str) -> Result<u32, Problem> {
    match value.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Problem::Slots { value: value.to_string() }),
    }
}

/// A host name ssh and the data plane can take as it is.
fn validate_name(name: &str) -> Result<(), Problem> {
    if name.is_empty() {
        return Err(Problem::EmptyName);
    }
    if name.len() > MAX_NAME {
        return Err(Problem::NameTooLong { name: shorten(name) });
    }
    if name.starts_with('-') {
        return Err(Problem::OptionLike { name: name.to_string() });
    }
    let ok = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '@'));
    if ok {
        Ok(())
    } else {
        Err(Problem::NotAName { name: name.to_string() })
    }
}

/// Text quoted in an error, cut to a readable length.
fn shorten(text: &str) -> String {
    const KEEP: usize = 80;
    match text.char_indices().nth(KEEP) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
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

    /// (name, slot, devices) of each rank.
    fn places(ranks: &[Host]) -> Vec<(&str, u32, String)> {
        ranks.iter().map(|h| (h.name.as_str(), h.slot, h.devices.join(","))).collect()
    }

    #[test]
    fn openmpi_and_mpich_slots_are_ranks() {
        let hosts = ok("a slots=3\nb:2\nc slots=2 max_slots=4\nd\n");
        assert_eq!(names(&hosts), ["a", "a", "a", "b", "b", "c", "c", "d"]);
        assert_eq!(hosts.iter().map(|h| h.slot).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 0, 1, 0]);
        assert_eq!(hosts.iter().map(|h| h.slots).collect::<Vec<_>>(), [3, 3, 3, 2, 2, 2, 2, 1]);
    }

    #[test]
    fn each_rank_of_a_host_gets_its_own_device() {
        let d = |s: &str| s.to_string();
        // slots as many as devices, or left out: one rank per device, in order.
        let hosts = ok("n1 slots=2 devices=mlx5_0,mlx5_1\nn2 devices=rxe0,rxe1,rxe2\nn3\n");
        assert_eq!(
            places(&hosts),
            [
                ("n1", 0, d("mlx5_0")),
                ("n1", 1, d("mlx5_1")),
                ("n2", 0, d("rxe0")),
                ("n2", 1, d("rxe1")),
                ("n2", 2, d("rxe2")),
                ("n3", 0, d(""))
            ]
        );
        // slots=1: one rank over every device (multi-rail); MPICH's count binds the same way.
        assert_eq!(places(&ok("n1 slots=1 devices=a,b\n")), [("n1", 0, d("a,b"))]);
        assert_eq!(places(&ok("n1:2 devices=a,b\n")), [("n1", 0, d("a")), ("n1", 1, d("b"))]);
        // A hostlist line: every host its own ranks, each on the same device names.
        assert_eq!(names(&ok("n[1-2] devices=a,b\n")), ["n1", "n1", "n2", "n2"]);
    }

    #[test]
    fn slots_beside_devices_must_match_them() {
        let e = err("n0\nn1 slots=3 devices=mlx5_0,mlx5_1\n");
        assert_eq!(
            e,
            "hosts:2: `n1`: slots=3 but devices= lists 2 (mlx5_0, mlx5_1): each rank of a host uses its own device; \
             give slots=2 (or leave slots out) for one rank per device, or slots=1 for one rank over all of them"
        );
        assert!(err("n1:3 devices=a,b,c,d\n").starts_with("hosts:1: `n1:3`: slots=3 but devices= lists 4 (a, b, c, d)"));
    }

    #[test]
    fn device_names_are_checked() {
        let e = err("n1 devices=mlx5_0,,mlx5_1\n");
        assert!(
            e.starts_with("hosts:1: `devices=mlx5_0,,mlx5_1`: `` is not an RDMA device name (up to 63 letters"),
            "{e}"
        );
        let e = err("n1 devices=rxe0,rxe0\n");
        assert!(e.starts_with("hosts:1: `devices=rxe0,rxe0` lists `rxe0` twice"), "{e}");
        assert!(err("n1 devices=a/b\n").contains("`a/b` is not an RDMA device name"));
        assert!(err(&format!("n1 devices={}\n", "d".repeat(64))).contains("is not an RDMA device name"));
    }

    /// `gpus=`: one GPU per rank, rank k of the host on the k-th, by index
    /// or by bus id as a scenario's `gpu` reads them.
    #[test]
    fn gpus_give_each_rank_of_a_host_its_own_gpu() {
        let gpus = |hosts: &[Host]| hosts.iter().map(|h| h.gpu().map(GpuChoice::describe)).collect::<Vec<_>>();
        let hosts = ok("n1 slots=2 gpus=0,1
n2
");
        assert_eq!(gpus(&hosts), [Some("0".into()), Some("1".into()), None]);
        assert!(hosts.iter().all(|h| h.gpus.len() <= 1), "each rank carries its own entry only");
        let hosts = ok("n1 gpus=3
");
        assert_eq!((hosts.len(), hosts[0].gpu()), (1, Some(&GpuChoice::Index(3))), "slots=1 and one entry");
        let hosts = ok("n1 gpus=0000:1b:00.0,00000000:1C:00.0
");
        assert_eq!(gpus(&hosts), [Some("0000:1b:00.0".into()), Some("0000:1c:00.0".into())], "no slots: one per GPU");
        let hosts = ok("n1 devices=mlx5_0,mlx5_1 gpus=1,0
");
        assert_eq!(
            (hosts[1].devices.as_slice(), hosts[1].gpu()),
            (&["mlx5_1".to_string()][..], Some(&GpuChoice::Index(0)))
        );
        let hosts = ok("n1 slots=1 devices=mlx5_0,mlx5_1 gpus=2
");
        assert_eq!((hosts.len(), hosts[0].devices.len(), hosts[0].gpu()), (1, 2, Some(&GpuChoice::Index(2))));
        let hosts = ok("n[1-2]:2 gpus=0,1
");
        assert_eq!(gpus(&hosts), [Some("0".into()), Some("1".into()), Some("0".into()), Some("1".into())]);
        assert_eq!(
            ok("n1 gpus=255
")[0]
                .gpu(),
            Some(&GpuChoice::Index(MAX_GPU_INDEX))
        );
    }

    #[test]
    fn a_gpus_count_other_than_the_ranks_is_refused_naming_the_line() {
        assert_eq!(
            err("a
n1 slots=2 gpus=0
"),
            "hosts:2: `n1`: slots=2 but gpus= lists 1 (0): each rank of a host uses its own GPU; \
             give one GPU per rank (gpus= with 2 entries, or leave slots out for one rank per GPU)"
        );
        assert!(err("n1 slots=1 gpus=0,1
")
        .starts_with("hosts:1: `n1`: slots=1 but gpus= lists 2 (0, 1)"));
        let e = err("n1:3 gpus=0,1
");
        assert!(e.starts_with("hosts:1: `n1:3`: slots=3 but gpus= lists 2 (0, 1)"), "{e}");
        let e = err("n1 devices=a,b gpus=0000:1b:00.0
");
        assert!(e.starts_with("hosts:1: `n1`: slots=2 but gpus= lists 1 (0000:1b:00.0)"), "{e}");
    }

    #[test]
    fn gpu_entries_are_checked() {
        let e = err("n1 gpus=0,first
");
        assert!(
            e.starts_with(
                "hosts:1: `gpus=0,first`: `first` is not a GPU: give CUDA's number of the GPU (0 to 255) or its PCI \
                 bus id as sysfs or nvidia-smi writes it (0000:1b:00.0, 00000000:1B:00.0), e.g. gpus=0,1"
            ),
            "{e}"
        );
        assert!(e.contains("valid forms"), "{e}");
        for bad in ["256", "-1", "auto", "1b:00.0", "0000:zz:00.0", ""] {
            let e = err(&format!(
                "n1 gpus=0,{bad}
"
            ));
            assert!(e.starts_with(&format!("hosts:1: `gpus=0,{bad}`: `{bad}` is not a GPU")), "{e}");
        }
        let e = err("n1 gpus=1,1
");
        assert!(e.starts_with("hosts:1: `gpus=1,1` lists `1` twice; each rank of the host uses its own GPU"), "{e}");
        let e = err("n1 gpus=0000:1b:00.0,00000000:1B:00.0
");
        assert!(e.contains("lists `00000000:1B:00.0` twice"), "the same bus id in two spellings: {e}");
        let many = (0..=256).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        let e = err(&format!(
            "n1 gpus={many}
"
        ));
        assert!(
            e.starts_with("hosts:1: `gpus=0,1,2,") && e.ends_with("` lists more than 256 GPUs, more than a host has"),
            "{e}"
        );
        assert!(err("n1 gpus=
")
        .starts_with("hosts:1: `gpus=` needs a value"));
    }

    #[test]
    fn zero_slots_are_refused() {
        let e = err("n1 slots=0\n");
        assert!(e.starts_with("hosts:1: slot count `0` is not a positive integer"), "{e}");
    }

    #[test]
    fn the_rank_limit_counts_every_slot() {
        // 1 024 hosts of 64 slots (cores) is exactly the limit; one more slot passes it.
        assert_eq!(ok("n[1-1024] slots=64\n").len(), MAX_RANKS);
        let e = err("n[1-1024] slots=64\nlast\n");
        assert_eq!(
            e,
            "hosts:2: `last` with slots=1 makes 65537 ranks or more; a run takes at most 65536 ranks (hostfile::MAX_RANKS): \
             lower `slots` (an OpenMPI hostfile's slots often count cores; fabricbench runs one worker per slot)"
        );
        // Refused from the count, before 4 billion ranks are made.
        assert!(err("n1 slots=4294967295\n").starts_with("hosts:1: `n1` with slots=4294967295 makes 4294967295 ranks"));
        let e = from_slurm("n[1-2]", Some("40000(x2)")).unwrap_err().to_string();
        assert!(e.starts_with("SLURM_TASKS_PER_NODE=`40000(x2)`: `n2` with slots=40000 makes 80000 ranks"), "{e}");
    }

    #[test]
    fn crowded_hosts_are_warned_about_once() {
        let rails = (0..9).map(|k| format!("10.{k}.0.1")).collect::<Vec<_>>().join(",");
        let hosts = ok(&format!("big slots=64\nnics slots=2 devices=a,b\nsmall slots=8\nrails addrs={rails}\n"));
        assert_eq!(hosts.iter().filter(|h| h.name == "rails").count(), 9, "nine ranks, one per address");
        assert_eq!(
            crowded(&hosts),
            ["host `big` has slots=64: 64 workers will run on it; an OpenMPI hostfile's slots often count cores — \
              give `slots=1`, or `devices=` for one worker per NIC"]
        );
    }

    #[test]
    fn slurm_hostlist_keeps_order() {
        let hosts = ok("node[01-03,07]\n");
        assert_eq!(names(&hosts), ["node01", "node02", "node03", "node07"]);
    }

    #[test]
    fn addr_and_devices() {
        let hosts = ok("n1 addr=10.0.0.1 slots=1 devices=mlx5_0,mlx5_1\n");
        assert_eq!(hosts[0].host_addr(), "10.0.0.1");
        assert_eq!(hosts[0].devices, ["mlx5_0", "mlx5_1"]);
        let hosts = ok("n1 addr=10.0.0.1 devices=mlx5_0,mlx5_1\n");
        assert!(hosts.iter().all(|h| h.host_addr() == "10.0.0.1"), "both ranks bind the host's address");
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
        assert_eq!(
            err("a\nb\na\n"),
            "hosts:3: host `a` is listed twice (first at line 1); give a host's ranks once, as `a slots=N`"
        );
        assert!(err("n[1-2]\nn2\n").starts_with("hosts:2: host `n2` is listed twice"));
    }

    /// The hostlist parser drops a repeat within one expression; the file
    /// refuses it as it refuses one on two lines.
    #[test]
    fn a_host_named_twice_on_one_line_is_refused() {
        assert_eq!(
            err("n0\nn[1-2],n1\n"),
            "hosts:2: host `n1` is listed twice (twice on this line); give a host's ranks once, as `n1 slots=N`"
        );
        assert!(err("n[1-3,2]\n").starts_with("hosts:1: host `n2` is listed twice (twice on this line)"));
        assert!(err("r[1-2]n[1,1]\n").starts_with("hosts:1: host `r1n1` is listed twice"));
        assert!(err("n1,n[1-2]\n").starts_with("hosts:1: host `n1` is listed twice"));
        let e = from_slurm("n[1-2],n1", None).unwrap_err().to_string();
        assert_eq!(e, "SLURM_JOB_NODELIST=`n[1-2],n1`: `n[1-2],n1` names host `n1` twice");
        assert_eq!(names(&ok("n[1-2],n3\nm[01-02],m1\n")), ["n1", "n2", "n3", "m01", "m02", "m1"]);
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
        assert!(err("a color=red\n").starts_with(
            "hosts:1: unknown attribute `color` (valid: slots=N, addr=IP, addrs=IP1,IP2, devices=dev1,dev2, gpus=0,1)"
        ));
        assert!(err("a color=red\n").contains("`addrs=IP1,IP2`"), "the valid forms list addrs=");
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
        assert_eq!(names(&hosts), ["node1", "node1", "node2", "node2", "node3", "node3", "gpu7"]);
        assert_eq!(hosts.iter().map(|h| h.slot).collect::<Vec<_>>(), [0, 1, 0, 1, 0, 1, 0]);
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
    fn huge_hostlists_are_refused_before_expanding() {
        // 10^12 names would be terabytes: refused from the count alone.
        let e = err("n1\nnode[1-1000000000000]\n");
        assert_eq!(
            e,
            "hosts:2: `node[1-1000000000000]` names 1000000000000 hosts (with the 1 before it); a run takes at most 65536 hosts (hostfile::MAX_HOSTS)"
        );
        let e = err("r[1-100000000]n[1-100000000]\n");
        assert!(e.starts_with("hosts:1: `r[1-100000000]n[1-100000000]` names 10000000000000000 hosts;"), "{e}");
        let e = err("a[1-99999999999999999999]\n");
        assert!(e.starts_with("hosts:1: bad hostlist expression"), "{e}");
    }

    #[test]
    fn the_host_limit_counts_the_whole_file() {
        let hosts = ok("a[1-65535]\nb\n");
        assert_eq!(hosts.len(), MAX_HOSTS);
        let e = err("a[1-65535]\nb\nc\n");
        assert_eq!(e, "hosts:3: `c` is host 65537 of the file; a run takes at most 65536 hosts (hostfile::MAX_HOSTS)");
    }

    #[test]
    fn names_that_ssh_would_read_as_options_are_refused() {
        let e = err("-oProxyCommand=x\n");
        assert!(e.starts_with("hosts:1: `-oProxyCommand=x` begins with `-`: ssh would read it as an option"), "{e}");
        assert!(err("ok\n-n[1-2]\n").starts_with("hosts:2: `-n1` begins with `-`"));
        assert_eq!(ok(&format!("{}[1-2]\n", "h".repeat(252)))[1].name.len(), MAX_NAME);
        let long = "h".repeat(254);
        assert!(err(&format!("{long}\n")).contains("is longer than 253 characters, the longest host name"));
        assert!(err(&format!("{}[1-2]\n", "h".repeat(253))).contains("makes names longer than 253 characters"));
    }

    /// `addrs=`: one address per rank, rank k of the host on the k-th,
    /// for its data alone; the host's address stays the control plane's.
    #[test]
    fn addrs_give_each_rank_of_a_host_its_own_address() {
        let addrs = |hosts: &[Host]| hosts.iter().map(|h| h.nic_addr().map(str::to_string)).collect::<Vec<_>>();
        let hosts = ok("n1 slots=2 addrs=10.0.0.1,10.1.0.1\nn2\n");
        assert_eq!(addrs(&hosts), [Some("10.0.0.1".into()), Some("10.1.0.1".into()), None]);
        assert!(hosts.iter().all(|h| h.addrs.len() <= 1), "each rank carries its own entry only");
        assert_eq!(hosts[1].host_addr(), "n1", "the host's own address stays its name");
        // Without slots: one rank per address; IPv6 in its canonical form.
        let hosts = ok("n1 addrs=fd00::1,fd01:0::1,10.2.0.1\n");
        assert_eq!(addrs(&hosts), [Some("fd00::1".into()), Some("fd01::1".into()), Some("10.2.0.1".into())]);
        assert_eq!(hosts.iter().map(|h| h.slot).collect::<Vec<_>>(), [0, 1, 2]);
        // addr= beside addrs=: the host's (control) address, the ranks' data on their own.
        let hosts = ok("n1 addr=192.168.0.1 addrs=10.0.0.1,10.1.0.1\n");
        assert_eq!(hosts.iter().map(Host::host_addr).collect::<Vec<_>>(), ["192.168.0.1", "192.168.0.1"]);
        assert_eq!(addrs(&hosts), [Some("10.0.0.1".into()), Some("10.1.0.1".into())]);
        // With devices= and gpus=: rank k on the k-th of each; MPICH's count the same.
        let hosts = ok("n1 devices=mlx5_0,mlx5_1 addrs=10.0.0.1,10.1.0.1 gpus=0,1\n");
        assert_eq!((hosts[1].devices.as_slice(), hosts[1].nic_addr()), (&["mlx5_1".to_string()][..], Some("10.1.0.1")));
        assert_eq!(hosts[1].gpu(), Some(&GpuChoice::Index(1)));
        assert_eq!(addrs(&ok("n1:2 addrs=10.0.0.1,10.1.0.1\n")).len(), 2);
        // slots=1 over two devices (multi-rail) is one rank: one address.
        let hosts = ok("n1 slots=1 devices=mlx5_0,mlx5_1 addrs=10.0.0.1\n");
        assert_eq!((hosts.len(), hosts[0].devices.len(), hosts[0].nic_addr()), (1, 2, Some("10.0.0.1")));
        // The addresses set the count that gpus= then matches.
        assert_eq!(ok("n1 addrs=10.0.0.1,10.1.0.1 gpus=0,1\n").len(), 2);
    }

    #[test]
    fn an_addrs_count_other_than_the_ranks_is_refused_naming_the_line() {
        assert_eq!(
            err("a\nn1 slots=3 addrs=10.0.0.1,10.1.0.1\n"),
            "hosts:2: `n1`: slots=3 but addrs= lists 2 (10.0.0.1, 10.1.0.1): each rank of a host binds its TCP data \
             to its own address; give one address per rank (3 in addrs=)"
        );
        let e = err("n1:2 addrs=10.0.0.1\n");
        assert!(e.starts_with("hosts:1: `n1:2`: slots=2 but addrs= lists 1 (10.0.0.1)"), "{e}");
        let e = err("n1 slots=1 addrs=10.0.0.1,10.1.0.1\n");
        assert!(e.starts_with("hosts:1: `n1`: slots=1 but addrs= lists 2"), "{e}");
        let e = err("n1 devices=a,b,c addrs=10.0.0.1,10.1.0.1\n");
        assert!(e.starts_with("hosts:1: `n1`: devices= makes 3 ranks but addrs= lists 2 (10.0.0.1, 10.1.0.1)"), "{e}");
        assert!(e.ends_with("(3 in addrs=)"), "a count, not a form: no list of forms follows: {e}");
        let e = err("n1 addrs=10.0.0.1,10.1.0.1 gpus=0\n");
        assert!(e.starts_with("hosts:1: `n1`: slots=2 but gpus= lists 1 (0)"), "{e}");
        let e = err("n[1-2] addrs=10.0.0.1\n");
        assert!(
            e.starts_with("hosts:1: `addrs=` gives one host's ranks their addresses but `n[1-2]` expands to 2 hosts")
        );
    }

    #[test]
    fn addrs_entries_are_checked() {
        let e = err("n0\nn1 addrs=10.0.0.1,ib0\n");
        assert!(
            e.starts_with(
                "hosts:2: `addrs=10.0.0.1,ib0`: `ib0` is not an IP address: give one IPv4 or IPv6 address per rank \
                 of the host, e.g. addrs=10.0.0.1,10.1.0.1"
            ),
            "{e}"
        );
        assert!(e.contains("valid forms"), "{e}");
        for bad in ["999.1.1.1", "10.0.0", "", "10.0.0.1:80", "[fd00::1]", "10.0.0.1/24"] {
            let e = err(&format!("n1 addrs=10.0.0.1,{bad}\n"));
            assert!(e.starts_with(&format!("hosts:1: `addrs=10.0.0.1,{bad}`: `{bad}` is not an IP address")), "{e}");
        }
        for bad in ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "ff02::1"] {
            let e = err(&format!("n1 addrs={bad}\n"));
            assert!(e.starts_with(&format!("hosts:1: `addrs={bad}`: `{bad}` is not a unicast address")), "{e}");
        }
        let e = err("n1 addrs=10.0.0.1,10.0.0.1\n");
        assert!(e.starts_with("hosts:1: `addrs=10.0.0.1,10.0.0.1` lists `10.0.0.1` twice; each rank"), "{e}");
        let e = err("n1 addrs=fd00::1,fd00:0::1\n");
        assert!(e.contains("lists `fd00:0::1` twice"), "one address in two spellings: {e}");
        assert!(err("n1 addrs=\n").starts_with("hosts:1: `addrs=` needs a value"));
    }

    #[test]
    fn addrs_are_bounded_by_the_ranks_a_run_takes() {
        let many = (0..=MAX_RANKS).map(|i| format!("10.{}.{}.1", i >> 8, i & 255)).collect::<Vec<_>>().join(",");
        let e = err(&format!("n1 addrs={many}\n"));
        assert!(e.starts_with("hosts:1: `addrs=10.0.0.1,10.0.1.1,"), "{e}");
        assert!(
            e.ends_with("` lists more than 65536 addresses, more ranks than a run takes (hostfile::MAX_RANKS)"),
            "{e}"
        );
        // As many as a run takes, on one host: the run's limit, not the list's.
        let all = (0..MAX_RANKS).map(|i| format!("10.{}.{}.1", i >> 8, i & 255)).collect::<Vec<_>>().join(",");
        assert_eq!(ok(&format!("n1 addrs={all}\n")).len(), MAX_RANKS);
        let e = err(&format!("n0\nn1 addrs={all}\n"));
        assert!(e.starts_with("hosts:2: `n1` with slots=65536 makes 65537 ranks or more"), "{e}");
    }

    #[test]
    fn addr_must_be_a_unicast_ip() {
        let e = err("n1 addr=999.1.1.1\n");
        assert!(e.starts_with("hosts:1: `addr=999.1.1.1` is not an IP address (e.g. addr=10.0.0.1"), "{e}");
        for bad in ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "ff02::1"] {
            let e = err(&format!("n1 addr={bad}\n"));
            assert!(e.starts_with(&format!("hosts:1: `addr={bad}` is not a unicast address")), "{e}");
        }
        assert_eq!(ok("n1 addr=fd00::1\n")[0].host_addr(), "fd00::1");
    }

    #[test]
    fn slurm_strings_are_bounded() {
        let e = from_slurm("node[1-1000000000]", None).unwrap_err().to_string();
        assert!(
            e.starts_with("SLURM_JOB_NODELIST=`node[1-1000000000]`: `node[1-1000000000]` names 1000000000 hosts;"),
            "{e}"
        );
        let e = from_slurm("n[1-2]", Some("1(x1000000000000)")).unwrap_err().to_string();
        assert_eq!(
            e,
            "SLURM_TASKS_PER_NODE=`1(x1000000000000)`: counts more than 65536 nodes (at `1(x1000000000000)`), the most one run takes"
        );
        let long = "n".repeat(MAX_TEXT as usize + 1);
        let e = from_slurm(&long, None).unwrap_err().to_string();
        assert!(e.starts_with("SLURM_JOB_NODELIST=`nnnn") && e.ends_with("…`: is longer than 67108864 bytes"), "{e}");
    }

    #[test]
    fn an_empty_nodelist_names_no_host() {
        // Found by fuzzing (fuzz/corpus/slurm_env/empty-nodelist): it was one host named ``.
        let e = from_slurm("", None).unwrap_err().to_string();
        assert_eq!(e, "SLURM_JOB_NODELIST=``: an empty host name");
    }

    #[test]
    fn an_endless_file_is_refused() {
        let e = read(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(e, "hostfile /dev/zero is larger than 67108864 bytes; a hostfile of 65536 hosts is far smaller");
    }

    #[test]
    fn missing_file_names_path() {
        let e = read(Path::new("/nonexistent/hosts")).unwrap_err().to_string();
        assert!(e.starts_with("cannot read hostfile /nonexistent/hosts:"), "{e}");
    }
}
