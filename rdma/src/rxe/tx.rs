//! Building and sending one frame through the caller's [`FrameSink`]: the wire
//! codec's `frame::emit` runs inside the sink's buffer. A payload in memory
//! ([`send_from_memory`]) goes out from where it lies when the sink and the memory
//! allow (a descriptor chain: headers, the payload's spans, pad and ICRC), else it
//! is copied once, straight from memory into the frame, its ICRC computed as it
//! moves ([`super::gather`]). Shared by requester and responder.

use crate::core::counters::RxeCounter;
use crate::wire::frame::{self, IpId, Layout, Path};
use crate::wire::icrc::{Hasher, ICRC_LEN};
use crate::wire::{AethRepr, BthRepr, ExtHeaders, Opcode, Psn, RoceRepr, Syndrome};

use super::gather::{self, Runs};
use super::memory::Memory;
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
    send_hashed(sink, stats, ip_id, path, roce, payload_len, &mut |out, icrc| {
        let filled = fill(out);
        icrc.update(out);
        filled
    })
}

/// [`send`] for a `fill` that adds each byte it writes to the ICRC hasher it is
/// handed (`frame::emit_parts_hashed`): the payload is read once.
fn send_hashed<S: FrameSink + ?Sized>(
    sink: &mut S,
    stats: &mut Stats,
    ip_id: &mut IpId,
    path: &Path,
    roce: &RoceRepr,
    payload_len: usize,
    fill: &mut dyn FnMut(&mut [u8], &mut Hasher) -> bool,
) -> bool {
    let mut good = false;
    let sent = match Layout::new(path, roce, payload_len) {
        Ok(layout) if payload_len > 0 => {
            sink.transmit_parts(layout.head_len(), layout.body_len(), &mut |head: &mut [u8], body: &mut [u8]| {
                let built = frame::emit_parts_hashed(head, body, path, ip_id.next_id(), roce, &layout, &mut *fill);
                good = seal(built, head, body);
            })
        }
        // No payload: one piece.
        Ok(layout) => sink.transmit(layout.frame_len(), &mut |buf: &mut [u8]| {
            let (head, body) = buf.split_at_mut(layout.head_len().min(buf.len()));
            let built = frame::emit_parts_hashed(head, body, path, ip_id.next_id(), roce, &layout, &mut *fill);
            good = seal(built, head, body);
        }),
        Err(e) => sink.transmit(path.frame_len(roce.header_len(), payload_len), &mut |buf: &mut [u8]| {
            good = seal(Err(e), &mut [], buf);
        }),
    };
    count(stats, sent, good)
}

/// Sends one frame whose `payload_len`-byte payload is in `mem`, at `runs`:
/// from where it lies when the sink can gather and `mem` gives every run a bus
/// span ([`gather::spans`]), the ICRC computed over the runs in place; else
/// copied into the sink's buffer with the ICRC computed as the bytes move. Each
/// call reads memory afresh, so a retransmission carries what is there now. A
/// payload that cannot be read spoils its frame, as in [`send`].
#[allow(clippy::too_many_arguments)]
pub fn send_from_memory<S: FrameSink + ?Sized, M: Memory + ?Sized>(
    sink: &mut S,
    stats: &mut Stats,
    ip_id: &mut IpId,
    path: &Path,
    roce: &RoceRepr,
    payload_len: usize,
    runs: &dyn Runs,
    mem: &M,
) -> bool {
    if payload_len > 0
        && let room = sink.gather_room()
        && room > 0
        && let Some(spans) = gather::spans(runs, mem, room)
        && let Ok(layout) = Layout::new(path, roce, payload_len)
    {
        let mut good = false;
        let sent = sink.transmit_gather(layout.head_len(), spans.as_slice(), layout.tail_len(), &mut |head, tail| {
            let built = frame::emit_around(head, tail, path, ip_id.next_id(), roce, &layout, |icrc| {
                gather::hash(runs, mem, icrc)
            });
            good = seal(built, head, tail);
        });
        stats.tx_zero_copy += u64::from(sent);
        return count(stats, sent, good);
    }
    let sent = send_hashed(sink, stats, ip_id, path, roce, payload_len, &mut |out, icrc| {
        gather::copy_hashed(runs, mem, out, icrc)
    });
    stats.tx_copied += u64::from(payload_len > 0);
    sent
}

/// Counts a frame the sink took (`sent`) or refused, good or spoiled; whether a
/// valid frame left.
fn count(stats: &mut Stats, sent: bool, good: bool) -> bool {
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
    use crate::rxe::gather::Run;
    use crate::rxe::memory::FlatMemory;
    use crate::rxe::sink::VecSink;
    use crate::wire::frame::IpPath;
    use crate::wire::ip::Ecn;
    use crate::wire::{Ipv4Address, MacAddr, frame::parse};
    use alloc::vec::Vec;

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

    /// A payload in memory at `runs`, sent with a sink that takes `room` spans
    /// and a memory with DMA `dma`; the frame as it leaves, and the stats.
    fn send_memory(mem: &FlatMemory, runs: &dyn Runs, len: usize, room: usize) -> (Vec<u8>, Stats) {
        let (mut sink, mut stats, mut id) =
            (VecSink { gather_room: room, ..VecSink::default() }, Stats::default(), IpId::new(7));
        let sent = send_from_memory(&mut sink, &mut stats, &mut id, &path(), &send_only(), len, runs, mem);
        assert!(sent);
        assert!(sink.read_payloads(|bus, n| mem.dma_read(bus, n)));
        assert_eq!(sink.frames.len(), 1);
        (sink.frames.remove(0), stats)
    }

    struct Two([Run; 2]);

    impl Runs for Two {
        fn each(&self, f: &mut dyn FnMut(u64, usize) -> bool) -> bool {
            self.0.iter().all(|r| r.each(f))
        }
    }

    #[test]
    fn a_payload_from_memory_is_the_same_frame_zero_copy_or_copied() {
        let mut mem = FlatMemory::new(0x1000, 0x4000);
        let bytes: Vec<u8> = (0..0x4000u32).map(|i| (i * 5 + i / 9) as u8).collect();
        mem.write(0x1000, &bytes).expect("in range");
        for len in [1, 2, 3, 4, 5, 63, 64, 65, 1000, 1023, 1024, 4093, 4096] {
            let one = Run { addr: 0x1003, len };
            let two = Two([Run { addr: 0x1003, len: len / 2 }, Run { addr: 0x3001, len: len - len / 2 }]);
            for runs in [&one as &dyn Runs, &two] {
                mem.set_dma(false);
                let (copied, s) = send_memory(&mem, runs, len, 6);
                assert_eq!((s.tx_copied, s.tx_zero_copy), (1, 0), "no DMA: copied");
                mem.set_dma(true);
                let (zero_copy, s) = send_memory(&mem, runs, len, 6);
                assert_eq!((s.tx_copied, s.tx_zero_copy), (0, 1), "{len} B sent from memory");
                assert_eq!(zero_copy, copied, "{len} B: byte for byte the same frame");
                let (no_room, s) = send_memory(&mem, runs, len, 0);
                assert_eq!((s.tx_copied, &no_room), (1, &copied), "a sink that cannot gather: copied");
                let rx = parse(&copied).expect("a good frame");
                let mut want = Vec::new();
                runs.each(&mut |a, n| {
                    want.extend_from_slice(mem.slice(a, n).expect("in range"));
                    true
                });
                assert_eq!(rx.repr.payload, &want[..]);
            }
        }
        // Two spans, room for one: copied.
        let two = Two([Run { addr: 0x1000, len: 8 }, Run { addr: 0x2000, len: 8 }]);
        assert_eq!(send_memory(&mem, &two, 16, 1).1.tx_copied, 1);
    }

    #[test]
    fn memory_rewritten_before_the_nic_reads_it_spoils_only_that_frame() {
        let mut mem = FlatMemory::new(0x1000, 0x1000);
        mem.set_dma(true);
        mem.write(0x1000, &[1; 512]).expect("in range");
        let (mut sink, mut stats, mut id) =
            (VecSink { gather_room: 6, ..VecSink::default() }, Stats::default(), IpId::new(0));
        let run = Run { addr: 0x1000, len: 512 };
        assert!(send_from_memory(&mut sink, &mut stats, &mut id, &path(), &send_only(), 512, &run, &mem));
        // The host writes the buffer after the ICRC was computed, before the NIC's read.
        mem.write(0x1100, &[2; 4]).expect("in range");
        assert!(sink.read_payloads(|bus, n| mem.dma_read(bus, n)));
        assert_eq!(parse(&sink.frames[0]).map(|_| ()), Err(crate::wire::frame::DropReason::BadIcrc));
        // The retransmission reads memory again: the new bytes, their own ICRC.
        assert!(send_from_memory(&mut sink, &mut stats, &mut id, &path(), &send_only(), 512, &run, &mem));
        assert!(sink.read_payloads(|bus, n| mem.dma_read(bus, n)));
        let rx = parse(&sink.frames[1]).expect("a good frame");
        assert_eq!(&rx.repr.payload[0x100..0x104], &[2; 4]);
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
        // From memory: a run outside it, whichever way the frame goes.
        let mut mem = FlatMemory::new(0x1000, 0x100);
        let outside = Run { addr: 0x10F0, len: 0x20 };
        for (dma, room) in [(false, 6), (true, 0)] {
            mem.set_dma(dma);
            let mut sink = VecSink { gather_room: room, ..VecSink::default() };
            assert!(!send_from_memory(&mut sink, &mut stats, &mut id, &path(), &send_only(), 0x20, &outside, &mem));
            assert!(parse(&sink.frames[0]).is_err(), "spoiled");
        }
        // A sink that offers room but refuses the frame: lost, as a full ring's.
        struct Refuses(VecSink);
        impl FrameSink for Refuses {
            fn transmit(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
                self.0.transmit(len, fill)
            }
            fn gather_room(&mut self) -> usize {
                6
            }
        }
        mem.set_dma(true);
        let before = stats.tx_full;
        let run = Run { addr: 0x1000, len: 16 };
        assert!(!send_from_memory(
            &mut Refuses(VecSink::default()),
            &mut stats,
            &mut id,
            &path(),
            &send_only(),
            16,
            &run,
            &mem
        ));
        assert_eq!((stats.tx_full, stats.tx_zero_copy), (before + 1, 0));
    }
}
