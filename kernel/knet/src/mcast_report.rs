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
//! smoltcp's `Ipv4Repr` emits no options.
//! - Queries (IGMPv1-3, MLDv1-2; [`parse_query`]) are answered for the
//!   joined groups they cover, once each, within their Max Response Time
//!   (RFC 2236 3, RFC 3810 6.2), so that a snooping switch or a router does
//!   not age the membership out. IGMPv3 and MLDv1 routers get this host's
//!   own versions (IGMPv2 reports, MLDv2 reports) back: no compatibility
//!   modes are kept (RFC 3376 7, RFC 3810 8).

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

/// What a report says about one group on one link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Joined (a state-change report).
    Join,
    /// Left.
    Leave,
    /// Still a member: the answer to a query (IGMPv2 report; MLDv2
    /// current-state record MODE_IS_EXCLUDE).
    Current,
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
        Change::Join | Change::Current => {
            (group, IgmpRepr::MembershipReport { group_addr: group, version: IgmpVersion::Version2 })
        }
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
        Change::Current => MldRecordType::ModeIsExclude,
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
            (IpAddr::V4(_), Change::Leave) | (_, Change::Current) => 1,
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

    /// A router asked (general query: `group` is `None`, for the query's
    /// family): each joined group it covers is reported once, after a delay
    /// within the query's Max Response Time (RFC 2236 3, RFC 3810 6.2), so
    /// that the hosts of a link do not all answer at once. The delay is a
    /// hash of the group and the time rather than a random draw: no entropy
    /// source is needed, and different groups still spread out. A report
    /// already due sooner stands.
    pub fn on_query(&mut self, q: &Query, now: Instant) {
        let covered: Vec<IpAddr> = self
            .joined
            .iter()
            .copied()
            .filter(|g| match q.group {
                Some(want) => *g == want,
                None => g.is_ipv6() == q.ipv6,
            })
            .collect();
        for g in covered {
            let at = Instant::from_micros(now.as_micros() + spread(g, now) % q.max_resp_us.max(1));
            match self.pending.iter_mut().find(|p| p.group == g) {
                Some(p) => p.at = p.at.min(at),
                None => self.pending.push(Pending { group: g, change: Change::Current, at, left: 1 }),
            }
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

/// A membership query: IGMPv1/v2/v3 (RFC 3376 4.1) or MLDv1/v2 (RFC 3810
/// 5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query {
    /// `None` for a general query.
    pub group: Option<IpAddr>,
    /// An MLD query (about IPv6 groups).
    pub ipv6: bool,
    /// The Max Response Time, in microseconds.
    pub max_resp_us: u64,
}

const IGMP_QUERY: u8 = 0x11;
const MLD_QUERY: u8 = 130;

/// The Internet checksum of `data` (RFC 1071): 0 when a message carrying its
/// checksum is intact.
fn inet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// IGMPv3's and MLDv2's Max Resp Code: linear below a threshold, else a
/// floating-point mantissa and exponent (RFC 3376 4.1.1, RFC 3810 5.1.3).
fn exp_code(code: u32, bits: u32) -> u32 {
    if code < 1 << (bits - 1) {
        return code;
    }
    let mant_bits = bits - 4;
    let exp = (code >> mant_bits) & 0x7;
    let mant = code & ((1 << mant_bits) - 1);
    (mant | 1 << mant_bits) << (exp + 3)
}

/// The query an Ethernet frame carries, if it is a well-formed IGMP or MLD
/// query (checksum good; for MLD, hop limit 1 and a link-local source, as
/// RFC 3810 5.1.14-15 requires); `None` for anything else.
pub fn parse_query(frame: &[u8]) -> Option<Query> {
    match frame.get(12..14)? {
        [0x08, 0x00] => {
            let ip = Ipv4Packet::new_checked(frame.get(ETH_HEADER_LEN..)?).ok()?;
            if ip.next_header() != IpProtocol::Igmp || !ip.verify_checksum() {
                return None;
            }
            let igmp = ip.payload();
            if igmp.len() < IGMP_LEN || igmp[0] != IGMP_QUERY || inet_checksum(igmp) != 0 {
                return None;
            }
            let code = u32::from(igmp[1]);
            // Tenths of a second; IGMPv1's zero means 10 s (RFC 2236 4).
            let tenths = match (igmp.len(), code) {
                (IGMP_LEN, 0) => 100,
                (IGMP_LEN, c) => c,
                (_, c) => exp_code(c, 8),
            };
            let g = Ipv4Addr::new(igmp[4], igmp[5], igmp[6], igmp[7]);
            let group = (!g.is_unspecified()).then_some(IpAddr::V4(g));
            Some(Query { group, ipv6: false, max_resp_us: u64::from(tenths) * 100_000 })
        }
        [0x86, 0xdd] => {
            let ip = Ipv6Packet::new_checked(frame.get(ETH_HEADER_LEN..)?).ok()?;
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            if ip.hop_limit() != 1 || !crate::addr::is_link_local(src) {
                return None;
            }
            let payload = ip.payload();
            let icmp = match ip.next_header() {
                IpProtocol::HopByHop => {
                    let len = (usize::from(*payload.get(1)?) + 1) * 8;
                    (*payload.first()? == u8::from(IpProtocol::Icmpv6)).then(|| payload.get(len..))??
                }
                IpProtocol::Icmpv6 => payload,
                _ => return None,
            };
            let packet = Icmpv6Packet::new_checked(icmp).ok()?;
            // MLDv1 queries are 24 bytes, MLDv2 ones at least 28.
            if icmp.len() < 24 || icmp[0] != MLD_QUERY || !packet.verify_checksum(&src, &dst) {
                return None;
            }
            let code = u32::from(u16::from_be_bytes([icmp[4], icmp[5]]));
            let ms = if icmp.len() >= 28 { exp_code(code, 16) } else { code };
            let g = Ipv6Addr::from(<[u8; 16]>::try_from(icmp.get(8..24)?).ok()?);
            let group = (!g.is_unspecified()).then_some(IpAddr::V6(g));
            Some(Query { group, ipv6: true, max_resp_us: u64::from(ms) * 1000 })
        }
        _ => None,
    }
}

/// A well-mixed 64-bit value of `group` and `now` (SplitMix64's finaliser).
fn spread(group: IpAddr, now: Instant) -> u64 {
    let bytes = match group {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    let mut z = bytes
        .chunks(8)
        .fold(now.as_micros(), |h, c| h.rotate_left(29) ^ u64::from_be_bytes(c.try_into().unwrap_or([0; 8])));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
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

    /// A general IGMPv2 query from 10.0.0.254 (max response 10 s), and an
    /// IGMPv3 one with an exponential Max Resp Code.
    fn igmp_query(code: u8, group: [u8; 4], v3: bool) -> Vec<u8> {
        let igmp_len = if v3 { 12 } else { 8 };
        let mut f = vec![0x01, 0x00, 0x5e, 0, 0, 1, 0x52, 0x54, 0, 0, 0, 9, 0x08, 0x00];
        let total = (24 + igmp_len) as u16;
        f.extend_from_slice(&[0x46, 0xc0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 1, 2, 0, 0, 10, 0, 0, 254, 224, 0, 0, 1, 0x94, 4, 0, 0]);
        let ck = inet_checksum(&f[14..38]);
        f[24..26].copy_from_slice(&ck.to_be_bytes());
        let mut igmp = vec![IGMP_QUERY, code, 0, 0, group[0], group[1], group[2], group[3]];
        if v3 {
            igmp.extend_from_slice(&[0x02, 125, 0, 0]);
        }
        let ck = inet_checksum(&igmp);
        igmp[2..4].copy_from_slice(&ck.to_be_bytes());
        f.extend_from_slice(&igmp);
        f
    }

    /// An MLDv2 general query from fe80::1 to ff02::1, as Linux's querier
    /// sends it (hop-by-hop Router Alert first).
    fn mld_query(code: u16, src: Ipv6Addr, hop_limit: u8) -> Vec<u8> {
        let dst: Ipv6Addr = "ff02::1".parse().unwrap();
        let mut icmp = vec![MLD_QUERY, 0, 0, 0];
        icmp.extend_from_slice(&code.to_be_bytes());
        icmp.extend_from_slice(&[0, 0]);
        icmp.extend_from_slice(&[0; 16]);
        icmp.extend_from_slice(&[0x02, 125, 0, 0]);
        let mut f = vec![0x33, 0x33, 0, 0, 0, 1, 0x52, 0x54, 0, 0, 0, 9, 0x86, 0xdd];
        let mut ip = [0u8; 40];
        Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::HopByHop,
            payload_len: 8 + icmp.len(),
            hop_limit,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut ip[..]));
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[58, 0, 5, 2, 0, 0, 1, 0]);
        let at = f.len();
        f.extend_from_slice(&icmp);
        Icmpv6Packet::new_unchecked(&mut f[at..]).fill_checksum(&src, &dst);
        f
    }

    #[test]
    fn queries_parse_with_their_max_response_times() {
        let q = parse_query(&igmp_query(100, [0; 4], false)).unwrap();
        assert_eq!(q, Query { group: None, ipv6: false, max_resp_us: 10_000_000 });
        let q = parse_query(&igmp_query(0, [239, 1, 1, 1], false)).unwrap();
        assert_eq!((q.group, q.max_resp_us), (Some(IpAddr::V4(Ipv4Addr::new(239, 1, 1, 1))), 10_000_000), "IGMPv1");
        // IGMPv3 code 0x8a: mantissa 0xa, exponent 0 -> (0x1a << 3) tenths.
        assert_eq!(parse_query(&igmp_query(0x8a, [0; 4], true)).unwrap().max_resp_us, 208 * 100_000);
        let mut bad = igmp_query(100, [0; 4], false);
        bad[40] ^= 1;
        assert_eq!(parse_query(&bad), None, "IGMP checksum");
        let ll: Ipv6Addr = "fe80::1".parse().unwrap();
        assert_eq!(
            parse_query(&mld_query(10_000, ll, 1)),
            Some(Query { group: None, ipv6: true, max_resp_us: 10_000_000 })
        );
        // MLDv2 code 0x8123: mantissa 0x123, exponent 0 -> 0x1123 << 3 ms.
        assert_eq!(parse_query(&mld_query(0x8123, ll, 1)).unwrap().max_resp_us, (0x1123 << 3) * 1000);
        assert_eq!(parse_query(&mld_query(10_000, ll, 2)), None, "hop limit 1 only");
        assert_eq!(parse_query(&mld_query(10_000, "2001:db8::1".parse().unwrap(), 1)), None, "link-local source only");
        let mut bad = mld_query(10_000, ll, 1);
        bad[70] ^= 1;
        assert_eq!(parse_query(&bad), None, "ICMPv6 checksum");
        let mut buf = [0u8; 64];
        let n =
            emit_igmp(&mut buf, MAC, Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(239, 1, 1, 1), Change::Join).unwrap();
        assert_eq!(parse_query(&buf[..n]), None, "a report is no query");
    }

    #[test]
    fn a_query_is_answered_once_per_joined_group_within_its_time() {
        let mut r = McastReports::default();
        let (a, b) = (IpAddr::V4(Ipv4Addr::new(239, 1, 1, 1)), IpAddr::V4(Ipv4Addr::new(239, 2, 2, 2)));
        let c = IpAddr::V6("ff0e::1".parse().unwrap());
        let mut buf = [0u8; MLD_FRAME_LEN];
        let drain = |r: &mut McastReports, ms| {
            let mut scratch = [0u8; MLD_FRAME_LEN];
            let mut n = 0;
            while r.poll_transmit(t(ms), MAC, None, None, &mut scratch).is_some() {
                n += 1;
            }
            n
        };
        for g in [a, b, c] {
            r.change(g, Change::Join, t(0));
        }
        drain(&mut r, 0);
        drain(&mut r, 20_000);
        assert_eq!(r.poll_at(), None);
        // A general IGMP query: a and b, not the IPv6 group, each once within 1 s.
        r.on_query(&Query { group: None, ipv6: false, max_resp_us: 1_000_000 }, t(30_000));
        assert!(r.poll_at().is_some_and(|at| at < t(31_000)));
        assert_eq!(drain(&mut r, 31_000), 2);
        // A group-specific MLD query for c, with the MLDv2 current-state record.
        r.on_query(&Query { group: Some(c), ipv6: true, max_resp_us: 500_000 }, t(40_000));
        let n = r.poll_transmit(t(40_500), MAC, None, None, &mut buf).unwrap();
        assert_eq!((n, buf[14 + 40 + 16]), (MLD_FRAME_LEN, 2), "MODE_IS_EXCLUDE");
        // A left group is not reported.
        r.change(a, Change::Leave, t(50_000));
        drain(&mut r, 50_000);
        r.on_query(&Query { group: Some(a), ipv6: false, max_resp_us: 1_000_000 }, t(60_000));
        assert_eq!(r.poll_at(), None);
    }
}
