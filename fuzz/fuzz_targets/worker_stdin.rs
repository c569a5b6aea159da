//! What a worker reads on its stdin from the launcher: the first byte picks
//! the task (rank 0-3 of a four-node Slurm allocation `n[1-4]`), the rest is
//! stdin, read as a worker does: its job spec (`worker::read_spec`), then
//! `Instruction` lines; and as a Slurm task does (`srun::job_spec`).
#![no_main]

use std::io::BufRead;

use fabricbench::worker::srun;
use fabricbench::control::instruction::Instruction;
use fabricbench::worker::{read_spec, JobSpec, Role};
use libfuzzer_sys::fuzz_target;

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("serializes")
}

fuzz_target!(|data: &[u8]| {
    let Some((&task, stdin)) = data.split_first() else { return };
    let mut plain = stdin;
    if let Ok(spec) = read_spec(&mut plain) {
        // The launcher writes a spec as JSON; what was read writes the same.
        let again: JobSpec = serde_json::from_str(&json(&spec)).expect("a job spec reads back");
        assert_eq!(json(&again), json(&spec));
        assert!(matches!(spec.role, Role::Coordinator { .. } | Role::Member { coordinator: Some(_) }));
        for line in plain.lines().map_while(Result::ok) {
            let _ = serde_json::from_str::<Instruction>(&line);
        }
    }

    let rank = usize::from(task % 4);
    let node = format!("n{}", rank + 1);
    let env = |name: &str| match name {
        "SLURM_PROCID" => Some(rank.to_string()),
        "SLURMD_NODENAME" => Some(node.clone()),
        "SLURM_JOB_NODELIST" => Some("n[1-4]".to_string()),
        _ => None,
    };
    if let Ok(spec) = srun::job_spec(&mut &stdin[..], env) {
        assert_eq!((spec.rank, spec.host.as_str()), (rank, node.as_str()));
        match spec.role {
            Role::Coordinator { plan, .. } => assert_eq!(rank, 0, "{} ranks", plan.ranks.len()),
            Role::Member { coordinator } => assert!(rank > 0 && coordinator.is_some()),
        }
    }
});
