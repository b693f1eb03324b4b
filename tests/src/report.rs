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

/// perftest's result row: the first line of `out` whose first two numbers
/// are `size` and `iters`, as the numbers after them (bandwidth: peak,
/// average, message rate; latency: min, max, typical, average, deviation,
/// 99%, 99.9%).
pub fn perftest_row(out: &str, size: usize, iters: u32) -> Option<Vec<f64>> {
    out.lines().find_map(|l| {
        let v: Vec<f64> = l.split_whitespace().map_while(|w| w.parse().ok()).collect();
        (v.len() >= 3 && v[0] == size as f64 && v[1] == f64::from(iters)).then(|| v[2..].to_vec())
    })
}

/// `rdma statistic show`'s counters: each word followed by a number, as
/// (name, value).
pub fn counters(out: &str) -> Vec<(String, u64)> {
    let words: Vec<&str> = out.split_whitespace().collect();
    words.windows(2).filter_map(|w| Some((w[0].to_string(), w[1].parse().ok()?))).collect()
}

/// Counter `name` of a [`counters`] list.
pub fn counter(list: &[(String, u64)], name: &str) -> Option<u64> {
    list.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
}

/// The round-trip times, in ms, of every reply line of iputils-shaped
/// `ping` output (`... icmp_seq=3 ttl=64 time=0.512 ms`), the console's
/// included.
pub fn ping_times_ms(out: &str) -> Vec<f64> {
    out.lines()
        .filter(|l| l.contains("icmp_seq="))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("time=")?.parse().ok()))
        .collect()
}

/// One span of the firmware's `perf` profile: how often it ran, the
/// milliseconds it took in all since `perf reset`, and the microseconds of
/// one run (printed with more precision than the total).
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub name: String,
    pub count: u64,
    pub ms: f64,
    pub us_each: f64,
}

impl Span {
    /// Its total in microseconds, from the finer of the two figures.
    pub fn total_us(&self) -> f64 {
        self.count as f64 * self.us_each
    }
}

/// The spans of the console's `perf` output (`NAME COUNT MS SHARE% US`
/// lines under the `span count ms share us each` header; a name may hold
/// spaces), in order; lines of another shape (the header, the counters
/// after the table) are skipped.
pub fn perf_spans(out: &str) -> Vec<Span> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let [name @ .., count, ms, share, each] = &w[..] else { return None };
            let (count, ms, us_each) = (count.parse().ok()?, ms.parse().ok()?, each.parse().ok()?);
            (!name.is_empty() && share.strip_suffix('%')?.parse::<f64>().is_ok()).then(|| Span {
                name: name.join(" "),
                count,
                ms,
                us_each,
            })
        })
        .collect()
}

/// The median (the upper one for an even count); NaN for none.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Writes `target/bench/<name>.md` (ending with `load`'s verdict on the
/// run, which is printed too) and `.csv`; returns the directory.
pub fn write_tables(name: &str, md: &str, csv: &str, load: &crate::load::Watch) -> std::io::Result<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    let note = load.note();
    println!("{note}");
    std::fs::write(dir.join(format!("{name}.md")), format!("{md}\n{note}\n"))?;
    std::fs::write(dir.join(format!("{name}.csv")), csv)?;
    Ok(dir)
}

/// Draws `target/bench/<name>.png` (see [`bar_chart`]) and says so, or says
/// why no chart was drawn: a missing chart never fails a benchmark run.
pub fn write_chart(name: &str, title: &str, y_label: &str, groups: &[String], series: &[(&str, Vec<f64>)]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../target/bench/{name}.png"));
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    match bar_chart(&path, title, y_label, &groups, series) {
        Ok(()) => println!("written: target/bench/{name}.png"),
        Err(e) => println!("no chart for {name}: {e}"),
    }
}

/// The TTF the charts' text is drawn with (Debian's fonts-dejavu-core, which
/// `make bench` installs when missing).
pub const CHART_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Draws a grouped bar chart to a PNG: one group per `groups` entry, one bar
/// per series in each. Text needs [`CHART_FONT`]; without it the chart is
/// not drawn and the error says why.
pub fn bar_chart(
    path: &std::path::Path,
    title: &str,
    y_label: &str,
    groups: &[&str],
    series: &[(&str, Vec<f64>)],
) -> Result<(), String> {
    use plotters::prelude::*;
    static FONT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    FONT.get_or_init(|| {
        let bytes = std::fs::read(CHART_FONT).map_err(|e| format!("{CHART_FONT}: {e}"))?;
        plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into_boxed_slice()))
            .map_err(|_| format!("{CHART_FONT}: not a usable font"))
    })
    .clone()?;
    let top = series.iter().flat_map(|(_, v)| v.iter().copied()).fold(0.0f64, f64::max) * 1.15;
    let root = BitMapBackend::new(path, (960, 540)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let slots = series.len() + 1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..(groups.len() * slots) as f64, 0.0..top.max(1e-9))
        .map_err(|x| e(&x))?;
    chart.configure_mesh().disable_x_mesh().x_labels(0).y_desc(y_label).draw().map_err(|x| e(&x))?;
    // Group names under the middle of each group (the float axis would put
    // its own ticks elsewhere).
    for (g, name) in groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&((g * slots) as f64 + series.len() as f64 / 2.0 + 0.5, 0.0));
        let pos = plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Top,
        );
        let style = ("sans-serif", 16).into_font().color(&BLACK).pos(pos);
        root.draw(&Text::new(name.to_string(), (px, py + 8), style)).map_err(|x| e(&x))?;
    }
    for (k, (name, values)) in series.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        chart
            .draw_series(values.iter().enumerate().map(|(g, v)| {
                let x0 = (g * slots + k) as f64 + 0.5;
                Rectangle::new([(x0, 0.0), (x0 + 0.9, *v)], color.filled())
            }))
            .map_err(|x| e(&x))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
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

    #[test]
    fn ping_times_are_read_from_reply_lines_only() {
        let out = "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n\
                   64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.512 ms\n\
                   64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=10.0 ms\n\
                   \n--- 10.0.0.2 ping statistics ---\n\
                   rtt min/avg/max/mdev = 0.512/5.256/10.000/4.744 ms\n";
        assert_eq!(ping_times_ms(out), [0.512, 10.0]);
        assert!(ping_times_ms("error: ping: connect: Network is unreachable").is_empty());
    }

    #[test]
    fn perf_spans_are_read_by_name_with_spaces() {
        let out = "502.9 ms since reset\n\
                   span                   count         ms  share   us each\n\
                   idle (hlt)                10      497.3  98.9%  49731.18\n\
                   wake: irq to loop         10        0.1   0.0%     10.38\n\
                   rx: virtio ring            0        0.0   0.0%      0.00\n\
                   timer interrupts 10\n";
        let spans = perf_spans(out);
        assert_eq!(
            spans,
            [
                Span { name: "idle (hlt)".into(), count: 10, ms: 497.3, us_each: 49731.18 },
                Span { name: "wake: irq to loop".into(), count: 10, ms: 0.1, us_each: 10.38 },
                Span { name: "rx: virtio ring".into(), count: 0, ms: 0.0, us_each: 0.0 },
            ]
        );
        assert!((spans[1].total_us() - 103.8).abs() < 1e-9);
        assert!(perf_spans("error: perf: no network device").is_empty());
    }

    #[test]
    fn bar_chart_writes_a_png_or_says_why_not() {
        let path = std::env::temp_dir().join(format!("chart-{}.png", std::process::id()));
        let series = [("Linux <-> Linux", vec![1728.4, 3096.6]), ("appliance <-> appliance", vec![350.2, 548.0])];
        let result = bar_chart(&path, "test", "usec/iter", &["2 B", "4096 B"], &series);
        if std::path::Path::new(CHART_FONT).exists() {
            result.unwrap();
            let png = std::fs::read(&path).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
            assert!(png.len() > 2000, "{} bytes", png.len());
            let _ = std::fs::remove_file(&path);
        } else {
            assert!(result.unwrap_err().contains(CHART_FONT));
        }
    }
}
