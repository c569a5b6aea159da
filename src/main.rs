use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, ValueEnum};

use fabricbench::cli::{Cli, Command, HostsArgs, Inputs, LauncherKind, RunArgs, SshArgs};
use fabricbench::hostcheck;
use fabricbench::hostfile::{self, Host};
use fabricbench::launch::local::LocalLauncher;
use fabricbench::launch::slurm::{Allocation, SlurmLauncher};
use fabricbench::launch::ssh::{SshLauncher, SshOptions};
use fabricbench::launch::stage::LocalBinary;
use fabricbench::launch::{Launch, Launcher};
use fabricbench::report::{self, CsvExporter, Exporter, JsonExporter, MarkdownExporter};
use fabricbench::result::RunStatus;
use fabricbench::run::{self, RunOptions};

/// Exit code of a run that started but failed (input errors exit with 2).
const RUN_FAILED: u8 = 1;
const BAD_INPUT: u8 = 2;

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
    }
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

fn prepare(inputs: &Inputs) -> anyhow::Result<(run::Prepared, Option<Allocation>)> {
    let allocation = Allocation::from_env()?;
    let (hosts, origin) = hosts_of(inputs.hostfile.as_deref(), allocation.as_ref())?;
    Ok((run::prepare(&inputs.scenario, hosts, &origin)?, allocation))
}

fn plan(inputs: &Inputs) -> anyhow::Result<()> {
    let (prepared, _) = prepare(inputs)?;
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
    let chosen = prepare(&args.inputs).and_then(|(mut prepared, allocation)| {
        let launch = launch_for(args, &mut prepared, allocation)?;
        Ok((prepared, launch))
    });
    match chosen {
        Ok((prepared, launch)) => exit(execute(args, prepared, &launch), RUN_FAILED),
        Err(e) => exit(Err(e), BAD_INPUT),
    }
}

/// Chooses how the workers start (see `--launcher`).
fn launch_for(args: &RunArgs, prepared: &mut run::Prepared, allocation: Option<Allocation>) -> anyhow::Result<Launch> {
    let slurm = |allocation: &Allocation, prepared: &mut run::Prepared| -> anyhow::Result<Launch> {
        allocation.check(&prepared.hosts)?;
        prepared.hosts_are_allocation = allocation.is_all(&prepared.hosts);
        Ok(Launch::Step(SlurmLauncher::new(this_exe()?, args.srun_args.clone())))
    };
    if let Some(radix) = args.tree_radix {
        return match args.launcher {
            LauncherKind::Auto | LauncherKind::Ssh => {
                Ok(Launch::Tree { ssh: ssh_launcher(&args.ssh)?, radix: usize::from(radix) })
            }
            other => anyhow::bail!(
                "--tree-radix starts workers over ssh; it does not apply to --launcher {}",
                other.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
            ),
        };
    }
    match (args.launcher, allocation) {
        (LauncherKind::Slurm, Some(a)) => slurm(&a, prepared),
        (LauncherKind::Slurm, None) => anyhow::bail!(
            "--launcher slurm runs inside a Slurm allocation, and SLURM_JOB_ID is not set: e.g. `salloc -N 4 fabricbench run …`, or fabricbench run in an sbatch script"
        ),
        (LauncherKind::Auto, Some(a)) if a.check(&prepared.hosts).is_ok() => slurm(&a, prepared),
        (LauncherKind::Auto, _) if prepared.hosts.iter().all(is_this_machine) => {
            Ok(Launch::PerHost(Box::new(LocalLauncher::new(this_exe()?))))
        }
        (LauncherKind::Local, _) => Ok(Launch::PerHost(Box::new(LocalLauncher::new(this_exe()?)))),
        (LauncherKind::Auto | LauncherKind::Ssh, _) => Ok(Launch::PerHost(Box::new(ssh_launcher(&args.ssh)?))),
    }
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

fn execute(args: &RunArgs, prepared: run::Prepared, launch: &Launch) -> anyhow::Result<()> {
    let opts = RunOptions {
        scenario: args.inputs.scenario.clone(),
        port: args.port,
        progress: !args.quiet && !args.no_progress,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let result = runtime.block_on(run::run(prepared, launch, &opts))?;

    let saved = if args.no_save { None } else { Some(report::results_dir::write(&result, &args.results)?) };
    let exports: [(&Option<std::path::PathBuf>, &dyn Exporter); 3] = [
        (&args.export_json, &JsonExporter),
        (&args.export_csv, &CsvExporter),
        (&args.export_markdown, &MarkdownExporter),
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
        RunStatus::Ok => Ok(()),
        RunStatus::Failed { error } => Err(anyhow::anyhow!(error)),
    }
}
