//! Link events of a rank's devices, read at every sample boundary: the
//! interface's `carrier_changes` and `operstate` (/sys/class/net), and each
//! RDMA port's `counters/link_downed`, `counters/link_error_recovery` and
//! `state` (/sys/class/infiniband). A few small files per boundary, so a
//! soak of hours sees a link that went down for two seconds. Readers take
//! the sysfs roots, so recorded trees stand in for hardware in tests.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Events one rank keeps per phase: a link flapping every interval of a
/// week-long window must not grow the report without bound. Past it,
/// `LinkWatch::dropped` counts what was left out.
pub const MAX_EVENTS: usize = 1000;

/// What a watch saw over a phase: its events, by start, and how many more
/// it dropped past [`MAX_EVENTS`].
pub struct Seen {
    pub events: Vec<LinkEvent>,
    pub dropped: u64,
}

/// Counters whose increase is a link event.
const NET_COUNTERS: &[&str] = &["carrier_changes"];
const IB_COUNTERS: &[&str] = &["counters/link_downed", "counters/link_error_recovery"];

/// One device as the watch reads it.
#[derive(Clone, Debug)]
pub enum Watched {
    /// A network interface under a /sys/class/net root.
    Netdev { root: PathBuf, iface: String },
    /// An RDMA port under a /sys/class/infiniband root.
    RdmaPort { root: PathBuf, device: String, port: u8 },
}

impl Watched {
    pub fn netdev(iface: &str) -> Watched {
        Watched::Netdev { root: PathBuf::from("/sys/class/net"), iface: iface.to_string() }
    }

    pub fn rdma_port(device: &str, port: u8) -> Watched {
        Watched::RdmaPort { root: PathBuf::from("/sys/class/infiniband"), device: device.to_string(), port }
    }

    /// `eth0`, or `mlx5_0/1` for a port.
    pub fn name(&self) -> String {
        match self {
            Watched::Netdev { iface, .. } => iface.clone(),
            Watched::RdmaPort { device, port, .. } => format!("{device}/{port}"),
        }
    }

    /// Its counters and state now; `None` where the device cannot be read.
    pub fn read(&self) -> Option<LinkReading> {
        let number = |path: PathBuf| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
        match self {
            Watched::Netdev { root, iface } => {
                let dir = root.join(iface);
                let state = std::fs::read_to_string(dir.join("operstate")).ok()?.trim().to_string();
                let counters =
                    NET_COUNTERS.iter().filter_map(|c| Some((c.to_string(), number(dir.join(c))?))).collect();
                // `unknown`: drivers without carrier reporting (lo); not a fault.
                let up = matches!(state.as_str(), "up" | "unknown");
                Some(LinkReading { state, up, counters })
            }
            Watched::RdmaPort { root, device, port } => {
                let dir = root.join(device).join("ports").join(port.to_string());
                let state = port_state(&std::fs::read_to_string(dir.join("state")).ok()?);
                let counters = IB_COUNTERS.iter().filter_map(|c| Some((c.to_string(), number(dir.join(c))?))).collect();
                let up = state == "ACTIVE";
                Some(LinkReading { state, up, counters })
            }
        }
    }
}

/// `4: ACTIVE` → `ACTIVE`.
fn port_state(text: &str) -> String {
    let text = text.trim();
    text.split_once(':').map_or(text, |(_, name)| name.trim()).to_string()
}

/// One reading of one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkReading {
    /// As sysfs says it: `up`, `down`, `ACTIVE`, `DOWN`, `INIT`…
    pub state: String,
    pub up: bool,
    pub counters: BTreeMap<String, u64>,
}

/// A link that went down, or whose event counters moved, between two
/// boundaries; it lasts until the first boundary that reads it up with
/// its counters still. Crosses the wire in a rank's report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkEvent {
    /// `eth0`, or `mlx5_0/1` for an RDMA port.
    pub device: String,
    /// The last boundary that read the link healthy, ns after t0: the
    /// event began after it.
    pub from_ns: i64,
    /// The first boundary that read it healthy again, ns after t0; `None`
    /// when it was still not healthy at the last boundary taken.
    pub until_ns: Option<i64>,
    /// Every state other than up that a boundary read, in order, once each.
    pub states: Vec<String>,
    /// How far each event counter moved over the event.
    pub counters: BTreeMap<String, u64>,
}

/// The watch of one rank's devices through one phase.
pub struct LinkWatch {
    devices: Vec<(Watched, Option<LinkReading>, Option<LinkEvent>)>,
    last_ns: i64,
    events: Vec<LinkEvent>,
    pub dropped: u64,
}

impl LinkWatch {
    pub fn new(devices: Vec<Watched>) -> LinkWatch {
        LinkWatch {
            devices: devices.into_iter().map(|w| (w, None, None)).collect(),
            last_ns: 0,
            events: Vec::new(),
            dropped: 0,
        }
    }

    /// Reads every device at a boundary `at_ns` after t0.
    pub fn observe(&mut self, at_ns: i64) {
        for (watched, last, open) in &mut self.devices {
            let Some(now) = watched.read() else { continue };
            let moved: BTreeMap<String, u64> = match last.as_ref() {
                Some(before) => now
                    .counters
                    .iter()
                    .filter_map(|(k, &v)| Some((k.clone(), v.checked_sub(*before.counters.get(k)?)?)))
                    .filter(|(_, d)| *d > 0)
                    .collect(),
                None => BTreeMap::new(),
            };
            // The first reading is the baseline: a link down before the
            // window opens is an event from t0 on. Counters that moved
            // while it reads up (a flap between two boundaries, or the
            // carrier change of coming back) belong to an event that ends here.
            if !now.up || !moved.is_empty() || open.is_some() {
                let event = open.get_or_insert_with(|| LinkEvent {
                    device: watched.name(),
                    from_ns: if last.is_some() { self.last_ns } else { at_ns },
                    until_ns: None,
                    states: Vec::new(),
                    counters: BTreeMap::new(),
                });
                if !now.up && !event.states.contains(&now.state) {
                    event.states.push(now.state.clone());
                }
                for (k, d) in moved {
                    *event.counters.entry(k).or_default() += d;
                }
                if now.up {
                    if let Some(mut event) = open.take() {
                        event.until_ns = Some(at_ns);
                        keep(&mut self.events, &mut self.dropped, event);
                    }
                }
            }
            *last = Some(now);
        }
        self.last_ns = at_ns;
    }

    /// The events seen, those still open at the last boundary included.
    pub fn finish(mut self) -> Seen {
        for (_, _, open) in &mut self.devices {
            if let Some(event) = open.take() {
                keep(&mut self.events, &mut self.dropped, event);
            }
        }
        self.events.sort_by_key(|e| e.from_ns);
        Seen { events: self.events, dropped: self.dropped }
    }
}

fn keep(events: &mut Vec<LinkEvent>, dropped: &mut u64, event: LinkEvent) {
    if events.len() < MAX_EVENTS {
        events.push(event);
    } else {
        *dropped += 1;
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn netdev(dir: &Path, state: &str, changes: u64) {
        std::fs::create_dir_all(dir.join("eth0")).unwrap();
        std::fs::write(dir.join("eth0/operstate"), format!("{state}\n")).unwrap();
        std::fs::write(dir.join("eth0/carrier_changes"), format!("{changes}\n")).unwrap();
    }

    #[test]
    fn a_link_down_for_two_boundaries_is_one_event_with_its_span() {
        let dir = tempfile::tempdir().unwrap();
        let watched = Watched::Netdev { root: dir.path().to_path_buf(), iface: "eth0".into() };
        let mut watch = LinkWatch::new(vec![watched]);
        netdev(dir.path(), "up", 4);
        watch.observe(0);
        watch.observe(100);
        netdev(dir.path(), "down", 5);
        watch.observe(200);
        watch.observe(300);
        netdev(dir.path(), "up", 6);
        watch.observe(400);
        watch.observe(500);
        let Seen { events, dropped } = watch.finish();
        assert_eq!(dropped, 0);
        assert_eq!(
            events,
            [LinkEvent {
                device: "eth0".into(),
                from_ns: 100,
                until_ns: Some(400),
                states: vec!["down".into()],
                counters: [("carrier_changes".to_string(), 2)].into(),
            }]
        );
    }

    #[test]
    fn a_flap_between_boundaries_is_an_event_and_one_still_down_stays_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = LinkWatch::new(vec![Watched::Netdev { root: dir.path().to_path_buf(), iface: "eth0".into() }]);
        netdev(dir.path(), "up", 0);
        watch.observe(0);
        netdev(dir.path(), "up", 2);
        watch.observe(10);
        watch.observe(20);
        netdev(dir.path(), "down", 3);
        watch.observe(30);
        let events = watch.finish().events;
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!((events[0].from_ns, events[0].until_ns, events[0].states.len()), (0, Some(10), 0));
        assert_eq!((events[1].from_ns, events[1].until_ns), (20, None));
        assert_eq!(events[1].states, ["down"]);
    }

    /// The recorded hosts' ports, read where they lie, then a copy of one
    /// taken down: its state and both IB counters make one event.
    #[test]
    fn ib_ports_of_the_recorded_trees_read_and_flap() {
        let hosts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts");
        let ib = |host: &str| hosts.join(host).join("sys/class/infiniband");
        let port = |root: PathBuf, device: &str| Watched::RdmaPort { root, device: device.into(), port: 1 };
        let active = port(ib("mlx5-ib"), "mlx5_0").read().expect("mlx5-ib port 1");
        assert_eq!((active.state.as_str(), active.up), ("ACTIVE", true));
        assert_eq!(active.counters["counters/link_error_recovery"], 2);
        let down = port(ib("two-nics"), "mlx5_1").read().expect("two-nics mlx5_1 port 1");
        assert_eq!((down.state.as_str(), down.up, down.counters["counters/link_downed"]), ("DOWN", false, 3));
        assert_eq!(port(ib("two-nics"), "mlx5_1").name(), "mlx5_1/1");
        assert!(port(ib("mlx5-ib"), "mlx5_9").read().is_none());

        let copy = tempfile::tempdir().unwrap();
        let dir = copy.path().join("mlx5_0/ports/1");
        std::fs::create_dir_all(dir.join("counters")).unwrap();
        let from = ib("mlx5-ib").join("mlx5_0/ports/1");
        for file in ["state", "counters/link_downed", "counters/link_error_recovery"] {
            std::fs::copy(from.join(file), dir.join(file)).unwrap();
        }
        let mut watch = LinkWatch::new(vec![port(copy.path().to_path_buf(), "mlx5_0")]);
        watch.observe(0);
        std::fs::write(dir.join("state"), "1: DOWN\n").unwrap();
        std::fs::write(dir.join("counters/link_downed"), "1\n").unwrap();
        watch.observe(1_000);
        std::fs::write(dir.join("state"), "2: INIT\n").unwrap();
        std::fs::write(dir.join("counters/link_error_recovery"), "5\n").unwrap();
        watch.observe(2_000);
        std::fs::write(dir.join("state"), "4: ACTIVE\n").unwrap();
        watch.observe(3_000);
        let events = watch.finish().events;
        assert_eq!(
            events,
            [LinkEvent {
                device: "mlx5_0/1".into(),
                from_ns: 0,
                until_ns: Some(3_000),
                states: vec!["DOWN".into(), "INIT".into()],
                counters: [("counters/link_downed".to_string(), 1), ("counters/link_error_recovery".to_string(), 3)]
                    .into(),
            }]
        );
    }

    #[test]
    fn loopback_reads_as_up() {
        let lo = Watched::netdev("lo").read().expect("lo is readable");
        assert!(lo.up, "{lo:?}");
        assert!(Watched::netdev("no-such-if0").read().is_none());
    }

    #[test]
    fn events_past_the_cap_are_counted_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = LinkWatch::new(vec![Watched::Netdev { root: dir.path().to_path_buf(), iface: "eth0".into() }]);
        for k in 0..(MAX_EVENTS as i64 + 5) * 2 {
            netdev(dir.path(), if k % 2 == 0 { "up" } else { "down" }, 0);
            watch.observe(k);
        }
        let Seen { events, dropped } = watch.finish();
        assert_eq!((events.len(), dropped), (MAX_EVENTS, 5));
    }
}
