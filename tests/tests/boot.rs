//! The image boots to a prompt, shows what it found, and stops cleanly or with
//! a readable report.

#![deny(unsafe_code)]

use std::time::Duration;
use tests::{Appliance, Exit, Ivshmem, Nic, Options, free_udp_port};

/// The devices `make run` attaches: a virtio-net NIC and an ivshmem region.
fn make_run_like() -> Options {
    Options {
        nic: Some(Nic::new("52:54:00:00:00:01", free_udp_port(), free_udp_port())),
        ivshmem: Some(Ivshmem::temp("boot", 16 << 20)),
        ..Options::default()
    }
}

#[test]
fn boots_to_prompt_with_banner() {
    let a = Appliance::boot(make_run_like()).unwrap();
    let banner = a.transcript();
    assert!(banner.contains("RoCE appliance firmware 0.1.0"), "{banner}");
    assert!(banner.contains("memory: "), "{banner}");
    assert!(banner.contains("Virtio network device [1af4:1000]"), "{banner}");
    assert!(banner.contains("Inter-VM shared memory [1af4:1110]"), "{banner}");
    assert!(banner.contains("GHz, calibrated against the PIT"), "{banner}");
}

#[test]
fn lspci_lists_the_nic_and_the_shared_memory() {
    let mut a = Appliance::boot(make_run_like()).unwrap();
    let out = a.cmd("lspci").unwrap();
    assert!(out.lines().any(|l| l.contains("Ethernet controller [0200]") && l.contains("[1af4:1000]")), "{out}");
    assert!(out.lines().any(|l| l.contains("RAM memory [0500]") && l.contains("[1af4:1110]")), "{out}");
    let verbose = a.cmd("lspci -v").unwrap();
    assert!(verbose.contains("(64-bit, prefetchable) [size=16.0 MiB]"), "{verbose}");
    // virtio-net interrupts through MSI-X (net::virtio_net_interrupts_through_msix_or_its_line).
    let nic = verbose.split("Virtio network device").nth(1).and_then(|s| s.split("Inter-VM").next()).unwrap_or("");
    assert!(nic.contains("MSI-X: Enable+ Count="), "{verbose}");
}

#[test]
fn shutdown_exits_with_success() {
    let a = Appliance::boot(Options::default()).unwrap();
    assert_eq!(a.shutdown().unwrap(), Exit::PoweredOff);
}

#[test]
fn cmdline_reaches_the_kernel() {
    let opts = Options { append: "log=debug ip=10.0.0.2/24".into(), ..Options::default() };
    let mut a = Appliance::boot(opts).unwrap();
    let banner = a.transcript();
    assert!(banner.contains("cmdline: log=debug ip=10.0.0.2/24"), "{banner}");
    // log=debug took effect: the memory map is logged at debug level.
    assert!(banner.contains("DEBUG") && banner.contains("Usable"), "{banner}");
    assert_eq!(a.cmd("log level").unwrap().trim(), "log level debug");
}

/// Boots, runs `fault <kind>`, and returns the exit and the console.
fn crash(kind: &str) -> (Exit, String) {
    let mut a = Appliance::boot(Options::default()).unwrap();
    a.send(format!("fault {kind}\r").as_bytes()).unwrap();
    let exit = a.wait_exit(Duration::from_secs(60)).unwrap();
    (exit, a.transcript())
}

#[test]
fn panic_reports_message_and_location_and_fails() {
    let (exit, out) = crash("panic");
    assert_eq!(exit, Exit::Failed, "{out}");
    assert!(out.contains("!!! PANIC: panicked at kernel/src/shell/builtin.rs:"), "{out}");
    assert!(out.contains("panic requested from the console"), "{out}");
}

#[test]
fn page_fault_reports_cr2_and_rip() {
    let (exit, out) = crash("page");
    assert_eq!(exit, Exit::Failed, "{out}");
    assert!(out.contains("!!! CPU EXCEPTION 14 (page fault) error_code=0x0 rip=0x"), "{out}");
    assert!(out.contains("page fault at cr2=0x0000000000000008: read on a non-present page"), "{out}");
}

#[test]
fn invalid_opcode_is_reported() {
    let (exit, out) = crash("ud");
    assert_eq!(exit, Exit::Failed, "{out}");
    assert!(out.contains("!!! CPU EXCEPTION 6 (invalid opcode)"), "{out}");
}

#[test]
fn stack_overflow_hits_the_guard_page_and_the_double_fault_stack() {
    let (exit, out) = crash("stack");
    assert_eq!(exit, Exit::Failed, "{out}");
    assert!(out.contains("!!! CPU EXCEPTION 8 (double fault)"), "{out}");
}

#[test]
fn a_bar_above_4_gib_is_mapped_and_the_ring_is_published_there() {
    // 1 GiB of shared memory next to 4 GiB of RAM: SeaBIOS puts BAR2 above 4 GiB.
    let shm = Ivshmem::temp("above4g", 1 << 30);
    let opts = Options { memory_mib: 4096, ivshmem: Some(shm.clone()), ..Options::default() };
    let mut a = Appliance::boot(opts).unwrap();
    let lspci = a.cmd("lspci -v").unwrap();
    let bar2 = lspci
        .lines()
        .find_map(|l| l.trim().strip_prefix("Region 2: Memory at "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no BAR2 in:\n{lspci}"));
    let addr = u64::from_str_radix(bar2, 16).unwrap();
    assert!(addr >= 1 << 32, "BAR2 at {addr:#x}");
    // The firmware wrote the verbs ring's superblock into the region: the host
    // sees it in the file, and the firmware reads the same bytes back at BAR2.
    let mut magic = [0u8; 8];
    std::io::Read::read_exact(&mut std::fs::File::open(&shm.path).unwrap(), &mut magic).unwrap();
    assert_eq!(&magic, b"VERBRING");
    let out = a.cmd(&format!("md {bar2} 2")).unwrap();
    assert!(out.contains(": 42524556 474e4952"), "{out}");
}
