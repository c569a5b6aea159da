//! The Slurm environment the launcher reads inside an allocation
//! (`launch::slurm::Allocation::from_vars`): SLURM_JOB_ID,
//! SLURM_JOB_NODELIST (a hostlist) and SLURM_TASKS_PER_NODE (`2(x3),1`),
//! the input's lines in that order, a missing line an unset variable.
#![no_main]

use fabricbench::hostfile::MAX_RANKS;
use fabricbench::launch::slurm::Allocation;
use fabricbench_fuzz::check_host;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines: Vec<&str> = text.split('\n').collect();
    let var = |name: &str| {
        let at = ["SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE"].iter().position(|v| *v == name)?;
        lines.get(at).map(|line| line.to_string())
    };
    let Ok(Some(allocation)) = Allocation::from_vars(var) else { return };
    let nodes = &allocation.nodes;
    assert!(!nodes.is_empty() && nodes.len() <= MAX_RANKS, "{} ranks", nodes.len());
    nodes.iter().for_each(check_host);
    assert!(allocation.is_all(nodes));
    if lines.len() < 3 {
        assert!(nodes.iter().all(|n| n.slots == 1), "slots without SLURM_TASKS_PER_NODE");
    }
});
