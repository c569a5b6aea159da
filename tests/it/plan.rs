//! Every pattern's plan: counts, and invariants over random job sizes.

use std::path::Path;

use fabricbench::plan::{self, Plan};
use fabricbench::scenario::rdma::CompletionMode;
use fabricbench::scenario::{Op, Transport};
use fabricbench::{hostfile, scenario};
use proptest::prelude::*;

fn plan_for(ranks: usize, group: &str) -> Result<Plan, String> {
    let hosts: String = (0..ranks).map(|i| format!("n{i}\n")).collect();
    let hosts = hostfile::parse(&hosts, Path::new("hosts")).unwrap();
    let text = format!("[[group]]\nname = \"g\"\n{group}\n");
    let (s, source) = scenario::parse(&text, Path::new("s.toml")).map_err(|e| e.to_string())?;
    plan::build(&hosts, &s).map_err(|bad| source.explain(&bad))
}

fn pairs(plan: &Plan) -> Vec<(usize, usize)> {
    plan.phases[0].flows.iter().map(|f| (f.src, f.dst)).collect()
}

#[test]
fn fan_in_defaults_to_everyone_into_rank_0() {
    let p = plan_for(4, "pattern = \"fan-in\"").unwrap();
    assert_eq!(pairs(&p), [(1, 0), (2, 0), (3, 0)]);
    let p = plan_for(4, "pattern = \"all-to-one\"\nreceivers = 2\nsenders = [0, 1]").unwrap();
    assert_eq!(pairs(&p), [(0, 2), (1, 2)]);
}

#[test]
fn one_to_all_ring_pairwise_explicit() {
    assert_eq!(pairs(&plan_for(3, "pattern = \"one-to-all\"").unwrap()), [(0, 1), (0, 2)]);
    assert_eq!(pairs(&plan_for(3, "pattern = \"ring\"").unwrap()), [(0, 1), (1, 2), (2, 0)]);
    assert_eq!(pairs(&plan_for(2, "pattern = \"ring\"\nbidirectional = true").unwrap()), [(0, 1), (1, 0)]);
    assert_eq!(pairs(&plan_for(4, "pattern = \"pairwise\"").unwrap()), [(0, 2), (1, 3)]);
    assert_eq!(
        pairs(&plan_for(4, "pattern = \"pairwise\"\nbidirectional = true").unwrap()),
        [(0, 2), (1, 3), (2, 0), (3, 1)]
    );
    assert_eq!(pairs(&plan_for(4, "pattern = \"pairwise\"\nflows = [[0, 1], [3, 2]]").unwrap()), [(0, 1), (3, 2)]);
    assert_eq!(pairs(&plan_for(3, "pattern = \"explicit\"\nflows = [[2, 0], [1, 0]]").unwrap()), [(2, 0), (1, 0)]);
    assert_eq!(pairs(&plan_for(2, "pattern = \"explicit\"\nflows = [[1, 1]]\nallow_self = true").unwrap()), [(1, 1)]);
}

#[test]
fn plan_errors_name_the_field() {
    assert_eq!(
        plan_for(3, "pattern = \"pairwise\"").unwrap_err(),
        "s.toml:1: group \"g\": field `ranks`: pairwise needs an even number of ranks, got 3"
    );
    assert_eq!(
        plan_for(2, "pattern = \"explicit\"\nflows = [[1, 1]]").unwrap_err(),
        "s.toml:4: group \"g\": field `flows`: flow 0 [1, 1] goes from a rank to itself; set allow_self = true to measure loopback"
    );
    assert_eq!(
        plan_for(2, "pattern = \"explicit\"\nflows = [[0, 1], [0, 1]]").unwrap_err(),
        "s.toml:4: group \"g\": field `flows`: flow 1 [0, 1] is listed twice"
    );
    assert_eq!(
        plan_for(2, "pattern = \"explicit\"\nflows = [[0, 5]]").unwrap_err(),
        "s.toml:4: group \"g\": field `flows`: flow 0 [0, 5]: rank 5 does not exist: the hostfile has 2 host(s), ranks 0-1"
    );
    assert_eq!(
        plan_for(1, "pattern = \"fan-in\"").unwrap_err(),
        "s.toml:3: group \"g\": field `pattern`: `fan-in` gives no flows with 1 rank(s)"
    );
}

const PATTERNS: [&str; 5] = ["fan-in", "one-to-all", "all-to-all", "ring", "pairwise"];

proptest! {
    #[test]
    fn invariants(n in 2usize..40, which in 0usize..5, bidirectional: bool) {
        let pattern = PATTERNS[which];
        let extra = if matches!(pattern, "ring" | "pairwise") { format!("bidirectional = {bidirectional}") } else { String::new() };
        let n = if pattern == "pairwise" { n & !1 } else { n };
        let p = plan_for(n, &format!("pattern = \"{pattern}\"\n{extra}")).unwrap();
        let flows = &p.phases[0].flows;
        // Every flow's ranks exist, no self-flows, no duplicates, ids are dense.
        for (i, f) in flows.iter().enumerate() {
            prop_assert_eq!(f.id as usize, i);
            prop_assert!(f.src < n && f.dst < n);
            prop_assert_ne!(f.src, f.dst);
        }
        let mut unique = pairs(&p);
        unique.sort_unstable();
        unique.dedup();
        prop_assert_eq!(unique.len(), flows.len());
        let expected = match (pattern, bidirectional) {
            ("fan-in" | "one-to-all", _) => n - 1,
            ("all-to-all", _) => n * (n - 1),
            ("ring", false) => n,
            ("ring", true) if n == 2 => 2,
            ("ring", true) => 2 * n,
            ("pairwise", false) => n / 2,
            ("pairwise", true) => n,
            _ => unreachable!(),
        };
        prop_assert_eq!(flows.len(), expected);
        // Deterministic: the same inputs give the same plan.
        prop_assert_eq!(&p, &plan_for(n, &format!("pattern = \"{pattern}\"\n{extra}")).unwrap());
    }
}

fn sweep_plan(ranks: usize, text: &str) -> Result<Plan, String> {
    let hosts: String = (0..ranks).map(|i| format!("n{i}\n")).collect();
    let hosts = hostfile::parse(&hosts, Path::new("hosts")).unwrap();
    let (s, source) = scenario::parse(text, Path::new("s.toml")).map_err(|e| e.to_string())?;
    plan::build(&hosts, &s).map_err(|bad| source.explain(&bad))
}

const FAN: &str = "[[group]]\nname = \"in\"\npattern = \"fan-in\"\n";

#[test]
fn sweeps_make_one_phase_per_point() {
    let p =
        sweep_plan(5, &format!("{FAN}[sweep]\nparameter = \"senders\"\nvalues = [1, 2, 4]\nbaseline = 2\n")).unwrap();
    let senders: Vec<Vec<usize>> = p.phases.iter().map(|ph| ph.flows.iter().map(|f| f.src).collect()).collect();
    assert_eq!(senders, [vec![1], vec![1, 2], vec![1, 2, 3, 4]]);
    let names: Vec<&str> = p.phases.iter().map(|ph| ph.name.as_str()).collect();
    assert_eq!(names, ["senders=1", "senders=2", "senders=4"]);
    let baselines: Vec<bool> = p.phases.iter().map(|ph| ph.sweep.as_ref().unwrap().baseline).collect();
    assert_eq!(baselines, [false, true, false]);

    let p = sweep_plan(2, &format!("{FAN}[sweep]\nparameter = \"message_size\"\nvalues = [\"4K\", 65536]\n")).unwrap();
    let sizes: Vec<u64> = p.phases.iter().map(|ph| ph.groups[0].message_size.bytes()).collect();
    assert_eq!(sizes, [4096, 65536]);

    let text = format!("{FAN}[[stress]]\nranks = 0\n[sweep]\nparameter = \"stress.load\"\nvalues = [0, 50]\n");
    let p = sweep_plan(2, &text).unwrap();
    assert!(p.phases[0].stress.is_empty(), "load 0 = unloaded baseline");
    assert_eq!(p.phases[1].stress[0].spec.load, 50);
}

#[test]
fn sweep_errors_name_the_field() {
    let e = sweep_plan(3, &format!("{FAN}[sweep]\nparameter = \"senders\"\nvalues = [1, 3]\n")).unwrap_err();
    assert_eq!(e, "s.toml:6: [sweep]: field `values`: 3 senders asked, but group `in` has only 2");
    let e = sweep_plan(3, &format!("{FAN}[sweep]\nparameter = \"stress.load\"\nvalues = [1]\n")).unwrap_err();
    assert_eq!(e, "s.toml:5: [sweep]: field `parameter`: `stress.load` needs a [[stress]] table to vary");
    let e =
        sweep_plan(3, &format!("{FAN}[sweep]\nparameter = \"streams\"\nvalues = [1]\ngroup = \"x\"\n")).unwrap_err();
    assert_eq!(e, "s.toml:7: [sweep]: field `group`: no group is named `x` (groups: in)");
    let e =
        sweep_plan(3, &format!("{FAN}[sweep]\nparameter = \"streams\"\nvalues = [1, 2]\nbaseline = 3\n")).unwrap_err();
    assert_eq!(e, "s.toml:7: [sweep]: field `baseline`: `3` is not one of the values");
    let e = sweep_plan(3, &format!("{FAN}[sweep]\nparameter = \"transport\"\nvalues = [\"carrier-pigeon\"]\n"))
        .unwrap_err();
    assert_eq!(e, "s.toml:6: [sweep]: field `values`: `carrier-pigeon` is not a transport (valid: tcp, rdma)");
    let e = sweep_plan(3, &format!("{FAN}[[stress]]\nload = 120\n")).unwrap_err();
    assert_eq!(e, "s.toml:5: stress 0: field `load`: 120 is not a duty cycle; use 1 to 100 (percent)");
    let e = sweep_plan(3, &format!("{FAN}[[stress]]\nranks = \"0-1\"\n[[stress]]\nranks = 1\n")).unwrap_err();
    assert_eq!(e, "s.toml:7: stress 1: field `ranks`: rank 1 already runs the stress of table 0");
}

#[test]
fn a_run_of_more_phases_than_the_limit_is_refused_naming_the_repeats() {
    let values: Vec<String> = (1..=2000).map(|v| v.to_string()).collect();
    let sweep = format!("[sweep]\nparameter = \"message_size\"\nvalues = [{}]\n", values.join(", "));
    let e = sweep_plan(2, &format!("[run]\nrepeat = 51\n\n{FAN}{sweep}")).unwrap_err();
    assert_eq!(
        e,
        "s.toml:2: [run]: field `repeat`: 2000 phases × 51 repeats make 102000 phases; a run takes at most \
         100000: fewer repeats or sweep points, or several runs"
    );
    assert_eq!(sweep_plan(2, &format!("[run]\nrepeat = 50\n\n{FAN}{sweep}")).unwrap().phases.len(), 100_000);
}

const RDMA_FAN: &str = "[[group]]\nname = \"in\"\npattern = \"fan-in\"\ntransport = \"rdma\"\nmessage_size = 64\n";

#[test]
fn rdma_knobs_sweep_one_phase_per_point() {
    let knob = |ph: &plan::Phase| ph.groups[0].rdma_request().unwrap();
    let p = sweep_plan(2, &format!("{RDMA_FAN}[sweep]\nparameter = \"qps\"\nvalues = [1, 4]\n")).unwrap();
    assert_eq!(p.phases.iter().map(|ph| knob(ph).knobs.qps).collect::<Vec<_>>(), [1, 4]);
    let p = sweep_plan(2, &format!("{RDMA_FAN}[sweep]\nparameter = \"completion\"\nvalues = [\"busy\", \"event\"]\n"))
        .unwrap();
    assert_eq!(knob(&p.phases[1]).knobs.completion, CompletionMode::Event);
    assert_eq!(knob(&p.phases[1]).message_size, 64, "the group's own size stays");
    for (parameter, value) in [("tx_depth", 32), ("cq_moderation", 8), ("inline_size", 64), ("rdma.post_list", 4)] {
        let p =
            sweep_plan(2, &format!("{RDMA_FAN}[sweep]\nparameter = \"{parameter}\"\nvalues = [{value}]\n")).unwrap();
        let k = knob(&p.phases[0]);
        let got = [k.knobs.tx_depth, k.knobs.cq_moderation, k.knobs.inline_size.unwrap_or(0), k.knobs.post_list];
        assert!(got.contains(&value), "{parameter}: {k:?}");
    }
}

#[test]
fn rdma_knob_sweep_errors_name_the_point() {
    let e = sweep_plan(2, &format!("{FAN}[sweep]\nparameter = \"qps\"\nvalues = [2]\n")).unwrap_err();
    assert_eq!(e, "s.toml:6: [sweep]: field `values`: sweeping `qps` needs an RDMA group (transport = \"rdma\")");
    let text = format!("{RDMA_FAN}[group.rdma]\ntx_depth = 8\n[sweep]\nparameter = \"post_list\"\nvalues = [1, 16]\n");
    let e = sweep_plan(2, &text).unwrap_err();
    assert!(
        e.contains(
            "field `values`: group `in` at post_list=16: invalid RDMA parameter post_list: 16 must be 1..=tx_depth (8)"
        ),
        "{e}"
    );
    let e =
        sweep_plan(2, &format!("{RDMA_FAN}[sweep]\nparameter = \"completion\"\nvalues = [\"spin\"]\n")).unwrap_err();
    assert!(e.ends_with("`spin` is not a completion mode (valid: busy, event)"), "{e}");
}

#[test]
fn two_parameter_sweeps_make_a_phase_per_cell() {
    let text = format!(
        "{RDMA_FAN}[sweep]\nparameter = \"qps\"\nvalues = [1, 2]\nbaseline = 1\n[sweep.by]\nparameter = \"post_list\"\nvalues = [1, 8]\n"
    );
    let p = sweep_plan(2, &text).unwrap();
    let names: Vec<&str> = p.phases.iter().map(|ph| ph.name.as_str()).collect();
    assert_eq!(names, ["qps=1 post_list=1", "qps=1 post_list=8", "qps=2 post_list=1", "qps=2 post_list=8"]);
    let cells: Vec<(u32, u32)> = p
        .phases
        .iter()
        .map(|ph| ph.groups[0].rdma.as_ref().map(|r| (r.knobs.qps, r.knobs.post_list)).unwrap())
        .collect();
    assert_eq!(cells, [(1, 1), (1, 8), (2, 1), (2, 8)]);
    // Each column has its own baseline row.
    let baselines: Vec<bool> = p.phases.iter().map(|ph| ph.sweep.as_ref().unwrap().baseline).collect();
    assert_eq!(baselines, [true, true, false, false]);
    assert_eq!(p.phases[1].sweep.as_ref().unwrap().by.as_ref().unwrap().value, "8");

    // TCP vs RDMA under stress: the RDMA op and knobs leave the TCP points.
    let text =
        "[[group]]\nname = \"in\"\npattern = \"fan-in\"\ntransport = \"rdma\"\nop = \"write\"\n[group.rdma]\nqps = 2\n\
        [[stress]]\nranks = 0\n[sweep]\nparameter = \"stress.threads\"\nvalues = [0, 1]\n\
        [sweep.by]\nparameter = \"transport\"\nvalues = [\"tcp\", \"rdma\"]\n";
    let p = sweep_plan(2, text).unwrap();
    let tcp = &p.phases[2].groups[0];
    assert_eq!((tcp.transport, tcp.op, tcp.rdma.is_none()), (Transport::Tcp, Op::Send, true));
    assert_eq!(p.phases[3].groups[0].rdma.as_ref().unwrap().knobs.qps, 2);
    assert!(p.phases[0].stress.is_empty() && p.phases[3].stress.len() == 1);

    let e = sweep_plan(
        2,
        &format!(
            "{RDMA_FAN}[sweep]\nparameter = \"qps\"\nvalues = [1]\n[sweep.by]\nparameter = \"qps\"\nvalues = [2]\n"
        ),
    )
    .unwrap_err();
    assert_eq!(e, "s.toml:9: [sweep]: field `by`: sweeps `qps` twice; give the columns another parameter");
}

#[test]
fn all_pairs_makes_one_phase_per_round() {
    let p = plan_for(6, "pattern = \"all-pairs\"").unwrap();
    assert_eq!(p.phases.len(), 5);
    assert_eq!(p.phases[0].name, "round 1/5");
    assert!(p.phases.iter().all(|ph| ph.flows.len() == 3));
    let p = plan_for(5, "pattern = \"all-pairs\"\nbidirectional = true\nranks = \"0-4\"").unwrap();
    assert_eq!(p.phases.len(), 5, "odd: one rank idle per round");
    assert!(p
        .phases
        .iter()
        .all(|ph| ph.flows.len() == 4 && ph.flows.iter().enumerate().all(|(i, f)| f.id == i as u32)));
    assert_eq!(
        plan_for(1, "pattern = \"all-pairs\"").unwrap_err(),
        "s.toml:3: group \"g\": field `pattern`: `all-pairs` gives no flows with 1 rank(s)"
    );
    let text = "pattern = \"all-pairs\"\n[[group]]\nname = \"other\"\npattern = \"ring\"";
    assert_eq!(
        plan_for(4, text).unwrap_err(),
        "s.toml:3: group \"g\": field `pattern`: `all-pairs` runs in rounds of its own (one phase per round): give it a scenario without other groups"
    );
}

#[test]
fn hostfile_devices_are_the_rails_of_rdma_groups_that_name_none() {
    let hosts = "n0 slots=1 devices=mlx5_0,mlx5_1\nn1 slots=1 devices=mlx5_2,mlx5_3,mlx5_4\nn2\n";
    let hosts = hostfile::parse(hosts, Path::new("hosts")).unwrap();
    let rails = |group: &str| {
        let text = format!("[[group]]\nname = \"g\"\npattern = \"explicit\"\nflows = [[1, 0], [2, 0]]\n{group}");
        let (s, _) = scenario::parse(&text, Path::new("s.toml")).unwrap();
        let p = plan::build(&hosts, &s).unwrap();
        let phase = &p.phases[0];
        phase.flows.iter().map(|f| p.host_rails(&phase.groups[f.group], f)).collect::<Vec<_>>()
    };
    let names = |v: &[&str]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>();
    // As many rails as both ends have, each end on its own devices; a host with none: no rails.
    assert_eq!(
        rails("transport = \"rdma\"\n"),
        [[names(&["mlx5_2", "mlx5_3"]), names(&["mlx5_0", "mlx5_1"])], [vec![], vec![]]]
    );
    // The group's own choice wins; TCP has no rails.
    let none: [Vec<String>; 2] = Default::default();
    assert_eq!(rails("transport = \"rdma\"\n[group.rdma]\ndevice = \"mlx5_9\"\n")[0], none);
    assert_eq!(rails("transport = \"tcp\"\n")[0], none);
}

#[test]
fn rdma_tables_refuse_what_the_group_or_the_window_decides() {
    let err = |knob: &str| {
        plan_for(2, &format!("pattern = \"fan-in\"\ntransport = \"rdma\"\n[group.rdma]\n{knob}")).unwrap_err()
    };
    let e = err("iterations = 5000");
    assert!(e.starts_with("s.toml:5: group \"g\": field `rdma`: `iterations` (perftest's -n) does not apply"), "{e}");
    assert!(e.contains("set `duration` in [run]"), "{e}");
    // The group's own keys are refused in its rdma table even when they
    // say what the default would: the error shows where they go.
    for (knob, line) in [
        ("op = \"read\"", "s.toml:6: group \"g\": field `rdma.op`: `op` is the group's"),
        ("op = \"write\"", "s.toml:6: group \"g\": field `rdma.op`: `op` is the group's"),
        ("mode = \"bandwidth\"", "s.toml:6: group \"g\": field `rdma.mode`: `mode` is the group's"),
        ("qps = 2\nmessage_size = 65536", "s.toml:7: group \"g\": field `rdma.message_size`:"),
    ] {
        let e = err(knob);
        assert!(e.starts_with(line), "{knob}: {e}");
        let key = knob.lines().last().unwrap();
        assert!(e.contains(&format!("write `{key}` in the [[group]] table itself")), "{knob}: {e}");
    }
    // A retired knob says what took its place.
    let e = err("qps = 2\npoll_strategy = \"one_per_poll\"");
    assert!(e.starts_with("s.toml:7: group \"g\": field `rdma.poll_strategy`: `poll_strategy` is no longer"), "{e}");
    assert!(e.contains("ibv_poll_cq, up to `poll_batch` per poll"), "{e}");
    let inline =
        plan_for(2, "pattern = \"fan-in\"\ntransport = \"rdma\"\nrdma = { qps = 2, op = \"send\" }").unwrap_err();
    assert!(inline.starts_with("s.toml:5: group \"g\": field `rdma.op`: `op` is the group's"), "{inline}");
    // On the group itself they are what they always were.
    plan_for(
        2,
        "pattern = \"fan-in\"\ntransport = \"rdma\"\nop = \"write\"\nmode = \"bandwidth\"\n[group.rdma]\nqps = 2",
    )
    .unwrap();
}
