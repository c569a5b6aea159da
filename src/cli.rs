//! Command-line definitions: flags become typed options here, nothing runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub(crate) mod gpus;
mod listen;
pub(crate) mod pair;
pub mod shipped;
pub(crate) mod watch;

use crate::exit;
use crate::launch::choose::LauncherKind;
use crate::report::compare::Tolerances;
use crate::scenario::limits::MAX_REPEATS;
use crate::scenario::soak::FlapShare;
use crate::scenario::topology::TopologyTable;
use crate::scenario::{parse_rate, Rule};

const EXAMPLES: &str = "\
Examples:
  # 3 senders -> rank 0 over TCP on 4 local ranks (127.0.0.1-4), summary on the terminal
  fabricbench run scenarios/fan-in.toml -H hostfiles/local

  # the same, full results as JSON on stdout (progress and summary go to stderr)
  fabricbench run scenarios/fan-in.toml -H hostfiles/local --export-json - | jq .phases[0].receivers

  # show which flows a scenario makes on a hostfile, without running anything
  fabricbench plan scenarios/all-to-all.toml -H hostfiles/local

  # under Slurm: one srun step starts a worker on every node of the allocation
  salloc -N 16 fabricbench run scenarios/fan-in.toml
  sbatch -N 16 --wrap 'fabricbench run scenarios/all-to-all.toml --export-json all.json'
  salloc -N 16 fabricbench run scenarios/fan-in.toml -H rack1   # these nodes, in this order

  # under Open MPI: one mpirun job, rank k on the k-th host; or mpirun (any MPI:
  # OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK) starts fabricbench and rank 0 is the launcher
  fabricbench run scenarios/fan-in.toml -H rack1 --launcher mpirun
  mpirun -np 4 --hostfile rack1 --map-by slot fabricbench run scenarios/fan-in.toml -H rack1

  # 1000 hosts over ssh as a tree: the launcher starts 32, each of those up to 32 more
  fabricbench run scenarios/all-pairs.toml -H hostfiles/row3 --tree-radix 32

  # acceptance of a rack: every pair in rounds, pairs under 93 % of the best fail,
  # suspects are retested alone, a JUnit file for CI
  fabricbench run scenarios/all-pairs.toml -H rack1 --check 'flow >= 93% of best' --export-junit checks.xml

  # the node gate first: each NDR host alone (ports at 400 Gb/s 4X, error counters still,
  # loopback >= 94 % of line rate); hosts that fail are left out of the pairs (exit 3)
  fabricbench run scenarios/all-pairs.toml -H rack1 --gate ndr-ib
  fabricbench run scenarios/fan-in.toml -H hostfiles/local --gate tcp-loopback --gate-only

  # a 12-hour soak of every pair that Prometheus scrapes as it goes (rates, phase, dips)
  fabricbench run scenarios/pairwise.toml -H rack1 --duration 12h --metrics :9464

  # offered load: a background paced by `rate = \"300 Mb/s\"` (per flow; also \"2 Gb/s\",
  # \"100k msg/s\") swept over its rate beside an open-loop latency probe (mode =
  # \"latency\", rate = \"1k msg/s\", schedule = \"poisson\" | \"constant\"): latency vs load
  fabricbench run scenarios/load-latency.toml -H hostfiles/local

  # two hosts the perftest way (ib_write_bw -a -q 4 --report_gbits): a perftest-shaped table
  fabricbench pair node01 node02 write -a -q 4 --report-gbits

  # one rank per NIC: a hostfile line `node01 slots=2 devices=mlx5_0,mlx5_1` is two
  # workers on node01, rank k on the k-th device (see every rank with `plan`)
  fabricbench plan scenarios/rdma-fan-in.toml -H hostfiles/per-nic

  # each phase 5 times, sweep points interleaved: mean ± 95 % confidence interval
  fabricbench run scenarios/fan-in.toml -H hostfiles/local --repeat 5

  # pairs by the fabric's shape (TOML, ibnetdiscover output or lldpctl JSON): a group with
  # pattern = \"all-pairs\" and across = \"leaf\" measures every pair under two leaves, and
  # the summary adds Gb/s per pair of leaves; or [topology] in the scenario (docs/SCENARIOS.md)
  fabricbench run cross-leaf.toml -H rack1 --topology fabric.toml

  # re-render a results folder (report.html, summary.md, CSVs) from its run.json
  fabricbench report results/2026-11-30T08-24-42Z-fan-in

  # did anything get worse than the baseline by more than 5 % (every kind of number)?
  fabricbench compare results/baseline results/2026-11-30T08-24-42Z-fan-in --tolerance 5%

  # Gb/s may drop 5 %, latency (min, typical, p99, p99.9) grow 10 %, CPU 30 %
  fabricbench compare results/baseline results/new --tolerance gbps=5%,latency=10%,cpu=30%

Results go to results/<UTC time>-<scenario name>/ (run.json, flows.csv,
intervals.csv, ranks.csv, summary.md, report.html, junit.xml with checks).
Bandwidth is in Gb/s = 1e9 bit/s. The results folder is made before
anything starts and journals each phase (docs/RESULTS.md).";

/// A command's examples, then the exit code table every command shares.
fn with_exit_codes(examples: &str) -> String {
    format!("{examples}\n\n{}", exit::help_text())
}

#[derive(Debug, Parser)]
#[command(name = "fabricbench", version, about = "Benchmark RDMA and TCP fabrics across many hosts at once", after_help = with_exit_codes(EXAMPLES))]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario on the hosts of a hostfile and report the results
    #[command(after_help = with_exit_codes(EXAMPLES))]
    Run(Box<RunArgs>),
    /// Print the flows a scenario makes on a hostfile, without running
    Plan(PlanArgs),
    /// Probe a mesh of paths between the hosts until stopped: each window's p99 and loss per path, failing paths localised to suspects, events appended to a log, OpenMetrics for Prometheus
    #[command(after_help = with_exit_codes(watch::EXAMPLES))]
    Watch(Box<watch::WatchArgs>),
    /// Check every host of a hostfile as `run` would reach it (here when every host is an address of this machine, else over ssh): reachable, same fabricbench version, clock offset, and what each host is (`fabricbench facts` there)
    Hosts(HostsArgs),
    /// Re-render a results folder (report.html, summary.md, CSVs, junit.xml) from its run.json
    #[command(after_help = with_exit_codes(EXAMPLES))]
    Report(ReportArgs),
    /// Compare two results folders on every metric (Gb/s, Mpps, latency, CPU); exit 3 when something got worse than its tolerance
    #[command(after_help = with_exit_codes(EXAMPLES))]
    Compare(CompareArgs),
    /// Two hosts with perftest's flags and no scenario file; prints perftest's table
    #[command(after_help = with_exit_codes(pair::EXAMPLES))]
    Pair(Box<pair::PairArgs>),
    /// List this host's RDMA devices: ports, state, link layer, rate, MTU, firmware, NUMA node, GIDs
    Probe(ProbeArgs),
    /// What this host is, as run.json records it: kernel, OS, CPU model, cores, NUMA nodes, rdma-core, and each RDMA device's driver, firmware, model and port rates (from sysfs)
    Facts(ProbeArgs),
    /// Test this host's GPUs through the NVIDIA driver (libcuda.so.1, or the library FABRICBENCH_LIBCUDA names): each GPU's model, bus id and memory, then allocate device, managed and host-pinned memory, export dma-buf, fill and validate; one PASS or FAIL line per step, exit 3 when one fails
    #[command(after_help = with_exit_codes(gpus::EXAMPLES))]
    Gpus(gpus::GpusArgs),
    /// Print a shell completion script, e.g. `fabricbench completions bash > /etc/bash_completion.d/fabricbench`
    Completions(CompletionsArgs),
    /// Print the man page (roff), e.g. `fabricbench man | man -l -`
    Man,
    /// The per-host worker (started by the launcher; reads its job on stdin)
    #[command(hide = true)]
    Worker(WorkerArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// The shells `completions` writes for (what the packages install).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Print the report as JSON (the same record run.json carries)
    #[arg(long)]
    pub json: bool,
}

/// Shown in `ps` so operators can tell ranks apart; the job itself comes on stdin.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[arg(long)]
    pub rank: Option<usize>,
    /// A task of the launcher's srun step: the spec is the step's broadcast, the rank SLURM_PROCID
    #[arg(long, conflicts_with = "rank")]
    pub slurm: bool,
    /// A rank of the launcher's mpirun job: the rank from OMPI_COMM_WORLD_RANK (or PMIX_RANK, PMI_RANK), the job in FABRICBENCH_MPI_JOB
    #[arg(long, conflicts_with_all = ["rank", "slurm"])]
    pub mpi: bool,
}

#[derive(Debug, Args)]
pub struct Inputs {
    /// Scenario file (TOML), e.g. scenarios/fan-in.toml, or a shipped scenario's name
    /// (`fan-in`, `acceptance/rdma-all-pairs`), found here, beside the binary or where
    /// the packages install them (/usr/share/fabricbench/scenarios)
    #[arg(value_parser = shipped::scenario)]
    pub scenario: PathBuf,
    /// Hostfile: one host per line (plain, `host slots=N`, `host:N`, `node[01-04]`,
    /// `addr=IP`, `devices=mlx5_0,mlx5_1`, `gpus=0,1`); a host runs one worker (rank) per
    /// slot, e.g. `node01 slots=2 devices=mlx5_0,mlx5_1 gpus=0,1` for one rank per NIC and GPU.
    /// Inside a Slurm allocation the default is its nodes (SLURM_JOB_NODELIST)
    #[arg(short = 'H', long = "hostfile")]
    pub hostfile: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub inputs: Inputs,
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Print the plan as JSON (its ranks, phases and flows, as run.json's
    /// `plan`, with the estimate in seconds) instead of lines
    #[arg(long)]
    pub json: bool,
}

/// The `--topology` that asks the workers for their hosts' LLDP neighbours.
pub const GATHER_LLDP: &str = "lldp";

#[derive(Debug, Args)]
pub struct TopologyArgs {
    /// The fabric's switches and where each host is cabled (docs/TOPOLOGY.md):
    /// a TOML file, ibnetdiscover's output, or a folder of `lldpctl -f json`
    /// files, in place of the scenario's [topology]. Every host of the
    /// hostfile must be placed; `plan` prints it as a tree of spines, leaves
    /// and hosts, and `within`, `across`, `hops` and `bisection` choose pairs by it.
    /// `run --topology lldp`: a short launch of the workers first runs
    /// `lldpctl -f json` on every host, and the run is planned, judged and
    /// reported on the topology that gives, as on a folder of those files;
    /// a host whose lldpctl is missing or fails ends it before any
    /// measurement (exit 2). `plan` refuses it (a folder named lldp: ./lldp)
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,
    /// The form of --topology (default: a folder or `.json` is LLDP, `.toml`
    /// TOML, anything else ibnetdiscover's text)
    #[arg(long, value_enum, value_name = "FORMAT", requires = "topology")]
    pub topology_format: Option<crate::topology::Format>,
}

impl TopologyArgs {
    /// The flags as the scenario's table would give them (none for `--topology lldp`).
    pub fn table(&self) -> Option<TopologyTable> {
        let file = self.topology.clone().filter(|_| !self.gathers_lldp())?;
        Some(TopologyTable { file, format: self.topology_format })
    }

    /// `--topology lldp`: the workers gather each host's LLDP neighbours.
    pub fn gathers_lldp(&self) -> bool {
        self.topology.as_deref() == Some(std::path::Path::new(GATHER_LLDP))
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub inputs: Inputs,
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Override the scenario's [run] duration (e.g. a short smoke run). A
    /// scenario that gives no [run] interval samples every min(1s, DURATION);
    /// one whose interval is longer than DURATION is refused
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub duration: Option<std::time::Duration>,
    /// Override the scenario's [run] warmup
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub warmup: Option<std::time::Duration>,
    /// Run each phase N times, 1 to 100 (overrides [run] repeat); a sweep's
    /// points interleave (A B A B) and every aggregate gets mean ± 95 %
    /// confidence interval, e.g. --repeat 5
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_REPEATS as i64))]
    pub repeat: Option<u32>,
    /// How workers are started (auto: slurm inside a Slurm allocation whose
    /// nodes the hosts are; else local when every host is an address of this
    /// machine; else ssh)
    #[arg(long, value_enum, default_value_t = LauncherKind::Auto)]
    pub launcher: LauncherKind,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// Tree launch over ssh: start K workers, each of which starts up to K of
    /// the rest, and so on (log_K(N) ssh hops; no host opens more than K
    /// sessions). The hosts need ssh access to each other with the same
    /// --ssh-config path
    #[arg(long, value_name = "K", conflicts_with = "stage", value_parser = clap::value_parser!(u16).range(2..))]
    pub tree_radix: Option<u16>,
    /// An extra argument for srun, before fabricbench's own (repeat it), e.g.
    /// --srun-arg=--cpu-bind=none --srun-arg=--overlap
    #[arg(long = "srun-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub srun_args: Vec<String>,
    /// An extra argument for mpirun (--launcher mpirun), before fabricbench's
    /// own (repeat it), e.g. --mpirun-arg=--mca --mpirun-arg=plm_rsh_agent
    /// --mpirun-arg='ssh -F cluster.conf'
    #[arg(long = "mpirun-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub mpirun_args: Vec<String>,
    /// TCP port of rank 0's coordinator (0 = any free port)
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    #[command(flatten)]
    pub save: SaveArgs,
    /// Write the full result (run.json schema) to FILE, `-` for stdout
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Write one CSV row per flow to FILE, `-` for stdout
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Write the summary tables as Markdown to FILE, `-` for stdout
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Write the checks (and the gate, one case per host) as JUnit XML to
    /// FILE, `-` for stdout (needs checks or a gate)
    #[arg(long, value_name = "FILE")]
    pub export_junit: Option<PathBuf>,
    /// A check, added to the scenario's [check]: SUBJECT >= THRESHOLD
    /// (`<=` for latency, p99 and loss). Subjects: flow, host, receiver,
    /// group, latency, p99, loss; thresholds: "9 Gb/s", "93% of best", "90%
    /// of line rate", for latency and p99 "500us" or "1.5x min", for loss "2%".
    /// Repeatable. A failed check exits with 3.
    #[arg(long = "check", value_name = "EXPR", value_parser = Rule::parse)]
    pub checks: Vec<Rule>,
    /// The ports' line rate for "% of line rate" checks where no probe can
    /// tell it (TCP), e.g. "25 Gb/s", "400 Mb/s"
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub line_rate: Option<f64>,
    /// Do not retest suspect hosts and links alone before declaring them bad
    #[arg(long)]
    pub no_retest: bool,
    /// Run the node gate before everything else: every host alone, held to
    /// PROFILE (a file, or a shipped one: hdr-ib, ndr-ib, roce-100g,
    /// roce-200g, roce-400g, tcp-loopback); hosts that fail are left out of
    /// the pairs and the run exits with 3. Overrides the scenario's [gate],
    /// e.g. --gate ndr-ib
    #[arg(long, value_name = "PROFILE")]
    pub gate: Option<String>,
    /// Run only the node gate (needs --gate or the scenario's [gate])
    #[arg(long)]
    pub gate_only: bool,
    /// Mark every interval where a flow falls below this share of its own
    /// median Gb/s as a dip (the Flaps tables, run.json `flaps`), instead of
    /// the scenario's [soak] flap (default 50%); 1% to 99%, e.g. --flap 70%
    #[arg(long, value_name = "SHARE", value_parser = FlapShare::parse)]
    pub flap: Option<FlapShare>,
    /// Serve the run as it goes for Prometheus at http://ADDR:PORT/metrics
    /// (OpenMetrics text: phase, rates, latency, flaps; docs/METRICS.md), until the
    /// run ends, e.g. --metrics 127.0.0.1:9464 (:9464: every address)
    #[arg(long, value_name = "ADDR:PORT", value_parser = listen::parse_listen)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Print nothing but errors (and exports)
    #[arg(short, long)]
    pub quiet: bool,
    /// No progress bars or progress lines
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Debug, Args)]
pub struct HostsArgs {
    /// Hostfile to check (inside a Slurm allocation the default is its nodes)
    #[arg(short = 'H', long = "hostfile")]
    pub hostfile: Option<PathBuf>,
    /// How the hosts are reached, as `run` starts workers there (auto: srun
    /// inside a Slurm allocation whose nodes the hosts are; else here when
    /// every host is this machine; else ssh). mpirun is not one: it starts
    /// one job, not a command per host
    #[arg(long, value_enum, default_value_t = LauncherKind::Auto)]
    pub launcher: LauncherKind,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// Print the checks as JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// How to reach hosts over SSH.
#[derive(Debug, Args)]
pub struct SshArgs {
    /// ssh_config file to use instead of ~/.ssh/config (like `ssh -F`)
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// Give up on a host that does not answer within this
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub connect_timeout: std::time::Duration,
    /// Hosts connected to at once
    #[arg(long, default_value_t = 64)]
    pub fanout: usize,
    /// Path of fabricbench on the remote hosts (default: this binary's path,
    /// as on a shared filesystem)
    #[arg(long, value_name = "PATH")]
    pub remote_exe: Option<String>,
    /// Copy this binary to ~/.cache/fabricbench/ on hosts where it is missing
    /// or differs (by checksum) and run that copy. Each host gets the binary
    /// of its architecture (`uname -m`): this one for its own, and the
    /// release binaries (fabricbench-<version>-<arch>-linux-gnu) beside it
    /// or in --dist for the others. Staged binaries unused for over 7 days
    /// are removed from that cache as it is staged to
    #[arg(long, conflicts_with = "remote_exe")]
    pub stage: bool,
    /// With --stage: take every host's binary from this folder of release
    /// binaries (`scripts/dist` makes dist/), e.g. --dist dist
    #[arg(long, value_name = "DIR", requires = "stage")]
    pub dist: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A results folder: results/<UTC time>-<scenario>/ with its run.json.
    /// A run still going is rendered as far as it got, and says so, e.g.
    /// `fabricbench report results/2026-12-01T17-57-47.056Z-soak`
    pub dir: PathBuf,
    /// Do not print the summary
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline results folder (or its run.json)
    pub base: PathBuf,
    /// The new results folder (or its run.json)
    pub new: PathBuf,
    /// How much worse than the baseline still passes, per kind of number:
    /// gbps (aggregate, receiver and flow Gb/s), mpps (RDMA flows' message
    /// rate), latency (min, typical, p99, p99.9: higher is worse), cpu
    /// (worker CPU: higher is worse). `5%` sets every kind;
    /// `gbps=5%,latency=10%` the named ones, the others keep their default
    #[arg(long, default_value = "gbps=5%,mpps=5%,latency=10%,cpu=20%", value_name = "TOLERANCE")]
    pub tolerance: Tolerances,
}

/// Where a run's results folder goes (`run`, `pair`).
#[derive(Args, Debug, Clone)]
pub struct SaveArgs {
    /// Folder under which each run's results folder is made
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Do not write a results folder
    #[arg(long)]
    pub no_save: bool,
}
