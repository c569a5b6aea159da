//! The one binary: parse the command line, set up logging, dispatch.

use std::process::ExitCode;

use clap::Parser;

use fabricbench::cli::{Cli, Command};
use fabricbench::commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(matches!(cli.command, Command::Worker(_)));
    if let Err(e) = fabricbench::fdlimit::raise() {
        tracing::warn!("cannot raise the open-files limit: {e}");
    }
    if let Err(e) = fabricbench::transport::rdma::raise_memlock_limit() {
        tracing::warn!("cannot raise the locked-memory limit: {e}");
    }
    match commands::dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            fabricbench::diag!("error: {failure}");
            ExitCode::from(failure.exit().code())
        }
    }
}

/// Log lines go to stderr; a worker's only warn and above (the launcher
/// forwards them), the launcher's also fabricbench's info. RUST_LOG overrides.
fn init_logging(worker: bool) {
    let default_level = if worker { "warn" } else { "warn,fabricbench=info" };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        // Once its launcher is gone a worker's stderr is a closed pipe.
        .with_writer(|| fabricbench::diag::Stderr)
        // Workers write to pipes the launcher forwards: colour codes only on a terminal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
}
