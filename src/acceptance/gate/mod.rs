//! The node gate: every host alone, before any pair runs — the ports the
//! run uses up at the profile's rate and width, their NICs' PCIe links
//! trained at its `pcie`, their error counters still, its locked-memory
//! limit above what its RDMA buffers register, its RDMA loopback at the
//! profile's share of line rate and its TCP loopback at the profile's TCP
//! floor. A host that fails is left out of the
//! pairs, named for its own fault. The verdicts here are pure functions of
//! the profile and what was read; `plan` builds the loopback phases and
//! `judge_run` reads a gate run's result.

mod memlock;
mod pcie;
mod plan;
mod profile;

use crate::hostfacts::{LockedMemory, PortFacts};
use crate::result::gate::{GateLine, HostGate};
use crate::scenario::Transport;
use crate::sysfs::pcie::PcieLink;
use crate::transport::rdma::counters::CounterDelta;
use crate::transport::rdma::HOW_TO_RAISE_MEMLOCK;
pub use memlock::Pinned;
pub use pcie::PcieFloor;
pub use plan::{judge_run, plan};
pub use profile::{load, LoopbackMin, Profile, TcpLoopbackMin};

/// Why one host fails the gate; its text is the reason run.json keeps.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GateFault {
    #[error("{port} is {state}, expected ACTIVE")]
    NotActive { port: String, state: String },
    #[error("{port} at {}, expected {}", gbps_text(*gbps), gbps_text(*expected))]
    WrongRate { port: String, gbps: f64, expected: f64 },
    #[error("{port} reports no rate, expected {}", gbps_text(*expected))]
    NoRate { port: String, expected: f64 },
    #[error("{port} is {}, expected {expected}X", width.map_or("of unknown width".to_string(), |w| format!("{w}X")))]
    WrongWidth { port: String, width: Option<u8>, expected: u8 },
    #[error("no RDMA device {device} on the host")]
    NoDevice { device: String },
    #[error("its ports are unknown: {why}")]
    NoFacts { why: String },
    #[error("{port}: {counter} rose by {by} during the gate")]
    CounterMoved { port: String, counter: String, by: u64 },
    /// `what`: `TCP loopback`, `RDMA loopback on mlx5_0`.
    #[error("{what} at {}, below {} ({why})", gbps_text(*gbps), gbps_text(*min))]
    LoopbackSlow { what: String, gbps: f64, min: f64, why: String },
    #[error("{what} not measured: {why}")]
    NoLoopback { what: String, why: Unmeasured },
    #[error(
        "locked memory is limited to {limit} (RLIMIT_MEMLOCK), below the {} its RDMA buffers register in one \
         process: raise it where fabricbench starts ({HOW_TO_RAISE_MEMLOCK})",
        LockedMemory::Bytes(*needed)
    )]
    LockedMemory { limit: LockedMemory, needed: u64 },
    #[error("loopback_min is a share of line rate, but no line rate is known: set `rate` in the profile")]
    NoLineRate,
    #[error("{device} PCIe link trained at {link}, expected {floor}")]
    PcieBelow { device: String, link: PcieLink, floor: PcieFloor },
    #[error("{device} reports no PCIe link (a virtual device?), expected {floor}")]
    NoPcie { device: String, floor: PcieFloor },
}

/// Why a host's loopback was not measured. The texts of a flow's error and
/// of a failed run are run.json's, read back from the gate run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unmeasured {
    /// A loopback flow of the host ended with this error.
    #[error("{0}")]
    FlowFailed(String),
    #[error("the gate run failed: {0}")]
    RunFailed(String),
    #[error("no loopback flow of this host completed")]
    NoFlow,
}

/// `TCP loopback`, `RDMA loopback on mlx5_0`: which loopback a line speaks of.
fn loopback_name(transport: Transport, on: &[String]) -> String {
    match (transport, on) {
        (Transport::Tcp, _) => "TCP loopback".into(),
        (Transport::Rdma, []) => "RDMA loopback".into(),
        (Transport::Rdma, on) => format!("RDMA loopback on {}", on.join("+")),
    }
}

/// `376 Gb/s`, `187.5 Gb/s`: to 0.01 Gb/s, no trailing zeros; below
/// 1 Gb/s to 3 significant digits (`0.0025 Gb/s`), so that a small
/// minimum (a share of an emulated port's rate) does not read as 0.
fn gbps_text(gbps: f64) -> String {
    let digits = match gbps.abs() {
        g if g >= 1.0 || g == 0.0 || !g.is_finite() => 2,
        g => 2 - g.log10().floor() as i32,
    };
    let scale = 10f64.powi(digits);
    format!("{} Gb/s", (gbps * scale).round() / scale)
}

/// What was read of one host for the gate.
#[derive(Clone, Debug, Default)]
pub struct HostReadings<'a> {
    pub host: String,
    /// The ports the run uses, with their device's name.
    pub ports: Vec<(&'a str, &'a PortFacts)>,
    /// The devices of those ports, each once, with the PCIe link it
    /// trained at (`None`: none known).
    pub pcie: Vec<(&'a str, Option<&'a PcieLink>)>,
    /// Devices the run names that the host lacks.
    pub missing: Vec<String>,
    /// Why the host's ports could not be read, when they could not.
    pub unknown_ports: Option<String>,
    /// The counters that moved during the gate, per port.
    pub moved: Vec<CounterDelta>,
    /// Each looping rank's RDMA loopback, on its own NICs (empty: no RDMA
    /// loopback ran, or the profile asks for none).
    pub rdma_loopbacks: Vec<RdmaLoopback>,
    /// The same of the TCP loopback, held to the profile's TCP floor.
    pub tcp_loopback: Option<Result<f64, Unmeasured>>,
    /// An RDMA run's locked-memory limit on the host beside what its
    /// buffers register (`None`: no RDMA, or the limit is unknown).
    pub locked: Option<Locked>,
}

/// One rank's RDMA loopback: the devices it ran on and its slowest flow,
/// Gb/s, or why none was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct RdmaLoopback {
    /// By the counters the rank read (empty: none read).
    pub on: Vec<String>,
    pub measured: Result<f64, Unmeasured>,
}

/// A host's locked-memory limit and what one of its processes registers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Locked {
    pub limit: LockedMemory,
    /// Bytes: the most one rank registers in one phase ([`Pinned`]).
    pub needed: u64,
}

/// `locked memory 8 MiB ≥ 1 MiB …`, or the fault of a limit below the need.
fn locked_verdict(Locked { limit, needed }: Locked) -> (GateLine, Option<GateFault>) {
    match limit {
        LockedMemory::Bytes(bytes) if bytes < needed => {
            let fault = GateFault::LockedMemory { limit, needed };
            (GateLine { passed: false, text: fault.to_string() }, Some(fault))
        }
        _ => {
            let text = format!("locked memory {limit} ≥ the {} its RDMA buffers register", LockedMemory::Bytes(needed));
            (GateLine { passed: true, text }, None)
        }
    }
}

/// The port's width from its rate text: `200 Gb/sec (4X HDR)` → 4.
pub fn width_of(rate: &str) -> Option<u8> {
    let inside = rate.split_once('(')?.1;
    inside.split_whitespace().next()?.strip_suffix(['X', 'x'])?.parse().ok()
}

/// A port's state, rate and width held to the profile.
pub fn port_faults(profile: &Profile, device: &str, port: &PortFacts) -> Vec<GateFault> {
    let name = format!("{device} port {}", port.port);
    let mut faults = Vec::new();
    let state = port.state.clone().unwrap_or_else(|| "of unknown state".into());
    if state != "ACTIVE" {
        faults.push(GateFault::NotActive { port: name.clone(), state });
    }
    if let Some(expected) = profile.rate_gbps {
        match port.rate_gbps {
            Some(gbps) if (gbps - expected).abs() <= expected * 1e-3 => {}
            Some(gbps) => faults.push(GateFault::WrongRate { port: name.clone(), gbps, expected }),
            None => faults.push(GateFault::NoRate { port: name.clone(), expected }),
        }
    }
    if let Some(expected) = profile.width {
        let width = port.rate.as_deref().and_then(width_of);
        if width != Some(expected) {
            faults.push(GateFault::WrongWidth { port: name, width, expected });
        }
    }
    faults
}

/// The watched counters that moved.
pub fn counter_faults(profile: &Profile, moved: &[CounterDelta]) -> Vec<GateFault> {
    moved
        .iter()
        .flat_map(|d| {
            d.counters.iter().filter(|(key, by)| **by > 0 && profile.watches(key)).map(|(key, &by)| {
                GateFault::CounterMoved { port: format!("{} port {}", d.device, d.port), counter: key.clone(), by }
            })
        })
        .collect()
}

/// What the loopback must reach, Gb/s, and why (for the fault's text).
#[derive(Clone, Debug, PartialEq)]
pub struct LoopbackFloor {
    pub gbps: f64,
    pub why: String,
}

/// What the RDMA loopback must reach; `None` where the profile asks for no
/// loopback. The line rate is the profile's `rate` when it names one (a
/// port that came up slow is held to what it should be), else the ports' own.
pub fn loopback_min(profile: &Profile, ports: &[(&str, &PortFacts)]) -> Result<Option<LoopbackFloor>, GateFault> {
    let Some(min) = profile.loopback_min else { return Ok(None) };
    match min {
        LoopbackMin::Gbps(gbps) => Ok(Some(LoopbackFloor { gbps, why: "loopback_min".into() })),
        LoopbackMin::OfLineRate(percent) => {
            let seen = ports
                .iter()
                .filter_map(|(_, p)| p.rate_gbps)
                .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
            let line = profile.rate_gbps.or(seen).ok_or(GateFault::NoLineRate)?;
            let why = format!("{percent}% of line rate {}", gbps_text(line));
            Ok(Some(LoopbackFloor { gbps: line * percent / 100.0, why }))
        }
    }
}

/// What the TCP loopback must reach: the profile's TCP floor, named by
/// the key it came from; never a share of an RDMA line rate.
fn tcp_loopback_min(profile: &Profile) -> Option<LoopbackFloor> {
    let TcpLoopbackMin { gbps, from } = profile.tcp_loopback_min?;
    Some(LoopbackFloor { gbps, why: from.to_string() })
}

/// One host's verdict: each port alone, each transport's loopback against
/// its own floor, every one of them a line of `judged`.
pub fn judge_host(profile: &Profile, readings: &HostReadings) -> HostGate {
    let mut faults: Vec<GateFault> =
        readings.missing.iter().map(|d| GateFault::NoDevice { device: d.clone() }).collect();
    faults.extend(readings.unknown_ports.iter().map(|why| GateFault::NoFacts { why: why.clone() }));
    let mut judged = Vec::new();
    // A port's own counters go on its line; those of a port not held (none, as a rule) stay reasons.
    let mut moved = counter_faults(profile, &readings.moved);
    for (device, port) in &readings.ports {
        let name = format!("{device} port {}", port.port);
        let mut own = port_faults(profile, device, port);
        own.extend(moved.extract_if(.., |f| matches!(f, GateFault::CounterMoved { port, .. } if *port == name)));
        judged.push(port_line(device, port, &own));
        faults.extend(own);
    }
    faults.extend(moved);
    if let Some(floor) = profile.pcie {
        for &(device, link) in &readings.pcie {
            let (line, fault) = pcie_verdict(device, link, floor);
            judged.push(line);
            faults.extend(fault);
        }
    }
    if let Some(locked) = readings.locked {
        let (line, fault) = locked_verdict(locked);
        judged.push(line);
        faults.extend(fault);
    }
    let looped = !readings.rdma_loopbacks.is_empty();
    let mut loopbacks: Vec<(String, LoopbackFloor, &Result<f64, Unmeasured>)> = Vec::new();
    match looped.then(|| loopback_min(profile, &readings.ports)).transpose().map(Option::flatten) {
        Err(fault) => faults.push(fault),
        Ok(None) => {}
        Ok(Some(floor)) => loopbacks.extend(
            readings.rdma_loopbacks.iter().map(|l| (loopback_name(Transport::Rdma, &l.on), floor.clone(), &l.measured)),
        ),
    }
    if let (Some(floor), Some(measured)) = (tcp_loopback_min(profile), &readings.tcp_loopback) {
        loopbacks.push((loopback_name(Transport::Tcp, &[]), floor, measured));
    }
    // The RDMA loopback's numbers stand for the host when there is one (the table's columns).
    let loopback_gbps = match looped {
        true => slowest(readings.rdma_loopbacks.iter().map(|l| &l.measured)),
        false => slowest(readings.tcp_loopback.iter()),
    };
    let loopback_min_gbps = loopbacks.first().map(|(_, floor, _)| floor.gbps);
    for (what, floor, measured) in loopbacks {
        let (line, fault) = loopback_verdict(what, floor, measured);
        judged.push(line);
        faults.extend(fault);
    }
    HostGate {
        host: readings.host.clone(),
        passed: faults.is_empty(),
        ports: readings.ports.iter().map(|(d, p)| format!("{d}/{}", p.port)).collect(),
        loopback_gbps,
        loopback_min_gbps,
        reasons: faults.iter().map(ToString::to_string).collect(),
        judged,
        ..HostGate::default()
    }
}

/// The slowest of the loopbacks measured.
fn slowest<'m>(loopbacks: impl Iterator<Item = &'m Result<f64, Unmeasured>>) -> Option<f64> {
    loopbacks.filter_map(|m| m.as_ref().ok().copied()).reduce(f64::min)
}

/// `mlx5_0 PCIe link 32 GT/s x16, at least 32 GT/s x16`, or the fault.
fn pcie_verdict(device: &str, link: Option<&PcieLink>, floor: PcieFloor) -> (GateLine, Option<GateFault>) {
    let device = device.to_string();
    let fault = match link {
        Some(link) if floor.met_by(link) => {
            return (GateLine { passed: true, text: format!("{device} PCIe link {link}, {floor}") }, None);
        }
        Some(&link) => GateFault::PcieBelow { device, link, floor },
        None => GateFault::NoPcie { device, floor },
    };
    (GateLine { passed: false, text: fault.to_string() }, Some(fault))
}

/// `mlx5_0 port 1 ACTIVE at 400 Gb/s 4X`, or its faults.
fn port_line(device: &str, port: &PortFacts, faults: &[GateFault]) -> GateLine {
    if !faults.is_empty() {
        let text = faults.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        return GateLine { passed: false, text };
    }
    let mut text = format!("{device} port {} ACTIVE", port.port);
    if let Some(gbps) = port.rate_gbps {
        text += &format!(" at {}", gbps_text(gbps));
    }
    if let Some(width) = port.rate.as_deref().and_then(width_of) {
        text += &format!(" {width}X");
    }
    GateLine { passed: true, text }
}

/// `TCP loopback 38.2 Gb/s ≥ 10 Gb/s (tcp_loopback_min)`, or the fault.
fn loopback_verdict(
    what: String,
    floor: LoopbackFloor,
    measured: &Result<f64, Unmeasured>,
) -> (GateLine, Option<GateFault>) {
    let LoopbackFloor { gbps: min, why } = floor;
    let fault = match measured {
        Err(why) => GateFault::NoLoopback { what, why: why.clone() },
        Ok(gbps) if *gbps < min => GateFault::LoopbackSlow { what, gbps: *gbps, min, why },
        Ok(gbps) => {
            let text = format!("{what} {} ≥ {} ({why})", gbps_text(*gbps), gbps_text(min));
            return (GateLine { passed: true, text }, None);
        }
    };
    (GateLine { passed: false, text: fault.to_string() }, Some(fault))
}

#[cfg(test)]
mod tests;
