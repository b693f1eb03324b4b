//! perftest's TCP side channel, as Debian bookworm's perftest 4.5+0.17
//! speaks it without rdma_cm (it calls itself version 6.06).
//!
//! Every message has a fixed size and no framing: an exchange is the
//! client writing its message and then reading the server's, while the
//! server reads first and then writes. That order is what keeps the two
//! programs in step, so each test must make the same exchanges in the same
//! order as the perftest program it stands in for ([`super::Test`] holds
//! the scripts). The messages:
//!
//! | what           | bytes | encoding                                         |
//! |----------------|-------|--------------------------------------------------|
//! | version        | 16    | NUL-padded text, `6.06`; peers below 5.70 refused |
//! | page size      | 4     | big-endian i32; both keep the larger             |
//! | cache line     | 4     | big-endian i32; both keep the larger             |
//! | path MTU       | 2     | `enum ibv_mtu` as one decimal digit and a NUL    |
//! | keys           | 108   | `LID:OUT_READS:QPN:PSN:RKEY:VADDR:GID…:SRQN:` hex |
//! | bw report      | 5 × 8 | size, iterations (u64), peak, average MB/s and Mpps (f64), all big-endian |
//! | done           | 5     | `done` and a NUL, written by both, read by none  |
//!
//! With `-R` (or `-z`) the same messages, in the same order and sizes,
//! travel as SENDs over an RC connection of their own made through
//! rdma_cm ([`super::cm`]), each into the one receive the reader keeps
//! posted, except that the keys are perftest's `struct pingpong_dest` in
//! binary ([`KEYS_BIN_LEN`] bytes, big-endian) and nothing follows the last
//! handshake.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::Error;

/// The version this side announces.
pub const VERSION: &str = "6.06";
/// perftest refuses peers older than this (another exchange).
const OLDEST_PEER: f64 = 5.70;
const VERSION_LEN: usize = 16;
/// `KEY_MSG_SIZE_GID`: the keys message of RoCE ports (107 characters and a NUL).
pub const KEYS_LEN: usize = 108;

/// `sizeof(struct pingpong_dest)` on x86-64: the keys over rdma_cm, and
/// the size of the receive each side keeps posted there.
pub const KEYS_BIN_LEN: usize = 56;

/// One side's queue pair and buffer (perftest's `pingpong_dest`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keys {
    pub lid: u16,
    /// The RDMA READs and atomics this side answers at once: the peer's
    /// `max_rd_atomic`.
    pub out_reads: u16,
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    /// Where the peer writes, reads or applies atomics.
    pub vaddr: u64,
    pub gid: [u8; 16],
    pub srqn: u32,
}

impl Keys {
    pub fn encode(&self) -> [u8; KEYS_LEN] {
        let mut text = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.vaddr
        );
        for b in self.gid {
            text.push_str(&format!("{b:02x}:"));
        }
        text.push_str(&format!("{:08x}:", self.srqn));
        let mut msg = [0u8; KEYS_LEN];
        // Every field has a fixed width, so the text is always 107 bytes.
        msg[..text.len()].copy_from_slice(text.as_bytes());
        msg
    }

    /// `None` for a message that is not a keys message.
    pub fn decode(msg: &[u8]) -> Option<Keys> {
        let text = std::str::from_utf8(c_str(msg)).ok()?;
        let f: Vec<&str> = text.split(':').collect();
        if f.len() < 23 {
            return None;
        }
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        let mut gid = [0u8; 16];
        for (b, s) in gid.iter_mut().zip(&f[6..22]) {
            *b = u8::try_from(hex(s)?).ok()?;
        }
        Some(Keys {
            lid: u16::try_from(hex(f[0])?).ok()?,
            out_reads: u16::try_from(hex(f[1])?).ok()?,
            qpn: u32::try_from(hex(f[2])?).ok()?,
            psn: u32::try_from(hex(f[3])?).ok()?,
            rkey: u32::try_from(hex(f[4])?).ok()?,
            vaddr: hex(f[5])?,
            gid,
            srqn: u32::try_from(hex(f[22])?).ok()?,
        })
    }

    /// perftest's `pingpong_dest` as `rdma_write_keys` sends it: `lid`,
    /// `out_reads`, `qpn`, `psn`, `rkey` as big-endian 32-bit words, 4 bytes
    /// of padding, `vaddr` big-endian, the GID, `srqn` and `gid_index`.
    pub fn encode_binary(&self, gid_index: u32) -> [u8; KEYS_BIN_LEN] {
        let mut m = [0u8; KEYS_BIN_LEN];
        let words = [u32::from(self.lid), u32::from(self.out_reads), self.qpn, self.psn, self.rkey];
        for (at, w) in words.iter().enumerate() {
            m[at * 4..at * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        m[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        m[32..48].copy_from_slice(&self.gid);
        m[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        m[52..56].copy_from_slice(&gid_index.to_be_bytes());
        m
    }

    /// What `rdma_read_keys` takes from the peer's message (not `srqn` or
    /// `gid_index`); `None` when it is short or a field is out of range.
    pub fn decode_binary(m: &[u8]) -> Option<Keys> {
        let word = |at: usize| Some(u32::from_be_bytes(m.get(at * 4..at * 4 + 4)?.try_into().ok()?));
        Some(Keys {
            lid: u16::try_from(word(0)?).ok()?,
            out_reads: u16::try_from(word(1)?).ok()?,
            qpn: word(2)?,
            psn: word(3)?,
            rkey: word(4)?,
            vaddr: u64::from_be_bytes(m.get(24..32)?.try_into().ok()?),
            gid: m.get(32..48)?.try_into().ok()?,
            srqn: 0,
        })
    }

    /// perftest refuses to pair an IPv4-mapped GID with a native IPv6 one
    /// (its `ipv6_addr_v4mapped`, which counts the IPv4 multicast groups
    /// RoCE v1 maps to `ff0e::ffff:a.b.c.d` as IPv4 too).
    pub fn gid_is_ipv4(&self) -> bool {
        let mapped = |prefix: &[u8]| self.gid[..4] == *prefix && self.gid[4..10].iter().all(|&b| b == 0);
        (mapped(&[0, 0, 0, 0]) || mapped(&[0xff, 0x0e, 0, 0])) && self.gid[10..12] == [0xff, 0xff]
    }
}

/// A bandwidth test's result, which the client sends the server to print.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BwReport {
    pub size: u64,
    pub iters: u64,
    /// MB/s with MB = 2^20 bytes, as perftest prints them.
    pub peak_mbs: f64,
    pub avg_mbs: f64,
    pub msg_rate_mpps: f64,
}

/// What the first exchanges settled.
#[derive(Clone, Debug, PartialEq)]
pub struct Agreed {
    pub peer_version: String,
    pub page_size: i32,
    pub cache_line: i32,
    /// `enum ibv_mtu`: the smaller of both sides'.
    pub mtu: u32,
}

/// The connection to the other perftest program.
pub struct Channel<'a> {
    link: Link<'a>,
    client: bool,
}

enum Link<'a> {
    Tcp(TcpStream),
    Cm(super::cm::CommLink<'a>),
}

fn lost(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Protocol(format!("perftest exchange ({what}): {e}"))
}

/// The bytes before the first NUL.
fn c_str(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

impl<'a> Channel<'a> {
    /// The exchange over an rdma_cm connection (`-R`, `-z`).
    pub fn over_cm(link: super::cm::CommLink<'a>, client: bool) -> Channel<'a> {
        Channel { link: Link::Cm(link), client }
    }

    /// Connect to the server at `host:port`, retrying for `patience` while
    /// it is not listening yet.
    pub fn connect(host: &str, port: u16, patience: Duration) -> crate::Result<Channel<'a>> {
        let deadline = Instant::now() + patience;
        loop {
            match TcpStream::connect((host, port)) {
                Ok(s) => return Channel::over(s, true),
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(Error::Protocol(format!("cannot connect to {host}:{port}: {e}"))),
            }
        }
    }

    /// Wait on `bind:port` for one client.
    pub fn accept(bind: &str, port: u16) -> crate::Result<Channel<'a>> {
        let l = TcpListener::bind((bind, port))
            .map_err(|e| Error::Protocol(format!("cannot listen on {bind}:{port}: {e}")))?;
        let (s, _) = l.accept().map_err(lost("accept"))?;
        Channel::over(s, false)
    }

    /// The exchange over an open stream; `client` says which side speaks first.
    pub fn over(s: TcpStream, client: bool) -> crate::Result<Channel<'a>> {
        // Each message is one write; sending it at once keeps the
        // handshakes from waiting on Nagle's timer.
        s.set_nodelay(true).map_err(lost("socket"))?;
        Ok(Channel { link: Link::Tcp(s), client })
    }

    pub fn is_client(&self) -> bool {
        self.client
    }

    fn xchg(&mut self, mine: &[u8], theirs: &mut [u8], what: &str) -> crate::Result<()> {
        match &mut self.link {
            Link::Tcp(s) if self.client => {
                s.write_all(mine).map_err(lost(what))?;
                s.read_exact(theirs).map_err(lost(what))
            }
            Link::Tcp(s) => {
                s.read_exact(theirs).map_err(lost(what))?;
                s.write_all(mine).map_err(lost(what))
            }
            Link::Cm(l) if self.client => {
                l.write(mine, what)?;
                l.read(theirs, what)
            }
            Link::Cm(l) => {
                l.read(theirs, what)?;
                l.write(mine, what)
            }
        }
    }

    /// Versions, page size, cache line and path MTU, in perftest's order.
    pub fn agree(&mut self, page_size: i32, cache_line: i32, mtu: u32) -> crate::Result<Agreed> {
        let mut mine = [0u8; VERSION_LEN];
        mine[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
        let mut theirs = [0u8; VERSION_LEN];
        self.xchg(&mine, &mut theirs, "version")?;
        let peer_version = String::from_utf8_lossy(c_str(&theirs)).into_owned();
        match peer_version.trim().parse::<f64>() {
            Ok(v) if v >= OLDEST_PEER => {}
            _ => {
                return Err(Error::Protocol(format!(
                    "the peer is perftest version {peer_version:?}; this tool speaks the exchange of {VERSION} \
                     (perftest 4.5), which needs {OLDEST_PEER:.2} or later"
                )));
            }
        }
        let mut int = |v: i32, what| -> crate::Result<i32> {
            let mut b = [0u8; 4];
            self.xchg(&v.to_be_bytes(), &mut b, what)?;
            Ok(i32::from_be_bytes(b).max(v))
        };
        let page_size = int(page_size, "page size")?;
        let cache_line = int(cache_line, "cache line size")?;
        let mut theirs = [0u8; 2];
        self.xchg(&[b'0' + (mtu.min(9) as u8), 0], &mut theirs, "MTU")?;
        // perftest keeps its own MTU when the peer's is not 1..=5.
        let peer_mtu = std::str::from_utf8(c_str(&theirs)).ok().and_then(|s| s.parse::<u32>().ok());
        let mtu = match peer_mtu {
            Some(m @ 1..=5) => m.min(mtu),
            _ => mtu,
        };
        Ok(Agreed { peer_version, page_size, cache_line, mtu })
    }

    /// One `ctx_hand_shake`: our keys for theirs. Also a barrier.
    pub fn handshake(&mut self, me: &Keys) -> crate::Result<Keys> {
        if let Link::Cm(_) = self.link {
            let mut theirs = [0u8; KEYS_BIN_LEN];
            self.xchg(&me.encode_binary(0), &mut theirs, "keys")?;
            return Keys::decode_binary(&theirs)
                .ok_or_else(|| Error::Protocol(format!("unreadable keys message from the peer: {theirs:02x?}")));
        }
        let mut theirs = [0u8; KEYS_LEN];
        self.xchg(&me.encode(), &mut theirs, "keys")?;
        Keys::decode(&theirs).ok_or_else(|| {
            Error::Protocol(format!("unreadable keys message from the peer: {:?}", String::from_utf8_lossy(&theirs)))
        })
    }

    /// `xchg_bw_reports` between 5.33-or-later peers: five 8-byte fields.
    pub fn reports(&mut self, mine: &BwReport) -> crate::Result<BwReport> {
        let mut words = [0u64; 5];
        let ours =
            [mine.size, mine.iters, mine.peak_mbs.to_bits(), mine.avg_mbs.to_bits(), mine.msg_rate_mpps.to_bits()];
        for (w, o) in words.iter_mut().zip(ours) {
            let mut b = [0u8; 8];
            self.xchg(&o.to_be_bytes(), &mut b, "bandwidth report")?;
            *w = u64::from_be_bytes(b);
        }
        Ok(BwReport {
            size: words[0],
            iters: words[1],
            peak_mbs: f64::from_bits(words[2]),
            avg_mbs: f64::from_bits(words[3]),
            msg_rate_mpps: f64::from_bits(words[4]),
        })
    }

    /// `ctx_close_connection`: a last handshake, then `done`.
    pub fn close(&mut self, me: &Keys) -> crate::Result<()> {
        self.handshake(me)?;
        // The peer may already be gone: it reads nothing more.
        if let Link::Tcp(s) = &mut self.link {
            let _ = s.write_all(b"done\0");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Keys {
        Keys {
            lid: 0,
            out_reads: 0x10,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1280,
            vaddr: 0x5617_2000_3000,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 3],
            srqn: 0,
        }
    }

    #[test]
    fn keys_are_perftest_text() {
        let msg = sample().encode();
        // What perftest's sprintf(KEY_PRINT_FMT_GID, ...) gives for the same values.
        let want = "0000:0010:000011:abcdef:00001280:0000561720003000:\
                    00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:03:00000000:";
        assert_eq!(want.len(), KEYS_LEN - 1);
        assert_eq!(&msg[..KEYS_LEN - 1], want.as_bytes());
        assert_eq!(msg[KEYS_LEN - 1], 0);
        assert_eq!(Keys::decode(&msg), Some(sample()));
        assert!(sample().gid_is_ipv4());
        let group = |g: [u8; 16]| Keys { gid: g, ..sample() }.gid_is_ipv4();
        assert!(group([0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3]));
        assert!(!group(super::super::mcast::DEFAULT_MGID));
        assert!(!group([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 1]));
    }

    #[test]
    fn binary_keys_are_pingpong_dest() {
        let m = sample().encode_binary(3);
        let mut want = Vec::new();
        for w in [0u32, 0x10, 0x11, 0xabcdef, 0x1280, 0] {
            want.extend_from_slice(&w.to_be_bytes());
        }
        want.extend_from_slice(&0x5617_2000_3000u64.to_be_bytes());
        want.extend_from_slice(&sample().gid);
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(m.to_vec(), want);
        assert_eq!(Keys::decode_binary(&m), Some(sample()));
        assert_eq!(Keys::decode_binary(&m[..40]), None);
        let mut big_lid = m;
        big_lid[1] = 1;
        assert_eq!(Keys::decode_binary(&big_lid), None);
    }

    #[test]
    fn bad_keys_are_refused() {
        assert_eq!(Keys::decode(b"0000:0010"), None);
        assert_eq!(Keys::decode(&[0u8; KEYS_LEN]), None);
        let mut m = sample().encode();
        m[60] = b'z';
        assert_eq!(Keys::decode(&m), None);
        assert_eq!(Keys::decode(&[0xffu8; KEYS_LEN]), None);
    }

    /// A server against a client that writes the bytes perftest 4.5 writes.
    #[test]
    fn server_side_against_perftest_bytes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let peer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let mut got = Vec::new();
            let mut step = |out: &[u8], n: usize| {
                s.write_all(out).unwrap();
                let mut b = vec![0u8; n];
                s.read_exact(&mut b).unwrap();
                got.push(b);
            };
            step(b"6.06\0\0\0\0\0\0\0\0\0\0\0\0", 16);
            step(&8192i32.to_be_bytes(), 4);
            step(&64i32.to_be_bytes(), 4);
            step(b"3\0", 2);
            step(&sample().encode(), KEYS_LEN);
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).unwrap();
            (got, rest)
        });
        let (s, _) = l.accept().unwrap();
        let mut ch = Channel::over(s, false).unwrap();
        let agreed = ch.agree(4096, 64, 5).unwrap();
        assert_eq!(agreed, Agreed { peer_version: "6.06".into(), page_size: 8192, cache_line: 64, mtu: 3 });
        let me = Keys { qpn: 0x22, ..sample() };
        assert_eq!(ch.handshake(&me).unwrap(), sample());
        drop(ch);
        let (got, rest) = peer.join().unwrap();
        assert_eq!(got[0], b"6.06\0\0\0\0\0\0\0\0\0\0\0\0");
        assert_eq!(got[1], 4096i32.to_be_bytes());
        assert_eq!(got[3], b"5\0");
        assert_eq!(Keys::decode(&got[4]), Some(me));
        assert!(rest.is_empty());
    }

    #[test]
    fn old_peers_are_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let peer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"5.60\0\0\0\0\0\0\0\0\0\0\0\0").unwrap();
            let mut b = [0u8; 16];
            let _ = s.read_exact(&mut b);
        });
        let (s, _) = l.accept().unwrap();
        let err = Channel::over(s, false).unwrap().agree(4096, 64, 3).unwrap_err();
        assert!(err.to_string().contains("5.60"), "{err}");
        peer.join().unwrap();
    }

    #[test]
    fn reports_and_close_both_ways() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let rep = BwReport { size: 65536, iters: 1000, peak_mbs: 12.5, avg_mbs: 11.25, msg_rate_mpps: 0.00018 };
        let client = std::thread::spawn(move || {
            let mut ch = Channel::connect("127.0.0.1", port, Duration::from_secs(5)).unwrap();
            assert!(ch.is_client());
            let agreed = ch.agree(4096, 128, 3).unwrap();
            let theirs = ch.reports(&rep).unwrap();
            ch.close(&sample()).unwrap();
            (agreed, theirs)
        });
        let (s, _) = l.accept().unwrap();
        let mut ch = Channel::over(s, false).unwrap();
        let agreed = ch.agree(4096, 64, 5).unwrap();
        assert_eq!((agreed.cache_line, agreed.mtu), (128, 3));
        assert_eq!(ch.reports(&BwReport::default()).unwrap(), rep);
        ch.close(&sample()).unwrap();
        let (agreed, theirs) = client.join().unwrap();
        assert_eq!((agreed.cache_line, agreed.mtu), (128, 3));
        assert_eq!(theirs, BwReport::default());
    }
}
