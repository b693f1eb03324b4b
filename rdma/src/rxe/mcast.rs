//! UD multicast (IBA vol. 1 10.5 "multicast", 11.3 attach/detach; RoCE annex
//! A17.4.5; Linux `rxe_mcast.c`): groups named by a multicast GID, each with the
//! UD QPs attached to it. A frame to the multicast QPN (0xFFFFFF) whose IP
//! destination is a group's goes to every QP attached to that group; to a group
//! no QP is attached to, it is dropped and counted.
//!
//! RoCE has no multicast LIDs: a group's GID is its IP address (IPv4-mapped, or
//! IPv6), and frames to it go to the IP multicast MAC (RFC 1112 6.4: 01:00:5e
//! and the low 23 bits of the IPv4 address; RFC 2464 7: 33:33 and the low 32
//! bits of the IPv6 address).

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use crate::core::gid::Gid;
use crate::wire::MacAddr;

use super::qp::QpHandle;

/// The destination QPN of every multicast packet (IBA 10.5.1.1).
pub const MULTICAST_QPN: u32 = 0xFF_FFFF;
/// Groups a device may have (`max_mcast_grp`, rxe's `RXE_MAX_MCAST_GRP`).
pub const MAX_MCAST_GRP: u32 = 8192;
/// QPs per group (`max_mcast_qp_attach`).
pub const MAX_MCAST_QP_ATTACH: u32 = 56;
/// Attachments over all groups (`max_total_mcast_qp_attach`).
pub const MAX_TOTAL_MCAST_QP_ATTACH: u32 = 0x70000;

/// Whether a GID names a multicast group: an IPv4-mapped 224.0.0.0/4
/// address, or an IPv6 ff00::/8 one (`rdma_is_multicast_addr`).
pub fn is_multicast(gid: &Gid) -> bool {
    match gid.to_ipv4_mapped() {
        Some(v4) => v4.is_multicast(),
        None => gid.0[0] == 0xFF,
    }
}

/// The Ethernet address frames to a multicast GID go to.
pub fn mac_of(gid: &Gid) -> Option<MacAddr> {
    if !is_multicast(gid) {
        return None;
    }
    let g = gid.0;
    Some(match gid.to_ipv4_mapped() {
        Some(_) => MacAddr([0x01, 0x00, 0x5E, g[13] & 0x7F, g[14], g[15]]),
        None => MacAddr([0x33, 0x33, g[12], g[13], g[14], g[15]]),
    })
}

/// Why an attach or detach was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McastError {
    /// Not a multicast GID.
    NotMulticast,
    /// The QP is already attached to the group (attach) or is not (detach).
    State,
    /// A group, per-group or total limit was reached.
    Full,
}

/// A group appearing (first QP attached) or going (last QP detached): what
/// the netdev must hear to report the membership on the wire (IGMP/MLD), as
/// Linux's rdma_cm joins the IP group for a RoCE multicast join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupChange {
    Joined(Gid),
    Left(Gid),
}

/// Every group of a device and the QPs attached to each.
#[derive(Debug, Default)]
pub struct Groups {
    groups: BTreeMap<[u8; 16], Vec<QpHandle>>,
    total: u32,
    /// Changes not yet taken by [`Groups::poll_change`].
    changes: VecDeque<GroupChange>,
}

impl Groups {
    pub fn attach(&mut self, gid: &Gid, qp: QpHandle) -> Result<(), McastError> {
        if !is_multicast(gid) {
            return Err(McastError::NotMulticast);
        }
        if self.total >= MAX_TOTAL_MCAST_QP_ATTACH {
            return Err(McastError::Full);
        }
        if !self.groups.contains_key(&gid.0) && self.groups.len() as u32 >= MAX_MCAST_GRP {
            return Err(McastError::Full);
        }
        let members = self.groups.entry(gid.0).or_default();
        if members.contains(&qp) {
            return Err(McastError::State);
        }
        if members.len() as u32 >= MAX_MCAST_QP_ATTACH {
            return Err(McastError::Full);
        }
        if members.is_empty() {
            self.changes.push_back(GroupChange::Joined(*gid));
        }
        members.push(qp);
        self.total += 1;
        Ok(())
    }

    /// Detaches; the group goes when its last QP does.
    pub fn detach(&mut self, gid: &Gid, qp: QpHandle) -> Result<(), McastError> {
        let members = self.groups.get_mut(&gid.0).ok_or(McastError::State)?;
        let at = members.iter().position(|&q| q == qp).ok_or(McastError::State)?;
        members.swap_remove(at);
        self.total -= 1;
        if members.is_empty() {
            self.groups.remove(&gid.0);
            self.changes.push_back(GroupChange::Left(*gid));
        }
        Ok(())
    }

    /// Detaches a QP from every group (it is being destroyed).
    pub fn detach_all(&mut self, qp: QpHandle) {
        let gids: Vec<[u8; 16]> = self.groups.iter().filter(|(_, m)| m.contains(&qp)).map(|(g, _)| *g).collect();
        for g in gids {
            let _ = self.detach(&Gid(g), qp);
        }
    }

    /// The QPs attached to `gid`'s group (empty: no such group).
    pub fn members(&self, gid: &Gid) -> &[QpHandle] {
        self.groups.get(&gid.0).map_or(&[], |m| &m[..])
    }

    /// The oldest group change not yet taken.
    pub fn poll_change(&mut self) -> Option<GroupChange> {
        self.changes.pop_front()
    }

    /// Whether any QP is attached to `gid`.
    pub fn has(&self, gid: &Gid) -> bool {
        self.groups.contains_key(&gid.0)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn multicast_macs_for_ipv4_and_ipv6() {
        let v4 = Gid::from_ipv4(Ipv4Addr::new(239, 129, 2, 3));
        assert_eq!(mac_of(&v4), Some(MacAddr([0x01, 0x00, 0x5E, 0x01, 0x02, 0x03])), "top bit of 129 dropped");
        let v6 = Gid::from_ipv6("ff12::8000:1:2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(mac_of(&v6), Some(MacAddr([0x33, 0x33, 0x00, 0x01, 0x00, 0x02])));
        assert_eq!(mac_of(&Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1))), None);
        assert_eq!(mac_of(&Gid::from_ipv6("fe80::1".parse::<Ipv6Addr>().unwrap())), None);
    }

    #[test]
    fn attach_detach_and_limits() {
        let g = Gid::from_ipv4(Ipv4Addr::new(224, 0, 0, 9));
        let mut groups = Groups::default();
        assert_eq!(
            groups.attach(&Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1)), QpHandle(1)),
            Err(McastError::NotMulticast)
        );
        assert_eq!(groups.attach(&g, QpHandle(1)), Ok(()));
        assert_eq!(groups.attach(&g, QpHandle(1)), Err(McastError::State));
        for i in 2..=MAX_MCAST_QP_ATTACH {
            groups.attach(&g, QpHandle(i)).expect("room");
        }
        assert_eq!(groups.attach(&g, QpHandle(999)), Err(McastError::Full));
        assert_eq!(groups.members(&g).len(), MAX_MCAST_QP_ATTACH as usize);
        groups.detach_all(QpHandle(1));
        assert_eq!(groups.detach(&g, QpHandle(1)), Err(McastError::State));
        for i in 2..=MAX_MCAST_QP_ATTACH {
            groups.detach(&g, QpHandle(i)).expect("attached");
        }
        assert!(!groups.has(&g), "the last detach removes the group");
    }

    #[test]
    fn a_group_is_reported_joined_at_its_first_qp_and_left_at_its_last() {
        let (a, b) = (Gid::from_ipv4(Ipv4Addr::new(239, 0, 0, 1)), Gid::from_ipv6("ff12::1".parse().unwrap()));
        let mut groups = Groups::default();
        groups.attach(&a, QpHandle(1)).unwrap();
        groups.attach(&a, QpHandle(2)).unwrap();
        groups.attach(&b, QpHandle(1)).unwrap();
        assert_eq!(groups.poll_change(), Some(GroupChange::Joined(a)));
        assert_eq!(groups.poll_change(), Some(GroupChange::Joined(b)));
        assert_eq!(groups.poll_change(), None, "the second QP of a group changes nothing");
        groups.detach(&a, QpHandle(2)).unwrap();
        assert_eq!(groups.poll_change(), None);
        groups.detach_all(QpHandle(1));
        assert_eq!(groups.poll_change(), Some(GroupChange::Left(a)));
        assert_eq!(groups.poll_change(), Some(GroupChange::Left(b)));
        assert_eq!(groups.poll_change(), None);
    }
}
