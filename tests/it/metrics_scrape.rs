//! `run --metrics`: a real Prometheus (Debian's `prometheus`, started here
//! on a loopback port) scrapes a run as it goes, and what PromQL returns
//! through its HTTP API is what run.json says of the same intervals. The
//! endpoint's bad inputs are refused before anything starts. The shipped
//! alerting rules pass `promtool check rules` and their own `promtool test
//! rules` cases.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, text, Bench};

/// Two ranks, one flow, six 1 s intervals: a dozen scrapes at 500 ms.
const SOAK: &str = "[run]\nname = \"scraped\"\nduration = \"6s\"\nwarmup = \"500ms\"\ninterval = \"1s\"\n\n\
                    [[group]]\nname = \"p\"\npattern = \"pairwise\"\n";

/// A Prometheus server of our own; stopped, by PID, when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether Debian's `prometheus` package (`prometheus`, `promtool`) is
/// here; the test skips without it, unless FABRICBENCH_REQUIRE_PROMETHEUS=1
/// (CI installs it).
fn installed(tool: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok() {
        return true;
    }
    let required = std::env::var("FABRICBENCH_REQUIRE_PROMETHEUS").is_ok_and(|v| v == "1");
    assert!(!required, "no {tool} (apt-get install prometheus)");
    eprintln!("SKIP: no {tool} (apt-get install prometheus)");
    false
}

impl Prometheus {
    /// Scraping `target` every 500 ms; `None` where it is not installed.
    fn scraping(bench: &Bench, target: SocketAddr) -> Option<Prometheus> {
        if !installed("prometheus") {
            return None;
        }
        let config = bench.write(
            "prometheus.yml",
            &format!(
                "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n\
                 scrape_configs:\n  - job_name: fabricbench\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        );
        let addr = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", bench.dir.path().join("tsdb").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus { child, addr };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !get(addr, "/-/ready").is_some_and(|answer| answer.starts_with("HTTP/1.0 200")) {
            assert!(Instant::now() < deadline, "prometheus at {addr} not ready within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        // Targets are applied some seconds after start (the discovery
        // reload): the run starts once its scrape loop is running.
        while !get(addr, "/api/v1/targets")
            .is_some_and(|answer| answer.contains(&format!("\"scrapeUrl\":\"http://{target}/metrics\"")))
        {
            assert!(Instant::now() < deadline, "prometheus at {addr} has no target {target} within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(prometheus)
    }

    /// Every raw sample of `selector` over the last five minutes, by series
    /// labels, through the HTTP API's instant query of a range vector.
    fn samples(&self, selector: &str) -> Vec<(serde_json::Value, Vec<f64>)> {
        let query: String = format!("{selector}[5m]")
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => char::from(b).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let answer = get(self.addr, &format!("/api/v1/query?query={query}")).expect("prometheus answers");
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        let json: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"));
        assert_eq!(json["status"], "success", "{json}");
        let series = json["data"]["result"].as_array().expect("a matrix").clone();
        series
            .into_iter()
            .map(|s| {
                let values = s["values"].as_array().unwrap().iter();
                (s["metric"].clone(), values.map(|v| v[1].as_str().unwrap().parse().unwrap()).collect())
            })
            .collect()
    }
}

/// A loopback address with a port nothing listens on (just now).
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// One HTTP/1.0 GET, the whole answer; `None` where nothing listens.
fn get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// Whether `scraped` is one of `measured` (Gb/s) in bit/s, to the float's
/// last digits.
fn among(scraped: f64, measured: &[f64]) -> bool {
    measured.iter().any(|gbps| (scraped - gbps * 1e9).abs() <= 1e-9 * scraped.abs().max(1.0))
}

fn gbps_list(value: &serde_json::Value) -> Vec<f64> {
    value.as_array().expect("a list").iter().map(|g| g.as_f64().unwrap()).collect()
}

#[test]
fn prometheus_scrapes_a_run_and_its_samples_are_run_jsons_interval_rates() {
    let bench = Bench::new();
    let target = free_port();
    let Some(prometheus) = Prometheus::scraping(&bench, target) else { return };
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write("soak.toml", SOAK);
    let json = common::run_json(&bench, &scenario, &hosts, &["--metrics", &target.to_string()]);
    let phase = &json["phases"][0];
    let aggregate = gbps_list(&phase["interval_gbps"]);
    let flow = gbps_list(&phase["flows"][0]["interval_gbps"]);
    assert_eq!(aggregate.len(), 6, "{phase}");

    let rates = prometheus.samples(r#"fabricbench_rate_bits_per_second{phase="0",phase_name="scraped"}"#);
    let [(_, rates)] = &rates[..] else { panic!("one aggregate series: {rates:?}") };
    let mut seen: Vec<f64> = rates.clone();
    seen.dedup();
    assert!(seen.len() >= 3, "scraped too few intervals: {rates:?} of {aggregate:?}");
    for rate in rates {
        assert!(among(*rate, &aggregate), "scraped {rate} bit/s is no interval of run.json's {aggregate:?} Gb/s");
    }
    let flows = prometheus.samples(r#"fabricbench_flow_rate_bits_per_second{host="127.0.0.1",peer="127.0.0.2"}"#);
    let [(labels, flow_rates)] = &flows[..] else { panic!("one flow series: {flows:?}") };
    assert_eq!((&labels["flow"], &labels["group"]), (&"0".into(), &"p".into()), "{labels}");
    for rate in flow_rates {
        assert!(among(*rate, &flow), "scraped {rate} bit/s is no interval of the flow's {flow:?} Gb/s");
    }
    let joined = prometheus.samples("fabricbench_ranks_joined");
    assert_eq!(joined.first().and_then(|(_, v)| v.last()), Some(&2.0), "{joined:?}");
}

#[test]
fn a_metrics_address_that_cannot_be_had_is_refused_before_anything_starts() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write("soak.toml", SOAK);
    let run = |metrics: &str| {
        bench.run(&["run", scenario.to_str().unwrap(), "-H", hosts.to_str().unwrap(), "--metrics", metrics])
    };

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(&addr);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("--metrics {addr}: cannot listen there")), "{stderr}");
    assert!(!Path::new(&bench.results()).exists(), "a results folder was made for a run that never started");
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "processes left");

    for (bad, says) in
        [("9464", "no port in `9464`"), ("127.0.0.1:99999", "invalid port value"), (":x", "`x` is no port")]
    {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(stderr.contains(&format!("invalid value '{bad}' for '--metrics <ADDR:PORT>'")), "{bad}: {stderr}");
        assert!(stderr.contains(says) && stderr.contains("e.g. 127.0.0.1:9464"), "{bad}: {stderr}");
    }
}

#[test]
fn the_shipped_alerting_rules_load_and_fire_on_their_cases() {
    if !installed("promtool") {
        return;
    }
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("prometheus");
    for args in [["check", "rules", "fabricbench.rules.yml"], ["test", "rules", "fabricbench.rules.test.yml"]] {
        let out = Command::new("promtool").args(args).current_dir(&folder).output().expect("run promtool");
        assert!(out.status.success(), "promtool {}: {}{}", args.join(" "), text(&out.stdout), text(&out.stderr));
    }
}

/// Latency phases repeated make a probe mesh: once a phase ends, each
/// latency flow's half round trip quantiles are served, and they are what
/// run.json keeps for that flow in one of its phases.
#[test]
fn each_ended_latency_phase_serves_the_quantiles_run_json_keeps() {
    let bench = Bench::new();
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n");
    let scenario = bench.write(
        "mesh.toml",
        "[run]\nname = \"mesh\"\nduration = \"1s\"\nwarmup = \"200ms\"\nrepeat = 3\n\n\
         [[group]]\nname = \"lat\"\npattern = \"pairwise\"\nmode = \"latency\"\n",
    );
    let target = free_port();
    let json = bench.dir.path().join("run.json");
    let child = bench.spawn(&[
        "run",
        scenario.to_str().unwrap(),
        "-H",
        hosts.to_str().unwrap(),
        "--metrics",
        &target.to_string(),
        "--quiet",
        "--no-save",
        "--export-json",
        json.to_str().unwrap(),
    ]);
    let prefix = r#"fabricbench_flow_latency_seconds{group="lat",src_rank="0",dst_rank="1",host="127.0.0.1",peer="127.0.0.2",quantile="#;
    let deadline = Instant::now() + Duration::from_secs(60);
    let scraped: Vec<f64> = loop {
        let body = get(target, "/metrics").unwrap_or_default();
        let quantiles: Vec<f64> = ["0.5", "0.99", "0.999"]
            .iter()
            .filter_map(|q| {
                body.lines().find(|l| l.starts_with(&format!("{prefix}\"{q}\"}} ")))?.rsplit(' ').next()?.parse().ok()
            })
            .collect();
        if quantiles.len() == 3 {
            break quantiles;
        }
        assert!(Instant::now() < deadline, "no latency served within 60 s: {body}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = common::read_json(&json);
    let kept: Vec<Vec<f64>> = run["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let l = &p["flows"][0]["latency"];
            ["typical_us", "p99_us", "p999_us"].iter().map(|k| l[k].as_f64().unwrap() * 1e-6).collect()
        })
        .collect();
    let same = |kept: &Vec<f64>| kept.iter().zip(&scraped).all(|(k, s)| (k - s).abs() <= 1e-9 * k.abs());
    assert!(kept.iter().any(same), "scraped {scraped:?} s is no phase's latency in run.json: {kept:?}");
}

/// `watch --metrics` scraped by a real Prometheus: a known path's p99
/// through PromQL is that path's p99 of one of the windows in
/// windows.jsonl, and the windows judged are counted.
#[test]
fn prometheus_scrapes_a_watch_and_a_paths_p99_is_one_of_its_windows() {
    let bench = Bench::new();
    let target = free_port();
    let Some(prometheus) = Prometheus::scraping(&bench, target) else { return };
    let hosts = bench.write("hosts", "127.0.0.1\n127.0.0.2\n127.0.0.3\n");
    let out = bench.run(&[
        "watch",
        "-H",
        hosts.to_str().unwrap(),
        "--window",
        "1s",
        "--windows",
        "5",
        "--p99",
        "2s",
        "--metrics",
        &target.to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let folder = std::fs::read_dir(bench.results()).unwrap().flatten().next().unwrap().path();
    let windows = std::fs::read_to_string(folder.join("windows.jsonl")).unwrap();
    let p99s: Vec<f64> = windows
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .flat_map(|w| w["flows"].as_array().unwrap().clone())
        .filter(|f| (f["src"].as_str(), f["dst"].as_str()) == (Some("127.0.0.1"), Some("127.0.0.2")))
        .map(|f| f["p99_us"].as_f64().unwrap() * 1e-6)
        .collect();
    assert_eq!(p99s.len(), 5, "{windows}");
    let selector = r#"fabricbench_flow_latency_seconds{host="127.0.0.1",peer="127.0.0.2",quantile="0.99"}"#;
    let scraped = prometheus.samples(selector);
    let [(labels, values)] = &scraped[..] else { panic!("one series of the path: {scraped:?}") };
    assert_eq!(labels["group"], "probes", "{labels}");
    for value in values {
        assert!(p99s.iter().any(|p| (p - value).abs() <= 1e-12), "scraped {value} s is no window's p99 {p99s:?}");
    }
    let judged = prometheus.samples("fabricbench_watch_windows_total");
    let counts: Vec<f64> = judged.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    assert!(counts.iter().any(|&n| n >= 3.0) && counts.iter().all(|&n| n <= 5.0), "{counts:?}");
}
