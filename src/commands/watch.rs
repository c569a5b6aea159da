//! `fabricbench watch`: the flags become the probe mesh's scenario
//! (`watch.toml` in the watch's folder, where its logs go too), planned on
//! the hosts as `run` plans, held to the probe budget, then watched until
//! stopped.

use std::path::Path;

use crate::cli::watch::WatchArgs;
use crate::cli::Inputs;
use crate::commands::launching::{launch_for, ready, LaunchFlags};
use crate::commands::output::{self, Scraped};
use crate::commands::{runtime, Failure};
use crate::report::store::results_dir::new_folder;
use crate::run::signals::Signals;
use crate::run::{self, RunOptions};
use crate::scenario::Transport;
use crate::watch::{self, Ended, Files, Log, WatchOptions, WINDOWS_PER_LAUNCH};

pub fn watch(args: &WatchArgs) -> Result<(), Failure> {
    let folder = new_folder(&args.results, "watch").map_err(Failure::bad_input)?;
    let scenario = folder.join("watch.toml");
    let write = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes).map_err(|e| Failure::BadInput(anyhow::anyhow!("{}: {e}", path.display())))
    };
    write(&scenario, scenario_text(args).as_bytes())?;
    write(&folder.join("command.txt"), &output::command_line())?;
    let inputs = Inputs { scenario: scenario.clone(), hostfile: args.hostfile.clone() };
    let overrides =
        run::Overrides { topology: args.topology.table(), lldp: args.topology.gathers_lldp(), ..Default::default() };
    let (prepared, allocation, _) = super::run::prepare(&inputs, &overrides).map_err(Failure::BadInput)?;
    // Planned now, or (a topology to gather first) once the hosts reported.
    let gathers = prepared.gather.is_some();
    if !gathers {
        within_budget(&prepared, args)?;
    }
    let flags = LaunchFlags { kind: args.launcher, ssh: &args.ssh, tree_radix: None, srun_args: &[], mpirun_args: &[] };
    let launch = launch_for(&flags, &prepared.hosts, allocation).map_err(Failure::BadInput)?;
    let runtime = runtime()?;
    ready(&runtime, &launch, &prepared.hosts)?;
    let scraped = args.metrics.map(|addr| Scraped::serve(addr, "watch", &scenario)).transpose()?;
    let cap = args.log_max.bytes();
    let files = Files {
        events: Log::open(&folder.join("events.jsonl"), cap, true).map_err(Failure::bad_input)?,
        windows: Log::open(&folder.join("windows.jsonl"), cap, false).map_err(Failure::bad_input)?,
    };
    if !args.quiet {
        crate::diag!("fabricbench: watch files in {}", folder.display());
        if let Some(scraped) = &scraped {
            crate::diag!("fabricbench: serving OpenMetrics at {}", scraped.url());
        }
    }
    runtime.block_on(async {
        let signals = Signals::listen().map_err(Failure::run_failed)?;
        let opts =
            RunOptions { scenario: scenario.clone(), port: args.port, progress: false, signals: signals.clone() };
        let prepared = run::gather(prepared, &launch, &opts).await.map_err(|e| match (signals.first(), e) {
            (Some(stop), _) => Failure::Stopped(stop),
            (None, e @ run::GatherError::Topology(_)) => Failure::BadInput(e.into()),
            (None, e @ run::GatherError::Launch(_)) => Failure::RunFailed(e.into()),
        })?;
        if gathers {
            within_budget(&prepared, args)?;
        }
        let options =
            WatchOptions { windows: args.windows, checks: prepared.scenario.check.clone(), progress: !args.quiet };
        let live = scraped.as_ref().map(|s| s.live.clone());
        let ended = watch::watch(prepared, &launch, &opts, &options, files, live).await.map_err(Failure::run_failed)?;
        if !args.quiet {
            let (windows, how) = match ended {
                Ended::Windows(n) => (n, String::new()),
                Ended::Stopped { stop, windows } => (windows, format!(", stopped by {stop}")),
            };
            crate::diag!("fabricbench: watched {windows} window(s){how}; files in {}", folder.display());
        }
        Ok(())
    })
}

/// The mesh as a scenario: one open-loop latency group, a phase a window,
/// and the limits as its checks.
fn scenario_text(args: &WatchArgs) -> String {
    let windows = args.windows.map_or(WINDOWS_PER_LAUNCH, |n| n.min(u64::from(WINDOWS_PER_LAUNCH)) as u32);
    let (transport, op) = match args.transport {
        Transport::Tcp => ("tcp", ""),
        Transport::Rdma => ("rdma", "op = \"send\"\n"),
    };
    format!(
        "# The probe mesh of `fabricbench watch`, written by it: a phase a window, each path\n\
         # probed on a fixed schedule. `fabricbench plan watch.toml -H HOSTFILE` prints the paths.\n\
         [run]\nname = \"watch\"\nduration = \"{window}\"\nwarmup = \"0s\"\nrepeat = {windows}\n\n\
         [check]\np99 = \"{p99}\"\nloss = \"{loss}\"\n\n\
         [[group]]\nname = \"probes\"\npattern = \"mesh\"\nmode = \"latency\"\ntransport = \"{transport}\"\n{op}\
         message_size = {size}\nrate = \"{rate} msg/s\"\n",
        window = humantime::format_duration(args.window),
        p99 = args.p99,
        loss = args.loss,
        size = args.size.bytes(),
        rate = args.rate,
    )
}

/// Refuses a mesh in which some host would send more than `--max-probes`
/// probes a second, naming it.
fn within_budget(prepared: &run::Prepared, args: &WatchArgs) -> Result<(), Failure> {
    let Some((host, probes)) = watch::busiest_host(&prepared.plan, args.rate) else { return Ok(()) };
    if probes <= args.max_probes {
        return Ok(());
    }
    Err(Failure::BadInput(anyhow::anyhow!(
        "the mesh has host {host} send {probes} probes a second (its paths' and its echoes at --rate {}), over \
         --max-probes {}: lower --rate, give a --topology (only pairs under one leaf, and across the spine, are \
         probed), or raise --max-probes",
        args.rate,
        args.max_probes
    )))
}
