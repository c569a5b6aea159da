//! `fabricbench pair`: the flags become a scenario, which runs like any
//! other (same results folder); then perftest's table.

use crate::cli::pair::PairArgs;
use crate::commands::launching::{launch_for, ready, LaunchFlags};
use crate::commands::output::{self, Output};
use crate::commands::{pair_scenario, runtime, Failure};
use crate::launch::slurm::Allocation;
use crate::launch::Launch;
use crate::report::export::{Exporter, JsonExporter};
use crate::report::store::results_dir::Input;
use crate::report::terminal::perftest;
use crate::run::signals::Signals;
use crate::run::{self, RunOptions};

pub fn pair(args: &PairArgs) -> Result<(), Failure> {
    let (prepared, launch) = prepare(args).map_err(Failure::BadInput)?;
    let runtime = runtime()?;
    ready(&runtime, &launch, &prepared.hosts)?;
    let json: &dyn Exporter = &JsonExporter;
    let mut output = Output {
        folder: output::folder(
            &args.save,
            &prepared.scenario.run.name,
            &[Input { name: "command.txt", bytes: output::command_line() }],
        )?,
        exports: args.export_json.as_deref().map(|target| (target, json)).into_iter().collect(),
        summary: true,
        scraped: None,
    };
    runtime.block_on(async {
        let signals = Signals::listen().map_err(Failure::run_failed)?;
        let opts = RunOptions {
            scenario: prepared.scenario_file.clone(),
            port: args.port,
            progress: !args.no_progress,
            signals: signals.clone(),
        };
        let result = run::run(prepared, &launch, &opts, output.recorder()).await.map_err(Failure::RunFailed)?;
        output.deliver(&result, &perftest::render(&result, args.report_gbits))?;
        output::verdict(&result, &signals)
    })
}

/// The pair's scenario, planned on its two hosts, and how they start.
fn prepare(args: &PairArgs) -> anyhow::Result<(run::Prepared, Launch)> {
    let job = pair_scenario::build(args)?;
    let plan = crate::plan::build(&job.hosts, &job.scenario)?;
    // run.json names what made the run: this command line, in place of a scenario file.
    let command = String::from_utf8_lossy(&output::command_line()).trim_end().to_string();
    let prepared = run::Prepared {
        scenario_file: command.into(),
        scenario: job.scenario,
        hosts: job.hosts,
        plan,
        hostfile_text: None,
        topology: None,
        gather: None,
        gate: None,
        scenario_plan: true,
    };
    let flags = LaunchFlags { kind: args.launcher, ssh: &args.ssh, tree_radix: None, srun_args: &[], mpirun_args: &[] };
    let launch = launch_for(&flags, &prepared.hosts, Allocation::from_env()?)?;
    Ok((prepared, launch))
}
