//! `fabricbench pair`: two hosts, perftest's flags, no scenario file.
//! The flags keep perftest's letters and meanings (ib_write_bw -h); the
//! translation into a scenario is in `crate::commands::pair_scenario`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::{SaveArgs, SshArgs};
use crate::launch::choose::LauncherKind;
use crate::scenario::memory::{GpuChoice, Memory, MemorySides};
use crate::scenario::rdma::Connection;
use crate::scenario::{Op, Transport};
use crate::units::ByteSize;

pub const EXAMPLES: &str = "\
Examples:
  # ib_write_bw -a -q 4 -l 16 -d mlx5_0 -x 3 --report_gbits, between two hosts over ssh
  fabricbench pair node01 node02 write -a -q 4 -l 16 -d mlx5_0 -x 3 --report-gbits

  # ib_read_lat: 2-byte reads one at a time (the full round trip, like ib_read_lat)
  fabricbench pair node01 node02 read_lat

  # ib_send_bw -c UD: datagrams up to the path MTU; the table notes what was lost
  fabricbench pair node01 node02 send -c UD -s 1K,4K

  # ib_atomic_lat -A CMP_AND_SWAP: one 8-byte compare-and-swap at a time (full round trip)
  fabricbench pair node01 node02 atomic --lat -A CMP_AND_SWAP

  # two ranks on this machine (Soft-RoCE, or a NIC in loopback), sizes 2 B .. 64 KiB, 0.5 s each
  fabricbench pair localhost localhost write -a --max-size 64K -D 0.5

  # DSCP 26 on the wire (RoCE v2: traffic class 104 = 26 << 2), service level 3 on InfiniBand
  fabricbench pair node01 node02 write --tclass 104 -S 3

  # the QPs connected through rdma_cm to node02's address, like ib_write_bw -R
  fabricbench pair node01 node02 write -R

  # ib_write_bw --use_cuda=0 --use_cuda_dmabuf: both ends in GPU 0's memory, registered through dma-buf
  fabricbench pair node01 node02 write -s 1M --use_cuda=0 --use_cuda_dmabuf

  # ucx_perftest -m cuda,host: node01 sends from GPU 1's memory into node02's host memory
  fabricbench pair node01 node02 write -s 1M -m cuda,host --use_cuda=1

  # node01 -> node02 over TCP sockets, for comparison (-q = parallel connections)
  fabricbench pair node01 node02 send -s 1M --transport tcp -q 4

OP is write, read, send, write_imm, send_imm, atomic (fetch-and-add; -A CMP_AND_SWAP
for compare-and-swap), fetch_add or cmp_swap; write_lat, read_lat, send_lat and
atomic_lat (or --lat) measure latency like ib_*_lat. HOST_A initiates (perftest's client), HOST_B
is the target (perftest's server); rank 0, the coordinator, runs on HOST_A.

Deviations from perftest:
  * Every size runs for a time window, -D (default 1 s, after a 200 ms warm-up),
    not for -n iterations: #iterations is what completed in the window (all QPs).
  * BW peak is the best 100 ms interval of the window (a tenth of -D).
  * BW is in Gb/s (1e9 bit/s) with --report-gbits, else MB/sec = MiB/s (2^20 B/s)
    as perftest prints it. Latency is the half round trip (read, atomics: round trip), µs.
  * -c is RC or UD (UD: send only; BW is what the receiver got, and the lost
    messages are noted under the table); -F is accepted; -b runs both directions
    at once and reports the sum.
  * --use_cuda and --use_cuda_bus_id put both hosts' buffers on that GPU (bandwidth of
    write, read and send); without --use_cuda_dmabuf the memory is registered through
    dma-buf where the driver exports it, else peer memory (perftest: peer memory only).
    -m SEND[,RECV] (ucx_perftest's) says which sides are in GPU memory: with it the GPU
    flags name the GPU only; -m cuda alone takes the GPU nearest each host's NIC.

The full result (run.json, CSVs, report.html) goes to results/<UTC time>-pair-<op>/
as for any run (--no-save: none).";

#[derive(Debug, Args)]
pub struct PairArgs {
    /// The initiating host (perftest's client): an ssh destination, or
    /// `localhost` for a local rank. Rank 0 (the coordinator) runs here
    pub host_a: String,
    /// The target host (perftest's server); `localhost localhost` runs two
    /// local ranks on 127.0.0.1 and 127.0.0.2
    pub host_b: String,
    /// What to measure: write, read, send, write_imm, send_imm, atomic,
    /// fetch_add, cmp_swap; write_lat, read_lat, send_lat, atomic_lat for latency
    #[arg(value_parser = PairOp::parse, value_name = "OP")]
    pub op: PairOp,
    /// Latency (ping-pong; reads and atomics one at a time) instead of
    /// bandwidth, like ib_*_lat, e.g. `atomic --lat`
    #[arg(long)]
    pub lat: bool,
    /// Message size (perftest -s; default 65536, latency 2); a comma list
    /// runs one size after another, e.g. 4K,64K,1M
    #[arg(short, long, value_delimiter = ',', value_parser = ByteSize::parse, value_name = "SIZE")]
    pub size: Vec<ByteSize>,
    /// Every size from 2 B to 8 MiB, powers of two (perftest -a; TCP stops at its 4 MiB limit)
    #[arg(short = 'a', long, conflicts_with = "size")]
    pub all: bool,
    /// With -a: stop at this size (e.g. 64K), to keep a sweep short
    #[arg(long, requires = "all", value_parser = ByteSize::parse, value_name = "SIZE")]
    pub max_size: Option<ByteSize>,
    /// Seconds each size runs (perftest -D; "500ms" works too). Default 1
    #[arg(short = 'D', long, value_parser = parse_seconds, value_name = "SECONDS")]
    pub duration: Option<Duration>,
    /// Traffic before each size's window opens, not counted
    #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub warmup: Duration,
    /// perftest's iteration count: not supported (every size runs for -D)
    #[arg(short = 'n', long = "iters", value_name = "ITERS")]
    pub iters: Option<u64>,
    /// QPs (perftest -q); TCP: parallel connections
    #[arg(short = 'q', long = "qp", value_name = "N")]
    pub qps: Option<u32>,
    /// WRs per doorbell (perftest -l)
    #[arg(short = 'l', long = "post_list", alias = "post-list", value_name = "N")]
    pub post_list: Option<u32>,
    /// Outstanding sends per QP (perftest -t, 128)
    #[arg(short = 't', long = "tx-depth", value_name = "N")]
    pub tx_depth: Option<u32>,
    /// Receives kept posted per QP for send and write_imm (perftest -r, 512)
    #[arg(short = 'r', long = "rx-depth", value_name = "N")]
    pub rx_depth: Option<u32>,
    /// Largest message sent inline (perftest -I; default 0, latency 220)
    #[arg(short = 'I', long = "inline_size", alias = "inline-size", value_name = "BYTES")]
    pub inline_size: Option<u32>,
    /// Signal a completion every N WRs (perftest -Q / --cq-mod, 100)
    #[arg(short = 'Q', long = "cq-mod", value_name = "N")]
    pub cq_moderation: Option<u32>,
    /// Sleep on completion events instead of busy polling (perftest -e)
    #[arg(short = 'e', long)]
    pub events: bool,
    /// Both directions at once; the table shows their sum (perftest -b)
    #[arg(short = 'b', long)]
    pub bidirectional: bool,
    /// RDMA device on both hosts (perftest -d; default: the first with an ACTIVE port)
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub device: Option<String>,
    /// Port of the device (perftest -i; default: its first ACTIVE port)
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u8>,
    /// GID index (perftest -x; default: RoCE v2 + IPv4 first, like perftest)
    #[arg(short = 'x', long = "gid-index", value_name = "INDEX")]
    pub gid_index: Option<u32>,
    /// GRH traffic class 0-255 (perftest --tclass); RoCE v2 sends tclass >> 2 as
    /// the DSCP, e.g. --tclass 104 for DSCP 26
    #[arg(long = "tclass", value_name = "TCLASS")]
    pub tclass: Option<u32>,
    /// InfiniBand service level 0-15 (perftest -S/--sl)
    #[arg(short = 'S', long = "sl", value_name = "SL")]
    pub sl: Option<u32>,
    /// Connect the QPs through rdma_cm (librdmacm) to HOST_B's address (perftest -R)
    #[arg(short = 'R', long = "rdma_cm", alias = "rdma-cm")]
    pub rdma_cm: bool,
    /// With OP atomic: FETCH_AND_ADD (default) or CMP_AND_SWAP (perftest -A)
    #[arg(short = 'A', long = "atomic_type", alias = "atomic-type", value_enum, value_name = "TYPE")]
    pub atomic_type: Option<AtomicType>,
    /// Shards the QPs are split over, run as lanes of the engines (one
    /// thread per core used, sharing its CQ; perftest has one thread)
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    #[command(flatten)]
    pub gpu: PairGpuArgs,
    /// Connection type (perftest -c): RC, or UD for send (messages up to the
    /// path MTU, losses counted), e.g. `send -c UD -s 1024`
    #[arg(short = 'c', long = "connection", value_enum, default_value = "RC")]
    pub connection: Connection,
    /// Accepted for perftest's habit (-F: no cpufreq warning); fabricbench never warns
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// Data validation: each message carries a pattern of its flow, number and
    /// offsets that the receiver (the reader, for read) checks; a bad byte
    /// fails the run (exit 1). Costs throughput (perftest --data_validation)
    #[arg(long = "data-validation", alias = "data_validation")]
    pub data_validation: bool,
    /// Report BW in Gb/s (1e9 bit/s) instead of MB/sec (perftest --report_gbits)
    #[arg(long = "report-gbits", alias = "report_gbits")]
    pub report_gbits: bool,
    /// rdma (verbs, RC) or tcp (socket streams, OP send only)
    #[arg(long, value_enum, default_value = "rdma")]
    pub transport: Transport,
    /// How the two workers start (auto: local when both hosts are this machine, else ssh)
    #[arg(long, value_enum, default_value_t = LauncherKind::Auto)]
    pub launcher: LauncherKind,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// TCP port of rank 0's coordinator, the out-of-band exchange (perftest -p; 0 = any free port)
    #[arg(short = 'p', long, default_value_t = 0)]
    pub port: u16,
    #[command(flatten)]
    pub save: SaveArgs,
    /// Write the full result (run.json schema) to FILE, `-` for stdout (the table then goes to stderr)
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// No progress bars or progress lines
    #[arg(long)]
    pub no_progress: bool,
}

/// perftest's GPUDirect flags: both hosts' buffers in GPU memory, as a
/// scenario's `memory = "cuda"`, `gpu` and `[group.rdma] gpu_registration`;
/// and ucx_perftest's -m: which side is in which memory.
#[derive(Debug, Default, Args)]
pub struct PairGpuArgs {
    /// The memory each flow sends from (HOST_A's, without -b) and receives into, as
    /// ucx_perftest's -m: host, cuda, cuda-managed or cuda-host; one name is both, e.g. -m cuda,host
    /// (scenario `memory = { sender = "cuda", receiver = "host" }`). The GPU is
    /// --use_cuda's or --use_cuda_bus_id's, else each host's nearest its NIC (`gpu = "auto"`)
    #[arg(short = 'm', long = "memory", value_name = "SEND[,RECV]", value_parser = parse_memory_sides)]
    pub memory: Option<MemorySides>,
    /// Buffers in memory of CUDA's GPU N on both hosts (perftest --use_cuda=N;
    /// scenario `memory = "cuda"`, `gpu = N`); with -m, the GPU of the sides it
    /// puts in GPU memory. Bandwidth of write, read, send
    #[arg(long = "use_cuda", alias = "use-cuda", value_name = "GPU", value_parser = parse_gpu_index)]
    pub use_cuda: Option<GpuChoice>,
    /// As --use_cuda, the GPU by PCI address, e.g. 0000:1b:00.0 or nvidia-smi's
    /// 00000000:1B:00.0 (perftest --use_cuda_bus_id; scenario `gpu = "0000:1b:00.0"`)
    #[arg(long = "use_cuda_bus_id", alias = "use-cuda-bus-id", value_name = "BUS_ID", value_parser = parse_gpu_bus_id)]
    pub use_cuda_bus_id: Option<GpuChoice>,
    /// Register the GPU memory with the NIC through dma-buf, no fallback
    /// (perftest --use_cuda_dmabuf; scenario `gpu_registration = "dmabuf"`).
    /// Without it: dma-buf when the driver exports the buffer, else peer memory
    #[arg(long = "use_cuda_dmabuf", alias = "use-cuda-dmabuf")]
    pub use_cuda_dmabuf: bool,
}

/// --use_cuda's GPU: CUDA's number.
fn parse_gpu_index(text: &str) -> Result<GpuChoice, BadValue> {
    text.trim().parse().map(GpuChoice::Index).map_err(|_| {
        BadValue(format!("`{text}` is not a GPU index: give CUDA's number of the GPU (0, 1, …), or its PCI address with --use_cuda_bus_id"))
    })
}

/// --use_cuda_bus_id's GPU: a PCI address.
fn parse_gpu_bus_id(text: &str) -> Result<GpuChoice, BadValue> {
    GpuChoice::bus_id(text.trim()).ok_or_else(|| {
        BadValue(format!(
            "`{text}` is not a PCI bus id: give the GPU's address as `nvidia-smi --query-gpu=pci.bus_id --format=csv` \
             prints it, e.g. 0000:1b:00.0 or 00000000:1B:00.0"
        ))
    })
}

/// -m/--memory's SEND[,RECV], as ucx_perftest writes it (`-m cuda,host`):
/// the sender's memory and the receiver's, one name for both.
fn parse_memory_sides(text: &str) -> Result<MemorySides, BadValue> {
    let one = |name: &str| {
        Memory::named(name.trim()).ok_or_else(|| {
            let valid = Memory::ALL.map(Memory::name).join(", ");
            BadValue(format!("`{name}` is not a memory: give SEND[,RECV], each one of {valid} (e.g. -m cuda,host)"))
        })
    };
    match text.split(',').collect::<Vec<_>>().as_slice() {
        [both] => one(both).map(|m| MemorySides { sender: m, receiver: m }),
        [sender, receiver] => Ok(MemorySides { sender: one(sender)?, receiver: one(receiver)? }),
        more => Err(BadValue(format!(
            "`{text}` names {} memories: give the sender's and, after a comma, the receiver's (e.g. -m cuda,host)",
            more.len()
        ))),
    }
}

/// A flag's value that names no GPU or memory.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadValue(String);

/// The OP argument: an operation, and whether it names a latency test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairOp {
    pub op: OpName,
    pub latency: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpName {
    Op(Op),
    /// perftest's ib_atomic_bw: fetch-and-add unless -A CMP_AND_SWAP.
    Atomic,
}

impl PairOp {
    /// `write`, `write_lat`, `write-lat`, `atomic`, `fetch_add`, …
    pub fn parse(text: &str) -> Result<PairOp, NotAnOp> {
        let (name, latency) = match text.strip_suffix("_lat").or_else(|| text.strip_suffix("-lat")) {
            Some(name) => (name, true),
            None => (text, false),
        };
        let op = match Op::named(name) {
            Some(op) => OpName::Op(op),
            None if name == "atomic" => OpName::Atomic,
            None => return Err(NotAnOp(text.to_string())),
        };
        Ok(PairOp { op, latency })
    }
}

/// An OP argument that names no operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not an operation; use write, read, send, write_imm, send_imm, atomic, fetch_add, cmp_swap (add _lat \
     for latency: write_lat, read_lat, send_lat, atomic_lat)"
)]
pub struct NotAnOp(pub String);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AtomicType {
    #[value(name = "FETCH_AND_ADD", alias = "fetch_and_add")]
    FetchAndAdd,
    #[value(name = "CMP_AND_SWAP", alias = "cmp_and_swap")]
    CmpAndSwap,
}

/// perftest's -D is whole seconds; fractions and humantime ("500ms") work too.
fn parse_seconds(text: &str) -> Result<Duration, NotSeconds> {
    let parsed = match text.trim().parse::<f64>() {
        // try_: a number of seconds too large for a Duration is refused, not a panic.
        Ok(s) if s > 0.0 => Duration::try_from_secs_f64(s).ok(),
        Ok(_) => None,
        Err(_) => humantime::parse_duration(text).ok(),
    };
    match parsed {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(NotSeconds(text.to_string())),
    }
}

/// A -D argument that is no positive duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a duration; give seconds (e.g. 2, 0.5) or e.g. 500ms")]
pub struct NotSeconds(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_parse_like_perftest_tool_names() {
        assert_eq!(PairOp::parse("write").unwrap(), PairOp { op: OpName::Op(Op::Write), latency: false });
        assert_eq!(PairOp::parse("read_lat").unwrap(), PairOp { op: OpName::Op(Op::Read), latency: true });
        assert_eq!(PairOp::parse("send-lat").unwrap(), PairOp { op: OpName::Op(Op::Send), latency: true });
        assert_eq!(PairOp::parse("write-imm").unwrap().op, OpName::Op(Op::WriteImm));
        assert_eq!(PairOp::parse("atomic").unwrap().op, OpName::Atomic);
        assert!(PairOp::parse("wirte").unwrap_err().to_string().starts_with("`wirte` is not an operation; use write,"));
    }

    #[test]
    fn memory_sides_as_ucx_perftest_writes_them() {
        let sides = |sender, receiver| Ok(MemorySides { sender, receiver });
        assert_eq!(parse_memory_sides("host"), sides(Memory::Host, Memory::Host));
        assert_eq!(parse_memory_sides("cuda"), sides(Memory::Cuda, Memory::Cuda), "one name is both sides");
        assert_eq!(parse_memory_sides("cuda,host"), sides(Memory::Cuda, Memory::Host));
        assert_eq!(parse_memory_sides("host,cuda-managed"), sides(Memory::Host, Memory::CudaManaged));
        assert_eq!(parse_memory_sides("cuda-managed"), sides(Memory::CudaManaged, Memory::CudaManaged));
        assert_eq!(parse_memory_sides("cuda-host,cuda"), sides(Memory::CudaHost, Memory::Cuda));
    }

    #[test]
    fn memory_names_other_than_the_scenarios_are_refused_listing_them() {
        let e = |text: &str| parse_memory_sides(text).unwrap_err().to_string();
        assert_eq!(
            e("rocm"),
            "`rocm` is not a memory: give SEND[,RECV], each one of host, cuda, cuda-managed, cuda-host (e.g. -m cuda,host)"
        );
        assert!(e("cuda,gpu").starts_with("`gpu` is not a memory"));
        assert!(e("Cuda").starts_with("`Cuda` is not a memory"), "names are the scenario's, lowercase");
        assert!(e("cuda_managed").starts_with("`cuda_managed` is not a memory"));
        assert!(e("").starts_with("`` is not a memory"));
        assert!(e("cuda,").starts_with("`` is not a memory"));
        assert_eq!(
            e("cuda,host,host"),
            "`cuda,host,host` names 3 memories: give the sender's and, after a comma, the receiver's (e.g. -m cuda,host)"
        );
    }

    #[test]
    fn seconds_like_perftest_or_humantime() {
        assert_eq!(parse_seconds("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_seconds("0.5").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_seconds("300ms").unwrap(), Duration::from_millis(300));
        assert!(parse_seconds("0").is_err());
        assert_eq!(
            parse_seconds("soon").unwrap_err().to_string(),
            "`soon` is not a duration; give seconds (e.g. 2, 0.5) or e.g. 500ms"
        );
        assert!(parse_seconds("1e30").is_err() && parse_seconds("inf").is_err() && parse_seconds("NaN").is_err());
    }
}
