//! The appliance over QEMU's Intel NICs instead of virtio-net, one suite run
//! per model: `e1000e` (the 82574L) and `igb` (the 82576). For each, the
//! driver is picked by PCI ID at boot, carries ping, follows the link (the
//! LSC interrupt), takes jumbo frames once the MTU is raised, runs the RDMA
//! suites' core between two appliances (RC/UC/UD pingpong from the console,
//! rc_pingpong through the host verbs rings, RC through the lossy relay), and
//! `make run NIC=` boots it. Both take their interrupts through MSI-X (the
//! link change on the "other" vector), falling back to MSI and INTx.
//!
//! A model the installed QEMU lacks (7.2 has no `igb`) has its tests print a
//! skip line and pass.

#![deny(unsafe_code)]

use std::net::UdpSocket;
use std::time::Duration;
use tests::{Appliance, Ivshmem, Nic, NicModel, Options, free_udp_port};

/// The host tools' rings: 64 MiB leaves room for 1 MiB messages (see verbs.rs).
const REGION: u64 = 64 << 20;
const WAIT: Duration = Duration::from_secs(60);

/// Every test of the suite, once per model.
macro_rules! suite {
    ($($model:ident: $variant:expr;)*) => {$(
        mod $model {
            use super::*;
            const MODEL: NicModel = $variant;

            #[test]
            fn is_probed_by_pci_id_and_carries_ping() {
                if available(MODEL) {
                    super::probed_by_pci_id_and_carries_ping(MODEL);
                }
            }

            #[test]
            fn link_status_follows_the_device() {
                if available(MODEL) {
                    super::link_status_follows(MODEL);
                }
            }

            #[test]
            fn rc_uc_and_ud_pingpong() {
                if available(MODEL) {
                    super::rc_uc_ud_pingpong(MODEL);
                }
            }

            #[test]
            fn jumbo_frames_and_roce_mtu_4096() {
                if available(MODEL) {
                    super::jumbo_frames_and_roce_mtu_4096(MODEL);
                }
            }

            #[test]
            fn the_verbs_rings_run_rc_pingpong() {
                if available(MODEL) {
                    super::verbs_rings_run_rc_pingpong(MODEL);
                }
            }

            #[test]
            fn rc_pingpong_through_the_lossy_relay() {
                if available(MODEL) {
                    super::rc_pingpong_through_the_lossy_relay(MODEL);
                }
            }

            #[test]
            fn checksum_offload_works_end_to_end() {
                if available(MODEL) {
                    super::checksum_offload_end_to_end(MODEL);
                }
            }

            #[test]
            fn make_run_with_nic() {
                if available(MODEL) {
                    super::make_run_with_nic(MODEL);
                }
            }

            #[test]
            fn interrupts_through_msix() {
                if available(MODEL) {
                    super::interrupts_through_msix(MODEL);
                }
            }

            #[test]
            fn falls_back_to_msi_then_intx() {
                if available(MODEL) {
                    super::falls_back_to_msi_then_intx(MODEL);
                }
            }
        }
    )*};
}

suite! {
    e1000e: NicModel::E1000e;
    igb: NicModel::Igb;
}

/// Whether the installed QEMU has `model`; says so when it does not.
fn available(model: NicModel) -> bool {
    let there = model.available();
    if !there {
        eprintln!("skipped: this qemu-system-x86_64 has no `{}` device (QEMU 8.0 added igb)", model.name());
    }
    there
}

/// The PCI vendor:device the model shows in the boot's PCI listing.
fn pci_id(model: NicModel) -> &'static str {
    match model {
        NicModel::E1000e => "[8086:10d3]",
        NicModel::Igb => "[8086:10c9]",
        NicModel::Virtio => "[1af4:1000]",
    }
}

fn nic(model: NicModel, mac: &str, local: u16, peer: u16, mtu: Option<u32>) -> Nic {
    Nic { model, host_mtu: mtu, ..Nic::new(mac, local, peer) }
}

/// Two appliances with `model` NICs on one wire, 10.0.0.1 and 10.0.0.2,
/// eth0 at `mtu` (1500 when `None`), each with a ring when `tag` is given.
fn pair(model: NicModel, mtu: Option<u32>, tag: Option<&str>) -> (Appliance, Appliance, Vec<Ivshmem>) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let shm: Vec<Ivshmem> = tag
        .map(|t| vec![Ivshmem::temp(&format!("{t}-a"), REGION), Ivshmem::temp(&format!("{t}-b"), REGION)])
        .unwrap_or_default();
    let node = |mac: &str, local, peer, ip: &str, i: usize| Options {
        nic: Some(nic(model, mac, local, peer, mtu)),
        append: format!("ip={ip}"),
        ivshmem: shm.get(i).cloned(),
        ..Options::default()
    };
    let a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24", 0)).unwrap();
    let b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24", 1)).unwrap();
    (a, b, shm)
}

fn rdma_up(x: &mut Appliance) {
    let out = x.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap();
    assert!(out.contains("rxe0: set active"), "{out}");
}

fn iters_line(out: &str) -> &str {
    out.lines().find(|l| l.contains(" iters in ")).unwrap_or_else(|| panic!("no result in:\n{out}"))
}

/// `tool -c args`, data checked: the server on `a`, the client on `b`.
fn pingpong(tool: &str, a: &mut Appliance, b: &mut Appliance, args: &str, iters: u32) {
    let server = a.start_cmd(&format!("{tool} -c {args}"), "local address:").unwrap();
    let client = b.cmd(&format!("{tool} -c {args} 10.0.0.1")).unwrap();
    let server = a.finish_cmd(server).unwrap();
    for out in [&server, &client] {
        assert!(!out.contains("invalid data in page"), "{tool} {args}:\n{out}");
        assert!(iters_line(out).starts_with(&format!("{iters} iters in ")), "{tool} {args}:\n{out}");
    }
}

/// Asks `ip link show` until it contains `want`.
fn wait_link(x: &mut Appliance, want: &str) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let link = x.cmd("ip link show").unwrap();
        if link.contains(want) {
            return link;
        }
        assert!(std::time::Instant::now() < deadline, "no `{want}` in time:\n{link}");
        x.cmd("sleep 100").unwrap();
    }
}

fn probed_by_pci_id_and_carries_ping(model: NicModel) {
    let (mut a, mut b, _) = pair(model, None, None);
    let boot = a.transcript();
    let name = model.name();
    assert!(boot.contains(&format!("eth0: {name} mac 52:54:00:00:00:01 mtu 1500 irq ")), "{boot}");
    assert!(boot.contains(pci_id(model)), "lspci-style listing of the {name}:\n{boot}");
    let link = a.cmd("ip link show").unwrap();
    assert!(link.contains("<BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP"), "{link}");
    assert!(link.contains("link/ether 52:54:00:00:00:01"), "the MAC from the device:\n{link}");
    let out = a.cmd("ping 10.0.0.2 -c 3 -i 100").unwrap();
    assert!(out.contains("3 packets transmitted, 3 received, 0% packet loss"), "{out}");
    let out = b.cmd("ping 10.0.0.1 -c 2 -i 100 -s 1400").unwrap();
    assert!(out.contains("2 packets transmitted, 2 received"), "{out}");
    assert!(out.contains("1408 bytes from 10.0.0.1"), "{out}");
    let stats = b.cmd("ip -s link show eth0").unwrap();
    let c = tests::iplink::counters(&stats);
    let packets = |k: &str| c.get(k).copied().unwrap_or_else(|| panic!("no {k}:\n{stats}"));
    assert!(packets("rx packets") >= 2 && packets("tx packets") >= 2, "{stats}");
    // The statistics registers are read once a second.
    b.cmd("sleep 1500").unwrap();
    let perf = b.cmd("perf").unwrap();
    let rx_good = perf
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} rx_good ")))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("the device's own counters in perf:\n{perf}"));
    assert!(rx_good >= 2, "the device counted the pings it received:\n{perf}");
}

/// The `perf` counter `name`'s value.
fn perf_counter(perf: &str, name: &str) -> u64 {
    let prefix = format!("{name} ");
    let line = perf.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {name}:\n{perf}"));
    line[prefix.len()..].trim().parse().unwrap_or_else(|_| panic!("{line}"))
}

/// The MSI-X table entries QEMU gives the model (in BAR3 on both).
fn msix_entries(model: NicModel) -> u16 {
    match model {
        NicModel::E1000e => 5,
        NicModel::Igb => 10,
        NicModel::Virtio => 0,
    }
}

/// The NIC's part of `lspci -v`.
fn lspci_nic(x: &mut Appliance, model: NicModel) -> String {
    let lspci = x.cmd("lspci -v").unwrap();
    let mut lines = lspci.lines().skip_while(|l| !l.contains(pci_id(model)));
    let head = lines.next().unwrap_or_else(|| panic!("{lspci}"));
    // Its indented lines, up to the next function's.
    let body: Vec<&str> = lines.take_while(|l| l.starts_with('\t')).collect();
    format!("{head}\n{}", body.join("\n"))
}

/// The NIC takes MSI-X when the machine offers it: the boot log says so,
/// `lspci -v` shows the capability enabled, and each received frame
/// raises a vector the poll loop counts.
fn interrupts_through_msix(model: NicModel) {
    let (mut a, _b, _) = pair(model, None, None);
    let boot = a.transcript();
    let name = model.name();
    assert!(boot.contains(&format!("eth0: {name} mac 52:54:00:00:00:01 mtu 1500 irq msix 48-50")), "{boot}");
    assert!(boot.contains("apic: local APIC 0 at 0xfee00000, virtual wire for the PIC"), "{boot}");
    let nic = lspci_nic(&mut a, model);
    let lspci = &nic;
    assert!(nic.contains(&format!("MSI-X: Enable+ Count={} Masked-", msix_entries(model))), "{lspci}");
    assert!(nic.contains("Vector table: BAR=3 offset=00000000"), "{lspci}");
    assert!(nic.contains("MSI: Enable-"), "MSI stays off next to MSI-X:\n{lspci}");
    a.cmd("perf reset").unwrap();
    let out = a.cmd("ping 10.0.0.2 -c 5 -i 100").unwrap();
    assert!(out.contains("5 packets transmitted, 5 received, 0% packet loss"), "{out}");
    let perf = a.cmd("perf").unwrap();
    // (`perf` shows what changed since the reset.)
    let n = perf_counter(&perf, "nic interrupts");
    assert!(n >= 5, "one vector per reply at least, {n}:\n{perf}");
    // The timer and the serial port still come through the PIC (the
    // console answered, and the ping's interval was timed).
    assert!(perf_counter(&perf, "timer interrupts") > 0, "{perf}");
}

/// Two appliances with `model` NICs on one wire, 10.0.0.1 and 10.0.0.2,
/// with `append` on both command lines.
fn pair_appending(model: NicModel, append: &str) -> (Appliance, Appliance) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let node = |mac: &str, local, peer, ip: &str| Options {
        nic: Some(nic(model, mac, local, peer, None)),
        append: format!("ip={ip} {append}"),
        ..Options::default()
    };
    let a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24")).unwrap();
    let b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24")).unwrap();
    (a, b)
}

/// Without MSI-X (`pci=nomsix`) the driver falls back to one MSI vector,
/// without either (`pci=nomsi`, Linux's) to its INTx line through the PIC;
/// both carry ping and count their interrupts.
fn falls_back_to_msi_then_intx(model: NicModel) {
    let name = model.name();
    for (append, log, msix, msi) in [
        ("pci=nomsix", "irq msi 48", "MSI-X: Enable-", "MSI: Enable+"),
        ("pci=nomsi", "irq 1", "MSI-X: Enable-", "MSI: Enable-"),
    ] {
        let (mut a, _b) = pair_appending(model, append);
        let boot = a.transcript();
        assert!(boot.contains(&format!("eth0: {name} mac 52:54:00:00:00:01 mtu 1500 {log}")), "{append}:\n{boot}");
        let nic = lspci_nic(&mut a, model);
        assert!(nic.contains(msix) && nic.contains(msi), "{append}:\n{nic}");
        a.cmd("perf reset").unwrap();
        let out = a.cmd("ping 10.0.0.2 -c 3 -i 100").unwrap();
        assert!(out.contains("3 packets transmitted, 3 received, 0% packet loss"), "{append}:\n{out}");
        let perf = a.cmd("perf").unwrap();
        assert!(perf_counter(&perf, "nic interrupts") >= 3, "{append}:\n{perf}");
    }
}

/// Cable pulled with QEMU's `set_link`: STATUS.LU drops, the LSC interrupt
/// tells the driver, the netdev loses its carrier, and gets it back.
fn link_status_follows(model: NicModel) {
    use std::io::Write as _;
    let sock = std::env::temp_dir().join(format!("roce-{}-mon-{}.sock", model.name(), std::process::id()));
    let mut a = Appliance::boot(Options {
        nic: Some(nic(model, "52:54:00:00:00:01", free_udp_port(), free_udp_port(), None)),
        append: "ip=10.0.0.1/24".into(),
        extra: vec![
            "-chardev".into(),
            format!("socket,id=mon0,path={},server=on,wait=off", sock.display()),
            "-mon".into(),
            "chardev=mon0,mode=readline".into(),
        ],
        ..Options::default()
    })
    .unwrap();
    rdma_up(&mut a);
    assert!(a.cmd("rdma link show").unwrap().contains("state ACTIVE"));
    let mut monitor = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    monitor.write_all(b"set_link n0 off\n").unwrap();
    let link = wait_link(&mut a, "NO-CARRIER");
    assert!(link.contains("<NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN"), "{link}");
    assert!(a.cmd("rdma link show").unwrap().contains("state DOWN"), "port follows the carrier");
    monitor.write_all(b"set_link n0 on\n").unwrap();
    wait_link(&mut a, "<BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP");
    assert!(a.cmd("rdma link show").unwrap().contains("state ACTIVE"));
    let _ = std::fs::remove_file(&sock);
}

fn rc_uc_ud_pingpong(model: NicModel) {
    let (mut a, mut b, _) = pair(model, None, None);
    rdma_up(&mut a);
    rdma_up(&mut b);
    pingpong("ibv_rc_pingpong", &mut a, &mut b, "-s 4096 -n 20", 20);
    pingpong("ibv_rc_pingpong", &mut a, &mut b, "-s 65536 -n 10", 10);
    pingpong("ibv_uc_pingpong", &mut a, &mut b, "-s 4096 -n 20", 20);
    // UD: one MTU (1024 on a 1500-byte link) at most.
    pingpong("ibv_ud_pingpong", &mut a, &mut b, "-s 1024 -n 20", 20);
}

/// `ip link set eth0 mtu 9000` (the harness does it for an Intel NIC with a
/// `host_mtu`) resizes the driver's buffers: jumbo pings, and RoCE MTU 4096.
fn jumbo_frames_and_roce_mtu_4096(model: NicModel) {
    let (mut a, mut b, _) = pair(model, Some(9000), None);
    assert!(a.cmd("ip link show eth0").unwrap().contains("mtu 9000"));
    if model == NicModel::Igb {
        // The 82576 restarts only its receive queue for the new buffers: no
        // device reset, so the link (which a reset renegotiates) stays up.
        let perf = a.cmd("perf").unwrap();
        assert!(perf.lines().any(|l| l == "igb rx_restarts 1") && !perf.contains("igb resets"), "{perf}");
        assert_eq!(a.transcript().matches("eth0: NETDEV_CHANGE carrier off").count(), 1, "only the boot's");
    }
    let out = a.cmd("ping 10.0.0.2 -c 2 -i 100 -s 8000").unwrap();
    assert!(out.contains("2 packets transmitted, 2 received"), "{out}");
    assert!(out.contains("8008 bytes from 10.0.0.2"), "{out}");
    rdma_up(&mut a);
    rdma_up(&mut b);
    let info = b.cmd("ibv_devinfo").unwrap();
    assert!(info.contains("active_mtu:\t\t4096 (5)"), "{info}");
    pingpong("ibv_rc_pingpong", &mut a, &mut b, "-m 4096 -s 65536 -n 10", 10);
    // Each RoCE frame with a payload left as a descriptor chain, headers,
    // the payload read where it lies (zero-copy) and the tail apart: 10
    // messages of 16 frames each way at least.
    for x in [&mut a, &mut b] {
        let perf = x.cmd("perf").unwrap();
        assert!(perf_counter(&perf, "nic tx_chained") >= 160, "{perf}");
        assert!(perf_counter(&perf, "nic tx_zero_copy") >= 160, "{perf}");
        assert!(perf_counter(&perf, "tx_zero_copy") >= 160, "{perf}");
    }
    // UD messages are bounded by the port's MTU, 4096 here.
    pingpong("ibv_ud_pingpong", &mut a, &mut b, "-s 4096 -n 10", 10);
    // Back down: the buffers shrink again and traffic still flows.
    for x in [&mut a, &mut b] {
        x.cmd("ip link set eth0 mtu 1500").unwrap();
    }
    let out = a.cmd("ping 10.0.0.2 -c 2 -i 100 -s 1400").unwrap();
    assert!(out.contains("2 packets transmitted, 2 received"), "{out}");
    // And UD's bound with it: 1024 again (ud_pingpong refuses more itself).
    pingpong("ibv_ud_pingpong", &mut a, &mut b, "-s 1024 -n 10", 10);
}

/// Host programs on both appliances' rings (the verbs suite's rc_pingpong
/// tool): 4 KiB and 1 MiB messages, data checked.
fn verbs_rings_run_rc_pingpong(model: NicModel) {
    let (mut a, mut b, shm) = pair(model, None, Some(model.name()));
    rdma_up(&mut a);
    rdma_up(&mut b);
    let tool = tests::verbs_tool("rc_pingpong");
    let port = tests::free_tcp_port();
    for (size, iters) in [(4096, 20), (1 << 20, 3)] {
        let args = |extra: &[&str]| {
            let mut v: Vec<String> = vec!["-s".into(), size.to_string(), "-n".into(), iters.to_string()];
            v.extend(["-c", "-p", &port.to_string(), "-g", "1", "-d", "rxe0"].map(String::from));
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        let server = std::process::Command::new(&tool)
            .arg("--ring")
            .arg(&shm[0].path)
            .args(args(&[]))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        let client = loop {
            let out = std::process::Command::new(&tool)
                .arg("--ring")
                .arg(&shm[1].path)
                .args(args(&["127.0.0.1"]))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
            if out.status.success() || std::time::Instant::now() > deadline || !text.contains("connect") {
                break text;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let out = server.wait_with_output().unwrap();
        let server = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        for out in [&server, &client] {
            assert!(out.contains(&format!("{iters} iters in")), "{size} B:\n{server}\n{client}");
            assert!(!out.contains("invalid data in page"), "{size} B:\n{out}");
        }
    }
}

/// `make run NIC=<model>` (its `make boot` half, under a pty): the NIC on
/// the console's appliance, and `MTU=` telling how to raise eth0's MTU,
/// which the device has no property for.
/// RC between two appliances over this NIC on a bad wire (the fault relay:
/// 5% loss, 1% reordering and duplication, 0.5% corruption, seeded): every
/// iteration completes with its data checked, and the relay did drop frames.
fn rc_pingpong_through_the_lossy_relay(model: NicModel) {
    use tests::relay::{Faults, Relay};
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let faults = Faults { drop: 0.05, duplicate: 0.01, reorder: 0.01, corrupt: 0.005, spare_arp: false };
    let relay = Relay::start(p1, p2, faults, 42).unwrap();
    let node = |mac: &str, local, peer, ip: &str| Options {
        nic: Some(nic(model, mac, local, peer, None)),
        append: format!("ip={ip}"),
        cmd_timeout: Duration::from_secs(120),
        ..Options::default()
    };
    let mut a = Appliance::boot(node("52:54:00:00:00:01", p1, relay.port_a, "10.0.0.1/24")).unwrap();
    let mut b = Appliance::boot(node("52:54:00:00:00:02", p2, relay.port_b, "10.0.0.2/24")).unwrap();
    rdma_up(&mut a);
    rdma_up(&mut b);
    pingpong("ibv_rc_pingpong", &mut a, &mut b, "-s 65536 -n 100", 100);
    assert!(relay.counts.dropped.load(std::sync::atomic::Ordering::Relaxed) > 0, "{}", relay.summary());
    println!("{model:?} lossy relay: {}", relay.summary());
}

fn make_run_with_nic(model: NicModel) {
    struct Cleanup(String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_file(format!("{}.udp.lock", self.0));
        }
    }
    let name = model.name();
    let ring = format!("/dev/shm/roce-test-{}-make-{name}", std::process::id());
    let _cleanup = Cleanup(ring.clone());
    let mut args = tests::MakeRun::args(1, free_udp_port() - 1, &ring);
    args.extend([format!("NIC={name}"), "MTU=9000".to_string()]);
    let mut run = tests::MakeRun::start(&args).unwrap();
    run.wait_prompt().unwrap_or_else(|e| panic!("{e}\n{}", run.transcript()));
    let boot = run.transcript();
    assert!(boot.contains(&format!("{name}: eth0 starts at mtu 1500; type 'ip link set eth0 mtu 9000'")), "{boot}");
    assert!(boot.contains(&format!("eth0: {name} mac 52:54:00:00:00:01 mtu 1500 irq ")), "{boot}");
    run.cmd("ip link set eth0 mtu 9000").unwrap();
    assert!(run.cmd("ip link show eth0").unwrap().contains("mtu 9000 "));
    run.send(b"shutdown\r").unwrap();
    assert!(run.wait_exit(WAIT).unwrap().success(), "{}", run.transcript());
}

/// The Internet checksum of `data` (RFC 1071), complemented.
fn inet_csum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet frame from the test's host (02:00:00:00:00:09, 10.0.0.9) to
/// the appliance (52:54:00:00:00:01, 10.0.0.1): IPv4 carrying `proto`'s
/// `l4` bytes, the header checksum right.
fn host_ipv4(proto: u8, l4: &[u8]) -> Vec<u8> {
    let total = (20 + l4.len()) as u16;
    let mut ip =
        vec![0x45, 0, (total >> 8) as u8, total as u8, 0, 7, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 9, 10, 0, 0, 1];
    let sum = inet_csum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    [&[0x52, 0x54, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x08, 0x00][..], &ip, l4].concat()
}

/// An ICMP echo request with sequence `seq` and 1000 bytes of payload.
fn echo_request(seq: u16) -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, (seq >> 8) as u8, seq as u8];
    icmp.extend((0..1000u32).map(|i| i as u8));
    let sum = inet_csum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    host_ipv4(1, &icmp)
}

/// Checksum offload on the wire, the far end played by the test: smoltcp
/// leaves IPv4 header checksums to the NIC, so an echo reply with a right
/// header checksum is the NIC's insertion; a frame with a corrupt IPv4
/// header is dropped by the driver (counted, never answered), one with a
/// wrong UDP checksum is passed up marked bad, and good headers are
/// counted as the device verified them.
fn checksum_offload_end_to_end(model: NicModel) {
    let (port, wire) = (free_udp_port(), free_udp_port());
    let inject = UdpSocket::bind(("127.0.0.1", wire)).unwrap();
    inject.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let opts = Options {
        nic: Some(nic(model, "52:54:00:00:00:01", port, wire, None)),
        append: "ip=10.0.0.1/24".into(),
        ..Options::default()
    };
    let mut a = Appliance::boot(opts).unwrap();
    wait_link(&mut a, "state UP");
    let send = |f: &[u8]| inject.send_to(f, ("127.0.0.1", port)).unwrap();
    // ARP request who-has 10.0.0.1 tell 10.0.0.9: smoltcp learns the host.
    let arp = [
        &[0xff; 6][..],
        &[2, 0, 0, 0, 0, 9, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 9, 10, 0, 0, 9],
        &[0; 6],
        &[10, 0, 0, 1],
    ]
    .concat();
    // A corrupt IPv4 header first (never answered), then good requests
    // until one is answered.
    let mut bad = echo_request(99);
    bad[24] ^= 0x5a;
    send(&arp);
    send(&bad);
    let deadline = std::time::Instant::now() + WAIT;
    let reply = loop {
        assert!(std::time::Instant::now() < deadline, "no echo reply");
        send(&arp);
        send(&echo_request(1));
        let mut buf = [0u8; 2048];
        let mut got = None;
        while let Ok(n) = inject.recv(&mut buf) {
            let f = &buf[..n];
            if f.len() > 42 && f[12..14] == [0x08, 0x00] && f[23] == 1 && f[34] == 0 {
                assert_ne!(u16::from_be_bytes([f[40], f[41]]), 99, "the corrupt request was answered");
                got = Some(f.to_vec());
                break;
            }
        }
        if let Some(f) = got {
            break f;
        }
    };
    let header = &reply[14..34];
    assert_ne!(&header[10..12], &[0, 0], "a header checksum is there: {header:02x?}");
    assert_eq!(inet_csum(header), 0, "and it is right: {header:02x?}");
    assert_eq!(reply.len(), 14 + 20 + 8 + 1000, "the whole echo");
    assert_eq!(inet_csum(&reply[34..]), 0, "ICMP's own checksum (smoltcp's) is right");
    // A UDP datagram with a wrong checksum: passed up, marked bad.
    let mut udp = vec![0x30, 0x39, 0x00, 0x09, 0, 16, 0xde, 0xad];
    udp.extend([7u8; 8]);
    send(&host_ipv4(17, &udp));
    std::thread::sleep(Duration::from_millis(500));
    let perf = a.cmd("perf").unwrap();
    assert_eq!(perf_counter(&perf, "nic rx_bad_ip_csum"), 1, "{perf}");
    assert_eq!(perf_counter(&perf, "nic rx_bad_l4_csum"), 1, "{perf}");
    assert!(perf_counter(&perf, "nic rx_ip_csum_good") >= 2, "{perf}");
    assert!(perf_counter(&perf, "nic tx_csum_offload") >= 1, "{perf}");
    assert!(a.cmd("version").unwrap().starts_with("RoCE appliance"));
}
