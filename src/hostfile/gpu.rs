//! Which GPU a rank's GPU memory is on, as a scenario's `gpu`, a
//! hostfile's `gpus=` entry or pair's --use_cuda names it. It lives at the
//! bottom of the stack so the hostfile and the scenario read it with one
//! parser. The scenario forms (an index or a string) are read only from
//! human-readable formats; on the postcard wire it is a plain tagged value,
//! since postcard cannot tell a string from a number by looking.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which GPU a rank's GPU memory is on.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum GpuChoice {
    /// The GPU nearest the rank's NIC (PCIe), from the host's facts; GPU 0
    /// with a warning when the host tells no affinity.
    #[default]
    Auto,
    /// By CUDA's number (PCI bus order).
    Index(usize),
    /// By PCI address, e.g. "0000:1b:00.0".
    BusId(String),
}

/// The wire form, and the human-readable one's pieces.
#[derive(Serialize, Deserialize)]
enum GpuWire {
    Auto,
    Index(usize),
    BusId(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum GpuForm {
    Index(usize),
    Text(String),
}

impl GpuChoice {
    /// "auto", "3" or the bus id, for messages and the summary.
    pub fn describe(&self) -> String {
        match self {
            GpuChoice::Auto => "auto".into(),
            GpuChoice::Index(i) => i.to_string(),
            GpuChoice::BusId(b) => b.clone(),
        }
    }
}

impl Serialize for GpuChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (s.is_human_readable(), self) {
            (true, GpuChoice::Index(i)) => s.serialize_u64(*i as u64),
            (true, other) => s.serialize_str(&other.describe()),
            (false, GpuChoice::Auto) => GpuWire::Auto.serialize(s),
            (false, GpuChoice::Index(i)) => GpuWire::Index(*i).serialize(s),
            (false, GpuChoice::BusId(b)) => GpuWire::BusId(b.clone()).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for GpuChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if !d.is_human_readable() {
            return Ok(match GpuWire::deserialize(d)? {
                GpuWire::Auto => GpuChoice::Auto,
                GpuWire::Index(i) => GpuChoice::Index(i),
                GpuWire::BusId(b) => GpuChoice::BusId(b),
            });
        }
        let wrong = || {
            serde::de::Error::custom(
                "expected \"auto\", a GPU index (0, 1, …) or a PCI bus id such as \"0000:1b:00.0\"",
            )
        };
        match GpuForm::deserialize(d).map_err(|_: D::Error| wrong())? {
            GpuForm::Index(i) => Ok(GpuChoice::Index(i)),
            GpuForm::Text(t) if t == "auto" => Ok(GpuChoice::Auto),
            GpuForm::Text(t) => GpuChoice::bus_id(&t).ok_or_else(wrong),
        }
    }
}

impl GpuChoice {
    /// A GPU by PCI address: "dddd:bb:dd.f" in hex as sysfs writes it, or
    /// with the 8-digit domain nvidia-smi prints ("00000000:1B:00.0");
    /// kept lowercase with a 4-digit domain, the form CUDA's bus id is
    /// compared in.
    pub fn bus_id(text: &str) -> Option<GpuChoice> {
        let text = match text.split_once(':') {
            Some((domain, _)) if domain.len() == 8 && domain.starts_with("0000") => &text[4..],
            _ => text,
        };
        let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
        let mut parts = text.split([':', '.']);
        let mut next = |n| parts.next().is_some_and(|p| hex(p, n));
        let valid = next(4) && next(2) && next(2) && next(1) && parts.next().is_none();
        valid.then(|| GpuChoice::BusId(text.to_ascii_lowercase()))
    }
}

/// Highest GPU index a hostfile's `gpus=` takes: far above any host's GPU
/// count, so a typo (`gpus=10000`) is refused at its line.
pub const MAX_GPU_INDEX: usize = 255;

impl GpuChoice {
    /// One GPU by CUDA's number (up to [`MAX_GPU_INDEX`]) or by PCI
    /// address ([`GpuChoice::bus_id`]), as a hostfile's `gpus=` lists them.
    pub fn index_or_bus_id(text: &str) -> Option<GpuChoice> {
        match text.parse::<usize>() {
            Ok(index) => (index <= MAX_GPU_INDEX).then_some(GpuChoice::Index(index)),
            Err(_) => GpuChoice::bus_id(text),
        }
    }
}
