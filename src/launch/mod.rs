//! Starting and stopping worker processes. A launcher knows how to run
//! `fabricbench worker` on a host with a given stdin, and nothing of the
//! protocol spoken over it.

pub(crate) mod arch;
mod child;
pub(crate) mod choose;
pub(crate) mod local;
pub(crate) mod mpirun;
mod node_file;
pub mod slurm;
pub(crate) mod ssh;
pub(crate) mod stage;
pub(crate) mod start;
pub(crate) mod tree;
pub(crate) mod workers;

use std::pin::Pin;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;

use crate::hostfile::Host;

pub type BoxWrite = Pin<Box<dyn AsyncWrite + Send>>;
pub type BoxRead = Pin<Box<dyn AsyncRead + Send>>;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot start the worker for rank {rank} on {host}: {reason}")]
    Start { rank: usize, host: String, reason: String },
    #[error("cannot reach {host}: {reason}")]
    Unreachable { host: String, reason: ssh::Unconnected },
    // `reason`, not `source`: as in arch and child, the message carries it,
    // and a chained source would print it twice.
    #[error("cannot stage fabricbench on {host}: {reason}")]
    Stage { host: String, reason: stage::StageError },
}

impl LaunchError {
    /// A host the hostfile names cannot run any binary there is: the
    /// input's mistake, found before any worker starts.
    pub fn is_refusal(&self) -> bool {
        matches!(self, LaunchError::Stage { reason: stage::StageError::Dist(arch::DistError::NoBinary { .. }), .. })
    }
}

/// A running worker: its pipes and a handle to wait for or kill it.
pub struct Started {
    pub stdin: BoxWrite,
    pub stdout: BoxRead,
    pub stderr: BoxRead,
    pub process: Box<dyn Process>,
}

/// The worker's process, wherever it runs.
pub trait Process: Send {
    /// Resolves when the process has exited, describing how. When `kill`
    /// fires first, the process is ended at once (the last resort after
    /// closing its stdin) and the future resolves when it is gone.
    fn watch(self: Box<Self>, kill: oneshot::Receiver<()>) -> BoxFuture<'static, String>;
}

/// Starts one worker per rank (per entry of the hostfile's rank list).
pub trait Launcher: Send + Sync {
    fn start(&self, rank: usize, host: &Host) -> BoxFuture<'_, Result<Started, LaunchError>>;

    /// What must hold on every host before the first worker starts (with
    /// `--stage`: each host's binary is in place).
    fn prepare<'a>(&'a self, _hosts: &'a [Host]) -> BoxFuture<'a, Result<(), LaunchError>> {
        Box::pin(async { Ok(()) })
    }

    /// Releases what the launcher holds once every worker is gone.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// How the workers of a run start: one process per host (rank 0 first, the
/// others once it listens), the same as a tree (the launcher starts `radix`
/// workers over SSH and they start the rest), all at once as one srun
/// step whose stdin every task shares, or as one mpirun job.
pub enum Launch {
    PerHost(Box<dyn Launcher>),
    Tree {
        ssh: ssh::SshLauncher,
        radix: usize,
    },
    Srun(slurm::SlurmLauncher),
    /// All at once as one mpirun job; only rank 0 reads its stdin.
    Mpirun(mpirun::MpirunLauncher),
    /// Rank 0 alone, as a local process: mpirun started this launcher as
    /// rank 0 of its job (`mpirun … fabricbench run`), and the other ranks
    /// join rank 0 by themselves with the `job` and `token` all derive alike.
    Joined {
        local: local::LocalLauncher,
        job: u64,
        token: String,
    },
}

impl Launch {
    /// Readies every host before any worker starts (see `Launcher::prepare`).
    pub async fn prepare(&self, hosts: &[Host]) -> Result<(), LaunchError> {
        match self {
            Launch::PerHost(launcher) => launcher.prepare(hosts).await,
            _ => Ok(()),
        }
    }

    /// Releases what the launcher holds once every worker is gone.
    pub async fn close(&self) {
        match self {
            Launch::PerHost(launcher) => launcher.close().await,
            Launch::Tree { ssh, .. } => ssh.close().await,
            Launch::Srun(slurm) => slurm.close(),
            Launch::Mpirun(mpirun) => mpirun.close(),
            Launch::Joined { local, .. } => local.close().await,
        }
    }
}
