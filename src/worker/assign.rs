//! Which engine (core) carries each lane of a rank's flow ends.
//!
//! One engine per core a lane may use; each lane goes, heaviest first, to
//! the least loaded engine among its own cores (ties: the first of its
//! cores counting from the rank's turn, `rank` modulo their number, so the
//! ranks of one host do not all begin on its first core).
//! With no more lanes than cores every lane therefore gets an engine of its
//! own, so a single flow's peak rate does not move; with more, the lanes
//! are spread by their expected load. Deterministic: the same lanes and
//! cores always give the same engines.

/// What a lane is expected to cost its engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Load {
    /// An unpaced bandwidth lane: as much as it can get, the heaviest.
    Bandwidth,
    /// A paced lane: its offered bytes per second.
    Paced { bytes_per_s: f64 },
    /// A latency lane: light, but it should not share with heavy ones.
    Latency,
}

/// An unpaced lane weighs a fast NIC's line rate (400 Gb/s, in bytes/s):
/// no paced lane outweighs it.
const UNPACED: f64 = 400e9 / 8.0;
/// A latency lane weighs little (1 Mb/s), so it lands on the least loaded
/// engine, after the heavy lanes have been spread.
const LATENCY: f64 = 1e6 / 8.0;

impl Load {
    /// A lane's load: latency, paced at `msgs_per_s` messages of
    /// `message_bytes` a second, or unpaced.
    pub fn of(latency: bool, msgs_per_s: Option<f64>, message_bytes: f64) -> Load {
        match (latency, msgs_per_s) {
            (true, _) => Load::Latency,
            (false, Some(per_s)) => Load::Paced { bytes_per_s: per_s * message_bytes },
            (false, None) => Load::Bandwidth,
        }
    }

    /// What it weighs against the others, in bytes per second.
    pub fn weight(self) -> f64 {
        match self {
            Load::Bandwidth => UNPACED,
            Load::Paced { bytes_per_s } => bytes_per_s.clamp(0.0, UNPACED),
            Load::Latency => LATENCY,
        }
    }
}

/// One lane to place (or several that must run together: its weight is
/// theirs): its weight and the cores it may run on (never empty).
#[derive(Clone, Debug)]
pub struct LaneLoad {
    pub weight: f64,
    pub cores: Vec<usize>,
}

impl LaneLoad {
    pub fn new(load: Load, cores: Vec<usize>) -> LaneLoad {
        LaneLoad { weight: load.weight(), cores }
    }
}

/// The engines (their cores, ascending) and each lane's engine (an index
/// into `engines`), in the lanes' order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub engines: Vec<usize>,
    pub of_lane: Vec<usize>,
}

/// Places the lanes of rank `rank` on engines, one engine per core used.
pub fn assign(lanes: &[LaneLoad], rank: usize) -> Assignment {
    let mut order: Vec<usize> = (0..lanes.len()).collect();
    // Heaviest first; equal weights keep the lanes' order.
    order.sort_by(|&a, &b| lanes[b].weight.total_cmp(&lanes[a].weight).then(a.cmp(&b)));
    let mut load: std::collections::BTreeMap<usize, (f64, usize)> = Default::default();
    let mut core_of = vec![0; lanes.len()];
    for k in order {
        let lane = &lanes[k];
        let n = lane.cores.len().max(1);
        let turn = |k: usize| (k + n - rank % n) % n;
        let best = lane
            .cores
            .iter()
            .enumerate()
            .map(|(k, &core)| (load.get(&core).copied().unwrap_or((0.0, 0)), turn(k), core))
            .min_by(|((wa, na), ta, _), ((wb, nb), tb, _)| wa.total_cmp(wb).then(na.cmp(nb)).then(ta.cmp(tb)))
            .map_or(0, |(_, _, core)| core);
        let entry = load.entry(best).or_insert((0.0, 0));
        *entry = (entry.0 + lane.weight, entry.1 + 1);
        core_of[k] = best;
    }
    let engines: Vec<usize> = load.into_keys().collect();
    let of_lane = core_of.iter().map(|core| engines.binary_search(core).expect("a used core")).collect();
    Assignment { engines, of_lane }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes(loads: &[Load], cores: &[usize]) -> Vec<LaneLoad> {
        loads.iter().map(|&load| LaneLoad::new(load, cores.to_vec())).collect()
    }

    #[test]
    fn no_more_lanes_than_cores_gives_each_lane_its_own_engine() {
        let a = assign(&lanes(&[Load::Bandwidth, Load::Latency, Load::Paced { bytes_per_s: 1e6 }], &[0, 1, 2, 3]), 0);
        assert_eq!(a.engines.len(), 3, "{a:?}");
        let mut used = a.of_lane.clone();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used.len(), 3, "every lane alone on its engine: {a:?}");
        let one = assign(&lanes(&[Load::Bandwidth, Load::Bandwidth], &[5, 7]), 0);
        assert_eq!(one, Assignment { engines: vec![5, 7], of_lane: vec![0, 1] });
    }

    #[test]
    fn more_lanes_than_cores_are_balanced_by_weight() {
        // Two unpaced lanes and four paced ones on two cores: each core
        // gets one unpaced lane, and the paced ones split evenly.
        let paced = Load::Paced { bytes_per_s: 1e9 };
        let loads = [paced, Load::Bandwidth, paced, paced, Load::Bandwidth, paced];
        let a = assign(&lanes(&loads, &[0, 1]), 0);
        assert_eq!(a.engines, [0, 1]);
        assert_ne!(a.of_lane[1], a.of_lane[4], "the unpaced lanes are apart: {a:?}");
        let on = |e| (0..6).filter(|&k| a.of_lane[k] == e).count();
        assert_eq!((on(0), on(1)), (3, 3), "{a:?}");
        // Latency lanes go where the unpaced ones are not.
        let a = assign(&lanes(&[Load::Bandwidth, Load::Latency, Load::Latency], &[0, 1]), 0);
        assert_eq!(a.of_lane, [0, 1, 1], "{a:?}");
        // A thousand equal lanes on four cores: 250 each.
        let a = assign(&lanes(&[Load::Bandwidth; 1000], &[0, 1, 2, 3]), 0);
        assert!((0..4).all(|e| a.of_lane.iter().filter(|&&x| x == e).count() == 250), "{a:?}");
    }

    #[test]
    fn the_ranks_of_one_host_begin_on_different_cores() {
        let one = lanes(&[Load::Bandwidth], &[0, 1, 2]);
        let cores: Vec<usize> = (0..4).map(|rank| assign(&one, rank).engines[0]).collect();
        assert_eq!(cores, [0, 1, 2, 0], "rank r's single lane goes to core r mod 3");
        let two = assign(&lanes(&[Load::Bandwidth; 2], &[0, 1, 2]), 2);
        assert_eq!(two, Assignment { engines: vec![0, 2], of_lane: vec![1, 0] }, "rank 2: core 2, then core 0");
    }

    #[test]
    fn lanes_stay_on_their_own_cores_and_the_answer_is_deterministic() {
        let mut l = lanes(&[Load::Bandwidth; 4], &[0, 1]);
        l.push(LaneLoad::new(Load::Bandwidth, vec![3]));
        let a = assign(&l, 0);
        assert_eq!(a.engines, [0, 1, 3]);
        assert_eq!(a.engines[a.of_lane[4]], 3, "the lane of core 3 only is on core 3");
        assert!(a.of_lane[..4].iter().all(|&e| a.engines[e] < 2));
        assert_eq!(assign(&l, 0), a, "the same lanes, the same engines");
    }
}
