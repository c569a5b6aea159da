//! A plan's RDMA request as run.json stores it: one object, the knobs
//! beside op, mode and size, as every run.json has it; in postcard (the
//! control wire) the request as it is, knobs nested. And the scenario a
//! stored run carries, read with the leniency old runs need.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{op, GpuChoice, MemorySides, Mode, Op, RdmaKnobs, RdmaParams, GROUP_KEYS, RETIRED_KEYS};
use crate::scenario::Scenario;

/// The run.json form of [`RdmaParams`]; unknown keys of older runs are ignored.
#[derive(Serialize, Deserialize)]
#[serde(default)]
struct Flat {
    #[serde(with = "op::perftest_name")]
    op: Op,
    mode: Mode,
    message_size: u64,
    memory: MemorySides,
    gpu: GpuChoice,
    #[serde(flatten)]
    knobs: RdmaKnobs,
}

impl Default for Flat {
    fn default() -> Self {
        RdmaParams::default().into()
    }
}

impl From<RdmaParams> for Flat {
    fn from(RdmaParams { op, mode, message_size, memory, gpu, knobs }: RdmaParams) -> Self {
        Flat { op, mode, message_size, memory, gpu, knobs }
    }
}

impl From<Flat> for RdmaParams {
    fn from(Flat { op, mode, message_size, memory, gpu, knobs }: Flat) -> Self {
        RdmaParams { op, mode, message_size, memory, gpu, knobs }
    }
}

/// `GroupPlan::rdma` out: one object in run.json, the request as it is on the wire.
pub fn serialize<S: Serializer>(request: &Option<RdmaParams>, s: S) -> Result<S::Ok, S::Error> {
    match s.is_human_readable() {
        true => request.clone().map(Flat::from).serialize(s),
        false => request.serialize(s),
    }
}

/// `GroupPlan::rdma` in, from run.json (of any schema) or the wire.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RdmaParams>, D::Error> {
    match d.is_human_readable() {
        true => Ok(Option::<Flat>::deserialize(d)?.map(RdmaParams::from)),
        false => Option::<RdmaParams>::deserialize(d),
    }
}

/// Reads the scenario a stored run carries. Runs recorded before the
/// `[group.rdma]` table held knobs only kept the group's op, mode and size
/// in its copy too (beside the same values on the group), and older runs
/// have knobs since retired: both are dropped here, and only here, since a
/// scenario file must not give them.
pub fn read_scenario<'de, D: Deserializer<'de>>(d: D) -> Result<Scenario, D::Error> {
    use serde::de::Error as _;
    let mut scenario = serde_json::Value::deserialize(d)?;
    let groups = scenario.get_mut("group").and_then(serde_json::Value::as_array_mut);
    for table in groups.into_iter().flatten().filter_map(|g| g.get_mut("rdma")?.as_object_mut()) {
        table.retain(|key, _| !GROUP_KEYS.contains(&key.as_str()) && !RETIRED_KEYS.iter().any(|(k, _)| k == key));
    }
    Scenario::deserialize(scenario).map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// run.json shows a plan's request as one object (as it always has);
    /// postcard carries it with the knobs nested; both read back the same.
    #[test]
    fn the_request_is_flat_in_run_json_and_whole_on_the_wire() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Plan {
            #[serde(default, with = "super")]
            rdma: Option<RdmaParams>,
        }
        let plan = Plan {
            rdma: Some(RdmaParams {
                op: Op::Send,
                knobs: RdmaKnobs { qps: 4, device: Some("mlx5_0".into()), ..Default::default() },
                ..Default::default()
            }),
        };
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!((json["rdma"]["op"].as_str(), json["rdma"]["qps"].as_u64()), (Some("send"), Some(4)));
        assert!(json["rdma"].get("knobs").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<Plan>(json).unwrap(), plan);
        let wire = postcard::to_stdvec(&plan).unwrap();
        assert_eq!(postcard::from_bytes::<Plan>(&wire).unwrap(), plan);
        // Runs of schema 1 have no request at all.
        assert_eq!(serde_json::from_str::<Plan>("{}").unwrap(), Plan { rdma: None });
    }

    /// A run recorded when the `[group.rdma]` copy held the group's op, mode
    /// and size reads back; its scenario is written as a run is today: the
    /// knobs set, without the group's keys or the unset ones.
    #[test]
    fn old_runs_rdma_tables_drop_the_groups_keys() {
        let text = include_str!("../../../tests/fixtures/v3-rdma-fan-in.json");
        let stored: serde_json::Value = serde_json::from_str(text).unwrap();
        let old = &stored["scenario"]["group"][0]["rdma"];
        assert!(GROUP_KEYS[..3].iter().all(|key| old.get(key).is_some()), "the fixture holds them: {old}");
        assert!(RETIRED_KEYS.iter().all(|(key, _)| old.get(key).is_some()), "and the retired: {old}");
        #[derive(Deserialize)]
        struct Run {
            #[serde(deserialize_with = "read_scenario")]
            scenario: Scenario,
        }
        let run: Run = serde_json::from_str(text).unwrap();
        let knobs = run.scenario.groups[0].rdma.clone().expect("the table");
        assert_eq!((knobs.qps, knobs.tx_depth), (2, 64));
        let written = serde_json::to_value(&run.scenario).unwrap();
        let table = written["group"][0]["rdma"].as_object().unwrap();
        assert_eq!(table.keys().collect::<Vec<_>>(), knobs_set(table), "name order, none unset");
        assert!(GROUP_KEYS.iter().all(|key| !table.contains_key(*key)), "{table:?}");
        assert!(RETIRED_KEYS.iter().all(|(key, _)| !table.contains_key(*key)), "{table:?}");
        // A scenario file is held to the table's type.
        let strict = serde_json::from_value::<Scenario>(stored["scenario"].clone()).unwrap_err();
        assert!(strict.to_string().contains("unknown field `message_size`"), "{strict}");
    }

    fn knobs_set(table: &serde_json::Map<String, serde_json::Value>) -> Vec<&String> {
        let mut keys: Vec<&String> = table.iter().filter(|(_, v)| !v.is_null()).map(|(k, _)| k).collect();
        keys.sort();
        keys
    }
}
