//! `[gate]`: the node gate a scenario runs before its pairs
//! (docs/ACCEPTANCE.md, "The node gate"); `--gate PROFILE` overrides it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSpec {
    /// A shipped profile's name (`ndr-ib`) or a profile file, relative to
    /// the scenario's folder.
    pub profile: String,
}
