//! A PCIe function's link as the kernel trained it (sysfs
//! `current_link_speed` and `current_link_width` against their `max_`):
//! a NIC that trained below its best (a riser, a slot narrower than the
//! card, a link that fell back after errors) moves no more than that link
//! carries, whatever its port's rate says.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::text;

/// The link a PCIe function trained at, and the best it could.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct PcieLink {
    /// Transfers per second per lane now, and at best, GT/s.
    pub speed_gts: f64,
    pub max_speed_gts: f64,
    /// Lanes now, and at best.
    pub width: u32,
    pub max_width: u32,
}

impl PcieLink {
    /// The link of the PCI function at `device` (a sysfs device folder);
    /// `None` where the kernel tells no speed or width (a virtual device,
    /// "Unknown" on a link that is down).
    pub fn of(device: &Path) -> Option<PcieLink> {
        let gts = |name: &str| -> Option<f64> { text(&device.join(name))?.split_whitespace().next()?.parse().ok() };
        let lanes = |name: &str| -> Option<u32> { text(&device.join(name))?.parse().ok().filter(|&n| n > 0) };
        Some(PcieLink {
            speed_gts: gts("current_link_speed")?,
            max_speed_gts: gts("max_link_speed")?,
            width: lanes("current_link_width")?,
            max_width: lanes("max_link_width")?,
        })
    }

    /// What the link carries as trained, Gb/s: its lanes' transfers times
    /// the share its line code leaves for data (8b/10b up to 5 GT/s,
    /// 128b/130b from 8 GT/s, 242/256 in the FLIT mode of 64 GT/s), before
    /// the packets' own headers.
    pub fn gbps(&self) -> f64 {
        let code = match self.speed_gts {
            s if s <= 5.0 => 8.0 / 10.0,
            s if s < 64.0 => 128.0 / 130.0,
            _ => 242.0 / 256.0,
        };
        self.speed_gts * f64::from(self.width) * code
    }

    /// Trained below the speed or the width it could have.
    pub fn downtrained(&self) -> bool {
        self.speed_gts < self.max_speed_gts || self.width < self.max_width
    }
}

impl fmt::Display for PcieLink {
    /// `16 GT/s x8 (of 16 GT/s x16)`; a link at its best: `16 GT/s x16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} GT/s x{}", self.speed_gts, self.width)?;
        if self.downtrained() {
            write!(f, " (of {} GT/s x{})", self.max_speed_gts, self.max_width)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(speed: f64, width: u32, max_speed: f64, max_width: u32) -> PcieLink {
        PcieLink { speed_gts: speed, max_speed_gts: max_speed, width, max_width }
    }

    #[test]
    fn each_generation_loses_its_line_codes_share() {
        assert!((link(2.5, 8, 2.5, 8).gbps() - 16.0).abs() < 1e-9, "Gen1 x8: 8b/10b");
        assert!((link(16.0, 16, 16.0, 16).gbps() - 252.06).abs() < 0.01, "Gen4 x16: 128b/130b");
        assert!((link(64.0, 16, 64.0, 16).gbps() - 968.0).abs() < 1e-9, "Gen6 x16: FLIT");
    }

    #[test]
    fn a_link_below_its_best_says_so() {
        let half = link(32.0, 8, 32.0, 16);
        assert!(half.downtrained());
        assert_eq!(half.to_string(), "32 GT/s x8 (of 32 GT/s x16)");
        assert_eq!(link(16.0, 16, 16.0, 16).to_string(), "16 GT/s x16");
        assert!(link(8.0, 16, 16.0, 16).downtrained(), "Gen3 in a Gen4 slot");
    }

    #[test]
    fn speeds_in_every_kernels_words_and_unknown_links() {
        let dir = tempfile::tempdir().unwrap();
        let put = |name: &str, value: &str| std::fs::write(dir.path().join(name), value).unwrap();
        put("current_link_speed", "16.0 GT/s PCIe\n");
        put("max_link_speed", "16 GT/s\n"); // older kernels: no "PCIe"
        put("current_link_width", "8\n");
        put("max_link_width", "16\n");
        assert_eq!(PcieLink::of(dir.path()), Some(link(16.0, 8, 16.0, 16)));
        put("current_link_speed", "Unknown\n");
        assert_eq!(PcieLink::of(dir.path()), None, "a link that is down");
        put("current_link_speed", "2.5 GT/s PCIe\n");
        put("current_link_width", "0\n");
        assert_eq!(PcieLink::of(dir.path()), None, "no lanes trained");
    }
}
