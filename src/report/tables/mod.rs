//! The summary's tables and one-line notes, built once from a run and
//! drawn by the terminal, Markdown and HTML writers alike.

pub(crate) mod clock;
pub(crate) mod congestion;
pub(crate) mod datagrams;
pub(crate) mod flaps;
pub mod gate;
pub(crate) mod gpu_memory;
pub mod labels;
pub(crate) mod lanes;
pub(crate) mod leaf_pairs;
pub(crate) mod live;
pub(crate) mod offered;
pub(crate) mod rdma_counters;
pub(crate) mod refused;
pub(crate) mod repeats;
pub mod summary;
pub(crate) mod sweeps;
pub mod table;
pub(crate) mod validation;
