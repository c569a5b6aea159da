//! `fabricbench run` and `fabricbench plan`: a scenario on the hosts of a
//! hostfile (or of the Slurm allocation); started by mpirun, this rank's
//! part of the run (rank 0 the launcher, the others workers).

use std::path::Path;

use anyhow::bail;
use clap::ValueEnum;

use crate::cli::{Inputs, PlanArgs, RunArgs};
use crate::commands::launching::{launch_for, ready, this_exe, LaunchFlags};
use crate::commands::output::{self, Output, Scraped};
use crate::commands::{estimate, gate, runtime, Failure};
use crate::hostfile::{self, Host};
use crate::launch::choose::{is_this_machine, LauncherKind};
use crate::launch::local::LocalLauncher;
use crate::launch::slurm::Allocation;
use crate::launch::Launch;
use crate::report::export::junit::JunitExporter;
use crate::report::export::{CsvExporter, Exporter, JsonExporter, MarkdownExporter};
use crate::report::store::results_dir::Input;
use crate::report::terminal::{self, stdout, terminal_width};
use crate::run::signals::Signals;
use crate::run::{self, JudgeOptions, RunOptions};
use crate::scenario::CheckSpec;
use crate::worker::mpi::{self, Identity};
use crate::worker::JobSpec;

pub fn plan(args: &PlanArgs) -> Result<(), Failure> {
    if args.topology.gathers_lldp() {
        return Err(Failure::BadInput(anyhow::anyhow!(
            "--topology lldp gathers each host's LLDP neighbours by starting fabricbench on every host, and `plan` \
             starts no workers: give a folder of `lldpctl -f json` files, one per host (HOST.json), to --topology"
        )));
    }
    let overrides = run::Overrides { topology: args.topology.table(), ..Default::default() };
    let (prepared, ..) = prepare(&args.inputs, &overrides).map_err(Failure::BadInput)?;
    if let Some(run::Gather::Guids(read)) = &prepared.gather {
        let unplaced = read.topology.check_placed(&prepared.hosts, &read.path).err();
        return Err(Failure::BadInput(anyhow::anyhow!(
            "{}; `run` places the HCAs of such a topology by the node GUIDs the hosts report, and `plan` starts \
             no workers",
            unplaced.map_or_else(|| format!("topology {}", read.path.display()), |e| e.to_string())
        )));
    }
    if args.json {
        return plan_json(&prepared);
    }
    let say = |line: std::fmt::Arguments| stdout::print(format_args!("{line}\n"));
    if let Some(topology) = &prepared.topology {
        say(format_args!("topology {}:", topology.path.display()))?;
        stdout::print(topology.topology.render())?;
    }
    // Hosts of several ranks, GPUs or addresses from the hostfile: where
    // each rank runs, on which device, the GPU its ends in GPU memory use
    // and the address its TCP data binds to.
    if prepared.plan.ranks.iter().any(|r| r.slots > 1 || r.gpu.is_some() || r.data_addr.is_some()) {
        for r in &prepared.plan.ranks {
            let devices = if r.devices.is_empty() { "-".to_string() } else { r.devices.join(",") };
            let gpu = r.gpu.as_ref().map_or_else(String::new, |g| format!("  gpu {} (gpus=)", g.describe()));
            let addr = r.data_addr.as_ref().map_or_else(String::new, |a| format!("  addr {a} (addrs=)"));
            say(format_args!(
                "rank {:>4}  {:<24} slot {} of {}  devices {devices}{gpu}{addr}",
                r.rank, r.host, r.slot, r.slots
            ))?;
        }
    }
    let local = estimate::local_ranks(&prepared.hosts);
    // Every core an engine may be bound to (a group may name cores outside
    // this process's affinity).
    let cores = crate::load::topology::online_cpus().len() as u64;
    for phase in &prepared.plan.phases {
        say(format_args!("phase {} `{}`: {} flow(s)", phase.index, phase.name, phase.flows.len()))?;
        for flow in &phase.flows {
            let group = &phase.groups[flow.group];
            let (src, dst) = (&prepared.plan.ranks[flow.src], &prepared.plan.ranks[flow.dst]);
            say(format_args!(
                "  flow {:>4}  {:<12} {} ({}) -> {} ({})  {} x {} B",
                flow.id,
                group.name,
                src.rank,
                src.label(),
                dst.rank,
                dst.label(),
                group.streams,
                group.message_size
            ))?;
        }
        for line in estimate::engine_lines(&prepared.plan, phase, &local, cores) {
            say(format_args!("{line}"))?;
        }
    }
    // Last, where a long plan's reader lands: what the whole run costs.
    for line in estimate::group_lines(&prepared.plan, &prepared.scenario) {
        say(format_args!("{line}"))?;
    }
    let window = prepared.scenario.run.warmup + prepared.scenario.run.duration;
    say(format_args!("estimate: {}", estimate::Length::of(&prepared.plan, window)))?;
    if let Some(note) = estimate::rails_note(&prepared.plan, &prepared.scenario) {
        say(format_args!("note: {note}"))?;
    }
    Ok(())
}

/// `plan --json`: the plan as run.json records it, the topology's file and
/// the run's length in seconds.
fn plan_json(prepared: &run::Prepared) -> Result<(), Failure> {
    let window = prepared.scenario.run.warmup + prepared.scenario.run.duration;
    let length = estimate::Length::of(&prepared.plan, window);
    let value = serde_json::json!({
        "topology": prepared.topology.as_ref().map(|t| t.path.display().to_string()),
        "plan": prepared.plan,
        "estimate": {
            "phases": length.phases,
            "window_s": length.window.as_secs_f64(),
            "setup_s": length.setup().as_secs_f64(),
            "total_s": length.total().as_secs_f64(),
        },
        "notes": estimate::rails_note(&prepared.plan, &prepared.scenario).into_iter().collect::<Vec<_>>(),
    });
    let text = serde_json::to_string(&value).map_err(Failure::run_failed)?;
    Ok(stdout::print(format_args!("{text}\n"))?)
}

pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let overrides = run::Overrides {
        duration: args.duration,
        warmup: args.warmup,
        repeat: args.repeat,
        topology: args.topology.table(),
        lldp: args.topology.gathers_lldp(),
    };
    let (mut prepared, allocation, origin) = prepare(&args.inputs, &overrides).map_err(Failure::BadInput)?;
    if args.flap.is_some() {
        prepared.scenario.soak.flap = args.flap;
    }
    let mut port = args.port;
    let launch = match under_mpirun(args, &prepared, &origin).map_err(Failure::BadInput)? {
        Some(Ranked::Member(spec)) => return crate::worker::run_job(*spec, false).map_err(Failure::RunFailed),
        Some(Ranked::First(Identity { job, token, port: shared })) => {
            port = shared;
            Launch::Joined { local: LocalLauncher::new(this_exe().map_err(Failure::BadInput)?), job, token }
        }
        None => {
            let flags = LaunchFlags {
                kind: args.launcher,
                ssh: &args.ssh,
                tree_radix: args.tree_radix,
                srun_args: &args.srun_args,
                mpirun_args: &args.mpirun_args,
            };
            launch_for(&flags, &prepared.hosts, allocation).map_err(Failure::BadInput)?
        }
    };
    let runtime = runtime()?;
    ready(&runtime, &launch, &prepared.hosts)?;
    let gate =
        gate::options(args.gate.as_deref(), args.gate_only, &args.inputs.scenario, prepared.scenario.gate.as_ref())?;
    let checks = checks(args, &prepared.scenario.check, gate.is_some())?;
    let exports: [(&Option<std::path::PathBuf>, &dyn Exporter); 4] = [
        (&args.export_json, &JsonExporter),
        (&args.export_csv, &CsvExporter),
        (&args.export_markdown, &MarkdownExporter),
        (&args.export_junit, &JunitExporter),
    ];
    // Bound before the results folder is made: a port taken leaves nothing behind.
    let scraped = match args.metrics {
        Some(addr) => Some(Scraped::serve(addr, &prepared.scenario.run.name, &args.inputs.scenario)?),
        None => None,
    };
    if let (Some(scraped), false) = (&scraped, args.quiet) {
        crate::diag!("fabricbench: serving OpenMetrics at {}", scraped.url());
    }
    let mut output = Output {
        folder: output::folder(&args.save, &prepared.scenario.run.name, &inputs(&args.inputs)?)?,
        exports: exports.into_iter().filter_map(|(target, e)| Some((target.as_deref()?, e))).collect(),
        summary: !args.quiet,
        scraped,
    };

    runtime.block_on(async {
        let signals = Signals::listen().map_err(Failure::run_failed)?;
        let opts = RunOptions {
            scenario: args.inputs.scenario.clone(),
            port,
            progress: !args.quiet && !args.no_progress,
            signals: signals.clone(),
        };
        // `--topology lldp`: planned only now, on what the hosts' LLDP gave.
        let prepared = run::gather(prepared, &launch, &opts).await.map_err(|e| match (signals.first(), e) {
            (Some(stop), _) => Failure::Stopped(stop),
            (None, e @ run::GatherError::Topology(_)) => Failure::BadInput(e.into()),
            (None, e @ run::GatherError::Launch(_)) => Failure::RunFailed(e.into()),
        })?;
        warn_of_load(&prepared);
        let accept = JudgeOptions { checks, retest: !args.no_retest, gate };
        let result = run::run_and_judge(prepared, &launch, &opts, &accept, output.recorder())
            .await
            .map_err(Failure::RunFailed)?;
        let summary = if args.quiet { String::new() } else { terminal::render(&result, terminal_width()) };
        output.deliver(&result, &summary)?;
        output::verdict(&result, &signals)
    })
}

/// What the plan asks of this machine that may spoil the run: notes and a warning.
fn warn_of_load(prepared: &run::Prepared) {
    let window = prepared.scenario.run.warmup + prepared.scenario.run.duration;
    let open_files = crate::fdlimit::current().unwrap_or(u64::MAX);
    let rails = estimate::rails_note(&prepared.plan, &prepared.scenario);
    for note in estimate::notes(&prepared.plan, window, open_files).into_iter().chain(rails) {
        crate::diag!("note: {note}");
    }
    let local = estimate::local_ranks(&prepared.hosts);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if let Some(warning) = estimate::overload(&prepared.plan, &local, cores, prepared.scenario.run.duration) {
        crate::diag!("warning: {warning}");
    }
}

/// This process's part when mpirun started it (`mpirun … fabricbench run`).
enum Ranked {
    /// Rank 0: the launcher, with rank 0's coordinator on `port`.
    First(Identity),
    /// Any other rank: a worker joining rank 0.
    Member(Box<JobSpec>),
}

/// `None` outside an MPI job. Every rank reads the same hostfile and
/// scenario and derives the same identity from the job's secret.
fn under_mpirun(args: &RunArgs, prepared: &run::Prepared, origin: &str) -> anyhow::Result<Option<Ranked>> {
    let env = |name: &str| std::env::var(name).ok();
    let Some(me) = mpi::rank_from(&env)? else { return Ok(None) };
    if !matches!(args.launcher, LauncherKind::Auto) {
        bail!(
            "this is rank {} of an MPI job, where mpirun has started every rank already: drop --launcher {}",
            me.rank,
            args.launcher.to_possible_value().map_or(String::new(), |v| v.get_name().to_string())
        );
    }
    // Every rank refuses alike, before any joins: the members could not
    // take part in the gate's run and then the pairs' without the hosts it left out.
    if args.gate.is_some() || args.gate_only || prepared.scenario.gate.is_some() {
        bail!(
            "this is rank {} of an MPI job, where mpirun has started every rank for one run, and the node gate \
             (--gate, --gate-only, [gate]) is a run of its own before the pairs: run `fabricbench run … --launcher \
             mpirun` instead, which starts an mpirun job for the gate and another for the pairs",
            me.rank
        );
    }
    if args.topology.gathers_lldp() {
        bail!(
            "this is rank {} of an MPI job, where mpirun has started every rank for one run, and --topology lldp \
             gathers the hosts' LLDP neighbours in a launch of its own before the run is planned: run \
             `fabricbench run … --launcher mpirun` instead, or give a folder of `lldpctl -f json` files",
            me.rank
        );
    }
    if let Some(run::Gather::Guids(read)) = &prepared.gather {
        bail!(
            "this is rank {} of an MPI job, where mpirun has started every rank for one run, and the topology {} \
             places the hosts' HCAs by the node GUIDs they report, in a launch of its own before the run is \
             planned: run `fabricbench run … --launcher mpirun` instead, or give the HCAs node descriptions that \
             begin with their host's name (`node01 mlx5_0`)",
            me.rank,
            read.path.display()
        );
    }
    mpi::check(me, &prepared.hosts, origin, |ip| is_this_machine(&Host::named(&ip.to_string())))?;
    let identity = mpi::shared_identity(&env, args.port)?;
    Ok(Some(match me.rank {
        0 => Ranked::First(identity),
        _ => Ranked::Member(Box::new(mpi::member_of_run(me, &prepared.hosts, identity)?)),
    }))
}

/// What the results folder keeps of the inputs: the scenario and hostfile
/// as given, and the command line.
fn inputs(inputs: &Inputs) -> Result<Vec<Input>, Failure> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| Failure::BadInput(anyhow::anyhow!("cannot read {}: {e}", path.display())))
    };
    let mut files = vec![
        Input { name: "command.txt", bytes: output::command_line() },
        Input { name: "scenario.toml", bytes: read(&inputs.scenario)? },
    ];
    if let Some(hostfile) = &inputs.hostfile {
        files.push(Input { name: "hostfile", bytes: read(hostfile)? });
    }
    Ok(files)
}

/// The scenario's [check] with the command line's added.
fn checks(args: &RunArgs, scenario: &CheckSpec, gated: bool) -> Result<CheckSpec, Failure> {
    let mut checks = scenario.clone();
    for &rule in &args.checks {
        checks.push(rule);
    }
    if args.line_rate.is_some() {
        checks.line_rate = args.line_rate;
    }
    if args.export_junit.is_some() && checks.rules().is_empty() && !gated {
        let e = anyhow::anyhow!(
            "--export-junit needs checks or a gate: add [check] to the scenario, --check EXPR or --gate PROFILE"
        );
        return Err(Failure::BadInput(e));
    }
    Ok(checks)
}

/// Reads the inputs; also returns the Slurm allocation this runs in, if
/// any, and where the hosts came from (for messages).
pub(super) fn prepare(
    inputs: &Inputs,
    overrides: &run::Overrides,
) -> anyhow::Result<(run::Prepared, Option<Allocation>, String)> {
    let allocation = Allocation::from_env()?;
    let (hosts, origin) = hosts_of(inputs.hostfile.as_deref(), allocation.as_ref())?;
    for warning in hostfile::crowded(&hosts) {
        crate::diag!("warning: {warning}");
    }
    let mut prepared = run::prepare(&inputs.scenario, hosts, &origin, overrides)?;
    // Read a second time (hostfile::read parsed it): the text as it was, for run.json.
    prepared.hostfile_text = inputs
        .hostfile
        .as_deref()
        .and_then(|path| std::fs::read(path).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    Ok((prepared, allocation, origin))
}

/// The hosts of a run: the hostfile's, or else the Slurm allocation's
/// nodes; with where they came from, for messages.
pub(crate) fn hosts_of(
    hostfile: Option<&Path>,
    allocation: Option<&Allocation>,
) -> anyhow::Result<(Vec<Host>, String)> {
    match (hostfile, allocation) {
        (Some(path), _) => Ok((hostfile::read(path)?, format!("hostfile {}", path.display()))),
        (None, Some(a)) => Ok((a.nodes.clone(), format!("the {} node(s) of Slurm job {}", a.nodes.len(), a.job))),
        (None, None) => {
            anyhow::bail!("no hosts: give a hostfile with -H FILE (inside a Slurm allocation the default is its nodes)")
        }
    }
}
