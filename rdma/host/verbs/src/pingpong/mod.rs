//! What rdma-core's pingpong examples share (`libibverbs/examples/`): their
//! common options and their TCP exchange, used by `rc_pingpong`,
//! `uc_pingpong`, `ud_pingpong` and `srq_pingpong`; [`session`] is the
//! ping-pong of the first three.
//!
//! The exchange: each side sends one 52-byte message per QP,
//! `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, the GID as 32 hex digits, NUL
//! terminated). The client sends all of its messages first; the server reads
//! them, moves its QPs to RTR and RTS, and answers with its own; the client
//! then sends `"done"` (5 bytes with the NUL), which the server waits for.
//! `ibv_srq_pingpong` always sends 256 messages (its `MAX_QP`), the ones
//! beyond its QPs zero, and reads 256.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use clap::Args;

use crate::cli::RingArgs;

pub mod session;

/// The options every pingpong takes, with rdma-core's letters and defaults,
/// but for the message size and MTU, whose defaults differ between them.
#[derive(Args, Clone, Debug)]
pub struct CommonArgs {
    #[command(flatten)]
    pub ring: RingArgs,
    /// listen on/connect to port PORT
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// use IB device DEV (default first device found)
    #[arg(short = 'd', long = "ib-dev")]
    pub dev: Option<String>,
    /// use port PORT of IB device
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
    /// number of receives to post at a time
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    pub rx_depth: u32,
    /// number of exchanges
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    pub iters: u32,
    /// service level value
    #[arg(short = 'l', long = "sl", default_value_t = 0)]
    pub sl: u8,
    /// sleep on CQ events (the appliance's doorbell; polled without one)
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// local port GID index
    #[arg(short = 'g', long = "gid-idx")]
    pub gid_idx: Option<u8>,
    /// server to connect to (else: be the server)
    pub servername: Option<String>,
}

/// The options of the connected pingpongs (RC, UC, SRQ): the common ones,
/// a 4096-byte message and a path MTU.
#[derive(Args, Clone, Debug)]
pub struct PingpongArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// size of message to exchange
    #[arg(short = 's', long = "size", default_value_t = 4096)]
    pub size: usize,
    /// path MTU
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    pub mtu: u32,
}

/// One QP's address: what one 52-byte message carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dest {
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    pub gid: [u8; 16],
}

/// The size of one exchange message.
pub const MSG_LEN: usize = 52;

impl Dest {
    /// `"%04x:%06x:%06x:%s"` with the GID as 32 hex digits, NUL terminated.
    pub fn to_wire(self) -> [u8; MSG_LEN] {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        let s = format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn & 0xff_ffff, self.psn & 0xff_ffff);
        let mut out = [0u8; MSG_LEN];
        out[..MSG_LEN - 1].copy_from_slice(s.as_bytes());
        out
    }

    pub fn from_wire(m: &[u8; MSG_LEN]) -> Option<Dest> {
        let s = std::str::from_utf8(&m[..MSG_LEN - 1]).ok()?;
        let mut f = s.split(':');
        let lid = u16::from_str_radix(f.next()?, 16).ok()?;
        let qpn = u32::from_str_radix(f.next()?, 16).ok()?;
        let psn = u32::from_str_radix(f.next()?, 16).ok()?;
        let g = f.next()?;
        if g.len() != 32 || f.next().is_some() {
            return None;
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(g.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Dest { lid, qpn, psn, gid })
    }

    /// rdma-core's `  local address:  LID 0x0000, QPN 0x000011, ...` line.
    pub fn print(&self, what: &str) {
        println!(
            "  {what} address:  LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}",
            self.lid,
            self.qpn,
            self.psn,
            verbs_ring::show::words::GidText(&self.gid)
        );
    }
}

/// Print `msg` and exit 1, as the examples do on any setup failure.
pub fn die(msg: &str) -> ! {
    eprintln!("{msg}");
    crate::cli::exit(1)
}

/// A random 24-bit PSN (the examples take `lrand48() & 0xffffff`).
pub fn psn() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Several QPs ask within one clock tick: a counter keeps them apart.
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let n = CALLS.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9);
    (t.subsec_nanos() ^ std::process::id().wrapping_mul(2_654_435_761) ^ n) & 0xff_ffff
}

/// The client's half: connect (retrying for 10 s while the server starts),
/// send `mine`, read `n_remote` messages, send `"done"`.
pub fn client_exchange(host: &str, port: u16, mine: &[Dest], n_remote: usize) -> Vec<Dest> {
    let mut s = connect_retry(host, port);
    send_dests(&mut s, mine);
    let rem = read_dests(&mut s, n_remote);
    // One write, so that the server's single read() sees all 5 bytes.
    let _ = s.write_all(b"done\0");
    rem
}

/// The server's half: accept one client on `port`, read `n_remote`
/// messages, run `connect` on them (the QPs must be ready before the
/// client hears our addresses and starts sending), send `mine`, wait for
/// `"done"`.
pub fn server_exchange<E>(
    port: u16,
    mine: &[Dest],
    n_remote: usize,
    connect: impl FnOnce(&[Dest]) -> Result<(), E>,
) -> Result<Vec<Dest>, E> {
    let listener =
        TcpListener::bind(("0.0.0.0", port)).unwrap_or_else(|e| die(&format!("Couldn't listen to port {port}: {e}")));
    let (mut s, _) = listener.accept().unwrap_or_else(|e| die(&format!("accept() failed: {e}")));
    let rem = read_dests(&mut s, n_remote);
    connect(&rem)?;
    send_dests(&mut s, mine);
    let mut done = [0u8; 5];
    let _ = s.read_exact(&mut done);
    Ok(rem)
}

fn send_dests(s: &mut TcpStream, mine: &[Dest]) {
    let msgs: Vec<u8> = mine.iter().flat_map(|d| d.to_wire()).collect();
    s.write_all(&msgs).unwrap_or_else(|e| die(&format!("Couldn't send local address: {e}")));
}

fn read_dests(s: &mut TcpStream, n: usize) -> Vec<Dest> {
    (0..n)
        .map(|i| {
            let mut m = [0u8; MSG_LEN];
            s.read_exact(&mut m).unwrap_or_else(|e| die(&format!("Couldn't read remote address [{i}]: {e}")));
            Dest::from_wire(&m).unwrap_or_else(|| die(&format!("Couldn't parse remote address [{i}]")))
        })
        .collect()
}

fn connect_retry(host: &str, port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => return s,
            Err(e) if Instant::now() > deadline => die(&format!("Couldn't connect to {host}:{port}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_52_byte_message() {
        let mut gid = [0u8; 16];
        gid[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1]);
        let d = Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid };
        let w = d.to_wire();
        assert_eq!(&w[..], b"0000:000011:abcdef:00000000000000000000ffff0a000001\0");
        assert_eq!(Dest::from_wire(&w), Some(d));
        let mut bad = w;
        bad[5] = b'x';
        assert_eq!(Dest::from_wire(&bad), None);
        // ibv_srq_pingpong's padding entries parse as the zero address.
        assert_eq!(Dest::from_wire(&Dest::default().to_wire()), Some(Dest::default()));
    }

    #[test]
    fn exchange_both_halves_over_loopback() {
        let port = {
            let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
            l.local_addr().unwrap().port()
        };
        let server_side: Vec<Dest> = (0..3).map(|i| Dest { qpn: 0x100 + i, psn: i, ..Dest::default() }).collect();
        let client_side: Vec<Dest> = (0..3).map(|i| Dest { qpn: 0x200 + i, psn: 7 * i, ..Dest::default() }).collect();
        let mine = server_side.clone();
        let server = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let rem = server_exchange::<()>(port, &mine, 3, |r| {
                seen = r.to_vec();
                Ok(())
            })
            .unwrap();
            (rem, seen)
        });
        let got = client_exchange("127.0.0.1", port, &client_side, 3);
        let (rem, seen) = server.join().unwrap();
        assert_eq!((got, rem, seen), (server_side, client_side.clone(), client_side));
    }
}
