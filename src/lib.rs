//! fabricbench: benchmark RDMA and TCP fabrics across many hosts at once.
//!
//! One binary is the launcher, the per-host worker and the rank-0
//! coordinator. The flow of a run and the job of each module are described
//! in docs/ARCHITECTURE.md.

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
pub mod worker;
