//! perftest's figures and lines: bandwidth from completion times, latency
//! from the times between successive posts, each formatted as perftest 4.5
//! prints it (its `REPORT_FMT*`, `BASIC_ADDR_FMT` ... formats) and as
//! `--out_json` writes it.

use std::time::Instant;

use super::exchange::{BwReport, Keys};

pub const BAR: &str = "---------------------------------------------------------------------------------------";
const MIB: f64 = (1u64 << 20) as f64;
/// Bytes in a gigabit, perftest's `--report_gbits` unit.
const GBIT: f64 = 125_000_000.0;
/// The slowest samples perftest leaves out of a latency run (`LAT_MEASURE_TAIL`).
const LAT_TAIL: usize = 2;

/// C's `%#0Nx`: `0x` and hex digits zero-padded to `width` characters in
/// all, except that zero has no `0x` (and is all zeros).
fn c_hex(v: u64, width: usize) -> String {
    if v == 0 { format!("{:0width$}", 0) } else { format!("{:#0width$x}", v) }
}

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

/// A timed run's figures (`-D`, `--run_infinitely`): no peak, as perftest.
pub fn bw_report_timed(size: u64, count: u64, secs: f64) -> BwReport {
    let secs = secs.max(1e-9);
    BwReport {
        size,
        iters: count,
        peak_mbs: 0.0,
        avg_mbs: count as f64 * size as f64 / secs / MIB,
        msg_rate_mpps: count as f64 / secs / 1e6,
    }
}

/// A duplex run's line (`print_full_bw_report(my, rem)`): our size and
/// count, both directions' peak, average and message rate added.
pub fn duplex_sum(mine: &BwReport, theirs: &BwReport) -> BwReport {
    BwReport {
        peak_mbs: mine.peak_mbs + theirs.peak_mbs,
        avg_mbs: mine.avg_mbs + theirs.avg_mbs,
        msg_rate_mpps: mine.msg_rate_mpps + theirs.msg_rate_mpps,
        ..*mine
    }
}

pub fn bw_header(gbits: bool) -> String {
    let unit = if gbits { "Gb/sec" } else { "MB/sec" };
    format!(" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]")
}

/// Peak and average in the report's unit, and whether perftest shows them
/// with six decimals (Gb/s below 0.1).
fn bw_in_unit(r: &BwReport, gbits: bool) -> (f64, f64, bool) {
    let scale = if gbits { MIB / GBIT } else { 1.0 };
    let (peak, avg) = (r.peak_mbs * scale, r.avg_mbs * scale);
    (peak, avg, gbits && avg < 0.1)
}

/// One result line (no newline).
pub fn bw_line(r: &BwReport, gbits: bool) -> String {
    let (peak, avg, fine) = bw_in_unit(r, gbits);
    if fine {
        format!(
            " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}",
            r.size, r.iters, peak, avg, r.msg_rate_mpps
        )
    } else {
        format!(
            " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
            r.size, r.iters, peak, avg, r.msg_rate_mpps
        )
    }
}

/// `--out_json`'s `results` object of a bandwidth run.
pub fn bw_json(r: &BwReport, gbits: bool) -> String {
    let (peak, avg, fine) = bw_in_unit(r, gbits);
    let d = if fine { 6 } else { 2 };
    format!(
        "results: {{\nMsgSize: {},\nn_iterations: {},\nBW_peak: {peak:.d$},\nBW_average: {avg:.d$},\nMsgRate: {:.6},\n}},\n",
        r.size, r.iters, r.msg_rate_mpps
    )
}

/// The times (µs) between successive posts of a latency run, each divided
/// by `per_sample`: 2 for a ping-pong (half the round trip), 1 for READs
/// and atomics (the whole of it).
pub fn post_gaps(posts: &[Instant], per_sample: f64) -> Vec<f64> {
    posts.windows(2).map(|w| w[1].duration_since(w[0]).as_secs_f64() * 1e6 / per_sample).collect()
}

/// perftest's latency figures from the gaps: min, max, typical (median),
/// average, deviation, 99% and 99.9% (µs), over the samples left once the
/// slowest [`LAT_TAIL`] are set aside (the max is the slowest kept but one
/// of those, as perftest reads it).
pub fn lat_figures(mut v: Vec<f64>) -> [f64; 7] {
    v.sort_by(f64::total_cmp);
    let total = v.len();
    if total <= LAT_TAIL {
        return [0.0; 7];
    }
    let n = total - LAT_TAIL;
    let median = if (n - 1) % 2 == 1 { (v[n / 2] + v[n / 2 - 1]) / 2.0 } else { v[n / 2] };
    let avg = v[..n].iter().sum::<f64>() / n as f64;
    // perftest squares whole microseconds (it keeps the differences in ints).
    let var = v[..n].iter().map(|x| ((avg - x).trunc()).powi(2)).sum::<f64>() / n as f64;
    let at = |p: f64| v[((n as f64 * p).ceil() as usize).min(total - 1)];
    [v[0], v[n], median, avg, var.sqrt(), at(0.99), at(0.999)]
}

pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
pub const LAT_DURATION_HEADER: &str = " #bytes        #iterations       t_avg[usec]    tps average";

pub fn lat_line(size: u64, iters: u64, f: &[f64; 7]) -> String {
    let [min, max, typ, avg, dev, p99, p999] = f;
    format!(
        " {size:<7} {iters}          {min:<7.2}        {max:<7.2}      {typ:<7.2}  \t       {avg:<7.2}     \t{dev:<7.2}\t\t{p99:<7.2} \t\t{p999:<7.2}"
    )
}

pub fn lat_json(size: u64, iters: u64, f: &[f64; 7]) -> String {
    let [min, max, typ, avg, dev, p99, p999] = f;
    format!(
        "results: {{\nMsgSize: {size},\nn_iterations: {iters},\nt_min: {min:.2},\nt_max: {max:.2},\nt_typical: {typ:.2},\nt_avg: {avg:.2},\nt_stdev: {dev:.2},\npercentile_99: {p99:.2},\npercentile_99.9: {p999:.2},\n}},\n"
    )
}

/// A timed latency run: the average time per operation (µs, divided as
/// [`post_gaps`]) and operations per second.
pub fn lat_duration_figures(count: u64, secs: f64, per_sample: f64) -> (f64, f64) {
    let count = count.max(1) as f64;
    (secs * 1e6 / per_sample / count, count / secs.max(1e-9))
}

pub fn lat_duration_line(size: u64, iters: u64, avg: f64, tps: f64) -> String {
    format!(" {size:<7}       {iters}            {avg:<7.2}        {tps:<7.2}")
}

pub fn lat_duration_json(size: u64, iters: u64, avg: f64, tps: f64) -> String {
    format!("results: {{\nMsgSize: {size},\nn_iterations: {iters},\nt_avg: {avg:.2},\ntps_average: {tps:.2},\n}},\n")
}

/// One side's address lines: `local` or `remote`; the READ's outstanding
/// reads and the RDMA keys only for the tests that print them; the GID
/// labelled `gid_label` (`GID`, or `MGID` for a multicast group).
pub fn address_lines(side: &str, k: &Keys, out_reads: bool, rdma_keys: bool, gid_label: &str) -> String {
    let mut s = format!(
        " {side} address: LID {} QPN {} PSN {}",
        c_hex(u64::from(k.lid), 4),
        c_hex(u64::from(k.qpn), 6),
        c_hex(u64::from(k.psn), 6)
    );
    if out_reads {
        s += &format!(" OUT {}", c_hex(u64::from(k.out_reads), 4));
    }
    if rdma_keys {
        s += &format!(" RKey {} VAddr {}", c_hex(u64::from(k.rkey), 8), c_hex(k.vaddr, 16));
    }
    let g: Vec<String> = k.gid.iter().map(|b| format!("{b:02}")).collect();
    s += &format!("\n {gid_label}: {}\n", g.join(":"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn c_style_hex() {
        assert_eq!(c_hex(0, 4), "0000");
        assert_eq!(c_hex(0x11, 6), "0x0011");
        assert_eq!(c_hex(0xa7ec6, 6), "0xa7ec6");
        assert_eq!(c_hex(0x539, 8), "0x000539");
        assert_eq!(c_hex(0x563138996000, 16), "0x00563138996000");
    }

    #[test]
    fn latency_figures_as_perftest() {
        // 10 gaps: the two slowest set aside, 8 kept.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let [min, max, typ, avg, _, p99, p999] = lat_figures(v);
        assert_eq!((min, max, p99, p999), (1.0, 9.0, 9.0, 9.0));
        assert_eq!(typ, 4.5);
        assert_eq!(avg, 4.5);
        assert_eq!(lat_figures(vec![1.0, 2.0]), [0.0; 7]);
        let t0 = Instant::now();
        let posts = [t0, t0 + Duration::from_micros(10), t0 + Duration::from_micros(30)];
        let h = post_gaps(&posts, 2.0);
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

    #[test]
    fn duplex_adds_both_directions() {
        let mine = BwReport { size: 65536, iters: 100, peak_mbs: 10.0, avg_mbs: 8.0, msg_rate_mpps: 0.000128 };
        let theirs = BwReport { size: 65536, iters: 100, peak_mbs: 9.18, avg_mbs: 7.34, msg_rate_mpps: 0.000118 };
        let sum = duplex_sum(&mine, &theirs);
        assert_eq!((sum.size, sum.iters), (65536, 100));
        assert!(
            bw_line(&sum, false).starts_with(" 65536      100              19.18              15.34  \t\t   0.000246")
        );
    }

    #[test]
    fn gbits_below_a_tenth_get_six_decimals() {
        let r = BwReport { size: 8, iters: 100, peak_mbs: 0.07, avg_mbs: 0.07, msg_rate_mpps: 0.008573 };
        assert_eq!(bw_line(&r, true), " 8          100           0.000587            0.000587            0.008573");
        assert!(
            bw_line(&r, false).starts_with(" 8          100              0.07               0.07   \t\t   0.008573")
        );
    }
}
