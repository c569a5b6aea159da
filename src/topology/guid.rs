//! An HCA's node GUID: one 64-bit number that ibnetdiscover writes as
//! `H-0002c90300a1b2c0`, sysfs as `0002:c903:00a1:b2c0` (`node_guid`) and
//! ibstat as `0x0002c90300a1b2c0`. Where a fabric's node descriptions do
//! not name their hosts, it is how an HCA of the dump meets the device a
//! host reports.

use std::fmt;
use std::str::FromStr;

/// A node GUID; printed as ibstat prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeGuid(pub u64);

/// Why a text is not a node GUID.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{given}` is not a node GUID: give 16 hex digits (`0002c90300a1b2c0`, `0x0002c90300a1b2c0`) or four \
     groups of four (`0002:c903:00a1:b2c0`)"
)]
pub struct BadGuid {
    given: String,
}

impl FromStr for NodeGuid {
    type Err = BadGuid;

    fn from_str(text: &str) -> Result<NodeGuid, BadGuid> {
        let bad = || BadGuid { given: text.to_string() };
        let digits = text.trim().trim_start_matches("0x").trim_start_matches("0X");
        let groups: Vec<&str> = digits.split(':').collect();
        // Grouped, every group has its four digits; ungrouped, up to 16 (ibnetdiscover drops none).
        let well_formed = match groups.len() {
            1 => (1..=16).contains(&digits.len()),
            4 => groups.iter().all(|g| g.len() == 4),
            _ => false,
        };
        let hex: String = groups.concat();
        if !well_formed || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        u64::from_str_radix(&hex, 16).map(NodeGuid).map_err(|_| bad())
    }
}

impl TryFrom<String> for NodeGuid {
    type Error = BadGuid;

    fn try_from(text: String) -> Result<NodeGuid, BadGuid> {
        text.parse()
    }
}

impl From<NodeGuid> for String {
    fn from(guid: NodeGuid) -> String {
        guid.to_string()
    }
}

impl fmt::Display for NodeGuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tools_form_reads_as_one_number() {
        let guid = NodeGuid(0x0002_c903_00a1_b2c0);
        for text in ["0002c90300a1b2c0", "0x0002c90300a1b2c0", "0002:c903:00a1:b2c0", "0002:C903:00A1:B2C0\n"] {
            assert_eq!(text.parse(), Ok(guid), "{text}");
        }
        assert_eq!(guid.to_string(), "0x0002c90300a1b2c0");
        assert_eq!(serde_json::to_string(&guid).unwrap(), r#""0x0002c90300a1b2c0""#);
        assert_eq!("02".parse(), Ok(NodeGuid(2)));
    }

    #[test]
    fn other_texts_are_refused_with_the_valid_forms() {
        for text in ["", "0x", "node01", "0002:c903:00a1", "2:c903:00a1:b2c0", "10002c90300a1b2c0", "00-02"] {
            let e = text.parse::<NodeGuid>().unwrap_err().to_string();
            assert!(e.starts_with(&format!("`{text}` is not a node GUID: give 16 hex digits")), "{e}");
        }
        assert!(serde_json::from_str::<NodeGuid>(r#""zz""#).is_err());
    }
}
