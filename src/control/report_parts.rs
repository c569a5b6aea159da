//! A rank's phase report can outgrow one control frame (thousands of flows,
//! or many intervals): it then travels as `ReportPart`s holding some of its
//! flows, then the final `Report` with the rest, each well under the frame
//! limit. The coordinator puts the parts back together.

use crate::control::framing::MAX_FRAME;
use crate::control::wire::ToCoordinator;
use crate::metrics::{FlowSamples, RankReport};

/// The most a part is encoded to: half a frame, so the final `Report`'s
/// other fields always fit beside its flows.
pub const PART_BYTES: usize = MAX_FRAME / 2;

/// The messages that carry `report`: one `Report` when it fits in a part,
/// else `ReportPart`s of its flows and a final `Report`.
pub fn split(report: RankReport) -> Vec<ToCoordinator> {
    split_at(report, PART_BYTES)
}

fn encoded_len<T: serde::Serialize>(value: &T) -> usize {
    postcard::to_stdvec(value).map_or(usize::MAX, |bytes| bytes.len())
}

fn split_at(mut report: RankReport, limit: usize) -> Vec<ToCoordinator> {
    if encoded_len(&report) <= limit {
        return vec![ToCoordinator::Report(Box::new(report))];
    }
    let mut chunks: Vec<Vec<FlowSamples>> = vec![Vec::new()];
    let mut size = 0;
    for flow in std::mem::take(&mut report.flows) {
        let len = encoded_len(&flow);
        if size + len > limit && !chunks.last().is_some_and(Vec::is_empty) {
            chunks.push(Vec::new());
            size = 0;
        }
        size += len;
        chunks.last_mut().expect("one chunk at least").push(flow);
    }
    report.flows = chunks.pop().unwrap_or_default();
    let part = |flows| RankReport { phase: report.phase, rank: report.rank, flows, ..RankReport::default() };
    let mut messages: Vec<ToCoordinator> =
        chunks.into_iter().map(|flows| ToCoordinator::ReportPart(Box::new(part(flows)))).collect();
    messages.push(ToCoordinator::Report(Box::new(report)));
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::LaneSamples;
    use crate::transport::Side;

    /// A report of `flows` ends of `lanes` lanes each.
    fn report(flows: u32, lanes: u64) -> RankReport {
        let flow = |f| FlowSamples {
            flow: f,
            side: Side::Receiver,
            start_ns: Some(0),
            error: None,
            rtts: None,
            refused: 0,
            gpu_memory: Vec::new(),
            validation: None,
            tcp: None,
            lanes: (0..lanes).map(|k| LaneSamples { device: None, opened: k, closed: k * 1_000_003 }).collect(),
            engines: Vec::new(),
        };
        RankReport { phase: 2, rank: 7, boundaries: 11, flows: (0..flows).map(flow).collect(), ..RankReport::default() }
    }

    #[test]
    fn a_small_report_is_one_message() {
        assert!(matches!(&split(report(3, 10))[..], [ToCoordinator::Report(_)]));
    }

    #[test]
    fn a_large_report_travels_in_parts_that_fit_and_add_up() {
        let whole = report(400, 1_000);
        let limit = encoded_len(&whole) / 5;
        // Beside its flows the final Report carries the rest of the report.
        let rest = encoded_len(&RankReport { flows: Vec::new(), ..whole.clone() });
        let messages = split_at(whole.clone(), limit);
        assert!(messages.len() >= 5, "{} messages", messages.len());
        let mut flows = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            assert!(encoded_len(message) <= limit + rest + 8, "message {i} is {} bytes", encoded_len(message));
            match message {
                ToCoordinator::ReportPart(part) if i + 1 < messages.len() => {
                    assert_eq!((part.phase, part.rank), (2, 7));
                    flows.extend(part.flows.iter().cloned());
                }
                ToCoordinator::Report(last) if i + 1 == messages.len() => {
                    assert_eq!(last.boundaries, whole.boundaries);
                    flows.extend(last.flows.iter().cloned());
                }
                other => panic!("message {i}: {other:?}"),
            }
        }
        assert_eq!(flows, whole.flows);
    }
}
