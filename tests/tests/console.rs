//! The console shell: commands, errors, line editing.

#![deny(unsafe_code)]

use tests::{Appliance, Options};

fn boot() -> Appliance {
    Appliance::boot(Options::default()).unwrap()
}

#[test]
fn help_lists_every_command() {
    let mut a = boot();
    let out = a.cmd("help").unwrap();
    for c in ["help", "version", "uptime", "mem", "lspci", "log", "md", "cost", "sleep", "shutdown", "fault"] {
        assert!(out.lines().any(|l| l.trim_start().starts_with(c)), "no {c} in:\n{out}");
    }
    // The descriptions start in one column.
    let columns: Vec<usize> = out
        .lines()
        .map(|l| {
            let name_end = 2 + l[2..].find(' ').unwrap_or(0);
            name_end + l[name_end..].len() - l[name_end..].trim_start().len()
        })
        .collect();
    assert!(columns.windows(2).all(|w| w[0] == w[1]), "{out}");
    let one = a.cmd("help log").unwrap();
    assert!(one.starts_with("usage: log level"), "{one}");
}

#[test]
fn unknown_command_and_bad_arguments_give_one_error_line() {
    let mut a = boot();
    let cases = [
        ("frobnicate now", "error: unknown command 'frobnicate' (try 'help')"),
        ("log level loud", "error: log: unknown level 'loud'"),
        ("version extra", "error: usage: version"),
        ("md zz", "error: md: 'zz' is not a 4-byte aligned hex address"),
        ("md 0 1", "error: md: address 0x0 is not mapped"),
        ("sleep -5", "error: sleep: '-5' is not a number"),
        ("help nothing", "error: help: no command 'nothing'"),
    ];
    for (line, expected) in cases {
        let out = a.cmd(line).unwrap();
        assert_eq!(out.lines().count(), 1, "`{line}` printed:\n{out}");
        assert!(out.starts_with(expected), "`{line}` printed:\n{out}");
    }
    // The shell goes on.
    assert!(a.cmd("version").unwrap().starts_with("RoCE appliance firmware"));
}

#[test]
fn empty_line_just_prompts_again() {
    let mut a = boot();
    assert_eq!(a.cmd("").unwrap(), "");
    assert_eq!(a.cmd("   ").unwrap(), "");
}

#[test]
fn backspace_and_ctrl_u_edit_the_line() {
    let mut a = boot();
    // "vx" DEL "ersion" = "version"; then "junk" Ctrl-U "uptime".
    let out = a.cmd("vx\x7fersion").unwrap();
    assert!(out.starts_with("RoCE appliance firmware"), "{out}");
    let out = a.cmd("junk\x15uptime").unwrap();
    assert!(out.starts_with("up "), "{out}");
}

#[test]
fn an_overlong_line_is_refused_and_the_shell_goes_on() {
    let mut a = boot();
    let long = "x".repeat(1000);
    let out = a.cmd(&long).unwrap();
    assert!(out.contains("error: line too long (at most 256 characters)"), "{out}");
    assert!(a.cmd("version").unwrap().starts_with("RoCE appliance firmware"));
}

#[test]
fn mem_shows_heap_and_frames() {
    let mut a = boot();
    let out = a.cmd("mem").unwrap();
    assert!(out.contains("heap:   total ") && out.contains("used "), "{out}");
    assert!(out.contains("frames: total ") && out.contains("free 4 KiB frames"), "{out}");
}

/// `uptime`'s seconds since boot.
fn uptime_secs(a: &mut Appliance) -> f64 {
    let out = a.cmd("uptime").unwrap();
    let hms = out.strip_prefix("up ").and_then(|s| s.split(',').next()).unwrap_or_else(|| panic!("{out}"));
    hms.split(':').fold(0.0, |acc, part| acc * 60.0 + part.parse::<f64>().unwrap())
}

#[test]
fn sleep_waits_on_the_timer_queue_and_the_clock_advances() {
    let mut a = boot();
    let before = uptime_secs(&mut a);
    let wall = std::time::Instant::now();
    assert_eq!(a.cmd("sleep 500").unwrap(), "");
    assert!(wall.elapsed().as_millis() >= 500);
    let after = uptime_secs(&mut a);
    assert!(after - before >= 0.5, "uptime went from {before} to {after}");
    // The CPU halted while idle: the loop reports halts and timer interrupts.
    let out = a.cmd("uptime").unwrap();
    let halts: u64 = out.split(", ").nth(1).and_then(|s| s.split(' ').next()).unwrap().parse().unwrap();
    assert!(halts > 0, "{out}");
}

/// The UART is read only after its receive interrupt: lines typed while a
/// command runs (together longer than its FIFO's trigger level), and a few
/// bytes alone, fewer than it, all reach the shell.
#[test]
fn lines_typed_while_a_command_runs_are_read_after_it() {
    let mut a = boot();
    a.send(b"sleep 300\rversion\rlog level error\r").unwrap();
    // The echo, then the output.
    a.wait_for_text("log level error\r\nlog level error", std::time::Duration::from_secs(30)).unwrap();
    let log = a.transcript();
    let version = log.rfind("RoCE appliance firmware ").unwrap_or_else(|| panic!("{log}"));
    assert!(log[..version].contains("sleep 300"), "{log}");
    // Fewer bytes than the FIFO's trigger level: the UART's timeout raises
    // the interrupt, and the shell echoes them before the line ends.
    let wait = std::time::Duration::from_secs(10);
    a.send(b"uptime").unwrap();
    a.wait_for_text("uptime", wait).unwrap();
    a.send(b"\r").unwrap();
    a.wait_for_text(" idle halts, ", wait).unwrap();
}

/// `icrc=` forces a CRC path; both compute the same ICRCs, as the RDMA tests
/// show when run with `APPLIANCE_APPEND=icrc=pclmulqdq`.
#[test]
fn icrc_path_can_be_forced() {
    for path in ["pclmulqdq", "table"] {
        let mut a = Appliance::boot(Options { append: format!("icrc={path}"), ..Options::default() }).unwrap();
        let log = a.transcript();
        assert!(log.contains(&format!("icrc: CRC-32 by {path} (icrc={path})")), "{log}");
        // Folding is timed against the table on short inputs too.
        assert_eq!(path == "pclmulqdq", log.contains("(icrc=pclmulqdq); folding from "), "{log}");
        let out = a.cmd("cost icrc 4096 20").unwrap();
        assert!(out.contains(&format!("({path}, in use)")), "{out}");
    }
    let a = Appliance::boot(Options { append: "icrc=fast".into(), ..Options::default() }).unwrap();
    let log = a.transcript();
    assert!(log.contains("icrc=fast: not a CRC path (table, pclmulqdq); timing the paths"), "{log}");
}

#[test]
fn log_level_can_be_changed() {
    let mut a = boot();
    assert_eq!(a.cmd("log level warn").unwrap().trim(), "log level warn");
    assert_eq!(a.cmd("log level").unwrap().trim(), "log level warn");
}

#[test]
fn cost_times_the_per_frame_work() {
    // A NIC (the ring's memory is the network's to lend) and a ring.
    let shm = tests::Ivshmem::temp("cost", 16 << 20);
    let (p1, p2) = (tests::free_udp_port(), tests::free_udp_port());
    let nic = Some(tests::Nic::new("52:54:00:00:00:01", p1, p2));
    let mut a = Appliance::boot(Options { ivshmem: Some(shm), nic, ..Options::default() }).unwrap();
    let out = a.cmd("cost icrc 1024 10").unwrap();
    assert!(out.starts_with("icrc 1024 B: ") && out.contains(" us each, "), "{out}");
    // The harness's CPU has PCLMULQDQ: both CRC paths are timed, the one the
    // boot log named is in use.
    let out = a.cmd("cost icrc 4096 200").unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with("icrc 4096 B: ") && lines[0].contains(" us each, ") && lines[0].contains("(table"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("icrc 4096 B: ") && lines[1].contains(" us each, ") && lines[1].contains("(pclmulqdq"),
        "{out}"
    );
    let log = a.transcript();
    let chosen = if log.contains("icrc: CRC-32 by table, the cheaper here (4 KiB: table ") {
        "table"
    } else if log.contains("icrc: CRC-32 by pclmulqdq, the cheaper here (4 KiB: table ") {
        "pclmulqdq"
    } else {
        panic!("no CRC path in the boot log:\n{log}")
    };
    assert_eq!(out.matches(", in use)").count(), 1, "{out}");
    assert!(out.contains(&format!("({chosen}, in use)")), "{out}");
    let out = a.cmd("cost copy 4096 10").unwrap();
    assert!(out.starts_with("copy 4096 B: "), "{out}");
    // Out of the ring's memory: a copy, the ICRC in place, both in one pass.
    for what in ["shm", "shm-crc", "shm-copy-crc"] {
        let out = a.cmd(&format!("cost {what} 4096 10")).unwrap();
        assert!(out.starts_with(&format!("{what} 4096 B: ")) && out.contains(" us each, "), "{out}");
    }
    assert!(a.cmd("cost shm-crc 4096 10").unwrap().contains(&format!("({chosen})")));
    a.expect("cost icrc 10 10", "error: cost: '10' is not a size in 64..=65536").unwrap();
    a.expect("cost crc 1024 10", "error: usage: cost icrc|copy|shm|shm-crc|shm-copy-crc <bytes> <count>").unwrap();
}
