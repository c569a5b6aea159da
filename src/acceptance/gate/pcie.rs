//! A profile's `pcie`: the least PCIe link each NIC the run uses must have
//! trained at. A NIC that came up at x8 of x16 after a reboot, or at
//! 16 of 32 GT/s behind a bad riser, keeps its port ACTIVE at full rate
//! and moves half its traffic; only the link's own training says so.

use std::fmt;

use crate::sysfs::pcie::PcieLink;

/// PCIe speeds per lane, GT/s (generations 1 to 6).
const SPEEDS: &[f64] = &[2.5, 5.0, 8.0, 16.0, 32.0, 64.0];
/// PCIe link widths, lanes.
const WIDTHS: &[u32] = &[1, 2, 4, 8, 12, 16, 32];

const FORMS: &str = "use \"best\" (each NIC at the speed and width it could have) or the least speed and width, \
                     e.g. \"32 GT/s x16\"";

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PcieFloor {
    /// `"best"`: each NIC at the speed and width its own device could
    /// have (a NIC in a slot narrower than itself then fails: name the
    /// link instead).
    Best,
    /// `"32 GT/s x16"`: at least this speed and this width.
    AtLeast { gts: f64, width: u32 },
}

impl PcieFloor {
    /// `best`, or `SPEED GT/s xWIDTH`; the error says what would be valid.
    pub fn parse(text: &str) -> Result<PcieFloor, String> {
        if text.trim() == "best" {
            return Ok(PcieFloor::Best);
        }
        let bad = || format!("`{text}` is not a PCIe link: {FORMS}");
        let words: Vec<&str> = text.split_whitespace().collect();
        let [speed, "GT/s", width] = words[..] else { return Err(bad()) };
        let gts: f64 = speed.parse().map_err(|_| bad())?;
        let width: u32 = width.strip_prefix(['x', 'X']).and_then(|w| w.parse().ok()).ok_or_else(bad)?;
        if !SPEEDS.contains(&gts) {
            return Err(format!("`{text}`: {gts} GT/s is no PCIe speed; use one of 2.5, 5, 8, 16, 32, 64"));
        }
        if !WIDTHS.contains(&width) {
            return Err(format!("`{text}`: x{width} is no PCIe width; use one of x1, x2, x4, x8, x12, x16, x32"));
        }
        Ok(PcieFloor::AtLeast { gts, width })
    }

    /// Whether `link` trained at least this.
    pub fn met_by(&self, link: &PcieLink) -> bool {
        match *self {
            PcieFloor::Best => !link.downtrained(),
            PcieFloor::AtLeast { gts, width } => link.speed_gts >= gts && link.width >= width,
        }
    }
}

impl fmt::Display for PcieFloor {
    /// `its best`, `at least 32 GT/s x16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcieFloor::Best => f.write_str("its best"),
            PcieFloor::AtLeast { gts, width } => write!(f, "at least {gts} GT/s x{width}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(speed_gts: f64, width: u32, max_speed_gts: f64, max_width: u32) -> PcieLink {
        PcieLink { speed_gts, max_speed_gts, width, max_width }
    }

    #[test]
    fn a_floor_is_best_or_a_speed_and_width() {
        assert_eq!(PcieFloor::parse("best"), Ok(PcieFloor::Best));
        assert_eq!(PcieFloor::parse("32 GT/s x16"), Ok(PcieFloor::AtLeast { gts: 32.0, width: 16 }));
        assert_eq!(PcieFloor::parse("2.5 GT/s X1"), Ok(PcieFloor::AtLeast { gts: 2.5, width: 1 }));
        for (bad, says) in [
            ("fast", "`fast` is not a PCIe link: use \"best\""),
            ("32 GT/s", "`32 GT/s` is not a PCIe link"),
            ("32 Gb/s x16", "`32 Gb/s x16` is not a PCIe link"),
            ("32 GT/s 16", "`32 GT/s 16` is not a PCIe link"),
            ("20 GT/s x16", "`20 GT/s x16`: 20 GT/s is no PCIe speed"),
            ("32 GT/s x3", "`32 GT/s x3`: x3 is no PCIe width"),
            ("32 GT/s x99999999999", "`32 GT/s x99999999999` is not a PCIe link"),
        ] {
            let e = PcieFloor::parse(bad).unwrap_err();
            assert!(e.starts_with(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_link_meets_a_floor_at_or_above_it_and_best_at_its_own_best() {
        let at_x8 = link(32.0, 8, 32.0, 16);
        let gen4_card = link(16.0, 16, 16.0, 16);
        let floor = PcieFloor::AtLeast { gts: 32.0, width: 16 };
        assert!(!floor.met_by(&at_x8) && !floor.met_by(&gen4_card));
        assert!(floor.met_by(&link(32.0, 16, 32.0, 16)));
        assert!(PcieFloor::AtLeast { gts: 16.0, width: 16 }.met_by(&gen4_card));
        assert!(!PcieFloor::Best.met_by(&at_x8) && PcieFloor::Best.met_by(&gen4_card));
        assert!(!PcieFloor::Best.met_by(&link(16.0, 16, 32.0, 16)), "a slower speed is below its best too");
        assert_eq!(
            (floor.to_string(), PcieFloor::Best.to_string()),
            ("at least 32 GT/s x16".into(), "its best".into())
        );
    }
}
