//! Checking rules on a run's results: one outcome per rule and item.

use crate::acceptance::line_rate::{LineRates, NoLineRate};
use crate::result::degraded;
use crate::result::{CheckOutcome, Checked, Direction, FlowResult, RunResult, Verdict};
use crate::scenario::{Mode, Rule, Subject, Threshold};

/// One number a rule is checked on.
struct Item {
    checked: Checked,
    value: f64,
    /// Items with the same key are compared for `% of best` (a group's flows).
    peers: String,
    note: Option<String>,
    /// Its phase is degraded (why, in words): the value is no measurement
    /// to pass or fail, and no peer's `best` or `min` either.
    degraded: Option<String>,
}

/// The outcomes of one rule; `line_rates` gives each item's port rate for
/// `% of line rate`.
pub fn evaluate(run: &RunResult, rule: Rule, line_rates: &LineRates) -> Vec<CheckOutcome> {
    let unknown = |why: String| {
        vec![CheckOutcome {
            rule,
            item: Checked::Rule,
            value: None,
            limit: None,
            verdict: Verdict::Unknown,
            note: Some(why),
        }]
    };
    let items = items(run, rule.subject);
    if items.is_empty() {
        return unknown(match rule.subject {
            Subject::Latency | Subject::P99 => {
                "this run measured no latency (it has no `mode = \"latency\"` group)".into()
            }
            Subject::Loss => "this run counted no lost messages (open-loop latency groups, with a `rate`, and UD \
                              flows count them)"
                .into(),
            s => format!("nothing in this run to check a `{}` rule on", s.name()),
        });
    }
    if matches!(rule.threshold, Threshold::OfLineRate(_)) && line_rates.none_known() {
        return unknown(
            "the ports' line rate is unknown: no host probed an RDMA port with a known speed (TCP runs \
             probe none); set `line_rate` in [check] or --line-rate"
                .to_string(),
        );
    }
    // The limit of one item, and what it was derived from when that is
    // not the rule alone (the port a line rate came from).
    let limit_of = |item: &Item| -> Result<(f64, Option<String>), NoLineRate> {
        let among = || items.iter().filter(|i| i.peers == item.peers && i.degraded.is_none()).map(|i| i.value);
        match rule.threshold {
            Threshold::Gbps(g) => Ok((g, None)),
            Threshold::OfBest(pct) => Ok((among().fold(0.0, f64::max) * pct / 100.0, None)),
            Threshold::OfLineRate(pct) => {
                line_rates.of(&item.checked).map(|rate| (rate.gbps * pct / 100.0, Some(rate.source)))
            }
            Threshold::TimesMin(times) => Ok((among().fold(f64::INFINITY, f64::min) * times, None)),
            Threshold::Micros(us) => Ok((us, None)),
            Threshold::Share(pct) => Ok((pct, None)),
        }
    };
    items
        .iter()
        .map(|item| {
            let (verdict, limit, derived) = match (limit_of(item), &item.degraded) {
                (_, Some(why)) => (Verdict::Unknown, None, Some(format!("not judged: {why}"))),
                (Ok((limit, derived)), None) => {
                    let verdict = if passes(rule, item.value, limit) { Verdict::Pass } else { Verdict::Fail };
                    (verdict, Some(limit), derived)
                }
                (Err(why), None) => (Verdict::Unknown, None, Some(why.to_string())),
            };
            let note = match (item.note.clone(), derived) {
                (Some(error), Some(d)) => Some(format!("{error}; {d}")),
                (a, b) => a.or(b),
            };
            CheckOutcome { rule, item: item.checked.clone(), value: Some(item.value), limit, verdict, note }
        })
        .collect()
}

/// Whether `value` keeps to `limit`: bandwidth at least, latency and loss
/// at most. Relative slack, so the best flow always reaches 100 % of itself.
pub fn passes(rule: Rule, value: f64, limit: f64) -> bool {
    if rule.subject.is_ceiling() {
        value <= limit * (1.0 + 1e-9)
    } else {
        value >= limit * (1.0 - 1e-9)
    }
}

/// The number a flow rule checks: Gb/s; the typical (median) or p99 half
/// round trip in µs for latency and p99; the % of messages lost for loss;
/// `None` when the flow did not measure it.
pub fn flow_value(subject: Subject, f: &FlowResult) -> Option<f64> {
    match (subject, f.mode) {
        (Subject::Latency, Mode::Latency) => Some(f.latency.as_ref().map_or(f64::INFINITY, |l| l.typical_us)),
        (Subject::P99, Mode::Latency) => Some(f.latency.as_ref().map_or(f64::INFINITY, |l| l.p99_us)),
        (Subject::Loss, _) => lost_share(f).map(|share| share * 100.0),
        (Subject::Flow, Mode::Bandwidth) => Some(f.gbps),
        _ => None,
    }
}

/// The share of its messages a flow lost, where it counts them: an
/// open-loop latency flow's probes whose echo never came, a UD flow's
/// datagrams.
fn lost_share(f: &FlowResult) -> Option<f64> {
    f.probes.map(|p| p.lost_ratio).or(f.datagrams.map(|d| d.lost_ratio))
}

fn items(run: &RunResult, subject: Subject) -> Vec<Item> {
    let mut out = Vec::new();
    for p in &run.phases {
        let degraded = (!p.degraded.is_empty()).then(|| degraded::line(p));
        let start = out.len();
        match subject {
            Subject::Flow | Subject::Latency | Subject::P99 | Subject::Loss => {
                out.extend(p.flows.iter().filter_map(|f| {
                    Some(Item {
                        checked: Checked::Flow { phase: p.index, flow: f.id, src: f.src, dst: f.dst },
                        value: flow_value(subject, f)?,
                        peers: f.group.clone(),
                        note: f.error.clone(),
                        degraded: None,
                    })
                }))
            }
            Subject::Host => {
                for r in &p.ranks {
                    let sends = p.flows.iter().any(|f| f.src == r.rank);
                    let receives = p.flows.iter().any(|f| f.dst == r.rank);
                    for (takes_part, direction, value) in
                        [(sends, Direction::Tx, r.tx_gbps), (receives, Direction::Rx, r.rx_gbps)]
                    {
                        if takes_part {
                            out.push(Item {
                                checked: Checked::Host { phase: p.index, rank: r.rank, direction },
                                value,
                                peers: String::new(),
                                note: r.error.clone(),
                                degraded: None,
                            });
                        }
                    }
                }
            }
            Subject::Receiver => out.extend(p.receivers.iter().map(|r| Item {
                checked: Checked::Receiver { phase: p.index, rank: r.rank },
                value: r.aggregate_gbps,
                peers: String::new(),
                note: None,
                degraded: None,
            })),
            Subject::Group => out.extend(p.groups.iter().map(|g| Item {
                checked: Checked::Group { phase: p.index, group: g.name.clone() },
                value: g.aggregate_gbps,
                peers: g.name.clone(),
                note: None,
                degraded: None,
            })),
        }
        for item in &mut out[start..] {
            item.degraded.clone_from(&degraded);
        }
    }
    out
}
