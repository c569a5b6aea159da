//! Workers over SSH with the system OpenSSH client (through the `openssh`
//! crate's multiplexed master), so ~/.ssh/config with Include, Match,
//! ProxyJump, certificates and the agent works as it does for `ssh`.
//! One master connection per host; a bounded number are opened at once.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use openssh::{ControlPersist, KnownHosts, Session, SessionBuilder, Stdio};
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, Mutex, OnceCell, Semaphore};

use crate::hostfile::Host;
use crate::launch::arch::Binaries;
use crate::launch::stage::{self, StageError};
use crate::launch::{LaunchError, Launcher, Process, Started};

/// A master with no session left exits after this long by itself. The
/// launcher closes every master on its way out; this is for a launcher that
/// cannot (SIGKILL, a crash). It outlasts the wait between opening a master
/// and its first session (rank 0's start, at most 20 s).
const MASTER_IDLE: NonZeroUsize = NonZeroUsize::new(30).expect("not zero");

/// Also what a tree launch's workers use to start the next ones (without
/// staging, which only the launcher does).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SshOptions {
    /// An ssh_config to use instead of ~/.ssh/config (`ssh -F`).
    pub config: Option<PathBuf>,
    pub connect_timeout: Duration,
    /// How many hosts are connected to at once.
    pub fanout: usize,
    /// The fabricbench binary on the remote hosts.
    pub remote_exe: String,
    /// Copy the binary of each host's architecture to its cache first, and
    /// run that copy.
    #[serde(skip)]
    pub stage: Option<Binaries>,
}

type SessionCell = Arc<OnceCell<Result<Arc<Session>, Unconnected>>>;

/// Why no master connection to a host opened; kept per host, so every
/// caller for that host is told the same.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Unconnected {
    /// ssh's own error, with every cause beneath it.
    #[error("{}", describe(.0))]
    Ssh(Arc<openssh::Error>),
    /// ssh's ConnectTimeout bounds the TCP connect only; this, the handshake.
    #[error("ssh did not connect within {0:?}")]
    Timeout(Duration),
    /// The launcher closed its connection permits while this one waited.
    #[error("the launcher is closing: no new ssh connection")]
    Closing,
}

pub struct SshLauncher {
    opts: SshOptions,
    connecting: Semaphore,
    sessions: Mutex<HashMap<String, SessionCell>>,
    /// The staged binary's path per host.
    staged: Mutex<HashMap<String, String>>,
}

impl SshLauncher {
    pub fn new(opts: SshOptions) -> SshLauncher {
        let connecting = Semaphore::new(opts.fanout.max(1));
        SshLauncher { opts, connecting, sessions: Mutex::new(HashMap::new()), staged: Mutex::new(HashMap::new()) }
    }

    pub fn options(&self) -> &SshOptions {
        &self.opts
    }

    /// The master connection to `host`, opened on first use; concurrent
    /// callers share one attempt, and a failure is remembered.
    pub async fn session(&self, host: &str) -> Result<Arc<Session>, Unconnected> {
        let cell = self.sessions.lock().await.entry(host.to_string()).or_default().clone();
        cell.get_or_init(|| self.connect(host)).await.clone()
    }

    async fn connect(&self, host: &str) -> Result<Arc<Session>, Unconnected> {
        let _permit = self.connecting.acquire().await.map_err(|_| Unconnected::Closing)?;
        let mut builder = SessionBuilder::default();
        builder
            .connect_timeout(self.opts.connect_timeout)
            .server_alive_interval(Duration::from_secs(2))
            .known_hosts_check(KnownHosts::Add)
            .control_persist(ControlPersist::IdleFor(MASTER_IDLE));
        if let Some(config) = &self.opts.config {
            builder.config_file(config);
        }
        // ssh enforces ConnectTimeout on the TCP connect; bound the whole handshake too.
        let limit = self.opts.connect_timeout + Duration::from_secs(5);
        match tokio::time::timeout(limit, builder.connect_mux(host)).await {
            Ok(Ok(session)) => Ok(Arc::new(session)),
            Ok(Err(e)) => Err(Unconnected::Ssh(Arc::new(e))),
            Err(_) => Err(Unconnected::Timeout(limit)),
        }
    }

    /// Closes every master connection (their remote sessions end with them).
    async fn close_all(&self) {
        let cells: Vec<SessionCell> = self.sessions.lock().await.drain().map(|(_, s)| s).collect();
        let sessions = cells.into_iter().filter_map(|cell| Arc::try_unwrap(cell).ok()?.into_inner()?.ok());
        for session in sessions {
            if let Ok(session) = Arc::try_unwrap(session) {
                let _ = tokio::time::timeout(Duration::from_secs(5), session.close()).await;
            }
        }
    }

    /// The path of fabricbench on `host`: staged there first with `--stage`.
    pub async fn remote_exe(&self, host: &str, session: &Session) -> Result<String, StageError> {
        let Some(binaries) = &self.opts.stage else { return Ok(self.opts.remote_exe.clone()) };
        if let Some(path) = self.staged.lock().await.get(host) {
            return Ok(path.clone());
        }
        let staged = stage::stage(session, host, binaries).await?;
        if staged.copied {
            tracing::info!("staged fabricbench to {host}:{}", staged.remote_path);
        }
        self.staged.lock().await.insert(host.to_string(), staged.remote_path.clone());
        Ok(staged.remote_path)
    }

    /// With `--stage`, stages every host's binary before any worker starts,
    /// so a host without a binary for its architecture stops the run early.
    async fn stage_all(&self, hosts: &[Host]) -> Result<(), LaunchError> {
        if self.opts.stage.is_none() {
            return Ok(());
        }
        let mut names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let staged = futures::future::join_all(names.into_iter().map(|host| async move {
            let session = self
                .session(host)
                .await
                .map_err(|reason| LaunchError::Unreachable { host: host.to_string(), reason })?;
            self.remote_exe(host, &session)
                .await
                .map_err(|reason| LaunchError::Stage { host: host.to_string(), reason })
        }))
        .await;
        staged.into_iter().find_map(Result::err).map_or(Ok(()), Err)
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
            let session = self.session(&name).await.map_err(|e| fail(e.to_string()))?;
            let exe = self.remote_exe(&name, &session).await.map_err(|e| fail(e.to_string()))?;
            let mut child = Session::to_command(session, exe.clone())
                .args(["worker", "--rank", &rank.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .await
                .map_err(|e| fail(format!("cannot run {exe}: {}", describe(&e))))?;
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

    fn prepare<'a>(&'a self, hosts: &'a [Host]) -> BoxFuture<'a, Result<(), LaunchError>> {
        self.stage_all(hosts).boxed()
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
