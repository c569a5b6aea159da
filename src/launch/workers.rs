//! The launcher's handle on every worker it started: stdin to close, stderr
//! to forward (and keep the tail of, per rank, for error messages), exits
//! to watch. A process runs one rank (ssh, local) or every rank (an srun
//! step, whose output srun labels by rank).

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::launch::slurm::{SrunLine, SrunStep};
use crate::launch::{BoxRead, BoxWrite, Process, Started};

const STDERR_TAIL: usize = 20;

/// A rank is gone: its process ended, or srun reported its task ended.
#[derive(Debug)]
pub struct Exit {
    pub rank: usize,
    pub how: String,
}

struct Handle {
    ranks: Range<usize>,
    stdin: Option<BoxWrite>,
    kill: Option<oneshot::Sender<()>>,
    running: bool,
}

/// The last lines each rank (or srun, for its step) wrote.
#[derive(Clone, Default)]
struct Tails(Arc<Mutex<HashMap<Source, VecDeque<String>>>>);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    Rank(usize),
    /// srun (or mpirun) itself, about the step of the handle with this index.
    Srun(usize),
}

impl Tails {
    fn push(&self, source: Source, line: String) {
        if let Ok(mut tails) = self.0.lock() {
            let tail = tails.entry(source).or_default();
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }

    fn lines(&self, source: Source) -> Vec<String> {
        self.0.lock().ok().and_then(|t| t.get(&source).map(|t| t.iter().cloned().collect())).unwrap_or_default()
    }
}

type Echo = Arc<dyn Fn(String) + Send + Sync>;

pub struct Workers {
    handles: Vec<Handle>,
    hosts: HashMap<usize, String>,
    tails: Tails,
    exits_tx: mpsc::UnboundedSender<Exit>,
    pub exits: mpsc::UnboundedReceiver<Exit>,
    /// Handles whose process has ended.
    ended_tx: mpsc::UnboundedSender<usize>,
    ended: mpsc::UnboundedReceiver<usize>,
    /// Where forwarded stderr lines go (the progress display).
    echo: Echo,
}

/// A member's stdin refused a line: the rank whose it is (the caller
/// names its host), and why.
#[derive(Debug)]
pub struct MemberRefused {
    pub rank: usize,
    pub error: std::io::Error,
}

impl Workers {
    pub fn new(echo: Echo) -> Workers {
        let (exits_tx, exits) = mpsc::unbounded_channel();
        let (ended_tx, ended) = mpsc::unbounded_channel();
        Workers {
            handles: Vec::new(),
            hosts: HashMap::new(),
            tails: Tails::default(),
            exits_tx,
            exits,
            ended_tx,
            ended,
            echo,
        }
    }

    /// Takes over a worker started for one rank: writes its spec line,
    /// forwards stderr, watches its exit. Returns its stdout.
    pub async fn adopt(
        &mut self,
        rank: usize,
        host: &str,
        started: Started,
        spec_line: &str,
    ) -> std::io::Result<BoxRead> {
        let Started { stdin, stdout, stderr, process } = started;
        self.hosts.insert(rank, host.to_string());
        tokio::spawn(forward_stderr(
            stderr,
            rank,
            format!("[rank {rank} {host}]"),
            self.tails.clone(),
            self.echo.clone(),
        ));
        self.watch(rank..rank + 1, stdin, process, spec_line).await.map(|()| stdout)
    }

    /// Takes over an srun step running rank i on `hosts[i]`: writes the
    /// line every task reads first, sorts the step's output by rank.
    /// Returns task 0's stdout.
    pub async fn adopt_step(&mut self, hosts: &[String], step: SrunStep, first_line: &str) -> std::io::Result<BoxRead> {
        let SrunStep { stdin, stdout, lines, process } = step;
        self.hosts.extend(hosts.iter().cloned().enumerate());
        let index = self.handles.len();
        let sort = sort_step_lines(
            lines,
            index,
            self.hosts.clone(),
            self.tails.clone(),
            self.echo.clone(),
            self.exits_tx.clone(),
        );
        tokio::spawn(sort);
        self.watch(0..hosts.len(), stdin, process, first_line).await.map(|()| stdout)
    }

    async fn watch(
        &mut self,
        ranks: Range<usize>,
        stdin: BoxWrite,
        process: Box<dyn Process>,
        line: &str,
    ) -> std::io::Result<()> {
        let (kill, killed) = oneshot::channel();
        let index = self.handles.len();
        tokio::spawn(watch_exit(ranks.start, index, process, killed, self.exits_tx.clone(), self.ended_tx.clone()));
        self.handles.push(Handle { ranks, stdin: Some(stdin), kill: Some(kill), running: true });
        self.send_line(index, line).await
    }

    /// Writes one more line to the stdin of the most recent process (under
    /// srun: to every task of the step).
    pub async fn send_to_last(&mut self, line: &str) -> std::io::Result<()> {
        self.send_line(self.handles.len() - 1, line).await
    }

    /// Writes one more line to the first process (rank 0's, or the srun step's).
    pub async fn send_to_first(&mut self, line: &str) -> std::io::Result<()> {
        self.send_line(0, line).await
    }

    /// Writes one more line to every process but the first (rank 0's), all
    /// at once.
    pub async fn send_to_members(&mut self, line: &str) -> Result<(), MemberRefused> {
        let writes = self.handles.iter_mut().skip(1).filter_map(|h| {
            let rank = h.ranks.start;
            let stdin = h.stdin.as_mut()?;
            Some(async move { write_line(stdin, line).await.map_err(|error| MemberRefused { rank, error }) })
        });
        futures::future::join_all(writes).await.into_iter().collect()
    }

    async fn send_line(&mut self, index: usize, line: &str) -> std::io::Result<()> {
        match self.handles[index].stdin.as_mut() {
            Some(stdin) => write_line(stdin, line).await,
            None => Ok(()),
        }
    }

    pub fn host(&self, rank: usize) -> &str {
        self.hosts.get(&rank).map_or("?", String::as_str)
    }

    /// The last lines the rank wrote to stderr (and srun's own, for a step),
    /// for an error message.
    pub fn stderr_tail(&self, rank: usize) -> String {
        let mut lines = self.tails.lines(Source::Rank(rank));
        if let Some(index) = self.handles.iter().position(|h| h.ranks.contains(&rank) && h.ranks.len() > 1) {
            lines.extend(self.tails.lines(Source::Srun(index)));
        }
        if lines.is_empty() {
            String::new()
        } else {
            format!("; its last output:\n{}", lines.join("\n"))
        }
    }

    /// Closes every stdin (workers exit on EOF), waits up to `grace`, then
    /// kills what is left and waits for that too. Nothing outlives this.
    pub async fn shut_down(&mut self, grace: Duration) {
        for h in &mut self.handles {
            h.stdin = None;
        }
        self.wait_ended(tokio::time::Instant::now() + grace).await;
        for h in self.handles.iter_mut().filter(|h| h.running) {
            match h.ranks.len() {
                1 => tracing::warn!("rank {} did not exit after its stdin closed; ending it", h.ranks.start),
                n => tracing::warn!(
                    "the srun step of ranks 0-{} did not end after its stdin closed (a node gone?); ending it",
                    n - 1
                ),
            }
            if let Some(kill) = h.kill.take() {
                let _ = kill.send(());
            }
        }
        // srun gets its own grace to end the step before it is killed.
        self.wait_ended(tokio::time::Instant::now() + Duration::from_secs(10)).await;
    }

    async fn wait_ended(&mut self, deadline: tokio::time::Instant) {
        while self.handles.iter().any(|h| h.running) {
            match tokio::time::timeout_at(deadline, self.ended.recv()).await {
                Ok(Some(index)) => self.handles[index].running = false,
                Ok(None) | Err(_) => break,
            }
        }
    }
}

async fn forward_stderr(stderr: BoxRead, rank: usize, prefix: String, tails: Tails, echo: Echo) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        echo(format!("{prefix} {line}"));
        tails.push(Source::Rank(rank), line);
    }
}

/// Files a step's lines under their rank, srun's under the step, and turns
/// srun's reports of ended tasks into exits.
async fn sort_step_lines(
    mut lines: mpsc::UnboundedReceiver<SrunLine>,
    index: usize,
    hosts: HashMap<usize, String>,
    tails: Tails,
    echo: Echo,
    exits: mpsc::UnboundedSender<Exit>,
) {
    while let Some(line) = lines.recv().await {
        match line {
            SrunLine::Task { rank, text } => {
                echo(format!("[rank {rank} {}] {text}", hosts.get(&rank).map_or("?", String::as_str)));
                tails.push(Source::Rank(rank), text);
            }
            SrunLine::Ended { ranks, how } => {
                for rank in ranks {
                    let _ = exits.send(Exit { rank, how: how.clone() });
                }
            }
            SrunLine::Mpirun(text) => {
                echo(format!("[mpirun] {text}"));
                tails.push(Source::Srun(index), text);
            }
            SrunLine::Srun(text) => {
                echo(format!("[srun] {text}"));
                tails.push(Source::Srun(index), text);
            }
        }
    }
}

async fn watch_exit(
    first_rank: usize,
    index: usize,
    process: Box<dyn Process>,
    killed: oneshot::Receiver<()>,
    exits: mpsc::UnboundedSender<Exit>,
    ended: mpsc::UnboundedSender<usize>,
) {
    let how = process.watch(killed).await;
    let _ = exits.send(Exit { rank: first_rank, how });
    let _ = ended.send(index);
}

async fn write_line(stdin: &mut BoxWrite, line: &str) -> std::io::Result<()> {
    stdin.write_all(line.as_bytes()).await?;
    stdin.write_all(b"\n").await?;
    stdin.flush().await
}
