//! The device registry: names, indices and lookups of registered devices
//! (Linux `drivers/infiniband/core/device.c`: the `devices` xarray,
//! `assign_name`, `alloc_name`, `__ib_device_get_by_name`,
//! `ib_device_rename`, `ib_device_get_by_netdev`).
//!
//! Names: a name containing `%d` is a pattern and takes the lowest index no
//! registered device uses (`rxe%d` → `rxe0`, then `rxe1`; after `rxe0` is
//! removed the next is `rxe0` again). A plain name is taken as is. Either way
//! a name already in use is refused. Indices are allocated cyclically, like
//! `xa_alloc_cyclic`, so a stale index does not silently name a new device.
//!
//! The full registration flow (`ib_register_device`) lives on
//! [`RdmaCore::register_device`](super::RdmaCore::register_device); this file
//! only keeps the table.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;

use super::device::{Device, DriverId};
use super::error::Error;
use super::netdev::IfIndex;

/// `IB_DEVICE_NAME_MAX` (including the terminating NUL in Linux).
pub const IB_DEVICE_NAME_MAX: usize = 64;

/// Bound on registered devices: the appliance has a handful of netdevs.
pub const MAX_DEVICES: usize = 64;

/// Check a device name. `allow_pattern` admits one `%d` (the kernel-side
/// `ib_register_device` path); names from the control path may not contain
/// `%` at all, as `nldev_newlink` insists.
pub fn validate_name(name: &str, allow_pattern: bool) -> Result<(), Error> {
    let bad = |reason| Err(Error::InvalidName { name: String::from(name), reason });
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() >= IB_DEVICE_NAME_MAX {
        return bad("longer than 63 bytes");
    }
    if name == "." || name == ".." {
        return bad("reserved");
    }
    if let Some(c) = name.chars().find(|c| !c.is_ascii_graphic()) {
        return if c.is_whitespace() {
            bad("contains whitespace")
        } else {
            bad("contains a character other than printable ASCII")
        };
    }
    if name.contains('/') {
        return bad("contains '/'");
    }
    let percents = name.matches('%').count();
    if percents > 0 {
        if !allow_pattern {
            return bad("contains '%'");
        }
        if percents > 1 || name.matches("%d").count() != 1 {
            return bad("a pattern must contain exactly one \"%d\" and no other '%'");
        }
    }
    Ok(())
}

/// Split `rxe%d` into `("rxe", "")`.
fn split_pattern(pattern: &str) -> Option<(&str, &str)> {
    let at = pattern.find("%d")?;
    Some((&pattern[..at], &pattern[at + 2..]))
}

/// The index `name` takes in `prefix%dsuffix`, if it is an exact rendering
/// (no sign, no leading zeros), as `alloc_name` checks with `sscanf` + `snprintf`.
fn pattern_index(name: &str, prefix: &str, suffix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

/// Every registered device, by index.
#[derive(Debug, Default)]
pub struct DeviceRegistry {
    devices: BTreeMap<u32, Device>,
    /// The last index handed out; the next search starts after it.
    last_index: Option<u32>,
}

impl DeviceRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.devices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Devices in index order.
    pub fn iter(&self) -> impl Iterator<Item = &Device> {
        self.devices.values()
    }

    pub fn get(&self, index: u32) -> Option<&Device> {
        self.devices.get(&index)
    }

    pub(crate) fn get_mut(&mut self, index: u32) -> Option<&mut Device> {
        self.devices.get_mut(&index)
    }

    /// `__ib_device_get_by_name`.
    pub fn by_name(&self, name: &str) -> Option<&Device> {
        self.devices.values().find(|d| d.name == name)
    }

    /// `ib_device_get_by_netdev`: the device of `driver` bound to `ifindex`.
    pub fn by_netdev(&self, ifindex: IfIndex, driver: DriverId) -> Option<&Device> {
        self.devices.values().find(|d| d.driver_id == driver && d.netdev.ifindex == ifindex)
    }

    /// Index of the device named `name`, or a clear error.
    pub fn index_of(&self, name: &str) -> Result<u32, Error> {
        self.by_name(name).map(|d| d.index).ok_or_else(|| Error::NoSuchDevice(String::from(name)))
    }

    /// `assign_name`: resolve a pattern to the lowest free index, then refuse
    /// a name in use.
    pub fn assign_name(&self, requested: &str) -> Result<String, Error> {
        validate_name(requested, true)?;
        let name = match split_pattern(requested) {
            Some((prefix, suffix)) => {
                let mut used: alloc::vec::Vec<u32> =
                    self.devices.values().filter_map(|d| pattern_index(&d.name, prefix, suffix)).collect();
                used.sort_unstable();
                let mut free = 0u32;
                for i in used {
                    if i == free {
                        free += 1;
                    } else if i > free {
                        break;
                    }
                }
                let name = format!("{prefix}{free}{suffix}");
                validate_name(&name, false)?;
                name
            }
            None => String::from(requested),
        };
        if self.by_name(&name).is_some() {
            return Err(Error::NameInUse(name));
        }
        Ok(name)
    }

    /// `xa_alloc_cyclic`: the first free index after the last one handed out,
    /// wrapping to 0.
    pub(crate) fn alloc_index(&mut self) -> Result<u32, Error> {
        if self.devices.len() >= MAX_DEVICES {
            return Err(Error::TooManyDevices);
        }
        let start = self.last_index.map_or(0, |i| i.wrapping_add(1));
        let mut candidate = start;
        // At most MAX_DEVICES indices are taken, so this ends within
        // MAX_DEVICES + 1 steps.
        while self.devices.contains_key(&candidate) {
            candidate = candidate.wrapping_add(1);
        }
        self.last_index = Some(candidate);
        Ok(candidate)
    }

    pub(crate) fn insert(&mut self, device: Device) {
        self.devices.insert(device.index, device);
    }

    pub(crate) fn remove(&mut self, index: u32) -> Option<Device> {
        self.devices.remove(&index)
    }

    /// `ib_device_rename`: `Ok(false)` when the name is unchanged.
    pub(crate) fn rename(&mut self, index: u32, new_name: &str) -> Result<bool, Error> {
        validate_name(new_name, false)?;
        let current = self.devices.get(&index).ok_or_else(|| Error::NoSuchDevice(format!("index {index}")))?;
        if current.name == new_name {
            return Ok(false);
        }
        if self.by_name(new_name).is_some() {
            return Err(Error::NameInUse(String::from(new_name)));
        }
        if let Some(dev) = self.devices.get_mut(&index) {
            dev.name = String::from(new_name);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testutil::fake_device;

    fn registry_with(names: &[&str]) -> DeviceRegistry {
        let mut r = DeviceRegistry::new();
        for name in names {
            let index = r.alloc_index().unwrap();
            r.insert(fake_device(index, name, 2));
        }
        r
    }

    #[test]
    fn pattern_takes_the_lowest_free_index() {
        let r = registry_with(&[]);
        assert_eq!(r.assign_name("rxe%d").unwrap(), "rxe0");
        let r = registry_with(&["rxe0", "rxe1", "rxe3"]);
        assert_eq!(r.assign_name("rxe%d").unwrap(), "rxe2");
        let r = registry_with(&["rxe1"]);
        assert_eq!(r.assign_name("rxe%d").unwrap(), "rxe0");
        // Names that only look alike do not reserve an index.
        let r = registry_with(&["rxe00", "rxe", "rxe0a", "mlx5_0"]);
        assert_eq!(r.assign_name("rxe%d").unwrap(), "rxe0");
        // A suffix after %d is honoured.
        let r = registry_with(&["dev0x"]);
        assert_eq!(r.assign_name("dev%dx").unwrap(), "dev1x");
    }

    #[test]
    fn duplicate_names_are_refused() {
        let r = registry_with(&["rxe0"]);
        assert_eq!(r.assign_name("rxe0"), Err(Error::NameInUse("rxe0".into())));
        assert_eq!(r.assign_name("rxe1").unwrap(), "rxe1");
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["", "a/b", "rxe 0", "rxe\t0", ".", "..", "rxé", "rxe%d%d", "rxe%s", "%"] {
            assert!(matches!(validate_name(bad, true), Err(Error::InvalidName { .. })), "{bad:?}");
        }
        assert!(validate_name("rxe%d", false).is_err());
        assert!(validate_name("rxe%d", true).is_ok());
        let long = "x".repeat(63);
        assert!(validate_name(&long, false).is_ok());
        let too_long = "x".repeat(64);
        assert!(validate_name(&too_long, false).is_err());
    }

    #[test]
    fn indices_are_cyclic_not_reused_at_once() {
        let mut r = registry_with(&["a", "b"]);
        assert_eq!(r.iter().map(|d| d.index).collect::<alloc::vec::Vec<_>>(), [0, 1]);
        r.remove(0);
        let i = r.alloc_index().unwrap();
        assert_eq!(i, 2);
        r.insert(fake_device(i, "c", 3));
        assert!(r.get(2).is_some());
    }

    #[test]
    fn device_table_is_bounded() {
        let mut r = DeviceRegistry::new();
        for n in 0..MAX_DEVICES {
            let i = r.alloc_index().unwrap();
            r.insert(fake_device(i, &alloc::format!("d{n}"), 2));
        }
        assert_eq!(r.alloc_index(), Err(Error::TooManyDevices));
    }

    #[test]
    fn lookup_by_name_index_and_netdev() {
        let r = registry_with(&["rxe0", "rxe1"]);
        assert_eq!(r.by_name("rxe1").map(|d| d.index), Some(1));
        assert_eq!(r.index_of("rxe0"), Ok(0));
        assert_eq!(r.index_of("nope"), Err(Error::NoSuchDevice("nope".into())));
        assert_eq!(r.get(1).map(|d| d.name.as_str()), Some("rxe1"));
        assert!(r.by_netdev(2, DriverId::RXE).is_some());
        assert!(r.by_netdev(3, DriverId::RXE).is_none());
    }

    #[test]
    fn rename_rules() {
        let mut r = registry_with(&["rxe0", "rxe1"]);
        assert_eq!(r.rename(0, "rxe0"), Ok(false));
        assert_eq!(r.rename(0, "rxe1"), Err(Error::NameInUse("rxe1".into())));
        assert!(r.rename(0, "bad name").is_err());
        assert!(r.rename(0, "rxe%d").is_err());
        assert_eq!(r.rename(0, "lan"), Ok(true));
        assert_eq!(r.by_name("lan").map(|d| d.index), Some(0));
        assert!(matches!(r.rename(9, "x"), Err(Error::NoSuchDevice(_))));
    }
}
