//! Storing results: the results folder of a run and its journal, the
//! record a run.json is rebuilt from.

pub(crate) mod journal;
pub mod results_dir;
