//! The control plane at scale: how long the coordinator takes to bootstrap
//! N ranks (hello → endpoint tables delivered → barrier → start) and how
//! much memory it needs, for N = 64 … 65 536 and several patterns, with
//! simulated ranks in one process (`sim`: the state machine alone), with
//! real TCP clients on loopback in a second process (`tcp`: the tokio
//! driver, framing and sockets too), and through a whole phase's lifecycle
//! (`life`: simulated ranks bootstrap, every rank reports, rank 0 gathers
//! and aggregates, the phase is journaled into a real results folder).
//! Each case runs in a fresh process so its peak RSS (VmHWM) is its own.
//!
//!   cargo bench --bench control_plane
//!   cargo bench --bench control_plane -- --sizes 64,4096 --patterns fan-in --modes tcp --rounds 5
//!
//! With --rounds R each case runs R times and the run of median total time
//! is printed.
//!
//! scripts/bench control runs it on the release build; results are in
//! docs/PERFORMANCE.md. Goals: 16 384 TCP ranks bootstrapped in < 2 s;
//! 65 536 simulated ranks through the lifecycle in < 5 s, memory linear in
//! flows.

use std::process::Command;
use std::time::{Duration, Instant};

use fabricbench::control::coordinator::Event;
use fabricbench::control::sim;
use fabricbench::metrics::clock::Epoch;
use fabricbench::report::store::results_dir::ResultsDir;
use fabricbench::result::RunResult;
use fabricbench::run::record::{Recorded, Recorder};
use nix::sys::resource::{getrusage, UsageWho};

const PATTERNS: [(&str, &str); 4] = [
    ("fan-in", "[[group]]\nname = \"incast\"\npattern = \"fan-in\"\n"),
    ("ring", "[[group]]\nname = \"ring\"\npattern = \"ring\"\nbidirectional = true\n"),
    ("pairwise", "[[group]]\nname = \"pairs\"\npattern = \"pairwise\"\n"),
    ("all-to-all", "[[group]]\nname = \"all\"\npattern = \"all-to-all\"\n"),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if let Err(e) = fabricbench::fdlimit::raise() {
        eprintln!("cannot raise the open-files limit: {e}");
    }
    match args.first().map(String::as_str) {
        Some("--one") => one(&args[1], &args[2], args[3].parse().expect("rank count")),
        Some("--clients") => clients(args[1].parse().expect("address"), args[2].parse().expect("rank count")),
        _ => table(&args),
    }
}

fn option<'a>(args: &'a [String], name: &str, default: &'a str) -> Vec<&'a str> {
    let value = args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map_or(default, String::as_str);
    value.split(',').collect()
}

/// Runs every case in its own process and prints one row each.
fn table(args: &[String]) {
    let sizes = option(args, "--sizes", "64,1024,4096,16384,65536");
    let patterns = option(args, "--patterns", "fan-in,ring,pairwise,all-to-all");
    let modes = option(args, "--modes", "sim,tcp,life");
    let rounds: usize = option(args, "--rounds", "1")[0].parse().expect("--rounds is a number");
    let exe = std::env::current_exe().expect("this benchmark's path");
    println!(
        "# control plane, {} cores; all-to-all stops at 1024 ranks (N² flows), tcp at 16384 (two sockets a rank)",
        num_cpus::get()
    );
    println!(
        "{:<5} {:<11} {:>6} {:>9} {:>8} {:>13} {:>9} {:>15} {:>16} {:>16} {:>14} {:>13} {:>11} {:>13}",
        "mode",
        "pattern",
        "ranks",
        "flows",
        "plan ms",
        "bootstrap ms",
        "peak MiB",
        "coord. CPU ms",
        "ranks' CPU ms",
        "max B to a rank",
        "gather+agg ms",
        "max step ms",
        "journal ms",
        "lifecycle ms"
    );
    for mode in &modes {
        for pattern in &patterns {
            for size in &sizes {
                let n: usize = size.parse().expect("--sizes are numbers");
                if (*pattern == "all-to-all" && n > 1024) || (*mode == "tcp" && n > 16_384) {
                    continue;
                }
                let mut runs = Vec::new();
                for _ in 0..rounds {
                    let out = Command::new(&exe).args(["--one", mode, pattern, size]).output().expect("run a case");
                    if !out.status.success() {
                        println!("{mode:<5} {pattern:<11} {n:>6} failed: {}", first_line(&out.stderr));
                        break;
                    }
                    let line = String::from_utf8_lossy(&out.stdout).into_owned();
                    let total_ms: f64 = line.split_whitespace().last().and_then(|v| v.parse().ok()).unwrap_or(0.0);
                    runs.push((total_ms, line));
                }
                runs.sort_by(|a, b| a.0.total_cmp(&b.0));
                if let Some((_, line)) = runs.get(runs.len() / 2) {
                    print!("{line}");
                }
            }
        }
    }
}

fn scenario(pattern: &str) -> &'static str {
    PATTERNS.iter().find(|(name, _)| *name == pattern).map(|(_, s)| *s).expect("a known pattern")
}

/// One case: prints its row.
fn one(mode: &str, pattern: &str, n: usize) {
    let started = Instant::now();
    let run = sim::make_run(n, scenario(pattern));
    let flows = run.plan.phases[0].flows.len();
    let plan_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let mut after = None;
    let max_bytes = match mode {
        "sim" | "life" => {
            let mut ranks = sim::Sim::generous(run.plan.clone());
            let traffic = sim::bootstrap(&mut ranks, n);
            assert!(traffic.started, "the ranks did not reach the barrier");
            if mode == "life" {
                after = Some(lifecycle(&mut ranks, run, started.elapsed()));
            }
            traffic.bytes.into_iter().max().unwrap_or(0)
        }
        "tcp" => {
            let (max_bytes, bootstrap) = over_tcp(run.plan, n);
            after = Some(AfterBarrier::bootstrap_only(bootstrap));
            max_bytes
        }
        other => panic!("mode {other}: sim, tcp or life"),
    };
    let (bootstrap_ms, after) = match after {
        Some(a) if mode == "tcp" => {
            (a.bootstrap_ms, format!("{:>14} {:>13} {:>11} {:>13.1}", "-", "-", "-", a.bootstrap_ms))
        }
        Some(a) => {
            let total_ms = a.bootstrap_ms + a.gather_ms + a.journal_ms;
            let after =
                format!("{:>14.1} {:>13.1} {:>11.1} {total_ms:>13.1}", a.gather_ms, a.longest_step_ms, a.journal_ms);
            (a.bootstrap_ms, after)
        }
        None => {
            let total_ms = started.elapsed().as_secs_f64() * 1e3;
            (total_ms, format!("{:>14} {:>13} {:>11} {total_ms:>13.1}", "-", "-", "-"))
        }
    };
    println!(
        "{mode:<5} {pattern:<11} {n:>6} {flows:>9} {plan_ms:>8.1} {bootstrap_ms:>13.1} {:>9.1} {:>15.0} {:>16.0} {max_bytes:>16} {after}",
        peak_rss_kib() as f64 / 1024.0,
        own_cpu_ms(),
        a_child_cpu_ms(),
    );
}

/// The lifecycle after the barrier, ms.
struct AfterBarrier {
    bootstrap_ms: f64,
    gather_ms: f64,
    longest_step_ms: f64,
    journal_ms: f64,
}

/// Every rank reports the started phase, rank 0 gathers and aggregates it,
/// and the phase is journaled into a results folder as `fabricbench run`
/// does (journal line flushed, every file rewritten). The lifecycle is
/// these and the bootstrap; the run's start and end records are not.
fn lifecycle(ranks: &mut sim::Sim, mut run: RunResult, bootstrap: Duration) -> AfterBarrier {
    let started = Instant::now();
    let gathered = sim::report_phase(ranks, &run.plan, 3);
    let phase = gathered.phase.expect("the coordinator aggregated the phase");
    let gather = started.elapsed();
    let parent = tempfile::tempdir().expect("a temporary folder");
    let mut folder = ResultsDir::create(parent.path(), "bench", &[]).expect("a results folder");
    folder.record(&run, Recorded::Started);
    let started = Instant::now();
    run.phases.push(phase);
    folder.record(&run, Recorded::Phase(run.phases.last().expect("just pushed")));
    folder.render(&run);
    let journal = started.elapsed();
    // Not part of a phase's lifecycle, but it says whether recording failed.
    folder.finish(&run).expect("the results folder is written");
    AfterBarrier {
        bootstrap_ms: bootstrap.as_secs_f64() * 1e3,
        gather_ms: gather.as_secs_f64() * 1e3,
        longest_step_ms: gathered.longest_step.as_secs_f64() * 1e3,
        journal_ms: journal.as_secs_f64() * 1e3,
    }
}

impl AfterBarrier {
    fn bootstrap_only(bootstrap: Duration) -> AfterBarrier {
        let ms = bootstrap.as_secs_f64() * 1e3;
        AfterBarrier { bootstrap_ms: ms, gather_ms: 0.0, longest_step_ms: 0.0, journal_ms: 0.0 }
    }
}

/// The ranks' CPU time up to the barrier, as the clients' process said,
/// and the coordinator's at that moment (ms): the sockets' teardown after
/// it is not the bootstrap's.
static CLIENTS_CPU_MS: std::sync::Mutex<Option<f64>> = std::sync::Mutex::new(None);
static COORDINATOR_CPU_MS: std::sync::Mutex<Option<f64>> = std::sync::Mutex::new(None);

fn a_child_cpu_ms() -> f64 {
    CLIENTS_CPU_MS.lock().unwrap().unwrap_or_else(|| cpu_ms(UsageWho::RUSAGE_CHILDREN))
}

fn own_cpu_ms() -> f64 {
    COORDINATOR_CPU_MS.lock().unwrap().unwrap_or_else(|| cpu_ms(UsageWho::RUSAGE_SELF))
}

/// The coordinator's driver here, the ranks in a child process; returns
/// the most bytes one rank was sent and the bootstrap: from starting the
/// ranks' process until it says every rank has Start. Its exit (closing
/// 16 384 sockets) comes after and is not part of it, nor is the
/// coordinator's CPU after that moment.
fn over_tcp(plan: fabricbench::plan::Plan, n: usize) -> (u64, Duration) {
    use tokio::io::AsyncBufReadExt;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let listener = fabricbench::control::driver::listen(([127, 0, 0, 1], 0).into()).unwrap();
        let addr = listener.local_addr().unwrap();
        // Failures before the start count; after it the clients exit and their connections close.
        let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let on_event = {
            let (failed, mut started) = (failed.clone(), false);
            move |event| match event {
                Event::PhaseStarted { .. } => started = true,
                Event::Failed(f) if !started => *failed.lock().unwrap() = Some(f.to_string()),
                _ => {}
            }
        };
        // On a thread of its own, as rank 0 runs it (`worker::serve`).
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let coordinator = sim::coordinator(plan, Epoch::now());
        let instructions = tokio::sync::mpsc::unbounded_channel().1;
        let driver = fabricbench::control::driver::spawn(listener, coordinator, instructions, stopped, on_event)
            .expect("the coordinator's thread");
        let exe = std::env::current_exe().unwrap();
        let started = Instant::now();
        let mut child = tokio::process::Command::new(exe)
            .args(["--clients", &addr.to_string(), &n.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run the clients");
        let mut said = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
        let line = said.next_line().await.expect("the clients' output").unwrap_or_default();
        let bootstrap = started.elapsed();
        *COORDINATOR_CPU_MS.lock().unwrap() = Some(cpu_ms(UsageWho::RUSAGE_SELF));
        let _ = stop.send(true);
        let _ = driver.await;
        let out = child.wait_with_output().await.expect("the clients end");
        if let Some(failure) = failed.lock().unwrap().take() {
            panic!("the coordinator failed: {failure}");
        }
        assert!(out.status.success(), "clients: {}", first_line(&out.stderr));
        let (max, cpu) = line.split_once(' ').expect("the clients' byte count and CPU ms");
        *CLIENTS_CPU_MS.lock().unwrap() = cpu.parse().ok();
        (max.parse().expect("the clients' byte count"), bootstrap)
    })
}

/// N ranks over TCP; once all are started prints the most bytes one was
/// sent and the CPU the ranks took (ms), then closes them.
fn clients(addr: std::net::SocketAddr, n: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let ranks: Vec<_> = (0..n).map(|rank| tokio::spawn(sim::tcp_rank(addr, rank))).collect();
        let mut started = Vec::with_capacity(n);
        for rank in ranks {
            started.push(rank.await.unwrap().unwrap_or_else(|e| panic!("{e}")));
        }
        let max = started.iter().map(|s| s.bytes).max().unwrap_or(0);
        println!("{max} {:.0}", cpu_ms(UsageWho::RUSAGE_SELF));
    });
}

/// The message of a failed case (its panic), without the backtrace.
fn first_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines().filter(|l| !l.starts_with("thread ") && !l.trim().is_empty()).take(1).collect()
}

/// User + system CPU time of this process (`RUSAGE_SELF`: the coordinator
/// and the plan) or of its finished children (the TCP ranks), ms.
fn cpu_ms(who: UsageWho) -> f64 {
    let Ok(usage) = getrusage(who) else { return f64::NAN };
    let ms = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e3 + t.tv_usec() as f64 / 1e3;
    ms(usage.user_time()) + ms(usage.system_time())
}

/// Peak resident set of this process (VmHWM), KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
