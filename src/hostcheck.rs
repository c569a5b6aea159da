//! `fabricbench hosts`: before a long run, check every host in parallel:
//! reachable over ssh, fabricbench present at the same version, clock
//! offset, and what the host is (its own `fabricbench facts`).

use std::time::{Duration, Instant};

use futures::future::join_all;
use serde::Serialize;

use crate::hostfacts::HostFacts;
use crate::hostfile::Host;
use crate::launch::ssh::SshLauncher;
use crate::metrics::clock::now_ns;
use crate::transport::rdma::ProbeReport;

#[derive(Clone, Debug, Serialize)]
pub struct HostCheck {
    pub host: String,
    pub reachable: bool,
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

impl HostCheck {
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// Checks every host at once (the launcher bounds concurrent connects).
pub async fn check_all(launcher: &SshLauncher, hosts: &[Host]) -> Vec<HostCheck> {
    join_all(hosts.iter().map(|h| check(launcher, h))).await
}

async fn check(launcher: &SshLauncher, host: &Host) -> HostCheck {
    let started = Instant::now();
    let mut result = HostCheck {
        host: host.name.clone(),
        reachable: false,
        version: None,
        rdma: None,
        facts: None,
        clock_offset_ms: None,
        rtt_ms: None,
        elapsed_ms: 0.0,
        problem: None,
    };
    let session = match launcher.session(&host.name).await {
        Ok(s) => s,
        Err(e) => {
            result.problem = Some(format!("unreachable: {e}"));
            result.elapsed_ms = ms(started.elapsed());
            return result;
        }
    };
    result.reachable = true;
    let ours = format!("fabricbench {}", env!("CARGO_PKG_VERSION"));
    let exe = match launcher.remote_exe(&host.name, &session).await {
        Ok(exe) => exe,
        Err(e) => {
            result.problem = Some(e);
            result.elapsed_ms = ms(started.elapsed());
            return result;
        }
    };
    match session.command(&exe).arg("--version").output().await {
        Ok(out) if out.status.success() => {
            let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if theirs != ours {
                result.problem = Some(format!("version mismatch: the host has `{theirs}`, this launcher is `{ours}`"));
            }
            result.version = Some(theirs);
        }
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            result.problem = Some(format!("{exe} does not run there ({}): {err}", out.status));
        }
        Err(e) => result.problem = Some(format!("cannot run {exe}: {e}")),
    }
    if result.problem.is_none() {
        result.rdma = rdma_ports(&session, &exe).await;
        result.facts = facts(&session, &exe).await;
    }
    let sent = now_ns();
    if let Ok(out) = session.command("date").arg("+%s%N").output().await {
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
async fn facts(session: &openssh::Session, exe: &str) -> Option<HostFacts> {
    let out = session.command(exe).args(["facts", "--json"]).output().await.ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// The host's RDMA ports from its own `fabricbench probe --json`.
async fn rdma_ports(session: &openssh::Session, exe: &str) -> Option<Vec<String>> {
    let out = session.command(exe).args(["probe", "--json"]).output().await.ok()?;
    let report: ProbeReport = serde_json::from_slice(&out.stdout).ok()?;
    let ports: Vec<String> = report
        .devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| format!("{}:{} {} {}", d.name, p.port, p.state, p.rate)))
        .collect();
    (!ports.is_empty()).then_some(ports)
}
