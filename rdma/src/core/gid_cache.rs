//! The per-port RoCE GID table (seed §4; Linux `drivers/infiniband/core/cache.c`).
//!
//! A fixed number of slots (`gid_tbl_len`, 1024 for rxe). The first slots are
//! reserved for the default GIDs, one per GID type the port supports (rxe: one,
//! RoCE v2, at index 0), as `gid_table_reserve_default` does. Every other add
//! takes the lowest free non-reserved slot, so freed slots are reused lowest
//! first and the table matches Linux index by index for the same history.
//!
//! The rules follow `__ib_cache_gid_add`, `_ib_cache_gid_del` and `find_gid`:
//! - an add whose (GID, type, netdev) is already present changes nothing
//!   (so the MAC-derived IPv6 link-local address, equal to the default GID,
//!   adds no entry);
//! - a default GID is found by (type, netdev, default flag) regardless of its
//!   value, so following a MAC change means delete-then-add;
//! - an IP delete matches only non-default entries, so the default GID stays
//!   while addresses come and go (and while the link is down);
//! - the zero GID is never stored; a full table refuses the add and counts it.
//!
//! Why no half-written entry is ever visible: an entry is replaced as a whole
//! value through `&mut self`, and lookups take `&self`; the borrow checker
//! rules out a reader during a write, and the core's single ordered work queue
//! is the only writer.

use alloc::string::String;
use alloc::vec::Vec;
use core::ops::BitOr;

use super::error::Error;
use super::gid::{Gid, GidType};
use super::netdev::{IfIndex, MacAddr};

/// The netdev a GID entry came from (`gid_attr->ndev`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NetdevRef {
    pub ifindex: IfIndex,
    /// The name when last seen, for display (`gid_attrs/ndevs/N`).
    pub name: String,
}

impl NetdevRef {
    pub fn new(ifindex: IfIndex, name: &str) -> Self {
        NetdevRef { ifindex, name: String::from(name) }
    }
}

/// One valid GID table entry (`struct ib_gid_attr`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct GidAttr {
    pub gid: Gid,
    pub gid_type: GidType,
    pub ndev: NetdevRef,
}

/// Which attributes a lookup compares (`GID_ATTR_FIND_MASK_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct GidMask(u8);

impl GidMask {
    pub const GID: GidMask = GidMask(1);
    pub const GID_TYPE: GidMask = GidMask(2);
    pub const NETDEV: GidMask = GidMask(4);
    pub const DEFAULT: GidMask = GidMask(8);

    pub fn contains(self, other: GidMask) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for GidMask {
    type Output = GidMask;
    fn bitor(self, rhs: GidMask) -> GidMask {
        GidMask(self.0 | rhs.0)
    }
}

/// What a lookup compares against.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct GidKey {
    pub gid: Gid,
    pub gid_type: GidType,
    pub ifindex: IfIndex,
    /// Whether the entry must sit in a reserved default slot (with `DEFAULT`).
    pub default: bool,
}

/// One port's GID table.
#[derive(Clone, Debug)]
pub struct GidTable {
    slots: Vec<Option<GidAttr>>,
    /// The reserved default slots: index `i` is for `default_types[i]`.
    default_types: Vec<GidType>,
    full_errors: u64,
}

impl GidTable {
    /// A table of `len` slots with one reserved default slot per entry of
    /// `default_types`, at the lowest indices.
    pub fn new(len: usize, default_types: &[GidType]) -> Result<Self, Error> {
        if len == 0 || default_types.len() >= len {
            return Err(Error::BadPortImmutable { port: 0, reason: "GID table too small for its default GIDs" });
        }
        let mut slots = Vec::new();
        slots.resize(len, None);
        Ok(GidTable { slots, default_types: default_types.to_vec(), full_errors: 0 })
    }

    /// Number of slots (`gid_tbl_len`).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Never true: a table has at least one slot. Here for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Number of valid entries.
    pub fn valid_count(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// How many adds were refused because the table was full.
    pub fn full_errors(&self) -> u64 {
        self.full_errors
    }

    /// The GID types that have a reserved default slot.
    pub fn default_types(&self) -> &[GidType] {
        &self.default_types
    }

    pub fn is_default_index(&self, index: usize) -> bool {
        index < self.default_types.len()
    }

    /// Query by index (`rdma_query_gid`): `Ok(None)` for a free slot.
    pub fn query(&self, index: usize) -> Result<Option<&GidAttr>, Error> {
        match self.slots.get(index) {
            Some(slot) => Ok(slot.as_ref()),
            None => Err(Error::InvalidGidIndex(u32::try_from(index).unwrap_or(u32::MAX))),
        }
    }

    /// All valid entries with their indices, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &GidAttr)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|a| (i, a)))
    }

    /// Find a valid entry under `mask` (`find_gid` without the free-slot search).
    pub fn find(&self, key: &GidKey, mask: GidMask) -> Option<usize> {
        self.iter().find(|(i, attr)| self.matches(*i, attr, key, mask)).map(|(i, _)| i)
    }

    fn matches(&self, index: usize, attr: &GidAttr, key: &GidKey, mask: GidMask) -> bool {
        if mask.contains(GidMask::GID_TYPE) && attr.gid_type != key.gid_type {
            return false;
        }
        if mask.contains(GidMask::GID) && attr.gid != key.gid {
            return false;
        }
        if mask.contains(GidMask::NETDEV) && attr.ndev.ifindex != key.ifindex {
            return false;
        }
        if mask.contains(GidMask::DEFAULT) && self.is_default_index(index) != key.default {
            return false;
        }
        true
    }

    /// The lowest free slot of the requested kind: default slots only hold
    /// default GIDs and the rest only hold the others.
    fn free_slot(&self, default: bool) -> Option<usize> {
        (0..self.slots.len()).find(|&i| self.slots[i].is_none() && self.is_default_index(i) == default)
    }

    /// The core of every add (`__ib_cache_gid_add`): `Ok(Some(i))` when the
    /// entry was written at `i`, `Ok(None)` when a match already exists.
    fn add_masked(&mut self, attr: GidAttr, mask: GidMask, default: bool) -> Result<Option<usize>, Error> {
        if attr.gid.is_zero() {
            return Err(Error::ZeroGid);
        }
        let key = GidKey { gid: attr.gid, gid_type: attr.gid_type, ifindex: attr.ndev.ifindex, default };
        if self.find(&key, mask).is_some() {
            return Ok(None);
        }
        let Some(slot) = self.free_slot(default) else {
            self.full_errors += 1;
            // The caller knows the device and port; it fills them in.
            return Err(Error::GidTableFull { device: String::new(), port: 0 });
        };
        self.slots[slot] = Some(attr);
        Ok(Some(slot))
    }

    /// Add an address-derived GID (`ib_cache_gid_add`: match on GID, type
    /// and netdev; never into a default slot).
    pub fn add(&mut self, attr: GidAttr) -> Result<Option<usize>, Error> {
        self.add_masked(attr, GidMask::GID | GidMask::GID_TYPE | GidMask::NETDEV, false)
    }

    /// Remove an address-derived GID (`ib_cache_gid_del`): default entries
    /// never match. Returns the freed index.
    pub fn del(&mut self, gid: Gid, gid_type: GidType, ifindex: IfIndex) -> Result<usize, Error> {
        let key = GidKey { gid, gid_type, ifindex, default: false };
        let mask = GidMask::GID | GidMask::GID_TYPE | GidMask::NETDEV | GidMask::DEFAULT;
        let index = self.find(&key, mask).ok_or(Error::GidNotFound)?;
        self.slots[index] = None;
        Ok(index)
    }

    /// Install the default GID of `ndev` for `gid_type` from its MAC
    /// (`ib_cache_gid_set_default_gid`, SET mode). A default entry that
    /// already exists for this type and netdev is left alone, whatever its
    /// value: callers following a MAC change delete it first.
    pub fn set_default(&mut self, gid_type: GidType, ndev: &NetdevRef, mac: MacAddr) -> Result<Option<usize>, Error> {
        let attr = GidAttr { gid: Gid::default_for_mac(mac), gid_type, ndev: ndev.clone() };
        self.add_masked(attr, GidMask::GID_TYPE | GidMask::NETDEV | GidMask::DEFAULT, true)
    }

    /// Remove the default GID of `ifindex` for `gid_type` (DELETE mode).
    pub fn del_default(&mut self, gid_type: GidType, ifindex: IfIndex) -> Option<usize> {
        let key = GidKey { gid: Gid::ZERO, gid_type, ifindex, default: true };
        let mask = GidMask::GID_TYPE | GidMask::NETDEV | GidMask::DEFAULT;
        let index = self.find(&key, mask)?;
        self.slots[index] = None;
        Some(index)
    }

    /// Remove every entry that came from `ifindex`, defaults included
    /// (`ib_cache_gid_del_all_netdev_gids`). Returns the freed indices.
    pub fn del_all_netdev(&mut self, ifindex: IfIndex) -> Vec<usize> {
        let mut freed = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|a| a.ndev.ifindex == ifindex) {
                *slot = None;
                freed.push(i);
            }
        }
        freed
    }

    /// Follow a netdev rename in the stored names.
    pub fn rename_netdev(&mut self, ifindex: IfIndex, name: &str) {
        for attr in self.slots.iter_mut().flatten() {
            if attr.ndev.ifindex == ifindex && attr.ndev.name != name {
                attr.ndev.name = String::from(name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;
    use alloc::vec;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;

    const MAC: MacAddr = MacAddr([0x52, 0x54, 0x00, 0x00, 0x00, 0x01]);
    const V2: GidType = GidType::RoceV2;

    fn eth0() -> NetdevRef {
        NetdevRef::new(2, "eth0")
    }

    fn v4(a: u8, b: u8, c: u8, d: u8) -> GidAttr {
        GidAttr { gid: Gid::from_ipv4(Ipv4Addr::new(a, b, c, d)), gid_type: V2, ndev: eth0() }
    }

    fn table(len: usize) -> GidTable {
        GidTable::new(len, &[V2]).unwrap()
    }

    #[test]
    fn default_then_ipv4_matches_the_issue_facts() {
        let mut t = table(1024);
        assert_eq!(t.set_default(V2, &eth0(), MAC), Ok(Some(0)));
        assert_eq!(t.add(v4(10, 0, 0, 1)), Ok(Some(1)));
        let e0 = t.query(0).unwrap().unwrap();
        assert_eq!(alloc::format!("{}", e0.gid), "fe80:0000:0000:0000:5054:00ff:fe00:0001");
        assert_eq!(e0.gid_type, GidType::RoceV2);
        assert_eq!(e0.ndev.name, "eth0");
        let e1 = t.query(1).unwrap().unwrap();
        assert_eq!(alloc::format!("{}", e1.gid), "0000:0000:0000:0000:0000:ffff:0a00:0001");
        assert_eq!(t.valid_count(), 2);
        for i in 2..1024 {
            assert_eq!(t.query(i), Ok(None));
        }
        assert_eq!(t.query(1024), Err(Error::InvalidGidIndex(1024)));
    }

    #[test]
    fn ipv6_link_local_equal_to_default_adds_nothing() {
        let mut t = table(16);
        t.set_default(V2, &eth0(), MAC).unwrap();
        let ll: Ipv6Addr = "fe80::5054:ff:fe00:1".parse().unwrap();
        let attr = GidAttr { gid: Gid::from_ipv6(ll), gid_type: V2, ndev: eth0() };
        assert_eq!(t.add(attr), Ok(None));
        assert_eq!(t.valid_count(), 1);
        // ...and deleting that address does not remove the default GID.
        assert_eq!(t.del(Gid::from_ipv6(ll), V2, 2), Err(Error::GidNotFound));
        assert!(t.query(0).unwrap().is_some());
    }

    #[test]
    fn same_gid_on_another_netdev_is_a_new_entry() {
        let mut t = table(16);
        t.add(v4(10, 0, 0, 1)).unwrap();
        let mut other = v4(10, 0, 0, 1);
        other.ndev = NetdevRef::new(9, "eth0.9");
        assert_eq!(t.add(other), Ok(Some(2)));
        assert_eq!(t.add(v4(10, 0, 0, 1)), Ok(None));
    }

    #[test]
    fn removal_frees_the_slot_and_lowest_free_is_reused() {
        let mut t = table(16);
        t.set_default(V2, &eth0(), MAC).unwrap();
        assert_eq!(t.add(v4(10, 0, 0, 1)), Ok(Some(1)));
        assert_eq!(t.add(v4(10, 0, 0, 2)), Ok(Some(2)));
        assert_eq!(t.add(v4(10, 0, 0, 3)), Ok(Some(3)));
        assert_eq!(t.del(v4(10, 0, 0, 2).gid, V2, 2), Ok(2));
        assert_eq!(t.del(v4(10, 0, 0, 1).gid, V2, 2), Ok(1));
        assert_eq!(t.query(1), Ok(None));
        assert_eq!(t.add(v4(10, 0, 0, 4)), Ok(Some(1)));
        assert_eq!(t.add(v4(10, 0, 0, 5)), Ok(Some(2)));
        assert_eq!(t.add(v4(10, 0, 0, 6)), Ok(Some(4)));
    }

    #[test]
    fn address_gids_never_take_the_default_slot() {
        let mut t = table(4);
        // No default installed yet: slot 0 stays reserved anyway.
        assert_eq!(t.add(v4(10, 0, 0, 1)), Ok(Some(1)));
        assert_eq!(t.set_default(V2, &eth0(), MAC), Ok(Some(0)));
    }

    #[test]
    fn full_table_refuses_and_counts() {
        let mut t = table(3);
        t.set_default(V2, &eth0(), MAC).unwrap();
        t.add(v4(10, 0, 0, 1)).unwrap();
        t.add(v4(10, 0, 0, 2)).unwrap();
        assert!(matches!(t.add(v4(10, 0, 0, 3)), Err(Error::GidTableFull { .. })));
        assert!(matches!(t.add(v4(10, 0, 0, 4)), Err(Error::GidTableFull { .. })));
        assert_eq!(t.full_errors(), 2);
        // An existing entry is still "added" without needing a slot.
        assert_eq!(t.add(v4(10, 0, 0, 1)), Ok(None));
        assert_eq!(t.full_errors(), 2);
        // Freeing one makes room again.
        t.del(v4(10, 0, 0, 1).gid, V2, 2).unwrap();
        assert_eq!(t.add(v4(10, 0, 0, 3)), Ok(Some(1)));
    }

    #[test]
    fn mac_change_is_delete_then_add_of_the_default() {
        let mut t = table(8);
        t.set_default(V2, &eth0(), MAC).unwrap();
        let new_mac = MacAddr([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        // Setting again without deleting keeps the old value (Linux does the same).
        assert_eq!(t.set_default(V2, &eth0(), new_mac), Ok(None));
        assert_eq!(t.query(0).unwrap().unwrap().gid, Gid::default_for_mac(MAC));
        assert_eq!(t.del_default(V2, 2), Some(0));
        assert_eq!(t.set_default(V2, &eth0(), new_mac), Ok(Some(0)));
        assert_eq!(alloc::format!("{}", t.query(0).unwrap().unwrap().gid), "fe80:0000:0000:0000:5054:00ff:fe12:3456");
    }

    #[test]
    fn zero_gid_is_refused() {
        let mut t = table(8);
        let attr = GidAttr { gid: Gid::ZERO, gid_type: V2, ndev: eth0() };
        assert_eq!(t.add(attr), Err(Error::ZeroGid));
    }

    #[test]
    fn find_under_mask() {
        let mut t = table(8);
        t.set_default(V2, &eth0(), MAC).unwrap();
        t.add(v4(10, 0, 0, 1)).unwrap();
        let key = GidKey { gid: v4(10, 0, 0, 1).gid, gid_type: V2, ifindex: 2, default: false };
        let full = GidMask::GID | GidMask::GID_TYPE | GidMask::NETDEV;
        assert_eq!(t.find(&key, full), Some(1));
        assert_eq!(t.find(&key, full | GidMask::DEFAULT), Some(1));
        let v1 = GidKey { gid_type: GidType::RoceV1, ..key };
        assert_eq!(t.find(&v1, full), None);
        assert_eq!(t.find(&v1, GidMask::GID), Some(1));
        let other_dev = GidKey { ifindex: 3, ..key };
        assert_eq!(t.find(&other_dev, full), None);
        assert_eq!(t.find(&other_dev, GidMask::GID | GidMask::GID_TYPE), Some(1));
        // The default entry is found by type+netdev+default, whatever its value.
        let dflt = GidKey { gid: Gid::ZERO, default: true, ..key };
        assert_eq!(t.find(&dflt, GidMask::GID_TYPE | GidMask::NETDEV | GidMask::DEFAULT), Some(0));
    }

    #[test]
    fn del_all_netdev_removes_defaults_too() {
        let mut t = table(8);
        t.set_default(V2, &eth0(), MAC).unwrap();
        t.add(v4(10, 0, 0, 1)).unwrap();
        let mut vlan = v4(10, 1, 0, 1);
        vlan.ndev = NetdevRef::new(5, "eth0.5");
        t.add(vlan).unwrap();
        assert_eq!(t.del_all_netdev(2), vec![0, 1]);
        assert_eq!(t.valid_count(), 1);
        assert_eq!(t.query(2).unwrap().unwrap().ndev.name, "eth0.5");
    }

    #[test]
    fn table_must_have_room_beyond_defaults() {
        assert!(GidTable::new(1, &[V2]).is_err());
        assert!(GidTable::new(0, &[]).is_err());
        assert!(GidTable::new(2, &[V2]).is_ok());
    }

    #[test]
    fn rename_follows_the_netdev() {
        let mut t = table(4);
        t.add(v4(10, 0, 0, 1)).unwrap();
        t.rename_netdev(2, "lan0");
        assert_eq!(t.query(1).unwrap().unwrap().ndev.name, "lan0");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(u8),
        Del(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![(0u8..12).prop_map(Op::Add), (0u8..12).prop_map(Op::Del)]
    }

    proptest! {
        /// Against a model: every address is present at most once, adds take
        /// the lowest free non-default slot, dels free exactly their slot, and
        /// a full table refuses without side effects.
        #[test]
        fn random_add_del_sequences_match_the_model(ops in proptest::collection::vec(op(), 0..80)) {
            let len = 8;
            let mut t = table(len);
            t.set_default(V2, &eth0(), MAC).unwrap();
            let mut model: BTreeMap<usize, u8> = BTreeMap::new();
            let mut full = 0u64;
            for op in ops {
                match op {
                    Op::Add(x) => {
                        let res = t.add(v4(10, 0, 0, x));
                        if let Some((&i, _)) = model.iter().find(|(_, v)| **v == x) {
                            prop_assert_eq!(res, Ok(None));
                            prop_assert!(i >= 1);
                        } else {
                            let free = (1..len).find(|i| !model.contains_key(i));
                            match free {
                                Some(i) => {
                                    prop_assert_eq!(res, Ok(Some(i)));
                                    model.insert(i, x);
                                }
                                None => {
                                    full += 1;
                                    prop_assert!(res.is_err());
                                }
                            }
                        }
                    }
                    Op::Del(x) => {
                        let res = t.del(v4(10, 0, 0, x).gid, V2, 2);
                        let at = model.iter().find(|(_, v)| **v == x).map(|(i, _)| *i);
                        match at {
                            Some(i) => {
                                prop_assert_eq!(res, Ok(i));
                                model.remove(&i);
                            }
                            None => prop_assert_eq!(res, Err(Error::GidNotFound)),
                        }
                    }
                }
                prop_assert!(t.query(0).unwrap().is_some());
                prop_assert_eq!(t.valid_count(), model.len() + 1);
            }
            prop_assert_eq!(t.full_errors(), full);
        }
    }
}
