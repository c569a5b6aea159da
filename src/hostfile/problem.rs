//! What is wrong with one hostfile line or one Slurm variable, as a typed
//! value; [`super::HostfileError`] adds where it is (file and line, or the
//! variable and its value).

use std::fmt;

use super::{GpuChoice, MAX_DEVICE_NAME, MAX_GPU_INDEX, MAX_HOSTS, MAX_NAME, MAX_RANKS, MAX_TEXT};

/// One line's (or one Slurm variable's) problem. Texts quoted from the
/// input are already cut to a readable length.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("slot count `{value}` is not a positive integer")]
    Slots { value: String },
    #[error("unexpected `{word}` after the host name")]
    Unexpected { word: String },
    #[error("`{key}=` needs a value")]
    NoValue { key: String },
    #[error("unknown attribute `{key}` (valid: slots=N, addr=IP, addrs=IP1,IP2, devices=dev1,dev2, gpus=0,1)")]
    UnknownAttribute { key: String },
    #[error(
        "`{first}`: slots={slots} but devices= lists {count} ({list}): each rank of a host uses its own device; \
         give slots={count} (or leave slots out) for one rank per device, or slots=1 for one rank over all of them",
        count = devices.len(), list = devices.join(", ")
    )]
    SlotsBesideDevices { first: String, slots: u32, devices: Vec<String> },
    #[error(
        "`devices={list}`: `{name}` is not an RDMA device name (up to {MAX_DEVICE_NAME} letters, digits, `_`, `-`, `.`; \
         e.g. devices=mlx5_0,mlx5_1)"
    )]
    DeviceName { list: String, name: String },
    #[error("`devices={list}` lists `{name}` twice; each rank of the host uses its own device")]
    DeviceTwice { list: String, name: String },
    #[error(
        "`{first}`: slots={slots} but gpus= lists {count} ({list}): each rank of a host uses its own GPU; \
         give one GPU per rank (gpus= with {slots} entries, or leave slots out for one rank per GPU)",
        count = gpus.len(), list = gpus.iter().map(GpuChoice::describe).collect::<Vec<_>>().join(", ")
    )]
    SlotsBesideGpus { first: String, slots: u32, gpus: Vec<GpuChoice> },
    #[error(
        "`gpus={list}`: `{entry}` is not a GPU: give CUDA's number of the GPU (0 to {MAX_GPU_INDEX}) or its PCI bus \
         id as sysfs or nvidia-smi writes it (0000:1b:00.0, 00000000:1B:00.0), e.g. gpus=0,1"
    )]
    GpuEntry { list: String, entry: String },
    #[error("`gpus={list}` lists `{entry}` twice; each rank of the host uses its own GPU")]
    GpuTwice { list: String, entry: String },
    #[error("`gpus={list}` lists more than {} GPUs, more than a host has", MAX_GPU_INDEX + 1)]
    TooManyGpus { list: String },
    #[error("`addr=` names one address but `{first}` expands to {hosts} hosts")]
    AddrForMany { first: String, hosts: usize },
    #[error(
        "`{first}`: {ranks} but addrs= lists {count} ({list}): each rank of a host binds its TCP data to its own \
         address; give one address per rank ({wanted} in addrs=)",
        count = addrs.len(), list = addrs.join(", "), wanted = ranks.count()
    )]
    // A boxed list keeps every hostfile error within clippy's size for an Err.
    SlotsBesideAddrs { first: String, ranks: RankCount, addrs: Box<[String]> },
    #[error(
        "`addrs={list}`: `{entry}` is not an IP address: give one IPv4 or IPv6 address per rank of the host, \
         e.g. addrs=10.0.0.1,10.1.0.1"
    )]
    AddrsEntry { list: String, entry: String },
    #[error(
        "`addrs={list}`: `{entry}` is not a unicast address: give the IP each rank's TCP data binds to \
         (not 0.0.0.0, ::, multicast or 255.255.255.255)"
    )]
    AddrsNotUnicast { list: String, entry: String },
    #[error("`addrs={list}` lists `{entry}` twice; each rank of the host uses its own address")]
    AddrsTwice { list: String, entry: String },
    #[error("`addrs={list}` lists more than {MAX_RANKS} addresses, more ranks than a run takes (hostfile::MAX_RANKS)")]
    TooManyAddrs { list: String },
    #[error("`addrs=` gives one host's ranks their addresses but `{first}` expands to {hosts} hosts; give each host a line of its own")]
    AddrsForMany { first: String, hosts: usize },
    #[error("`{name}` is host {} of the file; {}", MAX_HOSTS + 1, at_most())]
    HostPastLimit { name: String },
    #[error("`{expr}` names {names} hosts{}; {}", before_it(*before), at_most())]
    TooManyNames { expr: String, names: u64, before: usize },
    #[error("`{expr}` makes names longer than {MAX_NAME} characters")]
    NamesTooLong { expr: String },
    #[error("bad hostlist expression `{expr}`: {detail}")]
    BadHostlist { expr: String, detail: String },
    /// A hostlist expression that names one host more than once, such as
    /// `n[1-2],n1` (the hostlist parser would drop the repeat silently).
    #[error("`{expr}` names host `{host}` twice")]
    Repeated { expr: String, host: String },
    #[error("an empty host name")]
    EmptyName,
    #[error("`{name}` is longer than {MAX_NAME} characters, the longest host name")]
    NameTooLong { name: String },
    #[error("`{name}` begins with `-`: ssh would read it as an option; host names begin with a letter or digit")]
    OptionLike { name: String },
    #[error("`{name}` is not a host name (letters, digits, `.`, `-`, `_`, or a hostlist like node[01-04])")]
    NotAName { name: String },
    #[error("`addr={value}` is not an IP address (e.g. addr=10.0.0.1 or addr=fd00::1)")]
    NotAnIp { value: String },
    #[error(
        "`addr={value}` is not a unicast address: give the one IP this host's data plane binds to (e.g. addr=10.0.0.1)"
    )]
    NotUnicast { value: String },
    #[error(
        "`{host}` with slots={slots} makes {total} ranks or more; a run takes at most {MAX_RANKS} ranks (hostfile::MAX_RANKS): \
         lower `slots` (an OpenMPI hostfile's slots often count cores; fabricbench runs one worker per slot)"
    )]
    TooManyRanks { host: String, slots: u32, total: usize },
    #[error("is longer than {MAX_TEXT} bytes")]
    TextTooLong,
    #[error("`{part}` lacks its closing `)`")]
    Unclosed { part: String },
    #[error("`{times}` in `{part}` is not a repeat count")]
    BadRepeat { times: String, part: String },
    #[error("counts more than {MAX_HOSTS} nodes (at `{part}`), the most one run takes")]
    TooManyNodes { part: String },
    #[error("gives {counts} count(s) for the {nodes} node(s) of SLURM_JOB_NODELIST")]
    CountMismatch { counts: usize, nodes: usize },
}

impl Problem {
    /// A size past a limit rather than a wrong form: its message needs no
    /// list of the valid forms.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            Problem::SlotsBesideDevices { .. }
                | Problem::SlotsBesideAddrs { .. }
                | Problem::TooManyAddrs { .. }
                | Problem::SlotsBesideGpus { .. }
                | Problem::TooManyGpus { .. }
                | Problem::HostPastLimit { .. }
                | Problem::TooManyNames { .. }
                | Problem::TooManyRanks { .. }
        )
    }
}

/// What set a line's count of ranks, for a list beside it that does not match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankCount {
    /// `slots=N` (or MPICH's `host:N`).
    Slots(u32),
    /// One rank per device of `devices=`, slots not given.
    Devices(u32),
}

impl RankCount {
    pub fn count(self) -> u32 {
        match self {
            RankCount::Slots(n) | RankCount::Devices(n) => n,
        }
    }
}

impl fmt::Display for RankCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RankCount::Slots(n) => write!(f, "slots={n}"),
            RankCount::Devices(n) => write!(f, "devices= makes {n} ranks"),
        }
    }
}

fn at_most() -> String {
    format!("a run takes at most {MAX_HOSTS} hosts (hostfile::MAX_HOSTS)")
}

fn before_it(before: usize) -> String {
    match before {
        0 => String::new(),
        n => format!(" (with the {n} before it)"),
    }
}
