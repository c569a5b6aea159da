//! `fabricbench watch`: a standing probe mesh between acceptances.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{listen, SshArgs, TopologyArgs};
use crate::launch::choose::LauncherKind;
use crate::scenario::{Threshold, Transport};
use crate::units::ByteSize;

pub const EXAMPLES: &str = "\
Examples:
  # every pair of hosts probed 4 times a second over TCP, judged every 30 s, until stopped
  fabricbench watch -H rack1

  # pairs chosen by the fabric (every pair under a leaf, pairs across the spine), over
  # RDMA, scraped by Prometheus (prometheus/fabricbench.rules.yml alerts on it)
  fabricbench watch -H rack1 --topology fabric.toml --transport rdma --metrics :9464

  # ten 5-second windows on four local ranks, stricter limits
  fabricbench watch -H hostfiles/local --window 5s --windows 10 --p99 200us --loss 0%

Each window every path sends --rate probes a second (open-loop: on a fixed
schedule, each timed from when it was due) and is judged against --p99 and
--loss; failing paths are localised as acceptance does (host, NIC, link,
leaf, uplink). A suspect that appears, stays 3 windows or clears is an event.
A worker that dies or a host that cannot be reached ends the window, not the
watch: the workers are started again (5 s, then up to 60 s apart) and the
event says why. SIGTERM or Ctrl-C ends it, exit 0, every file kept.

Files, in results/<UTC time>-watch/: watch.toml (the mesh as a scenario;
`fabricbench plan` prints it), events.jsonl (one event a line), windows.jsonl
(each window's paths: p50, p99, loss), each rotated at --log-max into .1 .. .3.";

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Hostfile (as `run` reads it); inside a Slurm allocation the default is its nodes
    #[arg(short = 'H', long = "hostfile")]
    pub hostfile: Option<PathBuf>,
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// How the probes travel: tcp (sockets), or rdma (RC sends on each rank's device)
    #[arg(long, value_enum, default_value_t = Transport::Tcp)]
    pub transport: Transport,
    /// How long one window measures before its paths are judged, 1s to 1h
    #[arg(long, value_parser = window, default_value = "30s", value_name = "DURATION")]
    pub window: Duration,
    /// Stop after N windows (default: run until stopped)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub windows: Option<u64>,
    /// Probes per second on each path, 1 to 1000
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rate: u32,
    /// Bytes of one probe, 2 B to 4 KiB
    #[arg(long, default_value = "64", value_name = "BYTES", value_parser = probe_size)]
    pub size: ByteSize,
    /// A path whose p99 half round trip exceeds this fails the window
    #[arg(long, default_value = "500us", value_name = "TIME", value_parser = p99)]
    pub p99: Threshold,
    /// A path that loses more than this share of its probes fails the window
    #[arg(long, default_value = "2%", value_name = "SHARE", value_parser = loss)]
    pub loss: Threshold,
    /// Refuse a mesh in which a host would send more probes a second than this
    /// (its probes and its echoes of its peers' probes)
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub max_probes: u64,
    /// Serve the watch for Prometheus at http://ADDR:PORT/metrics (OpenMetrics:
    /// each path's latency and loss, suspects, events), e.g. --metrics :9464
    #[arg(long, value_name = "ADDR:PORT", value_parser = listen::parse_listen)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Folder under which the watch's folder is made
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Rotate events.jsonl and windows.jsonl when one reaches this size, 64K to 1G
    #[arg(long, default_value = "64M", value_name = "BYTES", value_parser = log_max)]
    pub log_max: ByteSize,
    /// How workers are started, as for `run`
    #[arg(long, value_enum, default_value_t = LauncherKind::Auto)]
    pub launcher: LauncherKind,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// TCP port of rank 0's coordinator (0 = any free port)
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Print nothing but errors and events
    #[arg(short, long)]
    pub quiet: bool,
}

fn window(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    match Duration::from_secs(1)..=Duration::from_secs(3600) {
        range if range.contains(&d) => Ok(d),
        _ => Err(format!("`{text}`: a window is 1s to 1h")),
    }
}

fn bounded(text: &str, low: u64, high: u64, what: &str) -> Result<ByteSize, String> {
    let size = ByteSize::parse(text).map_err(|e| e.to_string())?;
    match (low..=high).contains(&size.bytes()) {
        true => Ok(size),
        false => Err(format!("`{text}`: {what}")),
    }
}

fn probe_size(text: &str) -> Result<ByteSize, String> {
    bounded(text, 2, 4096, "a probe is 2 B to 4 KiB")
}

fn log_max(text: &str) -> Result<ByteSize, String> {
    bounded(text, 64 << 10, 1 << 30, "a log rotates at 64K to 1G")
}

fn p99(text: &str) -> Result<Threshold, String> {
    match Threshold::parse(text).map_err(|e| e.to_string())? {
        t @ Threshold::Micros(_) => Ok(t),
        _ => Err(format!("`{text}` is not a time; write e.g. \"500us\" or \"1ms\"")),
    }
}

fn loss(text: &str) -> Result<Threshold, String> {
    match Threshold::parse(text).map_err(|e| e.to_string())? {
        t @ Threshold::Share(_) => Ok(t),
        _ => Err(format!("`{text}` is not a share; write e.g. \"2%\"")),
    }
}
