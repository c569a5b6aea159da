//! Data validation (`validate = true`, pair's `--data-validation`) on local
//! TCP ranks: a clean run checks every message of every flow and finds
//! none bad; the test hook makes exactly one flow's data wrong.
//!
//! The hook: `FABRICBENCH_TEST_DV_FLIP=FLOW:OFFSET` makes the sender of flow
//! FLOW flip the byte at OFFSET of every message after writing its pattern.
//! It is read only by builds with the `testing` feature, which the test
//! suite's build of the binary has (the crate's dev-dependency on itself
//! turns it on) and the tool users build never does.

use crate::common;

use common::{read_json, text, Bench};

const HOSTS: &str = "127.0.0.1\n127.0.0.2\n127.0.0.3\n127.0.0.4\n";
/// Ranks 0-1, 1-2, 2-3 and 3-0 (a ring), two streams each, 1 s.
const RING: &str = "[run]\nduration = \"1s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\n[[group]]\nname = \"r\"\n\
                    pattern = \"ring\"\nstreams = 2\nmessage_size = \"64K\"\nvalidate = true\n";

fn ring(bench: &Bench, flip: Option<&str>) -> (std::process::Output, serde_json::Value) {
    let hosts = bench.write("hosts", HOSTS);
    let scenario = bench.write("ring.toml", RING);
    let mut cmd = bench.command(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap()]);
    if let Some(flip) = flip {
        cmd.env("FABRICBENCH_TEST_DV_FLIP", flip);
    }
    let out = cmd.output().unwrap();
    let run = read_json(&bench.result_dir().join("run.json"));
    (out, run)
}

#[test]
fn a_clean_tcp_run_checks_every_flow_and_finds_nothing_bad() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let (out, run) = ring(&bench, None);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(run["status"]["state"], "ok");
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 4);
    for f in flows {
        assert_eq!(f["dv_errors"], 0, "{f}");
        assert!(f["dv_first_bad"].is_null(), "{f}");
        // Whole 64 KiB messages, at least what the window counted.
        let (checked, bytes) = (f["dv_checked"].as_u64().unwrap(), f["rx_bytes"].as_u64().unwrap());
        assert!(checked > 0 && checked >= bytes / 65536, "{f}");
    }
    assert!(stdout.contains("data validation: 4 flow(s)") && stdout.contains("none bad"), "{stdout}");
}

#[test]
fn a_flipped_byte_fails_exactly_its_flow_with_its_offset() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let (out, run) = ring(&bench, Some("2:777"));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(stderr.contains("data validation failed: phase 0: flow 2 (r,"), "{stderr}");
    assert!(stderr.contains("the first at byte 777 of message 0 on lane 0"), "{stderr}");
    assert_eq!(run["status"]["state"], "failed");
    for f in run["phases"][0]["flows"].as_array().unwrap() {
        match f["id"].as_u64().unwrap() {
            2 => {
                assert_eq!(f["dv_errors"], f["dv_checked"], "every message has the flipped byte: {f}");
                assert_eq!(f["dv_first_bad"]["offset"], 777, "{f}");
                assert_eq!(f["dv_first_bad"]["message"], 0, "{f}");
            }
            _ => assert_eq!(f["dv_errors"], 0, "{f}"),
        }
        assert!(f["dv_checked"].as_u64().unwrap() > 0, "{f}");
    }
}

#[test]
fn pair_takes_perftests_data_validation_flag() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let pair = "pair localhost localhost send --transport tcp -D 0.5 --data_validation --no-save --export-json -";
    let out = bench.run(&pair.split(' ').collect::<Vec<_>>());
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flow = &run["phases"][0]["flows"][0];
    assert_eq!(flow["dv_errors"], 0, "{flow}");
    assert!(flow["dv_checked"].as_u64().unwrap() > 0, "{flow}");

    // Refused before anything starts, naming the flag.
    for (args, why) in [
        ("send_lat --transport tcp --data-validation", "applies to bandwidth groups"),
        ("atomic --data_validation", "atomics carry no payload"),
    ] {
        let out = bench.run(&["pair", "localhost", "localhost"].into_iter().chain(args.split(' ')).collect::<Vec<_>>());
        assert_eq!(out.status.code(), Some(2), "{args}");
        assert!(text(&out.stderr).contains(&format!("--data-validation: {why}")), "{args}: {}", text(&out.stderr));
    }
}
