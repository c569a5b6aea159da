//! fabricbench: benchmark RDMA and TCP fabrics across many hosts at once.
//!
//! One binary is the launcher, the per-host worker and the rank-0
//! coordinator. The flow of a run and the job of each module are described
//! in docs/ARCHITECTURE.md.
//!
//! Three steps of a run, as the library takes them:
//!
//! A hostfile (OpenMPI's, MPICH's, or one host per line) becomes the rank
//! list, one `Host` per slot:
//!
//! ```
//! use std::path::Path;
//!
//! let hosts = fabricbench::hostfile::parse("node1 slots=2\nnode2\n", Path::new("hosts")).unwrap();
//! let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
//! assert_eq!(names, ["node1", "node1", "node2"]);
//! ```
//!
//! A scenario on those ranks becomes a plan: its phases, and the flows of
//! each between ranks (here everyone sends to rank 0):
//!
//! ```
//! use std::path::Path;
//!
//! use fabricbench::{hostfile, plan, scenario};
//!
//! let hosts = hostfile::parse("n0\nn1\nn2\n", Path::new("hosts")).unwrap();
//! let toml = "[[group]]\nname = \"incast\"\npattern = \"fan-in\"\n";
//! let (scenario, _source) = scenario::parse(toml, Path::new("incast.toml")).unwrap();
//! let plan = plan::build(&hosts, &scenario).unwrap();
//! let flows: Vec<(usize, usize)> = plan.phases[0].flows.iter().map(|f| (f.src, f.dst)).collect();
//! assert_eq!(flows, [(1, 0), (2, 0)]);
//! ```
//!
//! A run.json (of any schema version this build reads) comes back as a
//! `RunResult`, and renders as the summary a run prints:
//!
//! ```
//! use std::path::Path;
//!
//! use fabricbench::report::{store::results_dir, terminal};
//! use fabricbench::result::RunStatus;
//!
//! let run = results_dir::read(Path::new("tests/fixtures/v3-fan-in.json")).unwrap();
//! assert_eq!(run.scenario.run.name, "fan-in");
//! assert!(matches!(run.status, RunStatus::Ok));
//! assert!(terminal::render(&run, None).contains("fan-in"));
//! ```

mod acceptance;
pub mod cli;
pub mod commands;
pub mod control;
pub mod diag;
pub mod exit;
pub mod fdlimit;
pub mod histogram;
mod hostcheck;
pub mod hostfacts;
pub mod hostfile;
pub mod launch;
pub mod load;
pub mod metrics;
pub mod plan;
mod progress;
pub mod report;
pub mod result;
pub mod run;
pub mod scenario;
pub mod sysfs;
pub mod topology;
pub mod transport;
pub mod units;
pub mod watch;
pub mod worker;
