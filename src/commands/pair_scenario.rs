//! `fabricbench pair`: perftest's flags become a scenario in memory — one
//! flow HOST_A → HOST_B (both ways with -b), one phase per message size —
//! which then runs like any scenario file, with the same results folder.

use std::time::Duration;

use crate::cli::pair::{AtomicType, OpName, PairArgs};
use crate::hostfile::Host;
use crate::scenario::dv;
use crate::scenario::limits::{self, MAX_SWEEP_POINTS, MAX_WINDOW};
use crate::scenario::memory::{GpuChoice, GpuRegistration, Memory, MemorySides};
use crate::scenario::rdma::{
    atomic_size_error, CompletionMode, ConnectMethod, Connection, InvalidParam, RdmaKnobs, ATOMIC_SIZE, UD_MAX_MESSAGE,
};
use crate::scenario::sweep::{Parameter, SweepSpec, Value};
use crate::scenario::{GroupSpec, Mode, Op, Pattern, RunSpec, Scenario, Transport};
use crate::units::ByteSize;

/// How long each size runs without -D (perftest runs 5000 iterations: a
/// fraction of a second on a NIC, so a second is comparable and steadier).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(1);
/// Samples per window: BW peak is the best of them.
const INTERVALS: u32 = 10;
/// The shortest window that still gives ten 1 ms samples.
const MIN_DURATION: Duration = Duration::from_millis(10);
/// perftest -a: 2 B … 8 MiB.
const ALL_MIN: u64 = 2;
const ALL_MAX: u64 = 8 << 20;

/// The run `pair` asks for: a scenario and its two hosts, rank 0 first.
#[derive(Clone, Debug, PartialEq)]
pub struct PairJob {
    pub scenario: Scenario,
    pub hosts: Vec<Host>,
}

#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{flag}: {reason}")]
pub struct PairError {
    pub flag: &'static str,
    pub reason: String,
}

fn bad<T>(flag: &'static str, reason: impl Into<String>) -> Result<T, PairError> {
    Err(PairError { flag, reason: reason.into() })
}

/// Turns the flags into a scenario; every error names the flag.
pub fn build(args: &PairArgs) -> Result<PairJob, PairError> {
    if args.iters.is_some() {
        return bad(
            "-n/--iters",
            "fabricbench runs each size for a time window, not a count of iterations; use -D SECONDS (default 1)",
        );
    }
    let op = operation(args)?;
    let latency = args.op.latency || args.lat;
    if latency && args.bidirectional {
        return bad("-b/--bidirectional", "latency ping-pong already goes both ways; drop -b");
    }
    let duration = window(args)?;
    let sizes = sizes(args, op)?;
    let mode = if latency { Mode::Latency } else { Mode::Bandwidth };
    let (rdma, streams) = match args.transport {
        Transport::Rdma => (Some(rdma_knobs(args)?), 1),
        Transport::Tcp => (None, tcp_streams(args, op, latency)?),
    };
    let gpu = gpu_memory(args, latency)?;
    let name = format!("pair-{}{}", op.name(), if latency { "_lat" } else { "" });
    let group = GroupSpec {
        transport: args.transport,
        op: Some(op),
        mode,
        message_size: (sizes.len() == 1).then(|| sizes[0]),
        streams,
        flows: Some(vec![[0, 1]]),
        bidirectional: args.bidirectional,
        rdma,
        memory: gpu.as_ref().map(|g| g.sides),
        gpu: gpu.as_ref().map(|g| g.gpu.clone()),
        validate: args.data_validation,
        ..GroupSpec::new("pair", Pattern::Pairwise)
    };
    check_rdma_sizes(&group, &sizes).map_err(|e| match &gpu {
        Some(g) if e.flag == "memory" => PairError { flag: g.flag, ..e },
        _ => e,
    })?;
    dv::check(&group).map_err(|e| PairError { flag: "--data-validation", reason: e.reason })?;
    let sweep = (sizes.len() > 1).then(|| SweepSpec {
        parameter: Parameter::MessageSize,
        values: sizes.iter().map(|s| Value::Number(s.bytes())).collect(),
        group: None,
        baseline: None,
        by: None,
    });
    let run = RunSpec { name, duration, warmup: args.warmup, interval: duration / INTERVALS, ..RunSpec::default() };
    let scenario = Scenario {
        run,
        groups: vec![group],
        check: Default::default(),
        stress: Vec::new(),
        sweep,
        congestion: None,
        soak: Default::default(),
        topology: None,
        gate: None,
    };
    Ok(PairJob { scenario, hosts: hosts(&args.host_a, &args.host_b)? })
}

/// -D (the window of each size) and --warmup, checked against their bounds.
fn window(args: &PairArgs) -> Result<Duration, PairError> {
    let duration = args.duration.unwrap_or(DEFAULT_DURATION);
    let week = humantime::format_duration(MAX_WINDOW);
    if duration < MIN_DURATION || duration > MAX_WINDOW {
        let shortest = humantime::format_duration(MIN_DURATION);
        return bad("-D/--duration", format!("must be between {shortest} and {week}"));
    }
    if args.warmup > MAX_WINDOW {
        return bad("--warmup", format!("must be at most {week}"));
    }
    Ok(duration)
}

/// Checks an RDMA group's request at every size asked for (without -s:
/// the size the group defaults to, perftest's).
fn check_rdma_sizes(group: &GroupSpec, sizes: &[ByteSize]) -> Result<(), PairError> {
    let points: Vec<Option<ByteSize>> = match sizes {
        [] => vec![group.message_size],
        sizes => sizes.iter().copied().map(Some).collect(),
    };
    for message_size in points {
        let point = GroupSpec { message_size, ..group.clone() };
        if let Some(request) = point.rdma_params() {
            request.validate().map_err(flag_of)?;
        }
    }
    Ok(())
}

/// OP with -A applied.
fn operation(args: &PairArgs) -> Result<Op, PairError> {
    match (args.op.op, args.atomic_type) {
        (OpName::Atomic, None | Some(AtomicType::FetchAndAdd)) => Ok(Op::FetchAdd),
        (OpName::Atomic, Some(AtomicType::CmpAndSwap)) => Ok(Op::CmpSwap),
        (OpName::Op(op), None) => Ok(op),
        (OpName::Op(_), Some(_)) => bad("-A/--atomic_type", "applies to OP atomic only"),
    }
}

/// The sizes to run, in order; empty: the default size (perftest's).
/// Each within what the transport sends as asked; -a stops there too.
fn sizes(args: &PairArgs, op: Op) -> Result<Vec<ByteSize>, PairError> {
    if op.is_atomic() {
        if args.all {
            return bad("-a/--all", format!("atomics always move {ATOMIC_SIZE} bytes: there are no sizes to sweep"));
        }
        if let Some(other) = args.size.iter().find(|s| s.bytes() != ATOMIC_SIZE) {
            return bad("-s/--size", atomic_size_error(other));
        }
    }
    let limits::MessageSizes { largest, why: valid } = limits::message_sizes(args.transport);
    if !args.all {
        if let Some(zero) = args.size.iter().find(|s| s.bytes() == 0) {
            return bad("-s/--size", format!("{zero}: a message needs at least 1 byte"));
        }
        if let Some(big) = args.size.iter().find(|s| s.bytes() > largest) {
            return bad("-s/--size", format!("{big} is too large: {valid}"));
        }
        if args.size.len() > MAX_SWEEP_POINTS {
            return bad("-s/--size", format!("{} sizes; a run takes at most {MAX_SWEEP_POINTS}", args.size.len()));
        }
        return Ok(args.size.clone());
    }
    let max = match args.max_size {
        Some(max) if max.bytes() < ALL_MIN => return bad("--max-size", format!("must be at least {ALL_MIN} bytes")),
        Some(max) if max.bytes() > largest => return bad("--max-size", format!("{max} is too large: {valid}")),
        Some(max) => max.bytes(),
        // UD: a message is one packet, so -a stops at the largest MTU (as perftest's -a does).
        None if args.connection == Connection::Ud => UD_MAX_MESSAGE,
        None => ALL_MAX.min(largest),
    };
    Ok(std::iter::successors(Some(ALL_MIN), |s| s.checked_mul(2)).take_while(|&s| s <= max).map(ByteSize).collect())
}

/// perftest's knobs for the [group.rdma] table (op, mode and size live on the group).
fn rdma_knobs(args: &PairArgs) -> Result<RdmaKnobs, PairError> {
    let d = RdmaKnobs::default();
    if args.device.as_deref() == Some("") {
        return bad("-d/--ib-dev", "names a device, e.g. mlx5_0 (see `fabricbench probe`)");
    }
    Ok(RdmaKnobs {
        connection: args.connection,
        qps: args.qps.unwrap_or(d.qps),
        tx_depth: args.tx_depth.unwrap_or(d.tx_depth),
        rx_depth: args.rx_depth.unwrap_or(d.rx_depth),
        post_list: args.post_list.unwrap_or(d.post_list),
        cq_moderation: args.cq_moderation.unwrap_or(d.cq_moderation),
        inline_size: args.inline_size,
        completion: if args.events { CompletionMode::Event } else { CompletionMode::Busy },
        device: args.device.clone(),
        port: args.ib_port,
        gid_index: args.gid_index,
        threads: args.threads.unwrap_or(d.threads),
        connect: if args.rdma_cm { ConnectMethod::RdmaCm } else { ConnectMethod::Verbs },
        traffic_class: args.tclass.unwrap_or(d.traffic_class),
        service_level: args.sl.unwrap_or(d.service_level),
        gpu_registration: if args.gpu.use_cuda_dmabuf { GpuRegistration::Dmabuf } else { d.gpu_registration },
        ..d
    })
}

/// Both ends' buffers in GPU memory, as perftest puts them with --use_cuda.
const GPU_SIDES: MemorySides = MemorySides { sender: Memory::Cuda, receiver: Memory::Cuda };

/// Each side's memory, the GPU, and the flag that asked for GPU memory (for errors).
struct PairGpu {
    sides: MemorySides,
    gpu: GpuChoice,
    flag: &'static str,
}

/// The sides in GPU memory and their GPU: -m says which sides (alone:
/// `gpu = "auto"`), --use_cuda or --use_cuda_bus_id (one of them) which
/// GPU, both sides when -m is not given; a GPU flag beside an -m of host
/// memory only is a contradiction, and --use_cuda_dmabuf needs GPU memory.
/// GPU memory carries bandwidth only: latency polls the buffer from the CPU.
fn gpu_memory(args: &PairArgs, latency: bool) -> Result<Option<PairGpu>, PairError> {
    let named = match (&args.gpu.use_cuda, &args.gpu.use_cuda_bus_id) {
        (Some(_), Some(_)) => {
            return bad("--use_cuda_bus_id", "names a GPU and so does --use_cuda; give one of them");
        }
        (Some(gpu), None) => Some((gpu.clone(), "--use_cuda")),
        (None, Some(gpu)) => Some((gpu.clone(), "--use_cuda_bus_id")),
        (None, None) => None,
    };
    let gpu = match (args.gpu.memory, named) {
        (Some(sides), Some((_, flag))) if !sides.any_gpu() => {
            return bad(
                flag,
                "names a GPU, but -m/--memory puts both sides in host memory; give -m a side in GPU memory \
                 (e.g. -m cuda,host), or drop the GPU flag",
            );
        }
        (Some(sides), named) if sides.any_gpu() => {
            let gpu = named.map_or(GpuChoice::Auto, |(gpu, _)| gpu);
            PairGpu { sides, gpu, flag: "-m/--memory" }
        }
        (None, Some((gpu, flag))) => PairGpu { sides: GPU_SIDES, gpu, flag },
        _ if args.gpu.use_cuda_dmabuf => {
            return bad(
                "--use_cuda_dmabuf",
                "registers GPU memory: put a side in it too, -m cuda[,host], --use_cuda=N or --use_cuda_bus_id=BUS_ID",
            );
        }
        _ => return Ok(None),
    };
    if latency {
        return bad(
            gpu.flag,
            "GPU memory carries bandwidth tests only (write, read, send): latency ping-pong polls the buffer from \
             the CPU; drop the flag, or measure bandwidth",
        );
    }
    Ok(Some(gpu))
}

/// TCP streams `send` only; -q is its parallel connections; verbs knobs are errors.
fn tcp_streams(args: &PairArgs, op: Op, latency: bool) -> Result<u32, PairError> {
    if op != Op::Send {
        return bad("OP", "--transport tcp streams `send` only; write, read and atomics are RDMA operations");
    }
    let verbs_only = [
        ("-l/--post_list", args.post_list.is_some()),
        ("-t/--tx-depth", args.tx_depth.is_some()),
        ("-r/--rx-depth", args.rx_depth.is_some()),
        ("-I/--inline_size", args.inline_size.is_some()),
        ("-Q/--cq-mod", args.cq_moderation.is_some()),
        ("-e/--events", args.events),
        ("-d/--ib-dev", args.device.is_some()),
        ("-i/--ib-port", args.ib_port.is_some()),
        ("-x/--gid-index", args.gid_index.is_some()),
        ("--threads", args.threads.is_some()),
        ("--tclass", args.tclass.is_some()),
        ("-S/--sl", args.sl.is_some()),
        ("-R/--rdma_cm", args.rdma_cm),
        ("-c/--connection", args.connection != Connection::Rc),
        ("--use_cuda", args.gpu.use_cuda.is_some()),
        ("--use_cuda_bus_id", args.gpu.use_cuda_bus_id.is_some()),
        ("-m/--memory", args.gpu.memory.is_some_and(|m| m.any_gpu())),
        ("--use_cuda_dmabuf", args.gpu.use_cuda_dmabuf),
    ];
    if let Some((flag, _)) = verbs_only.iter().find(|(_, given)| *given) {
        return bad(flag, "is an RDMA knob; it does not apply to --transport tcp");
    }
    match args.qps {
        Some(0) => bad("-q/--qp", "must be at least 1"),
        Some(n) if latency && n != 1 => bad("-q/--qp", format!("latency ping-pong runs one connection, not {n}")),
        Some(n) => Ok(n),
        None => Ok(1),
    }
}

/// Names the flag behind an invalid RDMA parameter.
fn flag_of(InvalidParam { field, reason }: InvalidParam) -> PairError {
    let flag = match field {
        "message_size" => "-s/--size",
        "qps" => "-q/--qp",
        "tx_depth" => "-t/--tx-depth",
        "rx_depth" => "-r/--rx-depth",
        "post_list" => "-l/--post_list",
        "cq_moderation" => "-Q/--cq-mod",
        "threads" => "--threads",
        "traffic_class" => "--tclass",
        "service_level" => "-S/--sl",
        "op" => "OP",
        other => other,
    };
    PairError { flag, reason }
}

/// HOST_A and HOST_B as ranks 0 and 1; `localhost` twice is two local
/// ranks on their own loopback addresses (as hostfiles/local has them).
fn hosts(a: &str, b: &str) -> Result<Vec<Host>, PairError> {
    for (flag, name) in [("HOST_A", a), ("HOST_B", b)] {
        if name.trim().is_empty() || name.contains(char::is_whitespace) {
            return bad(flag, format!("`{name}` is not a host name"));
        }
    }
    let local = |h: &str| h.eq_ignore_ascii_case("localhost");
    if local(a) && local(b) {
        return Ok(vec![Host::named("127.0.0.1"), Host::named("127.0.0.2")]);
    }
    if a == b {
        return bad(
            "HOST_B",
            format!("is HOST_A again (`{a}`); give two hosts, or `localhost localhost` for two local ranks"),
        );
    }
    Ok(vec![Host::named(a), Host::named(b)])
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn job(line: &str) -> Result<PairJob, PairError> {
        let argv = std::iter::once("fabricbench").chain(line.split_whitespace());
        let Command::Pair(args) = Cli::try_parse_from(argv).expect("flags parse").command else { panic!("not pair") };
        build(&args)
    }

    fn sweep_sizes(s: &Scenario) -> Vec<u64> {
        let values = &s.sweep.as_ref().expect("a size sweep").values;
        values.iter().map(|v| if let Value::Number(n) = v { *n } else { panic!("{v}") }).collect()
    }

    #[test]
    fn a_perftest_command_line_maps_every_flag() {
        let j = job("pair node01 node02 write -a -q 4 -l 16 -d mlx5_0 -x 3 --report-gbits -F -c RC").unwrap();
        assert_eq!(j.hosts, vec![Host::named("node01"), Host::named("node02")]);
        let s = &j.scenario;
        assert_eq!(s.run.name, "pair-write");
        assert_eq!((s.run.duration, s.run.interval), (DEFAULT_DURATION, DEFAULT_DURATION / 10));
        let g = &s.groups[0];
        assert_eq!(
            (g.pattern, g.transport, g.op, g.mode),
            (Pattern::Pairwise, Transport::Rdma, Some(Op::Write), Mode::Bandwidth)
        );
        assert_eq!((g.flows.clone(), g.bidirectional, g.message_size), (Some(vec![[0, 1]]), false, None));
        let r = g.rdma.as_ref().unwrap();
        assert_eq!((r.qps, r.post_list, r.device.as_deref(), r.gid_index), (4, 16, Some("mlx5_0"), Some(3)));
        assert_eq!((r.tx_depth, r.cq_moderation, r.completion), (128, 100, CompletionMode::Busy));
        let sizes = sweep_sizes(s);
        assert_eq!((sizes.len(), sizes[0], sizes[22]), (23, 2, 8 << 20), "perftest -a: 2^1 .. 2^23");
        assert_eq!(s.sweep.as_ref().unwrap().parameter, Parameter::MessageSize);
    }

    #[test]
    fn sizes_depth_moderation_events_and_duration() {
        let j = job("pair a b send -s 4K,64K -t 64 -r 256 -Q 8 -I 128 -e -b -D 0.5 -i 2 --threads 2 -q 2").unwrap();
        let g = &j.scenario.groups[0];
        assert_eq!(sweep_sizes(&j.scenario), [4096, 65536]);
        assert!(g.bidirectional);
        let r = g.rdma.as_ref().unwrap();
        assert_eq!((r.tx_depth, r.rx_depth, r.cq_moderation, r.inline_size), (64, 256, 8, Some(128)));
        assert_eq!((r.completion, r.port, r.threads), (CompletionMode::Event, Some(2), 2));
        assert_eq!(j.scenario.run.duration, Duration::from_millis(500));
        let one = job("pair a b read -s 1M").unwrap();
        assert_eq!((one.scenario.sweep, one.scenario.groups[0].message_size), (None, Some(ByteSize(1 << 20))));
        let capped = job("pair a b write -a --max-size 64K").unwrap();
        assert_eq!(sweep_sizes(&capped.scenario).last(), Some(&65536));
    }

    #[test]
    fn latency_ops_and_atomics() {
        for line in ["pair a b write_lat", "pair a b write --lat"] {
            let g = job(line).unwrap().scenario.groups[0].clone();
            assert_eq!((g.mode, g.op, g.message_size), (Mode::Latency, Some(Op::Write), None), "{line}");
        }
        assert_eq!(job("pair a b read_lat").unwrap().scenario.run.name, "pair-read_lat");
        assert_eq!(job("pair a b atomic").unwrap().scenario.groups[0].op, Some(Op::FetchAdd));
        assert_eq!(job("pair a b atomic -A CMP_AND_SWAP").unwrap().scenario.groups[0].op, Some(Op::CmpSwap));
        // ib_atomic_lat: `atomic --lat` or `atomic_lat`, both atomics, 8 bytes.
        for line in ["pair a b atomic --lat", "pair a b atomic_lat -A CMP_AND_SWAP", "pair a b fetch_add_lat -s 8"] {
            let j = job(line).unwrap();
            let g = &j.scenario.groups[0];
            assert!(g.mode == Mode::Latency && g.op.unwrap().is_atomic(), "{line}");
            let plan = crate::plan::build(&j.hosts, &j.scenario).unwrap();
            let g = &plan.phases[0].groups[0];
            assert_eq!((g.message_size.bytes(), g.rdma_request().unwrap().effective_message_size()), (8, 8), "{line}");
        }
        assert_eq!(job("pair a b atomic_lat").unwrap().scenario.run.name, "pair-fetch_add_lat");
    }

    #[test]
    fn ud_sends_datagrams_up_to_the_mtu() {
        let j = job("pair a b send -c UD -s 1K,4K").unwrap();
        let r = j.scenario.groups[0].rdma.as_ref().unwrap();
        assert_eq!(r.connection, crate::scenario::rdma::Connection::Ud);
        assert_eq!(sweep_sizes(&j.scenario), [1024, 4096]);
        assert_eq!(sweep_sizes(&job("pair a b send -c ud -a").unwrap().scenario).last(), Some(&4096), "-a stops at 4K");
        assert!(job("pair a b send_lat -c UD").is_ok());
        let e = job("pair a b send -c UD -s 8K").unwrap_err().to_string();
        assert_eq!(e, "-s/--size: 8192 B is above UD's largest message, 4096 B (one packet at the largest path MTU)");
        let e = job("pair a b write -c UD").unwrap_err().to_string();
        assert_eq!(e, "OP: connection UD carries send only (like ib_send_bw -c UD); write needs RC");
        let e = job("pair a b read_lat -c UD").unwrap_err().to_string();
        assert_eq!(e, "OP: connection UD carries send only (like ib_send_bw -c UD); read needs RC");
        let e = job("pair a b send --transport tcp -c UD").unwrap_err().to_string();
        assert_eq!(e, "-c/--connection: is an RDMA knob; it does not apply to --transport tcp");
    }

    #[test]
    fn atomics_take_no_size_but_8() {
        let e = job("pair a b atomic --lat -s 16").unwrap_err().to_string();
        assert_eq!(
            e,
            "-s/--size: 16: atomics (fetch_add, cmp_swap) move one 8-byte operand; give 8 or leave the size out"
        );
        let e = job("pair a b cmp_swap -s 8,64").unwrap_err().to_string();
        assert!(e.starts_with("-s/--size: 64: atomics"), "{e}");
        let e = job("pair a b atomic_lat -a").unwrap_err().to_string();
        assert_eq!(e, "-a/--all: atomics always move 8 bytes: there are no sizes to sweep");
    }

    #[test]
    fn localhost_twice_is_two_loopback_ranks() {
        let j = job("pair localhost localhost write").unwrap();
        assert_eq!(j.hosts, vec![Host::named("127.0.0.1"), Host::named("127.0.0.2")]);
        assert_eq!(job("pair n1 n1 write").unwrap_err().flag, "HOST_B");
    }

    #[test]
    fn tcp_maps_qp_to_streams_and_refuses_verbs_knobs() {
        let g = job("pair a b send --transport tcp -q 4 -s 1M").unwrap().scenario.groups[0].clone();
        assert_eq!((g.transport, g.streams, g.rdma), (Transport::Tcp, 4, None));
        assert_eq!(job("pair a b send --transport tcp -l 8").unwrap_err().flag, "-l/--post_list");
        assert_eq!(job("pair a b write --transport tcp").unwrap_err().flag, "OP");
    }

    #[test]
    fn traffic_class_service_level_and_rdma_cm_like_perftest() {
        let j = job("pair a b write --tclass 104 -S 3").unwrap();
        let r = j.scenario.groups[0].rdma.clone().unwrap();
        assert_eq!((r.traffic_class, r.service_level, r.connect), (104, 3, ConnectMethod::Verbs));
        let r = job("pair a b write -R").unwrap().scenario.groups[0].rdma.clone().unwrap();
        assert_eq!(r.connect, ConnectMethod::RdmaCm);
        assert_eq!(
            job("pair a b write --rdma_cm").unwrap().scenario.groups[0].rdma.as_ref().unwrap().connect,
            ConnectMethod::RdmaCm
        );
        let e = job("pair a b write --tclass 256").unwrap_err().to_string();
        assert_eq!(
            e,
            "--tclass: 256 is outside 0..=255 (the GRH traffic class; RoCE sends traffic_class >> 2 as the DSCP, e.g. 104 for DSCP 26)"
        );
        let e = job("pair a b write --sl 16").unwrap_err().to_string();
        assert_eq!(e, "-S/--sl: 16 is outside 0..=15 (the InfiniBand service level, 4 bits)");
        let e = job("pair a b write -R --tclass 104").unwrap_err();
        assert!(e.flag == "--tclass" && e.reason.contains("pair without -R"), "{e}");
        assert_eq!(job("pair a b send --transport tcp --tclass 8").unwrap_err().flag, "--tclass");
        assert_eq!(job("pair a b send --transport tcp -R").unwrap_err().flag, "-R/--rdma_cm");
    }

    #[test]
    fn perftest_gpu_flags_are_the_scenario_gpu_keys() {
        let g = job("pair a b write -s 1M --use_cuda=1").unwrap().scenario.groups[0].clone();
        assert_eq!((g.memory, g.gpu.clone()), (Some(GPU_SIDES), Some(GpuChoice::Index(1))));
        assert_eq!(g.rdma.as_ref().unwrap().gpu_registration, GpuRegistration::Auto);
        let g = job("pair a b read --use_cuda_bus_id 00000000:1B:00.0 --use_cuda_dmabuf").unwrap().scenario.groups[0]
            .clone();
        assert_eq!(g.gpu, Some(GpuChoice::BusId("0000:1b:00.0".into())));
        assert_eq!(g.rdma.as_ref().unwrap().gpu_registration, GpuRegistration::Dmabuf);
        // The knobs the flows get are what the same scenario file gives them.
        let r = g.rdma_params().unwrap();
        assert_eq!((r.memory, r.gpu, r.op), (GPU_SIDES, GpuChoice::BusId("0000:1b:00.0".into()), Op::Read));
        let plain = job("pair a b write").unwrap().scenario.groups[0].clone();
        assert_eq!((plain.memory, plain.gpu), (None, None), "host memory unless asked");
    }

    #[test]
    fn gpu_flags_refuse_what_gpu_memory_cannot_carry() {
        let e = job("pair a b write_lat --use_cuda=0").unwrap_err();
        assert!(e.flag == "--use_cuda" && e.reason.starts_with("GPU memory carries bandwidth tests only"), "{e}");
        let e = job("pair a b atomic --use_cuda_bus_id=0000:1b:00.0").unwrap_err().to_string();
        assert_eq!(
            e,
            "--use_cuda_bus_id: GPU memory carries write, read and send: fetch_add results are read from the buffer by the CPU"
        );
        let e = job("pair a b send -s 64 -I 128 --use_cuda=0").unwrap_err();
        assert!(e.flag == "--use_cuda" && e.reason.starts_with("inline sends are copied"), "{e}");
        let e = job("pair a b write --use_cuda_dmabuf").unwrap_err().to_string();
        assert_eq!(
            e,
            "--use_cuda_dmabuf: registers GPU memory: put a side in it too, -m cuda[,host], --use_cuda=N or \
             --use_cuda_bus_id=BUS_ID"
        );
        let e = job("pair a b write --use_cuda=0 --use_cuda_bus_id=0000:1b:00.0").unwrap_err();
        assert_eq!(e.flag, "--use_cuda_bus_id");
        assert_eq!(job("pair a b send --transport tcp --use_cuda=0").unwrap_err().flag, "--use_cuda");
        assert_eq!(job("pair a b send --transport tcp --use_cuda_dmabuf").unwrap_err().flag, "--use_cuda_dmabuf");
    }

    /// -m SEND[,RECV] chooses the sides in GPU memory; --use_cuda then names
    /// the GPU only; -m alone takes `auto`'s GPU.
    #[test]
    fn memory_flag_sets_each_sides_memory_and_the_gpu_flags_its_gpu() {
        let sides = |sender, receiver| Some(MemorySides { sender, receiver });
        let g = job("pair a b write -m cuda,host --use_cuda=1").unwrap().scenario.groups[0].clone();
        assert_eq!((g.memory, g.gpu), (sides(Memory::Cuda, Memory::Host), Some(GpuChoice::Index(1))));
        let g = job("pair a b read --memory host,cuda-managed").unwrap().scenario.groups[0].clone();
        assert_eq!((g.memory, g.gpu), (sides(Memory::Host, Memory::CudaManaged), Some(GpuChoice::Auto)));
        let g = job("pair a b write -m cuda --use_cuda_bus_id=0000:1b:00.0 --use_cuda_dmabuf").unwrap();
        let g = &g.scenario.groups[0];
        assert_eq!((g.memory, g.gpu.clone()), (Some(GPU_SIDES), Some(GpuChoice::BusId("0000:1b:00.0".into()))));
        assert_eq!(g.rdma.as_ref().unwrap().gpu_registration, GpuRegistration::Dmabuf);
        let g = job("pair a b write -m host").unwrap().scenario.groups[0].clone();
        assert_eq!((g.memory, g.gpu), (None, None), "host memory, as without -m");
        let g = job("pair a b send --transport tcp -m host").unwrap().scenario.groups[0].clone();
        assert_eq!(g.memory, None, "TCP sends from host memory");
        assert_eq!(job("pair a b write --use_cuda=2").unwrap().scenario.groups[0].memory, Some(GPU_SIDES));
    }

    /// `pair -m cuda,host`: the plan's sender end (rank 0, HOST_A) asks for
    /// GPU memory, the receiver none.
    #[test]
    fn memory_cuda_host_plans_the_sender_in_gpu_memory_and_the_receiver_in_host_memory() {
        let j = job("pair a b write -s 1M -m cuda,host --use_cuda=1").unwrap();
        let plan = crate::plan::build(&j.hosts, &j.scenario).unwrap();
        let rdma = plan.phases[0].groups[0].rdma.clone().expect("an RDMA group");
        assert_eq!(rdma.memory, MemorySides { sender: Memory::Cuda, receiver: Memory::Host });
        let asks = plan.gpu_asks();
        let asked: Vec<Vec<(Memory, GpuChoice)>> =
            asks.iter().map(|rank| rank.iter().map(|a| (a.memory, a.gpu.clone())).collect()).collect();
        assert_eq!(asked, [vec![(Memory::Cuda, GpuChoice::Index(1))], vec![]]);
    }

    #[test]
    fn memory_flag_conflicts_are_refused_naming_the_flag() {
        let e = job("pair a b write -m host --use_cuda=0").unwrap_err().to_string();
        assert_eq!(
            e,
            "--use_cuda: names a GPU, but -m/--memory puts both sides in host memory; give -m a side in GPU memory \
             (e.g. -m cuda,host), or drop the GPU flag"
        );
        assert_eq!(
            job("pair a b write -m host,host --use_cuda_bus_id=0000:1b:00.0").unwrap_err().flag,
            "--use_cuda_bus_id"
        );
        assert_eq!(job("pair a b write -m host --use_cuda_dmabuf").unwrap_err().flag, "--use_cuda_dmabuf");
        let e = job("pair a b write_lat -m cuda,host").unwrap_err();
        assert!(e.flag == "-m/--memory" && e.reason.starts_with("GPU memory carries bandwidth tests only"), "{e}");
        let e = job("pair a b atomic -m host,cuda --use_cuda=0").unwrap_err();
        assert!(e.flag == "-m/--memory" && e.reason.starts_with("GPU memory carries write, read and send"), "{e}");
        let e = job("pair a b send --transport tcp -m cuda").unwrap_err().to_string();
        assert_eq!(e, "-m/--memory: is an RDMA knob; it does not apply to --transport tcp");
    }

    #[test]
    fn gpu_flag_values_that_name_no_gpu_are_refused_by_the_parser() {
        let parse = |line: &str| {
            let argv = std::iter::once("fabricbench").chain(line.split_whitespace());
            Cli::try_parse_from(argv).map(|_| ()).unwrap_err().to_string()
        };
        let e = parse("pair a b write --use_cuda=first");
        assert!(e.contains("`first` is not a GPU index: give CUDA's number of the GPU (0, 1, …)"), "{e}");
        let e = parse("pair a b write --use_cuda_bus_id=1b:00.0");
        assert!(e.contains("`1b:00.0` is not a PCI bus id: give the GPU's address"), "{e}");
        let e = parse("pair a b write -m rocm");
        assert!(
            e.contains("'--memory <SEND[,RECV]>'") && e.contains("`rocm` is not a memory: give SEND[,RECV]"),
            "{e}"
        );
        let e = parse("pair a b write --memory cuda,host,cuda");
        assert!(e.contains("names 3 memories"), "{e}");
    }

    #[test]
    fn errors_name_the_flag() {
        let e = job("pair a b write -n 5000").unwrap_err();
        assert!(e.flag == "-n/--iters" && e.reason.contains("-D"), "{e}");
        assert_eq!(job("pair a b write_lat -q 2").unwrap_err().flag, "-q/--qp");
        assert_eq!(job("pair a b write -l 256").unwrap_err().flag, "-l/--post_list");
        assert_eq!(job("pair a b atomic -a").unwrap_err().flag, "-a/--all");
        assert_eq!(job("pair a b write -A CMP_AND_SWAP").unwrap_err().flag, "-A/--atomic_type");
        assert_eq!(job("pair a b write_lat -b").unwrap_err().flag, "-b/--bidirectional");
        assert_eq!(job("pair a b write -D 5ms").unwrap_err().flag, "-D/--duration");
        assert_eq!(job("pair a b write -a --max-size 1").unwrap_err().flag, "--max-size");
        let e = job("pair a b write -a --max-size 1").unwrap_err().to_string();
        assert_eq!(e, "--max-size: must be at least 2 bytes");
    }

    #[test]
    fn sizes_and_windows_are_bounded() {
        let e = job("pair a b write -a --max-size 8E").unwrap_err().to_string();
        assert_eq!(
            e,
            "--max-size: 8589934592G is too large: RDMA messages are 1 B to 1 GiB (one work request, the RC limit of most HCAs)"
        );
        let e = job("pair a b send --transport tcp -s 64K,1T").unwrap_err().to_string();
        assert_eq!(
            e,
            "-s/--size: 1024G is too large: TCP messages are 1 B to 4 MiB (each stream sends from one buffer that size)"
        );
        let tcp = job("pair a b send --transport tcp -a").unwrap();
        assert_eq!(sweep_sizes(&tcp.scenario).last(), Some(&(4 << 20)), "-a on TCP stops at its largest message");
        let rdma = job("pair a b write -a --max-size 1G").unwrap();
        assert_eq!(sweep_sizes(&rdma.scenario).last(), Some(&(1 << 30)));
        let e = job("pair a b write -D 8days").unwrap_err().to_string();
        assert_eq!(e, "-D/--duration: must be between 10ms and 7days");
        let e = job("pair a b write --warmup 30days").unwrap_err().to_string();
        assert_eq!(e, "--warmup: must be at most 7days");
    }

    #[test]
    fn the_scenario_plans_one_phase_per_size() {
        let j = job("pair a b write -s 2,4K,1M -b").unwrap();
        let plan = crate::plan::build(&j.hosts, &j.scenario).unwrap();
        assert_eq!(plan.phases.len(), 3);
        for (phase, size) in plan.phases.iter().zip([2, 4096, 1 << 20]) {
            assert_eq!(phase.groups[0].rdma_request().unwrap().message_size, size);
            let flows: Vec<(usize, usize)> = phase.flows.iter().map(|f| (f.src, f.dst)).collect();
            assert_eq!(flows, [(0, 1), (1, 0)]);
        }
    }
}
