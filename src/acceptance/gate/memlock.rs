//! The locked memory a host's RDMA flows pin, held against the limit its
//! processes get (RLIMIT_MEMLOCK, read with its facts): a host whose limit
//! is below what one of its ranks registers in one phase would fail the
//! pairs at setup with ENOMEM; the gate names it first, with both numbers.

use std::collections::BTreeMap;

use crate::plan::{Plan, Transport};
use crate::transport::rdma::registered_len;

/// The most host memory one rank of each host registers in one phase for
/// its RDMA flows' buffers, bytes (queues come on top; buffers in GPU
/// memory are not charged to the limit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pinned {
    by_host: BTreeMap<String, u64>,
}

impl Pinned {
    /// What the run's plan registers: per phase, each rank's flow ends in
    /// host memory; per host, its rank and phase that register the most.
    pub fn of(plan: &Plan) -> Pinned {
        let mut by_host: BTreeMap<String, u64> = BTreeMap::new();
        for phase in &plan.phases {
            let mut by_rank: BTreeMap<usize, u64> = BTreeMap::new();
            for flow in &phase.flows {
                let Some(group) = phase.groups.get(flow.group).filter(|g| g.transport == Transport::Rdma) else {
                    continue;
                };
                let (Some(setup), Some(request)) = (group.rdma.as_ref(), group.rdma_request()) else { continue };
                let len = registered_len(&request);
                for (rank, in_gpu) in
                    [(flow.src, setup.memory.sender.is_gpu()), (flow.dst, setup.memory.receiver.is_gpu())]
                {
                    if !in_gpu {
                        *by_rank.entry(rank).or_default() += len;
                    }
                }
            }
            for (rank, bytes) in by_rank {
                let Some(info) = plan.ranks.get(rank) else { continue };
                let most = by_host.entry(info.host.clone()).or_default();
                *most = (*most).max(bytes);
            }
        }
        Pinned { by_host }
    }

    /// What `host` registers at most in one process (0: no RDMA buffers in host memory).
    pub fn on(&self, host: &str) -> u64 {
        self.by_host.get(host).copied().unwrap_or(0)
    }
}
