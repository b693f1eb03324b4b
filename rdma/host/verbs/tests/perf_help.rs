//! Each perf tool's `--help` against its perftest 4.5 namesake's, captured
//! from Debian's `ib_<tool> --help` into tests/fixtures/perftest/help-*.txt:
//! every option line ours prints is perftest's line for that option in
//! that program (same words, same defaults), in perftest's order; ours
//! lists only what it takes, and `-c` names only the types it runs.

use std::path::Path;
use std::process::Command;

const TOOLS: [(&str, &str); 8] = [
    ("send_bw", env!("CARGO_BIN_EXE_send_bw")),
    ("write_bw", env!("CARGO_BIN_EXE_write_bw")),
    ("read_bw", env!("CARGO_BIN_EXE_read_bw")),
    ("atomic_bw", env!("CARGO_BIN_EXE_atomic_bw")),
    ("send_lat", env!("CARGO_BIN_EXE_send_lat")),
    ("write_lat", env!("CARGO_BIN_EXE_write_lat")),
    ("read_lat", env!("CARGO_BIN_EXE_read_lat")),
    ("atomic_lat", env!("CARGO_BIN_EXE_atomic_lat")),
];

fn fixture(tool: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../../tests/fixtures/perftest/help-{tool}.txt"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The option a help line describes (`-a`, `--out_json`), if it is one.
fn option(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let opt = t.split([',', ' ', '=']).next()?;
    opt.starts_with('-').then_some(opt)
}

#[test]
fn each_tool_prints_its_own_perftest_usage() {
    let mut texts = Vec::new();
    for (tool, exe) in TOOLS {
        let out = Command::new(exe).arg("--help").output().unwrap();
        // perftest ends its help with status 1.
        assert_eq!(out.status.code(), Some(1), "{tool}");
        let ours = String::from_utf8(out.stdout).unwrap();
        let theirs = fixture(tool);
        let (ours_perftest, ours_own) = ours.split_once("\n Options of this tool, not perftest's:\n").unwrap();
        assert!(ours_own.contains("--ring=<path>"), "{tool}:\n{ours}");
        // The usage lines, with the tool's own name.
        let usage: Vec<&str> = theirs.lines().take(4).collect();
        let ib = format!("ib_{tool}");
        let mine: Vec<String> = usage.iter().map(|l| l.replace(&ib, tool)).collect();
        assert_eq!(ours_perftest.lines().take(4).collect::<Vec<_>>(), mine, "{tool}");
        let mut last_at = 0;
        let mut options = 0;
        for line in ours_perftest.lines().skip(4) {
            let Some(opt) = option(line) else { continue };
            options += 1;
            if opt == "-c" {
                let uc = ["send_bw", "write_bw", "send_lat", "write_lat"].contains(&tool);
                let want = if uc {
                    "  -c, --connection=<RC/UC>  Connection type RC/UC (default RC)"
                } else {
                    "  -c, --connection=<RC>  Connection type RC (default RC)"
                };
                assert_eq!(line, want, "{tool}");
                continue;
            }
            let at = theirs
                .lines()
                .position(|l| l == line)
                .unwrap_or_else(|| panic!("{tool}: {line:?} is not ib_{tool}'s line for {opt}"));
            assert!(at > last_at, "{tool}: {opt} out of perftest's order");
            last_at = at;
        }
        assert!(options >= 15, "{tool}: {options} options");
        texts.push(ours);
    }
    // Eight different texts.
    for (i, a) in texts.iter().enumerate() {
        assert!(texts[i + 1..].iter().all(|b| b != a));
    }
}
