//! Checking rules on a run's results: one outcome per rule and item.

use crate::result::{CheckOutcome, Checked, Direction, FlowResult, RunResult, Verdict};
use crate::scenario::{Mode, Rule, Subject, Threshold};

/// One number a rule is checked on.
struct Item {
    checked: Checked,
    value: f64,
    /// Items with the same key are compared for `% of best` (a group's flows).
    peers: String,
    note: Option<String>,
}

/// The outcomes of one rule. `line_rate` is the ports' rate in Gb/s, if known.
pub fn evaluate(run: &RunResult, rule: Rule, line_rate: Option<f64>) -> Vec<CheckOutcome> {
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
            Subject::Latency => "this run measured no latency (it has no `mode = \"latency\"` group)".into(),
            s => format!("nothing in this run to check a `{}` rule on", s.name()),
        });
    }
    let limit_of = |peers: &str| -> Result<f64, String> {
        match rule.threshold {
            Threshold::Gbps(g) => Ok(g),
            Threshold::OfBest(pct) => {
                let best = items.iter().filter(|i| i.peers == peers).map(|i| i.value).fold(0.0, f64::max);
                Ok(best * pct / 100.0)
            }
            Threshold::OfLineRate(pct) => line_rate.map(|r| r * pct / 100.0).ok_or_else(|| {
                "the ports' line rate is unknown: set `line_rate` in [check] or --line-rate \
                 (TCP runs cannot probe it)"
                    .to_string()
            }),
            Threshold::TimesMin(times) => {
                let least = items.iter().filter(|i| i.peers == peers).map(|i| i.value).fold(f64::INFINITY, f64::min);
                Ok(least * times)
            }
        }
    };
    if let Err(why) = limit_of("") {
        return unknown(why);
    }
    let limits: Vec<f64> = items
        .iter()
        .map(|i| limit_of(&i.peers).expect("checked above: whether a limit exists depends on the threshold only"))
        .collect();
    items
        .into_iter()
        .zip(limits)
        .map(|(item, limit)| {
            let verdict = if passes(rule, item.value, limit) { Verdict::Pass } else { Verdict::Fail };
            CheckOutcome {
                rule,
                item: item.checked,
                value: Some(item.value),
                limit: Some(limit),
                verdict,
                note: item.note,
            }
        })
        .collect()
}

/// Whether `value` keeps to `limit`: bandwidth at least, latency at most.
/// Relative slack, so the best flow always reaches 100 % of itself.
pub fn passes(rule: Rule, value: f64, limit: f64) -> bool {
    if rule.subject == Subject::Latency {
        value <= limit * (1.0 + 1e-9)
    } else {
        value >= limit * (1.0 - 1e-9)
    }
}

/// The number a flow rule checks: Gb/s, or the typical (median) half round
/// trip in µs for latency; `None` when the flow did not measure it.
pub fn flow_value(subject: Subject, f: &FlowResult) -> Option<f64> {
    match (subject, f.mode) {
        (Subject::Latency, Mode::Latency) => Some(f.latency.as_ref().map_or(f64::INFINITY, |l| l.typical_us)),
        (Subject::Flow, Mode::Bandwidth) => Some(f.gbps),
        _ => None,
    }
}

fn items(run: &RunResult, subject: Subject) -> Vec<Item> {
    let mut out = Vec::new();
    for p in &run.phases {
        match subject {
            Subject::Flow | Subject::Latency => out.extend(p.flows.iter().filter_map(|f| {
                Some(Item {
                    checked: Checked::Flow { phase: p.index, flow: f.id, src: f.src, dst: f.dst },
                    value: flow_value(subject, f)?,
                    peers: f.group.clone(),
                    note: f.error.clone(),
                })
            })),
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
            })),
            Subject::Group => out.extend(p.groups.iter().map(|g| Item {
                checked: Checked::Group { phase: p.index, group: g.name.clone() },
                value: g.aggregate_gbps,
                peers: g.name.clone(),
                note: None,
            })),
        }
    }
    out
}
