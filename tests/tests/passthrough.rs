//! `make run-passthrough PCI=...`: what can be tested on a machine with no
//! device to pass through. The host checks refuse clearly (here, on this
//! machine's own sysfs, and on made-up hosts for every step in the unit
//! tests of `tests::passthrough`); on a made-up host where every check
//! passes, the QEMU command is the appliance's with the host NIC in the
//! emulated NIC's place.

#![deny(unsafe_code)]

use std::path::Path;
use std::process::{Command, Output};
use tests::passthrough::FakeHost;

fn make(args: &[&str], root: Option<&Path>) -> Output {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ lives in the workspace");
    let mut cmd = Command::new("make");
    cmd.arg("-s").arg("-C").arg(ws).arg("boot-passthrough").arg(format!("IMAGE={}", tests::image().display()));
    cmd.args(args);
    if let Some(r) = root {
        cmd.env("PASSTHROUGH_ROOT", r);
    }
    cmd.output().expect("make runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn without_a_device_it_says_how_to_name_one() {
    let o = make(&[], None);
    assert!(!o.status.success());
    assert!(text(&o).contains("usage: make run-passthrough PCI=0000:03:00.0"), "{}", text(&o));
    let o = make(&["PCI=0000:ff:1f.7"], None);
    assert!(!o.status.success());
    assert!(text(&o).contains("error: no PCI function 0000:ff:1f.7 on this machine"), "{}", text(&o));
}

#[test]
fn a_passable_nic_replaces_the_emulated_one_on_the_qemu_command_line() {
    let host = FakeHost::new("make");
    host.function("0000:03:00.0", (0x8086, 0x10c9), 0x020000, Some("vfio-pci"), Some(21));
    host.vfio_node(21);
    let o = make(&["PCI=03:00.0", "DRY_RUN=1", "RING=/dev/shm/roce-passthrough-dry"], Some(&host.root));
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("0000:03:00.0: 8086:10c9, the appliance's igb (Intel 82576) driver; IOMMU group 21"), "{out}");
    let cmd = String::from_utf8_lossy(&o.stdout);
    // The command starts with the QEMU binary: `qemu-system-x86_64`, or `$APPLIANCE_QEMU`'s path to one.
    let is_qemu = |l: &&str| l.split_whitespace().next().is_some_and(|w| w.ends_with("qemu-system-x86_64"));
    let cmd = cmd.lines().find(is_qemu).unwrap_or_else(|| panic!("{out}"));
    assert!(cmd.contains(" -device vfio-pci,host=0000:03:00.0 "), "{cmd}");
    assert!(!cmd.contains("-netdev") && !cmd.contains("virtio-net") && !cmd.contains("e1000e,"), "{cmd}");
    assert!(cmd.contains("mem-path=/dev/shm/roce-passthrough-dry") && cmd.contains("ivshmem-plain"), "{cmd}");
    assert!(cmd.contains(&format!("-kernel {}", tests::image().display())), "{cmd}");
    assert!(!Path::new("/dev/shm/roce-passthrough-dry").exists(), "a dry run creates no ring");

    // The same NIC still on its host driver: refused, with the fix.
    let host = FakeHost::new("make-bound");
    host.function("0000:03:00.0", (0x8086, 0x10c9), 0x020000, Some("igb"), Some(21));
    let o = make(&["PCI=0000:03:00.0", "DRY_RUN=1"], Some(&host.root));
    assert!(!o.status.success());
    assert!(text(&o).contains("driverctl set-override 0000:03:00.0 vfio-pci"), "{}", text(&o));
}
