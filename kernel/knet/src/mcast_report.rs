//! Multicast listener reports, so that a switch snooping IGMP/MLD forwards a
//! group's frames to us once an RDMA UD QP is attached to it: IGMPv2 (RFC 2236)
//! for IPv4 groups, MLDv2 (RFC 3810) for IPv6 groups, as the state-change
//! reports a host sends when it joins and leaves (Linux `igmp.c` / `mcast.c`;
//! for RoCE, Linux's rdma_cm joins the IP group itself, `cma_igmp_send`).
//!
//! - IGMPv2 join: a Version 2 Membership Report to the group, repeated once
//!   after the Unsolicited Report Interval (RFC 2236 3: 10 s), as hosts repeat
//!   it in case it was lost; leave: one Leave Group to all-routers
//!   (224.0.0.2). IP TTL 1, the Router Alert option (RFC 2113, RFC 2236 2),
//!   TOS 0xc0 (internetwork control, as Linux sends it).
//! - MLDv2 join: a report to ff02::16 with one CHANGE_TO_EXCLUDE_MODE record
//!   and no sources ("any source"); leave: CHANGE_TO_INCLUDE_MODE, no sources
//!   (RFC 3810 6.1); each sent Robustness Variable (2) times, one Unsolicited
//!   Report Interval (1 s) apart (RFC 3810 6.1, 9.1, 9.11). Hop limit 1, a
//!   hop-by-hop header with the Router Alert option (value 0, MLD), from the
//!   link-local address (RFC 3810 5.2.13; `::` while there is none).
//!
//! smoltcp's wire types build the IGMP message, the MLDv2 record and report
//! and the headers; the IPv4 header with its option is written here, as
//! smoltcp's `Ipv4Repr` emits no options. Queries are not answered (no
//! querier on the appliance's wires): a snooping switch would age the
//! membership out after its Group Membership Interval (260 s by default).

use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use smoltcp::wire::{
    EthernetAddress as SmolMac, EthernetFrame, EthernetProtocol, Icmpv6Packet, IgmpPacket, IgmpRepr, IgmpVersion,
    IpProtocol, Ipv4Packet, Ipv6Option, Ipv6OptionRepr, Ipv6OptionRouterAlert, Ipv6Packet, Ipv6Repr, MldAddressRecord,
    MldAddressRecordRepr, MldRecordType, MldRepr,
};
use vocab::MacAddr;
use vocab::time::Instant;

const ETH_HEADER_LEN: usize = 14;
/// IPv4 header with the 4-byte Router Alert option.
const IPV4_RA_HEADER_LEN: usize = 24;
const IGMP_LEN: usize = 8;
/// An IGMPv2 frame: Ethernet, IPv4 with Router Alert, IGMP.
pub const IGMP_FRAME_LEN: usize = ETH_HEADER_LEN + IPV4_RA_HEADER_LEN + IGMP_LEN;
const IPV6_HEADER_LEN: usize = 40;
/// Hop-by-hop header: next header, length, Router Alert (4), PadN (2).
const HBH_LEN: usize = 8;
/// MLDv2 report header (8) and one record without sources (20).
const MLD_LEN: usize = 8 + 20;
/// An MLDv2 frame with one record.
pub const MLD_FRAME_LEN: usize = ETH_HEADER_LEN + IPV6_HEADER_LEN + HBH_LEN + MLD_LEN;

/// IGMPv2's Unsolicited Report Interval (RFC 2236 8.10).
pub const IGMP_REPEAT_US: u64 = 10_000_000;
/// MLDv2's Unsolicited Report Interval (RFC 3810 9.11).
pub const MLD_REPEAT_US: u64 = 1_000_000;

/// All-routers (IGMPv2 Leave Group goes there).
const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);
/// All MLDv2-capable routers (RFC 3810 5.2.14).
const ALL_MLDV2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);
/// IPv4 Router Alert option: copied flag + option 20, length 4, value 0 (RFC 2113).
const IPV4_ROUTER_ALERT: [u8; 4] = [0x94, 0x04, 0x00, 0x00];
/// IPTOS_PREC_INTERNETCONTROL, what Linux marks IGMP with.
const TOS_INTERNETCONTROL: u8 = 0xc0;

/// A membership change of one group on one link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Join,
    Leave,
}

/// The Ethernet group an IPv4 multicast address maps to (RFC 1112 6.4).
pub fn ipv4_multicast_mac(a: Ipv4Addr) -> MacAddr {
    let o = a.octets();
    MacAddr([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
}

/// Writes the IGMPv2 frame for `change` of `group` into `buf` (at least
/// [`IGMP_FRAME_LEN`] bytes); returns its length.
pub fn emit_igmp(buf: &mut [u8], mac: MacAddr, src: Ipv4Addr, group: Ipv4Addr, change: Change) -> Option<usize> {
    let buf = buf.get_mut(..IGMP_FRAME_LEN)?;
    let (dst, igmp) = match change {
        Change::Join => (group, IgmpRepr::MembershipReport { group_addr: group, version: IgmpVersion::Version2 }),
        Change::Leave => (ALL_ROUTERS, IgmpRepr::LeaveGroup { group_addr: group }),
    };
    let mut eth = EthernetFrame::new_unchecked(&mut *buf);
    eth.set_dst_addr(SmolMac(ipv4_multicast_mac(dst).0));
    eth.set_src_addr(SmolMac(mac.0));
    eth.set_ethertype(EthernetProtocol::Ipv4);
    let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
    ip.set_version(4);
    ip.set_header_len(IPV4_RA_HEADER_LEN as u8);
    ip.set_dscp(TOS_INTERNETCONTROL >> 2);
    ip.set_ecn(0);
    ip.set_total_len((IPV4_RA_HEADER_LEN + IGMP_LEN) as u16);
    ip.set_ident(0);
    ip.clear_flags();
    ip.set_dont_frag(true);
    ip.set_frag_offset(0);
    ip.set_hop_limit(1);
    ip.set_next_header(IpProtocol::Igmp);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    // smoltcp's packet has no options setter: they follow the fixed 20 bytes.
    let raw = ip.into_inner();
    raw[20..IPV4_RA_HEADER_LEN].copy_from_slice(&IPV4_ROUTER_ALERT);
    let mut ip = Ipv4Packet::new_unchecked(raw);
    ip.fill_checksum();
    igmp.emit(&mut IgmpPacket::new_unchecked(ip.payload_mut()));
    Some(IGMP_FRAME_LEN)
}

/// Writes the MLDv2 report for `change` of `group` into `buf` (at least
/// [`MLD_FRAME_LEN`] bytes); returns its length.
pub fn emit_mld(buf: &mut [u8], mac: MacAddr, src: Ipv6Addr, group: Ipv6Addr, change: Change) -> Option<usize> {
    let buf = buf.get_mut(..MLD_FRAME_LEN)?;
    let record_type = match change {
        Change::Join => MldRecordType::ChangeToExclude,
        Change::Leave => MldRecordType::ChangeToInclude,
    };
    let mut record = [0u8; 20];
    MldAddressRecordRepr::new(record_type, group).emit(&mut MldAddressRecord::new_unchecked(&mut record[..]));
    let mld = MldRepr::Report { nr_mcast_addr_rcrds: 1, data: &record };

    let mut eth = EthernetFrame::new_unchecked(&mut *buf);
    eth.set_dst_addr(SmolMac(crate::ndisc::multicast_mac(ALL_MLDV2_ROUTERS).0));
    eth.set_src_addr(SmolMac(mac.0));
    eth.set_ethertype(EthernetProtocol::Ipv6);
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: ALL_MLDV2_ROUTERS,
        next_header: IpProtocol::HopByHop,
        payload_len: HBH_LEN + MLD_LEN,
        hop_limit: 1,
    };
    let mut packet = Ipv6Packet::new_unchecked(eth.payload_mut());
    ip.emit(&mut packet);
    let payload = packet.payload_mut();
    let (hbh, icmp) = payload.split_at_mut(HBH_LEN);
    // Next header, header length in 8-byte units beyond the first, the Router
    // Alert (MLD), then PadN to 8 bytes.
    let options =
        [Ipv6OptionRepr::RouterAlert(Ipv6OptionRouterAlert::MulticastListenerDiscovery), Ipv6OptionRepr::PadN(0)];
    hbh[0] = IpProtocol::Icmpv6.into();
    hbh[1] = 0;
    let mut at = 2;
    for o in &options {
        let len = o.buffer_len();
        o.emit(&mut Ipv6Option::new_unchecked(&mut hbh[at..at + len]));
        at += len;
    }
    let mut icmp = Icmpv6Packet::new_unchecked(icmp);
    mld.emit(&mut icmp);
    icmp.fill_checksum(&src, &ALL_MLDV2_ROUTERS);
    Some(MLD_FRAME_LEN)
}

/// A report still to be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    group: IpAddr,
    change: Change,
    at: Instant,
    /// Sends left, this one included.
    left: u8,
}

/// One link's reports to send: [`McastReports::change`] queues a state
/// change, [`McastReports::poll_transmit`] hands out the frames as they fall
/// due.
#[derive(Debug, Default)]
pub struct McastReports {
    pending: Vec<Pending>,
    /// The groups joined and not left: what [`McastReports::leave_all`]
    /// leaves.
    joined: Vec<IpAddr>,
}

impl McastReports {
    /// Group `group` was joined or left on this link: its report goes now,
    /// replacing any repeat of an earlier change still due.
    pub fn change(&mut self, group: IpAddr, change: Change, now: Instant) {
        self.joined.retain(|g| *g != group);
        if change == Change::Join {
            self.joined.push(group);
        }
        self.pending.retain(|p| p.group != group);
        let left = match (group, change) {
            (IpAddr::V4(_), Change::Leave) => 1,
            _ => 2,
        };
        self.pending.push(Pending { group, change, at: now, left });
    }

    /// Leaves every group still joined: the RDMA device that joined them is
    /// gone (`rdma link delete`), and its QPs with it.
    pub fn leave_all(&mut self, now: Instant) {
        for g in core::mem::take(&mut self.joined) {
            self.change(g, Change::Leave, now);
        }
    }

    /// When the next report falls due.
    pub fn poll_at(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.at).min()
    }

    /// Writes the next report due at `now` into `buf` (at least
    /// [`MLD_FRAME_LEN`] bytes), from `mac` and the link's IPv4 address and
    /// IPv6 link-local address (unspecified when it has none).
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        mac: MacAddr,
        v4: Option<Ipv4Addr>,
        v6_link_local: Option<Ipv6Addr>,
        buf: &mut [u8],
    ) -> Option<usize> {
        let i = self.pending.iter().position(|p| p.at <= now)?;
        let p = &mut self.pending[i];
        let len = match p.group {
            IpAddr::V4(g) => emit_igmp(buf, mac, v4.unwrap_or(Ipv4Addr::UNSPECIFIED), g, p.change),
            IpAddr::V6(g) => emit_mld(buf, mac, v6_link_local.unwrap_or(Ipv6Addr::UNSPECIFIED), g, p.change),
        };
        p.left -= 1;
        let repeat = if p.group.is_ipv4() { IGMP_REPEAT_US } else { MLD_REPEAT_US };
        p.at = Instant::from_micros(now.as_micros() + repeat);
        if p.left == 0 {
            self.pending.swap_remove(i);
        }
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{Icmpv6Message, Ipv4Repr};

    const MAC: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// The IGMPv2 report for 239.129.2.3 from 10.0.0.1 in the layout Linux's
    /// `igmp_send_report` builds for version 2 (TOS 0xc0, DF, TTL 1, Router
    /// Alert; Linux fills the IP ident, we leave it 0), and the leave.
    #[test]
    fn igmpv2_report_and_leave_bytes() {
        let mut buf = [0u8; 64];
        let g = Ipv4Addr::new(239, 129, 2, 3);
        let n = emit_igmp(&mut buf, MAC, Ipv4Addr::new(10, 0, 0, 1), g, Change::Join).unwrap();
        assert_eq!(n, 46);
        #[rustfmt::skip]
        let want: [u8; 46] = [
            0x01, 0x00, 0x5e, 0x01, 0x02, 0x03, 0x52, 0x54, 0, 0, 0, 1, 0x08, 0x00,
            0x46, 0xc0, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0, 0, 10, 0, 0, 1, 239, 129, 2, 3,
            0x94, 0x04, 0x00, 0x00,
            0x16, 0x00, 0, 0, 239, 129, 2, 3,
        ];
        let mut want = want;
        // The checksums, checked separately below.
        want[24..26].copy_from_slice(&buf[24..26]);
        want[40..42].copy_from_slice(&buf[40..42]);
        assert_eq!(&buf[..n], &want[..]);
        let ip = Ipv4Packet::new_checked(&buf[14..n]).unwrap();
        assert!(ip.verify_checksum());
        let igmp = IgmpPacket::new_checked(ip.payload()).unwrap();
        assert!(igmp.verify_checksum());
        assert_eq!(
            IgmpRepr::parse(&igmp).unwrap(),
            IgmpRepr::MembershipReport { group_addr: g, version: IgmpVersion::Version2 }
        );

        let n = emit_igmp(&mut buf, MAC, Ipv4Addr::new(10, 0, 0, 1), g, Change::Leave).unwrap();
        assert_eq!(&buf[..6], &[0x01, 0x00, 0x5e, 0, 0, 2]);
        let ip = Ipv4Packet::new_checked(&buf[14..n]).unwrap();
        let repr = Ipv4Repr::parse(&ip, &ChecksumCapabilities::default()).unwrap();
        assert_eq!((repr.dst_addr, repr.hop_limit, repr.next_header), (ALL_ROUTERS, 1, IpProtocol::Igmp));
        let igmp = IgmpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(IgmpRepr::parse(&igmp).unwrap(), IgmpRepr::LeaveGroup { group_addr: g });
    }

    /// The MLDv2 join as Linux sends it: ff02::16 from the link-local
    /// address, hop limit 1, hop-by-hop Router Alert (05 02 00 00, PadN 01
    /// 00), one CHANGE_TO_EXCLUDE record without sources; leave is
    /// CHANGE_TO_INCLUDE.
    #[test]
    fn mldv2_report_bytes() {
        let mut buf = [0u8; 128];
        let src: Ipv6Addr = "fe80::5054:ff:fe00:1".parse().unwrap();
        let g: Ipv6Addr = "ff0e::1:2".parse().unwrap();
        let n = emit_mld(&mut buf, MAC, src, g, Change::Join).unwrap();
        assert_eq!(n, 90);
        assert_eq!(&buf[..14], &[0x33, 0x33, 0, 0, 0, 0x16, 0x52, 0x54, 0, 0, 0, 1, 0x86, 0xdd]);
        let ip = Ipv6Packet::new_checked(&buf[14..n]).unwrap();
        assert_eq!((ip.next_header(), ip.hop_limit(), ip.payload_len()), (IpProtocol::HopByHop, 1, 36));
        assert_eq!((ip.src_addr(), ip.dst_addr()), (src, ALL_MLDV2_ROUTERS));
        assert_eq!(&ip.payload()[..8], &[58, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00]);
        let icmp = Icmpv6Packet::new_checked(&ip.payload()[8..]).unwrap();
        assert_eq!(icmp.msg_type(), Icmpv6Message::MldReport);
        assert!(icmp.verify_checksum(&src, &ALL_MLDV2_ROUTERS));
        // Type 143, code 0, checksum, reserved, 1 record; the record: type 4,
        // aux 0, 0 sources, the group.
        assert_eq!(&ip.payload()[8..9], &[143]);
        assert_eq!(&ip.payload()[12..16], &[0, 0, 0, 1]);
        assert_eq!(&ip.payload()[16..20], &[4, 0, 0, 0]);
        assert_eq!(&ip.payload()[20..36], &g.octets());

        emit_mld(&mut buf, MAC, src, g, Change::Leave).unwrap();
        assert_eq!(buf[14 + 40 + 16], 3, "CHANGE_TO_INCLUDE_MODE");
        assert!(emit_mld(&mut buf[..80], MAC, src, g, Change::Join).is_none(), "a short buffer is refused");
    }

    #[test]
    fn reports_are_repeated_and_a_new_change_replaces_the_old() {
        let mut r = McastReports::default();
        let v4 = IpAddr::V4(Ipv4Addr::new(239, 1, 1, 1));
        let v6 = IpAddr::V6("ff12::1".parse().unwrap());
        let mut buf = [0u8; MLD_FRAME_LEN];
        let mut sent = |r: &mut McastReports, ms| {
            let mut v = Vec::new();
            while let Some(n) = r.poll_transmit(t(ms), MAC, Some(Ipv4Addr::new(10, 0, 0, 1)), None, &mut buf) {
                v.push((n, buf[12..14] == [0x08, 0x00]));
            }
            v
        };
        r.change(v4, Change::Join, t(0));
        r.change(v6, Change::Join, t(0));
        assert_eq!(sent(&mut r, 0), [(IGMP_FRAME_LEN, true), (MLD_FRAME_LEN, false)]);
        assert_eq!(r.poll_at(), Some(t(1000)));
        assert_eq!(sent(&mut r, 1000), [(MLD_FRAME_LEN, false)], "MLDv2 repeats after 1 s");
        assert_eq!(sent(&mut r, 9999), []);
        assert_eq!(sent(&mut r, 10_000), [(IGMP_FRAME_LEN, true)], "IGMPv2 after 10 s");
        assert_eq!(r.poll_at(), None);
        // A join whose repeat is pending, then a leave: the leave alone, once for IGMPv2.
        r.change(v4, Change::Join, t(20_000));
        assert_eq!(sent(&mut r, 20_000).len(), 1);
        r.change(v4, Change::Leave, t(20_001));
        assert_eq!(sent(&mut r, 20_001).len(), 1);
        assert_eq!(r.poll_at(), None);
        // The device goes: what is still joined (v6) is left, once per group.
        r.leave_all(t(30_000));
        r.leave_all(t(30_000));
        assert_eq!(sent(&mut r, 30_000), [(MLD_FRAME_LEN, false)]);
        assert_eq!(buf[14 + 40 + 16], 3, "CHANGE_TO_INCLUDE_MODE");
    }
}
