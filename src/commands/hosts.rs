//! `fabricbench hosts` (is every host reachable, the same version, its
//! clock and RDMA ports) and `fabricbench probe` (this host's devices).

use crate::cli::{HostsArgs, ProbeArgs};
use crate::commands::launching::ssh_launcher;
use crate::commands::{runtime, Failure};
use crate::launch::Launcher;
use crate::{hostcheck, hostfile, report};

pub fn hosts(args: &HostsArgs) -> Result<(), Failure> {
    let ranks = hostfile::read(&args.hostfile).map_err(Failure::bad_input)?;
    // Each host once, however many ranks it runs.
    let hosts: Vec<_> = ranks.into_iter().filter(|h| h.slot == 0).collect();
    let launcher = ssh_launcher(&args.ssh).map_err(Failure::RunFailed)?;
    let checks = runtime()?.block_on(async {
        let checks = hostcheck::check_all(&launcher, &hosts).await;
        launcher.close().await;
        checks
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checks).map_err(Failure::run_failed)?);
    } else {
        print!("{}", report::render_host_checks(&checks));
    }
    match checks.iter().filter(|c| !c.ok()).count() {
        0 => Ok(()),
        failed => Err(Failure::RunFailed(anyhow::anyhow!("{failed} of {} host(s) failed the checks", checks.len()))),
    }
}

/// What this host is (kernel, OS, CPU, rdma-core, RDMA devices' drivers,
/// firmware, models and port rates); never fails for a missing fact.
pub fn facts(args: &ProbeArgs) -> Result<(), Failure> {
    // A FABRICBENCH_SYSFS_ROOT that names no tree is the user's mistake, not a host without devices.
    crate::sysfs::root().map_err(Failure::bad_input)?;
    let facts = crate::hostfacts::HostFacts::of_this_host();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&facts).map_err(Failure::run_failed)?);
    } else {
        print!("{facts}");
    }
    Ok(())
}

/// This host's RDMA devices, or why there are none.
pub fn probe(args: &ProbeArgs) -> Result<(), Failure> {
    let report = crate::transport::rdma::probe().map_err(Failure::run_failed)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(Failure::run_failed)?);
    } else {
        print!("{report}");
    }
    Ok(())
}
