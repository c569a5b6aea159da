//! The record of a run in run.json: the build's commit, the command line,
//! the hostfile's text and every rank's host facts, on local ranks.

use crate::common;

use std::process::Command;

use common::{read_json, text, Bench};

#[test]
fn run_json_records_the_build_the_command_and_every_host() {
    let _machine = common::busy_machine();
    let bench = Bench::new();
    let hostfile = "# two local ranks\n127.0.0.1\n127.0.0.2\n";
    let hosts = bench.write("hosts", hostfile);
    let scenario = bench.write(
        "pair.toml",
        "[run]\nname = \"record\"\nduration = \"500ms\"\nwarmup = \"100ms\"\ninterval = \"250ms\"\n\n\
         [[group]]\nname = \"p\"\npattern = \"pairwise\"\n",
    );
    let args = ["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--quiet"];
    let out = bench.run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = read_json(&bench.result_dir().join("run.json"));

    let build = &run["build"];
    assert_eq!(build["version"], env!("CARGO_PKG_VERSION"));
    let head = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(env!("CARGO_MANIFEST_DIR")).output();
    match head {
        Ok(out) if out.status.success() => {
            assert_eq!(build["commit"], text(&out.stdout).trim(), "{build}");
            assert!(build["dirty"].is_boolean(), "{build}");
        }
        _ => assert_eq!(build["commit"], "unknown", "{build}"),
    }

    let line: Vec<&str> = run["command_line"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert_eq!(&line[1..], &args[..], "program name, then every argument as given");
    assert_eq!(run["hostfile_text"], hostfile, "the hostfile's text, comment and all");

    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let probes = run["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "{probes:?}");
    for p in probes {
        let facts = &p["facts"];
        assert_eq!(facts["kernel"], kernel.trim(), "{p}");
        assert_eq!(facts["cores"].as_u64(), Some(std::thread::available_parallelism().unwrap().get() as u64), "{p}");
        assert!(facts["rdma_devices"].is_array(), "{p}");
    }
}
