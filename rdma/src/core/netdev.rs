//! The boundary to the kernel's network layer: what the RDMA core needs to know
//! about a netdev, and the notifier events the kernel must produce.
//!
//! The device snapshot and notifier events are the shared ones (`vocab::netdev`,
//! the same values the kernel's netdev registry produces), which is what the
//! seed's GID cache and rxe listen to (seed §4, `roce_gid_mgmt.c` and
//! `rxe_net.c`). Nothing here depends on the kernel: the kernel implements
//! [`NetdevProvider`] and feeds [`NetdevEvent`]s to
//! [`RdmaCore::netdev_event`](super::RdmaCore::netdev_event) as they come.

use alloc::vec::Vec;

pub use vocab::MacAddr;
pub use vocab::netdev::{IfIndex, NetdevEvent, NetdevEventKind, NetdevInfo, VlanInfo};

/// The kernel's netdev table, queried synchronously by the control path
/// (`dev_get_by_name`, `for_each_netdev`).
pub trait NetdevProvider {
    /// Look a netdev up by name.
    fn netdev_by_name(&self, name: &str) -> Option<NetdevInfo> {
        let mut found = None;
        self.for_each_netdev(&mut |dev| {
            if found.is_none() && dev.name == name {
                found = Some(dev.clone());
            }
        });
        found
    }

    /// Visit every netdev, in ifindex order.
    fn for_each_netdev(&self, f: &mut dyn FnMut(&NetdevInfo));
}

/// A fixed list of netdevs is a provider: handy for tests and for a kernel
/// that keeps its netdevs in a plain vector.
impl NetdevProvider for [NetdevInfo] {
    fn for_each_netdev(&self, f: &mut dyn FnMut(&NetdevInfo)) {
        let mut sorted: Vec<&NetdevInfo> = self.iter().collect();
        sorted.sort_by_key(|d| d.ifindex);
        for dev in sorted {
            f(dev);
        }
    }
}

impl NetdevProvider for Vec<NetdevInfo> {
    fn for_each_netdev(&self, f: &mut dyn FnMut(&NetdevInfo)) {
        self.as_slice().for_each_netdev(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn slice_provider_finds_by_name_in_ifindex_order() {
        let mac = MacAddr::default();
        let list = vec![NetdevInfo::new(7, "eth1", mac), NetdevInfo::new(2, "eth0", mac)];
        assert_eq!(list.netdev_by_name("eth1").map(|d| d.ifindex), Some(7));
        assert!(list.netdev_by_name("eth9").is_none());
        let mut order = Vec::new();
        list.for_each_netdev(&mut |d| order.push(d.ifindex));
        assert_eq!(order, vec![2, 7]);
    }
}
