//! `--gate PROFILE`, `[gate]` and `--gate-only` into the gate's options:
//! the profile found and read before anything starts, so a bad one is bad
//! input (exit 2).

use std::path::Path;

use anyhow::anyhow;

use crate::acceptance::gate;
use crate::cli::shipped::{self, Kit};
use crate::commands::Failure;
use crate::run::GateOptions;
use crate::scenario::gate::GateSpec;

/// The gate's options; `None` when neither the flag nor the scenario asks for one.
pub fn options(
    flag: Option<&str>,
    only: bool,
    scenario_file: &Path,
    spec: Option<&GateSpec>,
) -> Result<Option<GateOptions>, Failure> {
    let name = match (flag, spec) {
        (Some(name), _) => name.to_string(),
        // A file named in [gate] is found beside the scenario.
        (None, Some(spec)) => {
            let beside = scenario_file.parent().unwrap_or(Path::new(".")).join(&spec.profile);
            if beside.is_file() {
                beside.display().to_string()
            } else {
                spec.profile.clone()
            }
        }
        (None, None) if only => {
            return Err(Failure::BadInput(anyhow!(
                "--gate-only needs a gate: --gate PROFILE or [gate] in the scenario"
            )))
        }
        (None, None) => return Ok(None),
    };
    let profile = gate::load(&name, &shipped::dirs_beside(Kit::Profiles, scenario_file)).map_err(Failure::bad_input)?;
    Ok(Some(GateOptions { profile, only }))
}
