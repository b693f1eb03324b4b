//! What the benchmarks share: reading figures out of tool output, medians,
//! and writing the tables under `target/bench/`.

use std::path::PathBuf;

/// The number right after `word` (`"sent 123 frames"`, `"sent"` → 123).
pub fn number_after(text: &str, word: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    it.find(|w| *w == word)?;
    it.next()?.parse().ok()
}

/// The number right before `unit` (`"12.5 usec/iter"`, `"usec/iter"` → 12.5).
pub fn number_before(text: &str, unit: &str) -> Option<f64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words.windows(2).find(|w| w[1] == unit).and_then(|w| w[0].parse().ok())
}

/// rdma-core's pingpong result: `N iters in S seconds = U usec/iter`.
pub fn usec_per_iter(out: &str) -> Option<f64> {
    number_before(out, "usec/iter")
}

/// The median (the upper one for an even count); NaN for none.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Writes `target/bench/<name>.md` and `.csv`; returns the directory.
pub fn write_tables(name: &str, md: &str, csv: &str) -> std::io::Result<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("{name}.md")), md)?;
    std::fs::write(dir.join(format!("{name}.csv")), csv)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_from_tool_output() {
        let out = "8192000 bytes in 0.02 seconds = 3276.80 Mbit/sec\n1000 iters in 0.02 seconds = 20.00 usec/iter\n";
        assert_eq!(usec_per_iter(out), Some(20.0));
        assert_eq!(number_before(out, "Mbit/sec"), Some(3276.8));
        assert_eq!(number_after("netbench: sent 123 frames", "sent"), Some(123.0));
        assert_eq!(number_after("nothing here", "sent"), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert!(median(&mut []).is_nan());
    }
}
