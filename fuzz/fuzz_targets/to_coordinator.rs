//! What a joined rank sends rank 0: frames decoded as `ToCoordinator` (as
//! `control::framing` does after `Output::Admit`) and handed to a real
//! coordinator of three ranks, where rank 1 speaks the input and ranks 0
//! and 2 answer as honest workers do. Whatever rank 1 says, the
//! coordinator must not panic, and once everyone falls silent it must end
//! the run: a rank can fail a run, not hang it.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use fabricbench::control::coordinator::{Coordinator, Output, Timeouts};
use fabricbench::control::wire::{
    Endpoint, FlowEndpoint, Hello, ToCoordinator, ToWorker, Window, MAGIC, PROTOCOL_VERSION,
};
use fabricbench::plan::{self, Plan};
use fabricbench::transport::Side;
use fabricbench::{histogram, hostfile, scenario};
use fabricbench_fuzz::{frames, round_trips};
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "fuzz";
const JOB: u64 = 1;
const HOSTILE: u64 = 1;
const MS: i64 = 1_000_000;
const SECOND: Duration = Duration::from_secs(1);

fn plan() -> &'static Plan {
    static PLAN: OnceLock<Plan> = OnceLock::new();
    PLAN.get_or_init(|| {
        let hosts = hostfile::parse("h1\nh2\nh3\n", Path::new("hosts")).expect("hosts");
        let text = "[run]\nduration = \"2s\"\nwarmup = \"1s\"\n[[group]]\nname = \"g\"\npattern = \"all-to-all\"\n";
        let (s, _) = scenario::parse(text, Path::new("s.toml")).expect("scenario");
        plan::build(&hosts, &s).expect("plan")
    })
}

fn hello(rank: usize) -> Hello {
    let tool_version = env!("CARGO_PKG_VERSION").to_string();
    let host = format!("h{}", rank + 1);
    Hello { magic: MAGIC, token: TOKEN.into(), version: PROTOCOL_VERSION, tool_version, job: JOB, rank, host, pid: 1 }
}

fn tcp(flow: u32) -> Endpoint {
    Endpoint::Tcp { addr: std::net::SocketAddr::from(([127, 0, 0, 1], 1024 + (flow % 60_000) as u16)) }
}

/// What an honest worker answers, if anything.
fn answer(msg: &ToWorker) -> Option<ToCoordinator> {
    match msg {
        ToWorker::Setup { phase, flows, .. } => {
            let endpoints = flows
                .iter()
                .filter(|f| f.side == Side::Receiver)
                .map(|f| FlowEndpoint { flow: f.flow.id, side: f.side, endpoint: tcp(f.flow.id) })
                .collect();
            Some(ToCoordinator::Endpoints { phase: *phase, endpoints })
        }
        ToWorker::Peers { phase, .. } => Some(ToCoordinator::Ready { phase: *phase }),
        _ => None,
    }
}

/// Drains the coordinator's outputs; the honest ranks answer theirs.
fn pump(c: &mut Coordinator, now: i64, honest: bool) {
    while let Some(out) = c.poll() {
        if let Output::Send(conn, msg) = out {
            if let Some(reply) = answer(&msg).filter(|_| honest && conn != HOSTILE) {
                c.received(conn, reply, now);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let window = Window { warmup: SECOND, duration: 2 * SECOND, interval: SECOND };
    let mut now = 0;
    let mut c = Coordinator::new(JOB, TOKEN.into(), plan().clone(), window, Timeouts::default(), now);
    for rank in 0..3 {
        c.connected(rank as u64, now);
        c.received(rank as u64, ToCoordinator::Hello(hello(rank)), now);
    }
    pump(&mut c, now, true);
    for frame in frames(data) {
        // An undecodable frame would end the run (`protocol_error`); skip
        // it instead, so that what follows still reaches the coordinator.
        // Decoded as the driver does: within the rank's histogram budget.
        let budget = c.histogram_budget(HOSTILE);
        if let (Ok(msg), _) = histogram::decode_within(budget, || postcard::from_bytes::<ToCoordinator>(frame)) {
            round_trips(&msg, frame);
            c.received(HOSTILE, msg, now);
        }
        now += 100 * MS;
        c.tick(now);
        pump(&mut c, now, true);
    }
    // Everyone falls silent; ticks go on at the heartbeat interval.
    for _ in 0..1_000 {
        if c.is_done() {
            return;
        }
        now += 500 * MS;
        c.tick(now);
        pump(&mut c, now, false);
    }
    panic!("the coordinator did not end the run 500 s after its ranks fell silent");
});
