//! `run --topology lldp`: every worker's probe carries its host's
//! `lldpctl -f json` text; once every rank's probe is in, the topology is
//! built from them exactly as from a folder of those files, and the run
//! reports its leaf pairs by it. Pairs are chosen before any worker runs,
//! so the keys that choose them by the topology need the files instead.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail};

use crate::hostfacts::lldp::LldpOutput;
use crate::result::leaf_pairs::LeafPairs;
use crate::result::RunResult;
use crate::scenario::topology::RunTopology;
use crate::topology;

/// What the run's topology is called in messages and run.json's leaf pairs.
pub const SOURCE: &str = "lldp";

/// The hosts' texts as they come, one per host (its first rank's).
#[derive(Default)]
pub struct Gathering {
    texts: BTreeMap<String, LldpOutput>,
}

impl Gathering {
    pub fn add(&mut self, host: String, lldp: LldpOutput) {
        self.texts.entry(host).or_insert(lldp);
    }

    /// Once every rank's probe is in: the topology of every host of the
    /// run, its leaf pairs set in `result`; `None` while probes are missing.
    pub fn finish(&self, result: &mut RunResult) -> Option<anyhow::Result<RunTopology>> {
        if result.probes.len() < result.plan.ranks.len() || result.leaf_pairs.is_some() {
            return None;
        }
        let built = self.build(result.plan.ranks.iter().map(|r| r.host.as_str()));
        if let Ok(run) = &built {
            result.leaf_pairs = Some(LeafPairs::new(&run.path, &result.plan, &run.topology));
        }
        Some(built)
    }

    /// The topology of `hosts` (in rank order, a host once per rank).
    fn build<'a>(&self, hosts: impl Iterator<Item = &'a str> + Clone) -> anyhow::Result<RunTopology> {
        let mut texts = Vec::new();
        for host in hosts.clone() {
            match self.texts.get(host) {
                // Every rank is asked in its Welcome; one that was not is a bug, named all the same.
                None => bail!("--topology lldp: host {host} sent no LLDP neighbours in its probe"),
                Some(Err(e)) => bail!("--topology lldp: host {host}: {e}"),
                Some(Ok(text)) if !texts.iter().any(|(h, _)| *h == host) => texts.push((host, text.as_str())),
                Some(Ok(_)) => {}
            }
        }
        let path = Path::new(SOURCE);
        let topology = topology::from_lldp_texts(texts, path).map_err(|e| anyhow!("--topology lldp: {e}"))?;
        topology.check_placed(hosts, path).map_err(|e| anyhow!("--topology lldp: {e}"))?;
        Ok(RunTopology { path: path.to_path_buf(), topology })
    }
}
