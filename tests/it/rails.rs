//! `rails = "same"` through the binary: `plan` on hosts of two rails
//! prints only rail k of one host with rail k of another, each group's
//! flows and the run's length; a local run moves bytes on exactly those.

use crate::common;

use common::{run_json, text, Bench};

/// Two local hosts of two rails each: ranks 0 1 and 2 3.
const TWO_RAILS: &str = "127.0.0.1 slots=2 devices=rxe0,rxe1\n127.0.0.2 slots=2 devices=rxe0,rxe1\n";

fn all_pairs(duration: &str) -> String {
    format!(
        "[run]\nduration = \"{duration}\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n\n\
         [[group]]\nname = \"rails\"\npattern = \"all-pairs\"\nrails = \"same\"\nbidirectional = true\n"
    )
}

#[test]
fn plan_prints_one_rail_of_two_hosts_per_flow_and_the_length() {
    let bench = Bench::new();
    let scenario = bench.write("rails.toml", &all_pairs("10s"));
    let plan = |hostfile: &str| {
        let hosts = bench.write("hosts", hostfile);
        let out = bench.run(&["plan", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let stdout = plan(TWO_RAILS);
    let flows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  flow")).collect();
    // "  flow    0  rails        0 (127.0.0.1#0) -> 2 (127.0.0.2#0)  1 x 128K B": the ends.
    let ends: Vec<&str> = flows
        .iter()
        .map(|line| line.split_once(" rails ").unwrap().1.trim_start().split("  ").next().unwrap())
        .collect();
    assert_eq!(
        ends,
        [
            "0 (127.0.0.1#0) -> 2 (127.0.0.2#0)",
            "1 (127.0.0.1#1) -> 3 (127.0.0.2#1)",
            "2 (127.0.0.2#0) -> 0 (127.0.0.1#0)",
            "3 (127.0.0.2#1) -> 1 (127.0.0.1#1)",
        ],
        "{stdout}"
    );
    assert!(stdout.contains("phase 0 `round 1/1`: 4 flow(s)\n"), "{stdout}");
    assert!(stdout.contains("\ngroup `rails` (all-pairs, rails = \"same\"): 4 flow(s) in 1 round(s)\n"), "{stdout}");
    assert!(stdout.ends_with("\nestimate: 1 phase(s) × 10s 200ms (warm-up + duration) + 1s setup ≈ 11s\n"), "{stdout}");
    // A third host of one rail: paired on rail 0 only, and said.
    let stdout = plan(&format!("{TWO_RAILS}127.0.0.3 devices=rxe0\n"));
    assert!(stdout.contains("\ngroup `rails` (all-pairs, rails = \"same\"): 8 flow(s) in 3 round(s)\n"), "{stdout}");
    assert!(
        stdout.contains("\nnote: group `rails`: the hosts do not all have the same rails (ranks): 2 host(s) have 2, 127.0.0.3 has 1;"),
        "{stdout}"
    );
    for rail_1 in ["1 (127.0.0.1#1)", "3 (127.0.0.2#1)"] {
        for pair in [format!("{rail_1} -> 4 ("), format!("4 (127.0.0.3) -> {rail_1}")] {
            assert!(!stdout.contains(&pair), "{pair} in\n{stdout}");
        }
    }
}

#[test]
fn a_local_run_moves_bytes_on_the_same_rail_of_two_hosts_only() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1 slots=2\n127.0.0.2 slots=2\n");
    // 2 s: the skew four workers may start apart on a busy machine stays well inside 10 % of it.
    let scenario = bench.write("rails.toml", &all_pairs("2s"));
    let run = run_json(&bench, &scenario, &hosts, &[]);
    assert_eq!(run["scenario"]["group"][0]["rails"], "same", "the run's copy of the scenario");
    let phases = run["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 1, "two hosts: one round");
    let flows = phases[0]["flows"].as_array().unwrap();
    let mut ends: Vec<(&str, &str)> =
        flows.iter().map(|f| (f["src_host"].as_str().unwrap(), f["dst_host"].as_str().unwrap())).collect();
    ends.sort_unstable();
    assert_eq!(
        ends,
        [
            ("127.0.0.1#0", "127.0.0.2#0"),
            ("127.0.0.1#1", "127.0.0.2#1"),
            ("127.0.0.2#0", "127.0.0.1#0"),
            ("127.0.0.2#1", "127.0.0.1#1"),
        ]
    );
    for f in flows {
        assert!(f["rx_bytes"].as_u64().unwrap() > 0, "{f}");
    }
}
