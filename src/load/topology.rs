//! CPU and NUMA layout from sysfs: which cores exist, which NUMA node each
//! belongs to, and which node a network or RDMA device hangs off, under
//! the sysfs root (crate::sysfs: /sys or FABRICBENCH_SYSFS_ROOT).

use std::path::{Path, PathBuf};

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (usize, usize) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
        cpus.extend(lo..=hi);
    }
    Some(cpus)
}

fn read_list(path: &Path) -> Option<Vec<usize>> {
    parse_cpu_list(&std::fs::read_to_string(path).ok()?)
}

/// The sysfs root (crate::sysfs), /sys when FABRICBENCH_SYSFS_ROOT is invalid.
fn sys() -> PathBuf {
    crate::sysfs::root().unwrap_or_else(|_| PathBuf::from("/sys"))
}

/// The cores this machine has online.
pub fn online_cpus() -> Vec<usize> {
    online_cpus_at(&sys())
}

/// The cores online under the sysfs root `sys` (`devices/system/cpu/online`).
pub fn online_cpus_at(sys: &Path) -> Vec<usize> {
    read_list(&sys.join("devices/system/cpu/online")).unwrap_or_else(|| (0..num_cpus::get()).collect())
}

/// The cores of NUMA node `node`.
pub fn node_cpus(node: usize) -> Option<Vec<usize>> {
    node_cpus_at(&sys(), node)
}

fn node_cpus_at(sys: &Path, node: usize) -> Option<Vec<usize>> {
    read_list(&sys.join("devices/system/node").join(format!("node{node}")).join("cpulist"))
}

/// One NUMA node: its number and its cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNode {
    pub id: usize,
    pub cpus: Vec<usize>,
}

/// Every NUMA node with its cores, by number.
pub fn nodes() -> Vec<NumaNode> {
    nodes_at(&sys())
}

/// Every NUMA node under the sysfs root `sys`, with its cores, by number.
pub fn nodes_at(sys: &Path) -> Vec<NumaNode> {
    let Ok(entries) = std::fs::read_dir(sys.join("devices/system/node")) else { return Vec::new() };
    let mut nodes: Vec<NumaNode> = entries
        .flatten()
        .filter_map(|e| {
            let id: usize = e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?;
            Some(NumaNode { id, cpus: node_cpus_at(sys, id)? })
        })
        .collect();
    // One entry per node: its number alone orders them.
    nodes.sort_by_key(|n| n.id);
    nodes
}

/// The NUMA nodes `cores` belong to, by number, each once.
pub fn nodes_of(cores: &[usize]) -> Vec<usize> {
    nodes_of_at(&sys(), cores)
}

fn nodes_of_at(sys: &Path, cores: &[usize]) -> Vec<usize> {
    let nodes = nodes_at(sys);
    let of = |core: &usize| nodes.iter().find(|n| n.cpus.contains(core)).map(|n| n.id);
    let mut found: Vec<usize> = cores.iter().filter_map(of).collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// The NUMA node of a network interface's device (`None` for virtual
/// devices such as lo or veth, and on machines without NUMA).
pub fn iface_node(iface: &str) -> Option<usize> {
    let text = std::fs::read_to_string(sys().join("class/net").join(iface).join("device/numa_node")).ok()?;
    usize::try_from(text.trim().parse::<i64>().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn cores_map_to_their_nodes_in_a_recorded_tree() {
        // two-nics: node 0 has cores 0-27 and 56-83, node 1 28-55 and 84-111.
        let sys = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/two-nics/sys");
        assert_eq!(nodes_of_at(&sys, &[0, 60]), [0]);
        assert_eq!(nodes_of_at(&sys, &[30, 90, 1]), [0, 1]);
        assert_eq!(nodes_of_at(&sys, &[500]), [] as [usize; 0], "a core of no node");
    }

    #[test]
    fn this_machine_has_cores() {
        let cpus = online_cpus();
        assert!(!cpus.is_empty());
        assert_eq!(iface_node("lo"), None);
    }
}
