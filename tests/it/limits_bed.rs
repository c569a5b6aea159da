//! Why each number, on the test bed, from TCP's own view of each sender
//! (`flows[].tcp`, its streams' `TCP_INFO`): an incast into a switch port
//! shaped to 200 Mbit/s (tc tbf on the bridge side of h1's veth, which the
//! hosts cannot see) is congestion, never a CPU and never the veth's
//! 10 Gb/s line; a sender whose switch port drops 2 % of what it sends (a
//! bad cable: nftables, as this kernel has no netem) is held by loss, and
//! the clean pair beside it is not; a sender whose own interface carries a
//! tbf, or an htb under one top class, is held at that limiter's rate,
//! named as its line.

use crate::common;

use common::testbed::Bed;
use common::{run_json, Bench};
use serde_json::Value;

fn limit(flow: &Value) -> &str {
    flow["limit"]["kind"].as_str().unwrap_or_else(|| panic!("no limit: {flow}"))
}

fn evidence(flow: &Value, what: &str) -> f64 {
    let found = flow["limit"]["evidence"].as_array().unwrap().iter().find(|e| e["what"] == what);
    found.and_then(|e| e["value"].as_f64()).unwrap_or_else(|| panic!("no `{what}`: {}", flow["limit"]))
}

fn run(bed: &Bed, bench: &Bench, scenario: &str) -> Value {
    let ssh = bed.ssh_args();
    let extra: Vec<&str> = ssh.iter().map(String::as_str).collect();
    run_json(bench, &bench.write("s.toml", scenario), &bed.hostfile, &extra)
}

#[test]
fn an_incast_behind_a_shaped_switch_port_is_congestion_never_a_cpu_or_the_veths_line() {
    let Some(bed) = Bed::up(3, &["--shape", "h1=200mbit/in"]) else { return };
    let bench = Bench::new();
    let scenario = "[run]\nduration = \"3s\"\nwarmup = \"1s\"\n\n[[group]]\nname = \"incast\"\n\
                    pattern = \"fan-in\"\nreceivers = 0\nsenders = \"1-2\"\n";
    let run = run(&bed, &bench, scenario);
    for flow in run["phases"][0]["flows"].as_array().unwrap() {
        assert!(["congestion", "shared_link"].contains(&limit(flow)), "{flow}");
        let tcp = &flow["tcp"];
        assert!(tcp["srtt_us"].as_f64().unwrap() > 2.0 * tcp["min_rtt_us"].as_f64().unwrap(), "queued: {tcp}");
        if limit(flow) == "congestion" {
            // The round trip grew by the tbf's queue: milliseconds at 200 Mbit/s, tens of µs without.
            assert!(evidence(flow, "round trip") > 1000.0, "{flow}");
            let share = evidence(flow, "share of rank 0's 2 senders");
            assert!((0.0..=100.0).contains(&share), "{flow}");
        }
    }
    assert_eq!(run["phases"][0]["limit"]["of"], 2, "{}", run["phases"][0]["limit"]);
}

#[test]
fn a_sender_behind_a_lossy_cable_is_held_by_loss_and_the_clean_pair_beside_it_is_not() {
    // An MTU of 1500 keeps the lossy flow off the veth's 10 Gb/s "line" (at 9000 it nears it). Quiet: a
    // test's burners beside it would starve these threads, and a CPU verdict comes before loss.
    let Some(bed) = Bed::up_quiet(4, &["--mtu", "1500"]) else { return };
    bed.lossy("h2=2");
    let bench = Bench::new();
    let scenario = "[run]\nduration = \"3s\"\nwarmup = \"1s\"\n\n[[group]]\nname = \"pairs\"\n\
                    pattern = \"explicit\"\nflows = [[1, 0], [3, 2]]\n";
    let run = run(&bed, &bench, scenario);
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    let (lossy, clean) = (&flows[0], &flows[1]);
    assert_eq!(limit(lossy), "loss", "{lossy}");
    // TCP resent about what the port dropped: each lost segment once, some twice.
    let resent = lossy["tcp"]["retrans_pct"].as_f64().unwrap();
    assert!((1.0..6.0).contains(&resent), "2 % dropped, {resent} % retransmitted: {lossy}");
    assert!(evidence(lossy, "retransmitted") > 0.0, "{lossy}");
    assert_ne!(limit(clean), "loss", "{clean}");
    assert!(clean["tcp"]["retrans_pct"].as_f64().unwrap() < 0.1, "{clean}");
}

#[test]
fn a_sender_whose_own_interface_carries_a_tbf_or_an_htb_is_at_that_limiters_line() {
    let Some(bed) = Bed::up(2, &["--shape", "h2=200mbit/out"]) else { return };
    let bench = Bench::new();
    let scenario = "[run]\nduration = \"3s\"\nwarmup = \"1s\"\n\n[[group]]\nname = \"out\"\n\
                    pattern = \"explicit\"\nflows = [[1, 0]]\n";
    let run = run(&bed, &bench, scenario);
    let phase = &run["phases"][0];
    // The limiter as the sender's rank read it over rtnetlink: the bed's own tbf.
    let limiter = &phase["ranks"][1]["netdevs"][0]["limiter"];
    assert_eq!(
        (limiter["qdisc"].as_str(), limiter["rate_bps"].as_u64()),
        (Some("tbf"), Some(200_000_000)),
        "{limiter}"
    );
    assert!(phase["ranks"][0]["netdevs"][0]["limiter"].is_null(), "the receiver has none: {}", phase["ranks"][0]);
    let flow = &phase["flows"][0];
    assert_eq!(limit(flow), "line_rate", "{flow}");
    assert_eq!(evidence(flow, "line rate"), 0.2, "{flow}");
    let rule = flow["limit"]["rule"].as_str().unwrap();
    assert!(rule.contains("tbf on eth0 of") && rule.contains("an egress rate limiter"), "{rule}");

    // The same interface under an htb: a top class with a 150 Mbit/s ceil,
    // and the default class under it allowed to borrow up to that ceil.
    for cmd in [
        "tc qdisc replace dev eth0 root handle 1: htb default 10",
        "tc class add dev eth0 parent 1: classid 1:1 htb rate 150mbit ceil 150mbit",
        "tc class add dev eth0 parent 1:1 classid 1:10 htb rate 50mbit ceil 150mbit",
    ] {
        let out = bed.exec("h2", &cmd.split(' ').collect::<Vec<_>>());
        assert!(out.status.success(), "{cmd}: {}", common::text(&out.stderr));
    }
    let run = self::run(&bed, &bench, scenario);
    let phase = &run["phases"][0];
    let limiter = &phase["ranks"][1]["netdevs"][0]["limiter"];
    assert_eq!((limiter["qdisc"].as_str(), limiter["rate_bps"].as_u64()), (Some("htb"), Some(150_000_000)));
    let flow = &phase["flows"][0];
    assert_eq!(limit(flow), "line_rate", "{flow}");
    assert_eq!(evidence(flow, "line rate"), 0.15, "{flow}");
    let rule = flow["limit"]["rule"].as_str().unwrap();
    assert!(rule.contains("htb on eth0 of") && rule.contains("at 0.15 Gb/s"), "{rule}");
}
