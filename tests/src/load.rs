//! Whether the machine was idle while a benchmark ran: the CPU time the
//! rest of the machine used, i.e. all busy time (`/proc/stat`) minus what
//! this process and its descendants (the QEMUs, the tools) used
//! (`/proc/<pid>/stat`). Our own guests may load every core; anything else
//! that does makes the figures incomparable, and the report says so.

use std::collections::HashMap;
use std::fmt;

/// Foreign CPU use, in cores averaged over the run, above which a run is
/// flagged: a quarter of a core is already more than shell noise.
const BUSY_CORES: f64 = 0.25;

/// CPU time counters at one moment, in clock ticks.
#[derive(Clone, Copy)]
struct Sample {
    busy: u64,
    total: u64,
    ours: u64,
}

/// Started when a benchmark starts; asked at the end.
pub struct Watch {
    start: Option<Sample>,
    cores: usize,
}

/// The verdict over the run.
pub struct Load {
    /// Cores' worth of CPU the rest of the machine used, on average.
    pub foreign_cores: f64,
    pub cores: usize,
}

impl Load {
    pub fn busy(&self) -> bool {
        self.foreign_cores > BUSY_CORES
    }
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.busy() {
            write!(
                f,
                "**MACHINE BUSY**: other processes used {:.2} of {} cores during the run; \
                 these figures are not comparable with an idle run's. Rerun on an idle machine.",
                self.foreign_cores, self.cores
            )
        } else {
            write!(
                f,
                "Machine idle: other processes used {:.2} of {} cores during the run.",
                self.foreign_cores, self.cores
            )
        }
    }
}

impl Watch {
    pub fn start() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Watch { start: sample(), cores }
    }

    /// The load since [`Watch::start`]; `None` where `/proc` cannot tell.
    pub fn load(&self) -> Option<Load> {
        let (a, b) = (self.start?, sample()?);
        let total = b.total.checked_sub(a.total).filter(|t| *t > 0)?;
        let busy = b.busy.saturating_sub(a.busy);
        let foreign = busy.saturating_sub(b.ours.saturating_sub(a.ours));
        Some(Load { foreign_cores: foreign as f64 / total as f64 * self.cores as f64, cores: self.cores })
    }

    /// One line for a report: the verdict, or why there is none.
    pub fn note(&self) -> String {
        self.load().map_or_else(|| "Machine load not measured (no /proc).".into(), |l| l.to_string())
    }
}

fn sample() -> Option<Sample> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let field = |i: usize| cpu.get(i).copied().unwrap_or(0);
    let busy = field(0) + field(1) + field(2) + field(5) + field(6) + field(7);
    let total = busy + field(3) + field(4);
    Some(Sample { busy, total, ours: tree_ticks(std::process::id()) })
}

/// CPU ticks of `root` and every living descendant, with what their reaped
/// children used (a reaped child's time moves into its parent's `cutime`).
fn tree_ticks(root: u32) -> u64 {
    let mut procs: HashMap<u32, (u32, u64)> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if let Some(p) = proc_stat(pid) {
            procs.insert(pid, p);
        }
    }
    let mut sum = 0;
    for (&pid, &(_, ticks)) in &procs {
        // Walk up to the root or to init; a process outside our tree stops there.
        let mut at = pid;
        for _ in 0..64 {
            if at == root {
                sum += ticks;
                break;
            }
            match procs.get(&at) {
                Some(&(ppid, _)) if ppid != 0 && ppid != at => at = ppid,
                _ => break,
            }
        }
    }
    sum
}

/// `(ppid, utime + stime + cutime + cstime)` from `/proc/<pid>/stat`.
fn proc_stat(pid: u32) -> Option<(u32, u64)> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_stat(s: &str) -> Option<(u32, u64)> {
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
    let num = |field: usize| f.get(field - 3).and_then(|x| x.parse::<u64>().ok());
    let ppid = u32::try_from(num(4)?).ok()?;
    Some((ppid, num(14)? + num(15)? + num(16)? + num(17)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_work_is_not_foreign_load() {
        let w = Watch::start();
        // Burn CPU in this process: it must count as ours.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let load = w.load().expect("/proc is readable on Linux");
        assert!(load.foreign_cores >= 0.0 && load.foreign_cores <= load.cores as f64, "{}", load.foreign_cores);
        assert!(tree_ticks(std::process::id()) > 0, "this process's own ticks are counted");
    }

    #[test]
    fn stat_lines_parse_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (qemu (x) y) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 5 0 900";
        assert_eq!(parse_stat(line), Some((17, 250 + 50 + 7 + 3)));
        assert_eq!(parse_stat("4242 (cut"), None);
        let me = proc_stat(std::process::id()).expect("own stat");
        assert_eq!(me.0, std::os::unix::process::parent_id());
    }
}
