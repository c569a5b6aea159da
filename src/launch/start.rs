//! Starting a run's workers with each launcher: which processes start, in
//! what order, and which line each is handed first on its stdin. What the
//! lines say is the run's protocol: `run` writes them, this only hands them
//! over. Each returns rank 0's stdout; `run` then waits until rank 0
//! listens and tells the others where.

use crate::hostfile::Host;

use super::local::LocalLauncher;
use super::mpirun::MpirunLauncher;
use super::slurm::{SlurmLauncher, SrunStep};
use super::ssh::SshOptions;
use super::tree::{self, Subtree};
use super::workers::Workers;
use super::{BoxRead, LaunchError, Launcher};

/// Why the workers of a run did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// The job spec did not reach `to`'s stdin.
    #[error("sending {to} its job spec")]
    Send { to: String, source: std::io::Error },
}

/// The first line of the worker at the root of `subtree`; with `Some`
/// SSH options, that worker starts the ranks below it over SSH.
pub type MemberLine<'a> = dyn Fn(&Subtree, Option<&SshOptions>) -> Result<String, serde_json::Error> + 'a;

/// A tree launch: how many workers each worker starts, and the SSH options
/// it starts them with.
#[derive(Clone, Copy)]
pub struct TreeLaunch<'a> {
    pub radix: usize,
    pub ssh: &'a SshOptions,
}

/// One process per host, all started at once: rank 0 gets `rank0_line`, the
/// others theirs without rank 0's address, which follows on their stdin
/// once rank 0 listens, so a launch costs one remote start, not two in a
/// row. In a tree launch (`tree`) the launcher starts only the roots of the
/// subtrees below rank 0.
pub async fn per_host(
    launcher: &dyn Launcher,
    hosts: &[Host],
    tree: Option<TreeLaunch<'_>>,
    workers: &mut Workers,
    rank0_line: &str,
    member_line: &MemberLine<'_>,
) -> Result<BoxRead, StartError> {
    let direct = match tree {
        Some(TreeLaunch { radix, .. }) => tree::split(1, &hosts[1..], radix),
        None => {
            let leaf = |(rank, host): (usize, &Host)| Subtree { rank, host: host.clone(), below: Vec::new() };
            hosts.iter().enumerate().skip(1).map(leaf).collect()
        }
    };
    let host0 = &hosts[0];
    // Every start opens its host's connection (at most --fanout at once).
    let (started0, others) = tokio::join!(
        launcher.start(0, host0),
        futures::future::join_all(direct.iter().map(|s| launcher.start(s.rank, &s.host)))
    );
    let stdout0 = workers
        .adopt(0, &host0.name, started0?, rank0_line)
        .await
        .map_err(|source| StartError::Send { to: "rank 0".into(), source })?;
    for (subtree, started) in direct.iter().zip(others) {
        let (rank, host) = (subtree.rank, &subtree.host);
        let line = member_line(subtree, tree.map(|t| t.ssh))?;
        workers
            .adopt(rank, &host.name, started?, &line)
            .await
            .map_err(|source| StartError::Send { to: format!("rank {rank} ({})", host.name), source })?;
    }
    Ok(stdout0)
}

/// Rank 0 only, on this machine: mpirun started the others, which join it
/// on the port they all know.
pub async fn alone(
    local: &LocalLauncher,
    host0: &Host,
    workers: &mut Workers,
    rank0_line: &str,
) -> Result<BoxRead, StartError> {
    let started = local.start(0, host0).await?;
    workers
        .adopt(0, &host0.name, started, rank0_line)
        .await
        .map_err(|source| StartError::Send { to: "rank 0".into(), source })
}

/// One mpirun job for every rank: rank 0 reads `line` on mpirun's stdin
/// (the only rank that has it); every rank reads the environment variable
/// `var`, set to `value` (the job's identity, the hosts and rank 0's port).
pub async fn mpirun(
    mpirun: &MpirunLauncher,
    hosts: &[Host],
    workers: &mut Workers,
    var: &str,
    value: &str,
    line: &str,
) -> Result<BoxRead, StartError> {
    let step = mpirun.start_step(hosts, var, value)?;
    adopt_step(workers, hosts, step, line, "mpirun's rank 0").await
}

/// One srun step for every rank: each task reads the same broadcast `line`;
/// rank 0's address follows on the same stdin once it listens, so the
/// others join without a second launch.
pub async fn srun(
    slurm: &SlurmLauncher,
    hosts: &[Host],
    workers: &mut Workers,
    line: &str,
) -> Result<BoxRead, StartError> {
    let step = slurm.start_step(hosts)?;
    adopt_step(workers, hosts, step, line, "the srun step").await
}

/// Hands `step` (one rank per host of `hosts`) to `workers`, `line` on the
/// stdin of `to`; returns rank 0's stdout.
async fn adopt_step(
    workers: &mut Workers,
    hosts: &[Host],
    step: SrunStep,
    line: &str,
    to: &str,
) -> Result<BoxRead, StartError> {
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    workers.adopt_step(&names, step, line).await.map_err(|source| StartError::Send { to: to.into(), source })
}
