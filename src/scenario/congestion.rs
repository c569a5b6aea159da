//! `[congestion]` and a group's `role`: GPCNeT's congestion impact
//! (docs/CONGESTION.md). Canary groups are measured twice, alone and beside
//! every congestor group; `split` lets a seeded random draw choose which
//! ranks congest (GPCNeT's 80 %) and which are canaries.

use serde::{Deserialize, Serialize};

use super::{BadField, BadKey, Field, GroupSpec, Pattern, Scenario, Section};

/// `[congestion]`: turns the run into isolated/congested pairs of phases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CongestionSpec {
    /// The fraction of the ranks that congest, drawn at random from `seed`;
    /// the others are the canaries. Absent: each role group names its ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<f64>,
    /// Seed of the split and of every `random-ring` that names none.
    #[serde(default)]
    pub seed: u64,
}

/// What a group is in a congestion run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Measured alone, then with the congestors running.
    Canary,
    /// Runs only in the congested phases: the traffic that hurts.
    Congestor,
}

/// The selector keys a split fills in; a role group of a split run gives none.
const SPLIT_FILLS: [&str; 4] = ["ranks", "senders", "receivers", "flows"];

/// Problems visible without a hostfile.
pub(super) fn check(s: &Scenario) -> Result<(), BadField> {
    let Some(spec) = &s.congestion else {
        return match s.groups.iter().position(|g| g.role.is_some()) {
            Some(i) => Err(BadField::new(
                Field::group(i, "role"),
                "a role needs a [congestion] table (e.g. `[congestion]` with `seed = 1`) to measure canaries alone and congested",
            )),
            None => Ok(()),
        };
    };
    if let Some(split) = spec.split {
        if !(split > 0.0 && split < 1.0) {
            return Err(BadField::new(
                Field::congestion("split"),
                format!("{split} is outside (0, 1): the fraction of the ranks that congest, e.g. 0.8 (GPCNeT's)"),
            ));
        }
    }
    if let Some(i) = s.groups.iter().position(|g| g.role.is_none()) {
        return Err(BadField::new(
            Field::group(i, "role"),
            "every group of a congestion run needs role = \"canary\" or role = \"congestor\"",
        ));
    }
    for (role, what) in [(Role::Canary, "measure"), (Role::Congestor, "congest with")] {
        if !s.groups.iter().any(|g| g.role == Some(role)) {
            let name = if role == Role::Canary { "canary" } else { "congestor" };
            return Err(BadField::new(
                Field::congestion("role"),
                format!("no group has role = \"{name}\": mark the groups to {what} with role = \"{name}\""),
            ));
        }
    }
    if s.sweep.is_some() {
        return Err(BadField::new(
            Field::sweep("parameter"),
            "a [congestion] run makes its own phases (each canary group isolated, then congested): run the sweep as another scenario",
        ));
    }
    if s.run.warmup.is_zero() {
        return Err(BadField::new(
            Field::run("warmup"),
            "a congestion run needs a warm-up: it is the congestors' lead-in before the canaries' window opens, e.g. \"1s\"",
        ));
    }
    if spec.split.is_some() {
        for (i, g) in s.groups.iter().enumerate() {
            check_split_group(g).map_err(|e| e.within(Section::Group(i)))?;
        }
    }
    Ok(())
}

/// A role group whose ranks the split chooses names none itself.
fn check_split_group(g: &GroupSpec) -> Result<(), BadKey> {
    if g.pattern == Pattern::Explicit {
        return Err(BadKey::new(
            "pattern",
            "`explicit` lists its own ranks, but [congestion] split chooses them: use fan-in, one-to-all, all-to-all, ring, random-ring or pairwise".into(),
        ));
    }
    let given = [g.ranks.is_some(), g.senders.is_some(), g.receivers.is_some(), g.flows.is_some()];
    match SPLIT_FILLS.iter().zip(given).find(|(_, given)| *given) {
        Some((key, _)) => Err(BadKey::new(key, "[congestion] split chooses the ranks of every role group: remove it, or remove `split` to name the ranks yourself".into())),
        None => Ok(()),
    }
}
