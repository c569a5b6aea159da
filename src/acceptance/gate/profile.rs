//! A gate profile: what every node of one type must show before it joins
//! the pairs — its ports' rate and width, its NICs' PCIe links, the
//! counters that must stay still and the share of line rate its loopback
//! must reach. One small TOML file per node type; `profiles/` ships a few.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::pcie::PcieFloor;
use crate::scenario::{parse_rate, BadThreshold, Threshold};

/// The counters a profile watches when it names none: IBA PortCounters
/// errors and the link's own recoveries; a key matches a counter by its
/// file name (`symbol_error`) or its path (`counters/symbol_error`).
pub const DEFAULT_COUNTERS: &[&str] = &[
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
];

/// Port widths InfiniBand and its Ethernet cousins report (`4X`).
const WIDTHS: &[u8] = &[1, 2, 4, 8, 12];

/// What the gate holds each host of one node type to.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The name it was asked by (`ndr-ib`, or the file's path).
    pub name: String,
    pub description: Option<String>,
    /// Every port's expected rate, Gb/s (`None`: any).
    pub rate_gbps: Option<f64>,
    /// Every port's expected width, lanes (`None`: any).
    pub width: Option<u8>,
    /// What the RDMA loopback must reach (`None`: no loopback test).
    pub loopback_min: Option<LoopbackMin>,
    /// What the TCP loopback must reach, and which key said so (`None`:
    /// no loopback test).
    pub tcp_loopback_min: Option<TcpLoopbackMin>,
    /// The least PCIe link each NIC the run uses must have trained at
    /// (`None`: not judged).
    pub pcie: Option<PcieFloor>,
    /// Counters that must not move during the gate.
    pub counters: Vec<String>,
    /// How long the loopback runs (warm-up apart).
    pub duration: std::time::Duration,
}

/// `loopback_min`: an absolute rate or a share of the line rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoopbackMin {
    Gbps(f64),
    /// Percent of the port's line rate (the profile's `rate` when given).
    OfLineRate(f64),
}

/// `tcp_loopback_min`: a TCP loopback goes through the host's own
/// network stack, not a NIC at a line rate, so it is held to a rate only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpLoopbackMin {
    pub gbps: f64,
    pub from: TcpFloorFrom,
}

/// Where a profile's TCP floor came from, named beside every number it judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpFloorFrom {
    /// `tcp_loopback_min` itself.
    Key,
    /// A profile without the key whose `loopback_min` is a rate: written
    /// for a TCP bed before the key existed, it meant that rate.
    LoopbackMin,
    /// A profile without the key whose `loopback_min` is a share of line
    /// rate: [`DEFAULT_TCP_LOOPBACK_GBPS`].
    Default,
}

impl std::fmt::Display for TcpFloorFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TcpFloorFrom::Key => "tcp_loopback_min",
            TcpFloorFrom::LoopbackMin => "loopback_min",
            TcpFloorFrom::Default => "the default tcp_loopback_min",
        })
    }
}

/// The TCP floor of a profile that names none and holds its RDMA loopback
/// to a share of line rate: what a host's kernel loopback reaches on any
/// machine that can run the tool (a laptop's single stream goes well past
/// it), so that only a broken or starved host fails it.
pub const DEFAULT_TCP_LOOPBACK_GBPS: f64 = 1.0;

/// The file as written; `deny_unknown_fields` names a misspelt key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    description: Option<String>,
    rate: Option<String>,
    width: Option<i64>,
    loopback_min: Option<String>,
    tcp_loopback_min: Option<String>,
    pcie: Option<String>,
    counters: Option<Vec<String>>,
    #[serde(default, with = "humantime_serde")]
    duration: Option<std::time::Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("gate profile `{name}` not found: it is neither a file nor one of {known} (searched {searched})")]
    Unknown { name: String, known: String, searched: String },
    #[error("cannot read gate profile {path}: {cause}")]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Syntax { path: PathBuf, line: usize, message: String },
    #[error("{path}: `{key}`: {message}")]
    Key { path: PathBuf, key: &'static str, message: String },
    #[error("{path}: `{key}`: {cause}")]
    LoopbackMin { path: PathBuf, key: &'static str, cause: BadLoopbackMin },
}

/// Why a `loopback_min` or `tcp_loopback_min` value is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadLoopbackMin {
    #[error(transparent)]
    Threshold(#[from] BadThreshold),
    /// A threshold of another kind (`90% of best`, `2x min`): a host is
    /// gated alone, with nothing to compare it to.
    #[error("`{0}`: use a rate (\"90 Gb/s\") or a share of line rate (\"94% of line rate\")")]
    NotARate(String),
    /// A share of line rate for the TCP loopback, which has no line rate.
    #[error("`{0}`: a TCP loopback has no line rate: use a rate (\"10 Gb/s\")")]
    NoLineRate(String),
}

/// The profile `name` names: a file path, or the stem of a file in one of
/// `dirs` (`ndr-ib` → `profiles/ndr-ib.toml`).
pub fn load(name: &str, dirs: &[PathBuf]) -> Result<Profile, ProfileError> {
    let given = Path::new(name);
    let path = if given.is_file() {
        given.to_path_buf()
    } else {
        let found = dirs.iter().map(|d| d.join(format!("{name}.toml"))).find(|p| p.is_file());
        found.ok_or_else(|| unknown(name, dirs))?
    };
    let text = std::fs::read_to_string(&path).map_err(|cause| ProfileError::Read { path: path.clone(), cause })?;
    parse(name, &path, &text)
}

fn unknown(name: &str, dirs: &[PathBuf]) -> ProfileError {
    let mut known: Vec<String> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|list| list.flatten())
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".toml").map(str::to_string))
        .collect();
    known.sort();
    known.dedup();
    let known = if known.is_empty() { "no shipped profile".into() } else { known.join(", ") };
    let searched = dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ");
    ProfileError::Unknown { name: name.to_string(), known, searched }
}

/// A profile's text, from `path` (named in every error).
pub fn parse(name: &str, path: &Path, text: &str) -> Result<Profile, ProfileError> {
    let file: ProfileFile = toml::from_str(text).map_err(|e| ProfileError::Syntax {
        path: path.to_path_buf(),
        line: e.span().map_or(1, |s| text[..s.start].matches('\n').count() + 1),
        message: e.message().to_string(),
    })?;
    let key = |key: &'static str, message: String| ProfileError::Key { path: path.to_path_buf(), key, message };
    let rate_gbps = file.rate.as_deref().map(|r| parse_rate(r).map_err(|e| key("rate", e.to_string()))).transpose()?;
    let width = match file.width {
        Some(w) => Some(
            u8::try_from(w)
                .ok()
                .filter(|w| WIDTHS.contains(w))
                .ok_or_else(|| key("width", format!("{w} is not a port width; use one of 1, 2, 4, 8, 12 (lanes)")))?,
        ),
        None => None,
    };
    let floor = |key: &'static str, text: &str| {
        loopback(text).map_err(|cause| ProfileError::LoopbackMin { path: path.to_path_buf(), key, cause })
    };
    let loopback_min = file.loopback_min.as_deref().map(|t| floor("loopback_min", t)).transpose()?;
    let tcp_key = match file.tcp_loopback_min.as_deref().map(|t| floor("tcp_loopback_min", t)).transpose()? {
        Some(LoopbackMin::OfLineRate(_)) => {
            let text = file.tcp_loopback_min.unwrap_or_default();
            let cause = BadLoopbackMin::NoLineRate(text);
            return Err(ProfileError::LoopbackMin { path: path.to_path_buf(), key: "tcp_loopback_min", cause });
        }
        Some(LoopbackMin::Gbps(gbps)) => Some(gbps),
        None => None,
    };
    let tcp_loopback_min = tcp_floor(tcp_key, loopback_min);
    let pcie = file.pcie.as_deref().map(|t| PcieFloor::parse(t).map_err(|e| key("pcie", e))).transpose()?;
    let counters = file.counters.unwrap_or_else(|| DEFAULT_COUNTERS.iter().map(|c| c.to_string()).collect());
    if let Some(bad) = counters.iter().find(|c| c.is_empty() || c.contains(char::is_whitespace)) {
        return Err(key("counters", format!("`{bad}` is not a counter name (e.g. \"symbol_error\")")));
    }
    let duration = file.duration.unwrap_or(std::time::Duration::from_secs(3));
    if duration.is_zero() || duration > std::time::Duration::from_secs(600) {
        return Err(key("duration", "must be above 0 and at most 10m (e.g. \"3s\")".into()));
    }
    Ok(Profile {
        name: name.to_string(),
        description: file.description,
        rate_gbps,
        width,
        loopback_min,
        tcp_loopback_min,
        pcie,
        counters,
        duration,
    })
}

/// The TCP floor: the key when given, else what `loopback_min` said
/// before the key existed (its rate, or the default for a share of line
/// rate); no TCP loopback test without either.
fn tcp_floor(key: Option<f64>, loopback_min: Option<LoopbackMin>) -> Option<TcpLoopbackMin> {
    let (gbps, from) = match (key, loopback_min) {
        (Some(gbps), _) => (gbps, TcpFloorFrom::Key),
        (None, Some(LoopbackMin::Gbps(gbps))) => (gbps, TcpFloorFrom::LoopbackMin),
        (None, Some(LoopbackMin::OfLineRate(_))) => (DEFAULT_TCP_LOOPBACK_GBPS, TcpFloorFrom::Default),
        (None, None) => return None,
    };
    Some(TcpLoopbackMin { gbps, from })
}

fn loopback(text: &str) -> Result<LoopbackMin, BadLoopbackMin> {
    match Threshold::parse(text)? {
        Threshold::Gbps(g) => Ok(LoopbackMin::Gbps(g)),
        Threshold::OfLineRate(p) => Ok(LoopbackMin::OfLineRate(p)),
        _ => Err(BadLoopbackMin::NotARate(text.to_string())),
    }
}

impl Profile {
    /// Whether the counter under `key` (`counters/symbol_error`) is watched.
    pub fn watches(&self, key: &str) -> bool {
        let file = key.rsplit('/').next().unwrap_or(key);
        self.counters.iter().any(|c| c == key || c == file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Profile, ProfileError> {
        parse("p", Path::new("profiles/p.toml"), text)
    }

    #[test]
    fn reads_every_key() {
        let p = parsed(
            "description = \"NDR\"\nrate = \"400 Gb/s\"\nwidth = 4\nloopback_min = \"94% of line rate\"\n\
             counters = [\"symbol_error\", \"hw_counters/out_of_sequence\"]\nduration = \"5s\"\n",
        )
        .unwrap();
        assert_eq!((p.rate_gbps, p.width, p.loopback_min), (Some(400.0), Some(4), Some(LoopbackMin::OfLineRate(94.0))));
        assert_eq!(p.duration, std::time::Duration::from_secs(5));
        assert!(p.watches("counters/symbol_error"));
        assert!(p.watches("hw_counters/out_of_sequence"));
        assert!(!p.watches("counters/port_xmit_data"));
        assert_eq!(parsed("pcie = \"best\"").unwrap().pcie, Some(PcieFloor::Best));
        let bare = parsed("loopback_min = \"5 Gb/s\"").unwrap();
        assert_eq!((bare.rate_gbps, bare.loopback_min), (None, Some(LoopbackMin::Gbps(5.0))));
        assert!(bare.watches("counters/link_downed"), "the default counters are watched");
        assert_eq!(bare.pcie, None, "no PCIe link judged unless asked");
    }

    /// A TCP loopback is held to its own key; a profile without it keeps
    /// what its `loopback_min` meant (a rate), or the default beside a
    /// share of line rate, and each says where its floor came from.
    #[test]
    fn the_tcp_floor_is_its_own_key_or_a_named_default() {
        let floor = |text: &str| parsed(text).unwrap().tcp_loopback_min.map(|t| (t.gbps, t.from.to_string()));
        let tcp = |gbps: f64, from: &str| Some((gbps, from.to_string()));
        let both = "loopback_min = \"94% of line rate\"\ntcp_loopback_min = \"10 Gb/s\"";
        assert_eq!(floor(both), tcp(10.0, "tcp_loopback_min"));
        assert_eq!(floor("tcp_loopback_min = \"2.5 Gb/s\""), tcp(2.5, "tcp_loopback_min"));
        assert_eq!(floor("loopback_min = \"5 Gb/s\""), tcp(5.0, "loopback_min"));
        assert_eq!(floor("loopback_min = \"94% of line rate\""), tcp(1.0, "the default tcp_loopback_min"));
        assert_eq!(floor("rate = \"400 Gb/s\""), None, "no loopback asked for: none run");
    }

    #[test]
    fn every_bad_key_is_named_with_the_file() {
        let cases = [
            ("rate = \"fast\"", "profiles/p.toml: `rate`: `fast` is not a rate"),
            ("width = 3", "profiles/p.toml: `width`: 3 is not a port width"),
            ("loopback_min = \"94% of best\"", "profiles/p.toml: `loopback_min`: `94% of best`: use a rate"),
            (
                "loopback_min = \"140% of line rate\"",
                "profiles/p.toml: `loopback_min`: `140% of line rate`: the percentage",
            ),
            (
                "tcp_loopback_min = \"90% of line rate\"",
                "profiles/p.toml: `tcp_loopback_min`: `90% of line rate`: a TCP loopback has no line rate",
            ),
            ("tcp_loopback_min = \"fast\"", "profiles/p.toml: `tcp_loopback_min`: `fast`"),
            ("counters = [\"\"]", "profiles/p.toml: `counters`: `` is not a counter name"),
            ("pcie = \"x16\"", "profiles/p.toml: `pcie`: `x16` is not a PCIe link: use \"best\""),
            ("duration = \"0s\"", "profiles/p.toml: `duration`: must be above 0"),
            ("rat = \"400 Gb/s\"", "profiles/p.toml:1: unknown field `rat`"),
            ("width = \"4\"", "profiles/p.toml:1: invalid type"),
        ];
        for (text, start) in cases {
            let e = parsed(text).unwrap_err().to_string();
            assert!(e.starts_with(start), "{text}: {e}");
        }
        let ProfileError::LoopbackMin { cause, .. } = parsed("loopback_min = \"90% of best\"").unwrap_err() else {
            panic!("a threshold of another kind is a bad loopback_min")
        };
        assert_eq!(cause, BadLoopbackMin::NotARate("90% of best".into()));
    }

    #[test]
    fn an_unknown_name_lists_the_shipped_ones() {
        let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("profiles");
        let e = load("no-such-fabric", std::slice::from_ref(&shipped)).unwrap_err().to_string();
        assert!(e.starts_with("gate profile `no-such-fabric` not found"), "{e}");
        assert!(e.contains("ndr-ib") && e.contains("tcp-loopback"), "{e}");
    }

    #[test]
    fn every_shipped_profile_loads() {
        let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("profiles");
        let mut names: Vec<String> = std::fs::read_dir(&shipped)
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".toml").map(str::to_string))
            .collect();
        names.sort();
        assert_eq!(names, ["hdr-ib", "ndr-ib", "roce-100g", "roce-200g", "roce-400g", "tcp-loopback"]);
        for name in names {
            let p = load(&name, std::slice::from_ref(&shipped)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(p.loopback_min.is_some(), "{name} tests the RDMA loopback");
            let tcp = p.tcp_loopback_min.unwrap_or_else(|| panic!("{name} tests the TCP loopback"));
            assert_eq!(tcp.from, TcpFloorFrom::Key, "{name} names its TCP floor");
        }
    }
}
