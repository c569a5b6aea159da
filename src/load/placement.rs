//! Where threads run: explicit cores, or the NUMA node near (or far from)
//! the device the traffic uses, as the scenario asks; and pinning to them.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::load::topology;
use crate::scenario::placement::{Numa, Placement};
use crate::sysfs::RootError;

/// Why a placement cannot be resolved on this host, or a thread not pinned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    #[error("core {core} does not exist on this host (online cores: {online})", online = list(.online))]
    NoSuchCore { core: usize, online: Vec<usize> },
    #[error(transparent)]
    Sysfs(#[from] RootError),
    #[error("core {core}: {cause}")]
    BadCore { core: usize, cause: nix::Error },
    #[error("cannot pin to cores {cores}: {cause}", cores = list(.cores))]
    Pin { cores: Vec<usize>, cause: nix::Error },
}

/// The cores chosen on this host (empty: not pinned), and why if the request
/// could not be met as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    pub cores: Vec<usize>,
    pub note: Option<String>,
}

/// Resolves a placement on this host; `device_node` is the NUMA node of the
/// device the rank's traffic uses, when known.
pub fn resolve(placement: &Placement, device_node: Option<usize>) -> Result<Placed, PlacementError> {
    resolve_at(placement, device_node, &crate::sysfs::root()?)
}

/// [`resolve`] on the host whose sysfs is under `sys` (a recorded tree in tests).
pub fn resolve_at(placement: &Placement, device_node: Option<usize>, sys: &Path) -> Result<Placed, PlacementError> {
    let online = topology::online_cpus_at(sys);
    if let Some(cores) = &placement.cores {
        if let Some(&core) = cores.iter().find(|c| !online.contains(c)) {
            return Err(PlacementError::NoSuchCore { core, online });
        }
        return Ok(Placed { cores: cores.clone(), note: None });
    }
    let nodes = topology::nodes_at(sys);
    let Some(node) = device_node else {
        return Ok(match placement.numa {
            Numa::Auto | Numa::Any => Placed::default(),
            numa => Placed {
                cores: Vec::new(),
                note: Some(format!(
                    "numa = {numa:?}: the device has no NUMA node (virtual, or one-node host); not pinned"
                )),
            },
        });
    };
    let near: Vec<usize> = nodes.iter().filter(|n| n.id == node).flat_map(|n| n.cpus.clone()).collect();
    let far: Vec<usize> = nodes.iter().filter(|n| n.id != node).flat_map(|n| n.cpus.clone()).collect();
    Ok(match placement.numa {
        Numa::Auto | Numa::Any => Placed::default(),
        Numa::Near => Placed { cores: near, note: None },
        Numa::Far if far.is_empty() => Placed {
            cores: Vec::new(),
            note: Some(format!("numa = far: node {node} is the only NUMA node; not pinned")),
        },
        Numa::Far => Placed { cores: far, note: None },
    })
}

/// The cores of NUMA node `node` when there is a choice to make: empty
/// (no pinning) when the node is unknown (a virtual device), has no cores
/// listed, or is the host's only node.
pub fn near_node(node: Option<i32>) -> Vec<usize> {
    let Some(node) = node.and_then(|n| usize::try_from(n).ok()) else { return Vec::new() };
    let nodes = topology::nodes();
    match nodes.len() {
        0 | 1 => Vec::new(),
        _ => nodes.into_iter().find(|n| n.id == node).map(|n| n.cpus).unwrap_or_default(),
    }
}

/// The cores this process may run on: online, and in the calling
/// thread's affinity (a job's cgroup or `taskset`); all online ones where
/// the affinity cannot be read.
pub fn allowed_cores() -> Vec<usize> {
    let online = topology::online_cpus();
    let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else { return online };
    let allowed: Vec<usize> = online.iter().copied().filter(|&c| set.is_set(c).unwrap_or(false)).collect();
    if allowed.is_empty() {
        online
    } else {
        allowed
    }
}

/// Pins the calling thread to `cores` (no-op for an empty set).
pub fn pin_current_thread(cores: &[usize]) -> Result<(), PlacementError> {
    if cores.is_empty() {
        return Ok(());
    }
    let mut set = nix::sched::CpuSet::new();
    for &core in cores {
        set.set(core).map_err(|cause| PlacementError::BadCore { core, cause })?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|cause| PlacementError::Pin { cores: cores.to_vec(), cause })
}

pub fn list(cores: &[usize]) -> String {
    cores.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_cores_are_checked() {
        let p = Placement { cores: Some(vec![0]), numa: Numa::Any };
        assert_eq!(resolve(&p, None).unwrap().cores, [0]);
        let p = Placement { cores: Some(vec![4096]), numa: Numa::Any };
        let err = resolve(&p, None).unwrap_err();
        assert!(matches!(err, PlacementError::NoSuchCore { core: 4096, .. }), "{err:?}");
        assert!(err.to_string().starts_with("core 4096 does not exist on this host (online cores: 0"), "{err}");
    }

    #[test]
    fn numa_without_a_device_node_says_so() {
        let placed = resolve(&Placement { cores: None, numa: Numa::Near }, None).unwrap();
        assert!(placed.cores.is_empty());
        assert!(placed.note.unwrap().contains("no NUMA node"));
        let near = resolve(&Placement { cores: None, numa: Numa::Near }, Some(0)).unwrap();
        assert_eq!(near.cores, topology::node_cpus(0).unwrap_or_default());
    }

    #[test]
    fn near_node_pins_only_where_there_is_a_choice() {
        assert!(near_node(None).is_empty(), "a virtual device has no node");
        assert!(near_node(Some(-1)).is_empty(), "sysfs says -1 for none");
        assert!(near_node(Some(4096)).is_empty(), "no such node");
        let nodes = topology::nodes();
        let expected = if nodes.len() > 1 { nodes[0].cpus.clone() } else { Vec::new() };
        assert_eq!(near_node(Some(nodes.first().map_or(0, |n| n.id as i32))), expected);
    }

    #[test]
    fn pinning_takes_effect() {
        std::thread::spawn(|| {
            pin_current_thread(&[0]).unwrap();
            let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
            assert!(set.is_set(0).unwrap());
            assert!(!set.is_set(1).unwrap_or(false));
        })
        .join()
        .unwrap();
    }
}
