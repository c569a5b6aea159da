//! A worker process this machine started itself (a local worker, the srun
//! step, the mpirun job), watched until it exits or the launcher ends it.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::process::Stdio;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;

use crate::launch::Process;

/// How the launcher ends the process when it must.
#[derive(Clone, Copy, Debug)]
pub enum Ending {
    /// SIGKILL at once (a local worker: its stdin has closed already).
    Kill,
    /// SIGTERM, then SIGKILL if it has not exited within the grace (srun
    /// passes SIGTERM on to every task and ends the step; SIGKILL would
    /// leave the tasks to Slurm's own cleanup).
    Terminate { grace: Duration },
}

pub struct ChildProcess {
    child: Child,
    ending: Ending,
    /// Put before the exit status in messages ("srun ended").
    what: &'static str,
}

/// A step tool's process (srun, mpirun) and its three pipes.
pub struct Piped {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Starts `cmd` with its three pipes, off the terminal's process group
/// (Ctrl-C reaches the launcher, which ends the step in order, not `tool`
/// behind its back), killed if dropped. The error names `tool`.
pub fn spawn_piped(cmd: &mut Command, tool: &str) -> Result<Piped, SpawnError> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|cause| SpawnError::Run { tool: tool.to_string(), cause })?;
    match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
        (Some(stdin), Some(stdout), Some(stderr)) => Ok(Piped { child, stdin, stdout, stderr }),
        _ => Err(SpawnError::NoPipes { tool: tool.to_string() }),
    }
}

/// Why a launcher's tool (srun, mpirun) did not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    // `cause`, not `source`: the message carries it, and a chained source
    // would print it twice.
    #[error("cannot run {tool}: {cause}")]
    Run { tool: String, cause: std::io::Error },
    #[error("no pipes to {tool}")]
    NoPipes { tool: String },
}

impl ChildProcess {
    pub fn new(child: Child, ending: Ending, what: &'static str) -> ChildProcess {
        ChildProcess { child, ending, what }
    }
}

impl Process for ChildProcess {
    fn watch(self: Box<Self>, stop: oneshot::Receiver<()>) -> BoxFuture<'static, String> {
        let ChildProcess { mut child, ending, what } = *self;
        async move {
            let status = tokio::select! {
                status = child.wait() => status,
                _ = stop => end(&mut child, ending).await,
            };
            let status = match status {
                Ok(status) => status.to_string(),
                Err(e) => format!("unknown exit ({e})"),
            };
            match what {
                "" => status,
                what => format!("{what}: {status}"),
            }
        }
        .boxed()
    }
}

async fn end(child: &mut Child, ending: Ending) -> std::io::Result<std::process::ExitStatus> {
    if let Ending::Terminate { grace } = ending {
        // Our own child, not yet reaped: the pid is still its.
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
            return status;
        }
    }
    let _ = child.start_kill();
    child.wait().await
}
