//! The GPUs each rank's flow ends will be in, over every phase: what a rank
//! checks before it opens any end (the GPU preflight), so a run that names
//! a GPU a host lacks, or a host without the driver, ends before any data
//! moves rather than at the phase that first uses it.

use serde::{Deserialize, Serialize};

use super::{Flow, GroupPlan, Plan};
use crate::scenario::memory::{GpuChoice, GpuRegistration, Memory};

/// One GPU a rank's ends ask for, with the first place that asks for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuAsk {
    pub memory: Memory,
    pub gpu: GpuChoice,
    /// `gpu` is the rank's own from the hostfile's `gpus=`, not its group's.
    pub hostfile: bool,
    /// The NIC `gpu = "auto"` is resolved against (the rail's device;
    /// `None`: the host's first, as setup takes); `None` for any other `gpu`.
    pub nic: Option<String>,
    /// How the group asks the NIC to register the memory.
    pub registration: GpuRegistration,
    /// The first phase and group whose ends on this rank are in it.
    pub phase: usize,
    pub group: String,
}

impl Plan {
    /// The GPU each end of `flow` (sender, receiver) takes from its host's
    /// `gpus=` in place of the group's `gpu`: for an end the group puts in
    /// GPU memory only, so a `gpus=` host's ends in host memory stay there.
    pub fn host_gpus(&self, group: &GroupPlan, flow: &Flow) -> [Option<GpuChoice>; 2] {
        let Some(rdma) = group.rdma.as_ref() else { return [None, None] };
        let of = |rank: usize, memory: Memory| self.ranks[rank].gpu.clone().filter(|_| memory.is_gpu());
        [of(flow.src, rdma.memory.sender), of(flow.dst, rdma.memory.receiver)]
    }

    /// For each rank, the distinct (memory, GPU) its ends ask for in any
    /// phase; empty for a rank whose ends are all in host memory.
    pub fn gpu_asks(&self) -> Vec<Vec<GpuAsk>> {
        let mut asks: Vec<Vec<GpuAsk>> = vec![Vec::new(); self.ranks.len()];
        for phase in &self.phases {
            for flow in &phase.flows {
                let group = &phase.groups[flow.group];
                let Some(rdma) = group.rdma_request().filter(|r| r.memory.any_gpu()) else { continue };
                let [src_rails, dst_rails] = self.host_rails(group, flow);
                let [src_gpu, dst_gpu] = self.host_gpus(group, flow);
                let ends = [
                    (flow.src, rdma.memory.sender, src_rails, src_gpu),
                    (flow.dst, rdma.memory.receiver, dst_rails, dst_gpu),
                ];
                for (rank, memory, host_devices, host_gpu) in ends {
                    let Some(list) = asks.get_mut(rank).filter(|_| memory.is_gpu()) else { continue };
                    let hostfile = host_gpu.is_some();
                    let gpu = host_gpu.unwrap_or_else(|| rdma.gpu.clone());
                    // Under `auto` each rail may take another GPU: the one nearest its NIC.
                    for rail in rdma.rails_on(&host_devices) {
                        let nic = rail.knobs.device.filter(|_| gpu == GpuChoice::Auto);
                        let ask = GpuAsk {
                            memory,
                            gpu: gpu.clone(),
                            hostfile,
                            nic,
                            registration: rdma.knobs.gpu_registration,
                            phase: phase.index,
                            group: group.name.clone(),
                        };
                        let known = |a: &GpuAsk| {
                            (&a.memory, &a.gpu, a.hostfile, &a.nic, a.registration)
                                == (&memory, &ask.gpu, ask.hostfile, &ask.nic, ask.registration)
                        };
                        if !list.iter().any(known) {
                            list.push(ask);
                        }
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
        let sender = GpuAsk {
            memory: Memory::Cuda,
            gpu: GpuChoice::Index(3),
            hostfile: false,
            nic: None,
            registration: GpuRegistration::Auto,
            phase: 0,
            group: "gpu".into(),
        };
        assert_eq!(asks, [vec![], vec![sender], vec![], vec![]], "the senders' ends only, once over both phases");
    }

    /// A host's `gpus=` replaces the group's `gpu` for that rank's ends in
    /// GPU memory; its ends in host memory ask for none.
    #[test]
    fn a_hosts_gpus_entry_replaces_the_groups_gpu_for_its_ends_in_gpu_memory() {
        let toml = "[run]\nname = \"g\"\nduration = \"1s\"\n\n\
            [[group]]\nname = \"gpu\"\npattern = \"pairwise\"\ntransport = \"rdma\"\nflows = [[0, 1], [2, 0]]\n\
            memory = { sender = \"cuda\", receiver = \"host\" }\ngpu = 3\n";
        let (scenario, _) = crate::scenario::parse(toml, std::path::Path::new("g.toml")).expect("valid");
        let hosts = crate::hostfile::parse("h0 gpus=0000:1b:00.0\nh1 gpus=1\nh2\n", std::path::Path::new("hosts"))
            .expect("valid hostfile");
        let plan = crate::plan::build(&hosts, &scenario).unwrap();
        let asked =
            |rank: usize| plan.gpu_asks()[rank].iter().map(|a| (a.gpu.describe(), a.hostfile)).collect::<Vec<_>>();
        assert_eq!(asked(0), [("0000:1b:00.0".to_string(), true)], "h0 sends flow 0 from its own GPU");
        assert_eq!(asked(1), [], "h1 receives into host memory: its gpus= does nothing");
        assert_eq!(asked(2), [("3".to_string(), false)], "h2 has no gpus=: the group's gpu");
        let (group, flows) = (&plan.phases[0].groups[0], &plan.phases[0].flows);
        assert_eq!(plan.host_gpus(group, &flows[0]), [Some(GpuChoice::BusId("0000:1b:00.0".into())), None]);
        assert_eq!(plan.host_gpus(group, &flows[1]), [None, None], "h2 has none, h0 receives into host memory");
    }

    /// `gpu = "auto"` is resolved per rail, against the NIC each rail of
    /// each end opens (its host's `devices=` here): one ask per NIC.
    #[test]
    fn auto_asks_once_per_rail_nic_and_carry_the_registration() {
        let toml = "[run]\nname = \"g\"\nduration = \"1s\"\n\n\
            [[group]]\nname = \"gpu\"\npattern = \"pairwise\"\ntransport = \"rdma\"\nflows = [[0, 1]]\n\
            memory = \"cuda\"\n\n[group.rdma]\nqps = 2\ngpu_registration = \"peermem\"\n";
        let (scenario, _) = crate::scenario::parse(toml, std::path::Path::new("g.toml")).expect("valid");
        let mut hosts: Vec<Host> = (0..2).map(|i| Host::named(&format!("h{i}"))).collect();
        hosts[0].devices = vec!["mlx5_0".into(), "mlx5_3".into()];
        hosts[1].devices = vec!["mlx5_1".into(), "mlx5_2".into()];
        let asks = crate::plan::build(&hosts, &scenario).unwrap().gpu_asks();
        let nics: Vec<Vec<Option<&str>>> =
            asks.iter().map(|rank| rank.iter().map(|a| a.nic.as_deref()).collect()).collect();
        assert_eq!(nics, [vec![Some("mlx5_0"), Some("mlx5_3")], vec![Some("mlx5_1"), Some("mlx5_2")]]);
        assert!(asks.iter().flatten().all(|a| a.registration == GpuRegistration::Peermem && a.gpu == GpuChoice::Auto));
    }
}
