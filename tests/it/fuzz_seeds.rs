//! The fuzz targets' seeds that are wire traffic (fuzz/corpus/): recorded
//! from a real coordinator and three simulated ranks, so that the fuzzers
//! start from messages the protocol really sends. A change to the wire
//! makes the committed seeds stale and this test fails; rewrite them with
//! `FABRICBENCH_WRITE_SEEDS=1 cargo nextest run fuzz_seeds` and commit them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use fabricbench::control::coordinator::Output;
use fabricbench::control::framing::frame;
use fabricbench::control::instruction::Instruction;
use fabricbench::control::sim::{answer, hello, make_plan, samples, Said, Sim, JOB, TOKEN};
use fabricbench::control::wire::{ToCoordinator, ToWorker};
use fabricbench::metrics::RankReport;
use fabricbench::transport::rdma::RdmaInventory;
use fabricbench::transport::Side;
use fabricbench::worker::srun::{CoordinatorAt, SrunSpec};
use fabricbench::worker::{JobSpec, Role};

/// The run of fuzz/fuzz_targets/to_coordinator.rs: three ranks, all-to-all.
const SCENARIO: &str = "[run]\nduration = \"2s\"\nwarmup = \"1s\"\n[[group]]\nname = \"g\"\npattern = \"all-to-all\"\n";
/// The rank whose traffic is recorded (the fuzzer plays it).
const RANK: usize = 1;

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("serializes")
}

fn framed<M: serde::Serialize>(messages: &[M]) -> Vec<u8> {
    messages.iter().flat_map(|m| frame(m).expect("encodes")).collect()
}

/// A report of three boundaries for each of the rank's flow ends.
fn report(phase: usize, ends: &[(u32, Side)]) -> RankReport {
    let flows = ends.iter().map(|&(flow, side)| samples(flow, side)).collect();
    RankReport { phase, rank: RANK, boundaries: 3, flows, ..Default::default() }
}

/// Every rank joins and answers as a worker does, until Start; returns
/// what rank 1 was sent and what it sends: its probe, its answers, then
/// (as after the window) its intervals and its report.
fn record() -> (Vec<ToWorker>, Vec<ToCoordinator>) {
    let mut sim = Sim::generous(make_plan(3, SCENARIO));
    let (mut sent, mut said) = (
        Vec::new(),
        vec![
            ToCoordinator::Probe(RdmaInventory::default(), Box::default(), Some(Ok("{}".into()))),
            ToCoordinator::Heartbeat,
        ],
    );
    let mut ends = Vec::new();
    sim.join(3, |out| {
        let Output::Send(conn, msg) = out else { return None };
        let reply = answer(&msg);
        if conn == RANK as u64 {
            if let ToWorker::Setup { flows, .. } = &msg {
                ends = flows.iter().map(|f| (f.flow.id, f.side)).collect();
            }
            said.extend(reply.clone());
            sent.push(msg);
        }
        reply.map(|msg| Said { conn, msg })
    });
    for interval in 1..3 {
        let moved = vec![fabricbench::transport::Counts { bytes: 1 << 20, messages: 8 }; ends.len()];
        said.push(ToCoordinator::Interval { phase: 0, interval, span_ns: 1_000_000_000, ends: moved });
    }
    said.push(ToCoordinator::Report(Box::new(report(0, &ends))));
    (sent, said)
}

/// Every generated seed: path under fuzz/corpus/ → bytes.
fn seeds() -> BTreeMap<String, Vec<u8>> {
    let (sent, said) = record();
    let mut seeds = BTreeMap::new();
    let mut put = |path: &str, bytes: Vec<u8>| seeds.insert(path.to_string(), bytes);
    put("hello/rank1", postcard::to_stdvec(&ToCoordinator::Hello(hello(RANK))).expect("encodes"));
    put("to_coordinator/rank1-run", framed(&said));
    let failed = ToCoordinator::Failed { phase: 0, error: "connect: refused".into() };
    put("to_coordinator/failed", framed(&[failed]));
    put("to_worker/rank1-run", framed(&sent));
    put("to_worker/abort-bye", framed(&[ToWorker::Abort { reason: "rank 2 failed".into() }, ToWorker::Bye]));

    let at: SocketAddr = "127.0.0.1:7000".parse().expect("address");
    let member = JobSpec {
        job: JOB,
        token: TOKEN.into(),
        rank: RANK,
        host: "h2".into(),
        bind: "127.0.0.2".into(),
        data_addr: None,
        role: Role::Member { coordinator: None },
        relay: None,
        devices: Vec::new(),
    };
    let lines = |values: Vec<String>| values.iter().map(|l| format!("{l}\n")).collect::<String>();
    // The first byte picks the Slurm task (worker_stdin.rs); 1 is rank 1.
    let stdin = lines(vec![
        json(&member),
        json(&CoordinatorAt { coordinator: at }),
        json(&Instruction::Saved { phase: 0 }),
        json(&Instruction::Stop { reason: "interrupted".into() }),
    ]);
    put("worker_stdin/member", [&[1u8][..], stdin.as_bytes()].concat());
    let (scenario, _) = fabricbench::scenario::parse(SCENARIO, Path::new("s.toml")).expect("scenario");
    let spec = SrunSpec { job: JOB, token: TOKEN.into(), hosts: None, scenario, phases: None, port: 0, lldp: false };
    let srun = lines(vec![json(&spec), json(&CoordinatorAt { coordinator: at })]);
    put("worker_stdin/srun-rank0", [&[0u8][..], srun.as_bytes()].concat());
    put("worker_stdin/srun-rank1", [&[1u8][..], srun.as_bytes()].concat());
    seeds
}

#[test]
fn committed_seeds_are_the_current_wire() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let write = std::env::var_os("FABRICBENCH_WRITE_SEEDS").is_some();
    for (path, bytes) in seeds() {
        let file = corpus.join(&path);
        if write {
            std::fs::create_dir_all(file.parent().expect("a folder")).expect("corpus folder");
            std::fs::write(&file, &bytes).expect("seed written");
        }
        let committed = std::fs::read(&file).unwrap_or_default();
        assert!(
            committed == bytes,
            "fuzz/corpus/{path} is not what the protocol sends now: rewrite the seeds with \
             FABRICBENCH_WRITE_SEEDS=1 cargo nextest run fuzz_seeds, and commit them"
        );
    }
}
