//! The launcher's handle on every worker it started: stdin to close, stderr
//! to forward (and keep the tail of, for error messages), exits to watch.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::launch::{BoxRead, BoxWrite, Process, Started};

const STDERR_TAIL: usize = 20;

/// A worker process exited.
#[derive(Debug)]
pub struct Exit {
    pub rank: usize,
    pub how: String,
}

struct Handle {
    rank: usize,
    host: String,
    stdin: Option<BoxWrite>,
    kill: Option<oneshot::Sender<()>>,
    exited: bool,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

pub struct Workers {
    handles: Vec<Handle>,
    exits_tx: mpsc::UnboundedSender<Exit>,
    pub exits: mpsc::UnboundedReceiver<Exit>,
    /// Where forwarded stderr lines go (the progress display).
    echo: Arc<dyn Fn(String) + Send + Sync>,
}

impl Workers {
    pub fn new(echo: Arc<dyn Fn(String) + Send + Sync>) -> Workers {
        let (exits_tx, exits) = mpsc::unbounded_channel();
        Workers { handles: Vec::new(), exits_tx, exits, echo }
    }

    /// Takes over a started worker: writes its spec line, forwards stderr,
    /// watches its exit. Returns its stdout.
    pub async fn adopt(
        &mut self,
        rank: usize,
        host: &str,
        started: Started,
        spec_line: &str,
    ) -> std::io::Result<BoxRead> {
        let Started { mut stdin, stdout, stderr, process } = started;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        tokio::spawn(forward_stderr(stderr, format!("[rank {rank} {host}]"), tail.clone(), self.echo.clone()));
        let (kill, killed) = oneshot::channel();
        tokio::spawn(watch_exit(rank, process, killed, self.exits_tx.clone()));
        let written = async {
            stdin.write_all(spec_line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await
        }
        .await;
        self.handles.push(Handle {
            rank,
            host: host.to_string(),
            stdin: Some(stdin),
            kill: Some(kill),
            exited: false,
            stderr_tail: tail,
        });
        written.map(|()| stdout)
    }

    pub fn mark_exited(&mut self, rank: usize) {
        if let Some(h) = self.handles.iter_mut().find(|h| h.rank == rank) {
            h.exited = true;
        }
    }

    pub fn host(&self, rank: usize) -> &str {
        self.handles.iter().find(|h| h.rank == rank).map_or("?", |h| h.host.as_str())
    }

    /// The last lines the worker wrote to stderr, for an error message.
    pub fn stderr_tail(&self, rank: usize) -> String {
        let Some(h) = self.handles.iter().find(|h| h.rank == rank) else { return String::new() };
        let tail = h.stderr_tail.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default();
        if tail.is_empty() {
            tail
        } else {
            format!("; its last output:\n{tail}")
        }
    }

    /// Closes every stdin (workers exit on EOF), waits up to `grace`, then
    /// kills what is left and waits for that too. Nothing outlives this.
    pub async fn shut_down(&mut self, grace: Duration) {
        for h in &mut self.handles {
            h.stdin = None;
        }
        let deadline = tokio::time::Instant::now() + grace;
        while self.handles.iter().any(|h| !h.exited) {
            match tokio::time::timeout_at(deadline, self.exits.recv()).await {
                Ok(Some(exit)) => self.mark_exited(exit.rank),
                Ok(None) | Err(_) => break,
            }
        }
        for h in self.handles.iter_mut().filter(|h| !h.exited) {
            tracing::warn!("rank {} ({}) did not exit after its stdin closed; killing it", h.rank, h.host);
            if let Some(kill) = h.kill.take() {
                let _ = kill.send(());
            }
        }
        while self.handles.iter().any(|h| !h.exited) {
            match tokio::time::timeout(Duration::from_secs(5), self.exits.recv()).await {
                Ok(Some(exit)) => self.mark_exited(exit.rank),
                Ok(None) | Err(_) => break,
            }
        }
    }
}

async fn forward_stderr(
    stderr: BoxRead,
    prefix: String,
    tail: Arc<Mutex<VecDeque<String>>>,
    echo: Arc<dyn Fn(String) + Send + Sync>,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        echo(format!("{prefix} {line}"));
        if let Ok(mut t) = tail.lock() {
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(line);
        }
    }
}

async fn watch_exit(
    rank: usize,
    process: Box<dyn Process>,
    killed: oneshot::Receiver<()>,
    exits: mpsc::UnboundedSender<Exit>,
) {
    let how = process.watch(killed).await;
    let _ = exits.send(Exit { rank, how });
}
