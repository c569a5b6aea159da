//! `fabricbench worker`: the process the launcher starts on every host.
//! It reads its job spec from stdin (never argv: the token is a secret),
//! runs until the coordinator says Bye, and exits when stdin closes.
//! Rank 0 also serves the coordinator and reports to the launcher on stdout.
//! Under Slurm (`--slurm`) the spec comes as what srun hands every task (`srun`);
//! under mpirun (`--mpi`) from the environment and, for rank 0, stdin (`mpi`).

mod agent;
mod assign;
mod cq_groups;
pub mod engine;
mod gpu;
mod gpu_registration;
pub(crate) mod mpi;
mod phase;
pub(crate) mod relay;
mod sampler;
mod session;
pub mod srun;
mod streams;
mod work;

use std::io::{BufRead, Write};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::control::coordinator::{Coordinator, Event, Timeouts};
use crate::control::driver;
use crate::control::instruction::Instruction;
use crate::control::wire::Window;
use crate::load::placement;
use crate::metrics::clock::Epoch;
use crate::plan::Plan;

pub use agent::AgentError;

/// How long rank 0 waits, after the run, for the launcher to close its stdin.
const LINGER: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a worker may take to exit after its stdin closed.
const STOP_LEASE: std::time::Duration = std::time::Duration::from_secs(5);
/// How long blocking work may hold a stopped worker before it exits anyway.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Everything a worker needs, sent as one JSON line on its stdin.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobSpec {
    pub job: u64,
    pub token: String,
    pub rank: usize,
    pub host: String,
    /// The host's address: rank 0's coordinator listens on it, and the
    /// data plane binds to it unless `data_addr` is given.
    pub bind: String,
    /// This rank's own address for its data (the hostfile's `addrs=`): its
    /// TCP listeners and outgoing data connections bind to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_addr: Option<String>,
    pub role: Role,
    /// In a tree launch: the workers this one starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<relay::Relay>,
    /// The RDMA devices the hostfile bound this rank to (`devices=`); with
    /// one, the whole worker starts on that device's NUMA node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Role {
    /// Rank 0: serve the coordinator on `port` (0 = any) and join it.
    /// `lldp`: every rank's probe carries its LLDP neighbours (`run --topology lldp`).
    Coordinator {
        plan: Box<Plan>,
        window: Window,
        port: u16,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        lldp: bool,
    },
    /// Every other rank: join the coordinator at this address; `None`: the
    /// address follows on stdin as a [`srun::CoordinatorAt`] line once rank
    /// 0 listens (every worker starts at once, in one round trip).
    Member { coordinator: Option<SocketAddr> },
}

/// The job spec from the launcher (not under Slurm): a [`JobSpec`] line,
/// then, for a member whose spec has no address, a [`srun::CoordinatorAt`].
pub fn read_spec(stdin: &mut impl BufRead) -> anyhow::Result<JobSpec> {
    let mut line = String::new();
    stdin.read_line(&mut line).context("reading the job spec from stdin")?;
    let mut spec: JobSpec = serde_json::from_str(&line).context("the job spec on stdin is not valid JSON")?;
    if let Role::Member { coordinator: coordinator @ None } = &mut spec.role {
        let at: srun::CoordinatorAt = srun::read_line(stdin, "rank 0's address")?;
        *coordinator = Some(at.coordinator);
    }
    Ok(spec)
}

/// What rank 0 tells the launcher on stdout, one JSON object per line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WorkerOutput {
    /// The coordinator listens; `version` is the worker's fabricbench version.
    Listening {
        addr: SocketAddr,
        version: String,
    },
    Event(Event),
}

/// Who started this worker, so where its job spec comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Starter {
    /// The launcher, over this worker's own stdin (local, ssh, a tree).
    Launcher,
    /// A task of the launcher's srun step.
    Srun,
    /// A rank of the launcher's mpirun job.
    Mpirun,
}

/// Runs a worker: reads the spec (see [`Starter`]), exits when stdin closes.
/// `label` is the rank the launcher put on the command line for `ps`.
pub fn main(label: Option<usize>, starter: Starter) -> anyhow::Result<()> {
    let env = |name: &str| std::env::var(name).ok();
    let spec: JobSpec = match starter {
        Starter::Srun => srun::job_spec(&mut std::io::stdin().lock(), env)?,
        Starter::Mpirun => mpi::job_spec(&mut std::io::stdin().lock(), env)?,
        Starter::Launcher => read_spec(&mut std::io::stdin().lock())?,
    };
    if label.is_some_and(|rank| rank != spec.rank) {
        bail!("started as rank {} but the job spec on stdin is for rank {}", label.unwrap_or_default(), spec.rank);
    }
    // mpirun gives only rank 0 the launcher's stdin (the others' is empty):
    // they end with the coordinator's Bye, or with mpirun's SIGTERM.
    let watch_stdin = starter != Starter::Mpirun || spec.rank == 0;
    run_job(spec, watch_stdin)
}

/// Runs the job of `spec` until Bye; `watch_stdin`: stdin carries rank 0's
/// instructions and its end stops the worker.
pub fn run_job(spec: JobSpec, watch_stdin: bool) -> anyhow::Result<()> {
    let bind = resolve(&spec.bind)?;
    let data = match &spec.data_addr {
        Some(own) => resolve(own)?,
        None => bind,
    };
    // The GID auto-choice prefers the interface this address is on.
    crate::transport::rdma::set_data_address(data);
    // One rank per NIC runs where its NIC is, as `numactl --cpunodebind`
    // would start it: every thread made from here on inherits the cores;
    // a group's own `cores`/`numa` still pins its threads as it asks.
    if let [device] = spec.devices.as_slice() {
        let cores = placement::near_node(crate::transport::rdma::numa_node(device));
        if let Err(e) = placement::pin_current_thread(&cores) {
            tracing::warn!("rank {}: could not start near {device}: {e}", spec.rank);
        }
    }

    let (shutdown_tx, shutdown) = watch::channel(false);
    let (instruct, instructions) = mpsc::unbounded_channel();
    // Without stdin the senders are held for the whole run: dropped, they would read as a stop.
    let _held = match watch_stdin {
        true => {
            watch_stdin_lines(shutdown_tx, instruct);
            None
        }
        false => Some((shutdown_tx, instruct)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let outcome = runtime.block_on(async move {
        let me = agent::Identity {
            job: spec.job,
            token: spec.token.clone(),
            rank: spec.rank,
            host: spec.host.clone(),
            bind,
            data,
        };
        match (spec.role, spec.relay) {
            (Role::Member { coordinator: None }, _) => bail!("no coordinator address in the job spec"),
            (Role::Member { coordinator: Some(coordinator) }, None) => {
                agent::run(&me, coordinator, shutdown).await.map_err(anyhow::Error::from)
            }
            (Role::Member { coordinator: Some(coordinator) }, Some(relay)) => {
                let own = async { agent::run(&me, coordinator, shutdown.clone()).await.map_err(anyhow::Error::from) };
                let below =
                    async { relay::run(&me, relay, coordinator, shutdown.clone()).await.map_err(anyhow::Error::from) };
                tokio::try_join!(own, below).map(|_| ())
            }
            (Role::Coordinator { plan, window, port, lldp }, _) => {
                serve(&me, (*plan, lldp), window, port, instructions, shutdown).await
            }
        }
    });
    // Work off the async threads may be blocked in a system call (a connect
    // to a frozen host waits its 10 s timeout, then writes for as long):
    // dropping the runtime would wait for it, so a stopped worker gets a
    // short grace and then exits, its threads with it.
    runtime.shutdown_timeout(EXIT_GRACE);
    outcome
}

/// Forwards rank 0's instructions from stdin; its end stops the worker,
/// which is gone within the lease whatever it is blocked in.
fn watch_stdin_lines(shutdown_tx: watch::Sender<bool>, instruct: mpsc::UnboundedSender<Instruction>) {
    std::thread::spawn(move || {
        // The launcher closes our stdin to stop us (also when ssh drops);
        // before that it tells rank 0 what it saved, or to end the run.
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str(&line) {
                // Only rank 0 keeps the receiver; the others' sends go nowhere.
                Ok(instruction) => {
                    let _ = instruct.send(instruction);
                }
                // Under srun every task reads every line (rank 0 too: its own address).
                Err(e) => tracing::debug!("ignored a line on stdin that is no instruction ({e})"),
            }
        }
        let _ = shutdown_tx.send(true);
        // The lease: a worker told to stop is gone within it, whatever its
        // threads are blocked in or waiting for (a phase's window).
        std::thread::sleep(STOP_LEASE);
        tracing::warn!("still running {STOP_LEASE:?} after stdin closed; exiting");
        std::process::exit(i32::from(crate::exit::Exit::RunFailed.code()));
    });
}

/// Rank 0: the coordinator and this rank's own agent, side by side.
async fn serve(
    me: &agent::Identity,
    (plan, lldp): (Plan, bool),
    window: Window,
    port: u16,
    instructions: mpsc::UnboundedReceiver<Instruction>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let listener = driver::listen(SocketAddr::new(me.bind, port))
        .with_context(|| format!("cannot listen for workers on {}:{port}", me.bind))?;
    let addr = listener.local_addr()?;
    emit(&WorkerOutput::Listening { addr, version: env!("CARGO_PKG_VERSION").to_string() });
    let coordinator = {
        let timeouts = Timeouts::for_ranks(plan.ranks.len());
        let coordinator = Coordinator::new(me.job, me.token.clone(), plan, window, timeouts, Epoch::now());
        if lldp {
            coordinator.gathering_lldp()
        } else {
            coordinator
        }
    };
    let coordinate =
        driver::spawn(listener, coordinator, instructions, shutdown.clone(), |event| emit(&WorkerOutput::Event(event)))
            .context("cannot start the coordinator's thread")?;
    let mut done = shutdown.clone();
    let (_, own) = tokio::join!(coordinate, agent::run(me, addr, shutdown));
    // Rank 0's own failures are reported by the coordinator already.
    if let Err(e) = own {
        tracing::debug!("rank 0 agent ended: {e}");
    }
    // Stay until the launcher has read everything and closes stdin (bounded,
    // should the launcher be gone): a process that exits right after its
    // last line races that line through ssh's session teardown, and the
    // launcher could see the end of the stream first.
    if !*done.borrow_and_update() {
        let _ = tokio::time::timeout(LINGER, done.changed()).await;
    }
    Ok(())
}

fn emit(output: &WorkerOutput) {
    let mut stdout = std::io::stdout().lock();
    let line = serde_json::to_string(output).expect("worker output serializes");
    // The launcher learns everything through these lines: say so when one is lost.
    if let Err(e) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        tracing::error!("cannot tell the launcher `{}…`: {e}", line.chars().take(40).collect::<String>());
    }
}

pub(crate) fn resolve(addr: &str) -> anyhow::Result<IpAddr> {
    if let Ok(ip) = addr.parse() {
        return Ok(ip);
    }
    (addr, 0)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve data address `{addr}`"))?
        .next()
        .map(|a| a.ip())
        .ok_or_else(|| anyhow!("`{addr}` resolves to no address"))
}
