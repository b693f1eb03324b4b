//! The wire codec against the 101 frames Linux rxe sent (tests/fixtures): every frame
//! parses, its ICRC verifies, re-emitting its repr gives the same bytes, and the ICRC
//! covers exactly the fields it should.

mod common;

use common::{CAPTURES, FRAME_COUNT, all_frames, read_pcapng, read_summary};
use rdma::wire::frame::{self, DropReason, IpPath};
use rdma::wire::opcode_table::{Direction, Position};
use rdma::wire::{Opcode, Operation, Syndrome, icrc, roce, sport};
use std::collections::{BTreeMap, BTreeSet};

const ETH: usize = 14;
const IPV4: usize = 20;
const UDP: usize = 8;

#[test]
fn every_captured_frame_parses() {
    let frames = all_frames();
    assert_eq!(frames.len(), FRAME_COUNT);
    for (name, i, bytes) in &frames {
        if let Err(reason) = frame::parse(bytes) {
            panic!("{name} frame {i}: dropped as {reason}");
        }
    }
}

#[test]
fn every_icrc_verifies() {
    for (name, i, bytes) in all_frames() {
        assert!(icrc::verify(&bytes[ETH..]), "{name} frame {i}");
    }
}

#[test]
fn reemitting_the_repr_gives_identical_bytes() {
    let mut buffer = vec![0u8; 2048];
    for (name, i, bytes) in all_frames() {
        let rx = frame::parse(&bytes).expect("parses");
        assert_eq!(rx.repr.buffer_len(), bytes.len(), "{name} frame {i}");
        buffer.fill(0xA5);
        let len = rx.repr.emit(&mut buffer).expect("emits");
        assert_eq!(&buffer[..len], &bytes[..], "{name} frame {i}");
    }
}

/// tshark decoded the same frames; we must agree on opcode, QP, addresses and length.
#[test]
fn agrees_with_tshark() {
    for capture in &CAPTURES {
        let frames = read_pcapng(capture.pcapng);
        let lines = read_summary(capture.summary);
        assert_eq!(frames.len(), lines.len(), "{}", capture.name);
        for (bytes, line) in frames.iter().zip(&lines) {
            let rx = frame::parse(bytes).expect("parses");
            let what = format!("{} frame {}", capture.name, line.number);
            assert_eq!(bytes.len(), line.len, "{what}");
            assert!(rx.info.name.eq_ignore_ascii_case(&line.info), "{what}: {} vs {}", rx.info.name, line.info);
            assert_eq!(rx.repr.roce.bth.dest_qpn, line.qpn, "{what}");
            let IpPath::V4 { src, dst } = rx.repr.path.ip else {
                panic!("{what}: IPv4 expected");
            };
            assert_eq!((src.to_string(), dst.to_string()), (line.src.clone(), line.dst.clone()), "{what}");
        }
    }
}

/// The facts the captures show about how rxe builds frames, as the transport must.
#[test]
fn rxe_framing_facts() {
    let mut last_ip_id: BTreeMap<(&str, String), u16> = BTreeMap::new();
    for (name, i, bytes) in all_frames() {
        let rx = frame::parse(&bytes).expect("parses");
        let repr = &rx.repr;
        let bth = &repr.roce.bth;
        let what = format!("{name} frame {i}");

        assert_eq!(repr.path.dscp, 0, "{what}");
        assert_eq!(repr.path.hop_limit, 64, "{what}");
        assert_eq!(bytes[ETH + 6] & 0x40, 0x40, "{what}: DF");
        assert_eq!(&bytes[ETH + IPV4 + 6..ETH + IPV4 + 8], &[0, 0], "{what}: UDP checksum");
        assert_eq!(bth.pkey, 0xFFFF, "{what}");
        assert_eq!(bth.tver, 0, "{what}");
        assert_eq!(usize::from(bth.pad_count), roce::pad_len(repr.payload.len()), "{what}");

        // IP IDs grow per sender within a capture.
        let sender = (name, repr.path.ip_src_string());
        if let Some(prev) = last_ip_id.insert(sender, repr.ip_id) {
            assert!(repr.ip_id > prev, "{what}: IP ID {} after {prev}", repr.ip_id);
        }

        // Source port: per connection for RC (both ends equal QPNs here), per QP for UD.
        let port = match repr.roce.ext.deth {
            Some(deth) => sport::src_port_for_qpn(deth.src_qpn),
            None => sport::src_port_for_connection(0, bth.dest_qpn, bth.dest_qpn),
        };
        assert_eq!(repr.path.src_port, port, "{what}");

        // AckReq on requests that end a message, never on FIRST/MIDDLE or responses;
        // UD asks for nothing.
        let expect_ack_req = rx.info.direction == Direction::Request
            && rx.info.position.ends_message()
            && bth.opcode.transport() == rdma::wire::Transport::Rc;
        assert_eq!(bth.ack_req, expect_ack_req, "{what}");

        if let Some(aeth) = repr.roce.ext.aeth {
            assert_eq!(aeth.syndrome, Syndrome::ACK, "{what}");
        }
    }
}

#[test]
fn captured_sizes_match_the_readme() {
    let mut sizes: BTreeMap<Opcode, BTreeSet<usize>> = BTreeMap::new();
    for (_, _, bytes) in all_frames() {
        let rx = frame::parse(&bytes).expect("parses");
        sizes.entry(rx.info.opcode).or_default().insert(bytes.len());
    }
    let has = |op: Opcode, len: usize| sizes.get(&op).is_some_and(|s| s.contains(&len));
    assert!(has(Opcode::RcSendOnly, 122));
    assert!(has(Opcode::RcAcknowledge, 62));
    assert!(has(Opcode::RcRdmaReadRequest, 74));
    assert!(has(Opcode::RcRdmaWriteFirst, 1098));
    assert!(has(Opcode::RcFetchAdd, 86));
    assert!(has(Opcode::RcCompareSwap, 86));
    assert!(has(Opcode::RcAtomicAcknowledge, 70));
    assert!(has(Opcode::UdSendOnly, 130));
}

/// One frame per opcode seen, so the exhaustive bit-flip tests stay quick.
fn one_frame_per_opcode() -> Vec<(String, Vec<u8>)> {
    let mut seen = BTreeSet::new();
    all_frames()
        .into_iter()
        .filter_map(|(name, i, bytes)| {
            let op = frame::parse(&bytes).ok()?.info.opcode;
            seen.insert(op).then(|| (format!("{name} frame {i} ({op})"), bytes))
        })
        .collect()
}

/// Byte offsets (from the frame start) of the fields the ICRC masks, for an IPv4 frame.
fn masked_bytes() -> BTreeSet<usize> {
    let tos = ETH + 1;
    let ttl = ETH + 8;
    let ip_checksum = [ETH + 10, ETH + 11];
    let udp_checksum = [ETH + IPV4 + 6, ETH + IPV4 + 7];
    let bth_variant = ETH + IPV4 + UDP + 4;
    [tos, ttl, bth_variant].into_iter().chain(ip_checksum).chain(udp_checksum).collect()
}

#[test]
fn any_covered_bit_flip_fails_icrc() {
    let masked = masked_bytes();
    let frames = one_frame_per_opcode();
    assert!(frames.len() >= 15, "opcodes seen: {}", frames.len());
    for (what, bytes) in frames {
        let mut flipped = bytes.clone();
        for byte in ETH..bytes.len() {
            if masked.contains(&byte) {
                continue;
            }
            for bit in 0..8 {
                flipped[byte] ^= 1 << bit;
                assert!(!icrc::verify(&flipped[ETH..]), "{what}: byte {byte} bit {bit}");
                assert!(frame::parse(&flipped).is_err(), "{what}: byte {byte} bit {bit}");
                flipped[byte] ^= 1 << bit;
            }
        }
    }
}

#[test]
fn masked_bit_flips_keep_icrc() {
    let masked = masked_bytes();
    for (name, i, bytes) in all_frames() {
        let mut flipped = bytes.clone();
        for &byte in &masked {
            for bit in 0..8 {
                flipped[byte] ^= 1 << bit;
                assert!(icrc::verify(&flipped[ETH..]), "{name} frame {i}: byte {byte} bit {bit}");
                flipped[byte] ^= 1 << bit;
            }
        }
        // Changing all of them at once is just as invisible to the ICRC.
        for &byte in &masked {
            flipped[byte] = !flipped[byte];
        }
        assert!(icrc::verify(&flipped[ETH..]), "{name} frame {i}");
    }
}

/// What the whole-frame parser makes of masked-field changes: TOS and TTL also move the
/// IPv4 header checksum, so it (not the ICRC) catches them; the UDP checksum is ignored;
/// FECN/BECN are accepted and reported.
#[test]
fn masked_fields_through_the_frame_parser() {
    let (_, bytes) = &one_frame_per_opcode()[0];
    let with = |at: usize, xor: u8| {
        let mut b = bytes.clone();
        b[at] ^= xor;
        frame::parse(&b).map(|rx| rx.repr.roce.bth)
    };
    assert_eq!(with(ETH + 8, 1).err(), Some(DropReason::BadIpChecksum));
    assert_eq!(with(ETH + 1, 0x04).err(), Some(DropReason::BadIpChecksum));
    assert!(with(ETH + IPV4 + 6, 0xFF).is_ok());
    let bth = with(ETH + IPV4 + UDP + 4, 0xC0).expect("FECN/BECN are not covered");
    assert!(bth.fecn && bth.becn);
    // The Ethernet header is not covered at all.
    assert!(with(0, 0x02).is_ok());
}

#[test]
fn operations_and_positions_seen() {
    let mut seen = BTreeSet::new();
    for (_, _, bytes) in all_frames() {
        let rx = frame::parse(&bytes).expect("parses");
        seen.insert(format!("{:?} {:?}", rx.info.operation, rx.info.position));
    }
    for expected in [
        (Operation::Send, Position::Only),
        (Operation::Send, Position::First),
        (Operation::Send, Position::Middle),
        (Operation::Send, Position::Last),
        (Operation::RdmaWrite, Position::Only),
        (Operation::RdmaReadResponse, Position::Middle),
        (Operation::FetchAdd, Position::Only),
        (Operation::CompareSwap, Position::Only),
    ] {
        assert!(seen.contains(&format!("{:?} {:?}", expected.0, expected.1)), "{expected:?}");
    }
}

trait IpSrc {
    fn ip_src_string(&self) -> String;
}

impl IpSrc for frame::Path {
    fn ip_src_string(&self) -> String {
        match self.ip {
            IpPath::V4 { src, .. } => src.to_string(),
            IpPath::V6 { src, .. } => src.to_string(),
        }
    }
}
