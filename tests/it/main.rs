//! Every integration test in one crate, so the suite links once instead of
//! once per file. Each file is a module; a test's name starts with it
//! (`rdma_run::three_vm_fan_in_over_ssh`), which is what nextest and libtest
//! filters match (`cargo nextest run rdma_run::`, scripts/test-rdma).

mod common;

mod acceptance_bed;
mod acceptance_kit;
mod alone;
mod architecture;
mod closed_stderr;
mod closed_stdout;
mod coming_from;
mod compare_bed;
mod congestion_bed;
mod congestion_plan;
mod coordinator;
mod coordinator_scale;
mod data_validation;
mod degraded;
mod docs;
mod fuzz_seeds;
mod gate;
mod gate_rdma;
mod gpu_check;
mod gpu_facts;
mod gpu_memory;
mod gpu_rdma;
mod hardware_check;
mod host_facts;
mod limits;
mod limits_bed;
mod load_scenarios;
mod manual;
mod metrics_scrape;
mod pacing;
mod pair;
mod plan;
mod rails;
mod rails_bed;
mod rdma;
mod rdma_run;
mod rendered;
mod repeats;
mod reports;
mod run_local;
mod run_record;
mod shipped_scenarios;
mod slots;
mod soak;
mod stage_bed;
mod stream_rows;
mod tcp_data_plane;
mod tcp_handshake;
mod testbed_hostile;
mod testbed_mpirun;
mod testbed_scenarios;
mod testbed_slurm;
mod testbed_ssh;
mod topology;
mod topology_by_guid;
mod topology_gathered;
mod topology_patterns;
mod traffic_class;
mod watch;
mod watch_bed;
mod wire;
