//! The checks as JUnit XML, for CI systems: one test suite per rule, one
//! test case per item checked; with a topology, a suite `uplinks` with a
//! case per leaf–spine uplink, failed when it is a suspect not cleared; on
//! hosts of several NICs (`devices=`, `addrs=`), a suite `nics` with a case
//! per NIC, failed when a host or NIC suspect not cleared stands for it.

use crate::report::export::Exporter;
use crate::report::markup::escape as xml;
use crate::report::tables::{gate, labels};
use crate::report::ReportError;
use crate::result::{Acceptance, CheckOutcome, Checked, RunResult, SuspectKind, Verdict};
use crate::units::number;

pub struct JunitExporter;

impl Exporter for JunitExporter {
    fn render(&self, run: &RunResult) -> Result<Vec<u8>, ReportError> {
        if run.acceptance.is_none() && run.gate.is_none() {
            return Err(ReportError::Encode {
                what: "JUnit XML",
                reason: "this run has no checks (add [check] to the scenario or --check EXPR) and no gate".into(),
            });
        }
        let checks: &[CheckOutcome] = run.acceptance.as_ref().map_or(&[], |a| &a.checks);
        let name = &run.scenario.run.name;
        let count = |v: Verdict| checks.iter().filter(|c| c.verdict == v).count();
        let gated = run.gate.as_ref().map_or((0, 0), |g| (g.hosts.len(), g.failed().count()));
        let uplinks = run.acceptance.as_ref().map(|a| uplink_cases(run, a)).unwrap_or_default();
        let nics = run.acceptance.as_ref().map(|a| nic_cases(run, a)).unwrap_or_default();
        let own_failures = uplinks.iter().chain(&nics).filter(|(failed, _)| *failed).count();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        out += &format!(
            "<testsuites name=\"fabricbench {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
            xml(name),
            checks.len() + gated.0 + uplinks.len() + nics.len(),
            count(Verdict::Fail) + gated.1 + own_failures,
            count(Verdict::Unknown)
        );
        if let Some(g) = &run.gate {
            out += &gate::junit_suite(g, name);
        }
        for rule in run.acceptance.iter().flat_map(|a| &a.rules) {
            let cases: Vec<&CheckOutcome> = checks.iter().filter(|c| c.rule == *rule).collect();
            let failures = cases.iter().filter(|c| c.verdict == Verdict::Fail).count();
            let errors = cases.iter().filter(|c| c.verdict == Verdict::Unknown).count();
            out += &format!(
                "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\">\n",
                xml(&rule.to_string()),
                cases.len()
            );
            for c in cases {
                out += &case(run, c);
            }
            out += "  </testsuite>\n";
        }
        out += &suite("uplinks", uplinks);
        out += &suite("nics", nics);
        out += "</testsuites>\n";
        Ok(out.into_bytes())
    }
}

fn case(run: &RunResult, c: &CheckOutcome) -> String {
    let classname = format!("fabricbench.{}.{}", run.scenario.run.name, c.rule.subject.name());
    let open =
        format!("    <testcase classname=\"{}\" name=\"{}\"", xml(&classname), xml(&labels::checked(run, &c.item)));
    let measured = match (c.value, c.limit) {
        (Some(v), Some(l)) => {
            format!("{} {unit} (limit {} {unit})", number(v, 3), number(l, 3), unit = c.rule.subject.unit())
        }
        _ => String::new(),
    };
    let note = c.note.clone().unwrap_or_default();
    match c.verdict {
        Verdict::Pass => format!("{open}/>\n"),
        Verdict::Cleared => format!("{open}>\n      <system-out>{}</system-out>\n    </testcase>\n", xml(&note)),
        Verdict::Fail => format!(
            "{open}>\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
            xml(&format!("{measured} fails {}", c.rule)),
            xml(&note)
        ),
        Verdict::Unknown => {
            format!("{open}>\n      <error message=\"cannot be evaluated: {}\"/>\n    </testcase>\n", xml(&note))
        }
    }
}

/// A suite of cases (whether each failed, its XML); nothing when there are none.
fn suite(name: &str, cases: Vec<(bool, String)>) -> String {
    if cases.is_empty() {
        return String::new();
    }
    let failures = cases.iter().filter(|(failed, _)| *failed).count();
    let mut out =
        format!("  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">\n", cases.len());
    cases.into_iter().for_each(|(_, case)| out += &case);
    out + "  </testsuite>\n"
}

/// One case per NIC of a host of several (a rank with its own device or
/// address): failed when a host, NIC or cable suspect not cleared stands
/// for it.
fn nic_cases(run: &RunResult, acceptance: &Acceptance) -> Vec<(bool, String)> {
    let classname = xml(&format!("fabricbench.{}.nic", run.scenario.run.name));
    let mut cases = Vec::new();
    for info in &run.plan.ranks {
        let Some(nic) = info.own_nic() else { continue };
        let mut links = std::collections::BTreeMap::new();
        for c in &acceptance.checks {
            if let Checked::Flow { src, dst, .. } = c.item {
                if src == info.rank || dst == info.rank {
                    *links.entry((src.min(dst), src.max(dst))).or_insert(false) |= c.verdict == Verdict::Fail;
                }
            }
        }
        if links.is_empty() {
            continue;
        }
        let failed = links.values().filter(|f| **f).count();
        let tally = format!("{failed} of its {} links failed", links.len());
        let name = xml(&format!("NIC {} {nic} (rank {})", info.host, info.rank));
        let open = format!("    <testcase classname=\"{classname}\" name=\"{name}\"");
        // The cable where the NIC's own link went down or recovered from errors.
        let cable = acceptance
            .suspects
            .iter()
            .any(|s| matches!(&s.kind, SuspectKind::Cable { end, .. } if end.rank == info.rank));
        let what = if cable { "suspect, its cable" } else { "suspect" };
        cases.push(match acceptance.suspects_rank(info.rank) {
            false => (false, format!("{open}>\n      <system-out>{tally}</system-out>\n    </testcase>\n")),
            true => (true, format!("{open}>\n      <failure message=\"{what}: {tally}\"/>\n    </testcase>\n")),
        });
    }
    cases
}

/// One case per uplink (whether it failed, the XML): failed when a suspect
/// names it (alone or as one of several) and its retest did not clear it.
fn uplink_cases(run: &RunResult, acceptance: &Acceptance) -> Vec<(bool, String)> {
    let classname = xml(&format!("fabricbench.{}.uplink", run.scenario.run.name));
    let host = |r: usize| run.plan.ranks.get(r).map_or_else(|| format!("rank {r}"), |i| i.host.clone());
    acceptance
        .uplinks
        .iter()
        .map(|u| {
            let lowest = u.min_gbps.map_or(String::new(), |g| format!("; lowest {} Gb/s", number(g, 3)));
            let tally = format!("{} of the {} links crossing it failed{lowest}", u.failed.len(), u.links);
            let open =
                format!("    <testcase classname=\"{classname}\" name=\"{}\"", xml(&format!("uplink {}", u.uplink)));
            if !acceptance.suspects_uplink(&u.uplink) {
                return (false, format!("{open}>\n      <system-out>{}</system-out>\n    </testcase>\n", xml(&tally)));
            }
            let pairs: Vec<String> = u.failed.iter().map(|&[a, b]| format!("{} – {}", host(a), host(b))).collect();
            let case = format!(
                "{open}>\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(&format!("suspect: {tally}")),
                xml(&pairs.join("\n"))
            );
            (true, case)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::acceptance::{self, synthetic};
    use crate::plan::Fabric;
    use crate::report::export::MarkdownExporter;
    use crate::scenario::{CheckSpec, Rule};

    /// An all-pairs run on tests/fixtures/topology/uneven.toml whose links
    /// through leaf3's one uplink ran at 4 Gb/s, judged on `flow >= 9 Gb/s`.
    fn slow_uplink() -> RunResult {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/uneven.toml");
        let topology = crate::topology::read(&path, None).unwrap();
        let hosts: Vec<String> = topology.hosts.keys().cloned().collect();
        let across = |a: usize, b: usize| (a / 2 == 2) != (b / 2 == 2);
        let mut run = synthetic::all_pairs_on(&hosts, |a, b| if across(a, b) { 4.0 } else { 10.0 });
        let mut spec = CheckSpec::default();
        spec.push(Rule::parse("flow >= 9 Gb/s").unwrap());
        let fabric = Fabric::new(&topology, &run.hosts);
        run.acceptance = acceptance::judge(&run, &spec, Some(&fabric));
        run
    }

    #[test]
    fn on_hosts_of_two_nics_each_nic_is_a_case_and_the_slow_one_fails() {
        let mut run = synthetic::rails(3, 2, |a, b| if a == 3 || b == 3 { 2.0 } else { 10.0 });
        let mut spec = CheckSpec::default();
        spec.push(Rule::parse("flow >= 9 Gb/s").unwrap());
        run.acceptance = acceptance::judge(&run, &spec, None);
        let xml = String::from_utf8(JunitExporter.render(&run).unwrap()).unwrap();
        let nics = &xml[xml.find("<testsuite name=\"nics\"").unwrap_or_else(|| panic!("no nics suite: {xml}"))..];
        assert!(nics.starts_with("<testsuite name=\"nics\" tests=\"6\" failures=\"1\" errors=\"0\">"), "{nics}");
        assert!(
            nics.contains(
                "name=\"NIC node02 mlx5_1 (rank 3)\">\n      <failure message=\"suspect: 2 of its 2 links failed\"/>"
            ),
            "{nics}"
        );
        assert!(
            nics.contains(
                "name=\"NIC node01 mlx5_1 (rank 1)\">\n      <system-out>1 of its 2 links failed</system-out>"
            ),
            "{nics}"
        );
    }

    #[test]
    fn with_a_topology_each_uplink_is_a_case_and_the_slow_one_fails() {
        let run = slow_uplink();
        let xml = String::from_utf8(JunitExporter.render(&run).unwrap()).unwrap();
        assert!(xml.contains("<testsuite name=\"uplinks\" tests=\"6\" failures=\"1\" errors=\"0\">"), "{xml}");
        let uplinks = &xml[xml.find("<testsuite name=\"uplinks\"").unwrap()..];
        insta::assert_snapshot!("uplinks.junit.xml", uplinks);
        let md = String::from_utf8(MarkdownExporter.render(&run).unwrap()).unwrap();
        let checks = &md[md.find("checks FAILED").unwrap()..];
        insta::assert_snapshot!(
            "uplinks.summary.md",
            &checks[..checks.find("| flow >= 9 Gb/s |").unwrap_or(checks.len())]
        );
    }
}
