//! `ping`: ICMP (IPv4) or ICMPv6 echo requests through a smoltcp raw socket
//! (raw, so replies come with their IP header and TTL or hop limit), one per
//! interval, replies printed as they come and iputils' statistics at the end.
//! smoltcp resolves the next hop itself (ARP, or neighbour discovery). The
//! shell's prompt waits meanwhile.

use crate::net::Net;
use crate::time::{Duration, Instant};
use crate::{print, println};
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use core::net::IpAddr;
use knet::format::{PingHeader, PingReply, PingStats};
use smoltcp::iface::SocketHandle;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::socket::raw;
use smoltcp::wire::{
    Icmpv4Packet, Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpProtocol, IpVersion, Ipv4Packet, Ipv4Repr, Ipv6Packet,
    Ipv6Repr,
};

/// How long to wait for the last reply after the last request.
const LINGER: Duration = Duration::from_secs(2);
/// Requests sent when `-c` is not given.
pub const DEFAULT_COUNT: u32 = 4;

pub struct PingJob {
    src: IpAddr,
    dst: IpAddr,
    count: u32,
    interval: Duration,
    size: usize,
    ident: u16,
    /// The link the echo requests go out on.
    link: usize,
    socket: SocketHandle,
    sent: BTreeMap<u16, Instant>,
    stats: PingStats,
    started: Instant,
    next_send: Instant,
    give_up: Instant,
    ready: Rc<Cell<bool>>,
}

impl PingJob {
    pub fn deadline(&self) -> Instant {
        if self.stats.transmitted < u64::from(self.count) { self.next_send } else { self.give_up }
    }
}

/// Starts a ping job from `src` to `dst` (the same family) on link `link`;
/// the shell's prompt is held until it ends.
#[allow(clippy::too_many_arguments)]
pub fn start(
    slot: &mut Option<PingJob>,
    net: &mut Net,
    link: usize,
    src: IpAddr,
    dst: IpAddr,
    count: u32,
    interval: Duration,
    size: usize,
    now: Instant,
    ready: Rc<Cell<bool>>,
) {
    let slots = 8;
    let buffer = || raw::PacketBuffer::new(vec![raw::PacketMetadata::EMPTY; slots], vec![0; slots * (size + 64)]);
    let (version, protocol) = match dst {
        IpAddr::V4(_) => (IpVersion::Ipv4, IpProtocol::Icmp),
        IpAddr::V6(_) => (IpVersion::Ipv6, IpProtocol::Icmpv6),
    };
    let socket = raw::Socket::new(Some(version), Some(protocol), buffer(), buffer());
    let Some(l) = net.links.get_mut(link) else { return };
    let handle = l.sockets.add(socket);
    println!("{}", PingHeader { dst, size });
    ready.set(false);
    *slot = Some(PingJob {
        src,
        dst,
        count,
        interval,
        size,
        ident: (now.as_micros() as u16) | 1,
        link,
        socket: handle,
        sent: BTreeMap::new(),
        stats: PingStats::new(dst),
        started: now,
        next_send: now,
        give_up: now,
        ready,
    });
}

/// Advances the job; returns whether it did anything.
pub fn poll(slot: &mut Option<PingJob>, net: &mut Net, now: Instant) -> bool {
    let Some(job) = slot.as_mut() else { return false };
    let Some(link) = net.links.get_mut(job.link) else { return false };
    let socket = link.sockets.get_mut::<raw::Socket>(job.socket);
    let caps = ChecksumCapabilities::default();
    let mut busy = false;
    while let Ok(packet) = socket.recv() {
        busy = true;
        let Some((from, ident, seq_no, len, ttl)) = echo_reply(packet, &caps) else { continue };
        if ident != job.ident || from != job.dst {
            continue;
        }
        if let Some(at) = job.sent.remove(&seq_no) {
            let rtt = now.saturating_since(at);
            job.stats.record_reply(rtt);
            let reply = PingReply { bytes: len + 8, from, seq: seq_no, ttl, rtt };
            println!("{reply}");
        }
    }
    if job.stats.transmitted < u64::from(job.count) && now >= job.next_send && socket.can_send() {
        let seq_no = job.stats.transmitted as u16 + 1;
        let data: Vec<u8> = (0..job.size).map(|i| i as u8).collect();
        if emit_echo_request(socket, job.src, job.dst, job.ident, seq_no, &data, &caps) {
            job.sent.insert(seq_no, now);
            job.stats.record_sent();
            job.next_send = now + job.interval;
            job.give_up = now + LINGER.max(job.interval);
            busy = true;
        }
    }
    let done = job.stats.transmitted == u64::from(job.count)
        && (job.stats.received == u64::from(job.count) || now >= job.give_up);
    if done {
        println!();
        end(slot, net, now);
        busy = true;
    }
    busy
}

/// Ctrl-C: the statistics so far, as iputils prints them on SIGINT.
pub fn interrupt(slot: &mut Option<PingJob>, net: &mut Net, now: Instant) {
    end(slot, net, now);
}

/// Prints the statistics, closes the socket and releases the prompt.
fn end(slot: &mut Option<PingJob>, net: &mut Net, now: Instant) {
    let Some(mut job) = slot.take() else { return };
    job.stats.elapsed = Some(now.saturating_since(job.started));
    print!("{}", job.stats);
    job.ready.set(true);
    if let Some(link) = net.links.get_mut(job.link) {
        link.sockets.remove(job.socket);
    }
}

/// An echo reply as the raw socket hands it over, IP header first: (source,
/// identifier, sequence number, data length, TTL or hop limit).
fn echo_reply(packet: &[u8], caps: &ChecksumCapabilities) -> Option<(IpAddr, u16, u16, usize, u8)> {
    match IpVersion::of_packet(packet).ok()? {
        IpVersion::Ipv4 => {
            let ip = Ipv4Packet::new_checked(packet).ok()?;
            let icmp = Icmpv4Packet::new_checked(ip.payload()).ok()?;
            let Icmpv4Repr::EchoReply { ident, seq_no, data } = Icmpv4Repr::parse(&icmp, caps).ok()? else {
                return None;
            };
            Some((IpAddr::V4(ip.src_addr()), ident, seq_no, data.len(), ip.hop_limit()))
        }
        IpVersion::Ipv6 => {
            let ip = Ipv6Packet::new_checked(packet).ok()?;
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let icmp = Icmpv6Packet::new_checked(ip.payload()).ok()?;
            let Icmpv6Repr::EchoReply { ident, seq_no, data } = Icmpv6Repr::parse(&src, &dst, &icmp, caps).ok()? else {
                return None;
            };
            Some((IpAddr::V6(src), ident, seq_no, data.len(), ip.hop_limit()))
        }
    }
}

/// Queues one echo request on the raw socket; false when it has no room or
/// the addresses are of two families.
fn emit_echo_request(
    socket: &mut raw::Socket,
    src: IpAddr,
    dst: IpAddr,
    ident: u16,
    seq_no: u16,
    data: &[u8],
    caps: &ChecksumCapabilities,
) -> bool {
    match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let icmp = Icmpv4Repr::EchoRequest { ident, seq_no, data };
            let ip = Ipv4Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: IpProtocol::Icmp,
                payload_len: icmp.buffer_len(),
                hop_limit: 64,
            };
            let Ok(buf) = socket.send(ip.buffer_len() + icmp.buffer_len()) else { return false };
            let mut packet = Ipv4Packet::new_unchecked(buf);
            ip.emit(&mut packet, caps);
            icmp.emit(&mut Icmpv4Packet::new_unchecked(packet.payload_mut()), caps);
            true
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let icmp = Icmpv6Repr::EchoRequest { ident, seq_no, data };
            let ip = Ipv6Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: IpProtocol::Icmpv6,
                payload_len: icmp.buffer_len(),
                hop_limit: 64,
            };
            let Ok(buf) = socket.send(ip.buffer_len() + icmp.buffer_len()) else { return false };
            let mut packet = Ipv6Packet::new_unchecked(buf);
            ip.emit(&mut packet);
            icmp.emit(&src, &dst, &mut Icmpv6Packet::new_unchecked(packet.payload_mut()), caps);
            true
        }
        _ => false,
    }
}
