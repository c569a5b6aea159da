//! `fabricbench pair`: the flags become a scenario, which runs like any
//! other (same results folder); then perftest's table.

use crate::cli::pair::PairArgs;
use crate::commands::launching::{launch_for, LaunchFlags};
use crate::commands::output::{self, Output};
use crate::commands::{pair_scenario, runtime, Failure};
use crate::launch::slurm::Allocation;
use crate::launch::Launch;
use crate::report::{self, Exporter, JsonExporter};
use crate::run::{self, RunOptions};

pub fn pair(args: &PairArgs) -> Result<(), Failure> {
    let (prepared, launch) = prepare(args).map_err(Failure::BadInput)?;
    let opts = RunOptions { scenario: prepared.scenario_file.clone(), port: args.port, progress: !args.no_progress };
    let result = runtime()?.block_on(run::run(prepared, &launch, &opts)).map_err(Failure::RunFailed)?;
    let json: &dyn Exporter = &JsonExporter;
    let output = Output {
        save: &args.save,
        exports: args.export_json.as_deref().map(|target| (target, json)).into_iter().collect(),
        summary: true,
    };
    output.deliver(&result, &report::perftest::render(&result, args.report_gbits))?;
    output::verdict(&result)
}

/// The pair's scenario, planned on its two hosts, and how they start.
fn prepare(args: &PairArgs) -> anyhow::Result<(run::Prepared, Launch)> {
    let job = pair_scenario::build(args)?;
    let plan = crate::plan::build(&job.hosts, &job.scenario)
        .map_err(|(field, message)| anyhow::anyhow!("`{}`: {message}", field.key))?;
    // run.json names what made the run: this command line, in place of a scenario file.
    let command: Vec<String> = std::iter::once("fabricbench".to_string()).chain(std::env::args().skip(1)).collect();
    let prepared =
        run::Prepared { scenario_file: command.join(" ").into(), scenario: job.scenario, hosts: job.hosts, plan };
    let flags = LaunchFlags { kind: args.launcher, ssh: &args.ssh, tree_radix: None, srun_args: &[] };
    let launch = launch_for(&flags, &prepared.hosts, Allocation::from_env()?)?;
    Ok((prepared, launch))
}
