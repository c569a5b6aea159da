//! Ranks started by mpirun: `fabricbench worker --mpi` (the job of
//! `--launcher mpirun`) and every rank of `mpirun … fabricbench run` but 0.
//! A rank knows its number and the job's size from the MPI environment
//! (OMPI_COMM_WORLD_RANK / PMIX_RANK / PMI_RANK, OMPI_COMM_WORLD_SIZE /
//! PMI_SIZE). mpirun hands stdin to rank 0 only, so the others learn the
//! rest from the environment too: the launcher's [`MpiJob`] (`-x`, never
//! argv), or, when mpirun started `fabricbench run` itself, the job's own
//! per-run secret.

use std::io::BufRead;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::hostfile::Host;
use crate::launch::choose::is_this_machine;
use crate::worker::srun::{self, SrunError, SrunSpec};
use crate::worker::{JobSpec, Role};

/// The variable `--launcher mpirun` passes every rank its [`MpiJob`] in.
pub const JOB_VAR: &str = "FABRICBENCH_MPI_JOB";
/// Where a rank's number may come from, first found first.
const RANK_VARS: [&str; 3] = ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"];
const SIZE_VARS: [&str; 2] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"];
/// A secret of the MPI job every rank has and argv never shows: the user's
/// own (exported with `mpirun -x`), else Open MPI's random per-job key.
const SECRET_VARS: [&str; 2] = ["FABRICBENCH_MPI_SECRET", "OMPI_MCA_orte_precondition_transports"];
/// The shortest secret taken (Open MPI's key is 33 characters).
const MIN_SECRET: usize = 16;
/// Rank 0's coordinator ports, derived from the secret or (`--launcher
/// mpirun` without --port) picked at random, lie in this range.
pub const PORTS: std::ops::Range<u16> = 20_000..60_000;

/// What every rank of the launcher's mpirun job reads from [`JOB_VAR`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MpiJob {
    pub job: u64,
    pub token: String,
    /// The hosts in rank order.
    pub hosts: Vec<Host>,
    /// Port of rank 0's coordinator, on the data address of `hosts[0]`.
    pub port: u16,
}

/// What every rank of an MPI job started by mpirun derives alike from the
/// job's secret: the job id, its token and rank 0's coordinator port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub job: u64,
    pub token: String,
    pub port: u16,
}

/// This process's place in its MPI job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpiRank {
    pub rank: usize,
    pub size: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum MpiError {
    #[error("none of {} is set: `fabricbench worker --mpi` runs as a rank of mpirun", RANK_VARS.join(", "))]
    NotARank,
    #[error("{var}=`{value}` is not a rank number")]
    BadNumber { var: &'static str, value: String },
    #[error("{var} is set but neither {} is: which MPI started this?", SIZE_VARS.join(" nor "))]
    NoSize { var: &'static str },
    #[error("rank {rank} of {size}: a rank number is below the job's size")]
    RankBeyond { rank: usize, size: usize },
    #[error(
        "mpirun started {size} rank(s), but {origin} lists {ranks}: run mpirun -np {ranks} with a hostfile of the same hosts in the same order"
    )]
    SizeMismatch { size: usize, ranks: usize, origin: String },
    #[error(
        "mpirun started rank {rank} on a machine without {addr}, the address {origin} gives rank {rank}: mpirun's hostfile and fabricbench's must list the same hosts in the same order"
    )]
    Misplaced { rank: usize, addr: String, origin: String },
    #[error("{JOB_VAR} is not set: `fabricbench worker --mpi` runs in the mpirun job of `fabricbench run --launcher mpirun`")]
    NoJob,
    #[error("{JOB_VAR} is not valid: {0}")]
    BadJob(serde_json::Error),
    #[error(
        "no secret for this MPI job: none of {} is set (or shorter than {MIN_SECRET} characters); export one to every rank, e.g. FABRICBENCH_MPI_SECRET=$(openssl rand -hex 32) mpirun -x FABRICBENCH_MPI_SECRET …",
        SECRET_VARS.join(", ")
    )]
    NoSecret,
    #[error("rank 0 ({host}) has no address: {reason}")]
    Unresolved { host: String, reason: String },
    #[error(transparent)]
    Spec(#[from] SrunError),
}

/// This process's rank and size, `None` when no MPI started it.
pub fn rank_from(env: &impl Fn(&str) -> Option<String>) -> Result<Option<MpiRank>, MpiError> {
    let Some((var, value)) = RANK_VARS.iter().find_map(|&var| Some((var, env(var)?))) else { return Ok(None) };
    let number = |var: &'static str, value: String| {
        value.trim().parse::<usize>().map_err(|_| MpiError::BadNumber {
            var,
            value: value.chars().flat_map(char::escape_default).take(64).collect(),
        })
    };
    let rank = number(var, value)?;
    let (size_var, size) = SIZE_VARS.iter().find_map(|&v| Some((v, env(v)?))).ok_or(MpiError::NoSize { var })?;
    let size = number(size_var, size)?;
    if rank >= size {
        return Err(MpiError::RankBeyond { rank, size });
    }
    Ok(Some(MpiRank { rank, size }))
}

/// The job of a rank of `--launcher mpirun`'s job: every rank reads
/// [`JOB_VAR`]; rank 0 also the [`SrunSpec`] on its stdin.
pub fn job_spec(stdin: &mut impl BufRead, env: impl Fn(&str) -> Option<String>) -> Result<JobSpec, MpiError> {
    let me = rank_from(&env)?.ok_or(MpiError::NotARank)?;
    let job: MpiJob = serde_json::from_str(&env(JOB_VAR).ok_or(MpiError::NoJob)?).map_err(MpiError::BadJob)?;
    let origin = "the launcher's hostfile";
    check(me, &job.hosts, origin, |ip| is_this_machine(&Host::named(&ip.to_string())))?;
    let role = if me.rank == 0 {
        let spec: SrunSpec = srun::read_line(stdin, "the job spec")?;
        srun::coordinator_role(&spec, &job.hosts)?
    } else {
        Role::Member { coordinator: Some(coordinator(&job.hosts[0], job.port)?) }
    };
    Ok(spec_for(job.job, job.token, me.rank, &job.hosts, role))
}

/// Checks that `hosts` (from `origin`) are the MPI job's ranks and that this
/// rank runs where they place it (`is_here`: whether an address is this
/// machine's): mpirun maps by its own hostfile, which may differ (a line
/// without `slots=` counts as many slots as the host has cores).
pub fn check(me: MpiRank, hosts: &[Host], origin: &str, is_here: impl Fn(IpAddr) -> bool) -> Result<(), MpiError> {
    if me.size != hosts.len() {
        return Err(MpiError::SizeMismatch { size: me.size, ranks: hosts.len(), origin: origin.to_string() });
    }
    let host = &hosts[me.rank];
    // A name that does not resolve here fails at bind, saying so.
    let Ok(ip) = crate::worker::resolve(host.host_addr()) else { return Ok(()) };
    if !is_here(ip) {
        let addr = match host.host_addr() == ip.to_string() {
            true => ip.to_string(),
            false => format!("{ip} ({})", host.host_addr()),
        };
        return Err(MpiError::Misplaced { rank: me.rank, addr, origin: origin.to_string() });
    }
    Ok(())
}

/// When mpirun started `fabricbench run` on every rank: the job id, token
/// and coordinator port all ranks derive alike from the MPI job's secret
/// (`port`: the one asked for, 0 for one derived).
pub fn shared_identity(env: &impl Fn(&str) -> Option<String>, port: u16) -> Result<Identity, MpiError> {
    let secret =
        SECRET_VARS.iter().find_map(|&v| env(v).filter(|s| s.len() >= MIN_SECRET)).ok_or(MpiError::NoSecret)?;
    let digest = Sha256::new().chain_update(b"fabricbench mpi job\0").chain_update(secret.as_bytes()).finalize();
    let token: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let job = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
    let derived = PORTS.start + (u16::from_le_bytes([digest[8], digest[9]]) % (PORTS.end - PORTS.start));
    Ok(Identity { job, token, port: if port == 0 { derived } else { port } })
}

/// A member of `mpirun … fabricbench run`: joins rank 0's coordinator.
pub fn member_of_run(me: MpiRank, hosts: &[Host], identity: Identity) -> Result<JobSpec, MpiError> {
    let Identity { job, token, port } = identity;
    let role = Role::Member { coordinator: Some(coordinator(&hosts[0], port)?) };
    Ok(spec_for(job, token, me.rank, hosts, role))
}

fn coordinator(host0: &Host, port: u16) -> Result<SocketAddr, MpiError> {
    let ip = crate::worker::resolve(host0.host_addr())
        .map_err(|e| MpiError::Unresolved { host: host0.name.clone(), reason: format!("{e:#}") })?;
    Ok(SocketAddr::new(ip, port))
}

fn spec_for(job: u64, token: String, rank: usize, hosts: &[Host], role: Role) -> JobSpec {
    let host = &hosts[rank];
    JobSpec {
        job,
        token,
        rank,
        bind: host.host_addr().to_string(),
        data_addr: host.nic_addr().map(str::to_string),
        host: host.name.clone(),
        role,
        relay: None,
        devices: host.devices.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    fn hosts() -> Vec<Host> {
        vec![Host { addr: Some("127.0.0.1".into()), ..Host::named("n1") }, Host::named("127.0.0.2")]
    }

    #[test]
    fn ranks_come_from_open_mpi_pmix_or_hydra() {
        assert_eq!(rank_from(&env(&[])).unwrap(), None);
        let ompi = env(&[("OMPI_COMM_WORLD_RANK", "2"), ("OMPI_COMM_WORLD_SIZE", "4")]);
        assert_eq!(rank_from(&ompi).unwrap(), Some(MpiRank { rank: 2, size: 4 }));
        let hydra = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]);
        assert_eq!(rank_from(&hydra).unwrap(), Some(MpiRank { rank: 1, size: 2 }));
        let e = rank_from(&env(&[("PMIX_RANK", "0")])).unwrap_err().to_string();
        assert_eq!(e, "PMIX_RANK is set but neither OMPI_COMM_WORLD_SIZE nor PMI_SIZE is: which MPI started this?");
        let e = rank_from(&env(&[("PMI_RANK", "3"), ("PMI_SIZE", "3")])).unwrap_err().to_string();
        assert_eq!(e, "rank 3 of 3: a rank number is below the job's size");
        let e = rank_from(&env(&[("PMI_RANK", "1"), ("PMI_SIZE", "\x1b[2J")])).unwrap_err().to_string();
        assert_eq!(e, "PMI_SIZE=`\\u{1b}[2J` is not a rank number");
    }

    #[test]
    fn every_rank_derives_the_same_identity_from_the_secret() {
        let a = env(&[("OMPI_MCA_orte_precondition_transports", "faa8d4d4c7318f04-008a2ca7541bb14e")]);
        let first = shared_identity(&a, 0).unwrap();
        assert_eq!(shared_identity(&a, 0).unwrap(), first);
        assert!(PORTS.contains(&first.port) && first.token.len() == 64);
        assert_eq!(shared_identity(&a, 4000).unwrap().port, 4000, "--port wins");
        // The user's own secret comes first, and another job gets another token.
        let b = env(&[
            ("FABRICBENCH_MPI_SECRET", "0123456789abcdef0123"),
            ("OMPI_MCA_orte_precondition_transports", "faa8d4d4c7318f04-008a2ca7541bb14e"),
        ]);
        assert_ne!(shared_identity(&b, 0).unwrap().token, first.token);
        let e = shared_identity(&env(&[("FABRICBENCH_MPI_SECRET", "short")]), 0).unwrap_err().to_string();
        assert!(e.starts_with("no secret for this MPI job"), "{e}");
    }

    #[test]
    fn launcher_jobs_give_rank_0_the_plan_and_members_its_address() {
        let job = MpiJob { job: 7, token: "t".into(), hosts: hosts(), port: 4100 };
        let job_env = serde_json::to_string(&job).unwrap();
        let scenario = serde_json::from_str(r#"{"group": [{"name": "g", "pattern": "fan-in"}]}"#).unwrap();
        let spec = SrunSpec { job: 7, token: "t".into(), hosts: None, scenario, phases: None, port: 4100, lldp: false };
        let line = serde_json::to_string(&spec).unwrap() + "\n";
        let rank = |r: &str| env(&[("OMPI_COMM_WORLD_RANK", r), ("OMPI_COMM_WORLD_SIZE", "2"), (JOB_VAR, &job_env)]);
        let rank0 = job_spec(&mut line.as_bytes(), rank("0")).unwrap();
        let Role::Coordinator { plan, port, .. } = rank0.role else { panic!("rank 0 coordinates") };
        assert_eq!((rank0.bind.as_str(), port, plan.phases[0].flows.len()), ("127.0.0.1", 4100, 1));
        // A member reads nothing from stdin (mpirun gives it none).
        let member = job_spec(&mut &b""[..], rank("1")).unwrap();
        assert!(matches!(member.role, Role::Member { coordinator: Some(c) } if c.to_string() == "127.0.0.1:4100"));
        assert_eq!((member.rank, member.host.as_str()), (1, "127.0.0.2"));
        let e = job_spec(&mut &b""[..], env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")])).unwrap_err().to_string();
        assert!(e.starts_with("FABRICBENCH_MPI_JOB is not set"), "{e}");
        let three = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "3"), (JOB_VAR, &job_env)]);
        let e = job_spec(&mut &b""[..], three).unwrap_err().to_string();
        assert!(e.starts_with("mpirun started 3 rank(s), but the launcher's hostfile lists 2"), "{e}");
    }
}
