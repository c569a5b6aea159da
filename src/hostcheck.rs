//! `fabricbench hosts`: before a long run, check every host in parallel:
//! reachable (over ssh, through srun inside a Slurm allocation, or here for
//! local ranks, as `run` would start them), fabricbench present at the same version, clock offset, what the
//! host is (its own `fabricbench facts`), and its architecture, kernel and
//! glibc, asked with the shell before fabricbench runs there, so a host
//! whose glibc is too old for the binary says so.

use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde::Serialize;

use crate::hostfacts::HostFacts;
use crate::hostfile::Host;
use crate::launch::ssh::{SshLauncher, Unconnected};
use crate::launch::stage::StageError;
use crate::metrics::clock::now_ns;
use crate::transport::rdma::ProbeReport;

#[derive(Clone, Debug, Serialize)]
pub struct HostCheck {
    pub host: String,
    pub reachable: bool,
    /// `uname -m`, `uname -r` and the C library, read with the shell.
    pub platform: Option<Platform>,
    /// Whether the binary this host would run starts there (`--version`).
    pub starts: Option<bool>,
    /// `fabricbench --version` on the host.
    pub version: Option<String>,
    /// RDMA ports as `device:port state rate` (`fabricbench probe` on the
    /// host); `None` when the host has no RDMA devices.
    pub rdma: Option<Vec<String>>,
    /// Kernel, OS, CPU, NUMA, rdma-core, RDMA drivers and firmware, as the
    /// host's run.json `probes[].facts` would record them.
    pub facts: Option<HostFacts>,
    /// Remote clock minus ours, ms (± half the round trip).
    pub clock_offset_ms: Option<f64>,
    pub rtt_ms: Option<f64>,
    /// Time to connect and run the checks, ms.
    pub elapsed_ms: f64,
    pub problem: Option<String>,
}

/// What a binary needs of a host, read before any fabricbench runs there.
#[derive(Clone, Debug, Serialize)]
pub struct Platform {
    /// `uname -m`, e.g. x86_64, aarch64.
    pub machine: String,
    /// `uname -r`.
    pub kernel: String,
    /// The glibc version (`getconf GNU_LIBC_VERSION`, else `ldd --version`);
    /// `None` on a host without glibc.
    pub glibc: Option<String>,
}

/// One shell round trip: three lines, the last empty without glibc.
const PLATFORM_SCRIPT: &str = "uname -m; uname -r; \
    { getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>/dev/null | head -n 1; } | grep -o '[0-9][0-9.]*$'; true";

impl Platform {
    fn parse(text: &str) -> Option<Platform> {
        let mut lines = text.lines().map(str::trim);
        let machine = lines.next().filter(|m| !m.is_empty())?.to_string();
        let kernel = lines.next()?.to_string();
        let glibc = lines.next().filter(|g| !g.is_empty()).map(str::to_string);
        Some(Platform { machine, kernel, glibc })
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let glibc = self.glibc.as_deref().unwrap_or("none");
        write!(f, "{} · {} · glibc {glibc}", self.machine, self.kernel)
    }
}

/// Why a binary did not start, in words: the loader's "version
/// `GLIBC_2.34' not found" becomes the host's glibc being too old.
fn why_not_started(exe: &str, platform: Option<&Platform>, stderr: &str) -> String {
    let needed = stderr.split('`').filter_map(|s| s.strip_prefix("GLIBC_")?.split('\'').next()).next_back();
    match needed {
        Some(needed) => {
            let have = platform.and_then(|p| p.glibc.as_deref()).unwrap_or("unknown");
            format!(
                "glibc {have} is too old: {exe} needs glibc {needed}; stage the release binary (scripts/dist builds it for glibc 2.17)"
            )
        }
        None => format!("{exe} does not run there: {stderr}"),
    }
}

impl HostCheck {
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// How the hosts are reached: the way `run`'s launcher would start their
/// workers (`launch::choose`).
pub enum Reach<'a> {
    /// Over ssh (the launcher bounds concurrent connects).
    Ssh(&'a SshLauncher),
    /// Every host is this machine (local ranks): commands run here, with
    /// this binary.
    Here { exe: PathBuf },
    /// Inside a Slurm allocation of the hosts: each command is a step of
    /// one task on its node, with this binary's path (shared, as `run`'s
    /// srun step assumes).
    Srun { exe: PathBuf },
}

/// Where one host's commands run once it is reached.
enum Shell {
    Ssh(Arc<openssh::Session>),
    Here,
    /// A step on this node of the allocation.
    Srun(String),
}

impl Shell {
    async fn output(&self, program: &str, args: &[&str]) -> Result<Output, NotRun> {
        match self {
            Shell::Ssh(session) => Ok(session.command(program).args(args).output().await?),
            Shell::Here => Ok(tokio::process::Command::new(program).args(args).output().await?),
            Shell::Srun(node) => {
                // --overlap: a step beside the other hosts' (and a run's) own.
                let step = ["--nodes=1", "--ntasks=1", "--quiet", "--overlap", "--job-name=fabricbench-hosts"];
                let mut srun = tokio::process::Command::new("srun");
                Ok(srun.args(step).args(["--nodelist", node, program]).args(args).output().await?)
            }
        }
    }
}

/// Why a command on a host did not run (not: why it failed).
#[derive(Debug, thiserror::Error)]
enum NotRun {
    #[error(transparent)]
    Ssh(#[from] openssh::Error),
    #[error(transparent)]
    Here(#[from] std::io::Error),
}

impl Reach<'_> {
    /// The host's shell, and the fabricbench to run there or why there is
    /// none (staging found no binary for it).
    async fn open(&self, host: &Host) -> Result<(Shell, Result<String, StageError>), String> {
        match self {
            Reach::Ssh(launcher) => {
                let session = launcher.session(&host.name).await.map_err(|e: Unconnected| e.to_string())?;
                let exe = launcher.remote_exe(&host.name, &session).await;
                Ok((Shell::Ssh(session), exe))
            }
            Reach::Here { exe } => Ok((Shell::Here, Ok(exe.display().to_string()))),
            Reach::Srun { exe } => {
                // Reached when a step runs there at all.
                let shell = Shell::Srun(host.name.clone());
                match shell.output("true", &[]).await {
                    Ok(out) if out.status.success() => Ok((shell, Ok(exe.display().to_string()))),
                    Ok(out) => Err(format!("srun: ({}) {}", out.status, String::from_utf8_lossy(&out.stderr).trim())),
                    Err(e) => Err(format!("cannot run srun: {e}")),
                }
            }
        }
    }
}

/// Checks every host at once.
pub async fn check_all(reach: &Reach<'_>, hosts: &[Host]) -> Vec<HostCheck> {
    join_all(hosts.iter().map(|h| check(reach, h))).await
}

async fn check(reach: &Reach<'_>, host: &Host) -> HostCheck {
    let started = Instant::now();
    let mut result = HostCheck {
        host: host.name.clone(),
        reachable: false,
        platform: None,
        starts: None,
        version: None,
        rdma: None,
        facts: None,
        clock_offset_ms: None,
        rtt_ms: None,
        elapsed_ms: 0.0,
        problem: None,
    };
    let (shell, exe) = match reach.open(host).await {
        Ok(opened) => opened,
        Err(e) => {
            result.problem = Some(format!("unreachable: {e}"));
            result.elapsed_ms = ms(started.elapsed());
            return result;
        }
    };
    result.reachable = true;
    if let Ok(out) = shell.output("sh", &["-c", PLATFORM_SCRIPT]).await {
        result.platform = Platform::parse(&String::from_utf8_lossy(&out.stdout));
    }
    // A host staging refused still gets its row: reached, its platform, why.
    let exe = match exe {
        Ok(exe) => exe,
        Err(refused) => {
            result.problem = Some(refused.to_string());
            result.elapsed_ms = ms(started.elapsed());
            return result;
        }
    };
    let ours = format!("fabricbench {}", env!("CARGO_PKG_VERSION"));
    match shell.output(&exe, &["--version"]).await {
        Ok(out) if out.status.success() => {
            result.starts = Some(true);
            let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if theirs != ours {
                result.problem = Some(format!("version mismatch: the host has `{theirs}`, this launcher is `{ours}`"));
            }
            result.version = Some(theirs);
        }
        Ok(out) => {
            result.starts = Some(false);
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            result.problem = Some(why_not_started(&exe, result.platform.as_ref(), &format!("({}) {err}", out.status)));
        }
        Err(e) => result.problem = Some(format!("cannot run {exe}: {e}")),
    }
    if result.problem.is_none() {
        result.rdma = rdma_ports(&shell, &exe).await;
        result.facts = facts(&shell, &exe).await;
    }
    let sent = now_ns();
    if let Ok(out) = shell.output("date", &["+%s%N"]).await {
        let received = now_ns();
        if let Ok(remote) = String::from_utf8_lossy(&out.stdout).trim().parse::<i64>() {
            let midpoint = sent + (received - sent) / 2;
            result.clock_offset_ms = Some((remote - midpoint) as f64 / 1e6);
            result.rtt_ms = Some((received - sent) as f64 / 1e6);
        }
    }
    result.elapsed_ms = ms(started.elapsed());
    result
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// What the host is, from its own `fabricbench facts --json`.
async fn facts(shell: &Shell, exe: &str) -> Option<HostFacts> {
    let out = shell.output(exe, &["facts", "--json"]).await.ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// The host's RDMA ports from its own `fabricbench probe --json`.
async fn rdma_ports(shell: &Shell, exe: &str) -> Option<Vec<String>> {
    let out = shell.output(exe, &["probe", "--json"]).await.ok()?;
    let report: ProbeReport = serde_json::from_slice(&out.stdout).ok()?;
    let ports: Vec<String> = report
        .devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| format!("{}:{} {} {}", d.name, p.port, p.state, p.rate)))
        .collect();
    (!ports.is_empty()).then_some(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_lines_from_the_shell() {
        let p = Platform::parse("aarch64\n5.14.0-362.el9.aarch64\n2.34\n").unwrap();
        assert_eq!(
            (p.machine.as_str(), p.kernel.as_str(), p.glibc.as_deref()),
            ("aarch64", "5.14.0-362.el9.aarch64", Some("2.34"))
        );
        let musl = Platform::parse("x86_64\n6.6.7\n").unwrap();
        assert_eq!(musl.glibc, None);
        assert_eq!(musl.to_string(), "x86_64 · 6.6.7 · glibc none");
        assert!(Platform::parse("").is_none());
    }

    #[test]
    fn an_old_glibc_is_named_too_old() {
        let old = Platform { machine: "x86_64".into(), kernel: "3.10.0".into(), glibc: Some("2.12".into()) };
        let stderr =
            "(exit status: 1) /root/fb: /lib64/libc.so.6: version `GLIBC_2.34' not found (required by /root/fb)";
        let why = why_not_started("/root/fb", Some(&old), stderr);
        assert!(why.starts_with("glibc 2.12 is too old: /root/fb needs glibc 2.34"), "{why}");
        let other = why_not_started("/root/fb", Some(&old), "(exit status: 126) Exec format error");
        assert!(other.contains("does not run there: (exit status: 126) Exec format error"), "{other}");
    }
}
