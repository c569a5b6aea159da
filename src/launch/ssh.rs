//! Workers over SSH with the system OpenSSH client (through the `openssh`
//! crate's multiplexed master), so ~/.ssh/config with Include, Match,
//! ProxyJump, certificates and the agent works as it does for `ssh`.
//! One master connection per host; a bounded number are opened at once.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use openssh::{KnownHosts, Session, SessionBuilder, Stdio};
use tokio::sync::{oneshot, Mutex, Semaphore};

use crate::hostfile::Host;
use crate::launch::{LaunchError, Launcher, Process, Started};

#[derive(Clone, Debug)]
pub struct SshOptions {
    /// An ssh_config to use instead of ~/.ssh/config (`ssh -F`).
    pub config: Option<PathBuf>,
    pub connect_timeout: Duration,
    /// How many hosts are connected to at once.
    pub fanout: usize,
    /// The fabricbench binary on the remote hosts.
    pub remote_exe: String,
}

pub struct SshLauncher {
    opts: SshOptions,
    connecting: Semaphore,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

impl SshLauncher {
    pub fn new(opts: SshOptions) -> SshLauncher {
        let connecting = Semaphore::new(opts.fanout.max(1));
        SshLauncher { opts, connecting, sessions: Mutex::new(HashMap::new()) }
    }

    /// The master connection to `host`, opened on first use.
    pub async fn session(&self, host: &str) -> Result<Arc<Session>, String> {
        if let Some(s) = self.sessions.lock().await.get(host) {
            return Ok(s.clone());
        }
        let _permit = self.connecting.acquire().await.map_err(|e| e.to_string())?;
        let mut builder = SessionBuilder::default();
        builder
            .connect_timeout(self.opts.connect_timeout)
            .server_alive_interval(Duration::from_secs(2))
            .known_hosts_check(KnownHosts::Add);
        if let Some(config) = &self.opts.config {
            builder.config_file(config);
        }
        let connect = builder.connect_mux(host);
        // ssh enforces ConnectTimeout on the TCP connect; bound the whole handshake too.
        let limit = self.opts.connect_timeout + Duration::from_secs(5);
        let session = match tokio::time::timeout(limit, connect).await {
            Ok(Ok(session)) => Arc::new(session),
            Ok(Err(e)) => return Err(describe(&e)),
            Err(_) => return Err(format!("ssh did not connect within {limit:?}")),
        };
        self.sessions.lock().await.insert(host.to_string(), session.clone());
        Ok(session)
    }

    /// Closes every master connection (their remote sessions end with them).
    async fn close_all(&self) {
        let sessions: Vec<Arc<Session>> = self.sessions.lock().await.drain().map(|(_, s)| s).collect();
        for session in sessions {
            if let Ok(session) = Arc::try_unwrap(session) {
                let _ = tokio::time::timeout(Duration::from_secs(5), session.close()).await;
            }
        }
    }

    pub fn remote_exe(&self) -> &str {
        &self.opts.remote_exe
    }
}

/// openssh's error with its cause chain (the ssh client's own message).
fn describe(e: &openssh::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text += &format!(": {cause}");
        source = cause.source();
    }
    text
}

impl Launcher for SshLauncher {
    fn start(&self, rank: usize, host: &Host) -> BoxFuture<'_, Result<Started, LaunchError>> {
        let name = host.name.clone();
        async move {
            let fail = |reason: String| LaunchError::Start { rank, host: name.clone(), reason };
            let session = self.session(&name).await.map_err(&fail)?;
            let mut child = Session::to_command(session, self.opts.remote_exe.clone())
                .args(["worker", "--rank", &rank.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .await
                .map_err(|e| fail(format!("cannot run {}: {}", self.opts.remote_exe, describe(&e))))?;
            let (Some(stdin), Some(stdout), Some(stderr)) =
                (child.stdin().take(), child.stdout().take(), child.stderr().take())
            else {
                return Err(fail("no pipes to the worker".to_string()));
            };
            Ok(Started {
                stdin: Box::pin(stdin),
                stdout: Box::pin(stdout),
                stderr: Box::pin(stderr),
                process: Box::new(SshProcess(child)),
            })
        }
        .boxed()
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.close_all().boxed()
    }
}

struct SshProcess(openssh::Child<Arc<Session>>);

impl Process for SshProcess {
    fn watch(self: Box<Self>, kill: oneshot::Receiver<()>) -> BoxFuture<'static, String> {
        let child = self.0;
        async move {
            tokio::select! {
                status = child.wait() => match status {
                    Ok(status) => status.to_string(),
                    Err(e) => format!("ssh session ended ({})", describe(&e)),
                },
                // Dropping the child closes its channel: the worker's stdin
                // ends and it exits; sshd tears the session down.
                _ = kill => "ssh session closed".to_string(),
            }
        }
        .boxed()
    }
}
