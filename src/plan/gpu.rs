//! The GPUs each rank's flow ends will be in, over every phase: what a rank
//! checks before it opens any end (the GPU preflight), so a run that names
//! a GPU a host lacks, or a host without the driver, ends before any data
//! moves rather than at the phase that first uses it.

use serde::{Deserialize, Serialize};

use super::Plan;
use crate::scenario::memory::{GpuChoice, Memory};

/// One GPU a rank's ends ask for, with the first place that asks for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuAsk {
    pub memory: Memory,
    pub gpu: GpuChoice,
    /// The first phase and group whose ends on this rank are in it.
    pub phase: usize,
    pub group: String,
}

impl Plan {
    /// For each rank, the distinct (memory, GPU) its ends ask for in any
    /// phase; empty for a rank whose ends are all in host memory.
    pub fn gpu_asks(&self) -> Vec<Vec<GpuAsk>> {
        let mut asks: Vec<Vec<GpuAsk>> = vec![Vec::new(); self.ranks.len()];
        for phase in &self.phases {
            for flow in &phase.flows {
                let group = &phase.groups[flow.group];
                let Some(rdma) = group.rdma.as_ref().filter(|r| r.memory.any_gpu()) else { continue };
                for (rank, memory) in [(flow.src, rdma.memory.sender), (flow.dst, rdma.memory.receiver)] {
                    let known = |a: &GpuAsk| a.memory == memory && a.gpu == rdma.gpu;
                    match asks.get_mut(rank) {
                        Some(list) if memory.is_gpu() && !list.iter().any(known) => list.push(GpuAsk {
                            memory,
                            gpu: rdma.gpu.clone(),
                            phase: phase.index,
                            group: group.name.clone(),
                        }),
                        _ => {}
                    }
                }
            }
        }
        asks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostfile::Host;

    #[test]
    fn each_rank_asks_for_the_gpus_of_its_own_ends_once() {
        let toml = "[run]\nname = \"g\"\nduration = \"1s\"\n\n\
            [[group]]\nname = \"host\"\npattern = \"pairwise\"\ntransport = \"rdma\"\nflows = [[0, 1]]\n\n\
            [[group]]\nname = \"gpu\"\npattern = \"pairwise\"\ntransport = \"rdma\"\nflows = [[1, 2], [1, 3]]\n\
            memory = { sender = \"cuda\", receiver = \"host\" }\ngpu = 3\n\n\
            [sweep]\nparameter = \"message_size\"\nvalues = [65536, 1048576]\n";
        let (scenario, _) = crate::scenario::parse(toml, std::path::Path::new("g.toml")).expect("valid");
        let hosts: Vec<Host> = (0..4).map(|i| Host::named(&format!("h{i}"))).collect();
        let plan = crate::plan::build(&hosts, &scenario).unwrap();
        assert_eq!(plan.phases.len(), 2);
        let asks = plan.gpu_asks();
        let sender = GpuAsk { memory: Memory::Cuda, gpu: GpuChoice::Index(3), phase: 0, group: "gpu".into() };
        assert_eq!(asks, [vec![], vec![sender], vec![], vec![]], "the senders' ends only, once over both phases");
    }
}
