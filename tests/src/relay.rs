//! A fault-injecting wire: a relay on 127.0.0.1 between two QEMU UDP socket
//! netdevs that drops, duplicates, reorders and corrupts frames, from a seed,
//! so a failing run replays. Each side's netdev sends to its relay port and
//! receives from the relay; nothing leaves the loopback.

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Fault rates, each a probability per frame.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    pub drop: f64,
    pub duplicate: f64,
    /// Held back and sent after the next frame in the same direction.
    pub reorder: f64,
    /// One byte after the Ethernet header flipped.
    pub corrupt: f64,
    /// ARP frames are never corrupted: for a wire to a stack that, like
    /// Linux's, learns from ARP without checking it (ARP has no checksum), so
    /// one flipped sender MAC would make it send to a MAC nobody has for
    /// half a minute, a fault of that stack's, not of the appliance's. The
    /// appliance drops such frames (steering's `arp_sender`).
    pub spare_arp: bool,
}

/// What the relay did, both directions together.
#[derive(Debug, Default)]
pub struct Counts {
    pub frames: AtomicU64,
    pub dropped: AtomicU64,
    pub duplicated: AtomicU64,
    pub reordered: AtomicU64,
    pub corrupted: AtomicU64,
}

/// A running relay; stops (and joins its threads) on drop.
pub struct Relay {
    /// Where side A's netdev sends (`udp=127.0.0.1:port_a`).
    pub port_a: u16,
    /// Where side B's netdev sends.
    pub port_b: u16,
    /// Where side A's netdev listens: frames sent here reach A as if from the wire.
    pub a_local: u16,
    /// Where side B's netdev listens.
    pub b_local: u16,
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// A small, seeded generator (splitmix64): the same seed, the same faults
/// (and, in [`crate::fuzz`], the same fuzzed frames).
pub struct Rng(pub u64);

impl Rng {
    // A draw of the generator, never ending: not an `Iterator`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

impl Relay {
    /// Relays between side A (its netdev listens on `a_local`) and side B
    /// (listening on `b_local`) with `faults`, seeded.
    pub fn start(a_local: u16, b_local: u16, faults: Faults, seed: u64) -> std::io::Result<Relay> {
        let from_a = UdpSocket::bind("127.0.0.1:0")?;
        let from_b = UdpSocket::bind("127.0.0.1:0")?;
        let (port_a, port_b) = (from_a.local_addr()?.port(), from_b.local_addr()?.port());
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let mut threads = Vec::new();
        for (rx, tx, to, seed) in
            [(from_a.try_clone()?, from_b.try_clone()?, b_local, seed), (from_b, from_a, a_local, seed ^ 0x5555)]
        {
            rx.set_read_timeout(Some(Duration::from_millis(50)))?;
            let (stop, counts) = (stop.clone(), counts.clone());
            threads.push(std::thread::spawn(move || forward(rx, tx, to, faults, Rng(seed), &stop, &counts)));
        }
        Ok(Relay { port_a, port_b, a_local, b_local, counts, stop, threads })
    }

    /// `dropped/duplicated/reordered/corrupted of frames`, for logs.
    pub fn summary(&self) -> String {
        let c = &self.counts;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "{} frames: {} dropped, {} duplicated, {} reordered, {} corrupted",
            g(&c.frames),
            g(&c.dropped),
            g(&c.duplicated),
            g(&c.reordered),
            g(&c.corrupted)
        )
    }
}

/// Frames put on the wire towards one side beside the relayed traffic: QEMU's
/// UDP netdev takes a datagram from any sender, so one more socket is one more
/// station on the segment.
pub struct Injector {
    socket: UdpSocket,
    to: u16,
}

impl Relay {
    /// An injector whose frames side A receives.
    pub fn injector_to_a(&self) -> std::io::Result<Injector> {
        Injector::new(self.a_local)
    }
}

impl Injector {
    /// Frames to the netdev listening on 127.0.0.1:`to`.
    pub fn new(to: u16) -> std::io::Result<Injector> {
        Ok(Injector { socket: UdpSocket::bind("127.0.0.1:0")?, to })
    }

    /// Sends one frame. An empty one is refused: no wire carries one, and
    /// QEMU's UDP netdev takes an empty datagram for the end of the
    /// connection and stops receiving for good.
    pub fn send(&self, frame: &[u8]) -> std::io::Result<()> {
        if frame.is_empty() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "an empty frame"));
        }
        self.socket.send_to(frame, ("127.0.0.1", self.to)).map(|_| ())
    }

    /// The receiving netdev socket's queue, from `/proc/net/udp`: bytes waiting
    /// for QEMU to read and datagrams the kernel dropped because the queue was
    /// full. Pacing on it keeps the relayed traffic from being crowded out.
    pub fn queue(&self) -> Option<(u64, u64)> {
        udp_socket(self.to)
    }
}

/// The socket bound to 127.0.0.1:`port`, from `/proc/net/udp`: bytes
/// waiting in its receive queue, and datagrams the kernel dropped because
/// the queue was full.
pub fn udp_socket(port: u16) -> Option<(u64, u64)> {
    udp_queue(&std::fs::read_to_string("/proc/net/udp").ok()?, port)
}

/// `(rx_queue bytes, drops)` of the socket bound to 127.0.0.1:`port` in a
/// `/proc/net/udp` listing.
fn udp_queue(table: &str, port: u16) -> Option<(u64, u64)> {
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) != Some(&local.as_str()) {
            return None;
        }
        let rx = u64::from_str_radix(f.get(4)?.split(':').nth(1)?, 16).ok()?;
        let drops = f.last()?.parse().ok()?;
        Some((rx, drops))
    })
}

fn forward(rx: UdpSocket, tx: UdpSocket, to: u16, f: Faults, mut rng: Rng, stop: &AtomicBool, c: &Counts) {
    let mut buf = vec![0u8; 65536];
    let mut held: Option<Vec<u8>> = None;
    let send = |frame: &[u8]| {
        let _ = tx.send_to(frame, ("127.0.0.1", to));
    };
    while !stop.load(Ordering::Relaxed) {
        let Ok(n) = rx.recv(&mut buf) else { continue };
        c.frames.fetch_add(1, Ordering::Relaxed);
        let mut frame = buf[..n].to_vec();
        if rng.chance(f.drop) {
            c.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if rng.chance(f.corrupt) && frame.len() > 14 && !(f.spare_arp && frame[12..14] == [0x08, 0x06]) {
            let at = 14 + (rng.next() as usize) % (frame.len() - 14);
            frame[at] ^= 1 << (rng.next() % 8);
            c.corrupted.fetch_add(1, Ordering::Relaxed);
        }
        if held.is_none() && rng.chance(f.reorder) {
            c.reordered.fetch_add(1, Ordering::Relaxed);
            held = Some(frame);
            continue;
        }
        send(&frame);
        if rng.chance(f.duplicate) {
            c.duplicated.fetch_add(1, Ordering::Relaxed);
            send(&frame);
        }
        if let Some(h) = held.take() {
            send(&h);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relays_both_ways_and_faults_follow_the_seed() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let (pa, pb) = (a.local_addr().unwrap().port(), b.local_addr().unwrap().port());
        let relay = Relay::start(pa, pb, Faults::default(), 1).unwrap();
        a.send_to(&[1; 60], ("127.0.0.1", relay.port_a)).unwrap();
        let mut buf = [0u8; 100];
        assert_eq!(b.recv(&mut buf).unwrap(), 60);
        b.send_to(&[2; 61], ("127.0.0.1", relay.port_b)).unwrap();
        assert_eq!(a.recv(&mut buf).unwrap(), 61);
        let (mut x, mut y) = (Rng(7), Rng(7));
        assert!((0..100).all(|_| x.chance(0.3) == y.chance(0.3)));
        let hits = (0..10_000).filter(|_| x.chance(0.05)).count();
        assert!((400..600).contains(&hits), "{hits}");
    }

    #[test]
    fn spared_arp_is_never_corrupted() {
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let pb = b.local_addr().unwrap().port();
        let all = Faults { corrupt: 1.0, spare_arp: true, ..Faults::default() };
        let relay = Relay::start(crate::free_udp_port(), pb, all, 3).unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 100];
        for ethertype in [[0x08, 0x06], [0x08, 0x00]] {
            let frame = [&[0xff; 12][..], &ethertype, &[0x5a; 46]].concat();
            a.send_to(&frame, ("127.0.0.1", relay.port_a)).unwrap();
            let n = b.recv(&mut buf).unwrap();
            assert_eq!(buf[..n] == frame[..], ethertype == [0x08, 0x06], "{ethertype:?}");
        }
    }

    #[test]
    fn an_injected_frame_arrives_and_its_queue_is_read() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let port = a.local_addr().unwrap().port();
        let inj = Injector::new(port).unwrap();
        inj.send(&[7; 64]).unwrap();
        inj.send(&[8; 64]).unwrap();
        // Both wait in the queue until read.
        let (queued, drops) = inj.queue().expect("the socket is listed");
        assert!(queued >= 128 && drops == 0, "{queued} {drops}");
        let mut buf = [0u8; 100];
        assert_eq!((a.recv(&mut buf).unwrap(), buf[0]), (64, 7));
        let line = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
                    1: 0100007F:1F90 00000000:0000 07 00000000:00000A00 00:00000000 00000000 1000 0 1 2 0000000000000000 5\n";
        assert_eq!(udp_queue(line, 0x1f90), Some((0xa00, 5)));
        assert_eq!(udp_queue(line, 0x1f91), None);
    }
}
