//! How many ranks a hostfile line makes, from `slots=` and the lists that
//! give each rank its own entry (`devices=`, `addrs=`, `gpus=`), and
//! whether they agree.

use super::{GpuChoice, Problem, RankCount};

/// A line's count of ranks: `slots=` where given, else one per device,
/// else one per address of `addrs=`, else one per GPU. Each list beside a
/// count must match it, but for `slots=1` beside devices (one multi-rail
/// rank); `first` names the line's host in the error.
pub fn count_ranks(
    first: &str,
    given: Option<u32>,
    devices: &[String],
    addrs: &[String],
    gpus: &[GpuChoice],
) -> Result<u32, Problem> {
    let first = first.to_string();
    let slots = slots_for_devices(given, devices).ok_or_else(|| Problem::SlotsBesideDevices {
        first: first.clone(),
        slots: given.unwrap_or_default(),
        devices: devices.to_vec(),
    })?;
    let counted = given.is_some() || !devices.is_empty();
    let ranks = given.map_or(RankCount::Devices(slots), RankCount::Slots);
    let slots = slots_for_list(slots, counted, addrs.len()).ok_or_else(|| Problem::SlotsBesideAddrs {
        first: first.clone(),
        ranks,
        addrs: addrs.into(),
    })?;
    let counted = counted || !addrs.is_empty();
    slots_for_list(slots, counted, gpus.len()).ok_or(Problem::SlotsBesideGpus { first, slots, gpus: gpus.to_vec() })
}

/// The slots of a line given (`None`: not) beside its `devices=`: one rank
/// per device unless given; `slots=1` is one multi-rail rank; any other
/// count must match the devices (`None`: it does not).
fn slots_for_devices(slots: Option<u32>, devices: &[String]) -> Option<u32> {
    match (slots, devices.len()) {
        (None, 0) => Some(1),
        (None, n) => Some(n as u32),
        (Some(s), n) if n == 0 || s == 1 || s as usize == n => Some(s),
        (Some(_), _) => None,
    }
}

/// The slots of a line beside a list of `listed` entries, one per rank
/// (`addrs=`, `gpus=`): as many ranks as entries unless an attribute
/// before counted them (`counted`), when the counts must match (`None`:
/// they do not).
fn slots_for_list(slots: u32, counted: bool, listed: usize) -> Option<u32> {
    match (counted, listed) {
        (_, 0) => Some(slots),
        (false, n) => Some(n as u32),
        (true, n) => (n == slots as usize).then_some(slots),
    }
}
