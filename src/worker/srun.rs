//! `fabricbench worker --slurm`: one task of the single `srun` step that
//! starts every worker of a run at once. srun broadcasts its stdin to all
//! tasks, so every task reads the same two lines: a [`SrunSpec`] at once,
//! and a [`CoordinatorAt`] once rank 0 listens. A task knows its rank from
//! SLURM_PROCID (the launcher lays tasks out in rank order) and checks it
//! landed on the node planned for that rank.

use std::io::BufRead;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::control::wire::Window;
use crate::hostfile::{self, Host, HostfileError};
use crate::plan::{self, BadField, Phase, Plan, Scenario};
use crate::worker::{JobSpec, Role};

/// The first line every task of the step reads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SrunSpec {
    pub job: u64,
    pub token: String,
    /// The hosts in rank order; `None`: the nodes of the allocation
    /// (SLURM_JOB_NODELIST), which every task has in its environment, so
    /// the line stays small on thousands of nodes.
    pub hosts: Option<Vec<Host>>,
    /// Rank 0 plans the run from this: the plan is a pure function of hosts
    /// and scenario, and broadcasting it would send every task the flows of
    /// the whole job.
    pub scenario: Scenario,
    /// The phases to run when they are not the scenario's own (a retest of
    /// suspects: a few flows); `None`: rank 0 plans them from the scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Vec<Phase>>,
    /// Port of rank 0's coordinator (0: any free port).
    pub port: u16,
    /// `run --topology lldp`: every rank's probe carries its LLDP neighbours.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lldp: bool,
}

/// The second line: where rank 0's coordinator listens.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CoordinatorAt {
    pub coordinator: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum SrunError {
    #[error("reading stdin: {0}")]
    Read(#[from] std::io::Error),
    #[error("stdin closed before {0} arrived")]
    Closed(&'static str),
    #[error("{what} on stdin is not valid: {cause}")]
    Json { what: &'static str, cause: serde_json::Error },
    #[error("{0} is not set: `fabricbench worker --slurm` runs as a task of `srun`")]
    NotATask(&'static str),
    #[error("SLURM_PROCID=`{0}` is not a task number")]
    BadProcId(String),
    #[error("the nodes of this job: {0}")]
    Nodes(#[from] HostfileError),
    #[error("task {rank} started but the run has {ranks} rank(s)")]
    NoSuchRank { rank: usize, ranks: usize },
    #[error("srun started rank {rank} on node {node}, but the launcher planned it on {planned}")]
    Misplaced { rank: usize, node: String, planned: String },
    #[error("rank 0 cannot plan the run: {0}")]
    Plan(#[from] BadField),
}

/// Reads this task's job from the broadcast stdin; `env` is the task's
/// environment (SLURM_PROCID, SLURMD_NODENAME, SLURM_JOB_NODELIST).
pub fn job_spec(stdin: &mut impl BufRead, env: impl Fn(&str) -> Option<String>) -> Result<JobSpec, SrunError> {
    let mut spec: SrunSpec = read_line(stdin, "the job spec")?;
    let var = |name: &'static str| env(name).ok_or(SrunError::NotATask(name));
    let procid = var("SLURM_PROCID")?;
    let rank: usize = procid.trim().parse().map_err(|_| SrunError::BadProcId(procid.clone()))?;
    let node = var("SLURMD_NODENAME")?;
    let hosts = match spec.hosts.take() {
        Some(hosts) => hosts,
        None => hostfile::from_slurm(&var("SLURM_JOB_NODELIST")?, None)?,
    };
    let host = hosts.get(rank).ok_or(SrunError::NoSuchRank { rank, ranks: hosts.len() })?.clone();
    if host.name != node {
        return Err(SrunError::Misplaced { rank, node, planned: host.name });
    }
    let role = if rank == 0 {
        coordinator_role(&spec, &hosts)?
    } else {
        let at: CoordinatorAt = read_line(stdin, "rank 0's address")?;
        Role::Member { coordinator: Some(at.coordinator) }
    };
    let bind = host.host_addr().to_string();
    let data_addr = host.nic_addr().map(str::to_string);
    let devices = host.devices;
    Ok(JobSpec { job: spec.job, token: spec.token, rank, bind, data_addr, host: host.name, role, relay: None, devices })
}

/// Rank 0's role: the plan of `hosts` (in rank order), from the spec's
/// phases or else its scenario.
pub(crate) fn coordinator_role(spec: &SrunSpec, hosts: &[Host]) -> Result<Role, SrunError> {
    let plan = match &spec.phases {
        Some(phases) => Plan { ranks: plan::ranks_of(hosts), phases: phases.clone() },
        None => plan::build(hosts, &spec.scenario)?,
    };
    Ok(Role::Coordinator {
        plan: Box::new(plan),
        window: Window::of(&spec.scenario.run),
        port: spec.port,
        lldp: spec.lldp,
    })
}

/// The next line of stdin as a `T`; `what` names it in errors.
pub(crate) fn read_line<T: for<'de> Deserialize<'de>>(
    stdin: &mut impl BufRead,
    what: &'static str,
) -> Result<T, SrunError> {
    let mut line = String::new();
    if stdin.read_line(&mut line)? == 0 {
        return Err(SrunError::Closed(what));
    }
    serde_json::from_str(&line).map_err(|cause| SrunError::Json { what, cause })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn spec(hosts: Option<Vec<Host>>) -> String {
        let scenario = serde_json::from_str(r#"{"group": [{"name": "g", "pattern": "fan-in"}]}"#).unwrap();
        let spec = SrunSpec { job: 9, token: "t".into(), hosts, scenario, phases: None, port: 0, lldp: false };
        serde_json::to_string(&spec).unwrap() + "\n"
    }

    fn task(procid: &str, node: &str) -> impl Fn(&str) -> Option<String> {
        let env: HashMap<&str, String> = [
            ("SLURM_PROCID", procid.to_string()),
            ("SLURMD_NODENAME", node.to_string()),
            ("SLURM_JOB_NODELIST", "n[1-3]".to_string()),
        ]
        .into();
        move |k| env.get(k).cloned()
    }

    #[test]
    fn rank_zero_plans_from_the_allocation() {
        let rank0 = job_spec(&mut spec(None).as_bytes(), task("0", "n1")).unwrap();
        assert_eq!((rank0.rank, rank0.bind.as_str()), (0, "n1"));
        let Role::Coordinator { plan, .. } = rank0.role else { panic!("rank 0 coordinates") };
        assert_eq!(plan.ranks.iter().map(|r| r.host.as_str()).collect::<Vec<_>>(), ["n1", "n2", "n3"]);
        assert_eq!(plan.phases[0].flows.len(), 2);
    }

    #[test]
    fn members_wait_for_the_address_and_bind_where_the_hostfile_says() {
        let n1 = Host { addr: Some("10.0.0.2".into()), devices: vec!["mlx5_1".into()], ..Host::named("n1") };
        let hosts = vec![Host::named("n3"), n1];
        let input = spec(Some(hosts)) + "{\"coordinator\":\"10.0.0.3:4000\"}\n";
        let member = job_spec(&mut input.as_bytes(), task("1", "n1")).unwrap();
        assert!(matches!(member.role, Role::Member { coordinator: Some(c) } if c.port() == 4000));
        assert_eq!((member.rank, member.host.as_str(), member.bind.as_str()), (1, "n1", "10.0.0.2"));
        assert_eq!(member.devices, ["mlx5_1"], "the rank starts near its own device");
        assert_eq!(member.data_addr, None, "without addrs=, the data binds where the host does");
        // addrs=: the rank's data on its own address, the host's kept for the control plane.
        let n1 = Host { addr: Some("10.0.0.2".into()), addrs: vec!["10.1.0.2".into()], ..Host::named("n1") };
        let input = spec(Some(vec![Host::named("n3"), n1])) + "{\"coordinator\":\"10.0.0.3:4000\"}\n";
        let member = job_spec(&mut input.as_bytes(), task("1", "n1")).unwrap();
        assert_eq!((member.bind.as_str(), member.data_addr.as_deref()), ("10.0.0.2", Some("10.1.0.2")));
        let e = job_spec(&mut spec(None).as_bytes(), task("2", "n3")).unwrap_err();
        assert_eq!(e.to_string(), "stdin closed before rank 0's address arrived");
    }

    #[test]
    fn a_task_on_the_wrong_node_says_where() {
        let e = job_spec(&mut spec(None).as_bytes(), task("1", "n3")).unwrap_err();
        assert_eq!(e.to_string(), "srun started rank 1 on node n3, but the launcher planned it on n2");
        let e = job_spec(&mut spec(None).as_bytes(), task("5", "n9")).unwrap_err();
        assert_eq!(e.to_string(), "task 5 started but the run has 3 rank(s)");
        let e = job_spec(&mut spec(None).as_bytes(), |_| None).unwrap_err();
        assert!(e.to_string().starts_with("SLURM_PROCID is not set"), "{e}");
    }
}
