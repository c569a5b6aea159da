//! `--stage --dist DIR` on the test bed: each host gets the release binary
//! of its architecture from the dist folder, and a host whose architecture
//! has none is refused before any worker starts. The bed's hosts share this
//! machine's architecture; the dist folder holds this build copied under the
//! release name (nextest never builds the cross binaries).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::testbed::Bed;
use crate::common::{bin, read_json, text, Bench};

const FAN_IN: &str = "[run]\nduration = \"1s\"\nwarmup = \"0s\"\ninterval = \"500ms\"\n\
    [[group]]\nname = \"incast\"\npattern = \"fan-in\"\nmessage_size = \"128K\"\nreceivers = 0\nsenders = \"1-2\"\n";

fn dist_name(arch: &str) -> String {
    format!("fabricbench-{}-{arch}-linux-gnu", env!("CARGO_PKG_VERSION"))
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    text(&out.stdout).split_whitespace().next().unwrap_or_default().to_string()
}

/// A dist folder with this build under the release name of `arch`, made
/// distinct from the running binary by a trailing marker (an ELF file
/// runs the same with bytes after its end), so the staged copy's checksum
/// tells which one a host got.
fn dist_with(bench: &Bench, arch: &str) -> (PathBuf, String) {
    let dir = bench.dir.path().join("dist");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(dist_name(arch));
    let mut bytes = std::fs::read(bin()).unwrap();
    bytes.extend_from_slice(b"\nfabricbench stage_bed marker\n");
    std::fs::write(&path, bytes).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let sum = sha256(&path);
    (dir, sum)
}

fn run_args<'a>(ssh: &'a [String], scenario: &'a str, hostfile: &'a str, dist: &'a str) -> Vec<&'a str> {
    let mut args = vec!["run", scenario, "-H", hostfile, "--stage", "--dist", dist, "--no-save", "--no-progress"];
    args.extend(ssh.iter().map(String::as_str));
    args
}

#[test]
fn fan_in_hosts_get_their_binary_from_the_dist_folder() {
    let Some(bed) = Bed::up(3, &[]) else { return };
    let bench = Bench::new();
    let (dist, sum) = dist_with(&bench, std::env::consts::ARCH);
    let staged =
        Path::new("/root/.cache/fabricbench").join(format!("fabricbench-{}-{}", env!("CARGO_PKG_VERSION"), &sum[..16]));
    let _ = std::fs::remove_file(&staged);
    let scenario = bench.write("fan.toml", FAN_IN);
    let ssh = bed.ssh_args();
    let mut args = run_args(&ssh, scenario.to_str().unwrap(), bed.hostfile.to_str().unwrap(), dist.to_str().unwrap());
    args.extend(["--export-json", "run.json"]);
    let out = bench.run(&args);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("staged fabricbench to h"), "{err}");
    assert_eq!(sha256(&staged), sum, "the hosts ran the dist folder's binary, not the launcher's");
    let run = read_json(&bench.dir.path().join("run.json"));
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "{run}");
    assert!(flows.iter().all(|f| f["rx_bytes"].as_u64().unwrap() > 0), "{flows:?}");
}

#[test]
fn a_host_without_a_binary_for_its_architecture_is_refused_before_anything_starts() {
    let Some(bed) = Bed::up(3, &[]) else { return };
    let bench = Bench::new();
    let other = if std::env::consts::ARCH == "aarch64" { "x86_64" } else { "aarch64" };
    let (dist, _) = dist_with(&bench, other);
    let scenario = bench.write("fan.toml", FAN_IN);
    let ssh = bed.ssh_args();
    let args = run_args(&ssh, scenario.to_str().unwrap(), bed.hostfile.to_str().unwrap(), dist.to_str().unwrap());
    let out = bench.run(&args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let arch = std::env::consts::ARCH;
    assert!(err.contains(&format!("is {arch} (uname -m)")) && err.contains(&format!("have: {other}")), "{err}");
    assert!(err.contains(&dist_name(arch)) && err.contains("scripts/dist"), "{err}");
    assert!(["h1", "h2", "h3"].iter().any(|h| err.contains(&format!("{h} is {arch}"))), "{err}");
    assert!(!err.contains("staged fabricbench"), "{err}");
    assert_eq!(err.matches("there is no fabricbench binary").count(), 1, "said once: {err}");
    for host in ["h1", "h2", "h3"] {
        assert!(bed.workers(host).is_empty(), "a worker started on {host}");
    }
    assert!(bench.processes().is_empty(), "{:?}", bench.processes());

    // `hosts` staging from the same folder: a row for each refused host,
    // reached, with its platform and why nothing can run there.
    let config = bed.ssh_config.to_str().unwrap();
    let hosts = ["hosts", "-H", bed.hostfile.to_str().unwrap(), "--ssh-config", config, "--stage", "--dist"];
    let out = bench.run(&[&hosts[..], &[dist.to_str().unwrap(), "--json"]].concat());
    assert_eq!(out.status.code(), Some(3), "failed checks: {}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the rows as JSON");
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in rows {
        assert_eq!((&row["reachable"], &row["platform"]["machine"]), (&true.into(), &arch.into()), "{row}");
        let problem = row["problem"].as_str().unwrap_or_default();
        assert!(
            problem.contains(&format!("is {arch} (uname -m)")) && problem.contains(&format!("have: {other}")),
            "{row}"
        );
    }
}
