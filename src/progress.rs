//! Progress while a run works: indicatif bars on a terminal, plain lines
//! when stderr is a file or pipe, nothing with --quiet / --no-progress.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::control::wire::Window;
use crate::units::number;

pub enum Progress {
    Off,
    Lines,
    Bars { multi: MultiProgress, ranks: ProgressBar, phase: Option<ProgressBar> },
}

impl Progress {
    pub fn new(enabled: bool, total_ranks: usize) -> Progress {
        if !enabled {
            return Progress::Off;
        }
        if !std::io::stderr().is_terminal() {
            return Progress::Lines;
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let ranks = multi.add(ProgressBar::new(total_ranks as u64));
        ranks.set_style(
            ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} ranks ready {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        ranks.set_prefix("launch");
        ranks.enable_steady_tick(Duration::from_millis(200));
        Progress::Bars { multi, ranks, phase: None }
    }

    pub fn joined(&mut self, rank: usize, host: &str, joined: usize, total: usize) {
        match self {
            Progress::Off => {}
            Progress::Lines => crate::diag!("fabricbench: rank {rank} ({host}) ready, {joined}/{total}"),
            Progress::Bars { ranks, .. } => {
                ranks.set_position(joined as u64);
                if joined == total {
                    ranks.finish_with_message("(all connected)");
                }
            }
        }
    }

    pub fn phase_started(&mut self, index: usize, name: &str, window: Window) {
        let intervals = u64::from(window.boundaries().saturating_sub(1));
        match self {
            Progress::Off => {}
            Progress::Lines => crate::diag!(
                "fabricbench: phase {index} `{name}` started: warm-up {}, window {} in {intervals} intervals",
                humantime::format_duration(window.warmup),
                humantime::format_duration(window.duration)
            ),
            Progress::Bars { multi, phase, .. } => {
                let bar = multi.add(ProgressBar::new(intervals));
                bar.set_style(
                    ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} intervals {msg}")
                        .expect("valid template")
                        .progress_chars("=> "),
                );
                bar.set_prefix(format!("phase {index}"));
                bar.set_message("warming up");
                bar.enable_steady_tick(Duration::from_millis(200));
                *phase = Some(bar);
            }
        }
    }

    pub fn interval(&mut self, index: usize, interval: u32, gbps: f64) {
        match self {
            Progress::Off => {}
            Progress::Lines => {
                crate::diag!("fabricbench: phase {index} interval {interval}: {} Gb/s aggregate", number(gbps, 3))
            }
            Progress::Bars { phase: Some(bar), .. } => {
                bar.set_position(u64::from(interval));
                bar.set_message(format!("{} Gb/s aggregate", number(gbps, 3)));
            }
            Progress::Bars { .. } => {}
        }
    }

    pub fn phase_done(&mut self, index: usize, gbps: f64) {
        match self {
            Progress::Off => {}
            Progress::Lines => crate::diag!("fabricbench: phase {index} done: {} Gb/s aggregate", number(gbps, 3)),
            Progress::Bars { phase, .. } => {
                if let Some(bar) = phase.take() {
                    bar.finish_with_message(format!("done: {} Gb/s aggregate", number(gbps, 3)));
                }
            }
        }
    }

    /// A line that must not be torn by the bars.
    pub fn note(&self, line: &str) {
        match self {
            Progress::Bars { multi, .. } => {
                let _ = multi.println(line);
            }
            _ => crate::diag!("{line}"),
        }
    }

    pub fn finish(&mut self) {
        if let Progress::Bars { ranks, phase, .. } = self {
            ranks.abandon();
            if let Some(bar) = phase.take() {
                bar.abandon();
            }
        }
    }
}
