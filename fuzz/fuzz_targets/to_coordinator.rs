//! What a joined rank sends rank 0: frames decoded as `ToCoordinator` (as
//! `control::framing` does after `Output::Admit`) and handed to a real
//! coordinator of three ranks, where rank 1 speaks the input and ranks 0
//! and 2 answer as honest workers do (`control::sim`). Whatever rank 1 says, the
//! coordinator must not panic, and once everyone falls silent it must end
//! the run: a rank can fail a run, not hang it.
#![no_main]

use std::sync::OnceLock;

use fabricbench::control::coordinator::{Coordinator, Output, Timeouts};
use fabricbench::control::sim::{answer, hello, make_plan, window, JOB, TOKEN};
use fabricbench::control::wire::ToCoordinator;
use fabricbench::histogram;
use fabricbench::plan::Plan;
use fabricbench_fuzz::{frames, round_trips};
use libfuzzer_sys::fuzz_target;

const HOSTILE: u64 = 1;
const MS: i64 = 1_000_000;

fn plan() -> &'static Plan {
    static PLAN: OnceLock<Plan> = OnceLock::new();
    PLAN.get_or_init(|| {
        let text = "[run]\nduration = \"2s\"\nwarmup = \"1s\"\n[[group]]\nname = \"g\"\npattern = \"all-to-all\"\n";
        make_plan(3, text)
    })
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
    let mut now = 0;
    let mut c = Coordinator::new(JOB, TOKEN.into(), plan().clone(), window(), Timeouts::default(), now);
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
