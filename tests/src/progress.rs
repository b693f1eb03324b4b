//! Progress of a long benchmark: one line per step with the time taken so
//! far and an estimate of what is left, so a run of many minutes is never
//! silent. Lines rather than a redrawn bar: the output is often a log file,
//! and a line per step reads the same on a terminal.

use std::time::{Duration, Instant};

pub struct Progress {
    what: &'static str,
    total: usize,
    done: usize,
    start: Instant,
}

impl Progress {
    /// A run of `total` steps, named `what` in each line.
    pub fn new(what: &'static str, total: usize) -> Self {
        Self { what, total: total.max(1), done: 0, start: Instant::now() }
    }

    /// Announces the next step, `label`, and returns its line (also printed).
    pub fn step(&mut self, label: &str) -> String {
        let line = self.line(label, self.start.elapsed());
        println!("{line}");
        self.done += 1;
        line
    }

    fn line(&self, label: &str, elapsed: Duration) -> String {
        let n = (self.done + 1).min(self.total);
        let left = match self.done {
            0 => "time left unknown yet".to_string(),
            d => {
                let per_step = elapsed.as_secs_f64() / d as f64;
                format!("about {} left", clock(per_step * self.total.saturating_sub(d) as f64))
            }
        };
        format!("[{} {n}/{}] {label} ({} so far, {left})", self.what, self.total, clock(elapsed.as_secs_f64()))
    }
}

/// `1h02m`, `3m05s` or `42s`.
fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_counts_the_step_and_estimates_from_the_steps_done() {
        let mut p = Progress::new("perftest", 4);
        assert_eq!(p.line("first", Duration::ZERO), "[perftest 1/4] first (0s so far, time left unknown yet)");
        p.done = 1;
        assert_eq!(p.line("second", Duration::from_secs(90)), "[perftest 2/4] second (1m30s so far, about 4m30s left)");
        p.done = 3;
        assert_eq!(
            p.line("last", Duration::from_secs(3 * 1300)),
            "[perftest 4/4] last (1h05m so far, about 21m40s left)"
        );
    }
}
