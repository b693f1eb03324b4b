//! Console output in the shape of iproute2 (`ip link`, `ip -s link`, `ip addr`,
//! `ip neigh`) and iputils `ping`, so what the appliance prints reads like a
//! Linux box and scripts written against Linux output can parse it.
//!
//! Each view is a small `Display` wrapper; the console writes it with `write!`.
//! Left out on purpose: qdisc, group and qlen (we have none), and the
//! `valid_lft forever preferred_lft forever` lines (no address ever expires).

use alloc::string::String;
use core::fmt::{self, Write};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vocab::time::Duration;

use crate::addr::{IpFamily, is_link_local};
use crate::neigh::{Family, NeighTable};
use crate::netdev::Netdev;
use crate::steer::LinkStats;

/// `ip link show` (and `ip -s link` when `stats`) for one device, in
/// iproute2 6.1's shape:
///
/// ```text
/// 2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000
///     link/ether 52:54:00:00:00:01 brd ff:ff:ff:ff:ff:ff
/// ```
///
/// The device has no queueing discipline (frames go straight to the NIC's
/// ring: Linux's `noqueue`), the default link mode and group, and Linux's
/// default transmit queue length for an Ethernet device, 1000.
pub struct LinkShow<'a> {
    pub dev: &'a Netdev,
    pub stats: bool,
}

/// Linux's `DEFAULT_TX_QUEUE_LEN`, what `ether_setup` gives a device.
const TX_QUEUE_LEN: u32 = 1000;

impl fmt::Display for LinkShow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        link_line(f, self.dev, true)?;
        link_ether(f, self.dev)?;
        if self.stats {
            StatsLines(self.dev.stats()).fmt(f)?;
        }
        Ok(())
    }
}

fn link_ether(f: &mut fmt::Formatter<'_>, d: &Netdev) -> fmt::Result {
    writeln!(f, "    link/ether {} brd ff:ff:ff:ff:ff:ff", d.mac())
}

/// The first line of a device's listing; `ip link` adds the link mode,
/// `ip addr` does not.
fn link_line(f: &mut fmt::Formatter<'_>, d: &Netdev, mode: bool) -> fmt::Result {
    // iproute2 prints NO-CARRIER first when up without a link.
    let no_carrier = if d.is_up() && !d.has_carrier() { "NO-CARRIER," } else { "" };
    let up = if d.is_up() { ",UP" } else { "" };
    let lower_up = if d.is_running() { ",LOWER_UP" } else { "" };
    let state = if d.is_running() { "UP" } else { "DOWN" };
    let mode = if mode { "mode DEFAULT " } else { "" };
    writeln!(
        f,
        "{}: {}: <{no_carrier}BROADCAST,MULTICAST{up}{lower_up}> mtu {} qdisc noqueue state {state} {mode}group default qlen {TX_QUEUE_LEN}",
        d.ifindex(),
        d.name(),
        d.mtu()
    )
}

/// The `ip -s link` counter block, plus our drop reasons and steering split.
pub struct StatsLines<'a>(pub &'a LinkStats);

impl fmt::Display for StatsLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        table(
            f,
            "RX:",
            &["bytes", "packets", "errors", "dropped", "missed", "mcast"],
            &[s.rx_bytes, s.rx_packets, s.rx_errors, s.rx_dropped, s.rx_missed, s.rx_multicast],
        )?;
        table(
            f,
            "TX:",
            &["bytes", "packets", "errors", "dropped", "carrier", "collsns"],
            &[s.tx_bytes, s.tx_packets, s.tx_errors, s.tx_dropped, s.tx_carrier_errors, s.collisions],
        )?;
        writeln!(f, "    RX steer: rdma {} arp {} ndisc {} stack {}", s.rx_rdma, s.rx_arp, s.rx_ndisc, s.rx_stack)?;
        let mut drops = s.nonzero_drops().peekable();
        if drops.peek().is_some() {
            f.write_str("    RX drops:")?;
            for (reason, n) in drops {
                write!(f, " {reason} {n}")?;
            }
            f.write_str("\n")?;
        }
        Ok(())
    }
}

/// A header row and a value row, each column right-aligned to fit both.
fn table(f: &mut fmt::Formatter<'_>, label: &str, heads: &[&str], values: &[u64]) -> fmt::Result {
    let mut head = String::new();
    let mut vals = String::new();
    for (h, v) in heads.iter().zip(values) {
        let mut v_text = String::new();
        let _ = write!(v_text, "{v}");
        let w = h.len().max(v_text.len()).max(6);
        let _ = write!(head, " {h:>w$}");
        let _ = write!(vals, " {v_text:>w$}");
    }
    writeln!(f, "    {label}{head}")?;
    writeln!(f, "    {:w$}{vals}", "", w = label.len())
}

/// `ip addr show` for one device: the link lines, then each address with
/// its lifetimes (static: forever), in iproute2 6.1's shape:
///
/// ```text
///     inet 10.0.0.1/24 scope global eth0
///        valid_lft forever preferred_lft forever
///     inet6 fe80::5054:ff:fe00:1/64 scope link
///        valid_lft forever preferred_lft forever
/// ```
/// An IPv4 address on the same subnet as an earlier one is marked `secondary`,
/// as Linux marks it; IPv6 addresses list wider scopes first, as Linux keeps
/// them. iproute2 ends each address's flags with a space and then prints the
/// label, which only IPv4 addresses have: an IPv6 line ends in a space.
/// Every address here is permanent (Linux's `IFA_F_PERMANENT`), which
/// iproute2 shows by not printing `dynamic`.
///
/// Restricted to one family (`ip -4 addr`, `ip -6 addr`), a device without an
/// address of that family prints nothing, and the `link/ether` line is left
/// out, as iproute2 prints it only for unfiltered listings.
pub struct AddrShow<'a> {
    pub dev: &'a Netdev,
    pub family: Option<IpFamily>,
}

const LIFETIMES: &str = "       valid_lft forever preferred_lft forever";

impl fmt::Display for AddrShow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.dev;
        let v4 = IpFamily::V4.shown_by(self.family);
        let v6 = IpFamily::V6.shown_by(self.family);
        match self.family {
            None => {
                link_line(f, d, false)?;
                link_ether(f, d)?;
            }
            Some(_) if (v4 && !d.ipv4().is_empty()) || (v6 && !d.ipv6().is_empty()) => link_line(f, d, false)?,
            Some(_) => return Ok(()),
        }
        for (i, c) in d.ipv4().iter().enumerate().filter(|_| v4) {
            let secondary =
                d.ipv4()[..i].iter().any(|p| p.prefix_len() == c.prefix_len() && p.contains_addr(&c.address()));
            let sec = if secondary { "secondary " } else { "" };
            writeln!(f, "    inet {c} scope {} {sec}{}", scope4(c.address()), d.name())?;
            writeln!(f, "{LIFETIMES}")?;
        }
        let mut v6: alloc::vec::Vec<_> = d.ipv6().iter().filter(|_| v6).collect();
        v6.sort_by_key(|a| scope6_rank(a.cidr.address()));
        for a in v6 {
            writeln!(f, "    inet6 {} scope {} ", a.cidr, scope6(a.cidr.address()))?;
            writeln!(f, "{LIFETIMES}")?;
        }
        Ok(())
    }
}

fn scope4(a: Ipv4Addr) -> &'static str {
    if a.is_loopback() { "host" } else { "global" }
}

fn scope6(a: Ipv6Addr) -> &'static str {
    match scope6_rank(a) {
        0 => "global",
        1 => "link",
        _ => "host",
    }
}

fn scope6_rank(a: Ipv6Addr) -> u8 {
    if a.is_loopback() {
        2
    } else if is_link_local(a) {
        1
    } else {
        0
    }
}

/// `ip neigh show` for one device's table, one line per entry:
/// `10.0.0.2 dev eth0 lladdr 52:54:00:00:00:02 REACHABLE`.
/// One view per family's table; `ip neigh` prints the IPv4 table then the IPv6
/// one, as the kernel dumps `arp_tbl` before `nd_tbl`.
pub struct NeighShow<'a, F: Family>(pub &'a NeighTable<F>);

impl<F: Family> fmt::Display for NeighShow<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in self.0.entries() {
            write!(f, "{} dev {}", e.ip, self.0.dev_name())?;
            if let Some(mac) = e.mac {
                write!(f, " lladdr {mac}")?;
            }
            writeln!(f, " {}", e.state)?;
        }
        Ok(())
    }
}

/// ping's first line: `PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.`
pub struct PingHeader {
    pub dst: IpAddr,
    /// ICMP payload bytes (`-s`).
    pub size: usize,
}

impl fmt::Display for PingHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The IP packet size in parentheses: ICMP header plus IPv4 header. iputils'
        // IPv6 header has neither that nor the space before the parenthesis.
        match self.dst {
            IpAddr::V4(_) => write!(f, "PING {0} ({0}) {1}({2}) bytes of data.", self.dst, self.size, self.size + 28),
            IpAddr::V6(_) => write!(f, "PING {0}({0}) {1} data bytes", self.dst, self.size),
        }
    }
}

/// One reply line: `64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.512 ms`.
pub struct PingReply {
    /// ICMP bytes received (header included), as ping counts them.
    pub bytes: usize,
    pub from: IpAddr,
    pub seq: u16,
    pub ttl: u8,
    pub rtt: Duration,
}

impl fmt::Display for PingReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bytes from {}: icmp_seq={} ttl={} time={} ms",
            self.bytes,
            self.from,
            self.seq,
            self.ttl,
            Rtt(self.rtt)
        )
    }
}

/// A round-trip time with ping's precision: three significant decimals below
/// 1 ms, then fewer as it grows (0.512, 1.23, 12.3, 123).
struct Rtt(Duration);

impl fmt::Display for Rtt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0.as_micros();
        if us < 1000 {
            return write!(f, "0.{us:03}");
        }
        // Rounded to 2, 1, then 0 decimals; take the first that still shows 3 digits.
        let centi = us.saturating_add(5) / 10;
        if centi < 1000 {
            return write!(f, "{}.{:02}", centi / 100, centi % 100);
        }
        let deci = us.saturating_add(50) / 100;
        if deci < 1000 {
            return write!(f, "{}.{}", deci / 10, deci % 10);
        }
        write!(f, "{}", us.saturating_add(500) / 1000)
    }
}

/// ping's running statistics and its closing summary:
///
/// ```text
/// --- 10.0.0.2 ping statistics ---
/// 3 packets transmitted, 3 received, 0% packet loss, time 2003ms
/// rtt min/avg/max/mdev = 0.412/0.512/0.612/0.081 ms
/// ```
#[derive(Clone, Debug)]
pub struct PingStats {
    pub dst: IpAddr,
    pub transmitted: u64,
    pub received: u64,
    /// From the first request to the last, if the caller measured it.
    pub elapsed: Option<Duration>,
    min_us: u64,
    max_us: u64,
    sum_us: u128,
    sum_sq_us: u128,
}

impl PingStats {
    pub fn new(dst: IpAddr) -> Self {
        PingStats {
            dst,
            transmitted: 0,
            received: 0,
            elapsed: None,
            min_us: u64::MAX,
            max_us: 0,
            sum_us: 0,
            sum_sq_us: 0,
        }
    }

    pub fn record_sent(&mut self) {
        self.transmitted += 1;
    }

    pub fn record_reply(&mut self, rtt: Duration) {
        let us = rtt.as_micros();
        self.received += 1;
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
        self.sum_us += u128::from(us);
        self.sum_sq_us += u128::from(us) * u128::from(us);
    }

    /// (min, avg, max, mdev), or `None` before the first reply. mdev is the
    /// standard deviation, as iputils computes it.
    pub fn rtt(&self) -> Option<(Duration, Duration, Duration, Duration)> {
        let n = u128::from(self.received);
        if n == 0 {
            return None;
        }
        let avg = self.sum_us / n;
        let var = (self.sum_sq_us / n).saturating_sub(avg * avg);
        let us = |v: u128| Duration::from_micros(u64::try_from(v).unwrap_or(u64::MAX));
        Some((Duration::from_micros(self.min_us), us(avg), Duration::from_micros(self.max_us), us(var.isqrt())))
    }
}

impl fmt::Display for PingStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "--- {} ping statistics ---", self.dst)?;
        let lost = self.transmitted.saturating_sub(self.received);
        write!(
            f,
            "{} packets transmitted, {} received, {}% packet loss",
            self.transmitted,
            self.received,
            Percent(lost, self.transmitted)
        )?;
        if let Some(t) = self.elapsed {
            write!(f, ", time {}ms", t.as_micros() / 1000)?;
        }
        writeln!(f)?;
        if let Some((min, avg, max, mdev)) = self.rtt() {
            writeln!(f, "rtt min/avg/max/mdev = {}/{}/{}/{} ms", Ms3(min), Ms3(avg), Ms3(max), Ms3(mdev))?;
        }
        Ok(())
    }
}

/// Milliseconds with three decimals.
struct Ms3(Duration);

impl fmt::Display for Ms3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0.as_micros();
        write!(f, "{}.{:03}", us / 1000, us % 1000)
    }
}

/// `part * 100 / whole` as C's `%g` prints it (six significant digits, no
/// trailing zeros), which is how ping prints its loss: 0, 25, 33.3333.
struct Percent(u64, u64);

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (num, den) = (u128::from(self.0) * 100, u128::from(self.1));
        if num == 0 || den == 0 {
            return f.write_str("0");
        }
        // Where the first significant digit sits: 2 for 33.3, 0 for 0.5, -1 for 0.05.
        let lead = if num >= den {
            let (mut d, mut q) = (0i32, num / den);
            while q > 0 {
                d += 1;
                q /= 10;
            }
            d
        } else {
            let (mut d, mut s) = (1i32, num);
            while s < den {
                s *= 10;
                d -= 1;
            }
            d
        };
        let decimals = (6 - lead).clamp(0, 12) as u32;
        let scale = 10u128.pow(decimals);
        let v = (num * scale + den / 2) / den;
        let (int, mut frac) = (v / scale, v % scale);
        write!(f, "{int}")?;
        if frac == 0 {
            return Ok(());
        }
        let mut digits = decimals;
        while frac % 10 == 0 {
            frac /= 10;
            digits -= 1;
        }
        write!(f, ".{frac:0w$}", w = digits as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::parse_ipv4_cidr;
    use crate::netdev::{NetdevConfig, Netdevs};
    use crate::steer::{Steer, steer};
    use alloc::string::ToString;
    use vocab::MacAddr;

    const MAC1: MacAddr = MacAddr([0x52, 0x54, 0, 0, 0, 1]);

    fn devs() -> Netdevs {
        let mut n = Netdevs::new();
        n.register(&NetdevConfig::ethernet(MAC1)).unwrap();
        n
    }

    #[test]
    fn link_show_in_every_state() {
        let mut n = devs();
        let show = |n: &Netdevs| LinkShow { dev: n.get("eth0").unwrap(), stats: false }.to_string();
        assert_eq!(
            show(&n),
            "2: eth0: <BROADCAST,MULTICAST> mtu 1500 qdisc noqueue state DOWN mode DEFAULT group default qlen 1000\n    link/ether 52:54:00:00:00:01 brd ff:ff:ff:ff:ff:ff\n"
        );
        n.set_up("eth0", true).unwrap();
        assert_eq!(
            show(&n),
            "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000\n    link/ether 52:54:00:00:00:01 brd ff:ff:ff:ff:ff:ff\n"
        );
        n.set_carrier("eth0", false).unwrap();
        assert!(
            show(&n).starts_with("2: eth0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN mode")
        );
    }

    #[test]
    fn link_stats_block() {
        let mut n = devs();
        let s = n.stats_mut(2).unwrap();
        assert_eq!(steer(&[0; 3], [0x52, 0x54, 0, 0, 0, 1], s), Steer::Drop(crate::steer::DropReason::Runt));
        s.record_tx(1514);
        let text = LinkShow { dev: n.get("eth0").unwrap(), stats: true }.to_string();
        let lines: alloc::vec::Vec<_> = text.lines().skip(2).collect();
        assert_eq!(
            lines,
            [
                "    RX:  bytes packets errors dropped missed  mcast",
                "             3       1      1       0      0      0",
                "    TX:  bytes packets errors dropped carrier collsns",
                "          1514       1      0       0       0       0",
                "    RX steer: rdma 0 arp 0 ndisc 0 stack 0",
                "    RX drops: runt 1",
            ]
        );
    }

    #[test]
    fn addr_show_lists_scopes_and_secondaries() {
        let mut n = devs();
        n.set_up("eth0", true).unwrap();
        n.add_ipv4("eth0", parse_ipv4_cidr("10.0.0.1/24").unwrap()).unwrap();
        n.add_ipv4("eth0", parse_ipv4_cidr("10.0.0.5/24").unwrap()).unwrap();
        n.add_ipv4("eth0", parse_ipv4_cidr("192.168.1.1/16").unwrap()).unwrap();
        n.add_ipv6("eth0", crate::addr::parse_ipv6_cidr("2001:db8::1/64").unwrap()).unwrap();
        let text = AddrShow { dev: n.get("eth0").unwrap(), family: None }.to_string();
        let lines: alloc::vec::Vec<_> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default qlen 1000",
                "    link/ether 52:54:00:00:00:01 brd ff:ff:ff:ff:ff:ff",
                "    inet 10.0.0.1/24 scope global eth0",
                LIFETIMES,
                "    inet 10.0.0.5/24 scope global secondary eth0",
                LIFETIMES,
                "    inet 192.168.1.1/16 scope global eth0",
                LIFETIMES,
                "    inet6 2001:db8::1/64 scope global ",
                LIFETIMES,
                "    inet6 fe80::5054:ff:fe00:1/64 scope link ",
                LIFETIMES,
            ]
        );
    }

    #[test]
    fn addr_show_of_one_family() {
        let mut n = devs();
        n.set_up("eth0", true).unwrap();
        n.add_ipv4("eth0", parse_ipv4_cidr("10.0.0.1/24").unwrap()).unwrap();
        n.add_ipv6("eth0", crate::addr::parse_ipv6_cidr("2001:db8::1/64").unwrap()).unwrap();
        let dev = n.get("eth0").unwrap();
        assert_eq!(
            AddrShow { dev, family: Some(IpFamily::V6) }.to_string(),
            "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default qlen 1000\n\
             \x20   inet6 2001:db8::1/64 scope global \n\
             \x20      valid_lft forever preferred_lft forever\n\
             \x20   inet6 fe80::5054:ff:fe00:1/64 scope link \n\
             \x20      valid_lft forever preferred_lft forever\n"
        );
        assert_eq!(
            AddrShow { dev, family: Some(IpFamily::V4) }.to_string(),
            "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default qlen 1000\n\
             \x20   inet 10.0.0.1/24 scope global eth0\n\
             \x20      valid_lft forever preferred_lft forever\n"
        );
        n.del_ipv4("eth0", Ipv4Addr::new(10, 0, 0, 1), None).unwrap();
        assert_eq!(AddrShow { dev: n.get("eth0").unwrap(), family: Some(IpFamily::V4) }.to_string(), "");
    }

    #[test]
    fn neigh_show_of_the_ipv6_table() {
        use crate::neigh::{NdTable, NeighConfig};
        use vocab::time::Instant;
        let mut t = NdTable::new(2, crate::netdev::IfName::try_from("eth0").unwrap(), MAC1, NeighConfig::default());
        t.set_local_addrs(&[crate::addr::link_local_from_mac(MAC1)]);
        t.lookup_or_request("fe80::5054:ff:fe00:2".parse().unwrap(), Instant::ZERO);
        assert_eq!(NeighShow(&t).to_string(), "fe80::5054:ff:fe00:2 dev eth0 INCOMPLETE\n");
    }

    #[test]
    fn neigh_show_lines() {
        use crate::neigh::{ArpTable, NeighConfig};
        use vocab::time::Instant;
        let mut t = ArpTable::new(2, crate::netdev::IfName::try_from("eth0").unwrap(), MAC1, NeighConfig::default());
        t.set_local_addrs(&[parse_ipv4_cidr("10.0.0.1/24").unwrap()]);
        t.lookup_or_request(Ipv4Addr::new(10, 0, 0, 3), Instant::ZERO);
        assert_eq!(NeighShow(&t).to_string(), "10.0.0.3 dev eth0 INCOMPLETE\n");
        // Learn 10.0.0.2 from its request for us.
        let mut req = [0u8; 42];
        let mut eth = smoltcp::wire::EthernetFrame::new_unchecked(&mut req[..]);
        eth.set_dst_addr(smoltcp::wire::EthernetAddress::BROADCAST);
        eth.set_ethertype(smoltcp::wire::EthernetProtocol::Arp);
        smoltcp::wire::ArpRepr::EthernetIpv4 {
            operation: smoltcp::wire::ArpOperation::Request,
            source_hardware_addr: smoltcp::wire::EthernetAddress([0x52, 0x54, 0, 0, 0, 2]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
            target_hardware_addr: smoltcp::wire::EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
        }
        .emit(&mut smoltcp::wire::ArpPacket::new_unchecked(eth.payload_mut()));
        t.process_arp(&req, Instant::ZERO).unwrap();
        assert_eq!(
            NeighShow(&t).to_string(),
            "10.0.0.2 dev eth0 lladdr 52:54:00:00:00:02 STALE\n10.0.0.3 dev eth0 INCOMPLETE\n"
        );
    }

    #[test]
    fn ping_lines() {
        let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(PingHeader { dst, size: 56 }.to_string(), "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.");
        let v6 = IpAddr::V6("2001:db8::2".parse().unwrap());
        assert_eq!(PingHeader { dst: v6, size: 56 }.to_string(), "PING 2001:db8::2(2001:db8::2) 56 data bytes");
        let reply =
            |us| PingReply { bytes: 64, from: dst, seq: 1, ttl: 64, rtt: Duration::from_micros(us) }.to_string();
        assert_eq!(reply(512), "64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.512 ms");
        assert!(reply(1234).ends_with("time=1.23 ms"));
        assert!(reply(9_996).ends_with("time=10.0 ms"), "rounds into the next format");
        assert!(reply(12_345).ends_with("time=12.3 ms"));
        assert!(reply(123_456).ends_with("time=123 ms"));
        assert!(reply(7).ends_with("time=0.007 ms"));
    }

    #[test]
    fn ping_summary() {
        let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let mut s = PingStats::new(dst);
        for us in [412, 512, 612] {
            s.record_sent();
            s.record_reply(Duration::from_micros(us));
        }
        s.elapsed = Some(Duration::from_millis(2003));
        assert_eq!(
            s.to_string(),
            "--- 10.0.0.2 ping statistics ---\n\
             3 packets transmitted, 3 received, 0% packet loss, time 2003ms\n\
             rtt min/avg/max/mdev = 0.412/0.512/0.612/0.081 ms\n"
        );
        let mut s = PingStats::new(dst);
        s.record_sent();
        assert_eq!(
            s.to_string(),
            "--- 10.0.0.2 ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss\n"
        );
    }

    #[test]
    fn loss_percent_like_printf_g() {
        let p = |a, b| Percent(a, b).to_string();
        assert_eq!(p(0, 5), "0");
        assert_eq!(p(1, 4), "25");
        assert_eq!(p(1, 3), "33.3333");
        assert_eq!(p(2, 3), "66.6667");
        assert_eq!(p(1, 8), "12.5");
        assert_eq!(p(1, 1000), "0.1");
        assert_eq!(p(1, 3000), "0.0333333");
        assert_eq!(p(3, 3), "100");
        assert_eq!(p(0, 0), "0");
    }
}
