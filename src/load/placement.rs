//! Where threads run: explicit cores, or the NUMA node near (or far from)
//! the device the traffic uses, as the scenario asks; and pinning to them.

use serde::{Deserialize, Serialize};

use crate::load::topology;
use crate::scenario::placement::{Numa, Placement};

/// The cores chosen on this host (empty: not pinned), and why if the request
/// could not be met as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    pub cores: Vec<usize>,
    pub note: Option<String>,
}

/// Resolves a placement on this host; `device_node` is the NUMA node of the
/// device the rank's traffic uses, when known.
pub fn resolve(placement: &Placement, device_node: Option<usize>) -> Result<Placed, String> {
    let online = topology::online_cpus();
    if let Some(cores) = &placement.cores {
        if let Some(bad) = cores.iter().find(|c| !online.contains(c)) {
            return Err(format!("core {bad} does not exist on this host (online cores: {})", list(&online)));
        }
        return Ok(Placed { cores: cores.clone(), note: None });
    }
    let nodes = topology::nodes();
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
    let near: Vec<usize> = nodes.iter().filter(|(n, _)| *n == node).flat_map(|(_, c)| c.clone()).collect();
    let far: Vec<usize> = nodes.iter().filter(|(n, _)| *n != node).flat_map(|(_, c)| c.clone()).collect();
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

/// Pins the calling thread to `cores` (no-op for an empty set).
pub fn pin_current_thread(cores: &[usize]) -> Result<(), String> {
    if cores.is_empty() {
        return Ok(());
    }
    let mut set = nix::sched::CpuSet::new();
    for &core in cores {
        set.set(core).map_err(|e| format!("core {core}: {e}"))?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| format!("cannot pin to cores {}: {e}", list(cores)))
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
        assert!(resolve(&p, None).unwrap_err().starts_with("core 4096 does not exist on this host (online cores: 0"));
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
