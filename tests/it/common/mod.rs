//! Helpers for tests that run the real binary.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The binary under test: this build's, or the one FABRICBENCH_BIN names
/// (scripts/test-rdma runs a VM's tests on the dist binary that way).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| std::env::var("FABRICBENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_fabricbench").into()))
}

const MACHINE_LOCK: &str = "/var/tmp/fabricbench-tests.machine.lock";

fn machine_lock(exclusive: bool) -> std::fs::File {
    let _ = std::fs::create_dir_all("/var/tmp");
    let file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(MACHINE_LOCK).expect("machine lock");
    if exclusive {
        file.lock().expect("exclusive machine lock");
    } else {
        file.lock_shared().expect("shared machine lock");
    }
    file
}

/// Held by tests that load the CPUs: they may run together, but not while
/// a test that measures the effect of load runs (see [`quiet_machine`]).
pub fn busy_machine() -> std::fs::File {
    machine_lock(false)
}

/// Held by tests whose numbers depend on what else runs (baselines of
/// stress sweeps): no other CPU-heavy test runs meanwhile.
pub fn quiet_machine() -> std::fs::File {
    machine_lock(true)
}

/// A child that runs until it is told to stop (`fabricbench watch`):
/// killed and reaped if the test ends without stopping it, so that a
/// failed assertion leaves nothing running.
pub struct Running(Option<Child>);

impl Running {
    pub fn new(child: Child) -> Running {
        Running(Some(child))
    }

    /// Sends `signal`, then waits for the child's end and output.
    pub fn stop(mut self, signal: nix::sys::signal::Signal) -> Output {
        let child = self.0.take().expect("running");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).expect("signal the child");
        child.wait_with_output().expect("the child's output")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A scratch folder with a hostfile and scenario, and a tag in the
/// environment of every process the test starts, so they can be found.
pub struct Bench {
    pub dir: tempfile::TempDir,
    pub tag: String,
}

impl Bench {
    pub fn new() -> Bench {
        let dir = tempfile::tempdir().expect("temp dir");
        let tag = format!("fbtest-{}-{}", std::process::id(), dir.path().file_name().unwrap().to_string_lossy());
        Bench { dir, tag }
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write input");
        path
    }

    pub fn results(&self) -> PathBuf {
        self.dir.path().join("results")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin());
        cmd.args(args).env("FABRICBENCH_TEST_TAG", &self.tag).current_dir(self.dir.path());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run fabricbench")
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn fabricbench")
    }

    /// PIDs of live processes started by this test (by the environment tag).
    pub fn processes(&self) -> Vec<(u32, String)> {
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else { return found };
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let needle = format!("FABRICBENCH_TEST_TAG={}", self.tag);
            if environ.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
                if stat.contains(") Z ") {
                    continue; // a zombie is already dead
                }
                found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
            }
        }
        found
    }

    /// Waits (bounded) until no process of this test is left; returns the leftovers.
    pub fn leftovers(&self, within: Duration) -> Vec<(u32, String)> {
        let deadline = Instant::now() + within;
        loop {
            let left = self.processes();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The PID of this test's worker of `rank`, once it runs (panics after `within`).
    pub fn worker_pid(&self, rank: usize, within: Duration) -> u32 {
        let deadline = Instant::now() + within;
        let needle = format!("worker --rank {rank}");
        loop {
            if let Some((pid, _)) = self.processes().into_iter().find(|(_, cmd)| cmd.contains(&needle)) {
                return pid;
            }
            assert!(Instant::now() < deadline, "rank {rank} never started");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The only results folder under results/.
    pub fn result_dir(&self) -> PathBuf {
        let dirs: Vec<PathBuf> =
            std::fs::read_dir(self.results()).expect("results folder").flatten().map(|e| e.path()).collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs[0].clone()
    }
}

/// Runs a scenario to completion with its full result as JSON on stdout;
/// asserts that it succeeded and left no process behind.
pub fn run_json(bench: &Bench, scenario: &Path, hostfile: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["run", scenario.to_str().unwrap(), "-H", hostfile.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--export-json", "-", "--no-save", "--quiet"]);
    let out = bench.run(&args);
    assert!(out.status.success(), "{}: {}", scenario.display(), text(&out.stderr));
    assert!(bench.leftovers(Duration::from_secs(2)).is_empty(), "{}: processes left", scenario.display());
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// The line of a scenario's leading comment that names the hostfile it is
/// written for, as the documents and the tests run it.
pub const HOSTFILE_HEADER: &str = "# hostfile: ";

/// The hostfile a shipped scenario's header names (`# hostfile:
/// hostfiles/local`, in the comment lines it starts with), in the
/// repository.
pub fn header_hostfile(scenario: &Path) -> PathBuf {
    let text = std::fs::read_to_string(scenario).unwrap();
    let named = text
        .lines()
        .take_while(|line| line.starts_with('#'))
        .find_map(|line| line.strip_prefix(HOSTFILE_HEADER))
        .unwrap_or_else(|| panic!("{}: its leading comment has no `{HOSTFILE_HEADER}PATH` line", scenario.display()));
    Path::new(env!("CARGO_MANIFEST_DIR")).join(named.trim())
}

/// Every scenario shipped in scenarios/ and its subfolders (the acceptance
/// kit in scenarios/acceptance/), sorted.
pub fn all_shipped_scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let entries = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .collect()
    };
    let mut found: Vec<PathBuf> = entries(&dir)
        .into_iter()
        .flat_map(|p| if p.is_dir() { entries(&p) } else { vec![p] })
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    found.sort();
    found
}

/// The TCP sockets `pid` holds, as (state, local port): see [`tcp_table`].
pub fn tcp_sockets(pid: u32) -> Vec<(String, u16)> {
    tcp_table(pid).into_iter().map(|s| (s.state, s.local.port())).collect()
}

/// One IPv4 TCP socket as the kernel lists it in /proc/net/tcp.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TcpSocket {
    /// The kernel's state in hex: 0A is LISTEN, 01 ESTABLISHED.
    pub state: String,
    pub local: SocketAddrV4,
    pub remote: SocketAddrV4,
}

/// The IPv4 TCP sockets `pid` holds: its sockets' inodes found in
/// /proc/PID/net/tcp, the kernel's own account of each connection's ends.
pub fn tcp_table(pid: u32) -> Vec<TcpSocket> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten();
    let inodes: Vec<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| Some(link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.to_string()))
        .collect();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            inodes.iter().any(|i| Some(&i.as_str()) == fields.get(9)).then_some(())?;
            let (local, remote) = (proc_net_addr(fields.get(1)?)?, proc_net_addr(fields.get(2)?)?);
            Some(TcpSocket { state: fields.get(3)?.to_string(), local, remote })
        })
        .collect()
}

/// `0101007F:1F90` as /proc/net/tcp writes 127.0.1.1:8080: the address's
/// bytes in network order printed as one native-endian word, the port in hex.
fn proc_net_addr(field: &str) -> Option<SocketAddrV4> {
    let (ip, port) = field.split_once(':')?;
    let ip = Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.to_ne_bytes());
    Some(SocketAddrV4::new(ip, u16::from_str_radix(port, 16).ok()?))
}

/// Follows a spawned run's stderr (progress as plain lines, as it is a
/// pipe): each line as it comes, and all of it once the run has ended.
pub fn follow_stderr(child: &mut Child) -> (mpsc::Receiver<String>, std::thread::JoinHandle<String>) {
    let (lines, heard) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().expect("stderr piped"));
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            all += &line;
            all.push('\n');
            let _ = lines.send(line);
        }
        all
    });
    (heard, reader)
}

/// Sends `signal` (e.g. "-9", "-STOP") to `pid` with kill(1).
pub fn signal(pid: u32, signal: &str) {
    assert!(Command::new("kill").args([signal, &pid.to_string()]).status().unwrap().success(), "kill {signal} {pid}");
}

/// Whether any phase of the scenario's plan has an RDMA group (a group of
/// its own, or a point of a `transport` sweep).
pub fn uses_rdma(scenario: &Path) -> bool {
    let hosts = fabricbench::hostfile::read(&header_hostfile(scenario)).unwrap();
    let (s, _) = fabricbench::scenario::read(scenario).expect("shipped scenarios parse");
    let plan = fabricbench::plan::build(&hosts, &s).unwrap_or_else(|e| panic!("{}: {e:?}", scenario.display()));
    plan.phases.iter().flat_map(|p| &p.groups).any(|g| g.transport == fabricbench::scenario::Transport::Rdma)
}

/// The shipped TCP scenarios (without RDMA groups; tests/it/rdma_run.rs runs
/// the others where a device exists), sorted, but the acceptance kit's: they
/// are held to a real fabric's rules (93 % of best), which loopback ranks
/// sharing a few cores need not meet (tests/it/acceptance_kit.rs runs them).
pub fn shipped_scenarios() -> Vec<PathBuf> {
    let kit = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/acceptance");
    all_shipped_scenarios().into_iter().filter(|p| !p.starts_with(&kit) && !uses_rdma(p)).collect()
}

/// The most an interface's counter can trail the application's over a TCP
/// window: the kernel counts bytes as they arrive and the application as it
/// reads them, so what sat in the receive buffers when the window opened is
/// the application's and not the interface's (one mpirun-bed run: 4.69 GB on
/// eth0 against about 4.71 GB read). Each stream holds at most tcp_rmem's
/// maximum.
pub fn receive_buffers(streams: usize) -> u64 {
    let rmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem").expect("tcp_rmem is readable");
    let max: u64 = rmem.split_whitespace().nth(2).and_then(|m| m.parse().ok()).expect("tcp_rmem has a maximum");
    max * streams as u64
}

pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub const LOCAL_HOSTS: &str = "127.0.0.1\n127.0.0.2\n127.0.0.3\n127.0.0.4\n";

/// The usual local fan-in: three senders into rank 0, 64 KiB messages.
pub fn fan_in(duration: &str) -> String {
    FanIn::new("fan", duration).warmup("300ms").message_size("64K").senders("1-3").text()
}

/// A fan-in scenario into rank 0, the run every end-to-end test starts
/// from: `[run]` with its window, one `incast` group, then what a test adds.
pub struct FanIn {
    name: String,
    duration: String,
    warmup: String,
    interval: String,
    run_extra: String,
    message_size: Option<String>,
    senders: Option<String>,
    after: String,
}

impl FanIn {
    /// Warm-up and interval 500 ms; every rank sends unless `senders` says which.
    pub fn new(name: &str, duration: &str) -> FanIn {
        FanIn {
            name: name.into(),
            duration: duration.into(),
            warmup: "500ms".into(),
            interval: "500ms".into(),
            run_extra: String::new(),
            message_size: None,
            senders: None,
            after: String::new(),
        }
    }

    pub fn warmup(mut self, warmup: &str) -> FanIn {
        self.warmup = warmup.into();
        self
    }

    pub fn interval(mut self, interval: &str) -> FanIn {
        self.interval = interval.into();
        self
    }

    /// A `[run]` line more, e.g. `repeat = 3`.
    pub fn run_line(mut self, line: &str) -> FanIn {
        self.run_extra.push_str(line);
        self.run_extra.push('\n');
        self
    }

    pub fn message_size(mut self, size: &str) -> FanIn {
        self.message_size = Some(size.into());
        self
    }

    /// Rank 0 receives from these ranks (`"1-3"`).
    pub fn senders(mut self, ranks: &str) -> FanIn {
        self.senders = Some(ranks.into());
        self
    }

    /// Text after the group, e.g. a `[sweep]`.
    pub fn then(mut self, text: &str) -> FanIn {
        self.after.push_str(text);
        self
    }

    pub fn text(&self) -> String {
        let FanIn { name, duration, warmup, interval, run_extra, .. } = self;
        let mut text = format!(
            "[run]\nname = \"{name}\"\nduration = \"{duration}\"\nwarmup = \"{warmup}\"\ninterval = \"{interval}\"\n\
             {run_extra}\n[[group]]\nname = \"incast\"\npattern = \"fan-in\"\n"
        );
        if let Some(size) = &self.message_size {
            text.push_str(&format!("message_size = \"{size}\"\n"));
        }
        if let Some(senders) = &self.senders {
            text.push_str(&format!("receivers = 0\nsenders = \"{senders}\"\n"));
        }
        text + &self.after
    }
}

pub mod shell;
pub mod testbed;

/// The numbers of a `fabricbench pair` table's rows, one Vec per row, between the column titles and the closing line.
pub fn perftest_rows(stdout: &str, titles: &str) -> Vec<Vec<f64>> {
    let lines: Vec<&str> = stdout.lines().collect();
    let start = lines.iter().position(|l| l.starts_with(titles)).unwrap_or_else(|| panic!("no titles:\n{stdout}"));
    lines[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("---"))
        .map(|l| l.split_whitespace().map(|v| v.parse().unwrap_or_else(|_| panic!("`{v}` in `{l}`"))).collect())
        .collect()
}

/// Whether this test runs as root; if not, it says it skips `what` — a
/// failure instead under FABRICBENCH_REQUIRE_TESTBED=1, as in CI.
pub fn root_or_skip(what: &str) -> bool {
    let required = std::env::var("FABRICBENCH_REQUIRE_TESTBED").is_ok_and(|v| v == "1");
    let is_root = std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")));
    if !is_root {
        assert!(!required, "{what} needs root");
        eprintln!("SKIP: {what} needs root");
    }
    is_root
}

#[test]
fn proc_net_tcp_addresses_read_as_the_kernel_wrote_them() {
    let at = |ip: [u8; 4], port| Some(SocketAddrV4::new(Ipv4Addr::from(ip), port));
    // As a little-endian machine (x86-64, arm64) writes them.
    assert_eq!(proc_net_addr("0201007F:1F90"), at([127, 0, 1, 2], 8080));
    assert_eq!(proc_net_addr("0F00010A:0000"), at([10, 1, 0, 15], 0));
    assert_eq!(proc_net_addr("0100007F"), None, "no port");
}

#[test]
fn a_fan_in_is_the_scenario_text_the_tests_wrote_out() {
    let text = FanIn::new("rep", "2s").warmup("200ms").run_line("repeat = 3").senders("1-3").then("\n[sweep]\n").text();
    let written = "[run]\nname = \"rep\"\nduration = \"2s\"\nwarmup = \"200ms\"\ninterval = \"500ms\"\nrepeat = 3\n\n\
                   [[group]]\nname = \"incast\"\npattern = \"fan-in\"\nreceivers = 0\nsenders = \"1-3\"\n\n[sweep]\n";
    assert_eq!(text, written);
    let sized = "[run]\nname = \"fan\"\nduration = \"1s\"\nwarmup = \"300ms\"\ninterval = \"500ms\"\n\n\
                 [[group]]\nname = \"incast\"\npattern = \"fan-in\"\nmessage_size = \"64K\"\nreceivers = 0\nsenders = \"1-3\"\n";
    assert_eq!(fan_in("1s"), sized);
}
