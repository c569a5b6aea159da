//! Workers as local processes: one per rank (a line's every slot), each
//! binding its data plane to its line's address (127.0.0.x; ranks of one
//! line share it, each on ports of its own), all on this machine.

use std::process::Stdio;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::process::Command;

use crate::hostfile::Host;
use crate::launch::child::{ChildProcess, Ending};
use crate::launch::{LaunchError, Launcher, Started};

pub struct LocalLauncher {
    exe: std::path::PathBuf,
}

impl LocalLauncher {
    /// Launches `exe` (normally this very binary) as the workers.
    pub fn new(exe: std::path::PathBuf) -> LocalLauncher {
        LocalLauncher { exe }
    }
}

impl Launcher for LocalLauncher {
    fn start(&self, rank: usize, host: &Host) -> BoxFuture<'_, Result<Started, LaunchError>> {
        let host = host.name.clone();
        async move {
            let mut child = Command::new(&self.exe)
                .args(["worker", "--rank", &rank.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| LaunchError::Start { rank, host: host.clone(), reason: e.to_string() })?;
            let (Some(stdin), Some(stdout), Some(stderr)) =
                (child.stdin.take(), child.stdout.take(), child.stderr.take())
            else {
                return Err(LaunchError::Start { rank, host, reason: "no pipes to the worker".to_string() });
            };
            Ok(Started {
                stdin: Box::pin(stdin),
                stdout: Box::pin(stdout),
                stderr: Box::pin(stderr),
                process: Box::new(ChildProcess::new(child, Ending::Kill, "")),
            })
        }
        .boxed()
    }
}
