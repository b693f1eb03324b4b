//! The RoCE transport headers as one unit (IBA vol. 1 9.2-9.3): a BTH and the extension
//! headers its opcode calls for, laid out by the opcode table. Frames (`frame`) wrap this
//! in Ethernet/IP/UDP; the transport reads and writes packets through it.

use super::frame::{DropReason, EmitError};
use super::opcode::Opcode;
use super::opcode_table::{self, CNP_RESERVED_LEN, Header, OpcodeInfo};
use super::{
    AethPacket, AethRepr, AtomicAckEthPacket, AtomicAckEthRepr, AtomicEthPacket, AtomicEthRepr, BthPacket, BthRepr,
    DethPacket, DethRepr, FethPacket, FethRepr, IethPacket, IethRepr, ImmDtPacket, ImmDtRepr, RethPacket, RethRepr,
    bth,
};

/// The extension headers of a packet. Exactly the ones its opcode lists must be present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExtHeaders {
    pub deth: Option<DethRepr>,
    pub reth: Option<RethRepr>,
    pub atomic_eth: Option<AtomicEthRepr>,
    pub aeth: Option<AethRepr>,
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    pub immdt: Option<ImmDtRepr>,
    pub ieth: Option<IethRepr>,
    pub feth: Option<FethRepr>,
}

impl ExtHeaders {
    /// No extension header.
    pub const NONE: ExtHeaders = ExtHeaders {
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
        feth: None,
    };

    /// Whether `header` is present.
    pub const fn has(&self, header: Header) -> bool {
        match header {
            Header::Deth => self.deth.is_some(),
            Header::Reth => self.reth.is_some(),
            Header::AtomicEth => self.atomic_eth.is_some(),
            Header::Aeth => self.aeth.is_some(),
            Header::AtomicAckEth => self.atomic_ack_eth.is_some(),
            Header::ImmDt => self.immdt.is_some(),
            Header::Ieth => self.ieth.is_some(),
            Header::Feth => self.feth.is_some(),
        }
    }

    /// Total length of the headers present.
    pub fn len(&self) -> usize {
        ALL_HEADERS.iter().filter(|h| self.has(**h)).map(|h| h.header_len()).sum()
    }

    /// Whether no extension header is present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The headers present, one [`Header::bit`] each.
    // Spelled out: over `ALL_HEADERS`, the compiler kept the loop and `has`'s
    // match, on every frame built; with each header named, `has` folds away.
    pub fn set(&self) -> u8 {
        let bit = |header: Header| if self.has(header) { header.bit() } else { 0 };
        bit(Header::Deth)
            | bit(Header::Reth)
            | bit(Header::AtomicEth)
            | bit(Header::Aeth)
            | bit(Header::AtomicAckEth)
            | bit(Header::ImmDt)
            | bit(Header::Ieth)
            | bit(Header::Feth)
    }

    /// Whether exactly the headers `info` lists are present (a set compare:
    /// this runs for every frame built and parsed).
    pub fn matches(&self, info: &OpcodeInfo) -> bool {
        self.set() == info.header_set()
    }
}

const ALL_HEADERS: [Header; 8] = [
    Header::Deth,
    Header::Reth,
    Header::AtomicEth,
    Header::Aeth,
    Header::AtomicAckEth,
    Header::ImmDt,
    Header::Ieth,
    Header::Feth,
];

/// A BTH and its extension headers as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceRepr {
    pub bth: BthRepr,
    pub ext: ExtHeaders,
}

/// The number of pad bytes after a payload of `payload_len` bytes (0..=3), so that the
/// packet ends on a 4-byte boundary.
pub const fn pad_len(payload_len: usize) -> usize {
    (4 - payload_len % 4) % 4
}

impl RoceRepr {
    /// Bytes from the BTH start to the payload, counted from the headers present (plus
    /// the reserved bytes of a CNP). Equals the opcode table's `payload_offset` for
    /// every repr that passes [`RoceRepr::check`].
    pub fn header_len(&self) -> usize {
        let reserved = if self.bth.opcode == Opcode::Cnp { CNP_RESERVED_LEN } else { 0 };
        bth::HEADER_LEN + self.ext.len() + reserved
    }

    /// Checks this repr against the opcode table for a packet carrying `payload_len`
    /// bytes, and returns the table row.
    pub fn check(&self, payload_len: usize) -> Result<&'static OpcodeInfo, EmitError> {
        let info = opcode_table::lookup(self.bth.opcode).ok_or(EmitError::UnknownOpcode)?;
        if !self.ext.matches(info) {
            return Err(EmitError::HeaderMismatch);
        }
        if payload_len > 0 && !info.payload {
            return Err(EmitError::PayloadNotAllowed);
        }
        Ok(info)
    }

    /// Parses the headers of `packet`, which runs from the BTH to the end of the pad
    /// (the ICRC already removed and checked). Returns the repr, its table row and the
    /// payload without pad.
    // Inlined into its one caller, `frame::parse_with`: returned by value, this 144-byte
    // repr was copied once more on its way into the frame's.
    #[inline(always)]
    pub fn parse(packet: &[u8]) -> Result<(RoceRepr, &'static OpcodeInfo, &[u8]), DropReason> {
        let bth = BthPacket::new_checked(packet).map_err(|_| DropReason::Truncated)?;
        let bth = BthRepr::parse(&bth).map_err(|_| DropReason::Truncated)?;
        if bth.tver != 0 {
            return Err(DropReason::BadTransportVersion);
        }
        let info = opcode_table::lookup(bth.opcode).ok_or(DropReason::UnknownOpcode)?;
        let rest = packet.get(info.header_len()..).ok_or(DropReason::HeaderMismatch)?;

        let mut ext = ExtHeaders::NONE;
        for at in info.headers {
            let bytes = packet.get(usize::from(at.offset)..).ok_or(DropReason::HeaderMismatch)?;
            parse_header(at.header, bytes, &mut ext).ok_or(DropReason::HeaderMismatch)?;
        }

        // Headers are whole words, so payload and pad must be too; then the pad count is
        // the only one that fits the payload, and re-emitting reproduces it.
        if !rest.len().is_multiple_of(4) {
            return Err(DropReason::BadPadding);
        }
        let payload_len = rest.len().checked_sub(usize::from(bth.pad_count)).ok_or(DropReason::BadPadding)?;
        if !info.payload && !rest.is_empty() {
            return Err(DropReason::HeaderMismatch);
        }
        let payload = rest.get(..payload_len).ok_or(DropReason::BadPadding)?;
        Ok((RoceRepr { bth, ext }, info, payload))
    }

    /// Writes the BTH, the extension headers at the offsets `info` gives, and a CNP's
    /// reserved zeros into `buffer`, which must hold `info.header_len()` bytes. `info`
    /// comes from [`RoceRepr::check`]; headers it does not list are not written.
    pub fn emit(&self, info: &OpcodeInfo, buffer: &mut [u8]) -> Result<(), EmitError> {
        let buffer =
            buffer.get_mut(..info.header_len()).ok_or(EmitError::BufferTooSmall { needed: info.header_len() })?;
        self.bth.emit(&mut BthPacket::new_unchecked(&mut *buffer));
        let mut end = bth::HEADER_LEN;
        for at in info.headers {
            let start = usize::from(at.offset);
            end = start + at.header.header_len();
            let bytes = buffer.get_mut(start..end).ok_or(EmitError::HeaderMismatch)?;
            self.emit_header(at.header, bytes).ok_or(EmitError::HeaderMismatch)?;
        }
        // Only a CNP has bytes left: its reserved block. (Tested first: `fill` calls
        // memset, even for nothing.)
        if let Some(reserved) = buffer.get_mut(end..).filter(|r| !r.is_empty()) {
            reserved.fill(0);
        }
        Ok(())
    }

    // Not inlined: inlined into `emit`'s loop, the compiler hoisted the byte-order
    // work of every header type out of it and did it for each frame, present or not
    // (some hundred instructions, against a call per header present).
    #[inline(never)]
    fn emit_header(&self, header: Header, bytes: &mut [u8]) -> Option<()> {
        let ext = &self.ext;
        match header {
            Header::Deth => ext.deth?.emit(&mut DethPacket::new_unchecked(bytes)),
            Header::Reth => ext.reth?.emit(&mut RethPacket::new_unchecked(bytes)),
            Header::AtomicEth => ext.atomic_eth?.emit(&mut AtomicEthPacket::new_unchecked(bytes)),
            Header::Aeth => ext.aeth?.emit(&mut AethPacket::new_unchecked(bytes)),
            Header::AtomicAckEth => ext.atomic_ack_eth?.emit(&mut AtomicAckEthPacket::new_unchecked(bytes)),
            Header::ImmDt => ext.immdt?.emit(&mut ImmDtPacket::new_unchecked(bytes)),
            Header::Ieth => ext.ieth?.emit(&mut IethPacket::new_unchecked(bytes)),
            Header::Feth => ext.feth?.emit(&mut FethPacket::new_unchecked(bytes)),
        }
        Some(())
    }
}

/// Parses one extension header from the start of `bytes` into its slot in `ext`.
fn parse_header(header: Header, bytes: &[u8], ext: &mut ExtHeaders) -> Option<()> {
    match header {
        Header::Deth => ext.deth = DethRepr::parse(&DethPacket::new_unchecked(bytes)).ok(),
        Header::Reth => ext.reth = RethRepr::parse(&RethPacket::new_unchecked(bytes)).ok(),
        Header::AtomicEth => ext.atomic_eth = AtomicEthRepr::parse(&AtomicEthPacket::new_unchecked(bytes)).ok(),
        Header::Aeth => ext.aeth = AethRepr::parse(&AethPacket::new_unchecked(bytes)).ok(),
        Header::AtomicAckEth => {
            ext.atomic_ack_eth = AtomicAckEthRepr::parse(&AtomicAckEthPacket::new_unchecked(bytes)).ok()
        }
        Header::ImmDt => ext.immdt = ImmDtRepr::parse(&ImmDtPacket::new_unchecked(bytes)).ok(),
        Header::Ieth => ext.ieth = IethRepr::parse(&IethPacket::new_unchecked(bytes)).ok(),
        Header::Feth => ext.feth = FethRepr::parse(&FethPacket::new_unchecked(bytes)).ok(),
    }
    ext.has(header).then_some(())
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::wire::{Psn, Syndrome};

    fn bth(opcode: Opcode, pad_count: u8) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count,
            tver: 0,
            pkey: 0xFFFF,
            fecn: false,
            becn: false,
            dest_qpn: 0x11,
            ack_req: false,
            psn: Psn::new(0xABCDEF),
        }
    }

    fn atomic_ack() -> RoceRepr {
        RoceRepr {
            bth: bth(Opcode::RcAtomicAcknowledge, 0),
            ext: ExtHeaders {
                aeth: Some(AethRepr { syndrome: Syndrome::ACK, msn: 7 }),
                atomic_ack_eth: Some(AtomicAckEthRepr { orig: 42 }),
                ..ExtHeaders::NONE
            },
        }
    }

    #[test]
    fn emit_then_parse() {
        let repr = atomic_ack();
        let info = repr.check(0).expect("valid");
        assert_eq!(repr.header_len(), info.header_len());
        let mut buf = [0xEEu8; 24];
        repr.emit(info, &mut buf).expect("fits");
        let (parsed, parsed_info, payload) = RoceRepr::parse(&buf).expect("parses");
        assert_eq!(parsed, repr);
        assert_eq!(parsed_info, info);
        assert!(payload.is_empty());
    }

    #[test]
    fn check_catches_mismatches() {
        let mut repr = atomic_ack();
        repr.ext.atomic_ack_eth = None;
        assert_eq!(repr.check(0), Err(EmitError::HeaderMismatch));
        assert_eq!(atomic_ack().check(1), Err(EmitError::PayloadNotAllowed));
        let mut unknown = atomic_ack();
        unknown.bth.opcode = Opcode::from_raw(0x40);
        assert_eq!(unknown.check(0), Err(EmitError::UnknownOpcode));
    }

    #[test]
    fn the_header_sets_agree_with_the_table_for_every_opcode() {
        for info in &opcode_table::TABLE {
            // Every header the row lists, and no other.
            let listed: u8 = ALL_HEADERS.iter().filter(|h| info.has(**h)).fold(0, |s, h| s | h.bit());
            assert_eq!(info.header_set(), listed, "{}", info.name);
            assert_eq!(listed.count_ones() as usize, info.headers.len(), "{}", info.name);
        }
        let all = ExtHeaders {
            deth: Some(DethRepr { qkey: 0, src_qpn: 0 }),
            reth: Some(RethRepr { va: 0, rkey: 0, dma_len: 0 }),
            atomic_eth: Some(AtomicEthRepr { va: 0, rkey: 0, swap_add: 0, compare: 0 }),
            aeth: Some(AethRepr { syndrome: crate::wire::Syndrome::ACK, msn: 0 }),
            atomic_ack_eth: Some(AtomicAckEthRepr { orig: 0 }),
            immdt: Some(ImmDtRepr { imm: 0 }),
            ieth: Some(IethRepr { rkey: 0 }),
            feth: Some(FethRepr { placement_type: 0, selectivity_level: 0 }),
        };
        assert_eq!(all.set(), 0xff, "each header its own bit");
        assert_eq!(ExtHeaders::NONE.set(), 0);
    }

    #[test]
    fn cnp_has_reserved_bytes() {
        let repr = RoceRepr { bth: bth(Opcode::Cnp, 0), ext: ExtHeaders::NONE };
        let info = repr.check(0).expect("valid");
        assert_eq!(repr.header_len(), 28);
        let mut buf = [0xEEu8; 28];
        repr.emit(info, &mut buf).expect("fits");
        assert!(buf[12..].iter().all(|b| *b == 0));
        let (parsed, _, payload) = RoceRepr::parse(&buf).expect("parses");
        assert_eq!(parsed, repr);
        assert!(payload.is_empty());
    }

    #[test]
    fn parse_reasons() {
        let mut send = [0u8; 20];
        bth(Opcode::RcSendOnly, 3).emit(&mut BthPacket::new_unchecked(&mut send[..]));
        let (_, _, payload) = RoceRepr::parse(&send).expect("5-byte payload, 3 pad");
        assert_eq!(payload.len(), 5);
        assert_eq!(RoceRepr::parse(&send[..19]), Err(DropReason::BadPadding));
        assert_eq!(RoceRepr::parse(&send[..11]), Err(DropReason::Truncated));

        let mut short_ack = [0u8; 12];
        bth(Opcode::RcAcknowledge, 0).emit(&mut BthPacket::new_unchecked(&mut short_ack[..]));
        assert_eq!(RoceRepr::parse(&short_ack), Err(DropReason::HeaderMismatch));

        let mut ack_with_data = [0u8; 20];
        bth(Opcode::RcAcknowledge, 0).emit(&mut BthPacket::new_unchecked(&mut ack_with_data[..]));
        assert_eq!(RoceRepr::parse(&ack_with_data), Err(DropReason::HeaderMismatch));

        let mut tver = send;
        tver[1] |= 1;
        assert_eq!(RoceRepr::parse(&tver), Err(DropReason::BadTransportVersion));
        let mut unknown = send;
        unknown[0] = 0x15;
        assert_eq!(RoceRepr::parse(&unknown), Err(DropReason::UnknownOpcode));
    }

    #[test]
    fn pad_lengths() {
        assert_eq!([0, 1, 2, 3, 4, 5, 1024, 1023].map(pad_len), [0, 3, 2, 1, 0, 3, 0, 1]);
    }
}
