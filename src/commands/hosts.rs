//! `fabricbench hosts` (is every host reachable, the same version, its
//! clock and RDMA ports) and `fabricbench probe` (this host's devices).

use crate::cli::{HostsArgs, ProbeArgs};
use crate::commands::launching::{ssh_launcher, this_exe};
use crate::commands::{runtime, Failure};
use crate::hostcheck::Reach;
use crate::launch::choose::{self, Choice, LauncherKind};
use crate::launch::Launcher;
use crate::report::terminal::{self, stdout};
use crate::{hostcheck, hostfile};

pub fn hosts(args: &HostsArgs) -> Result<(), Failure> {
    let ranks = hostfile::read(&args.hostfile).map_err(Failure::bad_input)?;
    // Each host once, however many ranks it runs.
    let hosts: Vec<_> = ranks.into_iter().filter(|h| h.slot == 0).collect();
    // Reached as `run` would start them: local ranks here, the rest over
    // ssh (a Slurm allocation's nodes too: srun runs no checks).
    let local =
        matches!(choose::choose(LauncherKind::Auto, &hosts, None, None, choose::is_this_machine), Ok(Choice::Local));
    let checks = match local {
        true => {
            let reach = Reach::Here { exe: this_exe().map_err(Failure::RunFailed)? };
            runtime()?.block_on(hostcheck::check_all(&reach, &hosts))
        }
        false => {
            let launcher = ssh_launcher(&args.ssh).map_err(Failure::RunFailed)?;
            runtime()?.block_on(async {
                let checks = hostcheck::check_all(&Reach::Ssh(&launcher), &hosts).await;
                launcher.close().await;
                checks
            })
        }
    };
    if args.json {
        json(&checks)?;
    } else {
        stdout::print(terminal::render_host_checks(&checks))?;
    }
    match checks.iter().filter(|c| !c.ok()).count() {
        0 => Ok(()),
        failed => Err(Failure::CheckFailed(format!("{failed} of {} host(s) failed the checks", checks.len()))),
    }
}

/// What this host is (kernel, OS, CPU, rdma-core, RDMA devices' drivers,
/// firmware, models and port rates); never fails for a missing fact.
pub fn facts(args: &ProbeArgs) -> Result<(), Failure> {
    // A FABRICBENCH_SYSFS_ROOT that names no tree is the user's mistake, not a host without devices.
    crate::sysfs::root().map_err(Failure::bad_input)?;
    let facts = crate::hostfacts::HostFacts::of_this_host();
    if args.json {
        json(&facts)?;
    } else {
        stdout::print(facts)?;
    }
    Ok(())
}

/// This host's RDMA devices, or why there are none.
pub fn probe(args: &ProbeArgs) -> Result<(), Failure> {
    let report = crate::transport::rdma::probe().map_err(Failure::run_failed)?;
    if args.json {
        json(&report)?;
    } else {
        stdout::print(report)?;
    }
    Ok(())
}

/// `--json`: the value, pretty, on a line of its own.
fn json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).map_err(Failure::run_failed)?;
    Ok(stdout::print(format_args!("{text}\n"))?)
}
