//! The fabric tree of a run with a topology, as an inline SVG written by
//! hand (plotters has no `<title>` tooltips): spines on top, leaves below,
//! each leaf's hosts under it, one line per leaf–spine uplink coloured by
//! what `acceptance.uplinks` says of the links that crossed it. On a rail
//! fabric (each leaf holds NIC k of its hosts, for two k at least) one tree
//! per rail: its leaves, their NICs, their uplinks and the spines those
//! reach; a leaf no measured NIC is on is drawn after the rails. An uplink
//! of several cables is still one line (the cables of one leaf–spine pair
//! would lie on top of each other), labelled with their count ("×4") from
//! `acceptance.uplinks[].cables`; a file written before that has no label.

use std::collections::{BTreeMap, BTreeSet};

use crate::report::markup::escape;
use crate::result::{Acceptance, RunResult, SuspectKind, UplinkOutcome};
use crate::units::number;

/// Hosts listed under a leaf; a leaf with more shows their count.
const HOSTS_LISTED: usize = 16;
/// Width of a leaf's (and a spine's) column.
const COLUMN: usize = 150;
/// Characters of a switch or host name drawn; the tooltip has it whole.
const NAME_CHARS: usize = 18;
const SPINE_Y: usize = 20;
const LEAF_Y: usize = 130;
const BOX_H: usize = 24;
const HOST_LINE: usize = 14;

/// What the links crossing an uplink showed: its line's colour and width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UplinkState {
    /// Named by a suspect its retest did not clear.
    Suspect,
    /// Some links crossing it failed, but no suspect names it.
    Failed,
    /// Every link crossing it passed.
    Passed,
}

impl UplinkState {
    fn of(acceptance: &Acceptance, u: &UplinkOutcome) -> UplinkState {
        if acceptance.suspects_uplink(&u.uplink) {
            UplinkState::Suspect
        } else if u.failed.is_empty() {
            UplinkState::Passed
        } else {
            UplinkState::Failed
        }
    }

    /// Stroke colour, width and dash: a suspect is thick and dashed, so it
    /// stands out without colour too.
    fn stroke(self) -> (&'static str, u32, &'static str) {
        match self {
            UplinkState::Suspect => ("#d62728", 5, " stroke-dasharray=\"8 4\""),
            UplinkState::Failed => ("#f28e2b", 3, ""),
            UplinkState::Passed => ("#59a14f", 2, ""),
        }
    }

    fn word(self) -> &'static str {
        match self {
            UplinkState::Suspect => "SUSPECT",
            UplinkState::Failed => "some pairs failed, not suspected",
            UplinkState::Passed => "every pair passed",
        }
    }
}

/// The "Fabric tree" section: the SVG (one per rail on a rail fabric) and
/// its legend; `None` for a run without a topology.
pub fn section(run: &RunResult) -> Option<String> {
    let leaf_pairs = run.leaf_pairs.as_ref()?;
    // Hosts by name; on a rail fabric each with the NIC cabled to that leaf.
    let mut names: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (rank, leaf) in leaf_pairs.rank_leaves.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
        let Some(r) = run.plan.ranks.get(rank) else { continue };
        names
            .entry(leaf)
            .or_default()
            .insert(r.own_nic().map_or_else(|| r.host.clone(), |nic| format!("{} {nic}", r.host)));
    }
    let mut hosts: BTreeMap<&str, BTreeSet<&str>> =
        names.iter().map(|(leaf, on)| (*leaf, on.iter().map(String::as_str).collect())).collect();
    let uplinks = run.acceptance.as_ref().map(|a| a.uplinks.as_slice()).unwrap_or_default();
    for u in uplinks {
        hosts.entry(&u.uplink.leaf.0).or_default();
    }
    let figure = |hosts: &BTreeMap<&str, BTreeSet<&str>>| {
        format!("<figure style=\"overflow-x:auto\">{}</figure>\n", svg(run.acceptance.as_ref(), hosts))
    };
    let drawn = match rails(run, &leaf_pairs.rank_leaves) {
        Some(rails) => {
            let mut out = String::new();
            let mut left = hosts.clone();
            for rail in &rails {
                let on: BTreeMap<&str, BTreeSet<&str>> =
                    hosts.iter().filter(|(l, _)| rail.leaves.contains(*l)).map(|(l, h)| (*l, h.clone())).collect();
                left.retain(|l, _| !rail.leaves.contains(l));
                out += &format!("<h3>{}</h3>\n{}", escape(&rail.name), figure(&on));
            }
            if !left.is_empty() {
                out += &format!("<h3>Leaves no measured NIC is on</h3>\n{}", figure(&left));
            }
            out
        }
        None => figure(&hosts),
    };
    let legend = match &run.acceptance {
        Some(_) if !uplinks.is_empty() => {
            "A line is a leaf–spine uplink, coloured by the all-pairs and pairwise links whose paths may cross it: \
             <b style=\"color:#d62728\">red, thick and dashed: a suspect</b> (retest did not clear it); \
             <b style=\"color:#f28e2b\">orange: some pairs failed</b>, but no suspect names it; \
             <b style=\"color:#59a14f\">green: every pair passed</b>. A red leaf is a suspect switch. \
             ×N on a line: the uplink's N cables. Hover a line for its cables, pairs crossed, failed and the \
             lowest Gb/s."
        }
        _ => "No checks ran, so the uplinks were not judged: the leaves and their hosts only.",
    };
    Some(format!("<h2>Fabric tree</h2>\n<p>{legend}</p>\n{drawn}"))
}

/// One rail of a rail fabric: NIC K of every host.
struct Rail<'r> {
    /// "Rail K (DEVICE)", or "Rail K" where its ranks name no one device.
    name: String,
    leaves: BTreeSet<&'r str>,
}

/// The rails in slot order where the run is on a rail fabric: every leaf
/// holds the ranks of one slot only (NIC K of their hosts), and two slots
/// at least have leaves; `None` otherwise.
fn rails<'r>(run: &RunResult, rank_leaves: &'r [String]) -> Option<Vec<Rail<'r>>> {
    let mut slots: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    let mut devices: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
    for (rank, leaf) in rank_leaves.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
        // A rank without a NIC of its own (one rank per host) is no rail.
        let r = run.plan.ranks.get(rank).filter(|r| r.own_nic().is_some())?;
        slots.entry(leaf).or_default().insert(r.slot);
        devices.entry(r.slot).or_default().extend(r.devices.first().map(String::as_str));
    }
    if slots.values().any(|s| s.len() != 1) || devices.len() < 2 {
        return None;
    }
    let mut leaves: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
    for (leaf, slot) in slots {
        leaves.entry(*slot.first()?).or_default().insert(leaf);
    }
    let name = |slot: u32| match devices[&slot].iter().collect::<Vec<_>>().as_slice() {
        [device] => format!("Rail {slot} ({device})"),
        _ => format!("Rail {slot}"),
    };
    Some(leaves.into_iter().map(|(slot, leaves)| Rail { name: name(slot), leaves }).collect())
}

/// A name cut to [`NAME_CHARS`], escaped.
fn short(name: &str) -> String {
    match name.char_indices().nth(NAME_CHARS) {
        Some((cut, _)) => escape(&format!("{}…", &name[..cut])),
        None => escape(name),
    }
}

/// The x of the centre of column `i` of `n` in a drawing `width` wide.
fn centre(i: usize, n: usize, width: usize) -> usize {
    width * (2 * i + 1) / (2 * n.max(1))
}

/// The tree of `hosts`' leaves: the uplinks of those leaves and the spines
/// they reach.
fn svg(acceptance: Option<&Acceptance>, hosts: &BTreeMap<&str, BTreeSet<&str>>) -> String {
    let uplinks: Vec<(&Acceptance, &UplinkOutcome)> = acceptance
        .into_iter()
        .flat_map(|a| a.uplinks.iter().map(move |u| (a, u)))
        .filter(|(_, u)| hosts.contains_key(u.uplink.leaf.0.as_str()))
        .collect();
    let spines: BTreeSet<&str> = uplinks.iter().map(|(_, u)| u.uplink.spine.0.as_str()).collect();
    let width = COLUMN * hosts.len().max(spines.len()).max(2);
    let lines = hosts.values().map(|h| if h.len() > HOSTS_LISTED { 1 } else { h.len() }).max().unwrap_or(0);
    let height = LEAF_Y + BOX_H + 20 + HOST_LINE * lines;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n"
    );
    let leaf_x: BTreeMap<&str, usize> =
        hosts.keys().enumerate().map(|(i, l)| (*l, centre(i, hosts.len(), width))).collect();
    let spine_x: BTreeMap<&str, usize> =
        spines.iter().enumerate().map(|(i, s)| (*s, centre(i, spines.len(), width))).collect();
    for (a, u) in uplinks {
        let state = UplinkState::of(a, u);
        let (colour, stroke, dash) = state.stroke();
        let lowest = u.min_gbps.map_or("no bandwidth measured".to_string(), |g| format!("worst {} Gb/s", number(g, 3)));
        let cables = match u.cables {
            Some(1) => " (1 cable)".to_string(),
            Some(n) => format!(" ({n} cables)"),
            None => String::new(),
        };
        let tip = format!(
            "uplink {}{cables}: {} pair(s) crossed, {} failed, {lowest}; {}",
            u.uplink,
            u.links,
            u.failed.len(),
            state.word()
        );
        let (x1, y1, x2) = (spine_x[u.uplink.spine.0.as_str()], SPINE_Y + BOX_H, leaf_x[u.uplink.leaf.0.as_str()]);
        out += &format!(
            "<line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{LEAF_Y}\" stroke=\"{colour}\" stroke-width=\"{stroke}\"{dash}>\
             <title>{}</title></line>\n",
            escape(&tip)
        );
        out += &cable_count(u.cables, ((x1 + x2) / 2, (y1 + LEAF_Y) / 2), colour, &tip);
    }
    for (spine, x) in &spine_x {
        out += &switch(spine, *x, SPINE_Y, false, &format!("spine {spine}"));
    }
    let bad_leaves: BTreeSet<&str> = acceptance
        .into_iter()
        .flat_map(|a| &a.suspects)
        .filter_map(|s| match &s.kind {
            SuspectKind::Leaf { leaf, .. } => Some(leaf.0.as_str()),
            _ => None,
        })
        .collect();
    for (leaf, on) in hosts {
        let x = leaf_x[leaf];
        let tip = format!("leaf {leaf}: {} host(s)", on.len());
        out += &switch(leaf, x, LEAF_Y, bad_leaves.contains(leaf), &tip);
        out += &host_lines(on, x);
    }
    out + "</svg>"
}

/// An uplink's cables as a label at its line's middle (`at`), when it has
/// more than one: "×4", with the line's tooltip.
fn cable_count(cables: Option<u32>, at: (usize, usize), colour: &str, tip: &str) -> String {
    let Some(n @ 2..) = cables else { return String::new() };
    let (x, y) = at;
    format!(
        "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{colour}\" stroke=\"#fff\" \
         stroke-width=\"3\" paint-order=\"stroke\"><title>{}</title>×{n}</text>\n",
        y + 4,
        escape(tip)
    )
}

/// A switch's box and name, red when it is a suspect.
fn switch(name: &str, x: usize, y: usize, suspect: bool, tip: &str) -> String {
    let (fill, edge) = if suspect { ("#fbe0e0", "#d62728") } else { ("#f2f2f2", "#888") };
    let left = x - (COLUMN - 20) / 2;
    format!(
        "<g><title>{}</title><rect x=\"{left}\" y=\"{y}\" width=\"{}\" height=\"{BOX_H}\" rx=\"4\" fill=\"{fill}\" \
         stroke=\"{edge}\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>\n",
        escape(tip),
        COLUMN - 20,
        y + 16,
        short(name)
    )
}

/// A leaf's hosts under it, one a line, or their count when there are many.
fn host_lines(hosts: &BTreeSet<&str>, x: usize) -> String {
    let top = LEAF_Y + BOX_H + 12;
    if hosts.len() > HOSTS_LISTED {
        let all: Vec<&str> = hosts.iter().copied().collect();
        return format!(
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\"><title>{}</title>{} hosts</text>\n",
            top + 10,
            escape(&all.join(", ")),
            hosts.len()
        );
    }
    let mut out = String::new();
    for (i, host) in hosts.iter().enumerate() {
        out += &format!(
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
            top + 10 + HOST_LINE * i,
            short(host)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixture run on two leaves whose uplinks are one suspect.
    fn topology_run() -> RunResult {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v3-topology.json");
        crate::report::store::results_dir::read(&path).unwrap()
    }

    #[test]
    fn an_uplink_is_red_when_suspected_orange_when_pairs_failed_and_green_when_all_passed() {
        let mut run = topology_run();
        let stroke =
            |run: &RunResult, colour: &str| section(run).unwrap().matches(&format!("stroke=\"{colour}\"")).count();
        assert_eq!(stroke(&run, "#d62728"), 2);
        let acceptance = run.acceptance.as_mut().unwrap();
        acceptance.suspects.clear();
        acceptance.uplinks[1].failed.clear();
        assert_eq!((stroke(&run, "#d62728"), stroke(&run, "#f28e2b"), stroke(&run, "#59a14f")), (0, 1, 1));
        run.acceptance = None;
        let bare = section(&run).unwrap();
        assert!(!bare.contains("<line") && bare.contains("No checks ran"), "{bare}");
        run.leaf_pairs = None;
        assert_eq!(section(&run), None, "no topology, no tree");
    }

    #[test]
    fn an_uplink_of_several_cables_is_labelled_with_their_count() {
        let mut run = topology_run();
        let old = section(&run).unwrap();
        assert!(!old.contains("</title>×") && !old.contains("cable)"), "a file without cables has no count: {old}");
        let uplinks = &mut run.acceptance.as_mut().unwrap().uplinks;
        (uplinks[0].cables, uplinks[1].cables) = (Some(4), Some(1));
        let drawn = section(&run).unwrap();
        assert_eq!(drawn.matches(">×4</text>").count(), 1, "{drawn}");
        assert!(!drawn.contains("×1"), "one cable needs no label: {drawn}");
        assert!(drawn.contains("<title>uplink leaf1 ↔ spine1 (4 cables): 4 pair(s) crossed"), "{drawn}");
        assert!(drawn.contains("<title>uplink leaf2 ↔ spine1 (1 cable): "), "{drawn}");
    }

    /// The fixture's four ranks as two hosts of two NICs: NIC k of both on leaf k+1.
    fn rail_run() -> RunResult {
        let mut run = topology_run();
        for (rank, r) in run.plan.ranks.iter_mut().enumerate() {
            (r.host, r.slot, r.slots) = (["a", "b"][rank / 2].to_string(), (rank % 2) as u32, 2);
            r.devices = vec![format!("mlx5_{}", rank % 2)];
        }
        run.leaf_pairs.as_mut().unwrap().rank_leaves = ["leaf1", "leaf2", "leaf1", "leaf2"].map(String::from).into();
        run
    }

    #[test]
    fn a_rail_fabric_is_drawn_one_tree_per_rail() {
        let drawn = section(&rail_run()).unwrap();
        let rails: Vec<&str> = drawn.split("<h3>").skip(1).collect();
        assert_eq!(rails.len(), 2, "{drawn}");
        for (k, rail) in rails.iter().enumerate() {
            assert!(rail.starts_with(&format!("Rail {k} (mlx5_{k})</h3>")), "{rail}");
            assert_eq!(rail.matches("<svg").count(), 1, "{rail}");
            assert_eq!(rail.matches("<line").count(), 1, "its leaf's one uplink: {rail}");
            assert!(rail.contains(&format!("uplink leaf{} ↔ spine1", k + 1)), "{rail}");
            assert!(rail.contains(&format!(">a mlx5_{k}<")) && rail.contains(&format!(">b mlx5_{k}<")), "{rail}");
            assert!(!rail.contains(&format!("mlx5_{}<", 1 - k)), "the other rail's NICs: {rail}");
        }
        assert!(!section(&topology_run()).unwrap().contains("<h3>"), "hosts of one NIC: one tree");
    }

    #[test]
    fn a_leaf_of_two_rails_is_one_tree() {
        let mut run = rail_run();
        run.leaf_pairs.as_mut().unwrap().rank_leaves[1] = "leaf1".into();
        let drawn = section(&run).unwrap();
        assert!(!drawn.contains("<h3>") && drawn.matches("<svg").count() == 1, "{drawn}");
    }

    #[test]
    fn names_are_cut_on_characters_and_escaped() {
        assert_eq!(short("leaf1"), "leaf1");
        assert_eq!(short("ééééééééééééééééééééé"), "éééééééééééééééééé…");
        assert_eq!(short("a<b"), "a&lt;b");
    }

    #[test]
    fn many_hosts_on_a_leaf_are_a_count() {
        let names: Vec<String> = (0..17).map(|i| format!("node{i:02}")).collect();
        let many: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let drawn = host_lines(&many, 75);
        assert_eq!(drawn.matches("<text").count(), 1);
        assert!(drawn.contains(">17 hosts</text>"), "{drawn}");
        let few: BTreeSet<&str> = names[..16].iter().map(String::as_str).collect();
        assert_eq!(host_lines(&few, 75).matches("<text").count(), 16);
    }
}
