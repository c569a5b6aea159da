//! Runs under a real Slurm on the test bed (slurmctld, one slurmd per
//! namespace host, munge): fabricbench inside `salloc` and `sbatch`
//! allocations starts its workers as one srun step, and a worker killed
//! under srun is reported the way it is under ssh.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::testbed::{assert_fan_in_on_each_host, Bed, HOSTS4};
use common::{read_json, text, Bench};

fn fan_in(duration: &str) -> String {
    format!(
        "[run]\nname = \"slurm-fan\"\nduration = \"{duration}\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n\n\
         [[group]]\nname = \"incast\"\npattern = \"fan-in\"\nmessage_size = \"64K\"\n"
    )
}

/// A Slurm client command (salloc, sbatch) run by the test: it and every
/// process it leads to carry the test's tag.
fn slurm(bench: &Bench, bed: &Bed, program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("SLURM_CONF", &bed.slurm_conf)
        .env("FABRICBENCH_TEST_TAG", &bench.tag)
        .current_dir(bench.dir.path());
    cmd
}

/// A run under Slurm that completed: valid (exit 0) or degraded (exit 4).
/// What these tests check is where the workers run, and a rank whose first
/// boundary came late on a loaded host shortens its window, which
/// fabricbench rightly calls degraded (CI saw windows of 0.665 s of 1 s,
/// and 1.627 and 1.766 s of 2 s, while another test ran 32 ranks beside).
fn completed(exit_code: Option<i32>) -> bool {
    matches!(exit_code, Some(0 | 4))
}

/// How a batch job ended, as `scontrol show job` tells it.
#[derive(Debug)]
struct JobEnd {
    /// `COMPLETED`, `FAILED`, `TIMEOUT`, …
    state: String,
    /// The batch script's exit status (the first half of `ExitCode=N:S`).
    exit_code: i32,
}

/// Submits a batch job and waits, bounded, until it has ended and its
/// processes are gone (no longer `COMPLETING`), looking every 200 ms:
/// `sbatch --wait` looks after 2 s, 10 s, then every 32 s, which added up
/// to half a minute to each job here.
fn sbatch(bench: &Bench, bed: &Bed, args: &[&str], within: Duration) -> JobEnd {
    let out = slurm(bench, bed, "sbatch", &[&["--parsable"], args].concat()).output().expect("sbatch");
    assert!(out.status.success(), "sbatch: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let id = stdout.trim().split(';').next().unwrap().to_string();
    let deadline = Instant::now() + within;
    loop {
        let out = slurm(bench, bed, "scontrol", &["show", "job", "--oneliner", &id]).output().expect("scontrol");
        let line = text(&out.stdout);
        let field = |name: &str| {
            let value = line.split_whitespace().find_map(|f| f.strip_prefix(name)?.strip_prefix('='));
            value.unwrap_or_else(|| panic!("no {name} for job {id}: {line}{}", text(&out.stderr))).to_string()
        };
        let state = field("JobState");
        if !["PENDING", "CONFIGURING", "RUNNING", "COMPLETING"].contains(&state.as_str()) {
            let exit_code = field("ExitCode").split(':').next().unwrap().parse().expect("ExitCode=N:S");
            return JobEnd { state, exit_code };
        }
        assert!(Instant::now() < deadline, "job {id} still {state} after {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A 30 s fan-in under `salloc -N 4`, once h3's worker runs: the run a
/// fault is injected into.
fn long_fan_in_under_salloc(bench: &Bench, bed: &Bed) -> std::process::Child {
    bench.write("fan.toml", &fan_in("30s"));
    let child = slurm(bench, bed, "salloc", &["-N", "4", common::bin(), "run", "fan.toml", "--results", "results"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("salloc");
    let deadline = Instant::now() + Duration::from_secs(30);
    while bed.workers("h3").is_empty() {
        assert!(Instant::now() < deadline, "no worker on h3");
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

/// Waits (bounded) until no host runs a worker or a job step; returns what is left.
fn left_on(bed: &Bed, hosts: &[&str], within: Duration) -> Vec<String> {
    bed.left_on(hosts, within, |bed, h| {
        let workers = bed.workers(h).into_iter().map(|pid| format!("worker {pid}"));
        workers.chain(bed.slurmstepds(h).into_iter().map(|pid| format!("slurmstepd {pid}"))).collect()
    })
}

#[test]
fn fan_in_under_salloc_runs_one_worker_per_node() {
    let Some(bed) = Bed::up(4, &["--slurm"]) else { return };
    let bench = Bench::new();
    bench.write("fan.toml", &fan_in("2s"));
    let out = slurm(&bench, &bed, "salloc", &["-N", "4", common::bin(), "run", "fan.toml", "--results", "results"])
        .output()
        .expect("salloc");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(completed(out.status.code()), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("completed"), "{stdout}");

    let run = read_json(&bench.result_dir().join("run.json"));
    assert_fan_in_on_each_host(&run);
    assert!(run["launch_s"].as_f64().unwrap() > 0.0);
    assert_eq!(left_on(&bed, &HOSTS4, Duration::from_secs(5)), Vec::<String>::new());
    assert!(bench.leftovers(Duration::from_secs(5)).is_empty(), "{:?}", bench.processes());

    // `hosts` in an allocation checks its nodes through srun, as `run` starts them.
    let out = slurm(&bench, &bed, "salloc", &["-N", "2", "-w", "h2,h3", common::bin(), "hosts", "--json"])
        .output()
        .expect("salloc");
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let json = text(&out.stdout);
    let rows: serde_json::Value = serde_json::from_str(&json[json.find('[').unwrap_or(0)..]).expect("the rows");
    let ours = format!("fabricbench {}", env!("CARGO_PKG_VERSION"));
    let checked: Vec<(&str, bool, &str)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["host"].as_str().unwrap(), r["reachable"] == true, r["version"].as_str().unwrap_or("?")))
        .collect();
    assert_eq!(checked, [("h2", true, ours.as_str()), ("h3", true, ours.as_str())], "{json}");
    assert!(rows.as_array().unwrap().iter().all(|r| r["problem"].is_null()), "{json}");
}

#[test]
fn sbatch_with_a_hostfile_runs_those_nodes_in_its_order() {
    let Some(bed) = Bed::up(4, &["--slurm"]) else { return };
    let bench = Bench::new();
    bench.write("fan.toml", &fan_in("1s"));
    // Two of the three allocated nodes, rank 0 on the later one.
    bench.write("two", "h3 addr=10.199.0.3\nh1\n");
    let script = format!(
        "#!/bin/sh\nexec {} run fan.toml -H two --no-save --no-progress --export-json out.json\n",
        common::bin()
    );
    bench.write("job.sh", &script);
    let job = sbatch(&bench, &bed, &["-N", "3", "-w", "h1,h2,h3", "-o", "job.out", "job.sh"], Duration::from_secs(60));
    let log = std::fs::read_to_string(bench.dir.path().join("job.out")).unwrap_or_default();
    assert!(completed(Some(job.exit_code)), "{job:?}\njob output:\n{log}");
    let run = read_json(&bench.dir.path().join("out.json"));
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 1, "{log}");
    assert_eq!((flows[0]["src_host"].as_str(), flows[0]["dst_host"].as_str()), (Some("h1"), Some("h3")));
    assert!(flows[0]["rx_bytes"].as_u64().unwrap() > 0);
    assert_eq!(run["phases"][0]["ranks"][0]["netdevs"][0]["iface"], "eth0", "rank 0 bound its addr= address");
    assert_eq!(left_on(&bed, &HOSTS4, Duration::from_secs(5)), Vec::<String>::new());
}

#[test]
fn worker_killed_under_srun_is_named_and_partial_results_kept() {
    let Some(bed) = Bed::up(4, &["--slurm"]) else { return };
    let bench = Bench::new();
    let child = long_fan_in_under_salloc(&bench, &bed);
    // Past the warm-up, a few intervals measured.
    std::thread::sleep(Duration::from_secs(3));
    let killed = Instant::now();
    assert!(bed.exec("h3", &["pkill", "-9", "-f", "fabricbench worker"]).status.success());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(killed.elapsed() < Duration::from_secs(10), "took {:?}", killed.elapsed());
    assert!(err.contains("error: rank 2 (h3): connection lost during phase 0"), "{err}");
    assert!(err.contains("srun: error: h3: task 2: Killed"), "srun's own report is shown: {err}");
    let run = read_json(&bench.result_dir().join("run.json"));
    assert_eq!(run["status"]["state"], "failed");
    assert_eq!(run["phases"][0]["complete"], false);
    for f in run["phases"][0]["flows"].as_array().unwrap() {
        assert!(f["bytes"].as_u64().unwrap() > 0, "measured before the kill: {f}");
    }
    assert_eq!(left_on(&bed, &HOSTS4, Duration::from_secs(8)), Vec::<String>::new());
    assert!(bench.leftovers(Duration::from_secs(5)).is_empty(), "{:?}", bench.processes());
}

#[test]
fn hosts_refuses_mpirun_and_srun_outside_an_allocation() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", "h1\nh2\n");
    let hosts = hosts.to_str().unwrap();
    let out = bench.command(&["hosts", "-H", hosts, "--launcher", "mpirun"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("mpirun starts one job, not a command on each host"), "{}", text(&out.stderr));
    let out =
        bench.command(&["hosts", "-H", hosts, "--launcher", "slurm"]).env_remove("SLURM_JOB_ID").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("salloc"), "says how to get an allocation: {}", text(&out.stderr));
}

#[test]
fn slurm_launcher_outside_an_allocation_says_how_to_get_one() {
    let bench = Bench::new();
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let hosts = bench.write("hosts", "h1\nh2\n");
    let mut cmd =
        bench.command(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--launcher", "slurm"]);
    let out = cmd.env_remove("SLURM_JOB_ID").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--launcher slurm runs inside a Slurm allocation"), "{}", text(&out.stderr));
    // No hostfile and no allocation: nothing to run on.
    let out = bench.command(&["run", scenario.to_str().unwrap()]).env_remove("SLURM_JOB_ID").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no hosts: give a hostfile with -H FILE"), "{}", text(&out.stderr));
}

#[test]
fn a_node_that_dies_under_srun_is_named_and_the_step_still_ends() {
    let Some(bed) = Bed::up(4, &["--slurm"]) else { return };
    let bench = Bench::new();
    let child = long_fan_in_under_salloc(&bench, &bed);
    std::thread::sleep(Duration::from_secs(3));
    // The whole node goes: its init, and with it slurmd, slurmstepd and the worker.
    let crashed = Instant::now();
    bed.crash("h3");
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error: rank 2 (h3): connection lost during phase 0"), "{err}");
    // srun waits for the dead node's slurmstepd; the launcher ends the step.
    assert!(crashed.elapsed() < Duration::from_secs(25), "took {:?}", crashed.elapsed());
    let run = read_json(&bench.result_dir().join("run.json"));
    assert_eq!(run["phases"][0]["complete"], false);
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    assert!(flows.iter().all(|f| f["bytes"].as_u64().unwrap() > 0), "measured before the crash: {flows:?}");
    assert_eq!(left_on(&bed, &["h1", "h2", "h4"], Duration::from_secs(10)), Vec::<String>::new());
    assert!(bench.leftovers(Duration::from_secs(5)).is_empty(), "{:?}", bench.processes());
}

/// A run longer than its allocation (`sbatch --time=1`: three 45 s phases;
/// slurmctld enforces the minute within its 30 s check, so during phase 1):
/// Slurm's SIGTERM at the time limit ends it as a stop, with the finished
/// phases on disk, and no worker or job step is left on any node.
#[test]
fn a_run_past_its_time_limit_keeps_its_finished_phases() {
    let Some(bed) = Bed::up(4, &["--slurm"]) else { return };
    let bench = Bench::new();
    bench.write(
        "three.toml",
        "[run]\nname = \"slurm-three\"\nduration = \"45s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n\n\
         [[group]]\nname = \"incast\"\npattern = \"fan-in\"\nmessage_size = \"64K\"\n\n\
         [sweep]\nparameter = \"streams\"\nvalues = [1, 2, 3]\n",
    );
    let script = format!("#!/bin/sh\nexec {} run three.toml --results results --no-progress\n", common::bin());
    bench.write("job.sh", &script);
    let started = Instant::now();
    let job = sbatch(&bench, &bed, &["-N", "4", "--time=1", "-o", "job.out", "job.sh"], Duration::from_secs(150));
    let log = std::fs::read_to_string(bench.dir.path().join("job.out")).unwrap_or_default();
    assert_eq!(job.state, "TIMEOUT", "{job:?}\njob output:\n{log}");
    assert!(log.contains("stopped by SIGTERM"), "job output:\n{log}");
    let dirs: Vec<_> = std::fs::read_dir(bench.dir.path().join("results")).unwrap().flatten().collect();
    assert_eq!(dirs.len(), 1, "{log}");
    let run = read_json(&dirs[0].path().join("run.json"));
    let phases = run["phases"].as_array().unwrap();
    assert!(!phases.is_empty() && phases[0]["complete"] == true, "{log}");
    assert!(phases[0]["aggregate_gbps"].as_f64().unwrap() > 0.0);
    // Slurm ends the step's tasks at the same moment as the launcher: the
    // status names whichever it saw first.
    let error = run["status"]["error"].as_str().unwrap();
    assert!(error.contains("stopped by SIGTERM") || error.contains("DUE TO TIME LIMIT"), "{error}");
    assert_eq!(left_on(&bed, &HOSTS4, Duration::from_secs(10)), Vec::<String>::new());
    eprintln!("the time limit ended the job after {:?}", started.elapsed());
}

/// `salloc -N 2 --ntasks-per-node=2`: SLURM_TASKS_PER_NODE is `2(x2)`, so
/// each node runs two ranks, one srun task each, consecutive in rank order.
#[test]
fn two_tasks_per_node_are_two_ranks_on_each() {
    let Some(bed) = Bed::up(2, &["--slurm"]) else { return };
    let bench = Bench::new();
    bench.write(
        "fan.toml",
        "[run]\nname = \"slurm-slots\"\nduration = \"2s\"\nwarmup = \"500ms\"\ninterval = \"500ms\"\n\n\
         [[group]]\nname = \"incast\"\npattern = \"fan-in\"\nmessage_size = \"64K\"\n",
    );
    let args = ["-N", "2", "--ntasks-per-node=2", common::bin(), "run", "fan.toml", "--results", "results"];
    let out = slurm(&bench, &bed, "salloc", &args).output().expect("salloc");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(completed(out.status.code()), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let run = read_json(&bench.result_dir().join("run.json"));
    let ranks: Vec<(&str, u64)> = run["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["name"].as_str().unwrap(), h["slot"].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(ranks, [("h1", 0), ("h1", 1), ("h2", 0), ("h2", 1)]);
    let flows = run["phases"][0]["flows"].as_array().unwrap();
    let src: Vec<&str> = flows.iter().map(|f| f["src_host"].as_str().unwrap()).collect();
    assert_eq!(src, ["h1#1", "h2#0", "h2#1"], "three senders into h1#0");
    assert!(flows.iter().all(|f| f["rx_bytes"].as_u64().unwrap() > 0), "{flows:?}");
    assert_eq!(left_on(&bed, &HOSTS4[..2], Duration::from_secs(5)), Vec::<String>::new());
}
