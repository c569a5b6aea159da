//! run.json's `build`: the source the binary was built from.

use serde::{Deserialize, Serialize};

/// The source a binary was built from, embedded by build.rs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// The crate's version (as `tool_version`).
    pub version: String,
    /// `git rev-parse HEAD` at build time; "unknown" when built outside a
    /// git checkout.
    pub commit: String,
    /// The checkout had changes to tracked files not in `commit`; `None`
    /// when unknown (no git).
    pub dirty: Option<bool>,
}

impl Build {
    pub fn of_this_binary() -> Build {
        let dirty = match env!("FABRICBENCH_GIT_DIRTY") {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        };
        Build {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: env!("FABRICBENCH_GIT_COMMIT").to_string(),
            dirty,
        }
    }
}
