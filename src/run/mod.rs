//! `fabricbench run`: read the hostfile and scenario, plan, start the
//! workers (rank 0 first: it serves the coordinator; or all at once as an
//! srun step), follow the run through rank 0's event stream, stop every
//! worker, and keep every result measured, also when the run fails half-way.

mod gate;
mod gather;
mod judge;
mod overrides;
pub mod record;
pub(crate) mod signals;
mod starting;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use rand::Rng;
use tokio::io::BufReader;

use crate::control::coordinator::{Event, RunFailure};
use crate::control::instruction::Instruction;
use crate::hostfile::Host;
use crate::launch::workers::Workers;
use crate::launch::{BoxRead, Launch};
use crate::plan::{self, Plan};
use crate::progress::Progress;
use crate::result::gate::GateResult;
use crate::result::intervals::Series;
use crate::result::leaf_pairs::LeafPairs;
use crate::result::{RunResult, RunStatus};
use crate::scenario::topology::{Loaded, RunTopology};
use crate::scenario::{self, Scenario};
use crate::worker::WorkerOutput;
pub use gate::GateOptions;
pub use gather::{gather, Gather, GatherError};
pub use judge::{run_and_judge, JudgeOptions};
pub use overrides::Overrides;
use record::{Recorded, Recorder};
use signals::{Signals, Stop};

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
#[derive(Clone)]
pub struct Prepared {
    pub scenario_file: PathBuf,
    pub scenario: Scenario,
    pub hosts: Vec<Host>,
    pub plan: Plan,
    /// The hostfile's text, for run.json (`None`: the hosts came from elsewhere).
    pub hostfile_text: Option<String>,
    /// `--topology` or the scenario's `[topology]`, placing every host.
    pub topology: Option<RunTopology>,
    /// What is still to be learnt from the hosts by a launch of its own
    /// ([`gather`]): the topology from their LLDP (`--topology lldp`), or
    /// where the topology's HCAs are from their node GUIDs. `plan` holds the
    /// ranks only (no phases) until then; [`gather`] plans the run on what
    /// they reported and clears this.
    pub gather: Option<Gather>,
    /// The node gate's verdict when one ran before this run (whose hosts
    /// are those that passed it): the result holds it from its start, so
    /// the journal's first line keeps it.
    pub gate: Option<GateResult>,
    /// Whether `plan` is what the scenario alone plans on `hosts` (no
    /// topology, retest or gate made it): rank 0 of a step then plans it
    /// itself instead of being sent every flow.
    pub scenario_plan: bool,
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
    // The flag's path is the working directory's; the table's, the scenario file's folder's.
    let table = match (&overrides.topology, &scenario.topology) {
        _ if overrides.lldp => None,
        (Some(flag), _) => Some((flag.clone(), None)),
        (None, Some(table)) => Some((table.beside(scenario_file), Some(&source))),
        (None, None) => None,
    };
    let (topology, gather) = match table {
        None => (None, overrides.lldp.then_some(Gather::Lldp)),
        Some((table, from_scenario)) => match table.load(&hosts) {
            Ok(Loaded::Placed(placed)) => (Some(placed), None),
            Ok(Loaded::ByGuid(read)) => (None, Some(Gather::Guids(read))),
            Err(e) => match from_scenario {
                None => return Err(e.into()),
                Some(source) => {
                    bail!("{} (with {origin})", source.describe(&scenario::Field::top("topology"), &e.to_string()))
                }
            },
        },
    };
    let plan = match gather {
        // Pairs chosen by the topology wait for it: the ranks are all the gathering launch needs.
        Some(_) => Plan { ranks: plan::ranks_of(&hosts), phases: Vec::new() },
        None => plan_on(&hosts, &scenario, topology.as_ref())
            .map_err(|bad| anyhow!("{} (with {origin})", source.explain(&bad)))?,
    };
    Ok(Prepared {
        scenario_file: scenario_file.to_path_buf(),
        scenario,
        hosts,
        plan,
        hostfile_text: None,
        scenario_plan: topology.is_none() && gather.is_none(),
        topology,
        gather,
        gate: None,
    })
}

/// The plan of `scenario` on `hosts`, its pairs chosen by `topology` when
/// there is one.
fn plan_on(hosts: &[Host], scenario: &Scenario, topology: Option<&RunTopology>) -> Result<Plan, scenario::BadField> {
    let fabric = topology.map(|t| plan::Fabric::new(&t.topology, hosts));
    plan::build_on(hosts, scenario, fabric.as_ref())
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
    run_with(prepared, launch, opts, recorder, None).await
}

/// [`run`], the hosts' LLDP texts put into `gathering` as they come.
async fn run_with(
    prepared: Prepared,
    launch: &Launch,
    opts: &RunOptions,
    recorder: &mut dyn Recorder,
    gathering: Option<&mut gather::Gathering>,
) -> anyhow::Result<RunResult> {
    let mut result = RunResult::new(
        prepared.scenario_file.display().to_string(),
        prepared.scenario.clone(),
        prepared.hosts.clone(),
        prepared.plan.clone(),
    );
    result.hostfile_text = prepared.hostfile_text.clone();
    result.gate = prepared.gate.clone();
    result.leaf_pairs = prepared.topology.as_ref().map(|t| LeafPairs::new(&t.path, &prepared.plan, &t.topology));
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
    let sink = Sink { progress: &progress, series: Series::default(), result: &mut result, recorder, gathering };
    let outcome = drive(&prepared, launch, opts, &mut workers, sink).await;
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
        result.refused = e.downcast_ref::<RunFailure>().is_some_and(|f| f.refused);
        result.status = RunStatus::Failed { error: format!("{e:#}") };
    }
    result.mark_degraded();
    result.fail_on_bad_data();
    result.summarize_phases();
    Ok(result)
}

/// Starts the workers and follows rank 0's events until the run ends.
async fn drive(
    prepared: &Prepared,
    launch: &Launch,
    opts: &RunOptions,
    workers: &mut Workers,
    mut sink: Sink<'_>,
) -> anyhow::Result<()> {
    let launched = Instant::now();
    let (job, token) = match launch {
        Launch::Joined { job, token, .. } => (*job, token.clone()),
        _ => job_identity(),
    };
    let host0 = &prepared.hosts[0];
    let signals = &opts.signals;
    let mut seen = signals.received();
    let started = starting::start_workers(prepared, launch, opts, workers, job, &token);
    let mut events = tokio::select! {
        events = started => events?,
        stop = signals.reach(seen + 1) => bail!("stopped by {stop} while the workers started: every worker was stopped"),
    };

    let mut lost: Option<(usize, String, tokio::time::Instant)> = None;
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
            output = next_output(&mut events) => {
                if let Some(done) = on_output(output?, launched, host0, workers, &mut sink).await? {
                    return done;
                }
            }
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
                sink.recorder.record(sink.result, Recorded::Stopping { reason: &reason });
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

/// Handles one line of rank 0's output (`None`: it ended); `Some` when
/// the run is over.
async fn on_output(
    output: Option<WorkerOutput>,
    launched: Instant,
    host0: &Host,
    workers: &mut Workers,
    sink: &mut Sink<'_>,
) -> anyhow::Result<Option<anyhow::Result<()>>> {
    let event = match output {
        Some(WorkerOutput::Event(event)) => event,
        Some(WorkerOutput::Listening { .. }) => return Ok(None),
        None => {
            let _ = tokio::time::timeout(EXIT_GRACE, workers.exits.recv()).await;
            bail!("rank 0 ({}) exited during the run{}", host0.name, workers.stderr_tail(0));
        }
    };
    if let Event::Joined { joined, total, .. } = &event {
        if joined == total {
            sink.result.launch_s = Some(launched.elapsed().as_secs_f64());
        }
    }
    let finished = match &event {
        Event::PhaseDone(phase) => Some(phase.index),
        _ => None,
    };
    if let Some(done) = sink.follow(event)? {
        return Ok(Some(done));
    }
    // Journaled now: rank 0 starts the next phase only after this; the
    // files are rendered while it sets up.
    if let Some(phase) = finished {
        let line = serde_json::to_string(&Instruction::Saved { phase })?;
        if let Err(e) = workers.send_to_first(&line).await {
            tracing::debug!("could not tell rank 0 that phase {phase} is saved: {e}");
        }
        sink.recorder.render(sink.result);
    }
    Ok(None)
}

/// Where rank 0's events go.
struct Sink<'a> {
    progress: &'a Mutex<Progress>,
    /// The running phase's intervals, put back into its result when it ends.
    series: Series,
    result: &'a mut RunResult,
    recorder: &'a mut dyn Recorder,
    /// The gathering launch of `--topology lldp`: the hosts' neighbours.
    gathering: Option<&'a mut gather::Gathering>,
}

impl Sink<'_> {
    /// Applies one coordinator event; `Some` when the run is over.
    fn follow(&mut self, event: Event) -> anyhow::Result<Option<anyhow::Result<()>>> {
        let Sink { progress, series, result, recorder, gathering } = self;
        let mut p = progress.lock().map_err(|_| anyhow!("progress display poisoned"))?;
        match event {
            Event::Rejected { reason, .. } => {
                p.note(&format!("fabricbench: coordinator rejected a connection: {reason}"))
            }
            Event::Joined { rank, host, joined, total } => {
                p.joined(rank, &host, joined, total);
                recorder.record(result, Recorded::Joined { joined, total });
            }
            Event::PhaseStarted { phase, name, window } => {
                p.phase_started(phase, &name, window);
                recorder.record(result, Recorded::PhaseStarted { phase });
            }
            Event::Progress { phase, interval, gbps, flows } => {
                p.interval(phase, interval, gbps);
                recorder.record(result, Recorded::Interval { phase, interval, gbps, flows: &flows });
                series.push(phase, gbps, &flows);
            }
            Event::Probed(probe) => {
                let at = result.probes.partition_point(|p| p.rank < probe.rank);
                recorder.record(result, Recorded::Probe(&probe));
                result.probes.insert(at, probe);
            }
            Event::Neighbours { host, lldp, .. } => {
                if let Some(gathering) = gathering {
                    gathering.add(host, lldp);
                }
            }
            Event::PhaseDone(mut phase) => {
                p.phase_done(phase.index, phase.aggregate_gbps);
                series.fill(&mut phase);
                result.phases.push(*phase);
                recorder.record(result, Recorded::Phase(result.phases.last().expect("just pushed")));
            }
            Event::Finished => return Ok(Some(Ok(()))),
            Event::Failed(failure) => return Ok(Some(Err(anyhow::Error::new(failure)))),
        }
        Ok(None)
    }
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
