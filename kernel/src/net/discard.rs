//! Frames to the UDP discard port (RFC 863), counted below smoltcp: the
//! receiving side of `netbench`, cheap enough not to be what it measures.

use crate::time::Instant;

/// RFC 863's discard port.
pub const DISCARD_PORT: u16 = 9;

/// Whether `frame` is IPv4/UDP to the discard port.
pub fn is_discard(frame: &[u8]) -> bool {
    let ihl = frame.get(14).map_or(0, |b| usize::from(b & 0x0f) * 4);
    frame.get(12..14) == Some(&[0x08, 0x00])
        && frame.get(23) == Some(&17)
        && ihl >= 20
        && frame.get(14 + ihl + 2..14 + ihl + 4) == Some(&DISCARD_PORT.to_be_bytes())
}

/// What arrived since the last reset.
#[derive(Default)]
pub struct RxCount {
    pub frames: u64,
    pub bytes: u64,
    pub first: Option<Instant>,
    pub last: Instant,
}

impl RxCount {
    pub fn record(&mut self, frame: &[u8], now: Instant) {
        self.frames += 1;
        self.bytes += frame.len() as u64;
        self.first.get_or_insert(now);
        self.last = now;
    }
}
