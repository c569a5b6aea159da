//! `fabricbench watch` on the test bed as a two-level fabric (six sshd
//! hosts, two a leaf, three leaves on one spine): 5 % of what crosses
//! leaf1's uplink dropped (nftables; this kernel has no netem) makes that
//! uplink a suspect within three windows, and it clears within three once
//! the loss is gone. The probes are TCP: a dropped probe or echo comes
//! back late (the retransmission), so the paths across that uplink fail
//! their p99.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::testbed::Bed;
use crate::common::{text, Bench, Running};

/// The bed of six hosts on three leaves as fabricbench's topology.
const THREE_LEAVES: &str = "[switch.leaf1]\nhosts = \"h[1-2]\"\n\n[switch.leaf2]\nhosts = \"h[3-4]\"\n\n\
     [switch.leaf3]\nhosts = \"h[5-6]\"\n\n[switch.spine1]\nlinks = [\"leaf1\", \"leaf2\", \"leaf3\"]\n";

const SUSPECT: &str = "uplink leaf1 ↔ spine1";

fn lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The windows judged so far, and the first event `event` of the suspect
/// (its `window`), once there is one.
fn seen(folder: &Path, event: &str) -> (usize, Option<u64>) {
    let judged = lines(&folder.join("windows.jsonl")).len();
    let events = lines(&folder.join("events.jsonl"));
    let found = events.iter().find(|e| e["event"] == event && e["suspect"] == SUSPECT);
    (judged, found.and_then(|e| e["window"].as_u64()))
}

/// Waits for the suspect's `event` no later than `within` windows after
/// `from`; returns the windows judged then.
fn within_windows(folder: &Path, event: &str, from: usize, within: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (judged, at) = seen(folder, event);
        if let Some(at) = at {
            assert!(at as usize <= from + within, "{event} at window {at}, over {within} windows after {from}");
            return judged;
        }
        let windows = std::fs::read_to_string(folder.join("windows.jsonl")).unwrap_or_default();
        assert!(judged <= from + within, "no `{event}` of {SUSPECT} within {within} windows:\n{windows}");
        assert!(Instant::now() < deadline, "{judged} windows in 120 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn folder(bench: &Bench) -> Option<PathBuf> {
    std::fs::read_dir(bench.results()).ok()?.flatten().next().map(|e| e.path())
}

#[test]
fn a_lossy_uplink_is_named_within_three_windows_and_cleared_when_it_heals() {
    let Some(bed) = Bed::up_fabric(6, 3, &[]) else { return };
    let bench = Bench::new();
    let topology = bench.write("fabric.toml", THREE_LEAVES);
    let mut args = vec!["watch".to_string(), "-H".into(), bed.hostfile.display().to_string()];
    args.extend(bed.ssh_args());
    for flag in ["--topology", topology.to_str().unwrap(), "--window", "2s", "--rate", "20", "--p99", "12ms"] {
        args.push(flag.to_string());
    }
    let watching = Running::new(bench.spawn(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let deadline = Instant::now() + Duration::from_secs(120);
    let folder = loop {
        match folder(&bench).filter(|f| !lines(&f.join("windows.jsonl")).is_empty()) {
            Some(folder) => break folder,
            None => assert!(Instant::now() < deadline, "no window within 120 s"),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let paths = lines(&folder.join("windows.jsonl"))[0]["paths"].as_u64();
    assert_eq!(paths, Some(6), "three pairs under the leaves, one across for each two leaves");

    // One window more may be running when the loss starts (or ends).
    let (from, _) = seen(&folder, "appeared");
    bed.lossy_uplink("leaf1", "5");
    let named = within_windows(&folder, "appeared", from, 3 + 1);
    bed.unshape_uplink("leaf1");
    within_windows(&folder, "cleared", named, 3 + 1);

    let out = watching.stop(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = lines(&folder.join("events.jsonl"));
    let appeared = events.iter().find(|e| e["event"] == "appeared" && e["suspect"] == SUSPECT).unwrap();
    assert!(appeared["evidence"].as_str().is_some_and(|e| e.contains("p99 <= 12000 µs")), "{appeared}");
    assert_eq!(events.last().unwrap()["event"], "stopped", "{events:?}");
    assert!(bed.hosts_with_workers(&["h1", "h2", "h3", "h4", "h5", "h6"], Duration::from_secs(10)).is_empty());
}
