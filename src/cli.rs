//! Command-line definitions: flags become typed options here, nothing runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

Results go to results/<UTC time>-<scenario name>/ (run.json, flows.csv,
intervals.csv, ranks.csv, summary.md). Bandwidth is in Gb/s = 1e9 bit/s.";

#[derive(Debug, Parser)]
#[command(name = "fabricbench", version, about = "Benchmark RDMA and TCP fabrics across many hosts at once", after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario on the hosts of a hostfile and report the results
    #[command(after_help = EXAMPLES)]
    Run(RunArgs),
    /// Print the flows a scenario makes on a hostfile, without running
    Plan(Inputs),
    /// Check every host of a hostfile over ssh: reachable, same fabricbench version, clock offset
    Hosts(HostsArgs),
    /// The per-host worker (started by the launcher; reads its job on stdin)
    #[command(hide = true)]
    Worker(WorkerArgs),
}

/// Shown in `ps` so operators can tell ranks apart; the job itself comes on stdin.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[arg(long)]
    pub rank: Option<usize>,
    /// A task of the launcher's srun step: the spec is the step's broadcast, the rank SLURM_PROCID
    #[arg(long, conflicts_with = "rank")]
    pub slurm: bool,
}

#[derive(Debug, Args)]
pub struct Inputs {
    /// Scenario file (TOML), e.g. scenarios/fan-in.toml
    pub scenario: PathBuf,
    /// Hostfile: one host per line (plain, `host slots=N`, `host:N`, `node[01-04]`).
    /// Inside a Slurm allocation the default is its nodes (SLURM_JOB_NODELIST)
    #[arg(short = 'H', long = "hostfile")]
    pub hostfile: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub inputs: Inputs,
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
    #[arg(long, value_name = "K", conflicts_with = "stage", value_parser = clap::value_parser!(u16).range(1..))]
    pub tree_radix: Option<u16>,
    /// An extra argument for srun, before fabricbench's own (repeat it), e.g.
    /// --srun-arg=--cpu-bind=none --srun-arg=--overlap
    #[arg(long = "srun-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub srun_args: Vec<String>,
    /// TCP port of rank 0's coordinator (0 = any free port)
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Folder under which each run's results folder is made
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Do not write a results folder
    #[arg(long)]
    pub no_save: bool,
    /// Write the full result (run.json schema) to FILE, `-` for stdout
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Write one CSV row per flow to FILE, `-` for stdout
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Write the summary tables as Markdown to FILE, `-` for stdout
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Print nothing but errors (and exports)
    #[arg(short, long)]
    pub quiet: bool,
    /// No progress bars or progress lines
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LauncherKind {
    /// local if every host is an address of this machine, else ssh
    Auto,
    /// One local process per hostfile line, bound to that line's address (127.0.0.x)
    Local,
    /// One worker per host over OpenSSH (honours ~/.ssh/config)
    Ssh,
    /// Inside a Slurm allocation: one srun step, one task per node
    Slurm,
}

#[derive(Debug, Args)]
pub struct HostsArgs {
    /// Hostfile to check
    #[arg(short = 'H', long = "hostfile")]
    pub hostfile: PathBuf,
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
    /// or differs (by checksum) and run that copy
    #[arg(long, conflicts_with = "remote_exe")]
    pub stage: bool,
}

impl RunArgs {
    /// Whether some export claims stdout, so the summary must go elsewhere.
    pub fn stdout_taken(&self) -> bool {
        [&self.export_json, &self.export_csv, &self.export_markdown]
            .iter()
            .any(|e| e.as_deref().is_some_and(|p| p.as_os_str() == "-"))
    }
}
