//! Property tests of the wire codec: `parse(emit(x)) == x` for every header and whole
//! frames, emit writes exactly `buffer_len()` bytes, and no getter panics on bytes that
//! passed `check_len`. Case count: `PROPTEST_CASES` (default 256).

use proptest::prelude::*;
use rdma::wire::frame::{self, FrameRepr, IpPath, Path};
use rdma::wire::opcode_table::{self, Header, TABLE};
use rdma::wire::{
    AethPacket, AethRepr, AtomicAckEthPacket, AtomicAckEthRepr, AtomicEthPacket, AtomicEthRepr, BthPacket, BthRepr,
    DethPacket, DethRepr, Ecn, EtherType, EthernetPacket, EthernetRepr, ExtHeaders, FethRepr, IethPacket, IethRepr,
    ImmDtPacket, ImmDtRepr, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet, Ipv6Repr, MacAddr, Opcode, Psn,
    RethPacket, RethRepr, RoceRepr, Syndrome, UdpPacket, UdpRepr, icrc, roce,
};

const SENTINEL: u8 = 0xA5;
const U24: u32 = 1 << 24;

/// Emits a fixed-size header into a buffer with slack and checks that exactly
/// `buffer_len()` bytes were written: a byte past it changed means emit overran, and a
/// short write shows up as a parse mismatch.
macro_rules! header_round_trip {
    ($repr:expr, $packet:ident, $repr_ty:ident) => {{
        let repr = $repr;
        let len = repr.buffer_len();
        let mut buf = vec![SENTINEL; len + 8];
        repr.emit(&mut $packet::new_unchecked(&mut buf[..len]));
        prop_assert!(buf[len..].iter().all(|b| *b == SENTINEL));
        let packet = $packet::new_checked(&buf[..len]).expect("buffer_len is enough");
        prop_assert_eq!($repr_ty::parse(&packet), Ok(repr));
        prop_assert!($packet::new_checked(&buf[..len - 1]).is_err());
    }};
}

fn ecn() -> impl Strategy<Value = Ecn> {
    (0u8..4).prop_map(Ecn::from_bits)
}

fn bth_repr() -> impl Strategy<Value = BthRepr> {
    (any::<u8>(), any::<[bool; 5]>(), 0u8..4, 0u8..16, any::<u16>(), 0..U24, 0..U24).prop_map(
        |(op, [se, m, fecn, becn, a], pad, tver, pkey, qpn, psn)| BthRepr {
            opcode: Opcode::from_raw(op),
            solicited: se,
            mig_req: m,
            pad_count: pad,
            tver,
            pkey,
            fecn,
            becn,
            dest_qpn: qpn,
            ack_req: a,
            psn: Psn::new(psn),
        },
    )
}

fn reth_repr() -> impl Strategy<Value = RethRepr> {
    any::<(u64, u32, u32)>().prop_map(|(va, rkey, dma_len)| RethRepr { va, rkey, dma_len })
}

fn aeth_repr() -> impl Strategy<Value = AethRepr> {
    (any::<u8>(), 0..U24).prop_map(|(s, msn)| AethRepr { syndrome: Syndrome::from_byte(s), msn })
}

fn atomic_eth_repr() -> impl Strategy<Value = AtomicEthRepr> {
    any::<(u64, u32, u64, u64)>().prop_map(|(va, rkey, swap_add, compare)| AtomicEthRepr {
        va,
        rkey,
        swap_add,
        compare,
    })
}

fn deth_repr() -> impl Strategy<Value = DethRepr> {
    (any::<u32>(), 0..U24).prop_map(|(qkey, src_qpn)| DethRepr { qkey, src_qpn })
}

fn ext_headers() -> impl Strategy<Value = ExtHeaders> {
    (deth_repr(), reth_repr(), atomic_eth_repr(), aeth_repr(), any::<(u64, u32, u32)>()).prop_map(
        |(deth, reth, atomic_eth, aeth, (orig, imm, rkey))| ExtHeaders {
            deth: Some(deth),
            reth: Some(reth),
            atomic_eth: Some(atomic_eth),
            aeth: Some(aeth),
            atomic_ack_eth: Some(AtomicAckEthRepr { orig }),
            immdt: Some(ImmDtRepr { imm }),
            ieth: Some(IethRepr { rkey }),
            // Only the fields' bits: emit drops the rest.
            feth: Some(FethRepr { placement_type: (imm & 0x0F) as u8, selectivity_level: ((imm >> 4) & 3) as u8 }),
        },
    )
}

/// Keeps only the headers `opcode` calls for.
fn restrict(mut ext: ExtHeaders, opcode: Opcode) -> ExtHeaders {
    let info = opcode_table::lookup(opcode).expect("table opcode");
    if !info.has(Header::Deth) {
        ext.deth = None;
    }
    if !info.has(Header::Reth) {
        ext.reth = None;
    }
    if !info.has(Header::AtomicEth) {
        ext.atomic_eth = None;
    }
    if !info.has(Header::Aeth) {
        ext.aeth = None;
    }
    if !info.has(Header::AtomicAckEth) {
        ext.atomic_ack_eth = None;
    }
    if !info.has(Header::ImmDt) {
        ext.immdt = None;
    }
    if !info.has(Header::Ieth) {
        ext.ieth = None;
    }
    if !info.has(Header::Feth) {
        ext.feth = None;
    }
    ext
}

fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

fn path() -> impl Strategy<Value = Path> {
    let ip = prop_oneof![
        any::<([u8; 4], [u8; 4])>().prop_map(|(s, d)| IpPath::V4 { src: Ipv4Address(s), dst: Ipv4Address(d) }),
        (any::<([u8; 16], [u8; 16])>(), 0u32..1 << 20).prop_map(|((s, d), fl)| IpPath::V6 {
            src: Ipv6Address(s),
            dst: Ipv6Address(d),
            flow_label: fl
        }),
    ];
    (mac(), mac(), ip, 0u8..64, ecn(), any::<u8>(), any::<u16>()).prop_map(
        |(src_mac, dst_mac, ip, dscp, ecn, hop_limit, src_port)| Path {
            src_mac,
            dst_mac,
            ip,
            dscp,
            ecn,
            hop_limit,
            src_port,
        },
    )
}

/// A valid frame: a table opcode, the headers it calls for, a payload if it takes one,
/// TVer 0 and the pad count the payload implies.
fn frame_parts() -> impl Strategy<Value = (Path, u16, RoceRepr, Vec<u8>)> {
    (path(), any::<u16>(), 0..TABLE.len(), bth_repr(), ext_headers(), prop::collection::vec(any::<u8>(), 0..300))
        .prop_map(|(path, ip_id, row, bth, ext, mut payload)| {
            let info = &TABLE[row];
            if !info.payload {
                payload.clear();
            }
            let ip_id = match path.ip {
                IpPath::V4 { .. } => ip_id,
                IpPath::V6 { .. } => 0,
            };
            let bth = BthRepr { opcode: info.opcode, tver: 0, pad_count: roce::pad_len(payload.len()) as u8, ..bth };
            let roce = RoceRepr { bth, ext: restrict(ext, info.opcode) };
            (path, ip_id, roce, payload)
        })
}

proptest! {
    #[test]
    fn psn_arithmetic(a in any::<u32>(), n in 0u32..(1 << 23)) {
        let a = Psn::new(a);
        let b = a.wrapping_add(n);
        prop_assert_eq!(b.diff(a), n as i32);
        prop_assert_eq!(a.diff(b), -(n as i32));
        prop_assert_eq!(b.wrapping_sub(n), a);
        prop_assert!(n == 0 || (b.is_after(a) && a.is_before(b)));
        prop_assert!(b.value() < U24);
    }

    #[test]
    fn bth_round_trip(repr in bth_repr()) {
        header_round_trip!(repr, BthPacket, BthRepr);
    }

    #[test]
    fn reth_round_trip(repr in reth_repr()) {
        header_round_trip!(repr, RethPacket, RethRepr);
    }

    #[test]
    fn aeth_round_trip(repr in aeth_repr()) {
        header_round_trip!(repr, AethPacket, AethRepr);
    }

    #[test]
    fn atomic_eth_round_trip(repr in atomic_eth_repr()) {
        header_round_trip!(repr, AtomicEthPacket, AtomicEthRepr);
    }

    #[test]
    fn atomic_ack_eth_round_trip(orig in any::<u64>()) {
        header_round_trip!(AtomicAckEthRepr { orig }, AtomicAckEthPacket, AtomicAckEthRepr);
    }

    #[test]
    fn deth_round_trip(repr in deth_repr()) {
        header_round_trip!(repr, DethPacket, DethRepr);
    }

    #[test]
    fn immdt_round_trip(imm in any::<u32>()) {
        header_round_trip!(ImmDtRepr { imm }, ImmDtPacket, ImmDtRepr);
    }

    #[test]
    fn ieth_round_trip(rkey in any::<u32>()) {
        header_round_trip!(IethRepr { rkey }, IethPacket, IethRepr);
    }

    #[test]
    fn ethernet_round_trip(src in mac(), dst in mac(), ethertype in any::<u16>()) {
        let repr = EthernetRepr { src_addr: src, dst_addr: dst, ethertype: EtherType::from_raw(ethertype) };
        header_round_trip!(repr, EthernetPacket, EthernetRepr);
    }

    #[test]
    fn ipv4_round_trip(
        (src, dst) in any::<([u8; 4], [u8; 4])>(),
        protocol in any::<u8>(),
        payload_len in 0usize..=(65_535 - 20),
        (ttl, ident, dont_frag) in any::<(u8, u16, bool)>(),
        dscp in 0u8..64,
        ecn in ecn(),
    ) {
        let repr = Ipv4Repr {
            src_addr: Ipv4Address(src), dst_addr: Ipv4Address(dst), protocol, payload_len,
            ttl, dscp, ecn, ident, dont_frag,
        };
        let mut buf = vec![SENTINEL; repr.buffer_len() + payload_len];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        prop_assert!(buf[repr.buffer_len()..].iter().all(|b| *b == SENTINEL));
        let packet = Ipv4Packet::new_checked(&buf[..]).expect("fits");
        prop_assert_eq!(Ipv4Repr::parse(&packet), Ok(repr));
        prop_assert_eq!(packet.payload().len(), payload_len);
    }

    #[test]
    fn ipv6_round_trip(
        (src, dst) in any::<([u8; 16], [u8; 16])>(),
        (next_header, hop_limit) in any::<(u8, u8)>(),
        payload_len in 0usize..=65_535,
        dscp in 0u8..64,
        ecn in ecn(),
        flow_label in 0u32..(1 << 20),
    ) {
        let repr = Ipv6Repr {
            src_addr: Ipv6Address(src), dst_addr: Ipv6Address(dst), next_header, payload_len,
            hop_limit, dscp, ecn, flow_label,
        };
        let mut buf = vec![SENTINEL; repr.buffer_len() + payload_len];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
        prop_assert!(buf[repr.buffer_len()..].iter().all(|b| *b == SENTINEL));
        let packet = Ipv6Packet::new_checked(&buf[..]).expect("fits");
        prop_assert_eq!(Ipv6Repr::parse(&packet), Ok(repr));
    }

    #[test]
    fn udp_round_trip((src_port, dst_port) in any::<(u16, u16)>(), payload_len in 0usize..=(65_535 - 8)) {
        let repr = UdpRepr { src_port, dst_port, payload_len };
        let mut buf = vec![SENTINEL; repr.buffer_len() + payload_len];
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]));
        prop_assert!(buf[repr.buffer_len()..].iter().all(|b| *b == SENTINEL));
        let packet = UdpPacket::new_checked(&buf[..]).expect("fits");
        prop_assert_eq!(UdpRepr::parse(&packet), Ok(repr));
    }

    #[test]
    fn syndrome_byte_round_trip(byte in any::<u8>()) {
        prop_assert_eq!(Syndrome::from_byte(byte).to_byte(), byte);
    }

    #[test]
    fn frame_round_trip((path, ip_id, roce, payload) in frame_parts()) {
        let repr = FrameRepr { path, ip_id, roce, payload: &payload };
        let len = repr.buffer_len();
        let mut buf = vec![SENTINEL; len + 8];
        prop_assert_eq!(repr.emit(&mut buf), Ok(len));
        prop_assert!(buf[len..].iter().all(|b| *b == SENTINEL));
        prop_assert!(icrc::verify(&buf[14..len]));
        let rx = frame::parse(&buf[..len]);
        prop_assert_eq!(rx.map(|rx| rx.repr), Ok(repr));
        // A buffer one byte short is refused without writing past it.
        prop_assert!(repr.emit(&mut buf[..len - 1]).is_err());
    }

    #[test]
    fn frame_payload_closure_sees_the_payload_slot((path, ip_id, roce, payload) in frame_parts()) {
        let mut buf = vec![0u8; 1024];
        let (len, seen) = frame::emit(&mut buf, &path, ip_id, &roce, payload.len(), |slot| {
            slot.copy_from_slice(&payload);
            slot.len()
        }).expect("fits");
        prop_assert_eq!(seen, payload.len());
        let rx = frame::parse(&buf[..len]).expect("parses");
        prop_assert_eq!(rx.repr.payload, &payload[..]);
    }

    /// Every getter of every view, on any bytes that pass `check_len`.
    #[test]
    fn getters_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
        let b = &bytes[..];
        if let Ok(p) = BthPacket::new_checked(b) {
            let _ = (p.opcode(), p.solicited(), p.mig_req(), p.pad_count(), p.tver(), p.pkey());
            let _ = (p.fecn(), p.becn(), p.dest_qpn(), p.ack_req(), p.psn());
            prop_assert!(BthRepr::parse(&p).is_ok());
        }
        if let Ok(p) = RethPacket::new_checked(b) {
            let _ = (p.va(), p.rkey(), p.dma_len());
            prop_assert!(RethRepr::parse(&p).is_ok());
        }
        if let Ok(p) = AethPacket::new_checked(b) {
            let _ = (p.syndrome(), p.msn());
            prop_assert!(AethRepr::parse(&p).is_ok());
        }
        if let Ok(p) = AtomicEthPacket::new_checked(b) {
            let _ = (p.va(), p.rkey(), p.swap_add(), p.compare());
            prop_assert!(AtomicEthRepr::parse(&p).is_ok());
        }
        if let Ok(p) = AtomicAckEthPacket::new_checked(b) {
            let _ = p.orig();
            prop_assert!(AtomicAckEthRepr::parse(&p).is_ok());
        }
        if let Ok(p) = DethPacket::new_checked(b) {
            let _ = (p.qkey(), p.src_qpn());
            prop_assert!(DethRepr::parse(&p).is_ok());
        }
        if let Ok(p) = ImmDtPacket::new_checked(b) {
            let _ = p.imm();
            prop_assert!(ImmDtRepr::parse(&p).is_ok());
        }
        if let Ok(p) = IethPacket::new_checked(b) {
            let _ = p.rkey();
            prop_assert!(IethRepr::parse(&p).is_ok());
        }
        if let Ok(p) = EthernetPacket::new_checked(b) {
            let _ = (p.src_addr(), p.dst_addr(), p.ethertype(), p.payload());
            prop_assert!(EthernetRepr::parse(&p).is_ok());
        }
        if let Ok(p) = Ipv4Packet::new_checked(b) {
            let _ = (p.version(), p.header_len(), p.dscp(), p.ecn(), p.total_len(), p.ident());
            let _ = (p.dont_frag(), p.more_frags(), p.frag_offset(), p.is_fragment(), p.ttl());
            let _ = (p.protocol(), p.checksum(), p.src_addr(), p.dst_addr(), p.verify_checksum());
            let _ = (p.payload(), Ipv4Repr::parse(&p));
        }
        if let Ok(p) = Ipv6Packet::new_checked(b) {
            let _ = (p.version(), p.traffic_class(), p.dscp(), p.ecn(), p.flow_label());
            let _ = (p.payload_len(), p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr());
            let _ = (p.payload(), Ipv6Repr::parse(&p));
        }
        if let Ok(p) = UdpPacket::new_checked(b) {
            let _ = (p.src_port(), p.dst_port(), p.length(), p.checksum(), p.payload());
            prop_assert!(UdpRepr::parse(&p).is_ok());
        }
        let _ = icrc::compute(b);
        let _ = icrc::verify(b);
        let _ = RoceRepr::parse(b);
    }

    /// The same, with bytes shaped to pass the length checks that depend on length
    /// fields, which random bytes rarely do.
    #[test]
    fn length_field_views_never_panic(
        mut bytes in prop::collection::vec(any::<u8>(), 60..200),
        ihl in 0u8..16,
        len_field in any::<u16>(),
    ) {
        let total = bytes.len();
        let fit = (usize::from(len_field) % (total + 1)) as u16;
        bytes[0] = 0x40 | ihl;
        bytes[2..4].copy_from_slice(&fit.to_be_bytes());
        if let Ok(p) = Ipv4Packet::new_checked(&bytes[..]) {
            prop_assert!(p.payload().len() <= total);
            let _ = Ipv4Repr::parse(&p);
        }
        bytes[4..6].copy_from_slice(&fit.saturating_sub(40).to_be_bytes());
        if let Ok(p) = Ipv6Packet::new_checked(&bytes[..]) {
            let _ = (p.payload(), Ipv6Repr::parse(&p));
        }
        if let Ok(p) = UdpPacket::new_checked(&bytes[..]) {
            let _ = (p.payload(), UdpRepr::parse(&p));
        }
    }
}
