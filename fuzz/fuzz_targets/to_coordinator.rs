//! What a joined rank sends rank 0: frames decoded as `ToCoordinator` (as
//! `control::framing` does after `Output::Admit`) and handed to a real
//! coordinator of three ranks, where rank 1 speaks the input and ranks 0
//! and 2 answer as honest workers do (`control::sim::Sim`). Whatever rank 1
//! says, the coordinator must not panic, and once everyone falls silent it
//! must end the run: a rank can fail a run, not hang it.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use fabricbench::control::coordinator::{Output, Timeouts};
use fabricbench::control::sim::{make_plan, reply, Said, Sim};
use fabricbench::control::wire::ToCoordinator;
use fabricbench::histogram;
use fabricbench::plan::Plan;
use fabricbench_fuzz::{frames, round_trips};
use libfuzzer_sys::fuzz_target;

const HOSTILE: u64 = 1;

fn plan() -> &'static Plan {
    static PLAN: OnceLock<Plan> = OnceLock::new();
    PLAN.get_or_init(|| {
        let text = "[run]\nduration = \"2s\"\nwarmup = \"1s\"\n[[group]]\nname = \"g\"\npattern = \"all-to-all\"\n";
        make_plan(3, text)
    })
}

/// The honest ranks answer what they are sent; rank 1 does not.
fn honest(out: Output) -> Option<Said> {
    reply(out).filter(|said| said.conn != HOSTILE)
}

fuzz_target!(|data: &[u8]| {
    let mut sim = Sim::new(plan().clone(), Timeouts::default());
    sim.join(3, honest);
    for frame in frames(data) {
        // An undecodable frame would end the run (`protocol_error`); skip
        // it instead, so that what follows still reaches the coordinator.
        // Decoded as the driver does: within the rank's histogram budget.
        let budget = sim.c.histogram_budget(HOSTILE);
        if let Ok(msg) = histogram::decode_within(budget, || postcard::from_bytes::<ToCoordinator>(frame)).value {
            round_trips(&msg, frame);
            sim.send(HOSTILE, msg, honest);
        }
        sim.advance(Duration::from_millis(100), honest);
    }
    // Everyone falls silent; the clock goes on at the heartbeat interval.
    for _ in 0..1_000 {
        if sim.c.is_done() {
            return;
        }
        sim.advance(Duration::from_millis(500), |_| None);
    }
    panic!("the coordinator did not end the run 500 s after its ranks fell silent");
});
