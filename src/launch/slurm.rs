//! Workers under Slurm. Inside an allocation (salloc, sbatch) one `srun`
//! step starts a worker on every node at once, in rank order, and is the
//! only process the launcher runs: srun broadcasts the launcher's stdin to
//! every task, gathers their output (labelled with the task number, which
//! is the rank), reports tasks that end badly, and ends them all when its
//! stdin closes.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::hostfile::{self, Host, HostfileError};
use crate::launch::child::{spawn_piped, ChildProcess, Ending, Piped};
use crate::launch::node_file::NodeFile;
use crate::launch::{BoxRead, BoxWrite, LaunchError, Process};

/// How long srun may take to end the step after SIGTERM before it is killed.
const TERM_GRACE: Duration = Duration::from_secs(5);
/// slurmstepd forwards a task's output in messages of at most this many
/// bytes, and with `--label` srun ends each message's partial line with a
/// newline: a labelled line of exactly this length continues on the next.
const SRUN_CHUNK: usize = 1024;
/// Longest SLURM_JOB_ID taken (Slurm's are numbers; the id appears in messages).
const MAX_JOB_ID: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("SLURM_JOB_ID is set ({job}) but SLURM_JOB_NODELIST is not: is this a Slurm allocation?")]
    NoNodelist { job: String },
    #[error("SLURM_JOB_ID=`{job}` is not a Slurm job id (at most {MAX_JOB_ID} letters, digits or `_`)")]
    BadJobId { job: String },
    #[error("Slurm job {job}: {cause}")]
    Nodes { job: String, cause: HostfileError },
    #[error(
        "{host} is not a node of Slurm job {job} (its nodes: {nodelist}); list nodes of the allocation, or choose --launcher ssh"
    )]
    NotAllocated { host: String, job: String, nodelist: String },
}

/// The Slurm allocation this process runs in.
#[derive(Clone, Debug)]
pub struct Allocation {
    pub job: String,
    /// SLURM_JOB_NODELIST as Slurm wrote it, for messages.
    pub nodelist: String,
    /// Its rank list: every node once per task of SLURM_TASKS_PER_NODE, in order.
    pub nodes: Vec<Host>,
}

impl Allocation {
    /// The allocation from the environment Slurm sets; `None` outside one.
    pub fn from_env() -> Result<Option<Allocation>, SlurmError> {
        Allocation::from_vars(|name| std::env::var(name).ok())
    }

    /// The allocation from the variables `var` gives (the environment, or a test's).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Allocation>, SlurmError> {
        let Some(job) = var("SLURM_JOB_ID") else { return Ok(None) };
        if job.is_empty() || job.len() > MAX_JOB_ID || !job.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            let shown: String = job.chars().take(MAX_JOB_ID).flat_map(char::escape_default).collect();
            return Err(SlurmError::BadJobId { job: shown });
        }
        let nodelist = var("SLURM_JOB_NODELIST").ok_or_else(|| SlurmError::NoNodelist { job: job.clone() })?;
        let nodes = hostfile::from_slurm(&nodelist, var("SLURM_TASKS_PER_NODE").as_deref())
            .map_err(|cause| SlurmError::Nodes { job: job.clone(), cause })?;
        Ok(Some(Allocation { job, nodelist, nodes }))
    }

    /// The first of `hosts` that is not a node of this allocation.
    pub fn check(&self, hosts: &[Host]) -> Result<(), SlurmError> {
        match hosts.iter().find(|h| !self.nodes.iter().any(|n| n.name == h.name)) {
            None => Ok(()),
            Some(h) => Err(SlurmError::NotAllocated {
                host: h.name.clone(),
                job: self.job.clone(),
                nodelist: self.nodelist.clone(),
            }),
        }
    }

    /// Whether `hosts` are exactly the allocation's nodes, in its order.
    pub fn is_all(&self, hosts: &[Host]) -> bool {
        hosts.len() == self.nodes.len() && hosts.iter().zip(&self.nodes).all(|(h, n)| h.name == n.name)
    }
}

pub struct SlurmLauncher {
    exe: PathBuf,
    srun_args: Vec<String>,
    allocation: Allocation,
    /// The node order for srun (SLURM_HOSTFILE), removed on close.
    node_file: Mutex<Option<NodeFile>>,
}

/// Everything a running step says, line by line, besides task 0's stdout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SrunLine {
    /// A line a task wrote (on stderr; or on stdout, for a task but 0).
    Task { rank: usize, text: String },
    /// srun saw tasks end badly ("srun: error: h3: task 2: Killed").
    Ended { ranks: Vec<usize>, how: String },
    /// srun's own message.
    Srun(String),
    /// A line on mpirun's stderr (its own, or a rank's: mpirun does not say).
    Mpirun(String),
}

/// A running step: the broadcast stdin, task 0's stdout, and the rest.
pub struct SrunStep {
    pub stdin: BoxWrite,
    /// Task 0's stdout with srun's labels removed.
    pub stdout: BoxRead,
    pub lines: mpsc::UnboundedReceiver<SrunLine>,
    pub process: Box<dyn Process>,
}

impl SlurmLauncher {
    /// Launches `exe` (normally this very binary) in `allocation`, with
    /// extra `srun_args` (e.g. `--cpu-bind=none`) before fabricbench's own.
    pub fn new(exe: PathBuf, srun_args: Vec<String>, allocation: Allocation) -> SlurmLauncher {
        SlurmLauncher { exe, srun_args, allocation, node_file: Mutex::new(None) }
    }

    /// Whether `hosts` are exactly the allocation's nodes, in its order, so
    /// the tasks can read them from their environment.
    pub fn is_allocation(&self, hosts: &[Host]) -> bool {
        // The tasks rebuild the list from SLURM_JOB_NODELIST alone, one rank per node.
        self.allocation.is_all(hosts) && hosts.iter().all(|h| h.slots == 1)
    }

    /// Starts one worker per entry of the rank list, task i (rank i) on
    /// `hosts[i]`: a host with several slots gets as many tasks.
    pub fn start_step(&self, hosts: &[Host]) -> Result<SrunStep, LaunchError> {
        let fail = |reason: String| LaunchError::Start { rank: 0, host: hosts[0].name.clone(), reason };
        // One line per task: a host of several slots appears once per rank.
        let text: String = hosts.iter().map(|h| format!("{}\n", h.name)).collect();
        let node_file = NodeFile::write(&text).map_err(|e| fail(format!("cannot write srun's node list: {e}")))?;
        let tasks = hosts.len().to_string();
        // A host's ranks are consecutive in the list: each new name is a new node.
        let nodes = (1 + hosts.windows(2).filter(|w| w[0].name != w[1].name).count()).to_string();
        let mut srun = Command::new("srun");
        srun.args(&self.srun_args)
            .args(["--job-name=fabricbench", "--nodes", &nodes, "--ntasks", &tasks])
            // Tasks in the order of SLURM_HOSTFILE (one line per task): task i is rank i.
            .arg("--distribution=arbitrary")
            .env("SLURM_HOSTFILE", node_file.path())
            // A lost rank ends the run through the coordinator, which keeps
            // what was measured; srun killing the step would take rank 0
            // (and the partial results) with it.
            .args(["--kill-on-bad-exit=0", "--no-kill"])
            .args(["--input=all", "--label", "--mpi=none"])
            .arg(&self.exe)
            .args(["worker", "--slurm"]);
        let Piped { child, stdin, stdout, stderr } = spawn_piped(&mut srun, "srun").map_err(|e| fail(e.to_string()))?;
        if let Ok(mut slot) = self.node_file.lock() {
            *slot = Some(node_file);
        }
        let (lines_tx, lines) = mpsc::unbounded_channel();
        let (task0, task0_out) = tokio::io::duplex(64 << 10);
        tokio::spawn(split_stdout(Box::pin(stdout), task0, lines_tx.clone()));
        tokio::spawn(split_stderr(Box::pin(stderr), lines_tx));
        Ok(SrunStep {
            stdin: Box::pin(stdin),
            stdout: Box::pin(task0_out),
            lines,
            process: Box::new(ChildProcess::new(child, Ending::Terminate { grace: TERM_GRACE }, "srun ended")),
        })
    }

    /// Removes the node list once the step is over.
    pub fn close(&self) {
        if let Ok(mut slot) = self.node_file.lock() {
            slot.take();
        }
    }
}

/// srun's `--label` prefix: `2: text` (padded to the widest task number).
fn unlabel(line: &str) -> Option<(usize, &str)> {
    let (label, text) = line.split_once(": ")?;
    Some((label.trim_start().parse().ok()?, text))
}

/// srun's report of tasks that ended badly, e.g. `srun: error: h3: task 2:
/// Killed` or `srun: error: h[2-3]: tasks 1-2,5: Exited with exit code 1`.
fn task_end(line: &str) -> Option<(Vec<usize>, String)> {
    let rest = line.strip_prefix("srun: error: ")?;
    let (_nodes, rest) = rest.split_once(": ")?;
    let rest = rest.strip_prefix("tasks ").or_else(|| rest.strip_prefix("task "))?;
    let (list, how) = rest.split_once(": ")?;
    let mut ranks = Vec::new();
    for part in list.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (usize, usize) = (lo.parse().ok()?, hi.parse().ok()?);
        ranks.extend(lo..=hi);
    }
    Some((ranks, how.to_string()))
}

/// Task 0's stdout goes on as a stream of its own, its long lines joined
/// again; anything other tasks print there is kept as their lines.
async fn split_stdout(stdout: BoxRead, mut task0: tokio::io::DuplexStream, lines: mpsc::UnboundedSender<SrunLine>) {
    let mut reader = BufReader::new(stdout).lines();
    let mut pending = String::new();
    while let Ok(Some(line)) = reader.next_line().await {
        match unlabel(&line) {
            Some((0, text)) => {
                pending.push_str(text);
                if text.len() == SRUN_CHUNK {
                    continue;
                }
                pending.push('\n');
                if task0.write_all(pending.as_bytes()).await.is_err() {
                    return;
                }
                pending.clear();
            }
            Some((rank, text)) => {
                let _ = lines.send(SrunLine::Task { rank, text: text.to_string() });
            }
            None => {
                let _ = lines.send(SrunLine::Srun(line));
            }
        }
    }
}

async fn split_stderr(stderr: BoxRead, lines: mpsc::UnboundedSender<SrunLine>) {
    let mut reader = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = reader.next_line().await {
        if let Some((ranks, how)) = task_end(&line) {
            let _ = lines.send(SrunLine::Ended { ranks, how });
        }
        let parsed = match unlabel(&line) {
            Some((rank, text)) if !line.starts_with("srun: ") => SrunLine::Task { rank, text: text.to_string() },
            _ => SrunLine::Srun(line),
        };
        if lines.send(parsed).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_task_ends() {
        assert_eq!(unlabel("0: {\"Listening\":1}"), Some((0, "{\"Listening\":1}")));
        assert_eq!(unlabel(" 7: a: b"), Some((7, "a: b")));
        assert_eq!(unlabel("srun: error: x"), None);
        assert_eq!(task_end("srun: error: h3: task 2: Killed"), Some((vec![2], "Killed".to_string())));
        assert_eq!(
            task_end("srun: error: h[2-3,5]: tasks 1-2,4: Exited with exit code 1"),
            Some((vec![1, 2, 4], "Exited with exit code 1".to_string()))
        );
        assert_eq!(task_end("srun: error: Unable to create step for job 9: Invalid node name"), None);
    }

    #[tokio::test]
    async fn task0_lines_are_joined_again() {
        let long = "x".repeat(SRUN_CHUNK + 10);
        let srun_out = format!("0: {}\n0: {}\n1: stray\n0: {{}}\n", &long[..SRUN_CHUNK], &long[SRUN_CHUNK..]);
        let (task0, task0_out) = tokio::io::duplex(1 << 16);
        let (tx, mut rx) = mpsc::unbounded_channel();
        split_stdout(Box::pin(std::io::Cursor::new(srun_out.into_bytes())), task0, tx).await;
        let mut lines = BufReader::new(task0_out).lines();
        assert_eq!(lines.next_line().await.unwrap(), Some(long));
        assert_eq!(lines.next_line().await.unwrap(), Some("{}".to_string()));
        assert_eq!(rx.recv().await, Some(SrunLine::Task { rank: 1, text: "stray".to_string() }));
    }

    #[test]
    fn allocation_from_the_environment() {
        let vars = |pairs: &'static [(&str, &str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert!(Allocation::from_vars(vars(&[])).unwrap().is_none());
        let a = Allocation::from_vars(vars(&[
            ("SLURM_JOB_ID", "12"),
            ("SLURM_JOB_NODELIST", "h[1-3]"),
            ("SLURM_TASKS_PER_NODE", "2,1(x2)"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            a.nodes.iter().map(|h| (h.name.as_str(), h.slots)).collect::<Vec<_>>(),
            [("h1", 2), ("h1", 2), ("h2", 1), ("h3", 1)]
        );
        assert_eq!(a.nodes.iter().map(|h| h.slot).collect::<Vec<_>>(), [0, 1, 0, 0]);
        assert!(a.is_all(&a.nodes) && !a.is_all(&a.nodes[1..]));
        a.check(&[Host::named("h3"), Host::named("h1")]).unwrap();
        assert_eq!(
            a.check(&[Host::named("h1"), Host::named("h9")]).unwrap_err().to_string(),
            "h9 is not a node of Slurm job 12 (its nodes: h[1-3]); list nodes of the allocation, or choose --launcher ssh"
        );
        let e = Allocation::from_vars(vars(&[("SLURM_JOB_ID", "12")])).unwrap_err().to_string();
        assert_eq!(e, "SLURM_JOB_ID is set (12) but SLURM_JOB_NODELIST is not: is this a Slurm allocation?");
    }

    #[test]
    fn environment_strings_are_bounded() {
        let vars = |pairs: Vec<(&'static str, String)>| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
        };
        let e = Allocation::from_vars(vars(vec![("SLURM_JOB_ID", "1\x1b[2J".to_string())])).unwrap_err().to_string();
        assert_eq!(e, "SLURM_JOB_ID=`1\\u{1b}[2J` is not a Slurm job id (at most 64 letters, digits or `_`)");
        let long = vec![("SLURM_JOB_ID", "12".to_string()), ("SLURM_JOB_NODELIST", "n[1-100000]".to_string())];
        let e = Allocation::from_vars(vars(long)).unwrap_err().to_string();
        assert!(
            e.starts_with("Slurm job 12: SLURM_JOB_NODELIST=`n[1-100000]`: `n[1-100000]` names 100000 hosts;"),
            "{e}"
        );
    }
}
