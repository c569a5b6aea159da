//! `fabricbench run` and `fabricbench plan`: a scenario on the hosts of a
//! hostfile (or of the Slurm allocation).

use std::path::Path;

use crate::cli::{Inputs, RunArgs};
use crate::commands::launching::{launch_for, LaunchFlags};
use crate::commands::output::{self, Output};
use crate::commands::{estimate, runtime, Failure};
use crate::hostfile::{self, Host};
use crate::launch::choose::is_this_machine;
use crate::launch::slurm::Allocation;
use crate::report::{self, CsvExporter, Exporter, JsonExporter, JunitExporter, MarkdownExporter};
use crate::run::signals::Signals;
use crate::run::{self, JudgeOptions, RunOptions};
use crate::scenario::CheckSpec;

pub fn plan(inputs: &Inputs) -> Result<(), Failure> {
    let (prepared, _) = prepare(inputs, &run::Overrides::default()).map_err(Failure::BadInput)?;
    for phase in &prepared.plan.phases {
        println!("phase {} `{}`: {} flow(s)", phase.index, phase.name, phase.flows.len());
        for flow in &phase.flows {
            let group = &phase.groups[flow.group];
            let (src, dst) = (&prepared.plan.ranks[flow.src], &prepared.plan.ranks[flow.dst]);
            println!(
                "  flow {:>4}  {:<12} {} ({}) -> {} ({})  {} x {} B",
                flow.id, group.name, src.rank, src.host, dst.rank, dst.host, group.streams, group.message_size
            );
        }
    }
    Ok(())
}

pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let overrides = run::Overrides { duration: args.duration, warmup: args.warmup };
    let (prepared, allocation) = prepare(&args.inputs, &overrides).map_err(Failure::BadInput)?;
    let flags =
        LaunchFlags { kind: args.launcher, ssh: &args.ssh, tree_radix: args.tree_radix, srun_args: &args.srun_args };
    let launch = launch_for(&flags, &prepared.hosts, allocation).map_err(Failure::BadInput)?;
    let checks = checks(args, &prepared.scenario.check)?;
    let window = prepared.scenario.run.warmup + prepared.scenario.run.duration;
    let open_files = crate::fdlimit::current().unwrap_or(u64::MAX);
    for note in estimate::notes(&prepared.plan, window, open_files) {
        eprintln!("note: {note}");
    }
    let local: Vec<bool> = prepared.hosts.iter().map(is_this_machine).collect();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if let Some(warning) = estimate::overload(&prepared.plan, &local, cores, prepared.scenario.run.duration) {
        eprintln!("warning: {warning}");
    }
    let exports: [(&Option<std::path::PathBuf>, &dyn Exporter); 4] = [
        (&args.export_json, &JsonExporter),
        (&args.export_csv, &CsvExporter),
        (&args.export_markdown, &MarkdownExporter),
        (&args.export_junit, &JunitExporter),
    ];
    let mut output = Output {
        folder: output::folder(&args.save, &prepared.scenario.run.name, &inputs(&args.inputs)?)?,
        exports: exports.into_iter().filter_map(|(target, e)| Some((target.as_deref()?, e))).collect(),
        summary: !args.quiet,
    };

    runtime()?.block_on(async {
        let signals = Signals::listen().map_err(Failure::run_failed)?;
        let opts = RunOptions {
            scenario: args.inputs.scenario.clone(),
            port: args.port,
            progress: !args.quiet && !args.no_progress,
            signals: signals.clone(),
        };
        let accept = JudgeOptions { checks, retest: !args.no_retest };
        let result = run::run_and_judge(prepared, &launch, &opts, &accept, output.recorder())
            .await
            .map_err(Failure::RunFailed)?;
        let summary = if args.quiet { String::new() } else { report::render_terminal(&result) };
        output.deliver(&result, &summary)?;
        output::verdict(&result, &signals)
    })
}

/// What the results folder keeps of the inputs: the scenario and hostfile
/// as given, and the command line.
fn inputs(inputs: &Inputs) -> Result<Vec<(&'static str, Vec<u8>)>, Failure> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| Failure::BadInput(anyhow::anyhow!("cannot read {}: {e}", path.display())))
    };
    let mut files = vec![("command.txt", output::command_line()), ("scenario.toml", read(&inputs.scenario)?)];
    if let Some(hostfile) = &inputs.hostfile {
        files.push(("hostfile", read(hostfile)?));
    }
    Ok(files)
}

/// The scenario's [check] with the command line's added.
fn checks(args: &RunArgs, scenario: &CheckSpec) -> Result<CheckSpec, Failure> {
    let mut checks = scenario.clone();
    for &rule in &args.checks {
        checks.push(rule);
    }
    if args.line_rate.is_some() {
        checks.line_rate = args.line_rate;
    }
    if args.export_junit.is_some() && checks.rules().is_empty() {
        let e = anyhow::anyhow!("--export-junit needs checks: add [check] to the scenario or --check EXPR");
        return Err(Failure::BadInput(e));
    }
    Ok(checks)
}

/// Reads the inputs; also returns the Slurm allocation this runs in, if any.
fn prepare(inputs: &Inputs, overrides: &run::Overrides) -> anyhow::Result<(run::Prepared, Option<Allocation>)> {
    let allocation = Allocation::from_env()?;
    let (hosts, origin) = hosts_of(inputs.hostfile.as_deref(), allocation.as_ref())?;
    let mut prepared = run::prepare(&inputs.scenario, hosts, &origin, overrides)?;
    // Read a second time (hostfile::read parsed it): the text as it was, for run.json.
    prepared.hostfile_text = inputs
        .hostfile
        .as_deref()
        .and_then(|path| std::fs::read(path).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    Ok((prepared, allocation))
}

/// The hosts of a run: the hostfile's, or else the Slurm allocation's
/// nodes; with where they came from, for messages.
fn hosts_of(hostfile: Option<&Path>, allocation: Option<&Allocation>) -> anyhow::Result<(Vec<Host>, String)> {
    match (hostfile, allocation) {
        (Some(path), _) => Ok((hostfile::read(path)?, format!("hostfile {}", path.display()))),
        (None, Some(a)) => Ok((a.nodes.clone(), format!("the {} node(s) of Slurm job {}", a.nodes.len(), a.job))),
        (None, None) => {
            anyhow::bail!("no hosts: give a hostfile with -H FILE (inside a Slurm allocation the default is its nodes)")
        }
    }
}
