//! Acceptance on a rail fabric on the test bed: hosts of two data NICs
//! each (`scripts/testbed up --rails 2`), NIC k of every host on rail k's
//! leaf, TCP ranks bound to their NIC's address by `addrs=` and named by
//! `devices=`, all-pairs with `rails = "same"`. Every NIC port runs at
//! 500 Mbit/s (tbf; a round of 4 hosts is 8 flows, which at 1 Gbit/s each
//! left a 2-core CI host too busy to keep the ranks' windows); the fault
//! under test is one NIC or both NICs of one host at 150 Mbit/s, a NIC
//! whose cable is pulled and plugged back again and again, or one rail
//! leaf's uplink at 250 Mbit/s, which two flows share each way. The
//! interface counters of each host say which NIC carried what.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::acceptance_bed::{blamed_at, failed_flows};
use crate::common::testbed::Bed;
use crate::common::{read_json, text, Bench};

const RAILS: usize = 2;
const HEALTHY: &str = "500mbit";
const SLOW: &str = "150mbit";

/// The suspects still blamed after their retest, those cleared at the healthy rate.
fn blamed(run: &serde_json::Value) -> Vec<serde_json::Value> {
    blamed_at(run, 0.35)
}

/// `hI devices=eth1,eth2 addrs=…` for h1..hN: rank 2(I-1)+k-1 is hI's ethk.
fn hostfile(n: usize) -> String {
    let line = |i: usize| format!("h{i} devices=eth1,eth2 addrs=10.199.11.{i},10.199.12.{i}\n");
    (1..=n).map(line).collect()
}

/// The bed's rails as fabricbench's topology: rail k's leaf l (rKlL) holds
/// ethk of the hosts of bed leaf l, every rail leaf on the spine `rsp`.
fn topology(n: usize, leaves: usize) -> String {
    let mut text = String::new();
    let mut links = Vec::new();
    for k in 1..=RAILS {
        for l in 1..=leaves {
            let hosts: Vec<String> =
                (1..=n).filter(|i| (i - 1) * leaves / n + 1 == l).map(|i| format!("h{i}")).collect();
            text += &format!("[switch.r{k}l{l}]\nnics = \"{}:eth{k}\"\n\n", hosts.join(","));
            links.push(format!("\"r{k}l{l}\""));
        }
    }
    text + &format!("[switch.rsp]\nlinks = [{}]\n", links.join(", "))
}

/// Every NIC of `n` hosts shaped to 500 Mbit/s both ways, but those of
/// `slow` (`h3:eth2`) at 150 Mbit/s.
fn shapes(n: usize, slow: &[&str]) -> Vec<String> {
    let nics = (1..=n).flat_map(|i| (1..=RAILS).map(move |k| format!("h{i}:eth{k}")));
    nics.flat_map(|nic| {
        let rate = if slow.contains(&nic.as_str()) { SLOW } else { HEALTHY };
        ["--shape".to_string(), format!("{nic}={rate}")]
    })
    .collect()
}

/// 2 s windows: in 1 s ones a rank held up 120 ms was a degraded round.
const SCENARIO: &str = "[run]\nname = \"rails\"\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n\n\
     [[group]]\nname = \"pairs\"\npattern = \"all-pairs\"\nrails = \"same\"\nbidirectional = true\n\n\
     [check]\nflow = \"70% of best\"\n";

/// A finished acceptance: its exit code, stderr and stdout, run.json and JUnit XML.
struct Accepted {
    code: Option<i32>,
    output: String,
    run: serde_json::Value,
    junit: String,
    html: String,
}

/// An acceptance of `n` hosts on `leaves` leaves per rail, run once more
/// when it comes out degraded (exit 4): on a loaded 2-core CI host a rank
/// started 0.53 s late into a 2 s round, and the round measured nothing
/// of the fault under test.
fn accept(bed: &Bed, n: usize, leaves: usize) -> Accepted {
    let first = accept_once(bed, n, leaves);
    if first.code != Some(4) {
        return first;
    }
    eprintln!("degraded (exit 4), running the acceptance once more:\n{}", first.output);
    accept_once(bed, n, leaves)
}

fn accept_once(bed: &Bed, n: usize, leaves: usize) -> Accepted {
    let bench = Bench::new();
    let (scenario, hosts) = (bench.write("accept.toml", SCENARIO), bench.write("hosts", &hostfile(n)));
    let fabric = bench.write("fabric.toml", &topology(n, leaves));
    let junit = bench.dir.path().join("junit.xml");
    let mut args: Vec<String> =
        ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()].map(String::from).into();
    args.extend(bed.ssh_args());
    args.extend(
        ["--no-progress", "--topology", fabric.to_str().unwrap(), "--export-junit", junit.to_str().unwrap()]
            .map(String::from),
    );
    let out = bench.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    Accepted {
        code: out.status.code(),
        output: text(&out.stderr) + &text(&out.stdout),
        run: read_json(&bench.result_dir().join("run.json")),
        junit: std::fs::read_to_string(&junit).expect("--export-junit wrote its file"),
        html: std::fs::read_to_string(bench.result_dir().join("report.html")).expect("report.html"),
    }
}

/// Bytes each interface of each host has received: `[host][eth]`.
fn rx_bytes(bed: &Bed, n: usize) -> Vec<Vec<u64>> {
    (1..=n)
        .map(|i| {
            (0..=RAILS)
                .map(|k| {
                    let path = format!("/sys/class/net/eth{k}/statistics/rx_bytes");
                    let out = bed.exec(&format!("h{i}"), &["cat", &path]);
                    text(&out.stdout).trim().parse().unwrap_or_else(|_| panic!("h{i} {path}: {}", text(&out.stderr)))
                })
                .collect()
        })
        .collect()
}

/// The flows of a run that failed, each with one of `ranks` as an end.
fn all_touch(run: &serde_json::Value, ranks: &[u64]) -> bool {
    failed_flows(run).iter().all(|(src, dst)| ranks.contains(src) || ranks.contains(dst))
}

/// Acceptance while `nic`'s cable is pulled for 0.7 s every 1.5 s.
fn accept_flapping(bed: &Bed, nic: &str) -> Accepted {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                bed.link(nic, "down");
                std::thread::sleep(Duration::from_millis(700));
                bed.link(nic, "up");
                std::thread::sleep(Duration::from_millis(800));
            }
        });
        let accepted = accept(bed, 4, 1);
        stop.store(true, Ordering::Relaxed);
        accepted
    })
}

#[test]
fn a_slow_nic_a_pulled_cable_and_a_slow_host_are_named_on_a_rail_bed() {
    let shaped = shapes(4, &[]);
    let rails = RAILS.to_string();
    let args: Vec<&str> =
        [&["--rails", rails.as_str()][..], &shaped.iter().map(String::as_str).collect::<Vec<_>>()].concat();
    let Some(bed) = Bed::up(4, &args) else { return };

    // Healthy: nothing named; each NIC received its rail's flows, eth0 none.
    let before = rx_bytes(&bed, 4);
    let healthy = accept(&bed, 4, 1);
    let after = rx_bytes(&bed, 4);
    assert_eq!(healthy.code, Some(0), "{}", healthy.output);
    assert_eq!(blamed(&healthy.run), Vec::<serde_json::Value>::new(), "{}", healthy.output);
    let flows = healthy.run["phases"].as_array().unwrap().iter().flat_map(|p| p["flows"].as_array().unwrap().clone());
    let mut payload = vec![vec![0u64; RAILS + 1]; 4];
    for f in flows {
        let dst = f["dst"].as_u64().unwrap() as usize;
        payload[dst / RAILS][dst % RAILS + 1] += f["bytes"].as_u64().unwrap();
    }
    for i in 0..4 {
        for k in 1..=RAILS {
            let got = after[i][k] - before[i][k];
            assert!(
                got >= payload[i][k] && payload[i][k] > 0,
                "h{} eth{k} received {got} B for {} B of its flows",
                i + 1,
                payload[i][k]
            );
        }
        let control = after[i][0] - before[i][0];
        assert!(control < payload[i][1] / 20, "h{} eth0 (control only) received {control} B", i + 1);
    }
    assert!(healthy.junit.contains("<testsuite name=\"nics\" tests=\"8\" failures=\"0\""), "{}", healthy.junit);

    // h2's eth1 (rank 2) losing its carrier again and again: its cable, its link events the evidence.
    let pulled = accept_flapping(&bed, "h2:eth1");
    let suspects = pulled.run["acceptance"]["suspects"].as_array().expect("suspects").clone();
    assert_eq!(suspects.len(), 1, "exactly one suspect: {suspects:?}\n{}", pulled.output);
    let cable = &suspects[0];
    assert_eq!(
        (&cable["suspect"], &cable["rank"], &cable["host"], &cable["nic"], &cable["cable"]),
        (&"cable".into(), &2.into(), &"h2".into(), &"eth1".into(), &"r1l1".into()),
        "{cable}"
    );
    assert!(cable["link_events"].as_u64().unwrap() >= 1, "{cable}");
    assert!(cable["evidence"].as_str().unwrap().contains("(eth1: "), "its own interface's events: {cable}");
    // The retest ran while the cable still flapped: failed again, or passed in a window it stayed in.
    assert!(["confirmed", "cleared"].contains(&cable["retest"]["state"].as_str().unwrap()), "{cable}");
    assert!(all_touch(&pulled.run, &[2]), "only rank 2's links: {:?}", failed_flows(&pulled.run));
    assert!(pulled.output.contains("cable of NIC h2 eth1 (rank 2) to r1l1"), "{}", pulled.output);

    // h3's eth2 (rank 5) at 150 Mbit/s: that NIC, with its leaf, not h3.
    bed.shape(&format!("h3:eth2={SLOW}"));
    let nic = accept(&bed, 4, 1);
    assert_eq!(nic.code, Some(3), "{}", nic.output);
    let found = blamed(&nic.run);
    assert_eq!(found.len(), 1, "exactly one suspect: {found:?}\n{}", nic.output);
    assert_eq!(
        (&found[0]["suspect"], &found[0]["rank"], &found[0]["host"], &found[0]["nic"], &found[0]["cable"]),
        (&"nic".into(), &5.into(), &"h3".into(), &"eth2".into(), &"r2l1".into()),
        "{found:?}"
    );
    assert_eq!(found[0]["retest"]["state"], "confirmed", "{found:?}");
    assert!(
        all_touch(&nic.run, &[5]) && failed_flows(&nic.run).len() == 6,
        "rank 5's 3 links, both ways: {:?}",
        failed_flows(&nic.run)
    );
    assert!(nic.output.contains("suspect(s): NIC h3 eth2 (rank 5) or its cable to r2l1"), "{}", nic.output);
    assert!(nic.junit.contains("<testsuite name=\"nics\" tests=\"8\" failures=\"1\""), "{}", nic.junit);

    // Both of h3's NICs: the host, once.
    bed.shape(&format!("h3:eth1={SLOW}"));
    let host = accept(&bed, 4, 1);
    assert_eq!(host.code, Some(3), "{}", host.output);
    let found = blamed(&host.run);
    assert_eq!(found.len(), 1, "exactly one suspect: {found:?}\n{}", host.output);
    assert_eq!((&found[0]["suspect"], &found[0]["host"]), (&"host".into(), &"h3".into()), "{found:?}");
    assert_eq!(found[0]["ranks"], serde_json::json!([4, 5]), "{found:?}");
    assert_eq!(found[0]["retest"]["state"], "confirmed", "{found:?}");
    assert!(all_touch(&host.run, &[4, 5]) && failed_flows(&host.run).len() == 12, "{:?}", failed_flows(&host.run));
    assert!(host.output.contains("suspect(s): host h3 (all 2 of its NICs: ranks 4, 5)"), "{}", host.output);
}

#[test]
fn a_slow_rail_uplink_is_named_on_a_rail_bed() {
    let shaped = shapes(6, &[]);
    let rails = RAILS.to_string();
    let args: Vec<&str> =
        [&["--rails", rails.as_str()][..], &shaped.iter().map(String::as_str).collect::<Vec<_>>()].concat();
    let Some(bed) = Bed::up_fabric(6, 3, &args) else { return };
    // Rail 2's first leaf (h1, h2's eth2: ranks 1, 3) reaches its other
    // leaves through its one uplink; rail 1 and rail 2's other leaves pass.
    bed.shape_uplink("r2l1", "250mbit");
    let slow = accept(&bed, 6, 3);
    assert_eq!(slow.code, Some(3), "{}", slow.output);
    let found = blamed(&slow.run);
    assert_eq!(found.len(), 1, "exactly one suspect: {found:?}\n{}", slow.output);
    assert_eq!(found[0]["suspect"], "uplink", "{found:?}");
    assert_eq!(found[0]["uplinks"], serde_json::json!([{"leaf": "r2l1", "spine": "rsp"}]), "{found:?}");
    assert_eq!(found[0]["retest"]["state"], "confirmed", "{found:?}");
    let crossing: Vec<[u64; 2]> = [1u64, 3].iter().flat_map(|&a| [5u64, 7, 9, 11].map(|b| [a, b])).collect();
    assert_eq!(found[0]["pairs"], serde_json::json!(crossing), "{found:?}");
    assert!(slow.output.contains("suspect(s): uplink r2l1 ↔ rsp"), "{}", slow.output);
    // report.html's fabric tree, one per rail: every rail leaf with its NICs, the suspect uplink
    // red and dashed in its rail's tree.
    let tree = &slow.html[slow.html.find("<h2>Fabric tree</h2>").expect("a fabric tree")..];
    let (rail1, rail2) = tree.split_once("<h3>Rail 1 (eth2)</h3>").expect("rail 2's own tree");
    assert!(rail1.contains("<h3>Rail 0 (eth1)</h3>"), "{tree}");
    for (rail, nic) in [(rail1, "h1 eth1"), (rail2, "h1 eth2"), (rail2, "h6 eth2")] {
        assert!(rail.contains(&format!(">{nic}<")), "{nic} under its rail leaf: {rail}");
    }
    assert!(!rail1.contains("r2l1") && !rail1.contains("stroke-dasharray"), "{rail1}");
    assert!(rail2.contains("<title>uplink r2l1 ↔ rsp") && rail2.contains("stroke-dasharray"), "{rail2}");
}
