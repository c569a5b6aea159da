//! What a scenario says of the fabric's shape: `[topology]` (the file that
//! describes it) and the group keys that choose pairs by it (`within`,
//! `across`, `hops`, and the `bisection` pattern). The pairs themselves are
//! chosen in `plan`, which also refuses these keys when the run has no
//! topology; here is what one file tells on its own.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{BadField, Field, GroupSpec, Pattern, Scenario};
use crate::hostfile::Host;
use crate::topology::{self, Format, Topology, TopologyError};

/// `[topology]`: the file that describes the fabric (docs/TOPOLOGY.md).
/// `run --topology FILE` (and `plan --topology`) replace it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyTable {
    /// Relative to the scenario file's folder (a flag's path: to the
    /// working directory).
    pub file: PathBuf,
    /// Not given: as the path says (a folder or `.json`: LLDP, `.toml`:
    /// TOML, anything else ibnetdiscover's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
}

impl TopologyTable {
    /// The table with its file found from the scenario file's folder.
    pub fn beside(&self, scenario_file: &Path) -> TopologyTable {
        let folder = scenario_file.parent().unwrap_or(Path::new(""));
        TopologyTable { file: folder.join(&self.file), format: self.format }
    }

    /// Reads the topology and checks that it places every rank of `ranks`
    /// (each rank's host, in rank order), or can once the hosts report
    /// their HCAs' node GUIDs.
    pub fn load(&self, ranks: &[Host]) -> Result<Loaded, TopologyError> {
        let topology = topology::read(&self.file, self.format)?;
        let placed = topology.check_placed(ranks, &self.file);
        let read = RunTopology { path: self.file.clone(), topology };
        match placed {
            Ok(()) => Ok(Loaded::Placed(read)),
            Err(_) if read.topology.names_guids() => Ok(Loaded::ByGuid(read)),
            Err(unplaced) => Err(unplaced),
        }
    }
}

/// A topology read for a run's ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// It places every rank.
    Placed(RunTopology),
    /// Its node descriptions do not place every rank, and it names its
    /// HCAs by node GUID (ibnetdiscover): the run places them by the GUIDs
    /// its hosts report before it is planned.
    ByGuid(RunTopology),
}

/// The topology a run uses, and the file it came from (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunTopology {
    pub path: PathBuf,
    pub topology: Topology,
}

/// The switch level `within` and `across` name: hosts under one leaf
/// switch, or under different ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchLevel {
    Leaf,
}

/// `hops = "2..4"`: the hop counts a pair's route may have, both ends
/// included (docs/SCENARIOS.md says what a hop is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HopRange {
    pub min: u32,
    pub max: u32,
}

/// Why a `hops` value is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "hops = \"{given}\": {why}; give \"MIN..MAX\" with 1 <= MIN <= MAX, both ends included, or one count \
     (\"2\": hosts under one leaf, \"4\": through a spine)"
)]
pub struct BadHops {
    given: String,
    why: &'static str,
}

impl HopRange {
    pub fn contains(self, hops: u32) -> bool {
        (self.min..=self.max).contains(&hops)
    }
}

impl TryFrom<String> for HopRange {
    type Error = BadHops;

    fn try_from(given: String) -> Result<HopRange, BadHops> {
        let bad = |why| BadHops { given: given.clone(), why };
        let (min, max) = given.split_once("..").unwrap_or((&given, &given));
        let count = |end: &str| match end.trim() {
            "" => Err(bad("both ends are needed")),
            end => end.parse::<u32>().map_err(|_| bad("an end is not a whole number")),
        };
        let range = HopRange { min: count(min)?, max: count(max)? };
        match range {
            HopRange { min: 0, .. } => Err(bad("a route crosses at least one cable")),
            HopRange { min, max } if min > max => Err(bad("the first end is above the second")),
            _ => Ok(range),
        }
    }
}

impl From<HopRange> for String {
    fn from(range: HopRange) -> String {
        range.to_string()
    }
}

impl fmt::Display for HopRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.min, self.max)
    }
}

/// The first key that chooses pairs by the topology (`within`, `across`,
/// `hops`) the group gives, if any.
pub fn restriction(g: &GroupSpec) -> Option<&'static str> {
    [("within", g.within.is_some()), ("across", g.across.is_some()), ("hops", g.hops.is_some())]
        .into_iter()
        .find_map(|(key, given)| given.then_some(key))
}

/// What one file tells of these keys: they go with all-pairs and pairwise
/// only, `within` and `across` exclude each other.
pub(super) fn check(s: &Scenario) -> Result<(), BadField> {
    for (i, g) in s.groups.iter().enumerate() {
        let takes = matches!(g.pattern, Pattern::AllPairs | Pattern::Pairwise);
        if let Some(key) = restriction(g).filter(|_| !takes) {
            let message = format!(
                "does not apply to pattern `{}`: pairs are chosen by the topology in `all-pairs` and `pairwise` \
                 (and `bisection` chooses its own)",
                g.pattern.name()
            );
            return Err(BadField::new(Field::group(i, key), message));
        }
        if g.within.is_some() && g.across.is_some() {
            let message = "give either `within` (pairs under one leaf) or `across` (pairs under different leaves)";
            return Err(BadField::new(Field::group(i, "across"), message));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hops(text: &str) -> Result<HopRange, BadHops> {
        HopRange::try_from(text.to_string())
    }

    fn refused(given: &str, why: &'static str) -> Result<HopRange, BadHops> {
        Err(BadHops { given: given.into(), why })
    }

    #[test]
    fn hop_ranges_read_both_ends_or_one_count() {
        assert_eq!(hops("2..4"), Ok(HopRange { min: 2, max: 4 }));
        assert_eq!(hops("4"), Ok(HopRange { min: 4, max: 4 }));
        assert_eq!(hops("2..4").unwrap().to_string(), "2..4");
        assert!(hops("2..4").unwrap().contains(4) && !hops("2..2").unwrap().contains(4));
    }

    #[test]
    fn bad_hop_ranges_say_why_and_what_is_valid() {
        let e = hops("4..2").unwrap_err().to_string();
        assert!(e.starts_with("hops = \"4..2\": the first end is above the second; give \"MIN..MAX\""), "{e}");
        assert_eq!(hops("0.."), refused("0..", "both ends are needed"));
        assert_eq!(hops("0..4"), refused("0..4", "a route crosses at least one cable"));
        assert_eq!(hops("two"), refused("two", "an end is not a whole number"));
    }

    #[test]
    fn a_table_file_is_found_beside_the_scenario() {
        let table = TopologyTable { file: "fabric.toml".into(), format: None };
        assert_eq!(table.beside(Path::new("scenarios/s.toml")).file, Path::new("scenarios/fabric.toml"));
        let absolute = TopologyTable { file: "/etc/fabric.toml".into(), format: Some(Format::Toml) };
        assert_eq!(absolute.beside(Path::new("scenarios/s.toml")), absolute);
    }
}
