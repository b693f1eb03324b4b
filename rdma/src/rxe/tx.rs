//! Building and sending one frame through the caller's [`FrameSink`]: the wire
//! codec's `frame::emit` runs inside the sink's buffer, the payload is copied once,
//! straight from memory into the frame. Shared by requester and responder.

use crate::core::counters::RxeCounter;
use crate::wire::frame::{self, IpId, Path};
use crate::wire::icrc::ICRC_LEN;
use crate::wire::{AethRepr, BthRepr, ExtHeaders, Opcode, Psn, RoceRepr, Syndrome};

use super::sink::FrameSink;
use super::stats::Stats;

/// The only P_Key RoCE uses (the default, full membership).
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// A BTH with the fields every packet of ours shares.
pub fn bth(opcode: Opcode, dest_qpn: u32, psn: Psn, ack_req: bool, solicited: bool) -> BthRepr {
    BthRepr {
        opcode,
        solicited,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qpn,
        ack_req,
        psn,
    }
}

/// Sends one frame. `fill` writes the payload and says whether it could; a frame whose
/// payload could not be read is sent with its ICRC inverted, so no receiver accepts it
/// (the sink's buffer cannot be taken back). Returns whether a valid frame left.
pub fn send<S: FrameSink + ?Sized>(
    sink: &mut S,
    stats: &mut Stats,
    ip_id: &mut IpId,
    path: &Path,
    roce: &RoceRepr,
    payload_len: usize,
    fill: &mut dyn FnMut(&mut [u8]) -> bool,
) -> bool {
    let len = path.frame_len(roce.header_len(), payload_len);
    let mut good = false;
    let sent = sink.transmit(len, &mut |buf: &mut [u8]| {
        match frame::emit(buf, path, ip_id.next_id(), roce, payload_len, &mut *fill) {
            Ok((_, true)) => good = true,
            Ok((n, false)) => {
                if let Some(icrc) = buf.get_mut(n.saturating_sub(ICRC_LEN)..n) {
                    icrc.iter_mut().for_each(|b| *b = !*b);
                }
            }
            // Cannot happen for the reprs the transport builds; a zeroed buffer is not
            // a frame anyone parses.
            Err(_) => buf.fill(0),
        }
    });
    if !sent {
        stats.tx_full += 1;
        stats.inc(RxeCounter::SendErr);
        return false;
    }
    if good {
        stats.inc(RxeCounter::SentPkts);
    } else {
        stats.inc(RxeCounter::SendErr);
    }
    good
}

/// Sends an ACKNOWLEDGE (ACK, RNR NAK or NAK) for `psn`.
#[allow(clippy::too_many_arguments)]
pub fn send_ack<S: FrameSink + ?Sized>(
    sink: &mut S,
    stats: &mut Stats,
    ip_id: &mut IpId,
    path: &Path,
    dest_qpn: u32,
    psn: Psn,
    syndrome: Syndrome,
    msn: u32,
) -> bool {
    let roce = RoceRepr {
        bth: bth(Opcode::RcAcknowledge, dest_qpn, psn, false, false),
        ext: ExtHeaders { aeth: Some(AethRepr { syndrome, msn: msn & 0xFF_FFFF }), ..ExtHeaders::NONE },
    };
    send(sink, stats, ip_id, path, &roce, 0, &mut |_| true)
}
