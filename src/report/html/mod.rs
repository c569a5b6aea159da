//! `report.html`: one self-contained page (inline CSS and SVG, no scripts,
//! nothing fetched) that answers first what a reader came for: did it pass,
//! who is to blame, the all-pairs heatmap; then every phase's charts and
//! tables.

mod charts;
mod load_latency;
mod tree;

use std::collections::{BTreeMap, HashMap};

use crate::report::export::Exporter;
use crate::report::markup::escape;
use crate::report::tables::live;
use crate::report::tables::table::Table;
use crate::report::tables::{congestion, gate, summary, sweeps};
use crate::report::ReportError;
use crate::result::congestion::CanaryImpact;
use crate::result::repeats::RepeatedPhase;
use crate::result::sweep::SweepResult;
use crate::result::{FlowResult, Metric, PairMatrix, PhaseResult, ReceiverResult, RunResult, RunStatus};
use charts::Series;

/// Flows drawn one by one in a phase's time series; more are left to the tables.
const SERIES_MAX_FLOWS: usize = 12;
/// Rows of a table shown before the rest fold away.
const ROWS_OPEN: usize = 40;
/// Receivers drawn as a chart of their senders, the least fair first; every
/// receiver is in the table. (A 16 384-rank ring has 16 384 receivers.)
const CHARTED_RECEIVERS: usize = 16;

pub struct HtmlExporter;

impl Exporter for HtmlExporter {
    fn render(&self, run: &RunResult) -> Result<Vec<u8>, ReportError> {
        let mut page = head(run);
        page += &status_banner(run);
        // The gate ran first: who was left out, and why, before what the rest measured.
        if let Some(g) = &run.gate {
            page += &verdict_banner(g.failed().next().is_none(), &gate::verdict_line(g));
            page += &html_table(&gate::table(g));
        }
        if let Some(a) = &run.acceptance {
            page += &verdict_banner(a.passed, &summary::verdict_line(a));
            for table in summary::acceptance(run, a) {
                page += &html_table(&table);
            }
        }
        if let Some(tree) = tree::section(run) {
            page += &tree;
        }
        if let Some(m) = &run.matrix {
            page += &matrix_section(run, m)?;
        }
        if let Some(sweep) = &run.sweep {
            page += &sweep_section(run, sweep)?;
        }
        if let Some(canaries) = &run.congestion {
            page += &congestion_section(run, canaries)?;
        }
        if let Some(repeats) = &run.repeats {
            page += &repeats_section(run, repeats)?;
        }
        if let Some(svg) = sizes_chart(run)? {
            page += &format!("<h2>Bandwidth vs message size</h2>\n<figure>{svg}</figure>\n");
        }
        page += &phases(run)?;
        if let Some(ports) = summary::ports(run) {
            page += &format!("<h2>Hosts</h2>\n{}", html_table(&ports));
        }
        page += &format!("<p class=\"meta\">{}</p>\n</body></html>\n", escape(&summary::status_line(run)));
        Ok(page.into_bytes())
    }
}

/// The page up to its first heading's line of facts: title, style, when, how many hosts, what ran.
fn head(run: &RunResult) -> String {
    let name = escape(&run.scenario.run.name);
    let mut page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>fabricbench: {name}</title><style>{CSS}</style></head><body>\n<h1>fabricbench: {name}</h1>\n"
    );
    page += &format!(
        "<p class=\"meta\">Started {} · {} host(s) · scenario <code>{}</code> · fabricbench {} · \
         bandwidth in Gb/s = 10<sup>9</sup> bit/s</p>\n",
        escape(&run.started_at),
        run.plan.ranks.len(),
        escape(&run.scenario_file),
        escape(&run.tool_version)
    );
    page
}

/// A verdict's line as a banner, green when it passed.
fn verdict_banner(passed: bool, line: &str) -> String {
    let class = if passed { "pass" } else { "fail" };
    format!("<div class=\"banner {class}\">{}</div>\n", escape(line))
}

/// The banner of a run that failed, is degraded or still going; nothing for one that is fine.
fn status_banner(run: &RunResult) -> String {
    let mut page = String::new();
    match &run.status {
        RunStatus::Failed { error } => {
            page += &format!("<div class=\"banner fail\">Run FAILED: {}</div>\n", escape(error));
        }
        RunStatus::Degraded { reasons } => {
            page += "<div class=\"banner fail\">Run DEGRADED: not a valid measurement</div>\n<ul>";
            page += &reasons.iter().map(|r| format!("<li>{}</li>", escape(r))).collect::<String>();
            page += "</ul>\n";
        }
        RunStatus::Running { note } => {
            page += &format!("<div class=\"banner\">Run still going: {}</div>\n", escape(note));
            if let Some(live) = live::line(run) {
                page += &format!("<p>{}</p>\n", escape(&live));
            }
        }
        RunStatus::Ok => {}
    }
    page
}

/// The all-pairs heatmap, suspect hosts marked, and the matrix as a table.
fn matrix_section(run: &RunResult, m: &PairMatrix) -> Result<String, ReportError> {
    let marked: Vec<usize> = run.acceptance.iter().flat_map(|a| &a.suspects).flat_map(|s| s.kind.own_ranks()).collect();
    let mut page = String::from(
        "<h2>All pairs</h2>\n<p>Each cell is one pair measured alone in its round; colour is how close \
         it comes to the best pair (green 100 %, yellow 75 %, red 50 % and below; grey: not measured). \
         <code>*</code> marks a suspect host or NIC.</p>\n",
    );
    page += &format!("<figure>{}</figure>\n", charts::heatmap(m, &marked)?);
    page +=
        &format!("<details><summary>The matrix as a table</summary>{}</details>\n", html_table(&summary::matrix(m)));
    Ok(page)
}

/// Every phase, then the retests of the suspects.
fn phases(run: &RunResult) -> Result<String, ReportError> {
    let mut page = String::from("<h2>Phases</h2>\n");
    // All-pairs rounds are summed up by the heatmap, repeats by their tables: fold them away.
    let fold = run.phases.len() > 1 && (run.matrix.is_some() || run.repeats.is_some());
    for p in &run.phases {
        page += &phase_section(run, p, fold)?;
    }
    if let Some(a) = run.acceptance.as_ref().filter(|a| !a.retest_phases.is_empty()) {
        page += "<h2>Retests (each suspect alone)</h2>\n";
        for p in &a.retest_phases {
            page += &phase_section(run, p, true)?;
        }
    }
    Ok(page)
}

fn phase_section(run: &RunResult, p: &PhaseResult, fold: bool) -> Result<String, ReportError> {
    let summary = summary::phase_summary(run, p);
    let mut body = String::from("<div class=\"charts\">");
    let mut incast: Vec<&ReceiverResult> = p.receivers.iter().filter(|r| r.senders >= 2).collect();
    let uncharted = incast.len().saturating_sub(CHARTED_RECEIVERS);
    incast.sort_by(|a, b| a.jain.total_cmp(&b.jain).then(a.rank.cmp(&b.rank)));
    incast.truncate(CHARTED_RECEIVERS);
    incast.sort_by_key(|r| r.rank);
    let mut into: HashMap<usize, Vec<&FlowResult>> = incast.iter().map(|r| (r.rank, Vec::new())).collect();
    for f in &p.flows {
        if let Some(senders) = into.get_mut(&f.dst) {
            senders.push(f);
        }
    }
    for r in incast {
        let senders = &into[&r.rank];
        let labels: Vec<String> = senders.iter().map(|f| f.src_host.clone()).collect();
        let values: Vec<f64> = senders.iter().map(|f| f.gbps).collect();
        let fair = r.aggregate_gbps / r.senders as f64;
        let title = format!("Into {}: {} senders, Jain {:.3}, line = fair share {fair:.2}", r.host, r.senders, r.jain);
        body += &format!("<figure>{}</figure>", charts::bars(&title, "Gb/s", &labels, &values, Some(fair), &[])?);
    }
    if uncharted > 0 {
        body += &format!(
            "<p class=\"meta\">The {CHARTED_RECEIVERS} least fair receivers are charted; {uncharted} more are in the Receivers table and run.json.</p>"
        );
    }
    let step = run.scenario.run.interval.as_secs_f64();
    let timeline = |v: &[f64]| v.iter().enumerate().map(|(k, &g)| ((k + 1) as f64 * step, g)).collect::<Vec<_>>();
    if !p.interval_gbps.is_empty() {
        let aggregate = [Series::plain("aggregate".into(), timeline(&p.interval_gbps))];
        body += &format!(
            "<figure>{}</figure>",
            charts::lines("Aggregate per interval", "time in window (s)", "Gb/s", &aggregate, false)?
        );
        let flows: Vec<Series> = p
            .flows
            .iter()
            .take(SERIES_MAX_FLOWS)
            .map(|f| Series::plain(format!("{} → {}", f.src_host, f.dst_host), timeline(&f.interval_gbps)))
            .collect();
        let more = p.flows.len().saturating_sub(SERIES_MAX_FLOWS);
        let title = if more > 0 {
            format!("Per flow (first {SERIES_MAX_FLOWS}; {more} more in intervals.csv)")
        } else {
            "Per flow".into()
        };
        body += &format!("<figure>{}</figure>", charts::lines(&title, "time in window (s)", "Gb/s", &flows, false)?);
    }
    body += "</div>\n";
    for warning in &summary.warnings {
        body += &format!("<p class=\"warning\">{}</p>\n", escape(warning));
    }
    for table in &summary.tables {
        body += &html_table(table);
    }
    let headline = escape(&summary.headline);
    Ok(if fold {
        format!("<details class=\"phase\"><summary>{headline}</summary>{body}</details>\n")
    } else {
        format!("<section class=\"phase\"><h3>{headline}</h3>{body}</section>\n")
    })
}

/// The sweep's table and, per group, its impact ratio at every point
/// against the baseline line at 1.0: the answer a sweep exists for.
fn sweep_section(run: &RunResult, sweep: &SweepResult) -> Result<String, ReportError> {
    let mut out = format!(
        "<h2>Sweep of {}</h2>\n<p>One phase per point; × baseline is each group's number divided by the \
         baseline point's ({}).</p>\n<div class=\"charts\">",
        escape(&sweep.parameter),
        escape(&sweep.baseline)
    );
    let groups: Vec<&str> =
        sweep.points.first().map(|p| p.groups.iter().map(|c| c.group.as_str()).collect()).unwrap_or_default();
    for group in groups {
        let mut labels = Vec::new();
        let (mut ratios, mut errors) = (Vec::new(), Vec::new());
        for p in &sweep.points {
            let Some(cell) = p.groups.iter().find(|c| c.group == group) else { continue };
            let Some(ratio) = cell.ratio else { continue };
            labels.push(p.value.clone());
            ratios.push(ratio);
            // The point's interval over the baseline's mean: the ratio's error bar.
            let base = sweep.baseline_of(p, group).map(|b| b.value).filter(|&b| b > 0.0);
            errors.push(cell.spread.zip(base).map(|(s, b)| (s.ci95_low / b, s.ci95_high / b)));
        }
        if !ratios.is_empty() {
            let title = match errors.iter().any(Option::is_some) {
                true => format!("{group}: × baseline per {}, 95 % interval of the repeats", sweep.parameter),
                false => format!("{group}: × baseline per {}", sweep.parameter),
            };
            let chart = charts::bars(&title, "× baseline", &labels, &ratios, Some(1.0), &errors)?;
            out += &format!("<figure>{chart}</figure>");
        }
    }
    if let Some(curve) = load_latency::chart(run)? {
        out += &format!("<figure>{curve}</figure>");
    }
    out += "</div>\n";
    for table in sweeps::tables(run) {
        out += &html_table(&table);
    }
    Ok(out)
}

/// A bar of an impact chart: its label, its height (×) and its 95 % interval.
type ImpactBar = (String, f64, Option<(f64, f64)>);

/// The impact per canary group, mean and tail, against the unharmed line
/// at 1.0, and the table of what the ratios are of.
fn congestion_section(run: &RunResult, canaries: &[CanaryImpact]) -> Result<String, ReportError> {
    let mut out = "<h2>Congestion impact</h2>\n<p>Each canary group measured alone (isolated) and beside \
                   the congestor groups (congested); impact is congested / isolated for latency and isolated / \
                   congested for bandwidth, so 1.0 is unharmed and 2.0 twice as bad (GPCNeT's impact factor; \
                   docs/CONGESTION.md).</p>\n<div class=\"charts\">"
        .to_string();
    for tail in [false, true] {
        let bars: Vec<ImpactBar> = match &run.congestion_repeats {
            // Repeated: a bar per canary, its repeats' mean impact with its 95 % interval.
            Some(groups) => groups
                .iter()
                .filter_map(|g| {
                    let s = if tail { g.impact_tail } else { g.impact_mean }?;
                    Some((g.group.clone(), s.mean, Some((s.ci95_low, s.ci95_high))))
                })
                .collect(),
            None => canaries
                .iter()
                .filter_map(|c| Some((congestion::label(c), if tail { c.impact_tail } else { c.impact_mean }?, None)))
                .collect(),
        };
        if bars.is_empty() {
            continue;
        }
        let what = if tail { "tail" } else { "mean" };
        let over = if run.congestion_repeats.is_some() { ", mean ± 95 % CI over the repeats" } else { "" };
        let title = format!("Congestion impact, {what} (× isolated){over}");
        let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        let values: Vec<f64> = bars.iter().map(|b| b.1).collect();
        let errors: Vec<Option<(f64, f64)>> = bars.iter().map(|b| b.2).collect();
        out += &format!("<figure>{}</figure>", charts::bars(&title, "impact ×", &labels, &values, Some(1.0), &errors)?);
    }
    out += "</div>\n";
    for table in congestion::tables(run) {
        out += &html_table(&table);
    }
    Ok(out)
}

/// Each repeated phase's aggregate Gb/s (mean, with its 95 % interval as
/// an error bar) and every phase's table of repeats.
fn repeats_section(run: &RunResult, repeats: &[RepeatedPhase]) -> Result<String, ReportError> {
    let mut out = "<h2>Repeats</h2>\n<p>Each phase ran several times (interleaved with the others); a bar is the \
                   mean of its counted repeats, its error bar the 95 % confidence interval (Student's t).</p>\n"
        .to_string();
    let mut labels = Vec::new();
    let (mut means, mut errors) = (Vec::new(), Vec::new());
    for p in repeats {
        let Some(n) = p.numbers.iter().find(|n| n.metric == Metric::AggregateGbps) else { continue };
        let Some(s) = n.spread else { continue };
        labels.push(p.phase.clone());
        means.push(s.mean);
        errors.push(Some((s.ci95_low, s.ci95_high)));
    }
    if !means.is_empty() {
        let chart = charts::bars("Aggregate per phase, mean ± 95 % CI", "Gb/s", &labels, &means, None, &errors)?;
        out += &format!("<div class=\"charts\"><figure>{chart}</figure></div>\n");
    }
    for table in crate::report::tables::repeats::tables(run) {
        out += &html_table(&table);
    }
    Ok(out)
}

/// Mean flow Gb/s per group and message size, over every phase; a chart
/// when the run has more than one message size.
fn sizes_chart(run: &RunResult) -> Result<Option<String>, ReportError> {
    let mut points: BTreeMap<String, BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    for f in run.phases.iter().flat_map(|p| &p.flows) {
        points.entry(f.group.clone()).or_default().entry(f.message_size).or_default().push(f.gbps);
    }
    let sizes: std::collections::BTreeSet<u64> = points.values().flat_map(|m| m.keys().copied()).collect();
    if sizes.len() < 2 {
        return Ok(None);
    }
    let series: Vec<Series> = points
        .into_iter()
        .map(|(group, by_size)| {
            let points = by_size
                .into_iter()
                .map(|(size, rates)| ((size as f64).log2(), rates.iter().sum::<f64>() / rates.len() as f64))
                .collect();
            Series::plain(group, points)
        })
        .collect();
    charts::lines("Mean flow bandwidth vs message size", "message size (bytes, log2 scale)", "Gb/s", &series, true)
        .map(Some)
}

fn html_table(table: &Table) -> String {
    if table.rows.is_empty() {
        return String::new();
    }
    let mut out = format!("<h4>{}</h4>\n<table><thead><tr>", escape(&table.title));
    for h in &table.header {
        out += &format!("<th>{}</th>", escape(h));
    }
    out += "</tr></thead><tbody>\n";
    let row = |(r, cells): (usize, &Vec<String>)| {
        let mut tr = String::from("<tr>");
        for (col, c) in cells.iter().enumerate() {
            let class = match c.as_str() {
                "FAIL" | "UNKNOWN" | "EXCLUDED" => " class=\"bad\"",
                "CLEARED" => " class=\"warn\"",
                _ if c.starts_with("BAD") => " class=\"bad\"",
                _ if c.trim().parse::<f64>().is_ok() => " class=\"num\"",
                _ => "",
            };
            let hint = table.hints.get(&(r, col)).map_or_else(String::new, |h| format!(" title=\"{}\"", escape(h)));
            tr += &format!("<td{class}{hint}>{}</td>", escape(c));
        }
        tr + "</tr>\n"
    };
    for cells in table.rows.iter().enumerate().take(ROWS_OPEN) {
        out += &row(cells);
    }
    out += "</tbody></table>\n";
    if table.rows.len() > ROWS_OPEN {
        out += &format!("<details><summary>{} more row(s)</summary><table><tbody>", table.rows.len() - ROWS_OPEN);
        for cells in table.rows.iter().enumerate().skip(ROWS_OPEN) {
            out += &row(cells);
        }
        out += "</tbody></table></details>\n";
    }
    out
}

const CSS: &str = "body{font-family:sans-serif;margin:24px auto;max-width:1400px;color:#222;padding:0 16px}\
h1{margin-bottom:4px}.meta{color:#666}\
.banner{font-size:1.2em;font-weight:bold;padding:12px 16px;border-radius:6px;margin:16px 0}\
.pass{background:#dff3e3;border:1px solid #6bbf7b}.fail{background:#fbe0e0;border:1px solid #d66}\
table{border-collapse:collapse;margin:6px 0 18px;font-size:14px}\
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f2f2f2}\
td.num{text-align:right;font-variant-numeric:tabular-nums}td.bad{background:#fbe0e0;font-weight:bold}\
td.warn{background:#fff4cc}h4{margin:14px 0 2px}\
.charts{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0}\
details{margin:6px 0}summary{cursor:pointer;font-weight:bold;padding:4px 0}\
section.phase,details.phase{border-top:1px solid #ddd;padding-top:6px}";
