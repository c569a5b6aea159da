//! Workers under Open MPI's `mpirun` (its options: `--hostfile`,
//! `--map-by`, `-x`; MPICH's hydra spells them otherwise): one `mpirun` starts a worker for every rank at once, rank k on the host
//! of entry k, and is the only process the launcher runs. mpirun hands its
//! stdin to rank 0 only (`--stdin all` is broken in Open MPI 4.1 and PRRTE
//! releases), so what every rank needs comes in the environment (`-x`, never
//! argv), and rank 0 alone gets the rest on stdin. SIGTERM to mpirun ends
//! every rank.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::hostfile::Host;
use crate::launch::child::{spawn_piped, ChildProcess, Ending, Piped};
use crate::launch::node_file::NodeFile;
use crate::launch::slurm::{SrunLine, SrunStep};
use crate::launch::{BoxRead, LaunchError};

/// How long mpirun may take to end the job after SIGTERM before it is killed.
const TERM_GRACE: Duration = Duration::from_secs(5);
/// The program the launcher runs.
pub const MPIRUN: &str = "mpirun";

#[derive(Debug, thiserror::Error)]
pub enum MpirunError {
    #[error(
        "rank {again} is on {host}, which ranks {first}–{last} are on already: mpirun places a host's ranks side by side, so list each host's ranks together"
    )]
    Scattered { host: String, first: usize, last: usize, again: usize },
    #[error(
        "--launcher mpirun: `{MPIRUN}` is not on PATH; install Open MPI (Debian/Ubuntu: apt-get install openmpi-bin), or choose another --launcher"
    )]
    NotInstalled,
    #[error(
        "the job every rank reads from the environment is {bytes} bytes for {hosts} hosts, more than one variable holds ({MAX_ENV} bytes): run `mpirun … fabricbench run` instead (every rank reads the hostfile)"
    )]
    TooBig { bytes: usize, hosts: usize },
}

/// The most one environment variable carries through exec (Linux's
/// MAX_ARG_STRLEN, 128 KiB, for `NAME=value`), less room for the name.
const MAX_ENV: usize = 128 * 1024 - 64;

/// Refuses an environment value exec would refuse (E2BIG), saying why.
fn check_env(value: &str, hosts: usize) -> Result<(), MpirunError> {
    match value.len() > MAX_ENV {
        true => Err(MpirunError::TooBig { bytes: value.len(), hosts }),
        false => Ok(()),
    }
}

/// Open MPI's hostfile for `hosts` in rank order: a host per line with as
/// many slots as consecutive ranks it has; with `--map-by slot` rank k lands
/// on entry k's host. A host that comes back after another is refused.
pub fn hostfile(hosts: &[Host]) -> Result<String, MpirunError> {
    let mut runs: Vec<(&str, usize, usize)> = Vec::new();
    for (rank, host) in hosts.iter().enumerate() {
        match runs.last_mut() {
            Some((name, _, last)) if *name == host.name => *last = rank,
            _ => {
                if let Some(&(_, first, last)) = runs.iter().find(|(name, ..)| *name == host.name) {
                    return Err(MpirunError::Scattered { host: host.name.clone(), first, last, again: rank });
                }
                runs.push((&host.name, rank, rank));
            }
        }
    }
    Ok(runs.iter().map(|(name, first, last)| format!("{name} slots={}\n", last - first + 1)).collect())
}

pub struct MpirunLauncher {
    exe: PathBuf,
    mpirun_args: Vec<String>,
    /// mpirun's --hostfile, removed on close.
    node_file: Mutex<Option<NodeFile>>,
}

impl MpirunLauncher {
    /// Launches `exe` (normally this very binary) with extra `mpirun_args`
    /// (e.g. `--mca plm_rsh_agent ssh`) before fabricbench's own.
    /// Fails when no mpirun is on PATH.
    pub fn new(exe: PathBuf, mpirun_args: Vec<String>) -> Result<MpirunLauncher, MpirunError> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        if !std::env::split_paths(&path).any(|dir| dir.join(MPIRUN).is_file()) {
            return Err(MpirunError::NotInstalled);
        }
        Ok(MpirunLauncher { exe, mpirun_args, node_file: Mutex::new(None) })
    }

    /// Starts one worker per entry of `hosts`, rank k on `hosts[k]`, each
    /// with the environment variable `var` set to `value`.
    pub fn start_step(&self, hosts: &[Host], var: &str, value: &str) -> Result<SrunStep, LaunchError> {
        let fail = |reason: String| LaunchError::Start { rank: 0, host: hosts[0].name.clone(), reason };
        check_env(value, hosts.len()).map_err(|e| fail(e.to_string()))?;
        let text = hostfile(hosts).map_err(|e| fail(e.to_string()))?;
        let node_file = NodeFile::write(&text).map_err(|e| fail(format!("cannot write mpirun's hostfile: {e}")))?;
        let mut mpirun = Command::new(MPIRUN);
        mpirun
            .args(&self.mpirun_args)
            .args(["-np", &hosts.len().to_string(), "--hostfile"])
            .arg(node_file.path())
            // Rank order is the hostfile's; the workers pin their own threads.
            .args(["--map-by", "slot", "--bind-to", "none"])
            // The value stays in the environment, out of every argv.
            .env(var, value)
            .args(["-x", var])
            .arg(&self.exe)
            .args(["worker", "--mpi"]);
        let Piped { child, stdin, stdout, stderr } =
            spawn_piped(&mut mpirun, MPIRUN).map_err(|e| fail(e.to_string()))?;
        if let Ok(mut slot) = self.node_file.lock() {
            *slot = Some(node_file);
        }
        let (lines_tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(forward_stderr(Box::pin(stderr), lines_tx));
        Ok(SrunStep {
            stdin: Box::pin(stdin),
            // Only rank 0 writes on stdout.
            stdout: Box::pin(stdout),
            lines,
            process: Box::new(ChildProcess::new(child, Ending::Terminate { grace: TERM_GRACE }, "mpirun ended")),
        })
    }

    /// Removes the hostfile once the job is over.
    pub fn close(&self) {
        if let Ok(mut slot) = self.node_file.lock() {
            slot.take();
        }
    }
}

/// mpirun's stderr carries its own messages and every rank's, unlabelled.
async fn forward_stderr(stderr: BoxRead, lines: mpsc::UnboundedSender<SrunLine>) {
    let mut reader = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = reader.next_line().await {
        if lines.send(SrunLine::Mpirun(line)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> Vec<Host> {
        names.iter().map(|n| Host::named(n)).collect()
    }

    #[test]
    fn the_job_must_fit_one_environment_variable() {
        check_env(&"x".repeat(MAX_ENV), 9).unwrap();
        let e = check_env(&"x".repeat(MAX_ENV + 1), 5000).unwrap_err().to_string();
        assert!(e.starts_with("the job every rank reads from the environment is 131009 bytes for 5000 hosts"), "{e}");
    }

    #[test]
    fn a_host_gets_a_slot_per_rank_in_rank_order() {
        assert_eq!(hostfile(&hosts(&["a", "b", "b", "c"])).unwrap(), "a slots=1\nb slots=2\nc slots=1\n");
        let e = hostfile(&hosts(&["a", "a", "b", "a"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rank 3 is on a, which ranks 0–1 are on already: mpirun places a host's ranks side by side, so list each host's ranks together"
        );
    }
}
