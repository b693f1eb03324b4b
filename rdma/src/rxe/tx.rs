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
///
/// A frame with a payload goes out in two parts, headers and payload (with pad and
/// ICRC), so a NIC with scatter-gather reads each from its own buffer.
pub fn send<S: FrameSink + ?Sized>(
    sink: &mut S,
    stats: &mut Stats,
    ip_id: &mut IpId,
    path: &Path,
    roce: &RoceRepr,
    payload_len: usize,
    fill: &mut dyn FnMut(&mut [u8]) -> bool,
) -> bool {
    let mut good = false;
    let sent = match frame::split_lens(path, roce, payload_len) {
        Ok((head_len, body_len)) if payload_len > 0 => {
            sink.transmit_parts(head_len, body_len, &mut |head: &mut [u8], body: &mut [u8]| {
                let built = frame::emit_parts(head, body, path, ip_id.next_id(), roce, payload_len, &mut *fill);
                good = seal(built, head, body);
            })
        }
        _ => sink.transmit(path.frame_len(roce.header_len(), payload_len), &mut |buf: &mut [u8]| {
            let built = frame::emit(buf, path, ip_id.next_id(), roce, payload_len, &mut *fill);
            good = seal(built, &mut [], buf);
        }),
    };
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

/// What a built frame may be sent as: `true` for a good one. Otherwise the frame,
/// `head` then `tail` (which holds its end), is spoiled so no receiver accepts it.
fn seal(built: Result<(usize, bool), frame::EmitError>, head: &mut [u8], tail: &mut [u8]) -> bool {
    match built {
        Ok((_, true)) => true,
        Ok((_, false)) => {
            let end = tail.len();
            if let Some(icrc) = tail.get_mut(end.saturating_sub(ICRC_LEN)..) {
                icrc.iter_mut().for_each(|b| *b = !*b);
            }
            false
        }
        // Cannot happen for the reprs the transport builds; a zeroed buffer is not
        // a frame anyone parses.
        Err(_) => {
            head.fill(0);
            tail.fill(0);
            false
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rxe::sink::VecSink;
    use crate::wire::frame::IpPath;
    use crate::wire::ip::Ecn;
    use crate::wire::{Ipv4Address, MacAddr, frame::parse};

    fn path() -> Path {
        Path {
            src_mac: MacAddr([0x52, 0x54, 0, 0, 0, 2]),
            dst_mac: MacAddr([0x52, 0x54, 0, 0, 0, 1]),
            ip: IpPath::V4 { src: Ipv4Address([10, 0, 0, 2]), dst: Ipv4Address([10, 0, 0, 1]) },
            dscp: 0,
            ecn: Ecn::NotEct,
            hop_limit: 64,
            src_port: 0xC000,
        }
    }

    fn send_only() -> RoceRepr {
        RoceRepr { bth: bth(Opcode::RcSendOnly, 0x11, Psn::new(5), true, false), ext: ExtHeaders::NONE }
    }

    #[test]
    fn a_payload_goes_out_apart_from_its_headers_and_an_ack_in_one_piece() {
        let (mut sink, mut stats, mut id) = (VecSink::default(), Stats::default(), IpId::new(7));
        let data: [u8; 100] = core::array::from_fn(|i| i as u8);
        let sent = send(&mut sink, &mut stats, &mut id, &path(), &send_only(), 100, &mut |out| {
            out.copy_from_slice(&data);
            true
        });
        assert!(sent);
        assert!(send_ack(&mut sink, &mut stats, &mut id, &path(), 0x11, Psn::new(5), Syndrome::ACK, 1));
        assert_eq!((sink.frames.len(), sink.gathered), (2, 1), "the SEND in two parts, the ACK in one");
        let rx = parse(&sink.frames[0]).expect("a good frame");
        assert_eq!((rx.repr.payload, rx.repr.ip_id), (&data[..], 7));
        assert_eq!(parse(&sink.frames[1]).expect("a good ACK").repr.ip_id, 8);
        assert_eq!(stats.get(RxeCounter::SentPkts), 2);
    }

    #[test]
    fn a_payload_that_cannot_be_read_spoils_its_frame() {
        let (mut sink, mut stats, mut id) = (VecSink::default(), Stats::default(), IpId::new(0));
        assert!(!send(&mut sink, &mut stats, &mut id, &path(), &send_only(), 64, &mut |_| false));
        assert_eq!(sink.gathered, 1);
        assert!(parse(&sink.frames[0]).is_err(), "its ICRC no longer matches");
        assert_eq!((stats.get(RxeCounter::SentPkts), stats.get(RxeCounter::SendErr)), (0, 1));
        sink.full = true;
        assert!(!send(&mut sink, &mut stats, &mut id, &path(), &send_only(), 64, &mut |_| true));
        assert_eq!((stats.tx_full, stats.get(RxeCounter::SendErr)), (1, 2));
    }
}
