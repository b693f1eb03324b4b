//! Whole RoCE v2 frames (annex A17): Ethernet II, IPv4 or IPv6, UDP to port 4791, the
//! RoCE headers, payload, pad and ICRC.
//!
//! [`emit`] builds a frame in place at the start of a TX buffer and lets the caller write
//! the payload straight into it; [`emit_parts`] does the same into two buffers (headers,
//! then the rest), [`emit_parts_hashed`] for a writer that computes the ICRC as it copies,
//! and [`emit_around`] writes only the headers and the tail (pad, ICRC) around a payload
//! that stays where it is, for a NIC that reads it from there. [`parse`] turns a received
//! frame into an [`RxFrame`] or a [`DropReason`] for the caller's counters; it checks the
//! ICRC before anything else reads the payload, so a receiver copies verified bytes only.
//!
//! Frames are built as Linux rxe builds them: IPv4 without options, DF set, the IP ID
//! chosen by the caller (see [`IpId`]), UDP checksum 0. The shortest RoCE frame is 58
//! bytes; padding it to the 60-byte Ethernet minimum is left to the NIC, and the parser
//! ignores bytes past the IP length for the same reason.

use core::fmt;

use super::icrc::{self, ICRC_LEN};
use super::ip::{self, Ecn};
use super::opcode_table::OpcodeInfo;
use super::roce::{self, RoceRepr};
use super::{
    BthPacket, EtherType, EthernetPacket, EthernetRepr, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet,
    Ipv6Repr, MacAddr, UdpPacket, UdpRepr, ethernet, ipv4, ipv6, udp,
};
use vocab::ROCE_V2_UDP_PORT;

/// The IP part of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpPath {
    V4 {
        src: Ipv4Address,
        dst: Ipv4Address,
    },
    V6 {
        src: Ipv6Address,
        dst: Ipv6Address,
        /// 20 bits.
        flow_label: u32,
    },
}

/// Everything before the BTH that stays the same for the packets of a QP: what its
/// address vector resolves to. For a received frame it describes the frame as its
/// sender built it (`src_*` are the peer's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Path {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub ip: IpPath,
    /// 6 bits.
    pub dscp: u8,
    pub ecn: Ecn,
    /// IPv4 TTL or IPv6 hop limit.
    pub hop_limit: u8,
    /// UDP source port; see [`crate::wire::sport`] for how a QP chooses it.
    pub src_port: u16,
}

impl Path {
    /// Length of the IP header on this path.
    pub const fn ip_header_len(&self) -> usize {
        match self.ip {
            IpPath::V4 { .. } => ipv4::HEADER_LEN,
            IpPath::V6 { .. } => ipv6::HEADER_LEN,
        }
    }

    /// Offset of the BTH in a frame on this path.
    pub const fn bth_offset(&self) -> usize {
        ethernet::HEADER_LEN + self.ip_header_len() + udp::HEADER_LEN
    }

    /// Length of a frame on this path whose RoCE headers take `roce_header_len` bytes
    /// and which carries `payload_len` bytes: everything from the Ethernet header to the
    /// ICRC, pad included.
    /// Saturates rather than overflows for absurd lengths, which `emit` then refuses.
    pub const fn frame_len(&self, roce_header_len: usize, payload_len: usize) -> usize {
        let fixed = self.bth_offset() + roce::pad_len(payload_len) + ICRC_LEN;
        fixed.saturating_add(roce_header_len).saturating_add(payload_len)
    }
}

/// Counts IPv4 identification values: one per frame sent, wrapping. DF frames need no
/// unique ID, but the captures show Linux's growing per sender, and one counter per
/// device gives the same picture to anyone comparing traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IpId(u16);

impl IpId {
    /// A counter whose next value is `start`.
    pub const fn new(start: u16) -> IpId {
        IpId(start)
    }

    /// Returns the next ID and advances.
    pub fn next_id(&mut self) -> u16 {
        let id = self.0;
        self.0 = self.0.wrapping_add(1);
        id
    }
}

/// A whole frame as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRepr<'a> {
    pub path: Path,
    /// IPv4 identification. IPv6 has none: emit ignores it and parse gives 0.
    pub ip_id: u16,
    /// The RoCE headers. On emit the BTH pad count is derived from the payload length,
    /// whatever `roce.bth.pad_count` says; parse reports the pad count received.
    pub roce: RoceRepr,
    /// The payload without pad.
    pub payload: &'a [u8],
}

impl FrameRepr<'_> {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        self.path.frame_len(self.roce.header_len(), self.payload.len())
    }

    /// Writes the frame at the start of `buffer` and returns its length.
    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize, EmitError> {
        let payload = self.payload;
        emit(buffer, &self.path, self.ip_id, &self.roce, payload.len(), |out| out.copy_from_slice(payload))
            .map(|(len, ())| len)
    }
}

/// A received frame that passed every check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxFrame<'a> {
    pub repr: FrameRepr<'a>,
    /// The opcode's table row, so the transport does not look it up again.
    pub info: &'static OpcodeInfo,
}

/// Why a frame could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitError {
    /// The opcode has no row in the opcode table.
    UnknownOpcode,
    /// The extension headers present are not the ones the opcode calls for.
    HeaderMismatch,
    /// A non-empty payload for an opcode that carries none.
    PayloadNotAllowed,
    /// The frame would not fit in an IP datagram.
    TooLong,
    /// The TX buffer is shorter than the frame.
    BufferTooSmall { needed: usize },
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmitError::UnknownOpcode => f.write_str("opcode not in the opcode table"),
            EmitError::HeaderMismatch => f.write_str("extension headers do not match the opcode"),
            EmitError::PayloadNotAllowed => f.write_str("payload on an opcode that carries none"),
            EmitError::TooLong => f.write_str("frame longer than an IP datagram"),
            EmitError::BufferTooSmall { needed } => {
                write!(f, "TX buffer too small, {needed} bytes needed")
            }
        }
    }
}

impl core::error::Error for EmitError {}

/// Why a received frame was dropped, and a counter per reason: the receive path's one
/// vocabulary, shared with steering.
pub use vocab::{DropCounters, DropReason};

/// Builds one frame at the start of `buffer` and returns its length and what
/// `fill_payload` returned.
///
/// The headers come from `path`, `ip_id` and `roce`; the BTH pad count is set from
/// `payload_len`. `fill_payload` gets exactly `payload_len` bytes of the buffer to write
/// the payload into; pad and ICRC are written after it returns, so the payload is never
/// copied twice. A `fill_payload` that fails can report it through its return value; the
/// frame is then complete but the caller should not send it.
pub fn emit<R>(
    buffer: &mut [u8],
    path: &Path,
    ip_id: u16,
    roce: &RoceRepr,
    payload_len: usize,
    fill_payload: impl FnOnce(&mut [u8]) -> R,
) -> Result<(usize, R), EmitError> {
    let layout = Layout::new(path, roce, payload_len)?;
    let frame_len = layout.frame_len();
    let frame = buffer.get_mut(..frame_len).ok_or(EmitError::BufferTooSmall { needed: frame_len })?;
    let (head, body) = frame.split_at_mut(layout.head_len());
    emit_parts(head, body, path, ip_id, roce, payload_len, fill_payload)
}

/// A frame's shape, checked once: its repr against the opcode table and its
/// lengths against IP's. Whoever sizes the buffers makes it; the emitters take
/// it rather than checking the same frame again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    info: &'static OpcodeInfo,
    bth_offset: usize,
    payload_len: usize,
}

impl Layout {
    /// The layout of a frame on `path` with the headers of `roce` and a payload of
    /// `payload_len` bytes; fails as [`emit`] would for a frame that cannot be built.
    pub fn new(path: &Path, roce: &RoceRepr, payload_len: usize) -> Result<Layout, EmitError> {
        // No datagram holds more than 64 KiB; refusing here keeps the sums below small.
        if payload_len > usize::from(u16::MAX) {
            return Err(EmitError::TooLong);
        }
        let info = roce.check(payload_len)?;
        let layout = Layout { info, bth_offset: path.bth_offset(), payload_len };
        let udp_len = udp::HEADER_LEN + info.header_len() + layout.body_len();
        // IPv4 counts its header in the total length, IPv6 does not; UDP has its own limit.
        let ip_length_field = match path.ip {
            IpPath::V4 { .. } => path.ip_header_len() + udp_len,
            IpPath::V6 { .. } => udp_len,
        };
        if ip_length_field > usize::from(u16::MAX) || udp_len > usize::from(u16::MAX) {
            return Err(EmitError::TooLong);
        }
        Ok(layout)
    }

    /// The headers: Ethernet through the last RoCE extension header.
    pub fn head_len(&self) -> usize {
        self.bth_offset + self.info.header_len()
    }

    /// Payload, pad and ICRC.
    pub fn body_len(&self) -> usize {
        self.payload_len + self.tail_len()
    }

    /// Pad and ICRC.
    pub fn tail_len(&self) -> usize {
        roce::pad_len(self.payload_len) + ICRC_LEN
    }

    /// The whole frame.
    pub fn frame_len(&self) -> usize {
        self.head_len() + self.body_len()
    }

    /// Whether it was made for a frame on `path` with `roce`'s opcode: an emitter
    /// handed another frame's layout refuses it rather than build a broken frame.
    fn fits(&self, path: &Path, roce: &RoceRepr) -> bool {
        self.bth_offset == path.bth_offset() && self.info.opcode == roce.bth.opcode
    }
}

/// [`emit`] into two buffers, for a NIC that gathers a frame from several (the first
/// [`Layout::head_len`] bytes into `head`, the rest into `body`): the same frame, byte
/// for byte. `fill_payload` writes the payload, which is then hashed for the ICRC; see
/// [`emit_parts_hashed`] for a caller that hashes while it writes.
pub fn emit_parts<R>(
    head: &mut [u8],
    body: &mut [u8],
    path: &Path,
    ip_id: u16,
    roce: &RoceRepr,
    payload_len: usize,
    fill_payload: impl FnOnce(&mut [u8]) -> R,
) -> Result<(usize, R), EmitError> {
    let layout = Layout::new(path, roce, payload_len)?;
    emit_parts_hashed(head, body, path, ip_id, roce, &layout, |payload, icrc| {
        let filled = fill_payload(payload);
        icrc.update(payload);
        filled
    })
}

/// [`emit_parts`] of a frame laid out as `layout`, for a `fill_payload` that adds
/// every byte it writes to the ICRC hasher it is handed, in order (e.g. with a copy
/// that hashes as it goes, [`crc::Hasher::copy_update`]): the payload is then touched
/// once. A fill that hashes something else gives a frame whose ICRC no receiver
/// accepts.
pub fn emit_parts_hashed<R>(
    head: &mut [u8],
    body: &mut [u8],
    path: &Path,
    ip_id: u16,
    roce: &RoceRepr,
    layout: &Layout,
    fill_payload: impl FnOnce(&mut [u8], &mut icrc::Hasher) -> R,
) -> Result<(usize, R), EmitError> {
    let Some(body) = body.get_mut(..layout.body_len()) else {
        return Err(EmitError::BufferTooSmall { needed: layout.frame_len() });
    };
    let (payload, tail) = body.split_at_mut(layout.payload_len);
    emit_around(head, tail, path, ip_id, roce, layout, |icrc| fill_payload(payload, icrc))
}

/// Builds a frame laid out as `layout` whose payload is not in either buffer: the
/// headers into `head` (the first [`Layout::head_len`] bytes), the pad and ICRC into
/// `tail` (the first [`Layout::tail_len`]). The payload goes between them on the wire,
/// from wherever it lies (a NIC reads it by DMA from registered memory);
/// `hash_payload` adds its bytes, in order, to the ICRC hasher it is handed, and its
/// result is returned with the frame's length. The frame is the one [`emit`] builds
/// around the same bytes.
pub fn emit_around<R>(
    head: &mut [u8],
    tail: &mut [u8],
    path: &Path,
    ip_id: u16,
    roce: &RoceRepr,
    layout: &Layout,
    hash_payload: impl FnOnce(&mut icrc::Hasher) -> R,
) -> Result<(usize, R), EmitError> {
    if !layout.fits(path, roce) {
        return Err(EmitError::HeaderMismatch);
    }
    let (info, needed) = (layout.info, layout.frame_len());
    let pad = roce::pad_len(layout.payload_len);
    let (Some(head), Some(tail)) = (head.get_mut(..layout.head_len()), tail.get_mut(..layout.tail_len())) else {
        return Err(EmitError::BufferTooSmall { needed });
    };
    let udp_len = udp::HEADER_LEN + info.header_len() + layout.body_len();

    let (eth, rest) = head.split_at_mut(ethernet::HEADER_LEN);
    let (ip_header, rest) = rest.split_at_mut(path.ip_header_len());
    let (udp_header, roce_headers) = rest.split_at_mut(udp::HEADER_LEN);
    let (pad_bytes, icrc_bytes) = tail.split_at_mut(pad);

    let ethertype = match path.ip {
        IpPath::V4 { .. } => EtherType::Ipv4,
        IpPath::V6 { .. } => EtherType::Ipv6,
    };
    EthernetRepr { src_addr: path.src_mac, dst_addr: path.dst_mac, ethertype }
        .emit(&mut EthernetPacket::new_unchecked(eth));
    match path.ip {
        IpPath::V4 { src, dst } => Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: ip::PROTOCOL_UDP,
            payload_len: udp_len,
            ttl: path.hop_limit,
            dscp: path.dscp,
            ecn: path.ecn,
            ident: ip_id,
            dont_frag: true,
        }
        .emit(&mut Ipv4Packet::new_unchecked(ip_header)),
        IpPath::V6 { src, dst, flow_label } => Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: ip::PROTOCOL_UDP,
            payload_len: udp_len,
            hop_limit: path.hop_limit,
            dscp: path.dscp,
            ecn: path.ecn,
            flow_label,
        }
        .emit(&mut Ipv6Packet::new_unchecked(ip_header)),
    }
    UdpRepr { src_port: path.src_port, dst_port: ROCE_V2_UDP_PORT, payload_len: udp_len - udp::HEADER_LEN }
        .emit(&mut UdpPacket::new_unchecked(udp_header));

    // The pad count is the layout's, whatever the repr says; set in place rather than
    // on a copy of the repr.
    roce.emit(info, roce_headers)?;
    BthPacket::new_unchecked(&mut *roce_headers).set_pad_count(pad as u8);

    // The IP, UDP and BTH headers were written above, so the ICRC input is well formed;
    // the error arm cannot be taken.
    let mut hasher = icrc::start(&head[ethernet::HEADER_LEN..]).map_err(|_| EmitError::BufferTooSmall { needed })?;
    let hashed = hash_payload(&mut hasher);
    // At most 3 bytes, usually none: a loop, where `fill` calls memset.
    for byte in pad_bytes.iter_mut() {
        *byte = 0;
    }
    hasher.update(pad_bytes);
    icrc_bytes.copy_from_slice(&hasher.finalize().to_le_bytes());
    Ok((needed, hashed))
}

/// Parses a received frame, from the first byte of its Ethernet header, checking it in
/// wire order: Ethernet, IP, UDP, ICRC, then the RoCE headers against the opcode table.
pub fn parse(frame: &[u8]) -> Result<RxFrame<'_>, DropReason> {
    parse_with(frame, false)
}

/// As [`parse`], but with `ip_header_verified` (the NIC checked this frame's
/// IPv4 header checksum and found it right) the header checksum is not
/// summed again. Every other check stays, the ICRC's first.
// Inlined into its callers (`parse` and the transport's receive): returned by value, the
// frame's repr (over 200 bytes) was copied out of here and again into the caller's variable.
#[inline(always)]
pub fn parse_with(frame: &[u8], ip_header_verified: bool) -> Result<RxFrame<'_>, DropReason> {
    let eth = EthernetPacket::new_checked(frame).map_err(|_| DropReason::Truncated)?;
    let ip_bytes = eth.payload();
    let (mut path, ip_id, ip_packet, udp_bytes) = match eth.ethertype() {
        EtherType::Ipv4 => parse_ipv4(ip_bytes, ip_header_verified)?,
        EtherType::Ipv6 => parse_ipv6(ip_bytes)?,
        _ => return Err(DropReason::EtherType),
    };
    path.src_mac = eth.src_addr();
    path.dst_mac = eth.dst_addr();

    if udp_bytes.len() < udp::HEADER_LEN {
        return Err(DropReason::Truncated);
    }
    let udp = UdpPacket::new_unchecked(udp_bytes);
    if udp.dst_port() != ROCE_V2_UDP_PORT {
        return Err(DropReason::NotRoce);
    }
    // The IP length is authoritative; a UDP length that disagrees means a broken sender.
    if usize::from(udp.length()) != udp_bytes.len() {
        return Err(DropReason::BadLength);
    }
    path.src_port = udp.src_port();
    let roce_bytes = udp.payload();
    if roce_bytes.len() < super::bth::HEADER_LEN + ICRC_LEN {
        return Err(DropReason::Truncated);
    }
    if !icrc::verify(ip_packet) {
        return Err(DropReason::BadIcrc);
    }
    let covered = roce_bytes.get(..roce_bytes.len() - ICRC_LEN).ok_or(DropReason::Truncated)?;
    let (roce, info, payload) = RoceRepr::parse(covered)?;
    Ok(RxFrame { repr: FrameRepr { path, ip_id, roce, payload }, info })
}

/// A path with the MACs and port still to fill in, the IP ID, the whole IP packet (for
/// the ICRC) and the UDP datagram.
type IpParts<'a> = (Path, u16, &'a [u8], &'a [u8]);

fn parse_ipv4(bytes: &[u8], header_verified: bool) -> Result<IpParts<'_>, DropReason> {
    if bytes.len() < ipv4::HEADER_LEN {
        return Err(DropReason::Truncated);
    }
    let packet = Ipv4Packet::new_unchecked(bytes);
    if packet.version() != 4 {
        return Err(DropReason::BadIpVersion);
    }
    let header_len = usize::from(packet.header_len());
    if header_len < ipv4::HEADER_LEN {
        return Err(DropReason::BadLength);
    }
    if header_len > ipv4::HEADER_LEN {
        return Err(DropReason::IpOptions);
    }
    let total_len = usize::from(packet.total_len());
    if total_len < header_len {
        return Err(DropReason::BadLength);
    }
    if total_len > bytes.len() {
        return Err(DropReason::Truncated);
    }
    if !header_verified && !packet.verify_checksum() {
        return Err(DropReason::BadIpChecksum);
    }
    if packet.is_fragment() {
        return Err(DropReason::IpFragment);
    }
    if packet.protocol() != ip::PROTOCOL_UDP {
        return Err(DropReason::NotUdp);
    }
    let ip_packet = bytes.get(..total_len).ok_or(DropReason::Truncated)?;
    let udp_bytes = ip_packet.get(header_len..).ok_or(DropReason::Truncated)?;
    let path = Path {
        src_mac: MacAddr::default(),
        dst_mac: MacAddr::default(),
        ip: IpPath::V4 { src: packet.src_addr(), dst: packet.dst_addr() },
        dscp: packet.dscp(),
        ecn: packet.ecn(),
        hop_limit: packet.ttl(),
        src_port: 0,
    };
    Ok((path, packet.ident(), ip_packet, udp_bytes))
}

fn parse_ipv6(bytes: &[u8]) -> Result<IpParts<'_>, DropReason> {
    if bytes.len() < ipv6::HEADER_LEN {
        return Err(DropReason::Truncated);
    }
    let packet = Ipv6Packet::new_unchecked(bytes);
    if packet.version() != 6 {
        return Err(DropReason::BadIpVersion);
    }
    let total_len = ipv6::HEADER_LEN + usize::from(packet.payload_len());
    if total_len > bytes.len() {
        return Err(DropReason::Truncated);
    }
    if packet.next_header() != ip::PROTOCOL_UDP {
        return Err(DropReason::NotUdp);
    }
    let ip_packet = bytes.get(..total_len).ok_or(DropReason::Truncated)?;
    let udp_bytes = ip_packet.get(ipv6::HEADER_LEN..).ok_or(DropReason::Truncated)?;
    let path = Path {
        src_mac: MacAddr::default(),
        dst_mac: MacAddr::default(),
        ip: IpPath::V6 { src: packet.src_addr(), dst: packet.dst_addr(), flow_label: packet.flow_label() },
        dscp: packet.dscp(),
        ecn: packet.ecn(),
        hop_limit: packet.hop_limit(),
        src_port: 0,
    };
    Ok((path, 0, ip_packet, udp_bytes))
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::wire::{AethRepr, ExtHeaders, Opcode, Psn, RethRepr, Syndrome, sport};
    use alloc::vec;

    fn path_v4() -> Path {
        Path {
            src_mac: MacAddr([0x52, 0x54, 0, 0, 0, 2]),
            dst_mac: MacAddr([0x52, 0x54, 0, 0, 0, 1]),
            ip: IpPath::V4 { src: Ipv4Address([10, 0, 0, 2]), dst: Ipv4Address([10, 0, 0, 1]) },
            dscp: 0,
            ecn: Ecn::NotEct,
            hop_limit: 64,
            src_port: sport::src_port_for_connection(0, 0x11, 0x11),
        }
    }

    fn path_v6() -> Path {
        let mut src = [0u8; 16];
        src[..2].copy_from_slice(&[0xfe, 0x80]);
        src[15] = 2;
        let mut dst = src;
        dst[15] = 1;
        Path {
            ip: IpPath::V6 { src: Ipv6Address(src), dst: Ipv6Address(dst), flow_label: 0x12345 },
            dscp: 26,
            ecn: Ecn::Ect0,
            ..path_v4()
        }
    }

    fn bth(opcode: Opcode) -> crate::wire::BthRepr {
        crate::wire::BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xFFFF,
            fecn: false,
            becn: false,
            dest_qpn: 0x11,
            ack_req: true,
            psn: Psn::new(0x80545a),
        }
    }

    /// The first frame of rc_send_small, rebuilt from values: SEND ONLY of 64 x 0x7b.
    #[test]
    fn rebuilds_a_captured_send_only() {
        let payload = [0x7bu8; 64];
        let repr = FrameRepr {
            path: path_v4(),
            ip_id: 0xe99c,
            roce: RoceRepr { bth: bth(Opcode::RcSendOnly), ext: ExtHeaders::NONE },
            payload: &payload,
        };
        assert_eq!(repr.buffer_len(), 122);
        let mut buf = [0u8; 200];
        assert_eq!(repr.emit(&mut buf), Ok(122));
        assert_eq!(&buf[14..20], &[0x45, 0x00, 0x00, 0x6c, 0xe9, 0x9c]);
        assert_eq!(&buf[118..122], &[0x09, 0xd0, 0x85, 0x86]);
        let rx = parse(&buf[..122]).expect("parses");
        assert_eq!(rx.repr, repr);
        assert_eq!(rx.info.opcode, Opcode::RcSendOnly);
    }

    #[test]
    fn ipv6_round_trip_with_pad() {
        let payload = [1u8, 2, 3, 4, 5];
        let repr = FrameRepr {
            path: path_v6(),
            ip_id: 0,
            roce: RoceRepr {
                bth: crate::wire::BthRepr { pad_count: 3, ..bth(Opcode::RcRdmaWriteOnly) },
                ext: ExtHeaders { reth: Some(RethRepr { va: 0x1000, rkey: 7, dma_len: 5 }), ..ExtHeaders::NONE },
            },
            payload: &payload,
        };
        let mut buf = vec![0xAAu8; 256];
        let len = repr.emit(&mut buf).expect("fits");
        assert_eq!(len, repr.buffer_len());
        assert_eq!(len, 14 + 40 + 8 + 28 + 5 + 3 + 4);
        assert_eq!(&buf[len - 7..len - 4], &[0, 0, 0], "pad is zero");
        let rx = parse(&buf[..len]).expect("parses");
        assert_eq!(rx.repr, repr);
    }

    #[test]
    fn payload_is_written_in_place() {
        let roce = RoceRepr {
            bth: bth(Opcode::RcRdmaReadResponseOnly),
            ext: ExtHeaders { aeth: Some(AethRepr { syndrome: Syndrome::ACK, msn: 3 }), ..ExtHeaders::NONE },
        };
        let mut buf = [0u8; 1500];
        let (len, seen) = emit(&mut buf, &path_v4(), 9, &roce, 10, |p| {
            p.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
            p.len()
        })
        .expect("fits");
        assert_eq!(seen, 10);
        let rx = parse(&buf[..len]).expect("parses");
        assert_eq!(rx.repr.payload, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(rx.repr.roce.bth.pad_count, 2);
    }

    #[test]
    fn a_frame_in_two_parts_is_the_same_frame() {
        let roce = RoceRepr { bth: bth(Opcode::RcSendOnly), ext: ExtHeaders::NONE };
        for (path, payload_len) in [(path_v4(), 1), (path_v4(), 1024), (path_v6(), 7), (path_v6(), 4096)] {
            let fill = |p: &mut [u8]| p.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
            let mut whole = vec![0u8; 9000];
            let (len, ()) = emit(&mut whole, &path, 5, &roce, payload_len, fill).expect("fits");
            let layout = Layout::new(&path, &roce, payload_len).expect("lengths");
            let (head_len, body_len) = (layout.head_len(), layout.body_len());
            assert_eq!((head_len, head_len + body_len), (path.bth_offset() + 12, len));
            let (mut head, mut body) = (vec![0u8; head_len], vec![0u8; body_len]);
            let (n, ()) = emit_parts(&mut head, &mut body, &path, 5, &roce, payload_len, fill).expect("fits");
            assert_eq!(n, len);
            assert_eq!([head, body].concat(), whole[..len], "{payload_len} B");
        }
        let (mut head, mut body) = ([0u8; 54], [0u8; 8]);
        assert_eq!(
            emit_parts(&mut head[..53], &mut body, &path_v4(), 0, &roce, 4, |_| ()),
            Err(EmitError::BufferTooSmall { needed: 62 })
        );
        assert_eq!(
            emit_parts(&mut head, &mut body[..7], &path_v4(), 0, &roce, 4, |_| ()),
            Err(EmitError::BufferTooSmall { needed: 62 })
        );
    }

    /// Headers and tail around a payload hashed where it lies, and a payload
    /// written and hashed in one go: the frame `emit` builds, for every payload
    /// length up to 300 and a jumbo one, on both IP versions.
    #[test]
    fn a_frame_built_around_its_payload_is_the_same_frame() {
        let send = RoceRepr { bth: bth(Opcode::RcSendOnly), ext: ExtHeaders::NONE };
        let write = RoceRepr {
            bth: bth(Opcode::RcRdmaWriteOnly),
            ext: ExtHeaders { reth: Some(RethRepr { va: 0x1000, rkey: 7, dma_len: 9 }), ..ExtHeaders::NONE },
        };
        let lens = (0..=300).chain([4096, 8000]);
        for (path, roce, len) in lens.flat_map(|n| [(path_v4(), send, n), (path_v6(), write, n)]) {
            let payload: alloc::vec::Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let mut whole = vec![0u8; 9000];
            let (n, ()) = emit(&mut whole, &path, 3, &roce, len, |p| p.copy_from_slice(&payload)).expect("fits");
            let layout = Layout::new(&path, &roce, len).expect("lengths");
            let (head_len, tail_len) = (layout.head_len(), layout.tail_len());
            assert_eq!(head_len + len + tail_len, n);
            let (mut head, mut tail) = (vec![0xEEu8; head_len], vec![0xEEu8; tail_len]);
            let (m, read) = emit_around(&mut head, &mut tail, &path, 3, &roce, &layout, |h| {
                // In two runs, as a payload over two pages.
                let cut = len / 3;
                h.update(&payload[..cut]);
                h.update(&payload[cut..]);
                true
            })
            .expect("fits");
            assert_eq!((m, read), (n, true));
            assert_eq!([&head[..], &payload, &tail].concat(), whole[..n], "{len} B around");
            let (mut head, mut body) = (vec![0u8; head_len], vec![0u8; len + tail_len]);
            let (m, ()) = emit_parts_hashed(&mut head, &mut body, &path, 3, &roce, &layout, |out, h| {
                h.copy_update(&payload, out);
            })
            .expect("fits");
            assert_eq!(m, n);
            assert_eq!([head, body].concat(), whole[..n], "{len} B copied and hashed");
        }
        let (mut head, mut tail) = ([0u8; 54], [0u8; 4]);
        let layout = |len| Layout::new(&path_v4(), &send, len).expect("lengths");
        assert_eq!(
            emit_around(&mut head, &mut tail[..3], &path_v4(), 0, &send, &layout(4), |_| ()),
            Err(EmitError::BufferTooSmall { needed: 62 })
        );
        assert_eq!(
            emit_around(&mut head, &mut tail, &path_v4(), 0, &send, &layout(5), |_| ()),
            Err(EmitError::BufferTooSmall { needed: 66 }),
            "5 bytes need 3 of pad"
        );
        // A layout made for another frame is refused, not followed.
        let mut big = [0u8; 100];
        assert_eq!(
            emit_around(&mut big, &mut tail, &path_v6(), 0, &send, &layout(4), |_| ()),
            Err(EmitError::HeaderMismatch),
            "made for IPv4"
        );
        assert_eq!(
            emit_around(&mut big, &mut tail, &path_v4(), 0, &write, &layout(4), |_| ()),
            Err(EmitError::HeaderMismatch),
            "made for a SEND"
        );
    }

    #[test]
    fn emit_errors() {
        let ack = RoceRepr {
            bth: bth(Opcode::RcAcknowledge),
            ext: ExtHeaders { aeth: Some(AethRepr { syndrome: Syndrome::ACK, msn: 1 }), ..ExtHeaders::NONE },
        };
        let mut small = [0u8; 61];
        assert_eq!(emit(&mut small, &path_v4(), 0, &ack, 0, |_| ()), Err(EmitError::BufferTooSmall { needed: 62 }));
        assert_eq!(emit(&mut small, &path_v4(), 0, &ack, usize::MAX, |_| ()), Err(EmitError::TooLong));
        assert_eq!(path_v4().frame_len(16, usize::MAX), usize::MAX);
        let mut buf = vec![0u8; 70_000];
        assert_eq!(emit(&mut buf, &path_v4(), 0, &ack, 1, |_| ()), Err(EmitError::PayloadNotAllowed));
        let send = RoceRepr { bth: bth(Opcode::RcSendOnly), ext: ExtHeaders::NONE };
        assert_eq!(emit(&mut buf, &path_v4(), 0, &send, 65_489, |_| ()), Err(EmitError::TooLong));
        // 20 + 8 + 12 + 65488 + 4 = 65532; one more byte needs 3 pad bytes and overflows.
        let (len, ()) = emit(&mut buf, &path_v4(), 0, &send, 65_488, |_| ()).expect("max");
        assert_eq!(len, 14 + 65_532);
        assert!(parse(&buf[..len]).is_ok());
    }

    #[test]
    fn ip_id_counts_and_wraps() {
        let mut id = IpId::new(0xFFFE);
        assert_eq!([id.next_id(), id.next_id(), id.next_id()], [0xFFFE, 0xFFFF, 0]);
    }

    #[test]
    fn drop_reasons_index_their_counters() {
        for (i, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i);
        }
        let mut counters = DropCounters::default();
        counters.record(DropReason::BadIcrc);
        counters.record(DropReason::BadIcrc);
        assert_eq!(counters.get(DropReason::BadIcrc), 2);
        assert_eq!(counters.iter().map(|(_, n)| n).sum::<u64>(), 2);
    }

    #[test]
    fn parse_reasons_in_order() {
        let payload = [0x7bu8; 64];
        let repr = FrameRepr {
            path: path_v4(),
            ip_id: 1,
            roce: RoceRepr { bth: bth(Opcode::RcSendOnly), ext: ExtHeaders::NONE },
            payload: &payload,
        };
        let mut good = [0u8; 122];
        repr.emit(&mut good).expect("fits");
        let with = |f: &dyn Fn(&mut [u8; 122])| {
            let mut b = good;
            f(&mut b);
            parse(&b).map(|_| ())
        };
        assert_eq!(parse(&good[..13]).map(|_| ()), Err(DropReason::Truncated));
        assert_eq!(with(&|b| b[12] = 0x81), Err(DropReason::EtherType));
        assert_eq!(with(&|b| b[14] = 0x65), Err(DropReason::BadIpVersion));
        assert_eq!(with(&|b| b[14] = 0x46), Err(DropReason::IpOptions));
        assert_eq!(with(&|b| b[14] = 0x44), Err(DropReason::BadLength));
        assert_eq!(parse(&good[..121]).map(|_| ()), Err(DropReason::Truncated));
        assert_eq!(with(&|b| b[22] = 63), Err(DropReason::BadIpChecksum));
        assert_eq!(with(&|b| b[37] = 0), Err(DropReason::NotRoce));
        assert_eq!(with(&|b| b[39] ^= 4), Err(DropReason::BadLength));
        assert_eq!(with(&|b| b[100] ^= 1), Err(DropReason::BadIcrc));
        assert_eq!(with(&|b| b[40] = 0xFF), Ok(()), "UDP checksum is ignored");
        // A NIC-verified IPv4 header is not summed again (the ICRC masks the
        // checksum field, so a wrong one is not caught there); the ICRC is.
        let verified = |f: &dyn Fn(&mut [u8; 122])| {
            let mut b = good;
            f(&mut b);
            parse_with(&b, true).map(|_| ())
        };
        assert_eq!(verified(&|b| b[24] ^= 0xFF), Ok(()), "trusted: the header checksum is skipped");
        assert_eq!(with(&|b| b[24] ^= 0xFF), Err(DropReason::BadIpChecksum), "untrusted: checked");
        assert_eq!(verified(&|b| b[100] ^= 1), Err(DropReason::BadIcrc), "the ICRC is always checked");
        assert_eq!(verified(&|b| b[14] = 0x46), Err(DropReason::IpOptions), "the rest of the header too");
        // Trailing Ethernet padding is not part of the frame.
        let mut padded = [0u8; 130];
        padded[..122].copy_from_slice(&good);
        assert_eq!(parse(&padded).map(|rx| rx.repr), Ok(repr));
    }
}
