//! `ping`: ICMP echo requests on a smoltcp ICMP socket, one every interval,
//! replies printed as they come, statistics in iputils' shape at the end. The
//! shell's prompt waits until the job is done.

use super::Net;
use crate::time::{Duration, Instant};
use crate::{print, println};
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use smoltcp::iface::SocketHandle;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::socket::icmp;
use smoltcp::wire::{Icmpv4Packet, Icmpv4Repr, IpAddress, Ipv4Address};

/// How long to wait for the last reply after the last request.
const LINGER: Duration = Duration::from_secs(2);

pub struct PingJob {
    target: Ipv4Address,
    count: u32,
    interval: Duration,
    size: usize,
    ident: u16,
    socket: SocketHandle,
    sent: BTreeMap<u16, Instant>,
    transmitted: u32,
    rtts_us: Vec<u64>,
    next_send: Instant,
    give_up: Instant,
    ready: Rc<Cell<bool>>,
}

impl PingJob {
    pub fn deadline(&self) -> Instant {
        if self.transmitted < self.count { self.next_send } else { self.give_up }
    }
}

/// Starts a ping job; the shell's prompt is held until it ends.
pub fn start(
    net: &mut Net,
    target: Ipv4Address,
    count: u32,
    interval: Duration,
    size: usize,
    now: Instant,
    ready: Rc<Cell<bool>>,
) {
    let buffer = || icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; 16], vec![0; 16 * (size + 64)]);
    let mut socket = icmp::Socket::new(buffer(), buffer());
    let ident = (now.as_micros() as u16) | 1;
    // Binding an identifier on a fresh socket cannot fail.
    let _ = socket.bind(icmp::Endpoint::Ident(ident));
    let handle = net.sockets.add(socket);
    println!("PING {target} {size}({}) bytes of data.", size + 28);
    ready.set(false);
    net.ping = Some(PingJob {
        target,
        count,
        interval,
        size,
        ident,
        socket: handle,
        sent: BTreeMap::new(),
        transmitted: 0,
        rtts_us: Vec::new(),
        next_send: now,
        give_up: now,
        ready,
    });
}

/// Advances the job; returns whether it did anything.
pub fn poll(net: &mut Net, now: Instant) -> bool {
    let Some(job) = net.ping.as_mut() else { return false };
    let socket = net.sockets.get_mut::<icmp::Socket>(job.socket);
    let caps = ChecksumCapabilities::default();
    let mut busy = false;
    while let Ok((payload, from)) = socket.recv() {
        busy = true;
        let Ok(packet) = Icmpv4Packet::new_checked(payload) else { continue };
        let Ok(Icmpv4Repr::EchoReply { ident, seq_no, data }) = Icmpv4Repr::parse(&packet, &caps) else { continue };
        if ident != job.ident || from != IpAddress::Ipv4(job.target) {
            continue;
        }
        if let Some(at) = job.sent.remove(&seq_no) {
            let rtt = now.saturating_since(at).as_micros();
            job.rtts_us.push(rtt);
            println!(
                "{} bytes from {}: icmp_seq={} time={}.{:03} ms",
                data.len() + 8,
                job.target,
                seq_no,
                rtt / 1000,
                rtt % 1000
            );
        }
    }
    if job.transmitted < job.count && now >= job.next_send && socket.can_send() {
        let seq_no = job.transmitted as u16 + 1;
        let data: Vec<u8> = (0..job.size).map(|i| i as u8).collect();
        let repr = Icmpv4Repr::EchoRequest { ident: job.ident, seq_no, data: &data };
        if let Ok(buf) = socket.send(repr.buffer_len(), IpAddress::Ipv4(job.target)) {
            repr.emit(&mut Icmpv4Packet::new_unchecked(buf), &caps);
            job.sent.insert(seq_no, now);
            job.transmitted += 1;
            job.next_send = now + job.interval;
            job.give_up = now + LINGER.max(job.interval);
            busy = true;
        }
    }
    let answered = job.rtts_us.len() as u32;
    if job.transmitted == job.count && (answered == job.count || now >= job.give_up) {
        finish(job);
        let handle = job.socket;
        net.sockets.remove(handle);
        net.ping = None;
        busy = true;
    }
    busy
}

fn finish(job: &PingJob) {
    let (tx, rx) = (job.transmitted, job.rtts_us.len() as u32);
    println!("\n--- {} ping statistics ---", job.target);
    let loss = if tx == 0 { 0 } else { (tx - rx) * 100 / tx };
    print!("{tx} packets transmitted, {rx} received, {loss}% packet loss\n");
    if rx > 0 {
        let n = u64::from(rx);
        let min = job.rtts_us.iter().copied().min().unwrap_or(0);
        let max = job.rtts_us.iter().copied().max().unwrap_or(0);
        let avg = job.rtts_us.iter().sum::<u64>() / n;
        let var = job.rtts_us.iter().map(|r| r.abs_diff(avg).pow(2)).sum::<u64>() / n;
        let ms = |us: u64| (us / 1000, us % 1000);
        let (a, b, c, d) = (ms(min), ms(avg), ms(max), ms(var.isqrt()));
        println!(
            "rtt min/avg/max/mdev = {}.{:03}/{}.{:03}/{}.{:03}/{}.{:03} ms",
            a.0, a.1, b.0, b.1, c.0, c.1, d.0, d.1
        );
    }
    job.ready.set(true);
}
