//! perftest's figures and tables: bandwidth from completion times, latency
//! from the times between successive posts, printed as perftest prints them.

use std::time::Instant;

use super::exchange::{BwReport, Keys};

pub const BAR: &str = "---------------------------------------------------------------------------------------";
const MIB: f64 = (1u64 << 20) as f64;
/// Bytes in a gigabit, perftest's `--report_gbits` unit.
const GBIT: f64 = 125_000_000.0;

/// Bandwidth of `stamps.len()` messages of `size` bytes completed at
/// `stamps` after a start at `start`: the average over the run and the
/// best over any `depth` consecutive completions (a full send queue's worth).
pub fn bw_report(size: usize, depth: u32, start: Instant, stamps: &[Instant]) -> BwReport {
    let n = stamps.len();
    let Some(&end) = stamps.last() else { return BwReport { size: size as u64, ..BwReport::default() } };
    let secs = end.duration_since(start).as_secs_f64().max(1e-9);
    let avg = n as f64 * size as f64 / secs / MIB;
    let w = (depth as usize).clamp(1, n);
    let mut peak = avg;
    for pair in stamps.windows(w + 1).step_by(w) {
        let dt = pair[w].duration_since(pair[0]).as_secs_f64();
        if dt > 0.0 {
            peak = peak.max(w as f64 * size as f64 / dt / MIB);
        }
    }
    BwReport { size: size as u64, iters: n as u64, peak_mbs: peak, avg_mbs: avg, msg_rate_mpps: n as f64 / secs / 1e6 }
}

pub fn print_bw_header(gbits: bool) {
    let unit = if gbits { "Gb/sec" } else { "MB/sec" };
    println!(" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]");
}

pub fn print_bw(r: &BwReport, gbits: bool) {
    let scale = if gbits { MIB / GBIT } else { 1.0 };
    println!(
        " {:<10} {:<10}       {:<7.2}            {:<7.2}\t\t   {:.6}",
        r.size,
        r.iters,
        r.peak_mbs * scale,
        r.avg_mbs * scale,
        r.msg_rate_mpps
    );
}

/// One-way latencies (µs) from the post times of a ping-pong: each gap
/// between successive posts is one round trip.
pub fn half_round_trips(posts: &[Instant]) -> Vec<f64> {
    posts.windows(2).map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1e6 / 2.0).collect()
}

/// min, max, typical (median), average, deviation, 99% and 99.9% (µs).
pub fn lat_figures(mut v: Vec<f64>) -> [f64; 7] {
    if v.is_empty() {
        return [0.0; 7];
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let avg = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
    let pct = |p: f64| v[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    [v[0], v[n - 1], v[n / 2], avg, var.sqrt(), pct(0.99), pct(0.999)]
}

pub fn print_lat_header() {
    println!(
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
    );
}

pub fn print_lat(size: usize, iters: u32, samples: Vec<f64>) {
    let [min, max, typ, avg, dev, p99, p999] = lat_figures(samples);
    println!(
        " {size:<7} {iters:<10}   {min:<7.2}        {max:<7.2}      {typ:<7.2}            {avg:<7.2}          {dev:<7.2}         {p99:<7.2}                {p999:<7.2}"
    );
}

pub fn print_addresses(me: &Keys, rem: &Keys) {
    for (what, p) in [("local", me), ("remote", rem)] {
        println!(
            " {what} address: LID {:#06x} QPN {:#06x} PSN {:#08x} OUT {:#04x} RKey {:#010x} VAddr {:#018x}",
            p.lid, p.qpn, p.psn, p.out_reads, p.rkey, p.vaddr
        );
        let g: Vec<String> = p.gid.iter().map(|b| format!("{b:02}")).collect();
        println!(" GID: {}", g.join(":"));
    }
    println!("{BAR}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn latency_figures() {
        let [min, max, typ, avg, _, p99, _] = lat_figures(vec![3.0, 1.0, 2.0, 100.0]);
        assert_eq!((min, max, typ, avg, p99), (1.0, 100.0, 3.0, 26.5, 100.0));
        let t0 = Instant::now();
        let posts = [t0, t0 + Duration::from_micros(10), t0 + Duration::from_micros(30)];
        let h = half_round_trips(&posts);
        assert!((h[0] - 5.0).abs() < 1e-6 && (h[1] - 10.0).abs() < 1e-6, "{h:?}");
    }

    #[test]
    fn bandwidth_figures() {
        let t0 = Instant::now();
        let stamps: Vec<Instant> = (1..=4).map(|i| t0 + Duration::from_secs(i)).collect();
        let r = bw_report(1 << 20, 1, t0, &stamps);
        assert_eq!((r.size, r.iters), (1 << 20, 4));
        assert!((r.avg_mbs - 1.0).abs() < 1e-9 && (r.peak_mbs - 1.0).abs() < 1e-9);
        assert!((r.msg_rate_mpps - 1e-6).abs() < 1e-12);
        assert_eq!(bw_report(64, 8, t0, &[]).iters, 0);
    }
}
