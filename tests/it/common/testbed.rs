//! The multi-host test bed (scripts/testbed): hosts h1..hN as network
//! namespaces with real sshd. One bed per machine, so a test holds an
//! exclusive lock for as long as its bed is up, across test processes.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const LOCK: &str = "/var/tmp/fabricbench-testbed.tests.lock";

/// The four hosts of a bed of four, in the hostfile's order.
pub const HOSTS4: [&str; 4] = ["h1", "h2", "h3", "h4"];

/// A fan-in from h2..h4 into h1 under a scheduler's launch (srun, mpirun):
/// the ranks in the hostfile's order, every flow carrying data, and each
/// rank measuring its own host's eth0: the receiver's took in what arrived,
/// less what sat in its receive buffers, and what arrived from a sender
/// left through its eth0 (counted on its own clock, so within a margin).
pub fn assert_fan_in_on_each_host(run: &serde_json::Value) {
    let hosts: Vec<&str> = run["hosts"].as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert_eq!(hosts, HOSTS4, "ranks in the hostfile's order");
    let phase = &run["phases"][0];
    assert_eq!(phase["complete"], true, "{phase}");
    let flows = phase["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3);
    for (i, f) in flows.iter().enumerate() {
        assert_eq!((f["src_host"].as_str(), f["dst_host"].as_str()), (Some(HOSTS4[i + 1]), Some("h1")), "{f}");
        assert!(f["rx_bytes"].as_u64().unwrap() > 0, "{f}");
    }
    let ranks = phase["ranks"].as_array().unwrap();
    let received: u64 = flows.iter().map(|f| f["rx_bytes"].as_u64().unwrap()).sum();
    assert_eq!(ranks[0]["netdevs"][0]["iface"], "eth0");
    let floor = received.saturating_sub(super::receive_buffers(flows.len()));
    assert!(ranks[0]["netdevs"][0]["rx_bytes"].as_u64().unwrap() >= floor, "{received}: {}", ranks[0]);
    for (rank, flow) in ranks[1..].iter().zip(flows) {
        let sent = rank["netdevs"][0]["tx_bytes"].as_u64().unwrap() as f64;
        assert!(sent >= 0.9 * flow["rx_bytes"].as_u64().unwrap() as f64, "{rank} vs {flow}");
    }
}

pub struct Bed {
    _machine: File,
    _lock: File,
    script: PathBuf,
    pub hostfile: PathBuf,
    pub ssh_config: PathBuf,
    /// With `--slurm`: the slurm.conf that salloc, srun and sbatch need (SLURM_CONF).
    pub slurm_conf: PathBuf,
}

impl Bed {
    /// Brings up `n` hosts with `extra` arguments (e.g. `--shape h1=200mbit`).
    /// `None` (the test is skipped, saying why) where the bed cannot run here,
    /// unless FABRICBENCH_REQUIRE_TESTBED=1, as in CI.
    pub fn up(n: usize, extra: &[&str]) -> Option<Bed> {
        Bed::start(n, extra, super::busy_machine)
    }

    /// Like [`Bed::up`], with no other CPU-heavy test running meanwhile
    /// (see [`super::quiet_machine`]): for tests that check timing or load.
    /// (One lock per process: taking the machine lock again from the same
    /// test, shared or not, would wait for itself.)
    pub fn up_quiet(n: usize, extra: &[&str]) -> Option<Bed> {
        Bed::start(n, extra, super::quiet_machine)
    }

    /// Like [`Bed::up`], as a two-level fabric: the hosts on `leaves` leaf
    /// bridges leaf1.. in blocks as even as can be (h1, h2 | h3, h4 | … for
    /// 6 on 3), each leaf joined to one spine by an uplink that
    /// [`Bed::shape_uplink`] narrows.
    pub fn up_fabric(n: usize, leaves: usize, extra: &[&str]) -> Option<Bed> {
        let leaves = leaves.to_string();
        Bed::start(n, &[&["--leaves", leaves.as_str()], extra].concat(), super::busy_machine)
    }

    /// The machine's lock and the bed's, taken in that order; `None`
    /// where the bed cannot run (as [`Bed::up`]).
    fn locks(machine_lock: fn() -> File) -> Option<(File, File)> {
        if !super::root_or_skip("the multi-host test bed") {
            return None;
        }
        let machine = machine_lock();
        std::fs::create_dir_all("/var/tmp").expect("/var/tmp");
        let lock = File::create(LOCK).expect("test bed lock file");
        lock.lock().expect("test bed lock");
        Some((machine, lock))
    }

    /// `scripts/testbed selftest ARGS` (which brings its own bed up and
    /// down) under both locks, on a quiet machine: it measures rates.
    pub fn selftest(args: &[&str]) -> Option<Output> {
        let _locks = Bed::locks(super::quiet_machine)?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/testbed");
        Some(Command::new(&script).arg("selftest").args(args).output().expect("run scripts/testbed selftest"))
    }

    fn start(n: usize, extra: &[&str], machine_lock: fn() -> File) -> Option<Bed> {
        let (machine, lock) = Bed::locks(machine_lock)?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/testbed");
        let out = Command::new(&script).arg("up").arg(n.to_string()).args(extra).output().expect("run scripts/testbed");
        assert!(out.status.success(), "testbed up failed:\n{}{}", super::text(&out.stdout), super::text(&out.stderr));
        let state = PathBuf::from(
            std::env::var("FABRICBENCH_TESTBED_DIR").unwrap_or_else(|_| "/var/tmp/fabricbench-testbed".into()),
        );
        Some(Bed {
            _machine: machine,
            _lock: lock,
            script,
            hostfile: state.join("hostfile"),
            ssh_config: state.join("ssh_config"),
            slurm_conf: state.join("run/slurm/slurm.conf"),
        })
    }

    /// Runs a command inside host `host` (its namespaces).
    pub fn exec(&self, host: &str, cmd: &[&str]) -> Output {
        Command::new(&self.script).arg("exec").arg(host).args(cmd).output().expect("testbed exec")
    }

    /// Reshapes a host of the running bed (`h2=100mbit/in`, as `--shape`).
    pub fn shape(&self, spec: &str) {
        let out = Command::new(&self.script).arg("shape").arg(spec).output().expect("testbed shape");
        assert!(out.status.success(), "testbed shape {spec}: {}", super::text(&out.stderr));
    }

    /// Drops a share of what a host's NIC sends at its switch port (`h2=1`:
    /// 1 %, at random), as a bad cable would.
    pub fn lossy(&self, spec: &str) {
        let out = Command::new(&self.script).arg("lossy").arg(spec).output().expect("testbed lossy");
        assert!(out.status.success(), "testbed lossy {spec}: {}", super::text(&out.stderr));
    }

    /// Takes a NIC's switch port down or up (`h3:eth2`, `down`): a pulled cable.
    pub fn link(&self, nic: &str, state: &str) {
        let out = Command::new(&self.script).args(["link", nic, state]).output().expect("testbed link");
        assert!(out.status.success(), "testbed link {nic} {state}: {}", super::text(&out.stderr));
    }

    /// Shapes a leaf's uplink to the spine, both ways (`leaf1`, `250mbit`).
    pub fn shape_uplink(&self, leaf: &str, rate: &str) {
        let out = Command::new(&self.script).args(["shape-uplink", leaf, rate]).output().expect("testbed shape-uplink");
        assert!(out.status.success(), "testbed shape-uplink {leaf} {rate}: {}", super::text(&out.stderr));
    }

    /// Drops `pct` % of what crosses a leaf's uplink, both ways (`leaf1`, `5`);
    /// [`Bed::unshape_uplink`] ends it.
    pub fn lossy_uplink(&self, leaf: &str, pct: &str) {
        let out = Command::new(&self.script).args(["lossy-uplink", leaf, pct]).output().expect("testbed lossy-uplink");
        assert!(out.status.success(), "testbed lossy-uplink {leaf} {pct}: {}", super::text(&out.stderr));
    }

    /// Removes a leaf's uplink shaping and loss.
    pub fn unshape_uplink(&self, leaf: &str) {
        let out = Command::new(&self.script).args(["unshape-uplink", leaf]).output().expect("testbed unshape-uplink");
        assert!(out.status.success(), "testbed unshape-uplink {leaf}: {}", super::text(&out.stderr));
    }

    /// Crashes `host` whole: kills its pid namespace's init from outside (an
    /// init ignores SIGKILL from its own namespace), and with it every
    /// process of the host — sshd, slurmd, job steps, workers.
    pub fn crash(&self, host: &str) {
        let record = self.hostfile.parent().expect("state dir").join("run").join(host).join("init.pid");
        let record = std::fs::read_to_string(&record).unwrap_or_else(|e| panic!("{}: {e}", record.display()));
        let pid = record.split_whitespace().next().expect("a pid");
        assert!(Command::new("kill").args(["-9", pid]).status().expect("kill").success(), "kill -9 {pid} ({host})");
    }

    /// PIDs of Slurm step daemons on `host` (one per running job step).
    pub fn slurmstepds(&self, host: &str) -> Vec<String> {
        let out = self.exec(host, &["pgrep", "-x", "slurmstepd"]);
        super::text(&out.stdout).lines().map(str::to_string).collect()
    }

    /// PIDs of fabricbench workers on `host`.
    pub fn workers(&self, host: &str) -> Vec<String> {
        let out = self.exec(host, &["pgrep", "-f", "fabricbench worker"]);
        super::text(&out.stdout).lines().map(str::to_string).collect()
    }

    /// PIDs of sshd session processes on `host` (`sshd: root@notty`, not the listener).
    pub fn ssh_sessions(&self, host: &str) -> Vec<String> {
        let out = self.exec(host, &["pgrep", "-f", r"^sshd: .*(@|\[priv\])"]);
        super::text(&out.stdout).lines().map(str::to_string).collect()
    }

    /// Waits (bounded) until no host of `hosts` runs a worker; returns those that still do.
    pub fn hosts_with_workers(&self, hosts: &[&str], within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            let busy: Vec<String> =
                hosts.iter().filter(|h| !self.workers(h).is_empty()).map(|h| h.to_string()).collect();
            if busy.is_empty() || Instant::now() >= deadline {
                return busy;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (bounded) until `found` finds nothing on any host of `hosts`;
    /// returns what it still finds there, each line `host: what`.
    pub fn left_on(&self, hosts: &[&str], within: Duration, found: impl Fn(&Bed, &str) -> Vec<String>) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            let left: Vec<String> =
                hosts.iter().flat_map(|h| found(self, h).into_iter().map(move |what| format!("{h}: {what}"))).collect();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `fabricbench` arguments that reach the bed.
    pub fn ssh_args(&self) -> Vec<String> {
        vec!["--launcher".into(), "ssh".into(), "--ssh-config".into(), self.ssh_config.display().to_string()]
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = Command::new(&self.script).arg("down").output();
    }
}
