//! `rails`: which NICs of two hosts a group's pairs join. On GPU clusters
//! NIC k of every host is cabled to rail k, and rank k of a host is bound
//! to its k-th NIC (the hostfile's `devices=`), so a rank's rail is its
//! slot. `rails = "same"` keeps only rail k of one host with rail k of
//! another: the paths the fabric is built for, without the same-host and
//! cross-rail pairs that all ranks paired give. The pairs themselves are
//! chosen in `plan`; here is what one file tells on its own.

use serde::{Deserialize, Serialize};

use super::{BadField, Field, Pattern, Scenario};

/// Which rails a group's pairs join.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rails {
    /// Any rank with any other, as the pattern pairs them.
    #[default]
    All,
    /// Rail k of one host with rail k of another host only.
    Same,
}

/// The patterns whose pairs `rails` chooses among.
pub const RAIL_PATTERNS: [Pattern; 4] = [Pattern::AllPairs, Pattern::Pairwise, Pattern::FanIn, Pattern::Bisection];

impl Rails {
    pub fn name(self) -> &'static str {
        match self {
            Rails::All => "all",
            Rails::Same => "same",
        }
    }
}

/// Why `rails` is refused on `pattern`: it names the patterns it goes with.
pub fn not_for(pattern: Pattern) -> String {
    let takes: Vec<String> = RAIL_PATTERNS.iter().map(|p| format!("`{}`", p.name())).collect();
    format!("does not apply to pattern `{}`: rails are chosen in {} only", pattern.name(), takes.join(", "))
}

/// `rails` goes with the patterns of [`RAIL_PATTERNS`] only, whatever its value.
pub(super) fn check(s: &Scenario) -> Result<(), BadField> {
    for (i, g) in s.groups.iter().enumerate() {
        if g.rails.is_some() && !RAIL_PATTERNS.contains(&g.pattern) {
            return Err(BadField::new(Field::group(i, "rails"), not_for(g.pattern)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(group: &str) -> Result<Scenario, String> {
        let text = format!("[[group]]\nname = \"g\"\n{group}\n");
        crate::scenario::parse(&text, Path::new("s.toml")).map(|(s, _)| s).map_err(|e| e.to_string())
    }

    #[test]
    fn rails_are_read_on_the_patterns_that_choose_pairs() {
        for pattern in ["all-pairs", "pairwise", "fan-in", "all-to-one", "bisection"] {
            let s = parse(&format!("pattern = \"{pattern}\"\nrails = \"same\"")).unwrap();
            assert_eq!(s.groups[0].rails, Some(Rails::Same), "{pattern}");
        }
        assert_eq!(parse("pattern = \"all-pairs\"\nrails = \"all\"").unwrap().groups[0].rails, Some(Rails::All));
        assert_eq!(parse("pattern = \"all-pairs\"").unwrap().groups[0].rails, None, "not given: all");
    }

    #[test]
    fn rails_on_another_pattern_are_refused_naming_the_key_group_and_patterns() {
        for (pattern, value) in [("ring", "same"), ("all-to-all", "all"), ("one-to-all", "same"), ("explicit", "same")]
        {
            let flows = if pattern == "explicit" { "flows = [[0, 1]]\n" } else { "" };
            let e = parse(&format!("pattern = \"{pattern}\"\n{flows}rails = \"{value}\"")).unwrap_err();
            assert!(e.starts_with("s.toml:"), "{e}");
            assert!(
                e.contains(&format!(
                    "group \"g\": field `rails`: does not apply to pattern `{pattern}`: rails are chosen in \
                     `all-pairs`, `pairwise`, `fan-in`, `bisection` only"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn a_bad_value_is_refused_with_the_valid_ones() {
        let e = parse("pattern = \"all-pairs\"\nrails = \"rail\"").unwrap_err();
        assert!(e.starts_with("s.toml:4:9: unknown variant `rail`, expected `all` or `same`"), "{e}");
    }
}
