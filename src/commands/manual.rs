//! `fabricbench completions SHELL` and `fabricbench man`: what the .deb and
//! .rpm install (scripts/dist), generated from the clap definitions so they
//! never drift from the flags.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionShell, CompletionsArgs};
use crate::commands::Failure;
use crate::report::terminal::stdout::{self, StdoutError};

pub fn completions(args: &CompletionsArgs) -> Result<(), Failure> {
    let shell = match args.shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "fabricbench", &mut out);
    Ok(stdout::write(&out).map_err(StdoutError::from)?)
}

/// The man page in roff, for `man -l -` or /usr/share/man/man1/fabricbench.1.
pub fn man() -> Result<(), Failure> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out).map_err(Failure::run_failed)?;
    Ok(stdout::write(&out).map_err(StdoutError::from)?)
}
