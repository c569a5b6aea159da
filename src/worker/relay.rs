//! A worker in a tree launch (`--tree-radix`) also starts the workers of
//! its subtree over SSH, as the launcher would: it hands each its job spec
//! on stdin, forwards their stderr (prefixed with their rank and host) to
//! its own, and closes their stdin when its own closes, so stopping the
//! launcher still stops everyone, level by level.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::launch::ssh::{SshLauncher, SshOptions};
use crate::launch::tree::Subtree;
use crate::launch::workers::Workers;
use crate::launch::{LaunchError, Launcher};
use crate::worker::agent::Identity;
use crate::worker::{JobSpec, Role};

/// How long the subtree gets to exit after this worker's stdin closed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What a worker of a tree launch starts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Relay {
    pub ssh: SshOptions,
    pub below: Vec<Subtree>,
}

/// The spec of a worker that joins `coordinator` (None: its address
/// follows on stdin) and starts `subtree.below` over SSH with `ssh`.
pub fn member_spec(
    job: u64,
    token: &str,
    coordinator: Option<SocketAddr>,
    subtree: &Subtree,
    ssh: Option<&SshOptions>,
) -> JobSpec {
    JobSpec {
        job,
        token: token.to_string(),
        rank: subtree.rank,
        host: subtree.host.name.clone(),
        bind: subtree.host.host_addr().to_string(),
        data_addr: subtree.host.nic_addr().map(str::to_string),
        role: Role::Member { coordinator },
        relay: ssh
            .filter(|_| !subtree.below.is_empty())
            .map(|ssh| Relay { ssh: ssh.clone(), below: subtree.below.clone() }),
        devices: subtree.host.devices.clone(),
    }
}

/// Starts the subtree and holds it until `shutdown` (this worker's stdin
/// closed). A worker that cannot be started ends this one too, naming it:
/// the launcher then reports this rank's exit with that message.
pub async fn run(
    me: &Identity,
    relay: Relay,
    coordinator: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LaunchError> {
    let launcher = SshLauncher::new(relay.ssh.clone());
    // stderr is a closed pipe once ssh is gone.
    let mut workers = Workers::new(Arc::new(|line| crate::diag!("{line}")));
    let starts = relay.below.iter().map(|child| launcher.start(child.rank, &child.host));
    let mut failed = None;
    for (child, started) in relay.below.iter().zip(futures::future::join_all(starts).await) {
        let spec = member_spec(me.job, &me.token, Some(coordinator), child, Some(&relay.ssh));
        let line = serde_json::to_string(&spec).expect("job specs serialize");
        let adopted = match started {
            Ok(started) => {
                workers.adopt(child.rank, &child.host.name, started, &line).await.map_err(|e| LaunchError::Start {
                    rank: child.rank,
                    host: child.host.name.clone(),
                    reason: format!("cannot send its job spec: {e}"),
                })
            }
            Err(e) => Err(e),
        };
        if let Err(e) = adopted {
            failed.get_or_insert(e);
        }
    }
    // A child that dies is the coordinator's to report (it names the rank);
    // its last words came through on stderr.
    if failed.is_none() {
        let _ = shutdown.changed().await;
    }
    workers.shut_down(SHUTDOWN_GRACE).await;
    launcher.close().await;
    failed.map_or(Ok(()), Err)
}
