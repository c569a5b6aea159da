//! How fabricbench ends, and the exit code of each ending: the one table
//! that `--help`, docs/RESULTS.md and every command's failure use. It is a
//! leaf so that `cli` (which shows it) and `commands` (which exits with it)
//! read the same rows.

use nix::sys::signal::Signal;

/// One way a command ends, with its exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The run completed and every check passed.
    Completed,
    /// The run started but did not complete; what was measured is kept.
    RunFailed,
    /// Bad input: nothing ran.
    BadInput,
    /// A check failed or could not be evaluated, or a host failed the
    /// node gate (`compare`: a regression; `hosts`, `gpus`: a host or GPU
    /// failed its checks).
    CheckFailed,
    /// The run completed but a phase is not a valid measurement.
    Degraded,
    /// A signal stopped the run; what was measured is kept.
    Stopped(Signal),
}

/// The rows of the table, in order; the `Stopped` row stands for every
/// stop signal, and shows its code as `128 + N`.
pub const TABLE: [Exit; 6] = [
    Exit::Completed,
    Exit::RunFailed,
    Exit::BadInput,
    Exit::CheckFailed,
    Exit::Degraded,
    Exit::Stopped(Signal::SIGINT),
];

impl Exit {
    /// The process's exit code; a signal's is 128 + its number, as a shell
    /// reports a process a signal ended.
    pub fn code(self) -> u8 {
        match self {
            Exit::Completed => 0,
            Exit::RunFailed => 1,
            Exit::BadInput => 2,
            Exit::CheckFailed => 3,
            Exit::Degraded => 4,
            Exit::Stopped(signal) => 128 + signal as u8,
        }
    }

    /// The code as the table shows it.
    pub fn code_column(self) -> String {
        match self {
            Exit::Stopped(_) => "128 + N".to_string(),
            fixed => fixed.code().to_string(),
        }
    }

    /// What the ending means to whoever reads the code.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Completed => "the run completed and every check passed (other commands: done as asked)",
            Exit::RunFailed => {
                "it started but failed: a rank died, a stream broke, a host was lost, a save failed; every \
                 finished phase and the measured part of the running one are kept"
            }
            Exit::BadInput => {
                "bad input, nothing ran: the message names the file, line and field, the flag or the host"
            }
            Exit::CheckFailed => {
                "a check failed or could not be evaluated (UNKNOWN), or a host failed the node gate \
                 (`--gate`) and was left out; `compare`: a regression; `hosts`, `gpus`: a host or GPU failed \
                 its checks"
            }
            Exit::Degraded => {
                "the run completed but is degraded: a phase is not a valid measurement (a flow failed or \
                 moved nothing, a window came out short, the flows did not start together) and its checks \
                 are unknown"
            }
            Exit::Stopped(_) => {
                "signal N stopped it: 130 SIGINT (Ctrl-C), 143 SIGTERM (Slurm's time limit, scancel), \
                 129 SIGHUP, 131 SIGQUIT; every finished phase and the measured part of the running one are kept"
            }
        }
    }
}

/// The table as `--help` shows it: each meaning wrapped under itself, so
/// that clap (which wraps at the terminal's width) leaves it whole.
pub fn help_text() -> String {
    const CODE_WIDTH: usize = 8;
    const LINE_WIDTH: usize = 80;
    let indent = " ".repeat(2 + CODE_WIDTH);
    let mut text = String::from("Exit codes:");
    for exit in TABLE {
        let mut line = format!("  {:<CODE_WIDTH$}", exit.code_column());
        for word in exit.meaning().split(' ') {
            if line.len() + 1 + word.len() > LINE_WIDTH && line.len() > indent.len() {
                text += &format!("\n{line}");
                line = indent.clone();
            }
            line += &format!(" {word}");
        }
        text += &format!("\n{line}");
    }
    text
}

/// The table as docs/RESULTS.md carries it (a test keeps the two equal).
pub fn markdown_table() -> String {
    let rows: String = TABLE.iter().map(|exit| format!("| {} | {} |\n", exit.code_column(), exit.meaning())).collect();
    format!("| exit code | meaning |\n| --- | --- |\n{rows}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fixed_code_is_distinct_and_below_the_signals() {
        let fixed: Vec<u8> = TABLE[..5].iter().map(|e| e.code()).collect();
        assert_eq!(fixed, [0, 1, 2, 3, 4]);
        assert_eq!(TABLE.iter().map(|e| e.code_column()).next_back().as_deref(), Some("128 + N"));
    }

    #[test]
    fn help_lists_every_row() {
        let help = help_text();
        let codes: Vec<&str> = help.lines().filter(|l| !l.starts_with("    ")).skip(1).map(|l| &l[2..10]).collect();
        assert_eq!(codes, ["0       ", "1       ", "2       ", "3       ", "4       ", "128 + N "], "{help}");
        assert!(help.lines().all(|l| l.chars().count() <= 80), "{help}");
        let words = |text: &str| text.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let meanings: Vec<String> = TABLE.iter().flat_map(|e| [e.code_column(), e.meaning().to_string()]).collect();
        assert_eq!(words(&help)[2..], words(&meanings.join(" ")), "{help}");
    }
}
