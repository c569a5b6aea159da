use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, ValueEnum};

use fabricbench::cli::pair::PairArgs;
use fabricbench::cli::{
    Cli, Command, CompareArgs, HostsArgs, Inputs, LauncherKind, ProbeArgs, ReportArgs, RunArgs, SshArgs,
};
use fabricbench::hostcheck;
use fabricbench::hostfile::{self, Host};
use fabricbench::launch::local::LocalLauncher;
use fabricbench::launch::slurm::{Allocation, SlurmLauncher};
use fabricbench::launch::ssh::{SshLauncher, SshOptions};
use fabricbench::launch::stage::LocalBinary;
use fabricbench::launch::{Launch, Launcher};
use fabricbench::report::{self, CsvExporter, Exporter, JsonExporter, JunitExporter, MarkdownExporter};
use fabricbench::result::RunStatus;
use fabricbench::run::{self, AcceptOptions, RunOptions};
use fabricbench::scenario::CheckSpec;

/// Exit codes (documented in `run --help` and the README).
const RUN_FAILED: u8 = 1;
const BAD_INPUT: u8 = 2;
/// A check failed or could not be evaluated; `compare`: a regression.
const CHECK_FAILED: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = if matches!(cli.command, Command::Worker(_)) { "warn" } else { "warn,fabricbench=info" };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        // Workers write to pipes the launcher forwards: colour codes only on a terminal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
    if let Err(e) = fabricbench::fdlimit::raise() {
        tracing::warn!("cannot raise the open-files limit: {e}");
    }
    match cli.command {
        Command::Worker(args) => exit(fabricbench::worker::main(args.rank, args.slurm), RUN_FAILED),
        Command::Plan(inputs) => exit(plan(&inputs), BAD_INPUT),
        Command::Hosts(args) => hosts(&args),
        Command::Run(args) => run(&args),
        Command::Report(args) => report_dir(&args),
        Command::Compare(args) => compare(&args),
        Command::Probe(args) => exit(probe(&args), RUN_FAILED),
        Command::Pair(args) => pair(&args),
    }
}

/// `fabricbench probe`: this host's RDMA devices, or why there are none.
fn probe(args: &ProbeArgs) -> anyhow::Result<()> {
    let report = fabricbench::transport::rdma::probe()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}

fn exit(result: anyhow::Result<()>, code: u8) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(code)
        }
    }
}

/// The hosts of a run: the hostfile's, or else the Slurm allocation's
/// nodes; with where they came from, for messages.
fn hosts_of(
    hostfile: Option<&std::path::Path>,
    allocation: Option<&Allocation>,
) -> anyhow::Result<(Vec<Host>, String)> {
    match (hostfile, allocation) {
        (Some(path), _) => Ok((hostfile::load(path)?, format!("hostfile {}", path.display()))),
        (None, Some(a)) => Ok((a.nodes.clone(), format!("the {} node(s) of Slurm job {}", a.nodes.len(), a.job))),
        (None, None) => {
            anyhow::bail!("no hosts: give a hostfile with -H FILE (inside a Slurm allocation the default is its nodes)")
        }
    }
}

/// Reads the inputs; also returns the Slurm allocation this runs in, if any.
fn prepare(inputs: &Inputs, overrides: &run::Overrides) -> anyhow::Result<(run::Prepared, Option<Allocation>)> {
    let allocation = Allocation::from_env()?;
    let (hosts, origin) = hosts_of(inputs.hostfile.as_deref(), allocation.as_ref())?;
    Ok((run::prepare(&inputs.scenario, hosts, &origin, overrides)?, allocation))
}

fn plan(inputs: &Inputs) -> anyhow::Result<()> {
    let (prepared, _) = prepare(inputs, &run::Overrides::default())?;
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

fn run(args: &RunArgs) -> ExitCode {
    let overrides = run::Overrides { duration: args.duration, warmup: args.warmup };
    let chosen = prepare(&args.inputs, &overrides).and_then(|(prepared, allocation)| {
        let flags = LaunchFlags {
            launcher: args.launcher,
            ssh: &args.ssh,
            tree_radix: args.tree_radix,
            srun_args: &args.srun_args,
        };
        let launch = launch_for(&flags, &prepared.hosts, allocation)?;
        Ok((prepared, launch))
    });
    let (prepared, launch) = match chosen {
        Ok(chosen) => chosen,
        Err(e) => return exit(Err(e), BAD_INPUT),
    };
    let mut checks = prepared.scenario.check.clone();
    for &rule in &args.checks {
        checks.push(rule);
    }
    if args.line_rate.is_some() {
        checks.line_rate = args.line_rate;
    }
    if args.export_junit.is_some() && checks.rules().is_empty() {
        let e = anyhow::anyhow!("--export-junit needs checks: add [check] to the scenario or --check EXPR");
        return exit(Err(e), BAD_INPUT);
    }
    match execute(args, prepared, &launch, checks) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(CHECK_FAILED),
        Err(e) => exit(Err(e), RUN_FAILED),
    }
}

/// The flags that choose how workers start (`run`, `pair`).
struct LaunchFlags<'a> {
    launcher: LauncherKind,
    ssh: &'a SshArgs,
    tree_radix: Option<u16>,
    srun_args: &'a [String],
}

/// Chooses how the workers start (see `--launcher`).
fn launch_for(args: &LaunchFlags, hosts: &[Host], allocation: Option<Allocation>) -> anyhow::Result<Launch> {
    let slurm = |allocation: Allocation| -> anyhow::Result<Launch> {
        allocation.check(hosts)?;
        Ok(Launch::Step(SlurmLauncher::new(this_exe()?, args.srun_args.to_vec(), allocation)))
    };
    if let Some(radix) = args.tree_radix {
        return match args.launcher {
            LauncherKind::Auto | LauncherKind::Ssh => {
                Ok(Launch::Tree { ssh: ssh_launcher(args.ssh)?, radix: usize::from(radix) })
            }
            other => anyhow::bail!(
                "--tree-radix starts workers over ssh; it does not apply to --launcher {}",
                other.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
            ),
        };
    }
    match (args.launcher, allocation) {
        (LauncherKind::Slurm, Some(a)) => slurm(a),
        (LauncherKind::Slurm, None) => anyhow::bail!(
            "--launcher slurm runs inside a Slurm allocation, and SLURM_JOB_ID is not set: e.g. `salloc -N 4 fabricbench run …`, or fabricbench run in an sbatch script"
        ),
        (LauncherKind::Auto, Some(a)) if a.check(hosts).is_ok() => slurm(a),
        (LauncherKind::Auto, _) if hosts.iter().all(is_this_machine) => {
            Ok(Launch::PerHost(Box::new(LocalLauncher::new(this_exe()?))))
        }
        (LauncherKind::Local, _) => Ok(Launch::PerHost(Box::new(LocalLauncher::new(this_exe()?)))),
        (LauncherKind::Auto | LauncherKind::Ssh, _) => Ok(Launch::PerHost(Box::new(ssh_launcher(args.ssh)?))),
    }
}

/// `fabricbench report DIR`: every file but run.json, again, from run.json.
fn report_dir(args: &ReportArgs) -> ExitCode {
    let run = match report::results_dir::load(&args.dir) {
        Ok(r) => r,
        Err(e) => return exit(Err(e.into()), BAD_INPUT),
    };
    let dir = if args.dir.is_dir() { args.dir.clone() } else { args.dir.parent().unwrap_or(&args.dir).to_path_buf() };
    if let Err(e) = report::results_dir::write_into(&run, &dir, false) {
        return exit(Err(e.into()), RUN_FAILED);
    }
    if !args.quiet {
        print!("{}", report::render_terminal(&run));
    }
    eprintln!("report: {}", dir.join("report.html").display());
    ExitCode::SUCCESS
}

fn compare(args: &CompareArgs) -> ExitCode {
    let loaded = report::results_dir::load(&args.base).and_then(|b| Ok((b, report::results_dir::load(&args.new)?)));
    let (base, new) = match loaded {
        Ok(pair) => pair,
        Err(e) => return exit(Err(e.into()), BAD_INPUT),
    };
    for (which, run) in [("baseline", &base), ("new run", &new)] {
        if let RunStatus::Failed { error } = &run.status {
            eprintln!("warning: the {which} failed ({error}); its numbers cover what ran");
        }
    }
    let comparison = report::compare::compare(&base, &new, args.tolerance);
    print!("{}", report::table_text(&comparison.table()));
    let regressions = comparison.regressions();
    if regressions.is_empty() {
        println!("no regressions beyond {}%", args.tolerance);
        return ExitCode::SUCCESS;
    }
    let names: Vec<&str> = regressions.iter().map(|r| r.item.as_str()).collect();
    eprintln!("error: {} regression(s) beyond {}%: {}", regressions.len(), args.tolerance, names.join("; "));
    ExitCode::from(CHECK_FAILED)
}

fn this_exe() -> anyhow::Result<std::path::PathBuf> {
    std::env::current_exe().context("locating this binary")
}

fn ssh_launcher(ssh: &SshArgs) -> anyhow::Result<SshLauncher> {
    let remote_exe = match &ssh.remote_exe {
        Some(path) => path.clone(),
        None => this_exe()?.display().to_string(),
    };
    let stage = match ssh.stage {
        true => Some(LocalBinary::of(&this_exe()?).context("reading this binary to stage it")?),
        false => None,
    };
    Ok(SshLauncher::new(SshOptions {
        config: ssh.ssh_config.clone(),
        connect_timeout: ssh.connect_timeout,
        fanout: ssh.fanout,
        remote_exe,
        stage,
    }))
}

fn hosts(args: &HostsArgs) -> ExitCode {
    let hosts = match hostfile::load(&args.hostfile) {
        Ok(h) => h,
        Err(e) => return exit(Err(e.into()), BAD_INPUT),
    };
    let checked = ssh_launcher(&args.ssh).and_then(|launcher| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        Ok(runtime.block_on(async {
            let checks = hostcheck::check_all(&launcher, &hosts).await;
            launcher.close().await;
            checks
        }))
    });
    let checks = match checked {
        Ok(c) => c,
        Err(e) => return exit(Err(e), RUN_FAILED),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checks).expect("checks serialize"));
    } else {
        print!("{}", report::render_host_checks(&checks));
    }
    let failed = checks.iter().filter(|c| !c.ok()).count();
    if failed > 0 {
        eprintln!("error: {failed} of {} host(s) failed the checks", checks.len());
        return ExitCode::from(RUN_FAILED);
    }
    ExitCode::SUCCESS
}

/// Whether a host's data address belongs to this machine (loopback or one of its interfaces).
fn is_this_machine(host: &Host) -> bool {
    let Ok(ip) = host.data_addr().parse::<std::net::IpAddr>() else { return host.data_addr() == "localhost" };
    ip.is_loopback() || if_addrs::get_if_addrs().is_ok_and(|ifs| ifs.iter().any(|i| i.ip() == ip))
}

/// Runs, saves and reports; `Ok(false)` when the run completed but a check did not pass.
fn execute(args: &RunArgs, prepared: run::Prepared, launch: &Launch, checks: CheckSpec) -> anyhow::Result<bool> {
    let opts = RunOptions {
        scenario: args.inputs.scenario.clone(),
        port: args.port,
        progress: !args.quiet && !args.no_progress,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let accept = AcceptOptions { checks, retest: !args.no_retest };
    let result = runtime.block_on(run::run_and_judge(prepared, launch, &opts, &accept))?;

    let saved = args.save.save(&result)?;
    let exports: [(&Option<std::path::PathBuf>, &dyn Exporter); 4] = [
        (&args.export_json, &JsonExporter),
        (&args.export_csv, &CsvExporter),
        (&args.export_markdown, &MarkdownExporter),
        (&args.export_junit, &JunitExporter),
    ];
    for (target, exporter) in exports {
        if let Some(target) = target {
            report::export_to(exporter, &result, target)?;
        }
    }
    if !args.quiet {
        let summary = report::render_terminal(&result);
        if args.stdout_taken() {
            eprint!("{summary}");
        } else {
            print!("{summary}");
        }
        if let Some(dir) = &saved {
            eprintln!("results: {}", dir.display());
        }
    }
    match result.status {
        RunStatus::Failed { error } => Err(anyhow::anyhow!(error)),
        RunStatus::Ok => match &result.acceptance {
            Some(a) if !a.passed => {
                eprintln!("error: {}", report::verdict_line(a));
                Ok(false)
            }
            _ => Ok(true),
        },
    }
}

/// `fabricbench pair`: the flags become a scenario, which runs like any
/// other (same results folder); then perftest's table.
fn pair(args: &PairArgs) -> ExitCode {
    let (prepared, launch) = match prepare_pair(args) {
        Ok(chosen) => chosen,
        Err(e) => return exit(Err(e), BAD_INPUT),
    };
    let opts = RunOptions { scenario: prepared.scenario_file.clone(), port: args.port, progress: !args.no_progress };
    let ran = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(run::run(prepared, &launch, &opts)));
    let result = match ran {
        Ok(result) => result,
        Err(e) => return exit(Err(e), RUN_FAILED),
    };
    let saved = args.save.save(&result);
    let exported = args.export_json.as_ref().map(|target| report::export_to(&JsonExporter, &result, target));
    let table = report::perftest::render(&result, args.report_gbits);
    match args.export_json.as_deref().is_some_and(|p| p.as_os_str() == "-") {
        true => eprint!("{table}"),
        false => print!("{table}"),
    }
    match (saved, exported) {
        (Err(e), _) | (_, Some(Err(e))) => return exit(Err(e.into()), RUN_FAILED),
        (Ok(Some(dir)), _) => eprintln!("results: {}", dir.display()),
        (Ok(None), _) => {}
    }
    match result.status {
        RunStatus::Ok => ExitCode::SUCCESS,
        RunStatus::Failed { error } => exit(Err(anyhow::anyhow!(error)), RUN_FAILED),
    }
}

/// The pair's scenario, planned on its two hosts, and how they start.
fn prepare_pair(args: &PairArgs) -> anyhow::Result<(run::Prepared, Launch)> {
    let job = fabricbench::pair::build(args)?;
    let plan = fabricbench::plan::build(&job.hosts, &job.scenario)
        .map_err(|(field, message)| anyhow::anyhow!("`{}`: {message}", field.key))?;
    // run.json names what made the run: this command line, in place of a scenario file.
    let command: Vec<String> = std::iter::once("fabricbench".to_string()).chain(std::env::args().skip(1)).collect();
    let prepared =
        run::Prepared { scenario_file: command.join(" ").into(), scenario: job.scenario, hosts: job.hosts, plan };
    let flags = LaunchFlags { launcher: args.launcher, ssh: &args.ssh, tree_radix: None, srun_args: &[] };
    let launch = launch_for(&flags, &prepared.hosts, Allocation::from_env()?)?;
    Ok((prepared, launch))
}
