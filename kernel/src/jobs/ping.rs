//! `ping`: ICMP echo requests through a smoltcp raw socket (raw, so replies
//! come with their IP header and TTL), one per interval, replies printed as they
//! come and iputils' statistics at the end. The shell's prompt waits meanwhile.

use crate::net::Net;
use crate::time::{Duration, Instant};
use crate::{print, println};
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use knet::format::{PingHeader, PingReply, PingStats};
use smoltcp::iface::SocketHandle;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::socket::raw;
use smoltcp::wire::{Icmpv4Packet, Icmpv4Repr, IpProtocol, IpVersion, Ipv4Address, Ipv4Packet, Ipv4Repr};

/// How long to wait for the last reply after the last request.
const LINGER: Duration = Duration::from_secs(2);
/// Requests sent when `-c` is not given (the console cannot interrupt a run).
pub const DEFAULT_COUNT: u32 = 4;

pub struct PingJob {
    src: Ipv4Address,
    dst: Ipv4Address,
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

/// Starts a ping job from `src`; the shell's prompt is held until it ends.
#[allow(clippy::too_many_arguments)]
pub fn start(
    slot: &mut Option<PingJob>,
    net: &mut Net,
    src: Ipv4Address,
    dst: Ipv4Address,
    count: u32,
    interval: Duration,
    size: usize,
    now: Instant,
    ready: Rc<Cell<bool>>,
) {
    let slots = 8;
    let buffer = || raw::PacketBuffer::new(vec![raw::PacketMetadata::EMPTY; slots], vec![0; slots * (size + 64)]);
    let socket = raw::Socket::new(Some(IpVersion::Ipv4), Some(IpProtocol::Icmp), buffer(), buffer());
    let link = net.link_for(dst);
    let Some(l) = net.links.get_mut(link) else { return };
    let handle = l.sockets.add(socket);
    println!("{}", PingHeader { dst: dst.into(), size });
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
        stats: PingStats::new(dst.into()),
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
        let Ok(ip) = Ipv4Packet::new_checked(packet) else { continue };
        let Ok(icmp) = Icmpv4Packet::new_checked(ip.payload()) else { continue };
        let Ok(Icmpv4Repr::EchoReply { ident, seq_no, data }) = Icmpv4Repr::parse(&icmp, &caps) else { continue };
        if ident != job.ident || ip.src_addr() != job.dst {
            continue;
        }
        if let Some(at) = job.sent.remove(&seq_no) {
            let rtt = now.saturating_since(at);
            job.stats.record_reply(rtt);
            let reply =
                PingReply { bytes: data.len() + 8, from: job.dst.into(), seq: seq_no, ttl: ip.hop_limit(), rtt };
            println!("{reply}");
        }
    }
    if job.stats.transmitted < u64::from(job.count) && now >= job.next_send && socket.can_send() {
        let seq_no = job.stats.transmitted as u16 + 1;
        let data: Vec<u8> = (0..job.size).map(|i| i as u8).collect();
        let icmp = Icmpv4Repr::EchoRequest { ident: job.ident, seq_no, data: &data };
        let ip = Ipv4Repr {
            src_addr: job.src,
            dst_addr: job.dst,
            next_header: IpProtocol::Icmp,
            payload_len: icmp.buffer_len(),
            hop_limit: 64,
        };
        if let Ok(buf) = socket.send(ip.buffer_len() + icmp.buffer_len()) {
            let mut packet = Ipv4Packet::new_unchecked(buf);
            ip.emit(&mut packet, &caps);
            icmp.emit(&mut Icmpv4Packet::new_unchecked(packet.payload_mut()), &caps);
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
        job.stats.elapsed = Some(now.saturating_since(job.started));
        print!("\n{}", job.stats);
        job.ready.set(true);
        let handle = job.socket;
        link.sockets.remove(handle);
        *slot = None;
        busy = true;
    }
    busy
}
