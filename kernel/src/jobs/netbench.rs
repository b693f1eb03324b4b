//! `netbench`: measures the raw wire. One appliance sends UDP frames to the
//! discard port (9) of another as fast as its transmit queue takes them; the
//! other counts them below smoltcp. The result is the frame rate the emulated
//! wire carries, the limit the RoCE transport is compared against.
//!
//! What the sender does per frame is its [`Mode`]: copy the whole frame into
//! the transmit buffer (the default, what any sender of fresh data pays);
//! write only the headers and leave the payload as the recycled buffer holds
//! it (`prebuilt`: what the wire and QEMU can move when the sender does no
//! per-byte work); or copy and append an ICRC computed over the frame as
//! RoCE's is (`icrc`: what any RoCE implementation pays per frame, by the CRC
//! path the firmware chose at boot).

use crate::net::Net;
use crate::net::discard::DISCARD_PORT;
use crate::println;
use crate::time::{Duration, Instant};
use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use drivers::nic::Nic;
use knet::neigh::Resolution;
use rdma::wire::icrc::{self, ICRC_LEN};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr,
    UdpPacket,
};

/// Frames queued per pass before other work gets a turn.
const TX_BATCH: usize = 256;
/// How long to wait for the transmit queue to drain before trying again.
const BACKOFF: Duration = Duration::from_micros(100);
/// Ethernet, IPv4 and UDP headers: what a `prebuilt` frame writes.
const HEADERS_LEN: usize = 14 + 20 + 8;
/// Where the ICRC's covered bytes start: the IP header (RoCE v2, IBA A17.3.3).
const IP_START: usize = 14;

/// The sender's work per frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The whole frame copied into the transmit buffer.
    Copy,
    /// The headers written, the payload left as the buffer holds it (a
    /// recycled buffer: an earlier frame's bytes, or zeros).
    Prebuilt,
    /// The whole frame copied, then its last 4 bytes replaced by the ICRC
    /// over the rest from the IP header on ([`icrc::compute`]).
    Icrc,
}

impl Mode {
    /// The console's word for each mode, as `netbench send` takes it.
    pub fn parse(word: &str) -> Option<Mode> {
        match word {
            "copy" => Some(Mode::Copy),
            "prebuilt" => Some(Mode::Prebuilt),
            "icrc" => Some(Mode::Icrc),
            _ => None,
        }
    }

    /// Writes `frame` into the transmit buffer `buf` (of the same length)
    /// as this mode does.
    fn fill(self, frame: &[u8], buf: &mut [u8]) {
        match self {
            Mode::Copy => buf.copy_from_slice(frame),
            Mode::Prebuilt => {
                if let (Some(to), Some(from)) = (buf.get_mut(..HEADERS_LEN), frame.get(..HEADERS_LEN)) {
                    to.copy_from_slice(from);
                }
            }
            Mode::Icrc => {
                buf.copy_from_slice(frame);
                let end = buf.len().saturating_sub(ICRC_LEN);
                let crc = buf.get(IP_START..end).and_then(|covered| icrc::compute(covered).ok()).unwrap_or(0);
                if let Some(trailer) = buf.get_mut(end..) {
                    trailer.copy_from_slice(&crc.to_le_bytes());
                }
            }
        }
    }
}

impl core::fmt::Display for Mode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Mode::Copy => f.write_str("a copy per frame"),
            Mode::Prebuilt => f.write_str("prebuilt: headers only"),
            Mode::Icrc => write!(f, "a copy and an ICRC per frame, by {}", icrc::Path::best()),
        }
    }
}

struct TxJob {
    /// The link the frames go out on.
    link: usize,
    dst: Ipv4Address,
    frame_len: usize,
    mode: Mode,
    duration: Duration,
    frame: Option<Vec<u8>>,
    started: Instant,
    until: Instant,
    sent: u64,
    queue_full: u64,
    retry_at: Instant,
    ready: Rc<Cell<bool>>,
}

/// The sending side of `netbench`: at most one run at a time.
#[derive(Default)]
pub struct Sender {
    tx: Option<TxJob>,
}

impl Sender {
    pub fn deadline(&self) -> Option<Instant> {
        self.tx.as_ref().map(|j| if j.frame.is_some() { j.retry_at.min(j.until) } else { j.retry_at })
    }

    pub fn running(&self) -> bool {
        self.tx.is_some()
    }

    /// Ctrl-C: stops sending, without a report.
    pub fn interrupt(&mut self) {
        finish(self, "");
    }

    /// Starts sending `frame_len`-byte frames to `dst` on `link` for
    /// `duration`, doing `mode`'s work for each.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        link: usize,
        dst: Ipv4Address,
        frame_len: usize,
        mode: Mode,
        duration: Duration,
        now: Instant,
        ready: Rc<Cell<bool>>,
    ) {
        ready.set(false);
        self.tx = Some(TxJob {
            link,
            dst,
            frame_len,
            mode,
            duration,
            frame: None,
            started: now,
            until: now,
            sent: 0,
            queue_full: 0,
            retry_at: now,
            ready,
        });
    }
}

/// Rate as `frames/s` and `Gb/s` over `us` microseconds.
pub fn rate(frames: u64, bytes: u64, us: u64) -> (u64, f64) {
    let us = us.max(1);
    (frames * 1_000_000 / us, (bytes * 8) as f64 / (us as f64 * 1000.0))
}

fn build_frame(
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Address,
    dst: Ipv4Address,
    len: usize,
) -> Vec<u8> {
    let mut frame = vec![0u8; len];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr { src_addr: src_mac, dst_addr: dst_mac, ethertype: EthernetProtocol::Ipv4 }.emit(&mut eth);
    let ip =
        Ipv4Repr { src_addr: src, dst_addr: dst, next_header: IpProtocol::Udp, payload_len: len - 34, hop_limit: 64 };
    let mut packet = Ipv4Packet::new_unchecked(eth.payload_mut());
    ip.emit(&mut packet, &ChecksumCapabilities::default());
    let mut udp = UdpPacket::new_unchecked(packet.payload_mut());
    udp.set_src_port(DISCARD_PORT);
    udp.set_dst_port(DISCARD_PORT);
    udp.set_len((len - 34) as u16);
    udp.set_checksum(0);
    frame
}

/// Advances a send job; returns whether it sent anything.
pub fn poll(sender: &mut Sender, net: &mut Net, now: Instant) -> bool {
    let Some(job) = sender.tx.as_mut() else { return false };
    let Some(link) = net.links.get_mut(job.link) else { return false };
    if job.frame.is_none() {
        match link.neigh.lookup_or_request(job.dst, now) {
            Resolution::Known(mac) => {
                let Some(src) = net.netdevs.by_index(link.ifindex).and_then(|d| d.ipv4().first().map(|c| c.address()))
                else {
                    return finish(sender, "no IPv4 address on the device");
                };
                job.frame = Some(build_frame(
                    EthernetAddress(link.nic.mac()),
                    EthernetAddress(mac.0),
                    src,
                    job.dst,
                    job.frame_len,
                ));
                job.started = now;
                job.until = now + job.duration;
            }
            Resolution::Pending => {
                job.retry_at = now + Duration::from_millis(10);
                return false;
            }
            Resolution::Failed => return finish(sender, "no ARP reply from the destination"),
        }
    }
    let Some(frame) = job.frame.as_deref() else { return false };
    if now >= job.until {
        let (fps, gbps) = rate(job.sent, job.sent * frame.len() as u64, now.saturating_since(job.started).as_micros());
        println!(
            "netbench: sent {} frames of {} bytes in {} ms: {fps} frames/s, {gbps:.3} Gb/s (queue full {} times; {})",
            job.sent,
            frame.len(),
            job.duration.as_micros() / 1000,
            job.queue_full,
            job.mode
        );
        return finish(sender, "");
    }
    let mut sent = 0;
    let mode = job.mode;
    while sent < TX_BATCH {
        if link.nic.transmit(frame.len(), |buf| mode.fill(frame, buf)).is_none() {
            job.queue_full += 1;
            job.retry_at = now + BACKOFF;
            break;
        }
        sent += 1;
    }
    job.sent += sent as u64;
    link.nic.service();
    sent > 0
}

fn finish(sender: &mut Sender, error: &str) -> bool {
    if let Some(job) = sender.tx.take() {
        if !error.is_empty() {
            println!("error: netbench: {error}");
        }
        job.ready.set(true);
    }
    true
}
