//! Why each number, on local ranks (docs/METRICS.md, "Why this number"): a
//! paced flow is `paced`, a loopback flow is held by a CPU and never by a
//! line, and a flow whose ranks' cores are all taken by burners is held by
//! the CPU it waited for, as schedstat measured the wait in the same run.

use crate::common::{self, run_json, Bench, LOCAL_HOSTS};

fn scenario(extra: &str) -> String {
    format!(
        "[run]\nduration = \"2s\"\nwarmup = \"500ms\"\n\n[[group]]\nname = \"paced\"\npattern = \"explicit\"\n\
         flows = [[0, 1]]\nrate = \"300 Mb/s\"\n\n[[group]]\nname = \"free\"\npattern = \"explicit\"\n\
         flows = [[2, 3]]\n{extra}"
    )
}

fn limit(flow: &serde_json::Value) -> (&str, &str) {
    let limit = &flow["limit"];
    (limit["kind"].as_str().unwrap_or_else(|| panic!("no limit: {flow}")), limit["rule"].as_str().unwrap())
}

fn evidence(flow: &serde_json::Value, what: &str) -> f64 {
    let found = flow["limit"]["evidence"].as_array().unwrap().iter().find(|e| e["what"] == what);
    found.and_then(|e| e["value"].as_f64()).unwrap_or_else(|| panic!("no `{what}`: {}", flow["limit"]))
}

#[test]
fn a_paced_flow_is_paced_and_a_loopback_flow_is_held_by_a_cpu_never_a_line() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let run = run_json(&bench, &bench.write("s.toml", &scenario("")), &bench.write("hosts", LOCAL_HOSTS), &[]);
    let phase = &run["phases"][0];
    let (paced, free) = (&phase["flows"][0], &phase["flows"][1]);
    assert_eq!(limit(paced).0, "paced", "{paced}");
    assert!(evidence(paced, "delivered / offered") >= 90.0, "{paced}");
    assert!(["sender_cpu", "receiver_cpu"].contains(&limit(free).0), "{free}");
    // Each rank read its data thread's run-queue wait (schedstat).
    for rank in phase["ranks"].as_array().unwrap() {
        assert!(rank["cpu"]["data"]["wanting_thread"]["demand_pct"].as_f64().is_some(), "{rank}");
    }
    for (g, kind) in [(0, "paced"), (1, limit(free).0)] {
        let held = &phase["groups"][g]["limit"];
        assert_eq!(
            (held["kind"].as_str(), held["flows"].as_u64(), held["of"].as_u64()),
            (Some(kind), Some(1), Some(1))
        );
    }
    assert_eq!(phase["limit"]["of"], 2, "{}", phase["limit"]);
}

#[test]
fn a_flow_whose_cores_are_taken_by_burners_is_held_by_the_cpu_it_waited_for() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    // A burner on every core of the (one) host, from ranks 2 and 3: the
    // free flow's data threads wait for a core most of the window.
    let stress = "\n[[stress]]\nranks = [2, 3]\nthreads = \"all\"\nload = 100\n";
    let run = run_json(&bench, &bench.write("s.toml", &scenario(stress)), &bench.write("hosts", LOCAL_HOSTS), &[]);
    let free = &run["phases"][0]["flows"][1];
    let (kind, rule) = limit(free);
    assert!(["sender_cpu", "receiver_cpu"].contains(&kind), "{free}");
    // The CPU rule itself fired on the measured wait, not the loopback one.
    assert!(rule.starts_with("a data thread of the"), "{free}");
    let end = if kind == "sender_cpu" { "sender" } else { "receiver" };
    assert!(evidence(free, &format!("{end} data thread waited for a core")) >= 20.0 || rule.contains("ran"), "{free}");
}
