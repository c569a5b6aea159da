//! `fabricbench run`: read the hostfile and scenario, plan, start the
//! workers (rank 0 first: it serves the coordinator; or all at once as an
//! srun step), follow the run through rank 0's event stream, stop every
//! worker, and keep every result measured, also when the run fails half-way.

mod judge;
mod overrides;
pub mod record;
pub mod signals;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use rand::Rng;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::control::coordinator::Event;
use crate::control::instruction::Instruction;
use crate::control::wire::Window;
use crate::hostfile::Host;
use crate::launch::local::LocalLauncher;
use crate::launch::mpirun::MpirunLauncher;
use crate::launch::slurm::SlurmLauncher;
use crate::launch::ssh::SshOptions;
use crate::launch::tree::{self, Subtree};
use crate::launch::workers::Workers;
use crate::launch::{BoxRead, Launch, Launcher};
use crate::plan::{self, Plan};
use crate::progress::Progress;
use crate::result::intervals::Series;
use crate::result::{RunResult, RunStatus};
use crate::scenario::{self, Scenario};
use crate::worker::mpi::{self, MpiJob};
use crate::worker::relay::member_spec;
use crate::worker::srun::{CoordinatorAt, SrunSpec};
use crate::worker::{JobSpec, Role, WorkerOutput};
pub use judge::{run_and_judge, JudgeOptions};
pub use overrides::Overrides;
use record::{Recorded, Recorder};
use signals::{Signals, Stop};

/// How long rank 0 may take to start listening.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(20);
/// After a worker dies, how long rank 0 has to report it before we do.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// How long rank 0 has to end the run (gathering the partial reports of the
/// running phase) after a stop signal: the coordinator's abort grace and
/// some.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long workers get to exit after their stdin closes.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub struct RunOptions {
    pub scenario: PathBuf,
    /// Port for rank 0's coordinator (0: any free port).
    pub port: u16,
    pub progress: bool,
    /// A stop signal ends the run as a failure that keeps what was measured.
    pub signals: Signals,
}

/// Everything needed before any process starts; all input errors surface here.
pub struct Prepared {
    pub scenario_file: PathBuf,
    pub scenario: Scenario,
    pub hosts: Vec<Host>,
    pub plan: Plan,
    /// The hostfile's text, for run.json (`None`: the hosts came from elsewhere).
    pub hostfile_text: Option<String>,
}

/// Loads and checks the scenario against `hosts`, which came from `origin`
/// (e.g. "hostfile hosts/rack1"); errors name the file, line and field.
pub fn prepare(
    scenario_file: &Path,
    hosts: Vec<Host>,
    origin: &str,
    overrides: &Overrides,
) -> anyhow::Result<Prepared> {
    let (mut scenario, source) = scenario::read(scenario_file)?;
    overrides.apply(&mut scenario.run, &source)?;
    let plan = plan::build(&hosts, &scenario)
        .map_err(|(field, message)| anyhow!("{} (with {origin})", source.describe(&field, &message)))?;
    Ok(Prepared { scenario_file: scenario_file.to_path_buf(), scenario, hosts, plan, hostfile_text: None })
}

/// Runs the job, telling `recorder` of each probe and phase as it comes.
/// The result is returned whether the run succeeded or not; only a failure
/// before any worker ran is an `Err`.
pub async fn run(
    prepared: Prepared,
    launch: &Launch,
    opts: &RunOptions,
    recorder: &mut dyn Recorder,
) -> anyhow::Result<RunResult> {
    let mut result = RunResult::new(
        prepared.scenario_file.display().to_string(),
        prepared.scenario.clone(),
        prepared.hosts.clone(),
        prepared.plan.clone(),
    );
    result.hostfile_text = prepared.hostfile_text.clone();
    let progress = Arc::new(Mutex::new(Progress::new(opts.progress, prepared.hosts.len())));
    let echo = {
        let progress = progress.clone();
        Arc::new(move |line: String| {
            if let Ok(p) = progress.lock() {
                p.note(&line);
            }
        })
    };
    let mut workers = Workers::new(echo);
    recorder.record(&result, Recorded::Started);
    let outcome = drive(&prepared, launch, opts, &mut workers, &progress, &mut result, recorder).await;
    // Another signal while the workers wind down: end them now.
    let signals = &opts.signals;
    let hurry = signals.received() + 1;
    let hurried = tokio::select! {
        () = workers.shut_down(SHUTDOWN_GRACE) => false,
        _ = signals.reach(hurry) => true,
    };
    if hurried {
        workers.shut_down(Duration::ZERO).await;
    }
    launch.close().await;
    if let Ok(mut p) = progress.lock() {
        p.finish();
    }
    if let Err(e) = outcome {
        result.status = RunStatus::Failed { error: format!("{e:#}") };
    }
    result.mark_degraded();
    result.summarize_phases();
    Ok(result)
}

/// Starts the workers and follows rank 0's events until the run ends.
async fn drive(
    prepared: &Prepared,
    launch: &Launch,
    opts: &RunOptions,
    workers: &mut Workers,
    progress: &Mutex<Progress>,
    result: &mut RunResult,
    recorder: &mut dyn Recorder,
) -> anyhow::Result<()> {
    let launched = Instant::now();
    let (job, token) = match launch {
        Launch::Joined { job, token, .. } => (*job, token.clone()),
        _ => job_identity(),
    };
    let host0 = &prepared.hosts[0];
    let signals = &opts.signals;
    let mut seen = signals.received();
    let started = async {
        match launch {
            Launch::PerHost(launcher) => {
                start_per_host(prepared, launcher.as_ref(), None, opts, workers, job, &token).await
            }
            Launch::Tree { ssh, radix } => {
                start_per_host(prepared, ssh, Some((*radix, ssh.options())), opts, workers, job, &token).await
            }
            Launch::Srun(slurm) => start_step(prepared, slurm, opts, workers, job, &token).await,
            Launch::Mpirun(mpirun) => start_mpirun(prepared, mpirun, opts, workers, job, &token).await,
            Launch::Joined { local, .. } => start_alone(prepared, local, opts, workers, job, &token).await,
        }
    };
    let mut events = tokio::select! {
        events = started => events?,
        stop = signals.reach(seen + 1) => bail!("stopped by {stop} while the workers started: every worker was stopped"),
    };

    let mut lost: Option<(usize, String, tokio::time::Instant)> = None;
    // The running phase's intervals, put back into its result when it ends.
    let mut series = Series::default();
    // A stop signal asks rank 0 to end the run, so that the running phase
    // keeps its partial reports; another signal, or no end within
    // STOP_GRACE, stops everything at once.
    let mut stopping: Option<(Stop, tokio::time::Instant)> = None;
    loop {
        let grace_over = async {
            match &lost {
                Some((_, _, at)) => tokio::time::sleep_until(*at + EXIT_GRACE).await,
                None => std::future::pending().await,
            }
        };
        let stop_over = async {
            match &stopping {
                Some((_, at)) => tokio::time::sleep_until(*at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            output = next_output(&mut events) => match output? {
                Some(WorkerOutput::Event(event)) => {
                    if let Event::Joined { joined, total, .. } = &event {
                        if joined == total {
                            result.launch_s = Some(launched.elapsed().as_secs_f64());
                        }
                    }
                    let finished = match &event {
                        Event::PhaseDone(phase) => Some(phase.index),
                        _ => None,
                    };
                    if let Some(done) = follow(event, progress, &mut series, result, recorder)? {
                        return done;
                    }
                    // Journaled now: rank 0 starts the next phase only after
                    // this; the files are rendered while it sets up.
                    if let Some(phase) = finished {
                        let line = serde_json::to_string(&Instruction::Saved { phase })?;
                        if let Err(e) = workers.send_to_first(&line).await {
                            tracing::debug!("could not tell rank 0 that phase {phase} is saved: {e}");
                        }
                        recorder.render(result);
                    }
                }
                Some(WorkerOutput::Listening { .. }) => {}
                None => {
                    let _ = tokio::time::timeout(EXIT_GRACE, workers.exits.recv()).await;
                    bail!("rank 0 ({}) exited during the run{}", host0.name, workers.stderr_tail(0));
                }
            },
            Some(exit) = workers.exits.recv() => {
                if lost.is_none() {
                    lost = Some((exit.rank, exit.how, tokio::time::Instant::now()));
                }
            }
            () = grace_over => {
                let (rank, how, _) = lost.take().expect("guarded");
                bail!("rank {rank} ({}) exited ({how}) during the run{}", workers.host(rank), workers.stderr_tail(rank));
            }
            stop = signals.reach(seen + 1) => {
                seen += 1;
                let reason = format!("stopped by {stop}");
                let line = serde_json::to_string(&Instruction::Stop { reason: reason.clone() })?;
                if stopping.is_some() || workers.send_to_first(&line).await.is_err() {
                    bail!("stopped by {stop}: every worker was stopped");
                }
                recorder.record(result, Recorded::Stopping { reason: &reason });
                stopping = Some((stop, tokio::time::Instant::now() + STOP_GRACE));
            }
            () = stop_over => {
                let (stop, _) = stopping.take().expect("guarded");
                bail!("stopped by {stop}: rank 0 did not end the run within {STOP_GRACE:?}; every worker was stopped");
            }
        }
    }
}

type Events = tokio::io::Lines<BufReader<BoxRead>>;

/// One process per host, all started at once: rank 0 gets its spec, the
/// others theirs without rank 0's address, which follows on their stdin
/// once rank 0 listens, so a launch costs one remote start, not two in a
/// row. In a tree launch (`tree`: radix and the SSH options the workers
/// use) the launcher starts only the roots of the subtrees below rank 0.
async fn start_per_host(
    prepared: &Prepared,
    launcher: &dyn Launcher,
    tree: Option<(usize, &SshOptions)>,
    opts: &RunOptions,
    workers: &mut Workers,
    job: u64,
    token: &str,
) -> anyhow::Result<Events> {
    let others: Vec<(usize, Host)> = prepared.hosts.iter().cloned().enumerate().skip(1).collect();
    let direct = match tree {
        Some((radix, _)) => tree::split(&others, radix),
        None => others.into_iter().map(|(rank, host)| Subtree { rank, host, below: Vec::new() }).collect(),
    };
    let host0 = &prepared.hosts[0];
    let spec0 = rank0_spec(prepared, opts.port, job, token);
    // Every start opens its host's connection (at most --fanout at once).
    let (started0, others) = tokio::join!(
        launcher.start(0, host0),
        futures::future::join_all(direct.iter().map(|s| launcher.start(s.rank, &s.host)))
    );
    let line = serde_json::to_string(&spec0)?;
    let stdout0 = workers.adopt(0, &host0.name, started0?, &line).await.context("sending rank 0 its job spec")?;
    for (subtree, started) in direct.iter().zip(others) {
        let (rank, host) = (subtree.rank, &subtree.host);
        let spec = member_spec(job, token, None, subtree, tree.map(|(_, ssh)| ssh));
        workers
            .adopt(rank, &host.name, started?, &serde_json::to_string(&spec)?)
            .await
            .with_context(|| format!("sending rank {rank} ({}) its job spec", host.name))?;
    }
    let mut events = BufReader::new(stdout0).lines();
    let coordinator = listening(&mut events, workers, host0).await?;
    let line = serde_json::to_string(&CoordinatorAt { coordinator })?;
    if let Err((rank, e)) = workers.send_to_members(&line).await {
        bail!("sending rank {rank} ({}) rank 0's address: {e}", workers.host(rank));
    }
    Ok(events)
}

/// Rank 0's job spec: serve the coordinator on `port` (0: any).
fn rank0_spec(prepared: &Prepared, port: u16, job: u64, token: &str) -> JobSpec {
    let host0 = &prepared.hosts[0];
    JobSpec {
        job,
        token: token.to_string(),
        rank: 0,
        host: host0.name.clone(),
        bind: host0.data_addr().to_string(),
        role: Role::Coordinator {
            plan: Box::new(prepared.plan.clone()),
            window: Window::of(&prepared.scenario.run),
            port,
        },
        relay: None,
        devices: host0.devices.clone(),
    }
}

/// Rank 0 only, on this machine: mpirun started the others, which join it
/// on the port they all know (`opts.port`).
async fn start_alone(
    prepared: &Prepared,
    local: &LocalLauncher,
    opts: &RunOptions,
    workers: &mut Workers,
    job: u64,
    token: &str,
) -> anyhow::Result<Events> {
    let host0 = &prepared.hosts[0];
    let line = serde_json::to_string(&rank0_spec(prepared, opts.port, job, token))?;
    let stdout0 = workers.adopt(0, &host0.name, local.start(0, host0).await?, &line).await?;
    let mut events = BufReader::new(stdout0).lines();
    listening(&mut events, workers, host0).await?;
    Ok(events)
}

/// One mpirun job for every rank: rank 0 reads the spec on mpirun's stdin
/// (the only rank that has it); every rank reads the job's identity, the
/// hosts and rank 0's port from the environment.
async fn start_mpirun(
    prepared: &Prepared,
    mpirun: &MpirunLauncher,
    opts: &RunOptions,
    workers: &mut Workers,
    job: u64,
    token: &str,
) -> anyhow::Result<Events> {
    // The members connect before rank 0 could tell them a port it chose.
    let port = match opts.port {
        0 => rand::thread_rng().gen_range(mpi::PORTS),
        port => port,
    };
    let shared = MpiJob { job, token: token.to_string(), hosts: prepared.hosts.clone(), port };
    let spec = step_spec(prepared, port, job, token, Some(prepared.hosts.clone()));
    let step = mpirun.start_step(&prepared.hosts, (mpi::JOB_VAR, &serde_json::to_string(&shared)?))?;
    let names: Vec<String> = prepared.hosts.iter().map(|h| h.name.clone()).collect();
    let line = serde_json::to_string(&spec)?;
    let stdout0 = workers.adopt_step(&names, step, &line).await.context("sending mpirun's rank 0 its job spec")?;
    let mut events = BufReader::new(stdout0).lines();
    listening(&mut events, workers, &prepared.hosts[0]).await?;
    Ok(events)
}

/// What rank 0 of a step (srun, mpirun) reads first: it plans from the
/// scenario unless this plan is another (a retest).
fn step_spec(prepared: &Prepared, port: u16, job: u64, token: &str, hosts: Option<Vec<Host>>) -> SrunSpec {
    SrunSpec {
        job,
        token: token.to_string(),
        hosts,
        scenario: prepared.scenario.clone(),
        phases: (plan::build(&prepared.hosts, &prepared.scenario).as_ref() != Ok(&prepared.plan))
            .then(|| prepared.plan.phases.clone()),
        port,
    }
}

/// One srun step for every rank: each task reads the same broadcast spec;
/// rank 0's address follows on the same stdin once it listens, so the
/// others join without a second launch.
async fn start_step(
    prepared: &Prepared,
    slurm: &SlurmLauncher,
    opts: &RunOptions,
    workers: &mut Workers,
    job: u64,
    token: &str,
) -> anyhow::Result<Events> {
    let hosts = (!slurm.is_allocation(&prepared.hosts)).then(|| prepared.hosts.clone());
    let spec = step_spec(prepared, opts.port, job, token, hosts);
    let step = slurm.start_step(&prepared.hosts)?;
    let names: Vec<String> = prepared.hosts.iter().map(|h| h.name.clone()).collect();
    let line = serde_json::to_string(&spec)?;
    let stdout0 = workers.adopt_step(&names, step, &line).await.context("sending the srun step its job spec")?;
    let mut events = BufReader::new(stdout0).lines();
    let coordinator = listening(&mut events, workers, &prepared.hosts[0]).await?;
    let line = serde_json::to_string(&CoordinatorAt { coordinator })?;
    workers.send_to_last(&line).await.context("sending the srun step rank 0's address")?;
    Ok(events)
}

/// Waits for rank 0 to say where its coordinator listens.
async fn listening(events: &mut Events, workers: &mut Workers, host0: &Host) -> anyhow::Result<SocketAddr> {
    match tokio::time::timeout(LISTEN_TIMEOUT, next_output(events)).await {
        Ok(Ok(Some(WorkerOutput::Listening { addr, version }))) if version == env!("CARGO_PKG_VERSION") => Ok(addr),
        Ok(Ok(Some(WorkerOutput::Listening { version, .. }))) => bail!(
            "rank 0 ({}) runs fabricbench {version}, this launcher is fabricbench {}; install one version everywhere (or use --remote-exe)",
            host0.name,
            env!("CARGO_PKG_VERSION")
        ),
        Ok(Ok(_)) | Ok(Err(_)) => {
            let _ = tokio::time::timeout(EXIT_GRACE, workers.exits.recv()).await;
            bail!("rank 0 ({}) exited before its coordinator listened{}", host0.name, workers.stderr_tail(0))
        }
        Err(_) => bail!("rank 0 ({}) did not start its coordinator within {LISTEN_TIMEOUT:?}", host0.name),
    }
}

/// Applies one coordinator event; `Some` when the run is over.
fn follow(
    event: Event,
    progress: &Mutex<Progress>,
    series: &mut Series,
    result: &mut RunResult,
    recorder: &mut dyn Recorder,
) -> anyhow::Result<Option<anyhow::Result<()>>> {
    let mut p = progress.lock().map_err(|_| anyhow!("progress display poisoned"))?;
    match event {
        Event::Rejected { reason, .. } => p.note(&format!("fabricbench: coordinator rejected a connection: {reason}")),
        Event::Joined { rank, host, joined, total } => p.joined(rank, &host, joined, total),
        Event::PhaseStarted { phase, name, window } => p.phase_started(phase, &name, window),
        Event::Progress { phase, interval, gbps, flows } => {
            p.interval(phase, interval, gbps);
            recorder.record(result, Recorded::Interval { phase, interval, gbps });
            series.push(phase, gbps, &flows);
        }
        Event::Probed(probe) => {
            let at = result.probes.partition_point(|p| p.rank < probe.rank);
            recorder.record(result, Recorded::Probe(&probe));
            result.probes.insert(at, probe);
        }
        Event::PhaseDone(mut phase) => {
            p.phase_done(phase.index, phase.aggregate_gbps);
            series.fill(&mut phase);
            result.phases.push(*phase);
            recorder.record(result, Recorded::Phase(result.phases.last().expect("just pushed")));
        }
        Event::Finished => return Ok(Some(Ok(()))),
        Event::Failed(failure) => return Ok(Some(Err(anyhow!("{failure}")))),
    }
    Ok(None)
}

async fn next_output(lines: &mut Events) -> anyhow::Result<Option<WorkerOutput>> {
    loop {
        let Some(line) = lines.next_line().await.context("reading rank 0's output")? else { return Ok(None) };
        if line.trim().is_empty() {
            continue;
        }
        return serde_json::from_str(&line)
            .map(Some)
            .with_context(|| format!("rank 0 wrote an unexpected line: {line}"));
    }
}

/// A random job id and a 256-bit secret token, both new for every run.
fn job_identity() -> (u64, String) {
    let mut rng = rand::thread_rng();
    let token: String = (0..32).map(|_| format!("{:02x}", rng.gen::<u8>())).collect();
    (rng.gen(), token)
}
