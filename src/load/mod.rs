//! Load beside the traffic: CPU/memory stress burners and thread placement
//! (cores, NUMA near or far from the device).

pub mod placement;
pub mod stress;
pub mod topology;
