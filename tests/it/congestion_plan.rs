//! `[congestion]` and `random-ring` as planned: each canary group isolated
//! then congested, a split reproducible from its seed, and every bad input
//! named by file, line and field.

use std::collections::HashSet;
use std::path::Path;

use fabricbench::plan::{self, Plan};
use fabricbench::{hostfile, scenario};

fn plan_of(ranks: usize, text: &str) -> Result<Plan, String> {
    let hosts: String = (0..ranks).map(|i| format!("n{i}\n")).collect();
    let hosts = hostfile::parse(&hosts, Path::new("hosts")).unwrap();
    let (s, source) = scenario::parse(text, Path::new("s.toml")).map_err(|e| e.to_string())?;
    plan::build(&hosts, &s).map_err(|bad| source.explain(&bad))
}

const RUN: &str = "[run]\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n";

/// The shipped scenario's shape: two random-ring canaries, an incast congestor, split 0.8.
fn split_scenario(seed: u64) -> String {
    format!(
        "{RUN}\n[congestion]\nsplit = 0.8\nseed = {seed}\n\n\
         [[group]]\nname = \"lat\"\nrole = \"canary\"\npattern = \"random-ring\"\nmode = \"latency\"\n\n\
         [[group]]\nname = \"bw\"\nrole = \"canary\"\npattern = \"random-ring\"\n\n\
         [[group]]\nname = \"incast\"\nrole = \"congestor\"\npattern = \"fan-in\"\n"
    )
}

fn pairs(plan: &Plan, phase: usize, group: &str) -> Vec<(usize, usize)> {
    let p = &plan.phases[phase];
    p.flows.iter().filter(|f| p.groups[f.group].name == group).map(|f| (f.src, f.dst)).collect()
}

#[test]
fn random_ring_is_one_cycle_through_a_seeded_order() {
    let ring = |seed: u64| {
        let p = plan_of(8, &format!("[[group]]\nname = \"g\"\npattern = \"random-ring\"\nseed = {seed}\n")).unwrap();
        pairs(&p, 0, "g")
    };
    let a = ring(3);
    assert_eq!(a.len(), 8, "{a:?}");
    assert_eq!(a.iter().map(|p| p.0).collect::<HashSet<_>>().len(), 8, "every rank sends once: {a:?}");
    assert_eq!(a.iter().map(|p| p.1).collect::<HashSet<_>>().len(), 8, "every rank receives once: {a:?}");
    // Following successors from rank 0 visits every rank before coming back: one cycle.
    let (mut at, mut seen) = (0, 0);
    loop {
        at = a.iter().find(|p| p.0 == at).unwrap().1;
        seen += 1;
        if at == 0 {
            break;
        }
    }
    assert_eq!(seen, 8, "one ring, not several: {a:?}");
    assert_eq!(a, ring(3), "the same seed, the same ring");
    assert_ne!(a, ring(4), "another seed, another ring");
    let plain: Vec<(usize, usize)> = (0..8).map(|i| (i, (i + 1) % 8)).collect();
    assert_ne!(a, plain, "not the natural ring");
}

#[test]
fn each_canary_is_planned_isolated_then_congested_on_its_split_ranks() {
    let p = plan_of(10, &split_scenario(1)).unwrap();
    let names: Vec<&str> = p.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["lat isolated", "lat congested", "bw isolated", "bw congested"]);
    let points: Vec<(String, bool)> =
        p.phases.iter().map(|p| p.congestion.as_ref().map(|c| (c.canary.clone(), c.congested)).unwrap()).collect();
    assert_eq!(points[1], ("lat".to_string(), true));
    assert_eq!(points[2], ("bw".to_string(), false));

    let split = plan::split(10, 0.8, 1).unwrap();
    assert_eq!((split.congestors.len(), split.canaries.len()), (8, 2));
    for phase in [0, 1] {
        for (src, dst) in pairs(&p, phase, "lat") {
            assert!(split.canaries.contains(&src) && split.canaries.contains(&dst), "{src} → {dst} is a canary flow");
        }
    }
    assert!(pairs(&p, 0, "incast").is_empty(), "the isolated phase has no congestor");
    assert!(pairs(&p, 0, "bw").is_empty(), "one canary group per phase");
    let incast = pairs(&p, 1, "incast");
    assert_eq!(incast.len(), 7, "every other congestor into the first of the draw: {incast:?}");
    assert!(incast.iter().all(|&(src, dst)| dst == split.congestors[0] && split.congestors.contains(&src)));

    // The seed is the whole story: the same plan again, other canaries from another seed.
    assert_eq!(p, plan_of(10, &split_scenario(1)).unwrap());
    let draws: HashSet<Vec<usize>> = (1..=6).map(|seed| plan::split(10, 0.8, seed).unwrap().canaries).collect();
    assert!(draws.len() >= 4, "six seeds draw mostly other canaries (45 pairs to draw from): {draws:?}");
    assert_eq!(pairs(&plan_of(10, &split_scenario(2)).unwrap(), 0, "lat").len(), 2, "a 2-rank ring, both ways");
}

#[test]
fn roles_without_a_split_keep_their_own_ranks() {
    let text = format!(
        "{RUN}\n[congestion]\n\n[[group]]\nname = \"near\"\nrole = \"canary\"\npattern = \"explicit\"\nmode = \"latency\"\nflows = [[1, 0]]\n\n\
         [[group]]\nname = \"incast\"\nrole = \"congestor\"\npattern = \"fan-in\"\nreceivers = 0\nsenders = \"1-2\"\n"
    );
    let p = plan_of(3, &text).unwrap();
    assert_eq!(pairs(&p, 0, "near"), [(1, 0)]);
    assert_eq!(pairs(&p, 1, "incast"), [(1, 0), (2, 0)]);
}

fn refused(ranks: usize, text: &str) -> String {
    plan_of(ranks, text).unwrap_err()
}

#[test]
fn bad_congestion_input_names_the_field() {
    let base = split_scenario(1);
    for bad in ["0", "1", "1.5", "-0.2"] {
        let e = refused(10, &base.replace("split = 0.8", &format!("split = {bad}")));
        assert!(e.starts_with("s.toml:7: [congestion]: field `split`: "), "{e}");
        assert!(e.contains("is outside (0, 1): the fraction of the ranks that congest, e.g. 0.8"), "{e}");
    }
    let e = refused(4, &base.replace("split = 0.8", "split = 0.9"));
    assert!(e.starts_with("s.toml:7: [congestion]: field `split`: split = 0.9 of 4 rank(s) makes 4 congestor(s) and 0 canary rank(s): the canaries need at least 2 ranks"), "{e}");

    let no_canary = base.replace("role = \"canary\"", "role = \"congestor\"");
    let e = refused(10, &no_canary);
    assert!(e.contains("[congestion]: field `role`: no group has role = \"canary\": mark the groups to measure with role = \"canary\""), "{e}");

    let e = refused(10, &base.replace("role = \"congestor\"", "role = \"victim\""));
    assert!(e.starts_with("s.toml:23:8: unknown variant `victim`, expected `canary` or `congestor`"), "{e}");

    let e = refused(10, &base.replace("role = \"congestor\"\n", ""));
    assert!(e.contains("group \"incast\": field `role`: every group of a congestion run needs role = \"canary\" or role = \"congestor\""), "{e}");

    let e = refused(10, &base.replace("[congestion]\nsplit = 0.8\nseed = 1\n", ""));
    assert!(e.contains("group \"lat\": field `role`: a role needs a [congestion] table"), "{e}");

    let e = refused(10, &base.replace("pattern = \"fan-in\"", "pattern = \"fan-in\"\nreceivers = 0"));
    assert!(
        e.contains("group \"incast\": field `receivers`: [congestion] split chooses the ranks of every role group"),
        "{e}"
    );

    let e = refused(10, &base.replace("warmup = \"500ms\"", "warmup = \"0s\""));
    assert!(e.contains("[run]: field `warmup`: a congestion run needs a warm-up"), "{e}");

    let e = refused(10, &format!("{base}\n[sweep]\nparameter = \"streams\"\nvalues = [1, 2]\n"));
    assert!(e.contains("[sweep]: field `parameter`: a [congestion] run makes its own phases"), "{e}");

    let e = refused(4, "[[group]]\nname = \"g\"\npattern = \"ring\"\nseed = 3\n");
    assert!(
        e.contains("group \"g\": field `seed`: only `random-ring` takes a seed; `ring` has no random order"),
        "{e}"
    );
}

#[test]
fn a_split_gives_broadcast_and_all_to_all_congestors_the_congestor_ranks() {
    let split = plan::split(10, 0.8, 5).unwrap();
    for (pattern, flows) in [("one-to-all", 7), ("all-to-all", 8 * 7)] {
        let text = split_scenario(5).replace("pattern = \"fan-in\"", &format!("pattern = \"{pattern}\""));
        let p = plan_of(10, &text).unwrap();
        let congestors = pairs(&p, 1, "incast");
        assert_eq!(congestors.len(), flows, "{pattern}: {congestors:?}");
        for (src, dst) in &congestors {
            assert!(split.congestors.contains(src) && split.congestors.contains(dst), "{pattern}: {src} → {dst}");
        }
        if pattern == "one-to-all" {
            assert!(congestors.iter().all(|&(src, _)| src == split.congestors[0]), "rooted at the first of the draw");
        }
    }
}

/// With repeats, each repeat's congested phase is judged against that
/// repeat's own isolated phase, and says which repeat it is.
#[test]
fn each_repeat_pairs_its_own_isolated_and_congested_phases() {
    let text = split_scenario(7).replacen("[run]\n", "[run]\nrepeat = 2\n", 1);
    let plan = plan_of(10, &text).unwrap();
    let impacts = fabricbench::result::congestion::summarize(&plan, &[]).expect("a congestion run");
    let got: Vec<_> =
        impacts.iter().map(|c| (c.group.as_str(), c.repeat, c.isolated_phase, c.congested_phase)).collect();
    assert_eq!(
        got,
        [
            ("lat", Some(1), Some(0), Some(1)),
            ("bw", Some(1), Some(2), Some(3)),
            ("lat", Some(2), Some(4), Some(5)),
            ("bw", Some(2), Some(6), Some(7)),
        ]
    );
    assert!(impacts.iter().all(|c| c.impact_mean.is_none()), "nothing measured yet, no impact");
}
