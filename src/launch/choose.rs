//! Which launcher starts the workers (`--launcher`, `--tree-radix`), decided
//! from the hosts and the Slurm allocation this runs in. Pure: the caller
//! builds the launcher the choice names.

use crate::hostfile::Host;
use crate::launch::slurm::{Allocation, SlurmError};

/// What `--launcher` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LauncherKind {
    /// slurm inside an allocation of the hosts; local if they are all this machine; else ssh
    Auto,
    /// One local process per rank (per slot of a hostfile line), bound to that line's address (127.0.0.x)
    Local,
    /// One worker per rank over OpenSSH (honours ~/.ssh/config), a host's ranks over one master
    Ssh,
    /// Inside a Slurm allocation: one srun step, one task per rank (per slot of a node)
    Slurm,
    /// One Open MPI mpirun job (its options: --hostfile, --map-by, -x): a rank per host entry, in order
    Mpirun,
}

impl LauncherKind {
    fn name(self) -> &'static str {
        match self {
            LauncherKind::Auto => "auto",
            LauncherKind::Local => "local",
            LauncherKind::Ssh => "ssh",
            LauncherKind::Slurm => "slurm",
            LauncherKind::Mpirun => "mpirun",
        }
    }
}

/// How the workers will start.
#[derive(Debug)]
pub enum Choice {
    Local,
    Ssh,
    /// Over ssh, each started worker starting up to `radix` more.
    Tree {
        radix: usize,
    },
    /// One srun step in this allocation.
    Slurm(Allocation),
    /// One mpirun job.
    Mpirun,
}

#[derive(Debug, thiserror::Error)]
pub enum ChoiceError {
    #[error("--tree-radix starts workers over ssh; it does not apply to --launcher {0}")]
    TreeNeedsSsh(&'static str),
    #[error(
        "--launcher slurm runs inside a Slurm allocation, and SLURM_JOB_ID is not set: e.g. `salloc -N 4 fabricbench run …`, or fabricbench run in an sbatch script"
    )]
    NoAllocation,
    #[error(transparent)]
    Slurm(#[from] SlurmError),
}

/// Auto is slurm inside an allocation whose nodes the hosts are, else local
/// when every host is this machine (`is_here`), else ssh. A tree is always
/// ssh.
pub fn choose(
    kind: LauncherKind,
    hosts: &[Host],
    allocation: Option<Allocation>,
    tree_radix: Option<usize>,
    is_here: impl Fn(&Host) -> bool,
) -> Result<Choice, ChoiceError> {
    if let Some(radix) = tree_radix {
        return match kind {
            LauncherKind::Auto | LauncherKind::Ssh => Ok(Choice::Tree { radix }),
            other => Err(ChoiceError::TreeNeedsSsh(other.name())),
        };
    }
    match (kind, allocation) {
        (LauncherKind::Slurm, Some(a)) => {
            a.check(hosts)?;
            Ok(Choice::Slurm(a))
        }
        (LauncherKind::Slurm, None) => Err(ChoiceError::NoAllocation),
        (LauncherKind::Mpirun, _) => Ok(Choice::Mpirun),
        (LauncherKind::Auto, Some(a)) if a.check(hosts).is_ok() => Ok(Choice::Slurm(a)),
        (LauncherKind::Auto, _) if hosts.iter().all(is_here) => Ok(Choice::Local),
        (LauncherKind::Local, _) => Ok(Choice::Local),
        (LauncherKind::Auto | LauncherKind::Ssh, _) => Ok(Choice::Ssh),
    }
}

/// Whether a host's data address belongs to this machine (loopback or one
/// of its interfaces).
pub fn is_this_machine(host: &Host) -> bool {
    let Ok(ip) = host.host_addr().parse::<std::net::IpAddr>() else { return host.host_addr() == "localhost" };
    ip.is_loopback() || if_addrs::get_if_addrs().is_ok_and(|ifs| ifs.iter().any(|i| i.ip() == ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> Vec<Host> {
        names.iter().map(|n| Host::named(n)).collect()
    }

    fn allocation(nodes: &str) -> Allocation {
        let vars = [("SLURM_JOB_ID", "42"), ("SLURM_JOB_NODELIST", nodes)];
        let get = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
        Allocation::from_vars(get).unwrap().unwrap()
    }

    fn auto(hosts: &[Host], allocation: Option<Allocation>) -> Choice {
        choose(LauncherKind::Auto, hosts, allocation, None, |h| h.name.starts_with("127.")).unwrap()
    }

    #[test]
    fn auto_is_local_when_every_host_is_this_machine() {
        assert!(matches!(auto(&hosts(&["127.0.0.1", "127.0.0.2"]), None), Choice::Local));
        assert!(matches!(auto(&hosts(&["127.0.0.1", "node02"]), None), Choice::Ssh));
    }

    #[test]
    fn auto_is_slurm_inside_an_allocation_of_the_hosts() {
        let nodes = hosts(&["node01", "node02"]);
        assert!(matches!(auto(&nodes, Some(allocation("node[01-04]"))), Choice::Slurm(_)));
        // Hosts outside the allocation: not a srun step.
        assert!(matches!(auto(&nodes, Some(allocation("other[1-2]"))), Choice::Ssh));
        let err = choose(LauncherKind::Slurm, &nodes, Some(allocation("other[1-2]")), None, |_| false).unwrap_err();
        assert!(err.to_string().contains("node01"), "{err}");
    }

    #[test]
    fn forced_kinds_and_the_tree() {
        let nodes = hosts(&["node01", "node02"]);
        let forced = |kind, radix| choose(kind, &nodes, None, radix, |_| false);
        assert!(matches!(forced(LauncherKind::Local, None), Ok(Choice::Local)));
        assert!(matches!(forced(LauncherKind::Ssh, None), Ok(Choice::Ssh)));
        assert!(matches!(forced(LauncherKind::Slurm, None), Err(ChoiceError::NoAllocation)));
        assert!(matches!(forced(LauncherKind::Mpirun, None), Ok(Choice::Mpirun)));
        let err = forced(LauncherKind::Mpirun, Some(8)).unwrap_err();
        assert_eq!(err.to_string(), "--tree-radix starts workers over ssh; it does not apply to --launcher mpirun");
        assert!(matches!(forced(LauncherKind::Auto, Some(8)), Ok(Choice::Tree { radix: 8 })));
        let err = forced(LauncherKind::Local, Some(8)).unwrap_err();
        assert_eq!(err.to_string(), "--tree-radix starts workers over ssh; it does not apply to --launcher local");
    }
}
