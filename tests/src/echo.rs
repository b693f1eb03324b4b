//! A host process on a guest's wire, timing ICMP echoes: one guest's frame
//! turnaround (request in, reply out) as seen from outside, the same way for
//! an appliance and for Linux.
//!
//! QEMU's `-netdev socket,udp=PEER,localaddr=LOCAL` carries each Ethernet
//! frame as one UDP datagram between 127.0.0.1 ports, without a header (QEMU
//! docs, "socket" netdev: the datagram form). A [`Wire`] bound where the
//! guest sends (its `PEER`) is the other end of the cable: it answers ARP
//! (RFC 826) for its own address so the guest can reply, and sends ICMP echo
//! requests (RFC 792) in IPv4 (RFC 791) to the guest.
//!
//! The frames are built and read by the pure functions at the top (tested
//! below); [`Summary`] turns round-trip times into the percentiles the
//! benchmark reports.

use std::io;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETH_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const ARP_LEN: usize = 28;
const ICMP_HEADER_LEN: usize = 8;
const PROTO_ICMP: u8 = 1;
const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_ECHO_REQUEST: u8 = 8;
const ARP_REQUEST: u16 = 1;
const ARP_REPLY: u16 = 2;
/// The shortest Ethernet frame without its FCS (IEEE 802.3 clause 3.2.8):
/// shorter frames are padded with zeros.
const MIN_FRAME: usize = 60;

/// One end of the wire: its MAC and IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub mac: [u8; 6],
    pub ip: [u8; 4],
}

/// What a received frame means to the prober.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// An ARP request for our address: answer it.
    ArpRequest { from: Endpoint },
    /// An ARP reply to us: the sender's MAC.
    ArpReply { from: Endpoint },
    /// An ICMP echo reply addressed to us.
    EchoReply { from: [u8; 4], id: u16, seq: u16 },
    /// Anything else (IPv6, multicast reports, malformed frames).
    Other,
}

/// The Internet checksum (RFC 1071) of `data`: the value to store, or zero
/// over data that already holds a correct one.
pub fn inet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 =
        data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity((ETH_LEN + payload.len()).max(MIN_FRAME));
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize(f.len().max(MIN_FRAME), 0);
    f
}

fn arp(op: u16, me: Endpoint, target: Endpoint, dst_mac: [u8; 6]) -> Vec<u8> {
    let mut a = Vec::with_capacity(ARP_LEN);
    a.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]); // Ethernet, IPv4, their lengths
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&me.mac);
    a.extend_from_slice(&me.ip);
    a.extend_from_slice(&target.mac);
    a.extend_from_slice(&target.ip);
    ethernet(dst_mac, me.mac, ETHERTYPE_ARP, &a)
}

/// A broadcast ARP request from `me` for `ip`'s MAC.
pub fn arp_request(me: Endpoint, ip: [u8; 4]) -> Vec<u8> {
    arp(ARP_REQUEST, me, Endpoint { mac: [0; 6], ip }, [0xff; 6])
}

/// `me`'s ARP reply to `to`'s request.
pub fn arp_reply(me: Endpoint, to: Endpoint) -> Vec<u8> {
    arp(ARP_REPLY, me, to, to.mac)
}

/// An ICMP echo request from `me` to `to`, with `id`, `seq` and
/// `payload_len` bytes of payload (a counting pattern, as ping's).
pub fn echo_request(me: Endpoint, to: Endpoint, id: u16, seq: u16, payload_len: usize) -> Vec<u8> {
    let mut icmp = vec![ICMP_ECHO_REQUEST, 0, 0, 0];
    icmp.extend_from_slice(&id.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend((0..payload_len).map(|i| i as u8));
    let sum = inet_checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    let total = u16::try_from(IPV4_LEN + icmp.len()).unwrap_or(u16::MAX);
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&seq.to_be_bytes()); // identification
    ip.extend_from_slice(&[0x40, 0, 64, PROTO_ICMP, 0, 0]); // DF, TTL 64, checksum below
    ip.extend_from_slice(&me.ip);
    ip.extend_from_slice(&to.ip);
    let sum = inet_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip.extend_from_slice(&icmp);
    ethernet(to.mac, me.mac, ETHERTYPE_IPV4, &ip)
}

/// Reads `frame` as it concerns `me`; anything malformed or not for us is
/// [`Received::Other`] (never a panic: the frame comes from a guest).
pub fn classify(frame: &[u8], me: Endpoint) -> Received {
    let be16 = |at: usize| frame.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mac_at = |at: usize| frame.get(at..at + 6).and_then(|b| <[u8; 6]>::try_from(b).ok());
    let ip_at = |at: usize| frame.get(at..at + 4).and_then(|b| <[u8; 4]>::try_from(b).ok());
    match be16(12) {
        Some(ETHERTYPE_ARP) => {
            let a = ETH_LEN;
            let shape_ok = frame.get(a..a + 6) == Some(&[0, 1, 0x08, 0x00, 6, 4][..]);
            let (Some(op), Some(mac), Some(ip), Some(target)) =
                (be16(a + 6), mac_at(a + 8), ip_at(a + 14), ip_at(a + 24))
            else {
                return Received::Other;
            };
            let from = Endpoint { mac, ip };
            match op {
                ARP_REQUEST if shape_ok && target == me.ip => Received::ArpRequest { from },
                ARP_REPLY if shape_ok && target == me.ip => Received::ArpReply { from },
                _ => Received::Other,
            }
        }
        Some(ETHERTYPE_IPV4) => {
            let Some(&vihl) = frame.get(ETH_LEN) else { return Received::Other };
            let ihl = usize::from(vihl & 0x0f) * 4;
            let Some(total) = be16(ETH_LEN + 2).map(usize::from) else { return Received::Other };
            let icmp_at = ETH_LEN + ihl;
            let ok = vihl >> 4 == 4
                && ihl >= IPV4_LEN
                && total >= ihl + ICMP_HEADER_LEN
                && frame.len() >= ETH_LEN + total
                && frame.get(ETH_LEN + 9) == Some(&PROTO_ICMP)
                && ip_at(ETH_LEN + 16) == Some(me.ip)
                && frame.get(icmp_at) == Some(&ICMP_ECHO_REPLY)
                && frame.get(ETH_LEN..icmp_at).is_some_and(|h| inet_checksum(h) == 0)
                && frame.get(icmp_at..ETH_LEN + total).is_some_and(|m| inet_checksum(m) == 0);
            match (ok, ip_at(ETH_LEN + 12), be16(icmp_at + 4), be16(icmp_at + 6)) {
                (true, Some(from), Some(id), Some(seq)) => Received::EchoReply { from, id, seq },
                _ => Received::Other,
            }
        }
        _ => Received::Other,
    }
}

/// Percentiles of a set of samples, by the nearest-rank method: the
/// smallest sample with at least that share of the samples at or below it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p10: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    /// `None` for no samples (or any NaN among them).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|x| x.is_nan()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let rank = |p: f64| v[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Summary {
            n,
            min: v[0],
            p10: rank(10.0),
            median: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max: v[n - 1],
            mean: v.iter().sum::<f64>() / n as f64,
        })
    }
}

/// The host's end of a guest's UDP wire.
pub struct Wire {
    sock: UdpSocket,
    me: Endpoint,
}

impl Wire {
    /// Binds a free port on 127.0.0.1 (give it to the guest's NIC as the
    /// peer port) for a host at `me`.
    pub fn bind(me: Endpoint) -> io::Result<Wire> {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        Ok(Wire { sock, me })
    }

    /// The port the guest must send to.
    pub fn port(&self) -> io::Result<u16> {
        self.sock.local_addr().map(|a| a.port())
    }

    /// Sends to, and hears only, the guest whose NIC listens on `guest_port`.
    pub fn connect(&self, guest_port: u16) -> io::Result<()> {
        self.sock.connect(("127.0.0.1", guest_port))
    }

    /// The next frame before `deadline`, answering ARP requests for our
    /// address on the way; `None` past the deadline.
    fn next(&self, deadline: Instant, buf: &mut [u8]) -> io::Result<Option<Received>> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.sock.set_read_timeout(Some(left))?;
            let len = match self.sock.recv(buf) {
                Ok(len) => len,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Ok(None),
                // Nobody listened where the last datagram went (the guest not up yet).
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            let got = classify(buf.get(..len).unwrap_or(&[]), self.me);
            if let Received::ArpRequest { from } = got {
                self.sock.send(&arp_reply(self.me, from))?;
            }
            return Ok(Some(got));
        }
    }

    fn send(&self, frame: &[u8]) -> io::Result<()> {
        match self.sock.send(frame) {
            Ok(_) => Ok(()),
            // An earlier datagram found no listener: this one still goes.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => self.sock.send(frame).map(|_| ()),
            Err(e) => Err(e),
        }
    }

    /// `ip`'s MAC, by ARP requests every 200 ms until `limit`.
    pub fn resolve(&self, ip: [u8; 4], limit: Duration) -> io::Result<Option<[u8; 6]>> {
        let end = Instant::now() + limit;
        let mut buf = vec![0u8; 65536];
        while Instant::now() < end {
            self.send(&arp_request(self.me, ip))?;
            let round = (Instant::now() + Duration::from_millis(200)).min(end);
            while let Some(got) = self.next(round, &mut buf)? {
                if let Received::ArpReply { from } = got
                    && from.ip == ip
                {
                    return Ok(Some(from.mac));
                }
            }
        }
        Ok(None)
    }

    /// One echo to `to`: the time from sending the request to receiving its
    /// reply, or `None` if none came within `limit`.
    pub fn echo(
        &self,
        to: Endpoint,
        id: u16,
        seq: u16,
        payload: usize,
        limit: Duration,
    ) -> io::Result<Option<Duration>> {
        let frame = echo_request(self.me, to, id, seq, payload);
        let mut buf = vec![0u8; 65536];
        let start = Instant::now();
        self.send(&frame)?;
        let deadline = start + limit;
        while let Some(got) = self.next(deadline, &mut buf)? {
            if got == (Received::EchoReply { from: to.ip, id, seq }) {
                return Ok(Some(start.elapsed()));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: Endpoint = Endpoint { mac: [0x02, 0, 0, 0, 0, 0xfe], ip: [10, 0, 0, 254] };
    const GUEST: Endpoint = Endpoint { mac: [0x52, 0x54, 0, 0, 0, 1], ip: [10, 0, 0, 1] };

    /// The reply a guest would send to `request`: addresses swapped, type 0,
    /// both checksums redone.
    fn reply_to(request: &[u8]) -> Vec<u8> {
        let mut f = request.to_vec();
        f.copy_within(6..12, 0);
        f[6..12].copy_from_slice(&GUEST.mac);
        f.copy_within(26..30, 30);
        f[26..30].copy_from_slice(&GUEST.ip);
        f[24..26].fill(0);
        let sum = inet_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        f[34] = ICMP_ECHO_REPLY;
        f[36..38].fill(0);
        let sum = inet_checksum(&f[34..14 + total]);
        f[36..38].copy_from_slice(&sum.to_be_bytes());
        f
    }

    #[test]
    fn an_echo_request_is_well_formed_and_its_reply_is_recognised() {
        let req = echo_request(HOST, GUEST, 0x1234, 7, 56);
        assert_eq!(req.len(), 14 + 20 + 8 + 56);
        assert_eq!(&req[..6], &GUEST.mac);
        assert_eq!(&req[6..12], &HOST.mac);
        assert_eq!(&req[12..14], &[0x08, 0x00]);
        assert_eq!(inet_checksum(&req[14..34]), 0, "IPv4 header checksum");
        assert_eq!(inet_checksum(&req[34..]), 0, "ICMP checksum");
        assert_eq!((req[22], req[23]), (64, PROTO_ICMP));
        assert_eq!(req[34], ICMP_ECHO_REQUEST);
        // A request is not a reply, even to its sender.
        assert_eq!(classify(&req, GUEST), Received::Other);
        let reply = reply_to(&req);
        assert_eq!(classify(&reply, HOST), Received::EchoReply { from: GUEST.ip, id: 0x1234, seq: 7 });
        // Not to us, or with a checksum broken: not ours.
        assert_eq!(classify(&reply, GUEST), Received::Other);
        let mut bad = reply.clone();
        bad[50] ^= 1;
        assert_eq!(classify(&bad, HOST), Received::Other);
    }

    #[test]
    fn short_frames_are_padded_to_the_ethernet_minimum() {
        let req = echo_request(HOST, GUEST, 1, 1, 0);
        assert_eq!(req.len(), MIN_FRAME);
        assert_eq!(classify(&reply_to(&req), HOST), Received::EchoReply { from: GUEST.ip, id: 1, seq: 1 });
        assert_eq!(arp_request(HOST, GUEST.ip).len(), MIN_FRAME);
    }

    #[test]
    fn arp_requests_and_replies_are_read_both_ways() {
        let req = arp_request(HOST, GUEST.ip);
        assert_eq!(&req[..6], &[0xff; 6]);
        assert_eq!(classify(&req, GUEST), Received::ArpRequest { from: HOST });
        assert_eq!(classify(&req, HOST), Received::Other, "a request for another address");
        let reply = arp_reply(GUEST, HOST);
        assert_eq!(&reply[..6], &HOST.mac);
        assert_eq!(classify(&reply, HOST), Received::ArpReply { from: GUEST });
    }

    #[test]
    fn every_truncation_of_a_frame_is_other_not_a_panic() {
        let reply = reply_to(&echo_request(HOST, GUEST, 9, 9, 56));
        for len in 0..reply.len() {
            assert_eq!(classify(&reply[..len], HOST), Received::Other, "{len}");
        }
        // An ARP frame is whole at 42 bytes; the rest is padding.
        let arp = arp_reply(GUEST, HOST);
        for len in 0..42 {
            assert_eq!(classify(&arp[..len], HOST), Received::Other, "{len}");
        }
        assert_eq!(classify(&arp[..42], HOST), Received::ArpReply { from: GUEST });
        // An IHL below 5, and a total length past the frame.
        let mut f = reply_to(&echo_request(HOST, GUEST, 9, 9, 8));
        f[14] = 0x44;
        assert_eq!(classify(&f, HOST), Received::Other);
        let mut f = reply_to(&echo_request(HOST, GUEST, 9, 9, 8));
        f[16..18].copy_from_slice(&1000u16.to_be_bytes());
        assert_eq!(classify(&f, HOST), Received::Other);
    }

    #[test]
    fn the_checksum_is_rfc_1071s() {
        // RFC 1071 section 3's example: the sum of these words is 0xddf2.
        assert_eq!(inet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
        assert_eq!(inet_checksum(&[0xab]), !0xab00, "an odd byte is padded with zero");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!((s.n, s.min, s.p10, s.median, s.p90, s.p99, s.max), (10, 1.0, 1.0, 5.0, 9.0, 10.0, 10.0));
        assert_eq!(s.mean, 5.5);
        let s = Summary::of(&[3.0]).unwrap();
        assert_eq!((s.min, s.p10, s.median, s.p99), (3.0, 3.0, 3.0, 3.0));
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!((s.p10, s.median, s.p90, s.p99), (100.0, 500.0, 900.0, 990.0));
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
    }
}
