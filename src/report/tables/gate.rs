//! The node gate in the summary (one row per host) and its verdict line,
//! and the gate as a JUnit suite (one case per host).

use crate::report::markup::escape as xml;
use crate::report::tables::table::Table;
use crate::result::gate::{GateLine, GateResult, GpuLoopback, HostGate};
use crate::units::number;

/// `Gate (ndr-ib)`: host, verdict, ports held, loopback and its minimum
/// (Gb/s), what the loopback ran on (a column only when a host says: its
/// devices, and GPUs and memory when in GPU memory), reasons, and what was
/// judged with the expectation each number met (a column only when a host
/// says: older runs keep their columns).
pub fn table(gate: &GateResult) -> Table {
    let on = gate.hosts.iter().any(|h| !h.loopback_devices.is_empty() || h.loopback_gpu.is_some());
    let judged = gate.hosts.iter().any(|h| !h.judged.is_empty());
    let mut header = vec!["host", "verdict", "ports", "loopback Gb/s", "min Gb/s"];
    header.extend(on.then_some("loopback on"));
    header.push("reasons");
    header.extend(judged.then_some("judged"));
    let mut table = Table::new(format!("Gate ({}): each host alone before the pairs", gate.profile), &header);
    let gbps = |v: Option<f64>| v.map_or("-".to_string(), |v| number(v, 2));
    for h in &gate.hosts {
        let mut row = vec![
            h.host.clone(),
            if h.passed { "PASS" } else { "EXCLUDED" }.to_string(),
            if h.ports.is_empty() { "-".to_string() } else { h.ports.join(" ") },
            gbps(h.loopback_gbps),
            gbps(h.loopback_min_gbps),
        ];
        row.extend(on.then(|| looped_on(h)));
        row.push(h.reasons.join("; "));
        row.extend(judged.then(|| judged_text(h)));
        table.rows.push(row);
    }
    table
}

/// `mlx5_0`, `mlx5_0 GPU 0 cuda`, or `-`.
fn looped_on(h: &HostGate) -> String {
    let mut parts = vec![h.loopback_devices.join(" ")];
    parts.extend(h.loopback_gpu.as_ref().map(GpuLoopback::text));
    let text = parts.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        "-".into()
    } else {
        text
    }
}

/// `PASS mlx5_0 port 1 ACTIVE at 400 Gb/s 4X; FAIL TCP loopback at …`.
fn judged_text(h: &HostGate) -> String {
    let line = |l: &GateLine| format!("{} {}", if l.passed { "PASS" } else { "FAIL" }, l.text);
    h.judged.iter().map(line).collect::<Vec<_>>().join("; ")
}

/// `gate: 1 of 4 host(s) failed and were left out: node17 (mlx5_2 port 1 at 200 Gb/s, expected 400 Gb/s)`.
/// A gate that ran once more after a degraded run says so at the end.
pub fn verdict_line(gate: &GateResult) -> String {
    let failed: Vec<String> = gate.failed().map(|h| format!("{} ({})", h.host, h.reasons.join("; "))).collect();
    let verdict = match failed.is_empty() {
        true => format!("gate ({}): all {} host(s) passed", gate.profile, gate.hosts.len()),
        false => format!(
            "gate ({}): {} of {} host(s) failed and were left out: {}",
            gate.profile,
            failed.len(),
            gate.hosts.len(),
            failed.join(", ")
        ),
    };
    match &gate.retried {
        Some(why) => format!("{verdict}; retried once, its run was degraded ({why})"),
        None => verdict,
    }
}

/// The gate as one JUnit test suite, a failing case per excluded host.
pub fn junit_suite(gate: &GateResult, run_name: &str) -> String {
    let failures = gate.failed().count();
    let mut out = format!(
        "  <testsuite name=\"gate {}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\">\n",
        xml(&gate.profile),
        gate.hosts.len()
    );
    let classname = xml(&format!("fabricbench.{run_name}.gate"));
    for h in &gate.hosts {
        let open = format!("    <testcase classname=\"{classname}\" name=\"{}\"", xml(&h.host));
        // What was judged, with the expectation each number met, passed or not.
        let judged = match h.judged.is_empty() {
            true => String::new(),
            false => format!("      <system-out>{}</system-out>\n", xml(&judged_text(h))),
        };
        if h.passed && judged.is_empty() {
            out += &format!("{open}/>\n");
        } else if h.passed {
            out += &format!("{open}>\n{judged}    </testcase>\n");
        } else {
            let reasons = h.reasons.join("; ");
            out += &format!(
                "{open}>\n      <failure message=\"{}\">{}</failure>\n{judged}    </testcase>\n",
                xml(&format!("excluded by the gate: {reasons}")),
                xml(&reasons)
            );
        }
    }
    out + "  </testsuite>\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::memory::Memory;

    fn gate() -> GateResult {
        let host = |name: &str, reasons: &[&str]| HostGate {
            host: name.into(),
            passed: reasons.is_empty(),
            ports: vec!["mlx5_0/1".into()],
            loopback_gbps: Some(390.5),
            loopback_min_gbps: Some(376.0),
            reasons: reasons.iter().map(|r| r.to_string()).collect(),
            ..HostGate::default()
        };
        GateResult {
            profile: "ndr-ib".into(),
            hosts: vec![host("node01", &[]), host("node17", &["mlx5_0 port 1 at 200 Gb/s, expected 400 Gb/s"])],
            retried: None,
        }
    }

    #[test]
    fn the_line_names_each_excluded_host_and_why() {
        assert_eq!(
            verdict_line(&gate()),
            "gate (ndr-ib): 1 of 2 host(s) failed and were left out: node17 (mlx5_0 port 1 at 200 Gb/s, expected 400 Gb/s)"
        );
        let retried = GateResult { retried: Some("rank 2 started late".into()), ..gate() };
        assert!(verdict_line(&retried).ends_with("; retried once, its run was degraded (rank 2 started late)"));
        let t = table(&gate());
        assert_eq!(t.rows[1][..2], ["node17".to_string(), "EXCLUDED".to_string()]);
        assert_eq!(t.rows[0][3], "390.50");
    }

    #[test]
    fn a_gpu_loopback_says_its_device_gpu_and_memory() {
        let plain = table(&gate());
        assert!(!plain.header.iter().any(|h| h == "loopback on"), "older gates keep their columns");
        let mut g = gate();
        g.hosts[0].loopback_devices = vec!["mlx5_0".into()];
        let memory = (Memory::Cuda, Memory::CudaManaged);
        g.hosts[0].loopback_gpu = Some(GpuLoopback { gpus: vec![0], sender: memory.0, receiver: memory.1 });
        let t = table(&g);
        assert_eq!(t.header[5], "loopback on");
        assert_eq!((t.rows[0][5].as_str(), t.rows[1][5].as_str()), ("mlx5_0 GPU 0 cuda to cuda-managed", "-"));
        g.hosts[0].loopback_gpu = Some(GpuLoopback { gpus: vec![0, 1], sender: Memory::Cuda, receiver: Memory::Cuda });
        assert_eq!(table(&g).rows[0][5], "mlx5_0 GPU 0,1 cuda");
        // run.json: the fields round-trip, and a host without them reads as before.
        let json = serde_json::to_value(&g).unwrap();
        assert_eq!(json["hosts"][0]["loopback_gpu"]["sender"], "cuda");
        assert!(json["hosts"][1].get("loopback_devices").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<GateResult>(json).unwrap(), g);
    }

    #[test]
    fn junit_has_a_failing_case_per_excluded_host() {
        let xml = junit_suite(&gate(), "acc");
        assert!(xml.starts_with("  <testsuite name=\"gate ndr-ib\" tests=\"2\" failures=\"1\""), "{xml}");
        assert!(xml.contains("<testcase classname=\"fabricbench.acc.gate\" name=\"node01\"/>"), "{xml}");
        assert!(
            xml.contains("name=\"node17\">\n      <failure message=\"excluded by the gate: mlx5_0 port 1 at 200 Gb/s"),
            "{xml}"
        );
        // What was judged goes with each case, passed or not, with the expectation it met.
        let mut g = gate();
        let line = |passed, text: &str| GateLine { passed, text: text.into() };
        g.hosts[0].judged = vec![line(true, "TCP loopback 38.2 Gb/s ≥ 10 Gb/s (tcp_loopback_min)")];
        g.hosts[1].judged = vec![line(false, "mlx5_0 port 1 at 200 Gb/s, expected 400 Gb/s")];
        let xml = junit_suite(&g, "acc");
        assert!(
            xml.contains("name=\"node01\">\n      <system-out>PASS TCP loopback 38.2 Gb/s ≥ 10 Gb/s (tcp_loopback_min)</system-out>\n    </testcase>"),
            "{xml}"
        );
        assert!(xml.contains("</failure>\n      <system-out>FAIL mlx5_0 port 1 at 200 Gb/s"), "{xml}");
        let t = table(&g);
        assert_eq!(t.header.last().map(String::as_str), Some("judged"));
        assert_eq!(t.rows[0].last().unwrap(), "PASS TCP loopback 38.2 Gb/s ≥ 10 Gb/s (tcp_loopback_min)");
    }
}
