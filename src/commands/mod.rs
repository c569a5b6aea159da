//! What each subcommand does, from parsed flags to an outcome; main.rs only
//! dispatches here. Every way a command ends badly is one [`Failure`], and
//! [`Failure::exit`] is the one place that maps it to an ending of the exit
//! code table (`crate::exit`).

mod estimate;
mod gate;
mod gpus;
mod hosts;
mod launching;
mod manual;
mod output;
mod pair;
mod pair_scenario;
mod results;
mod run;
mod watch;

use std::fmt;

use crate::cli::Command;
use crate::exit::Exit;
use crate::report::terminal::stdout::StdoutError;
use crate::run::signals::Stop;
use crate::worker::Starter;

/// How a command ended badly.
#[derive(Debug)]
pub enum Failure {
    /// Bad input: the message names the file, line and field, flag or host.
    BadInput(anyhow::Error),
    /// The run started but did not complete (a rank died, a stream broke,
    /// a signal); what was measured is kept.
    RunFailed(anyhow::Error),
    /// The run completed, but a check failed or could not be evaluated
    /// (`compare`: a regression).
    CheckFailed(String),
    /// The run completed, but a phase's numbers are not a valid measurement
    /// (a flow failed, a window came out short, the flows did not start
    /// together); its checks are unknown.
    Degraded(String),
    /// A signal stopped the run; what was measured is kept.
    Stopped(Stop),
}

impl Failure {
    pub fn bad_input(e: impl Into<anyhow::Error>) -> Failure {
        Failure::BadInput(e.into())
    }

    pub fn run_failed(e: impl Into<anyhow::Error>) -> Failure {
        Failure::RunFailed(e.into())
    }

    /// The row of the exit code table this failure ends the process with.
    pub fn exit(&self) -> Exit {
        match self {
            Failure::RunFailed(_) => Exit::RunFailed,
            Failure::BadInput(_) => Exit::BadInput,
            Failure::CheckFailed(_) => Exit::CheckFailed,
            Failure::Degraded(_) => Exit::Degraded,
            Failure::Stopped(stop) => stop.exit(),
        }
    }
}

/// stdout that cannot be written (a closed reader is not this: see
/// `report::terminal::stdout`).
impl From<StdoutError> for Failure {
    fn from(e: StdoutError) -> Failure {
        Failure::RunFailed(e.into())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::BadInput(e) | Failure::RunFailed(e) => write!(f, "{e:#}"),
            Failure::CheckFailed(message) | Failure::Degraded(message) => f.write_str(message),
            Failure::Stopped(stop) => write!(f, "stopped by {stop}; what was measured is kept"),
        }
    }
}

/// Runs one subcommand to its end.
pub fn dispatch(command: Command) -> Result<(), Failure> {
    match command {
        Command::Worker(args) => {
            let starter = match (args.slurm, args.mpi) {
                (true, _) => Starter::Srun,
                (_, true) => Starter::Mpirun,
                _ => Starter::Launcher,
            };
            crate::worker::main(args.rank, starter).map_err(Failure::RunFailed)
        }
        Command::Plan(args) => run::plan(&args),
        Command::Run(args) => run::run(&args),
        Command::Watch(args) => watch::watch(&args),
        Command::Pair(args) => pair::pair(&args),
        Command::Hosts(args) => hosts::hosts(&args),
        Command::Probe(args) => hosts::probe(&args),
        Command::Facts(args) => hosts::facts(&args),
        Command::Gpus(args) => gpus::gpus(&args),
        Command::Report(args) => results::report(&args),
        Command::Compare(args) => results::compare(&args),
        Command::Completions(args) => manual::completions(&args),
        Command::Man => manual::man(),
    }
}

/// The one async runtime a command drives the launcher and rank 0 with: two
/// threads are plenty, the data path runs on threads of its own.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(Failure::run_failed)
}
