//! `fabricbench hosts` (is every host reachable, the same version, its
//! clock and RDMA ports) and `fabricbench probe` (this host's devices).

use crate::cli::{HostsArgs, ProbeArgs};
use crate::commands::launching::{ssh_launcher, this_exe};
use crate::commands::run::hosts_of;
use crate::commands::{runtime, Failure};
use crate::hostcheck;
use crate::hostcheck::Reach;
use crate::launch::choose::{self, Choice};
use crate::launch::slurm::Allocation;
use crate::launch::Launcher;
use crate::report::terminal::{self, stdout};

pub fn hosts(args: &HostsArgs) -> Result<(), Failure> {
    let allocation = Allocation::from_env().map_err(Failure::bad_input)?;
    let (ranks, _) = hosts_of(args.hostfile.as_deref(), allocation.as_ref()).map_err(Failure::bad_input)?;
    // Each host once, however many ranks it runs.
    let hosts: Vec<_> = ranks.into_iter().filter(|h| h.slot == 0).collect();
    // Reached as `run` would start them: here, through srun, or over ssh.
    let choice = choose::choose(args.launcher, &hosts, allocation, None, choose::is_this_machine);
    let exe = || this_exe().map_err(Failure::RunFailed);
    let checks = match choice.map_err(Failure::bad_input)? {
        Choice::Local => runtime()?.block_on(hostcheck::check_all(&Reach::Here { exe: exe()? }, &hosts)),
        Choice::Slurm(_) => runtime()?.block_on(hostcheck::check_all(&Reach::Srun { exe: exe()? }, &hosts)),
        Choice::Mpirun => return Err(Failure::bad_input(anyhow::anyhow!(MPIRUN))),
        Choice::Ssh | Choice::Tree { .. } => {
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

/// Why `hosts --launcher mpirun` is refused.
const MPIRUN: &str = "`hosts --launcher mpirun`: mpirun starts one job, not a command on each host; check the \
                      hosts over ssh (--launcher ssh) or, inside a Slurm allocation, through srun (--launcher slurm)";

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
