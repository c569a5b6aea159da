//! Starting a run's workers: the first line each is handed (rank 0's job
//! spec, the members', a step's), the launch that hands them over
//! (`launch::start`), then rank 0's address to those that wait for it.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};
use rand::Rng;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::control::wire::Window;
use crate::hostfile::Host;
use crate::launch::ssh::SshOptions;
use crate::launch::start::{self, TreeLaunch};
use crate::launch::tree::Subtree;
use crate::launch::workers::{MemberRefused, Workers};
use crate::launch::Launch;
use crate::worker::mpi::{self, MpiJob};
use crate::worker::relay::member_spec;
use crate::worker::srun::{CoordinatorAt, SrunSpec};
use crate::worker::{JobSpec, Role, WorkerOutput};

use super::{next_output, Events, Gather, Prepared, RunOptions, EXIT_GRACE};

/// How long rank 0 may take to start listening.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(20);

/// Starts every worker as `launch` does, each handed its first line, and
/// waits until rank 0 listens; the others learn its address on their
/// stdin where the launch started them before it listened.
pub(super) async fn start_workers(
    prepared: &Prepared,
    launch: &Launch,
    opts: &RunOptions,
    workers: &mut Workers,
    job: u64,
    token: &str,
) -> anyhow::Result<Events> {
    let hosts = &prepared.hosts;
    let rank0 = || serde_json::to_string(&rank0_spec(prepared, opts.port, job, token));
    let member = |subtree: &Subtree, ssh: Option<&SshOptions>| {
        serde_json::to_string(&member_spec(job, token, None, subtree, ssh))
    };
    let (stdout0, tell) = match launch {
        Launch::PerHost(launcher) => {
            (start::per_host(launcher.as_ref(), hosts, None, workers, &rank0()?, &member).await?, Tell::Members)
        }
        Launch::Tree { ssh, radix } => {
            let tree = Some(TreeLaunch { radix: *radix, ssh: ssh.options() });
            (start::per_host(ssh, hosts, tree, workers, &rank0()?, &member).await?, Tell::Members)
        }
        Launch::Srun(slurm) => {
            let listed = (!slurm.is_allocation(hosts)).then(|| hosts.clone());
            let line = serde_json::to_string(&step_spec(prepared, opts.port, job, token, listed))?;
            (start::srun(slurm, hosts, workers, &line).await?, Tell::Step)
        }
        Launch::Mpirun(mpirun) => {
            // The members connect before rank 0 could tell them a port it chose.
            let port = match opts.port {
                0 => rand::thread_rng().gen_range(mpi::PORTS),
                port => port,
            };
            let shared = serde_json::to_string(&MpiJob { job, token: token.to_string(), hosts: hosts.clone(), port })?;
            let line = serde_json::to_string(&step_spec(prepared, port, job, token, Some(hosts.clone())))?;
            (start::mpirun(mpirun, hosts, workers, mpi::JOB_VAR, &shared, &line).await?, Tell::Nobody)
        }
        Launch::Joined { local, .. } => (start::alone(local, &hosts[0], workers, &rank0()?).await?, Tell::Nobody),
    };
    let mut events = BufReader::new(stdout0).lines();
    let coordinator = listening(&mut events, workers, &hosts[0]).await?;
    let line = serde_json::to_string(&CoordinatorAt { coordinator })?;
    match tell {
        Tell::Members => {
            if let Err(MemberRefused { rank, error }) = workers.send_to_members(&line).await {
                bail!("sending rank {rank} ({}) rank 0's address: {error}", workers.host(rank));
            }
        }
        Tell::Step => workers.send_to_last(&line).await.context("sending the srun step rank 0's address")?,
        Tell::Nobody => {}
    }
    Ok(events)
}

/// Who is told rank 0's address once it listens.
enum Tell {
    /// Every worker started beside rank 0, on its own stdin.
    Members,
    /// The srun step, on the stdin its tasks share.
    Step,
    /// No one: mpirun's ranks know the port from the start.
    Nobody,
}

/// Rank 0's job spec: serve the coordinator on `port` (0: any).
fn rank0_spec(prepared: &Prepared, port: u16, job: u64, token: &str) -> JobSpec {
    let host0 = &prepared.hosts[0];
    JobSpec {
        job,
        token: token.to_string(),
        rank: 0,
        host: host0.name.clone(),
        bind: host0.host_addr().to_string(),
        data_addr: host0.nic_addr().map(str::to_string),
        role: Role::Coordinator {
            plan: Box::new(prepared.plan.clone()),
            window: Window::of(&prepared.scenario.run),
            port,
            lldp: matches!(prepared.gather, Some(Gather::Lldp)),
        },
        relay: None,
        devices: host0.devices.clone(),
    }
}

/// What rank 0 of a step (srun, mpirun) reads first: it plans from the
/// scenario unless this plan is another (a retest, a topology's, a gate's).
fn step_spec(prepared: &Prepared, port: u16, job: u64, token: &str, hosts: Option<Vec<Host>>) -> SrunSpec {
    SrunSpec {
        job,
        token: token.to_string(),
        hosts,
        scenario: prepared.scenario.clone(),
        phases: (!prepared.scenario_plan).then(|| prepared.plan.phases.clone()),
        port,
        lldp: matches!(prepared.gather, Some(Gather::Lldp)),
    }
}

/// Waits for rank 0 to say where its coordinator listens.
async fn listening(events: &mut Events, workers: &mut Workers, host0: &Host) -> anyhow::Result<SocketAddr> {
    match tokio::time::timeout(LISTEN_TIMEOUT, next_output(events)).await {
        Ok(Ok(Some(WorkerOutput::Listening { addr, version }))) if version == env!("CARGO_PKG_VERSION") => Ok(addr),
        Ok(Ok(Some(WorkerOutput::Listening { version, .. }))) => bail!(
            "rank 0 ({}) runs fabricbench {version}, this launcher is fabricbench {}; install one version everywhere (or use --remote-exe)",
            host0.name,
            env!("CARGO_PKG_VERSION")
        ),
        Ok(Ok(_)) | Ok(Err(_)) => {
            let _ = tokio::time::timeout(EXIT_GRACE, workers.exits.recv()).await;
            bail!("rank 0 ({}) exited before its coordinator listened{}", host0.name, workers.stderr_tail(0))
        }
        Err(_) => bail!("rank 0 ({}) did not start its coordinator within {LISTEN_TIMEOUT:?}", host0.name),
    }
}
