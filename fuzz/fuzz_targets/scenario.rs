//! A scenario file: TOML text through `scenario::parse` (syntax, then
//! validation). What it accepts survives the JSON that carries it to rank 0
//! (`srun::SrunSpec`) and into run.json unchanged, and plans on four hosts
//! without a panic, every flow between two of them.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use fabricbench::hostfile::{self, Host};
use fabricbench::plan;
use fabricbench::scenario::{self, Scenario};
use libfuzzer_sys::fuzz_target;

fn hosts() -> &'static [Host] {
    static HOSTS: OnceLock<Vec<Host>> = OnceLock::new();
    HOSTS.get_or_init(|| hostfile::parse("h[1-4]\n", Path::new("hosts")).expect("hosts"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok((s, _)) = scenario::parse(text, Path::new("fuzz.toml")) else { return };
    let json = serde_json::to_string(&s).expect("a scenario serializes");
    let again: Scenario = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json} does not read back: {e}"));
    assert_eq!(again, s);
    if let Ok(plan) = plan::build(hosts(), &s) {
        for flow in plan.phases.iter().flat_map(|p| &p.flows) {
            assert!(flow.src < 4 && flow.dst < 4, "{flow:?}");
        }
    }
});
