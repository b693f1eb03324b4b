//! The same image booted like on a real machine: from the bootable ISO
//! (`make iso`: GRUB, Multiboot2) under SeaBIOS and under OVMF (UEFI), on the
//! wire with RDMA, and powered off through the ACPI FADT and `_S5_`. Also ACPI
//! on q35, whose MCFG moves PCI configuration to ECAM.

#![deny(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;
use tests::{Appliance, Exit, Firmware, Medium, Nic, Options, free_udp_port};

/// `$APPLIANCE_ISO` (what `make iso-test` passes), else `make iso`'s output.
fn iso() -> PathBuf {
    let path = std::env::var_os("APPLIANCE_ISO")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/appliance.iso"), PathBuf::from);
    assert!(path.exists(), "{} is missing: `make iso` builds it", path.display());
    path
}

/// Debian's `ovmf` (`make deps-iso` installs it).
const OVMF: &str = "/usr/share/ovmf/OVMF.fd";

fn node(mac: &str, local: u16, peer: u16) -> Options {
    Options {
        nic: Some(Nic::new(mac, local, peer)),
        // Firmware and GRUB come first: allow them their time under TCG.
        boot_timeout: Duration::from_secs(240),
        ..Options::default()
    }
}

/// Brings up 10.0.0.`n`/24 and rxe0 on eth0 by console commands (the ISO's
/// GRUB passes no command line).
fn configure(a: &mut Appliance, n: u8) {
    let out = a.cmd(&format!("ip addr add 10.0.0.{n}/24 dev eth0")).unwrap();
    assert!(!out.contains("error"), "{out}");
    let out = a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap();
    assert!(out.contains("rxe0: set active"), "{out}\n{}", a.transcript());
}

/// The ACPI summary line shows the FADT's PM1a and QEMU's `_S5_` were read.
fn assert_acpi_read(a: &Appliance) {
    let t = a.transcript();
    let line = t.lines().find(|l| l.contains("FADT PM1a_CNT")).unwrap_or_else(|| panic!("no ACPI line:\n{t}"));
    assert!(line.contains("PM1a_CNT Some(Io("), "{line}");
    assert!(line.contains("_S5_ Some((0, 0))"), "{line}");
    assert!(line.contains("MADT 1 CPU(s), 1 I/O APIC(s)"), "{line}");
}

/// `shutdown` powers off through the FADT's PM1a_CNT (QEMU exits 0 from the
/// ACPI power-off, not from isa-debug-exit).
fn shutdown_through_fadt(a: Appliance) {
    let mut a = a;
    a.send(b"shutdown\r").unwrap();
    assert_eq!(a.wait_exit(Duration::from_secs(60)).unwrap(), Exit::PoweredOff, "{}", a.transcript());
    let t = a.transcript();
    assert!(t.contains("S5 through the FADT: [(Io("), "{t}");
}

fn pingpong(server: &mut Appliance, client: &mut Appliance, server_ip: &str) {
    let s = server.start_cmd("ibv_rc_pingpong -c -s 4096 -n 20", "local address:").unwrap();
    let c = client.cmd(&format!("ibv_rc_pingpong -c -s 4096 -n 20 {server_ip}")).unwrap();
    let s = server.finish_cmd(s).unwrap();
    for out in [&s, &c] {
        assert!(out.contains("20 iters in "), "{out}");
        assert!(!out.contains("invalid data in page"), "{out}");
    }
}

/// One ISO under SeaBIOS, one under OVMF, on one wire: both reach the prompt
/// through GRUB, run RDMA pingpongs each way, and power off through the FADT.
#[test]
fn iso_under_seabios_and_ovmf_pingpong_and_power_off() {
    let iso = iso();
    assert!(std::path::Path::new(OVMF).exists(), "{OVMF} is missing: `make deps-iso` installs it");
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let bios = Medium::Iso { path: iso.clone(), firmware: Firmware::Bios };
    let uefi = Medium::Iso { path: iso, firmware: Firmware::Uefi(OVMF.into()) };
    let mut a = Appliance::boot_from(&bios, node("52:54:00:00:00:01", p1, p2)).unwrap();
    let mut b = Appliance::boot_from(&uefi, node("52:54:00:00:00:02", p2, p1)).unwrap();
    for x in [&a, &b] {
        let t = x.transcript();
        assert!(t.contains("Booting `RoCE appliance'"), "GRUB did not boot it:\n{t}");
        assert!(t.contains("RoCE appliance firmware"), "{t}");
        assert!(t.contains("Virtio network device [1af4:1000]"), "{t}");
        assert_acpi_read(x);
    }
    // OVMF's console says so; SeaBIOS's does not.
    assert!(b.transcript().contains("UEFI"), "{}", b.transcript());
    configure(&mut a, 1);
    configure(&mut b, 2);
    pingpong(&mut a, &mut b, "10.0.0.1");
    pingpong(&mut b, &mut a, "10.0.0.2");
    shutdown_through_fadt(a);
    shutdown_through_fadt(b);
}

/// q35 by `-kernel`: the MCFG's ECAM carries PCI configuration (the NIC is
/// found and works) and `shutdown` uses the ICH9's PM1a through the FADT.
#[test]
fn q35_uses_ecam_and_powers_off_through_fadt() {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let mut a = Appliance::boot(Options {
        nic: Some(Nic::new("52:54:00:00:00:01", p1, p2)),
        append: "ip=10.0.0.1/24".into(),
        extra: vec!["-M".into(), "q35".into()],
        ..Options::default()
    })
    .unwrap();
    let t = a.transcript();
    assert!(t.contains("MCFG 1 ECAM window(s)"), "{t}");
    assert!(t.contains("configuration space through ECAM at 0xb0000000"), "{t}");
    assert_acpi_read(&a);
    let lspci = a.cmd("lspci").unwrap();
    assert!(lspci.contains("[1af4:1000]"), "{lspci}");
    assert!(lspci.contains("[8086:2918]"), "the ICH9 LPC bridge: {lspci}");
    let out = a.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap();
    assert!(out.contains("rxe0: set active"), "{out}");
    shutdown_through_fadt(a);
}
