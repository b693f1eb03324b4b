//! NIC passthrough (`make run-passthrough PCI=0000:03:00.0`): whether a host
//! PCI function can be handed to the appliance through VFIO, read from sysfs,
//! and the QEMU device that hands it over. Every refusal says what to do
//! about it, because the usual failures (IOMMU off, the host driver still
//! bound, a group shared with another device) are set-up steps, not bugs.
//! HARDWARE.md is the runbook these messages point into.
//!
//! The checks read a sysfs tree under a root (`/` on a real host, a made-up
//! tree in the tests), so everything up to QEMU's own `vfio-pci` is tested on
//! machines that have no device to pass through.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// The NICs the appliance drives, by PCI vendor:device, with the driver's
/// name. Only QEMU's models of them are tested (HARDWARE.md).
pub const SUPPORTED: &[(u16, u16, &str)] = &[
    (0x8086, 0x10d3, "e1000e (Intel 82574L)"),
    (0x8086, 0x10c9, "igb (Intel 82576)"),
    (0x1af4, 0x1000, "virtio-net (transitional)"),
    (0x1af4, 0x1041, "virtio-net (modern)"),
];

/// A host PCI function that passed every check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passthrough {
    /// `DDDD:BB:DD.F`.
    pub bdf: String,
    pub vendor: u16,
    pub device: u16,
    pub iommu_group: u32,
    /// The appliance's driver for it.
    pub driver: &'static str,
}

impl Passthrough {
    /// QEMU's `-device` argument for it.
    pub fn qemu_device(&self) -> String {
        format!("vfio-pci,host={}", self.bdf)
    }
}

/// `DDDD:BB:DD.F`, or `BB:DD.F` in domain 0, as lower-case sysfs spells it;
/// `None` if it is not a PCI address.
pub fn normalize_bdf(s: &str) -> Option<String> {
    let s = s.trim().to_ascii_lowercase();
    let full = if s.matches(':').count() == 1 { format!("0000:{s}") } else { s };
    let (domain, rest) = full.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (dev, func) = rest.split_once('.')?;
    let hex = |x: &str, n: usize| x.len() == n && x.chars().all(|c| c.is_ascii_hexdigit());
    let dev_ok = hex(dev, 2) && u8::from_str_radix(dev, 16).is_ok_and(|d| d < 32);
    let func_ok = func.len() == 1 && matches!(func.as_bytes()[0], b'0'..=b'7');
    (hex(domain, 4) && hex(bus, 2) && dev_ok && func_ok).then_some(full)
}

fn read_hex(path: &Path) -> Option<u32> {
    let s = fs::read_to_string(path).ok()?;
    u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// The basename of a sysfs symlink (`driver`, `iommu_group`), if present.
fn link_name(path: &Path) -> Option<String> {
    fs::read_link(path).ok()?.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// Whether a function in the NIC's IOMMU group leaves the group usable by
/// VFIO: bound to vfio-pci, bound to nothing, or a bridge (`pcieport`),
/// which VFIO tolerates.
fn harmless_in_group(dev: &Path) -> bool {
    let bridge = read_hex(&dev.join("class")).is_some_and(|c| c >> 8 == 0x0604);
    match link_name(&dev.join("driver")).as_deref() {
        None | Some("vfio-pci") | Some("pci-stub") => true,
        Some("pcieport") => bridge,
        Some(_) => false,
    }
}

/// Checks that `bdf` can be passed through on the host whose sysfs and /dev
/// are under `root` (`/`), in the order a user fixes them.
pub fn check(root: &Path, bdf: &str) -> Result<Passthrough, String> {
    let Some(bdf) = normalize_bdf(bdf) else {
        return Err(format!(
            "'{bdf}' is not a PCI address: give it as DDDD:BB:DD.F (e.g. 0000:03:00.0; `lspci -D -nn` lists them)"
        ));
    };
    let dev = root.join("sys/bus/pci/devices").join(&bdf);
    if !dev.exists() {
        return Err(format!("no PCI function {bdf} on this machine (`lspci -D -nn` lists them)"));
    }
    let (Some(vendor), Some(device)) = (read_hex(&dev.join("vendor")), read_hex(&dev.join("device"))) else {
        return Err(format!("{bdf}: cannot read its vendor and device IDs from {}", dev.display()));
    };
    let (vendor, device) = (vendor as u16, device as u16);
    let Some(&(_, _, driver)) = SUPPORTED.iter().find(|(v, d, _)| (*v, *d) == (vendor, device)) else {
        let list: Vec<String> = SUPPORTED.iter().map(|(v, d, n)| format!("{v:04x}:{d:04x} {n}")).collect();
        return Err(format!(
            "{bdf} is {vendor:04x}:{device:04x}, not a NIC the appliance drives; supported: {}",
            list.join(", ")
        ));
    };
    let Some(group) = link_name(&dev.join("iommu_group")).and_then(|g| g.parse::<u32>().ok()) else {
        return Err(format!(
            "{bdf} has no IOMMU group: the IOMMU is off. Enable VT-d (Intel) or AMD-Vi/IOMMU in the firmware \
             setup and boot Linux with intel_iommu=on iommu=pt (HARDWARE.md, \"IOMMU\")"
        ));
    };
    match link_name(&dev.join("driver")).as_deref() {
        Some("vfio-pci") => {}
        other => {
            let now = other.map_or("no driver".to_string(), |d| format!("driver {d}"));
            return Err(format!(
                "{bdf} is bound to {now}, not vfio-pci. Bind it with `driverctl set-override {bdf} vfio-pci` \
                 (or by sysfs: HARDWARE.md, \"Binding the NIC to vfio-pci\")"
            ));
        }
    }
    let members = root.join("sys/kernel/iommu_groups").join(group.to_string()).join("devices");
    let mut others: Vec<String> = Vec::new();
    if let Ok(entries) = fs::read_dir(&members) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = root.join("sys/bus/pci/devices").join(&name);
            if name != bdf && !harmless_in_group(&path) {
                let drv = link_name(&path.join("driver")).unwrap_or_default();
                others.push(format!("{name} (driver {drv})"));
            }
        }
    }
    if !others.is_empty() {
        others.sort();
        return Err(format!(
            "IOMMU group {group} is not viable: {} share it with {bdf} and are bound to host drivers. Bind them to \
             vfio-pci as well, or move the NIC to a slot with its own group (HARDWARE.md, \"IOMMU groups\")",
            others.join(", ")
        ));
    }
    let node = root.join("dev/vfio").join(group.to_string());
    if !node.exists() {
        return Err(format!("{} is missing: load vfio-pci (`modprobe vfio-pci`)", node.display()));
    }
    Ok(Passthrough { bdf, vendor, device, iommu_group: group, driver })
}

/// The host's root: `/`, or `$PASSTHROUGH_ROOT` (a made-up tree, for tests).
pub fn host_root() -> PathBuf {
    std::env::var_os("PASSTHROUGH_ROOT").map_or_else(|| PathBuf::from("/"), PathBuf::from)
}

/// A made-up host: PCI functions with IDs, driver and IOMMU group.
pub struct FakeHost {
    pub root: PathBuf,
}

impl FakeHost {
    /// An empty host under the temp directory, removed on drop.
    pub fn new(tag: &str) -> FakeHost {
        let root = std::env::temp_dir().join(format!("passthrough-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("sys/bus/pci/drivers")).expect("temp tree");
        FakeHost { root }
    }

    /// A PCI function `bdf` with `id` (vendor, device), `class`, bound to
    /// `driver`, in IOMMU group `group`.
    pub fn function(&self, bdf: &str, id: (u16, u16), class: u32, driver: Option<&str>, group: Option<u32>) {
        let dev = self.root.join("sys/devices/pci0000:00").join(bdf);
        fs::create_dir_all(&dev).expect("temp tree");
        fs::write(dev.join("vendor"), format!("0x{:04x}\n", id.0)).expect("temp tree");
        fs::write(dev.join("device"), format!("0x{:04x}\n", id.1)).expect("temp tree");
        fs::write(dev.join("class"), format!("0x{class:06x}\n")).expect("temp tree");
        let devices = self.root.join("sys/bus/pci/devices");
        fs::create_dir_all(&devices).expect("temp tree");
        symlink(&dev, devices.join(bdf)).expect("temp tree");
        if let Some(d) = driver {
            let drv = self.root.join("sys/bus/pci/drivers").join(d);
            fs::create_dir_all(&drv).expect("temp tree");
            symlink(&drv, dev.join("driver")).expect("temp tree");
        }
        if let Some(g) = group {
            let gdir = self.root.join("sys/kernel/iommu_groups").join(g.to_string());
            fs::create_dir_all(gdir.join("devices")).expect("temp tree");
            symlink(&gdir, dev.join("iommu_group")).expect("temp tree");
            symlink(&dev, gdir.join("devices").join(bdf)).expect("temp tree");
        }
    }

    /// /dev/vfio/`group`, which vfio-pci creates for a bound group.
    pub fn vfio_node(&self, group: u32) {
        fs::create_dir_all(self.root.join("dev/vfio")).expect("temp tree");
        fs::write(self.root.join("dev/vfio").join(group.to_string()), "").expect("temp tree");
    }
}

impl Drop for FakeHost {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NIC: &str = "0000:03:00.0";
    const E1000E: (u16, u16) = (0x8086, 0x10d3);
    const ETHERNET: u32 = 0x020000;

    #[test]
    fn addresses_are_normalized_or_refused() {
        assert_eq!(normalize_bdf("03:00.0").as_deref(), Some("0000:03:00.0"));
        assert_eq!(normalize_bdf("0000:3B:00.1").as_deref(), Some("0000:3b:00.1"));
        for bad in ["", "3:0.0", "0000:03:00", "0000:03:20.0", "0000:03:00.8", "zz:00.0", "0000:03:00.0.1"] {
            assert_eq!(normalize_bdf(bad), None, "{bad}");
        }
        let err = check(Path::new("/nonexistent"), "eth0").unwrap_err();
        assert!(err.contains("not a PCI address"), "{err}");
    }

    #[test]
    fn a_bound_nic_in_its_own_group_passes_and_gives_the_qemu_device() {
        let h = FakeHost::new("ok");
        h.function(NIC, E1000E, ETHERNET, Some("vfio-pci"), Some(14));
        h.vfio_node(14);
        let p = check(&h.root, "03:00.0").unwrap();
        assert_eq!(p.iommu_group, 14);
        assert_eq!(p.driver, "e1000e (Intel 82574L)");
        assert_eq!(p.qemu_device(), "vfio-pci,host=0000:03:00.0");
    }

    #[test]
    fn each_missing_step_is_named_with_its_fix() {
        let h = FakeHost::new("steps");
        assert!(check(&h.root, NIC).unwrap_err().contains("no PCI function 0000:03:00.0"));
        h.function(NIC, (0x8086, 0x1533), ETHERNET, Some("igb"), Some(3));
        let err = check(&h.root, NIC).unwrap_err();
        assert!(err.contains("8086:1533, not a NIC the appliance drives") && err.contains("8086:10c9"), "{err}");

        let h = FakeHost::new("nogroup");
        h.function(NIC, E1000E, ETHERNET, Some("e1000e"), None);
        assert!(check(&h.root, NIC).unwrap_err().contains("IOMMU is off"));

        let h = FakeHost::new("hostdriver");
        h.function(NIC, E1000E, ETHERNET, Some("e1000e"), Some(3));
        let err = check(&h.root, NIC).unwrap_err();
        assert!(
            err.contains("bound to driver e1000e, not vfio-pci") && err.contains("driverctl set-override"),
            "{err}"
        );

        let h = FakeHost::new("unbound");
        h.function(NIC, E1000E, ETHERNET, None, Some(3));
        assert!(check(&h.root, NIC).unwrap_err().contains("bound to no driver"));

        let h = FakeHost::new("nonode");
        h.function(NIC, E1000E, ETHERNET, Some("vfio-pci"), Some(3));
        assert!(check(&h.root, NIC).unwrap_err().contains("dev/vfio/3 is missing"));
    }

    #[test]
    fn a_group_shared_with_a_host_bound_device_is_not_viable() {
        let h = FakeHost::new("group");
        h.function(NIC, E1000E, ETHERNET, Some("vfio-pci"), Some(7));
        // Its sibling port, still the host's; a bridge in the group is fine.
        h.function("0000:03:00.1", E1000E, ETHERNET, Some("e1000e"), Some(7));
        h.function("0000:00:1c.0", (0x8086, 0x1234), 0x060400, Some("pcieport"), Some(7));
        h.vfio_node(7);
        let err = check(&h.root, NIC).unwrap_err();
        assert!(err.contains("IOMMU group 7 is not viable: 0000:03:00.1 (driver e1000e)"), "{err}");
        assert!(!err.contains("00:1c.0"), "a bridge does not spoil the group: {err}");

        let h = FakeHost::new("group-ok");
        h.function(NIC, E1000E, ETHERNET, Some("vfio-pci"), Some(7));
        h.function("0000:03:00.1", E1000E, ETHERNET, Some("vfio-pci"), Some(7));
        h.vfio_node(7);
        assert!(check(&h.root, NIC).is_ok());
    }
}
