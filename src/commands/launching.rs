//! Builds the launcher that `launch::choose` picked, from the ssh, srun and
//! mpirun flags.

use anyhow::Context;

use crate::cli::SshArgs;
use crate::commands::Failure;
use crate::hostfile::Host;
use crate::launch::arch::Binaries;
use crate::launch::choose::{self, Choice, LauncherKind};
use crate::launch::local::LocalLauncher;
use crate::launch::mpirun::MpirunLauncher;
use crate::launch::slurm::{Allocation, SlurmLauncher};
use crate::launch::ssh::{SshLauncher, SshOptions};
use crate::launch::Launch;

/// The flags that choose how workers start (`run`, `pair`).
pub struct LaunchFlags<'a> {
    pub kind: LauncherKind,
    pub ssh: &'a SshArgs,
    pub tree_radix: Option<u16>,
    pub srun_args: &'a [String],
    pub mpirun_args: &'a [String],
}

/// How the workers of these hosts start (see `--launcher`).
pub fn launch_for(flags: &LaunchFlags, hosts: &[Host], allocation: Option<Allocation>) -> anyhow::Result<Launch> {
    let radix = flags.tree_radix.map(usize::from);
    Ok(match choose::choose(flags.kind, hosts, allocation, radix, choose::is_this_machine)? {
        Choice::Local => Launch::PerHost(Box::new(LocalLauncher::new(this_exe()?))),
        Choice::Ssh => Launch::PerHost(Box::new(ssh_launcher(flags.ssh)?)),
        Choice::Tree { radix } => Launch::Tree { ssh: ssh_launcher(flags.ssh)?, radix },
        Choice::Slurm(allocation) => {
            Launch::Srun(SlurmLauncher::new(this_exe()?, flags.srun_args.to_vec(), allocation))
        }
        Choice::Mpirun => Launch::Mpirun(MpirunLauncher::new(this_exe()?, flags.mpirun_args.to_vec())?),
    })
}

/// Readies every host before any worker starts (with `--stage`, each host's
/// binary is in place): a host with no binary for its architecture is
/// refused as bad input (exit 2), naming it.
pub fn ready(runtime: &tokio::runtime::Runtime, launch: &Launch, hosts: &[Host]) -> Result<(), Failure> {
    let Err(e) = runtime.block_on(launch.prepare(hosts)) else { return Ok(()) };
    runtime.block_on(launch.close());
    Err(match e.is_refusal() {
        true => Failure::bad_input(e),
        false => Failure::run_failed(e),
    })
}

pub fn ssh_launcher(ssh: &SshArgs) -> anyhow::Result<SshLauncher> {
    let remote_exe = match &ssh.remote_exe {
        Some(path) => path.clone(),
        None => this_exe()?.display().to_string(),
    };
    let stage = match (ssh.stage, &ssh.dist) {
        (false, _) => None,
        (true, Some(dir)) => Some(Binaries::from_dist(dir)?),
        (true, None) => Some(Binaries::beside(&this_exe()?).context("reading the binaries to stage")?),
    };
    Ok(SshLauncher::new(SshOptions {
        config: ssh.ssh_config.clone(),
        connect_timeout: ssh.connect_timeout,
        fanout: ssh.fanout,
        remote_exe,
        stage,
    }))
}

pub fn this_exe() -> anyhow::Result<std::path::PathBuf> {
    std::env::current_exe().context("locating this binary")
}
