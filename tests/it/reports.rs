//! Checks, reports and comparisons through the real CLI on local ranks:
//! exit codes, run.json's acceptance, JUnit, report.html, `report` and
//! `compare`.

use crate::common;

use common::{fan_in, read_json, text, Bench, LOCAL_HOSTS};

#[test]
fn checks_exit_codes_report_and_compare() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let (s, h) = (scenario.to_str().unwrap(), hosts.to_str().unwrap());
    let out = bench.run(&[
        "run",
        s,
        "-H",
        h,
        "--no-progress",
        "--check",
        "receiver >= 1 Mb/s",
        "--check",
        "group >= 100% of best",
        "--check",
        "host >= 1000 Gb/s",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "a failed check exits with 3: {stderr}");
    assert!(stderr.contains("error: checks FAILED: 4 of 6 failed"), "{stderr}");

    let dir = bench.result_dir();
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["status"]["state"], "ok", "the run itself completed");
    let a = &run["acceptance"];
    assert_eq!(a["passed"], false);
    let rules: Vec<&str> = a["rules"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert_eq!(rules, ["host >= 1000 Gb/s", "receiver >= 0.001 Gb/s", "group >= 100% of best"]);
    let verdicts = |rule: &str| -> Vec<String> {
        a["checks"].as_array().unwrap().iter().filter(|c| c["rule"] == rule).map(|c| c["verdict"].to_string()).collect()
    };
    // Host: rank 0 receives, ranks 1-3 send; none reaches 1000 Gb/s.
    assert_eq!(verdicts("host >= 1000 Gb/s"), ["\"fail\""; 4]);
    assert_eq!(verdicts("receiver >= 0.001 Gb/s"), ["\"pass\""]);
    assert_eq!(verdicts("group >= 100% of best"), ["\"pass\""], "one phase: the group is its own best");
    assert_eq!(a["suspects"], serde_json::json!([]), "a fan-in does not isolate links");

    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(junit.contains("<testsuites name=\"fabricbench fan\" tests=\"6\" failures=\"4\" errors=\"0\">"), "{junit}");
    assert!(
        junit.contains("<testcase classname=\"fabricbench.fan.host\" name=\"fan: host 127.0.0.2 (rank 1) sending\">")
    );

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<div class=\"banner fail\">checks FAILED: 4 of 6 failed</div>"), "verdict first");
    assert!(html.contains("Into 127.0.0.1: 3 senders, Jain "), "per-sender bars with Jain's index");
    assert!(html.contains("Aggregate per interval") && html.contains("Per flow"), "time series");
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(html.find("Checks not passed").unwrap() < html.find("<h2>Phases</h2>").unwrap());

    // `report` re-renders the same page from run.json alone.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    std::fs::remove_file(dir.join("summary.md")).unwrap();
    let out = bench.run(&["report", dir.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.join("report.html")).unwrap(), html);
    assert!(std::fs::read_to_string(dir.join("summary.md")).unwrap().starts_with("# fabricbench: fan"));

    // compare: the same run is no regression; one flow 20 % slower is.
    let out = bench.run(&["compare", dir.to_str().unwrap(), dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("no regressions beyond the tolerance (gbps 5%, mpps 5%, latency 10%, cpu 20%)"));
    let slower = bench.dir.path().join("slower");
    std::fs::create_dir(&slower).unwrap();
    let mut new = run.clone();
    let flow = &mut new["phases"][0]["flows"][1];
    let was = flow["gbps"].as_f64().unwrap();
    flow["gbps"] = (was * 0.8).into();
    std::fs::write(slower.join("run.json"), serde_json::to_string(&new).unwrap()).unwrap();
    let out = bench.run(&["compare", dir.to_str().unwrap(), slower.to_str().unwrap(), "--tolerance", "5%"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let row = table.lines().find(|l| l.contains("incast 127.0.0.3 → 127.0.0.1")).unwrap();
    assert!(row.contains("-20.0") && row.contains("REGRESSION"), "{row}");
    let message = text(&out.stderr);
    assert!(
        message.contains("1 regression(s) beyond the tolerance (gbps 5%, mpps 5%, latency 5%, cpu 5%): fan: incast 127.0.0.3 → 127.0.0.1 bandwidth"),
        "{message}"
    );
    assert!(message.contains("Gb/s (-20.0%)"), "{message}");
    let out = bench.run(&["compare", dir.to_str().unwrap(), slower.to_str().unwrap(), "--tolerance", "25"]);
    assert!(out.status.success(), "within 25 %: {}", text(&out.stdout));

    // A run that failed before measuring anything still writes every CSV
    // with its header, so scripts find their columns.
    let empty = bench.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let mut failed = run.clone();
    failed["phases"] = serde_json::json!([]);
    failed["status"] = serde_json::json!({"state": "failed", "error": "rank 1 never connected"});
    std::fs::write(empty.join("run.json"), serde_json::to_string(&failed).unwrap()).unwrap();
    let out = bench.run(&["report", empty.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for (file, column) in [("flows.csv", "gbps"), ("intervals.csv", "interval"), ("ranks.csv", "rank")] {
        let mut reader = csv::Reader::from_path(empty.join(file)).unwrap();
        assert!(reader.headers().unwrap().iter().any(|h| h == column), "{file}: {:?}", reader.headers());
        assert_eq!(reader.records().count(), 0, "{file}");
    }

    // Each host's probe: a table of its RDMA ports, and why a host has none.
    let probed = bench.dir.path().join("probed");
    std::fs::create_dir(&probed).unwrap();
    let mut with_ports = run.clone();
    let port =
        serde_json::json!({"port": 1, "state": "ACTIVE", "link_layer": "InfiniBand", "rate_gbps": 200.0, "mtu": 4096});
    with_ports["probes"] = serde_json::json!([
        {"rank": 0, "host": "127.0.0.1", "devices": [{"name": "mlx5_0", "numa_node": 1, "ports": [port], "error": null}]},
        {"rank": 1, "host": "127.0.0.2", "devices": [], "error": "no RDMA devices / libibverbs not found"},
    ]);
    std::fs::write(probed.join("run.json"), serde_json::to_string(&with_ports).unwrap()).unwrap();
    let out = bench.run(&["report", probed.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let md = std::fs::read_to_string(probed.join("summary.md")).unwrap();
    assert!(md.contains("| 0 | 127.0.0.1 | mlx5_0 | 1 | ACTIVE | InfiniBand | 200 | 4096 | 1 |"), "{md}");
    assert!(md.contains("| 1 | 127.0.0.2 | - | - | no RDMA devices / libibverbs not found |"), "{md}");
    let html = std::fs::read_to_string(probed.join("report.html")).unwrap();
    assert!(html.contains("<h2>Hosts</h2>") && html.contains("<td>mlx5_0</td>"));
    assert!(!std::fs::read_to_string(dir.join("summary.md")).unwrap().contains("RDMA ports"), "TCP: no table");

    // A phase of latency flows alone says so instead of "aggregate 0.000 Gb/s".
    let latency = bench.dir.path().join("latency");
    std::fs::create_dir(&latency).unwrap();
    let mut probes = run.clone();
    for flow in probes["phases"][0]["flows"].as_array_mut().unwrap() {
        flow["mode"] = "latency".into();
    }
    std::fs::write(latency.join("run.json"), serde_json::to_string(&probes).unwrap()).unwrap();
    let out = bench.run(&["report", latency.to_str().unwrap()]);
    let summary = text(&out.stdout);
    assert!(summary.contains("phase 0 `fan`: latency only over a "), "{summary}");
    assert!(!summary.contains("aggregate 0.000"), "{summary}");
}

#[test]
fn bad_checks_are_input_errors() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let (s, h) = (scenario.to_str().unwrap(), hosts.to_str().unwrap());

    let out = bench.run(&["run", s, "-H", h, "--check", "flow > 9 Gb/s"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("`flow > 9 Gb/s` is not a check; write SUBJECT >= THRESHOLD"),
        "{}",
        text(&out.stderr)
    );

    let out = bench.run(&["run", s, "-H", h, "--export-junit", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--export-junit needs checks"), "{}", text(&out.stderr));

    let bad = bench.write("bad.toml", &(fan_in("1s") + "\n[check]\nflow = \"93 of best\"\n"));
    let out = bench.run(&["run", bad.to_str().unwrap(), "-H", h]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("bad.toml:15:8: `93 of best` is not a threshold; use a rate (\"9 Gb/s\")"), "{err}");

    let out = bench.run(&["report", bench.dir.path().join("nowhere").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr)
        .contains("nowhere: No such file or directory (os error 2) (give a results folder or its run.json)"));
    assert!(!bench.results().exists(), "no run started");
}

/// The first Chromium on PATH; `None` (the test skips) without one,
/// unless FABRICBENCH_REQUIRE_BROWSER=1 (CI installs it).
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| std::process::Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()));
    if found.is_none() {
        assert!(std::env::var("FABRICBENCH_REQUIRE_BROWSER").map_or(true, |v| v != "1"), "no Chromium");
        eprintln!("SKIP: no Chromium to render report.html (apt-get install chromium)");
    }
    found
}

/// Headless Chromium on `page` with one more flag (`--dump-dom`, `--screenshot=…`).
fn browse(chromium: &str, page: &std::path::Path, profile: &std::path::Path, extra: &str) -> std::process::Output {
    let out = std::process::Command::new("timeout")
        .args(["120", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{chromium} {extra}: {}", text(&out.stderr));
    out
}

/// The page as a real browser reads it: headless Chromium parses report.html
/// into the same figures and tables, and draws it. Skipped without Chromium
/// unless FABRICBENCH_REQUIRE_BROWSER=1 (CI installs it).
#[test]
fn report_html_renders_in_headless_chromium() {
    let Some(chromium) = chromium() else { return };
    let bench = Bench::new();
    let hosts = bench.write("hosts", LOCAL_HOSTS);
    let scenario = bench.write("fan.toml", &fan_in("1s"));
    let out = bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = bench.result_dir().join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let profile = bench.dir.path().join("chromium-profile");
    // Parsed by the browser, nothing is lost or re-nested: every chart and table is there.
    let dom = text(&browse(chromium, &page, &profile, "--dump-dom").stdout);
    for tag in ["<svg", "<table", "<h2>", "<figure>"] {
        assert!(html.matches(tag).count() > 0, "{tag}");
        assert_eq!(dom.matches(tag).count(), html.matches(tag).count(), "{tag} in the browser's DOM");
    }
    assert!(dom.contains("Into 127.0.0.1: 3 senders, Jain "));
    // Each flow's verdict shows its evidence and rule on hover (local ranks: an end's CPU).
    let hinted = ["sender", "receiver"].iter().any(|end| dom.contains(&format!("<td title=\"{end} CPU (")));
    assert!(hinted && dom.contains(" % of a core"), "no verdict to hover over");
    // And drawn: a screenshot of the first screenful.
    let shot = bench.dir.path().join("report.png");
    browse(chromium, &page, &profile, &format!("--screenshot={}", shot.display()));
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}

/// The fabric tree of tests/fixtures/v3-topology.json, re-rendered by
/// `report`, as the browser parses it: every uplink line keeps its
/// tooltip, and the suspect uplinks their dashes.
#[test]
fn report_html_fabric_tree_parses_in_headless_chromium() {
    let Some(chromium) = chromium() else { return };
    let bench = Bench::new();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v3-topology.json");
    std::fs::copy(fixture, bench.dir.path().join("run.json")).unwrap();
    let out = bench.run(&["report", "--quiet", bench.dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = bench.dir.path().join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let dom = text(&browse(chromium, &page, &bench.dir.path().join("chromium-profile"), "--dump-dom").stdout);
    for mark in ["<line", "<title>uplink ", "stroke-dasharray", "<rect"] {
        let drawn = html.matches(mark).count();
        assert!(drawn >= 2, "{mark}: {drawn}");
        assert_eq!(dom.matches(mark).count(), drawn, "{mark} in the browser's DOM");
    }
}
