//! Fuzzed frames for a live appliance's wire (`make fuzz-wire`): golden RoCE
//! v2 frames readdressed to a live QP and mutated, then sealed again (IPv4
//! header checksum, UDP checksum 0 as rxe sends, ICRC) so the mutations reach
//! the transport rather than stopping at the ICRC check; and the frames a
//! hostile or broken station sends besides: garbage, ARP storms, IPv4
//! fragments, truncated and oversize frames. Seeded: the same seed, the same
//! frames.

use crate::relay::Rng;

/// Where the frames go, and what they must never name.
#[derive(Clone, Debug)]
pub struct Target {
    /// The appliance's MAC and IPv4 address.
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    /// The station the frames claim to come from (the live QP's peer).
    pub peer_mac: [u8; 6],
    pub peer_ip: [u8; 4],
    /// The live QP the RoCE frames are addressed to, and its expected PSN.
    pub qpn: u32,
    pub epsn: u32,
    /// A memory region of that QP's PD with remote access: RETHs and atomic
    /// headers point into it, so WRITEs, READs and atomics reach memory.
    pub va: u64,
    pub rkey: u32,
    pub len: u32,
    /// QPNs no mutated frame may name (the checker's): a frame with a good
    /// ICRC to a live QP inside its PSN window is indistinguishable from its
    /// peer's (RoCE has no authentication), so hitting it would test nothing
    /// but that.
    pub avoid_qpns: Vec<u32>,
    /// IPv4 addresses an ARP frame may not claim (the live peers'): an ARP
    /// that moves a peer's address to another MAC is an attack ARP cannot
    /// resist, and would only cut the checker off.
    pub avoid_ips: Vec<[u8; 4]>,
}

/// The kinds of frame, in the order the summary lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A golden frame readdressed to the live QP, in its PSN window, unmutated.
    Readdressed,
    /// Readdressed, mutated, re-sealed.
    Mutated,
    /// Readdressed and mutated with the ICRC left stale.
    BadIcrc,
    /// Random bytes, some behind a plausible Ethernet or IP header.
    Garbage,
    /// ARP requests and replies from many made-up stations.
    Arp,
    /// A readdressed RoCE frame cut into an IPv4 fragment.
    Fragment,
    /// A readdressed frame cut short of what its headers say.
    Truncated,
    /// A readdressed frame padded past the link MTU (lengths and ICRC consistent).
    Oversize,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Readdressed,
        Kind::Mutated,
        Kind::BadIcrc,
        Kind::Garbage,
        Kind::Arp,
        Kind::Fragment,
        Kind::Truncated,
        Kind::Oversize,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Readdressed => "readdressed",
            Kind::Mutated => "mutated, ICRC resealed",
            Kind::BadIcrc => "mutated, ICRC stale",
            Kind::Garbage => "garbage",
            Kind::Arp => "ARP storm",
            Kind::Fragment => "IPv4 fragment",
            Kind::Truncated => "truncated",
            Kind::Oversize => "oversize",
        }
    }

    /// How many of every 100 frames are of this kind: mostly frames that
    /// reach the transport, as that is where the state is.
    fn weight(self) -> u64 {
        match self {
            Kind::Readdressed => 10,
            Kind::Mutated => 45,
            Kind::BadIcrc => 5,
            Kind::Garbage => 10,
            Kind::Arp => 10,
            Kind::Fragment => 5,
            Kind::Truncated => 10,
            Kind::Oversize => 5,
        }
    }
}

const ETH: usize = 14;
const IP: usize = ETH;
const UDP: usize = IP + 20;
const BTH: usize = UDP + 8;
const ICRC: usize = 4;
const ROCE_PORT: u16 = 4791;

/// Generates the frames.
pub struct Fuzzer {
    rng: Rng,
    /// Golden IPv4 RoCE v2 frames with a 20-byte IP header.
    golden: Vec<Vec<u8>>,
}

impl Fuzzer {
    /// A fuzzer over `golden` frames (those that are not IPv4 RoCE v2 without
    /// IP options are left out); `None` if none is left.
    pub fn new(golden: Vec<Vec<u8>>, seed: u64) -> Option<Fuzzer> {
        let golden: Vec<Vec<u8>> = golden
            .into_iter()
            .filter(|f| {
                f.len() >= BTH + 12 + ICRC
                    && f[12..14] == [0x08, 0x00]
                    && f[IP] == 0x45
                    && f[IP + 9] == 17
                    && f[UDP + 2..UDP + 4] == ROCE_PORT.to_be_bytes()
            })
            .collect();
        (!golden.is_empty()).then_some(Fuzzer { rng: Rng(seed), golden })
    }

    /// A kind drawn by the weights.
    pub fn kind(&mut self) -> Kind {
        let mut n = self.rng.below(100);
        for k in Kind::ALL {
            if n < k.weight() {
                return k;
            }
            n -= k.weight();
        }
        Kind::Mutated
    }

    /// One frame of `kind` for `t`.
    pub fn frame(&mut self, kind: Kind, t: &Target) -> Vec<u8> {
        match kind {
            Kind::Readdressed => {
                let mut f = self.readdressed(t);
                seal(&mut f);
                f
            }
            Kind::Mutated | Kind::BadIcrc => {
                let mut f = self.readdressed(t);
                for _ in 0..1 + self.rng.below(3) {
                    self.mutate(&mut f);
                }
                // Whatever the mutations did to the QPN, never the checker's.
                if f.len() >= BTH + 8 && t.avoid_qpns.contains(&be24(&f[BTH + 5..BTH + 8])) {
                    f[BTH + 5..BTH + 8].copy_from_slice(&t.qpn.to_be_bytes()[1..]);
                }
                if kind == Kind::Mutated {
                    seal(&mut f);
                } else {
                    let good = self.sealed_icrc(&f);
                    let at = f.len() - ICRC;
                    let stale = good ^ (1 << self.rng.below(32)) as u32;
                    f[at..].copy_from_slice(&stale.to_le_bytes());
                }
                f
            }
            Kind::Garbage => self.garbage(t),
            Kind::Arp => self.arp(t),
            Kind::Fragment => {
                let mut f = self.readdressed(t);
                // More fragments, an offset, or both; the header checksum right.
                let offset = match self.rng.below(3) {
                    0 => 0x2000,
                    1 => 0x2000 | (1 + self.rng.below(0x1fff)) as u16,
                    _ => (1 + self.rng.below(0x1fff)) as u16,
                };
                seal(&mut f);
                f[IP + 6..IP + 8].copy_from_slice(&offset.to_be_bytes());
                ip_checksum(&mut f);
                f
            }
            Kind::Truncated => {
                let mut f = self.readdressed(t);
                seal(&mut f);
                let cut = 1 + self.rng.below(f.len() as u64 - 1) as usize;
                f.truncate(cut);
                f
            }
            Kind::Oversize => {
                let mut f = self.readdressed(t);
                // Whole words more payload, so the pad count stays right.
                let words = (1515usize.saturating_sub(f.len())).div_ceil(4) + self.rng.below(1800) as usize;
                let end = f.len() - ICRC;
                let fill = self.rng.next() as u8;
                f.splice(end..end, std::iter::repeat_n(fill, 4 * words));
                fix_lengths(&mut f);
                seal(&mut f);
                f
            }
        }
    }

    /// A golden frame from the peer to `t`'s QP, PSN near the expected one,
    /// RETH or atomic header into `t`'s region most of the time; not sealed.
    fn readdressed(&mut self, t: &Target) -> Vec<u8> {
        let pick = self.rng.below(self.golden.len() as u64) as usize;
        let mut f = self.golden[pick].clone();
        f[0..6].copy_from_slice(&t.mac);
        f[6..12].copy_from_slice(&t.peer_mac);
        f[IP + 4..IP + 6].copy_from_slice(&(self.rng.next() as u16).to_be_bytes());
        f[IP + 12..IP + 16].copy_from_slice(&t.peer_ip);
        f[IP + 16..IP + 20].copy_from_slice(&t.ip);
        f[UDP..UDP + 2].copy_from_slice(&(0xc000 | self.rng.next() as u16 & 0x3fff).to_be_bytes());
        f[BTH + 5..BTH + 8].copy_from_slice(&t.qpn.to_be_bytes()[1..]);
        // Mostly in the window (the expected PSN, a duplicate, a little
        // ahead), sometimes anywhere.
        let psn = if self.rng.chance(0.9) {
            t.epsn.wrapping_add(self.rng.below(12) as u32).wrapping_sub(4)
        } else {
            self.rng.next() as u32
        };
        f[BTH + 9..BTH + 12].copy_from_slice(&(psn & 0xff_ffff).to_be_bytes()[1..]);
        let opcode = f[BTH];
        let reth = matches!(opcode, 0x06 | 0x0a | 0x0b | 0x0c | 0x13 | 0x14 | 0x1d);
        if reth && f.len() >= BTH + 28 + ICRC && self.rng.chance(0.8) {
            let at = BTH + 12;
            let atomic = matches!(opcode, 0x13 | 0x14);
            let dma = if atomic { 8 } else { be32(&f[at + 12..at + 16]) };
            let room = u64::from(t.len.saturating_sub(dma));
            let mut off = self.rng.below(room + 1);
            if atomic {
                off &= !7;
            }
            f[at..at + 8].copy_from_slice(&(t.va + off).to_be_bytes());
            f[at + 8..at + 12].copy_from_slice(&t.rkey.to_be_bytes());
        }
        f
    }

    /// One mutation of a readdressed frame, mostly in the transport headers.
    fn mutate(&mut self, f: &mut Vec<u8>) {
        let end = f.len() - ICRC;
        match self.rng.below(9) {
            // Bit flips anywhere after UDP, headers weighted: the first 32 bytes.
            0 | 1 => {
                let span = if self.rng.chance(0.7) { (end - BTH).min(32) } else { end - BTH };
                let at = BTH + self.rng.below(span as u64) as usize;
                f[at] ^= 1 << self.rng.below(8);
            }
            // A random byte in the BTH or the header after it.
            2 => {
                let at = BTH + self.rng.below((end - BTH).min(28) as u64) as usize;
                f[at] = self.rng.next() as u8;
            }
            // Any opcode: RC, UC, UD, CNP, reserved.
            3 => f[BTH] = self.rng.next() as u8,
            // Pad count, migration and version bits.
            4 => f[BTH + 1] = self.rng.next() as u8,
            // P_Key.
            5 => f[BTH + 2..BTH + 4].copy_from_slice(&(self.rng.next() as u16).to_be_bytes()),
            // The payload grown or shrunk, lengths kept consistent or not.
            6 => {
                let by = 1 + self.rng.below(8) as usize;
                if self.rng.chance(0.5) && end - by > BTH {
                    f.drain(end - by..end);
                } else {
                    f.splice(end..end, std::iter::repeat_n(0xa5, by));
                }
                if self.rng.chance(0.8) {
                    fix_lengths(f);
                }
            }
            // IP and UDP header fields the parser checks (lengths, version,
            // IHL, protocol, addresses): the checksum is fixed on sealing.
            7 => {
                let at = IP + [0, 2, 3, 8, 9, 12, 15, 19][self.rng.below(8) as usize];
                f[at] ^= 1 << self.rng.below(8);
            }
            _ => {
                let at = UDP + self.rng.below(6) as usize;
                f[at] ^= 1 << self.rng.below(8);
            }
        }
    }

    /// The ICRC `seal` would write.
    fn sealed_icrc(&self, f: &[u8]) -> u32 {
        let mut g = f.to_vec();
        seal(&mut g);
        let at = g.len() - ICRC;
        u32::from_le_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]])
    }

    fn garbage(&mut self, t: &Target) -> Vec<u8> {
        // At least a byte: no wire carries an empty frame (and QEMU's UDP
        // netdev takes an empty datagram for the end of the connection).
        let len = 1 + self.rng.below(1600) as usize;
        let mut f: Vec<u8> = (0..len).map(|_| self.rng.next() as u8).collect();
        match self.rng.below(4) {
            // Random all through (mostly another station's MAC, or multicast).
            0 => {}
            // To us, a random EtherType.
            1 if len >= ETH => f[0..6].copy_from_slice(&t.mac),
            // To us, IPv4 with a random rest.
            2 if len > ETH => {
                f[0..6].copy_from_slice(&t.mac);
                f[12..14].copy_from_slice(&[0x08, 0x00]);
                f[IP] = 0x45;
            }
            // To us, IPv6.
            _ if len > ETH => {
                f[0..6].copy_from_slice(&t.mac);
                f[12..14].copy_from_slice(&[0x86, 0xdd]);
                f[IP] = 0x60;
            }
            _ => {}
        }
        f
    }

    /// A request or reply from a made-up station on the subnet, broadcast or
    /// to us; sometimes a runt.
    fn arp(&mut self, t: &Target) -> Vec<u8> {
        let mut sender_ip = t.ip;
        while sender_ip == t.ip || t.avoid_ips.contains(&sender_ip) {
            sender_ip[3] = self.rng.next() as u8;
        }
        let mut sender_mac = (self.rng.next().to_be_bytes())[..6].to_vec();
        sender_mac[0] &= 0xfe;
        let reply = self.rng.chance(0.5);
        let mut f = Vec::with_capacity(60);
        f.extend_from_slice(if reply { &t.mac } else { &[0xff; 6] });
        f.extend_from_slice(&sender_mac);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, if reply { 2 } else { 1 }]);
        f.extend_from_slice(&sender_mac);
        f.extend_from_slice(&sender_ip);
        let target_ip = if self.rng.chance(0.5) { t.ip } else { [t.ip[0], t.ip[1], t.ip[2], self.rng.next() as u8] };
        f.extend_from_slice(if reply { &t.mac } else { &[0; 6] });
        f.extend_from_slice(&target_ip);
        f.resize(60, 0);
        if self.rng.chance(0.05) {
            f.truncate(ETH + self.rng.below(28) as usize);
        }
        f
    }
}

/// Makes the IPv4 total length and UDP length match the frame.
fn fix_lengths(f: &mut [u8]) {
    let ip_len = (f.len() - IP) as u16;
    f[IP + 2..IP + 4].copy_from_slice(&ip_len.to_be_bytes());
    f[UDP + 4..UDP + 6].copy_from_slice(&(ip_len - 20).to_be_bytes());
}

/// The IPv4 header checksum recomputed, the UDP checksum 0 (as rxe sends
/// RoCE v2), the ICRC recomputed over what the frame now says (left as is
/// if its headers are too broken for an ICRC).
pub fn seal(f: &mut [u8]) {
    if f.len() < BTH + ICRC {
        return;
    }
    ip_checksum(f);
    f[UDP + 6..UDP + 8].fill(0);
    let end = f.len() - ICRC;
    if let Ok(crc) = rdma::wire::icrc::compute(&f[IP..end]) {
        f[end..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The IPv4 header checksum of a frame's 20-byte header, recomputed.
fn ip_checksum(f: &mut [u8]) {
    f[IP + 10..IP + 12].fill(0);
    let sum: u32 = f[IP..IP + 20].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    f[IP + 10..IP + 12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
}

fn be24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The golden captures of `rdma/tests/fixtures` (pcapng, and pcap), every frame.
pub fn golden_frames() -> Result<Vec<Vec<u8>>, String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rdma/tests/fixtures");
    let mut out = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths.iter().filter(|p| p.extension().is_some_and(|x| x == "pcap")) {
        let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let frames = if bytes.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
            crate::pcap::pcapng_frames(&bytes)
        } else {
            crate::pcap::frames(&bytes)
        };
        let frames = frames.map_err(|e| format!("{}: {e}", p.display()))?;
        out.extend(frames.into_iter().map(<[u8]>::to_vec));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdma::wire::frame;

    fn target() -> Target {
        Target {
            mac: [0x52, 0x54, 0, 0, 0, 1],
            ip: [10, 0, 0, 1],
            peer_mac: [0x52, 0x54, 0, 0, 0, 2],
            peer_ip: [10, 0, 0, 2],
            qpn: 0x11,
            epsn: 0x1234,
            va: 0x10_0000,
            rkey: 0x1234_5600,
            len: 65536,
            avoid_qpns: vec![0x12],
            avoid_ips: vec![[10, 0, 0, 2]],
        }
    }

    fn fuzzer(seed: u64) -> Fuzzer {
        Fuzzer::new(golden_frames().unwrap(), seed).unwrap()
    }

    #[test]
    fn readdressed_frames_parse_to_the_target_with_their_icrc_good() {
        let (mut z, t) = (fuzzer(1), target());
        for _ in 0..2000 {
            let f = z.frame(Kind::Readdressed, &t);
            let rx = frame::parse(&f).unwrap_or_else(|e| panic!("{e:?}: {f:02x?}"));
            let dbg = format!("{rx:?}");
            assert_eq!(be24(&f[BTH + 5..BTH + 8]), t.qpn, "{dbg}");
            assert_eq!((&f[0..6], &f[IP + 12..IP + 16], &f[IP + 16..IP + 20]), (&t.mac[..], &t.peer_ip[..], &t.ip[..]));
        }
    }

    #[test]
    fn mutations_mostly_pass_the_icrc_and_never_name_the_checker() {
        let (mut z, t) = (fuzzer(2), target());
        let (mut accepted, mut icrc) = (0, 0);
        for _ in 0..20_000 {
            let f = z.frame(Kind::Mutated, &t);
            assert!(f.get(BTH + 5..BTH + 8).is_none_or(|q| be24(q) != 0x12));
            match frame::parse(&f) {
                Ok(_) => accepted += 1,
                Err(frame::DropReason::BadIcrc) => icrc += 1,
                Err(_) => {}
            }
        }
        // The ICRC is resealed over whatever the headers say, so only frames
        // whose headers no longer frame an ICRC fail it.
        assert!(accepted > 5_000 && icrc < 2_000, "{accepted} accepted, {icrc} bad ICRC");
        for _ in 0..2000 {
            let f = z.frame(Kind::BadIcrc, &t);
            assert!(frame::parse(&f).is_err());
        }
    }

    #[test]
    fn each_kind_is_refused_for_its_reason() {
        let (mut z, t) = (fuzzer(3), target());
        let reason = |f: &[u8]| frame::parse(f).err();
        for _ in 0..500 {
            assert_eq!(reason(&z.frame(Kind::Fragment, &t)), Some(frame::DropReason::IpFragment));
            let f = z.frame(Kind::Oversize, &t);
            assert!(f.len() > 1514 && f.len() <= 9000, "{}", f.len());
            // Well-formed (but for opcodes that carry no payload): only the
            // link MTU makes it too big.
            let r = reason(&f);
            assert!(matches!(r, None | Some(frame::DropReason::HeaderMismatch)), "{}: {r:?}", f.len());
            let f = z.frame(Kind::Arp, &t);
            assert_eq!(&f[12..14], &[0x08, 0x06]);
            assert!(f.get(28..32).is_none_or(|ip| ip != [10, 0, 0, 2]));
            assert!(reason(&z.frame(Kind::Truncated, &t)).is_some());
        }
        // QEMU's UDP netdev stops for good on an empty datagram.
        for k in Kind::ALL {
            assert!((0..2000).all(|_| !z.frame(k, &t).is_empty()), "{k:?}");
        }
        let run = |seed| {
            let mut z = fuzzer(seed);
            (0..100).map(|_| z.frame(Kind::Mutated, &t)).collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
    }
}
