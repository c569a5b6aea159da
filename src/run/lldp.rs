//! `run --topology lldp`: the hosts' LLDP neighbours are gathered before
//! the run is planned, by a launch of its own. The same workers, started
//! the same way, join rank 0 with a plan of no phases: each probes its
//! host, `lldpctl -f json` included, and the launch ends once every probe
//! is in. The topology is built from those texts exactly as from a folder
//! of those files, and the run is then planned and judged on it as on any
//! topology file (patterns, switch suspects, leaf pairs, the tree). A
//! second launch costs a second or two; planning after the workers joined
//! instead would leave the plan, the node gate and the retest each a way
//! of their own to learn of a topology.

use std::collections::BTreeMap;
use std::path::Path;

use crate::hostfacts::lldp::LldpOutput;
use crate::hostfile::Host;
use crate::launch::Launch;
use crate::result::RunStatus;
use crate::scenario::topology::RunTopology;
use crate::topology;

use super::{plan_on, run_with, Prepared, RunOptions};

/// What the run's topology is called in messages and run.json's leaf pairs.
pub const SOURCE: &str = "lldp";

/// Why `--topology lldp` gave the run no topology.
#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    /// A host's lldpctl is missing or failed, or what the hosts saw places
    /// not every host or cannot plan the scenario: the hosts' setup or the
    /// inputs, found before anything is measured.
    #[error("--topology lldp: {0}")]
    Topology(String),
    /// The gathering launch did not end well (a worker did not start, died
    /// or was stopped).
    #[error("--topology lldp: gathering the hosts' LLDP neighbours failed: {0}")]
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

/// With `--topology lldp`, gathers the hosts' LLDP neighbours by a launch
/// of the run's workers and plans the run on the topology they give; any
/// other run is returned as it is. Every worker of the launch has ended
/// when this returns, whatever the outcome.
pub async fn gather(prepared: Prepared, launch: &Launch, opts: &RunOptions) -> Result<Prepared, GatherError> {
    if !prepared.lldp {
        return Ok(prepared);
    }
    if matches!(launch, Launch::Joined { .. }) {
        // `fabricbench run` refuses this on every rank first (bad input); here for any other caller.
        return Err(GatherError::Launch(
            "mpirun started the ranks for one run, and gathering is a launch of its own: use --launcher mpirun".into(),
        ));
    }
    let mut gathering = Gathering::default();
    let probing =
        Prepared { plan: crate::plan::Plan { phases: Vec::new(), ..prepared.plan.clone() }, ..prepared.clone() };
    let launched = run_with(probing, launch, opts, &mut (), Some(&mut gathering)).await;
    match launched.map(|r| r.status) {
        Err(e) => return Err(GatherError::Launch(format!("{e:#}"))),
        Ok(RunStatus::Failed { error }) => return Err(GatherError::Launch(error)),
        Ok(_) => {}
    }
    let built = gathering.build(&prepared.hosts)?;
    if opts.progress {
        crate::diag!("topology {}:\n{}", built.path.display(), built.topology.render().trim_end());
    }
    let plan = plan_on(&prepared.hosts, &prepared.scenario, Some(&built)).map_err(|bad| {
        GatherError::Topology(format!("the scenario cannot be planned on the topology the hosts' LLDP gave: {bad}"))
    })?;
    Ok(Prepared { plan, topology: Some(built), lldp: false, ..prepared })
}
