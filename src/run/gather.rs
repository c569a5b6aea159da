//! What a run learns of its fabric from its hosts before it is planned,
//! by a launch of its own: the same workers, started the same way, join
//! rank 0 with a plan of no phases, each probes its host, and the launch
//! ends once every probe is in.
//!
//! - `run --topology lldp`: each probe carries its host's `lldpctl -f json`
//!   text, and the topology is built from those texts exactly as from a
//!   folder of those files.
//! - An ibnetdiscover topology whose node descriptions do not place every
//!   rank: each probe carries its host's RDMA devices and their node GUIDs,
//!   and the dump's HCAs are placed on the hosts that reported them.
//!
//! The run is then planned and judged on the topology as on any topology
//! file (patterns, switch suspects, leaf pairs, the tree). A second launch
//! costs a second or two; planning after the workers joined instead would
//! leave the plan, the node gate and the retest each a way of their own to
//! learn of a topology.

use std::collections::BTreeMap;
use std::path::Path;

use crate::hostfacts::lldp::LldpOutput;
use crate::hostfile::Host;
use crate::launch::Launch;
use crate::result::{RankProbe, RunResult, RunStatus};
use crate::scenario::topology::RunTopology;
use crate::topology::{self, ReportedHca};

use super::{plan_on, run_with, Prepared, RunOptions};

/// What the run's topology is called in messages and run.json's leaf pairs.
pub const SOURCE: &str = "lldp";

/// What is still to be learnt from the hosts before the run is planned.
#[derive(Clone, Debug)]
pub enum Gather {
    /// `--topology lldp`: the topology itself, from the hosts' LLDP.
    Lldp,
    /// A topology read whose node descriptions do not place every rank:
    /// where its HCAs are, from the node GUIDs the hosts report.
    Guids(RunTopology),
}

/// Why gathering gave the run no topology.
#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    /// A host's lldpctl is missing or failed, or what the hosts reported
    /// places not every host or cannot plan the scenario: the hosts' setup
    /// or the inputs, found before anything is measured.
    #[error("{0}")]
    Topology(String),
    /// The gathering launch did not end well (a worker did not start, died
    /// or was stopped).
    #[error("{0}")]
    Launch(String),
}

/// The hosts' texts as they come, one per host (its first rank's).
#[derive(Default)]
pub struct Gathering {
    texts: BTreeMap<String, LldpOutput>,
}

impl Gathering {
    pub fn add(&mut self, host: String, lldp: LldpOutput) {
        self.texts.entry(host).or_insert(lldp);
    }

    /// The topology of `ranks` (each rank's host, in rank order).
    fn build(&self, ranks: &[Host]) -> Result<RunTopology, GatherError> {
        let mut texts = Vec::new();
        for host in ranks.iter().map(|h| h.name.as_str()) {
            match self.texts.get(host) {
                // Every rank is asked in its Welcome; one that was not is a bug, named all the same.
                None => return Err(GatherError::Topology(format!("host {host} sent no LLDP neighbours in its probe"))),
                Some(Err(e)) => return Err(GatherError::Topology(format!("host {host}: {e}"))),
                Some(Ok(text)) if !texts.iter().any(|(h, _)| *h == host) => texts.push((host, text.as_str())),
                Some(Ok(_)) => {}
            }
        }
        let path = Path::new(SOURCE);
        let bad = |e: topology::TopologyError| GatherError::Topology(e.to_string());
        let topology = topology::from_lldp_texts(texts, path).map_err(bad)?;
        topology.check_placed(ranks, path).map_err(bad)?;
        Ok(RunTopology { path: path.to_path_buf(), topology })
    }
}

/// Gathers what `prepared.gather` asks of the hosts by a launch of the
/// run's workers and plans the run on the topology it gives; any other run
/// is returned as it is. Every worker of the launch has ended when this
/// returns, whatever the outcome.
pub async fn gather(mut prepared: Prepared, launch: &Launch, opts: &RunOptions) -> Result<Prepared, GatherError> {
    let Some(asked) = prepared.gather.take() else { return Ok(prepared) };
    let (flag, what, source) = match &asked {
        Gather::Lldp => ("--topology lldp".to_string(), "LLDP neighbours", "the hosts' LLDP"),
        Gather::Guids(read) => {
            (format!("topology {} (HCAs by node GUID)", read.path.display()), "RDMA devices", "the node GUIDs reported")
        }
    };
    let failed = |cause| GatherError::Launch(format!("{flag}: gathering the hosts' {what} failed: {cause}"));
    if matches!(launch, Launch::Joined { .. }) {
        // `fabricbench run` refuses this on every rank first (bad input); here for any other caller.
        return Err(failed(
            "mpirun started the ranks for one run, and gathering is a launch of its own: use --launcher mpirun".into(),
        ));
    }
    let mut gathering = Gathering::default();
    // The probing launch asks the workers for their LLDP where that is what is gathered.
    let probing = Prepared {
        plan: crate::plan::Plan { phases: Vec::new(), ..prepared.plan.clone() },
        gather: matches!(asked, Gather::Lldp).then_some(Gather::Lldp),
        ..prepared.clone()
    };
    let probes = match run_with(probing, launch, opts, &mut (), Some(&mut gathering)).await {
        Err(e) => return Err(failed(format!("{e:#}"))),
        Ok(RunResult { status: RunStatus::Failed { error }, .. }) => return Err(failed(error)),
        Ok(r) => r.probes,
    };
    let built = match asked {
        Gather::Lldp => {
            gathering.build(&prepared.hosts).map_err(|e| GatherError::Topology(format!("--topology lldp: {e}")))
        }
        Gather::Guids(read) => placed_by_guid(read, &probes, &prepared.hosts, opts.progress),
    }?;
    if opts.progress {
        crate::diag!("topology {}:\n{}", built.path.display(), built.topology.render().trim_end());
    }
    let plan = plan_on(&prepared.hosts, &prepared.scenario, Some(&built)).map_err(|bad| {
        GatherError::Topology(format!("the scenario cannot be planned on the topology {source} gave: {bad}"))
    })?;
    Ok(Prepared { plan, topology: Some(built), ..prepared })
}

/// `read` with each HCA a host's probe reported placed on that host, every
/// rank then placed; the error names a rank's host still unplaced, with
/// the GUIDs its devices have.
fn placed_by_guid(
    mut read: RunTopology,
    probes: &[RankProbe],
    ranks: &[Host],
    progress: bool,
) -> Result<RunTopology, GatherError> {
    let reported: Vec<ReportedHca> = probes
        .iter()
        .flat_map(|p| p.facts.iter().flat_map(|f| &f.rdma_devices).map(move |d| (p.host.as_str(), d)))
        .filter_map(|(host, d)| Some(ReportedHca { host, nic: &d.name, guid: d.node_guid? }))
        .collect();
    let path = read.path.display().to_string();
    let placed = read.topology.place_by_guid(&reported).map_err(|e| GatherError::Topology(format!("{path}: {e}")))?;
    if progress {
        crate::diag!("topology {path}: {} HCA(s) placed by the node GUIDs their hosts reported", placed.len());
    }
    read.topology.check_placed(ranks, &read.path).map_err(|e| {
        let host = match &e {
            topology::TopologyError::Unplaced { host, .. } | topology::TopologyError::NicUnplaced { host, .. } => host,
            _ => return GatherError::Topology(e.to_string()),
        };
        let theirs: Vec<String> =
            reported.iter().filter(|r| r.host == host).map(|r| format!("{} {}", r.nic, r.guid)).collect();
        let theirs = if theirs.is_empty() { "none".to_string() } else { theirs.join(", ") };
        GatherError::Topology(format!("{e}; nor by node GUID: the devices {host} reported with theirs: {theirs}"))
    })?;
    Ok(read)
}
