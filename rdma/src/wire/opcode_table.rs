//! The opcode table as data (IBA vol. 1 9.2.1 opcodes, 9.3 header order; the CNP of the
//! RoCE v2 annex A17): for each RC, UC and UD opcode, which headers follow the BTH
//! and at what offsets, whether a payload may follow, where the packet sits in its
//! message, which QP types may send it, and whether it is a request or a response.
//!
//! Parsing, emitting and the transport all read this one table, so a layout question
//! has one answer.

use super::bth;
use super::opcode::Opcode;

/// An extension header that can follow the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// Datagram ETH (9.3): Q_Key and source QP of a UD packet.
    Deth,
    /// RDMA ETH (9.3): virtual address, R_Key and length of an RDMA operation.
    Reth,
    /// Atomic ETH (9.3): address, R_Key and operands of an atomic.
    AtomicEth,
    /// ACK ETH (9.3): syndrome and MSN.
    Aeth,
    /// Atomic ACK ETH (9.3): the original remote value of an atomic.
    AtomicAckEth,
    /// Immediate data (9.3).
    ImmDt,
    /// Invalidate ETH (9.3): the R_Key to invalidate.
    Ieth,
    /// FLUSH ETH (IBA 1.5 A19): placement type and selectivity level.
    Feth,
}

impl Header {
    /// Its bit in a set of headers ([`OpcodeInfo::header_set`]).
    pub const fn bit(self) -> u8 {
        1 << self as u8
    }

    /// The header's length in bytes.
    pub const fn header_len(self) -> usize {
        match self {
            Header::Deth => super::deth::HEADER_LEN,
            Header::Reth => super::reth::HEADER_LEN,
            Header::AtomicEth => super::atomic_eth::HEADER_LEN,
            Header::Aeth => super::aeth::HEADER_LEN,
            Header::AtomicAckEth => super::atomic_ack_eth::HEADER_LEN,
            Header::ImmDt => super::immdt::HEADER_LEN,
            Header::Ieth => super::ieth::HEADER_LEN,
            Header::Feth => super::feth::HEADER_LEN,
        }
    }
}

/// An extension header and its offset from the start of the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderAt {
    pub header: Header,
    pub offset: u8,
}

/// Who sends the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Requester to responder.
    Request,
    /// Responder to requester (ACKs, read responses, atomic ACKs).
    Response,
    /// A congestion notification, from a receiver to the sender of CE-marked traffic.
    Notification,
}

/// Where a packet sits in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    First,
    Middle,
    Last,
    Only,
}

impl Position {
    /// Whether the packet begins a message (FIRST or ONLY).
    pub const fn starts_message(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// Whether the packet ends a message (LAST or ONLY).
    pub const fn ends_message(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// The operation a packet belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Send,
    RdmaWrite,
    RdmaReadRequest,
    RdmaReadResponse,
    Acknowledge,
    AtomicAcknowledge,
    CompareSwap,
    FetchAdd,
    /// IBA 1.5: answered by a zero-length RDMA READ response.
    Flush,
    /// IBA 1.5: 8 bytes written indivisibly, answered like a FLUSH.
    AtomicWrite,
    Cnp,
}

/// A set of QP types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QpTypes(u8);

impl QpTypes {
    pub const RC: QpTypes = QpTypes(1 << 0);
    pub const UC: QpTypes = QpTypes(1 << 1);
    pub const UD: QpTypes = QpTypes(1 << 2);
    /// A CNP names a destination QP of any type.
    pub const ANY: QpTypes = QpTypes(Self::RC.0 | Self::UC.0 | Self::UD.0);

    /// Whether every type in `other` is in `self`.
    pub const fn contains(self, other: QpTypes) -> bool {
        self.0 & other.0 == other.0
    }
}

/// One row of the opcode table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    pub opcode: Opcode,
    /// Name as in packet dissectors, e.g. "RC RDMA Write First".
    pub name: &'static str,
    pub operation: Operation,
    pub direction: Direction,
    pub position: Position,
    pub qp_types: QpTypes,
    /// The extension headers after the BTH, in wire order, offsets from the BTH start.
    pub headers: &'static [HeaderAt],
    /// Offset of the payload from the BTH start: the BTH, the extension headers and,
    /// for a CNP only, its 16 reserved bytes.
    pub payload_offset: u8,
    /// Whether the packet may carry a payload (it may still be empty).
    pub payload: bool,
    /// `headers` as a set, computed with the table: every frame built or parsed
    /// compares against it.
    header_set: u8,
}

impl OpcodeInfo {
    /// Offset of `header` from the BTH start, if this opcode carries it.
    pub fn offset_of(&self, header: Header) -> Option<usize> {
        self.headers.iter().find(|at| at.header == header).map(|at| usize::from(at.offset))
    }

    /// Whether this opcode carries `header`.
    pub fn has(&self, header: Header) -> bool {
        self.offset_of(header).is_some()
    }

    /// The extension headers it carries, one [`Header::bit`] each.
    pub const fn header_set(&self) -> u8 {
        self.header_set
    }

    /// Bytes from the BTH start to the payload.
    pub const fn header_len(&self) -> usize {
        self.payload_offset as usize
    }
}

const fn at(header: Header, offset: u8) -> HeaderAt {
    HeaderAt { header, offset }
}

// The BTH is 12 bytes, so the first extension header always sits at offset 12.
const B: u8 = bth::HEADER_LEN as u8;

const NO_EXT: &[HeaderAt] = &[];
const IMMDT: &[HeaderAt] = &[at(Header::ImmDt, B)];
const IETH: &[HeaderAt] = &[at(Header::Ieth, B)];
const RETH: &[HeaderAt] = &[at(Header::Reth, B)];
const RETH_IMMDT: &[HeaderAt] = &[at(Header::Reth, B), at(Header::ImmDt, B + 16)];
const AETH: &[HeaderAt] = &[at(Header::Aeth, B)];
const AETH_ATOMIC_ACK: &[HeaderAt] = &[at(Header::Aeth, B), at(Header::AtomicAckEth, B + 4)];
const ATOMIC_ETH: &[HeaderAt] = &[at(Header::AtomicEth, B)];
const FETH_RETH: &[HeaderAt] = &[at(Header::Feth, B), at(Header::Reth, B + 4)];
const DETH: &[HeaderAt] = &[at(Header::Deth, B)];
const DETH_IMMDT: &[HeaderAt] = &[at(Header::Deth, B), at(Header::ImmDt, B + 8)];

#[allow(clippy::too_many_arguments)]
const fn row(
    opcode: Opcode,
    name: &'static str,
    operation: Operation,
    direction: Direction,
    position: Position,
    qp_types: QpTypes,
    headers: &'static [HeaderAt],
    payload_offset: u8,
    payload: bool,
) -> OpcodeInfo {
    let mut header_set = 0;
    let mut i = 0;
    while i < headers.len() {
        header_set |= headers[i].header.bit();
        i += 1;
    }
    OpcodeInfo { opcode, name, operation, direction, position, qp_types, headers, payload_offset, payload, header_set }
}

use Direction::{Notification as NOTE, Request as REQ, Response as RESP};
use Operation as Op;
use Position::{First, Last, Middle, Only};

const RC: QpTypes = QpTypes::RC;
const UC: QpTypes = QpTypes::UC;
const UD: QpTypes = QpTypes::UD;
const PAYLOAD: bool = true;
const NO_PAYLOAD: bool = false;

// One row per line reads as a table; rustfmt would split each row over ten lines.
#[rustfmt::skip]
const ROWS: [OpcodeInfo; 40] = [
    // RC (opcodes 000x_xxxx)
    row(Opcode::RcSendFirst, "RC Send First", Op::Send, REQ, First, RC, NO_EXT, 12, PAYLOAD),
    row(Opcode::RcSendMiddle, "RC Send Middle", Op::Send, REQ, Middle, RC, NO_EXT, 12, PAYLOAD),
    row(Opcode::RcSendLast, "RC Send Last", Op::Send, REQ, Last, RC, NO_EXT, 12, PAYLOAD),
    row(Opcode::RcSendLastWithImmediate, "RC Send Last with Immediate", Op::Send, REQ, Last, RC, IMMDT, 16, PAYLOAD),
    row(Opcode::RcSendOnly, "RC Send Only", Op::Send, REQ, Only, RC, NO_EXT, 12, PAYLOAD),
    row(Opcode::RcSendOnlyWithImmediate, "RC Send Only with Immediate", Op::Send, REQ, Only, RC, IMMDT, 16, PAYLOAD),
    row(Opcode::RcRdmaWriteFirst, "RC RDMA Write First", Op::RdmaWrite, REQ, First, RC, RETH, 28, PAYLOAD),
    row(Opcode::RcRdmaWriteMiddle, "RC RDMA Write Middle", Op::RdmaWrite, REQ, Middle, RC, NO_EXT, 12, PAYLOAD),
    row(Opcode::RcRdmaWriteLast, "RC RDMA Write Last", Op::RdmaWrite, REQ, Last, RC, NO_EXT, 12, PAYLOAD),
    row(Opcode::RcRdmaWriteLastWithImmediate, "RC RDMA Write Last with Immediate", Op::RdmaWrite, REQ, Last, RC, IMMDT, 16, PAYLOAD),
    row(Opcode::RcRdmaWriteOnly, "RC RDMA Write Only", Op::RdmaWrite, REQ, Only, RC, RETH, 28, PAYLOAD),
    row(Opcode::RcRdmaWriteOnlyWithImmediate, "RC RDMA Write Only with Immediate", Op::RdmaWrite, REQ, Only, RC, RETH_IMMDT, 32, PAYLOAD),
    row(Opcode::RcRdmaReadRequest, "RC RDMA Read Request", Op::RdmaReadRequest, REQ, Only, RC, RETH, 28, NO_PAYLOAD),
    row(Opcode::RcRdmaReadResponseFirst, "RC RDMA Read Response First", Op::RdmaReadResponse, RESP, First, RC, AETH, 16, PAYLOAD),
    // MIDDLE carries no AETH: only the packets that can end or start a response do.
    row(Opcode::RcRdmaReadResponseMiddle, "RC RDMA Read Response Middle", Op::RdmaReadResponse, RESP, Middle, RC, NO_EXT, 12, PAYLOAD),
    row(Opcode::RcRdmaReadResponseLast, "RC RDMA Read Response Last", Op::RdmaReadResponse, RESP, Last, RC, AETH, 16, PAYLOAD),
    row(Opcode::RcRdmaReadResponseOnly, "RC RDMA Read Response Only", Op::RdmaReadResponse, RESP, Only, RC, AETH, 16, PAYLOAD),
    row(Opcode::RcAcknowledge, "RC Acknowledge", Op::Acknowledge, RESP, Only, RC, AETH, 16, NO_PAYLOAD),
    row(Opcode::RcAtomicAcknowledge, "RC Atomic Acknowledge", Op::AtomicAcknowledge, RESP, Only, RC, AETH_ATOMIC_ACK, 24, NO_PAYLOAD),
    row(Opcode::RcCompareSwap, "RC Compare Swap", Op::CompareSwap, REQ, Only, RC, ATOMIC_ETH, 40, NO_PAYLOAD),
    row(Opcode::RcFetchAdd, "RC Fetch Add", Op::FetchAdd, REQ, Only, RC, ATOMIC_ETH, 40, NO_PAYLOAD),
    row(Opcode::RcSendLastWithInvalidate, "RC Send Last with Invalidate", Op::Send, REQ, Last, RC, IETH, 16, PAYLOAD),
    row(Opcode::RcSendOnlyWithInvalidate, "RC Send Only with Invalidate", Op::Send, REQ, Only, RC, IETH, 16, PAYLOAD),
    // IBA 1.5 (A19): FLUSH carries its FETH before the RETH; ATOMIC WRITE's 8 bytes are its payload.
    row(Opcode::RcFlush, "RC Flush", Op::Flush, REQ, Only, RC, FETH_RETH, 32, NO_PAYLOAD),
    row(Opcode::RcAtomicWrite, "RC Atomic Write", Op::AtomicWrite, REQ, Only, RC, RETH, 28, PAYLOAD),
    // UC (001x_xxxx): the RC SEND and RDMA WRITE layouts, nothing that needs a response.
    row(Opcode::UcSendFirst, "UC Send First", Op::Send, REQ, First, UC, NO_EXT, 12, PAYLOAD),
    row(Opcode::UcSendMiddle, "UC Send Middle", Op::Send, REQ, Middle, UC, NO_EXT, 12, PAYLOAD),
    row(Opcode::UcSendLast, "UC Send Last", Op::Send, REQ, Last, UC, NO_EXT, 12, PAYLOAD),
    row(Opcode::UcSendLastWithImmediate, "UC Send Last with Immediate", Op::Send, REQ, Last, UC, IMMDT, 16, PAYLOAD),
    row(Opcode::UcSendOnly, "UC Send Only", Op::Send, REQ, Only, UC, NO_EXT, 12, PAYLOAD),
    row(Opcode::UcSendOnlyWithImmediate, "UC Send Only with Immediate", Op::Send, REQ, Only, UC, IMMDT, 16, PAYLOAD),
    row(Opcode::UcRdmaWriteFirst, "UC RDMA Write First", Op::RdmaWrite, REQ, First, UC, RETH, 28, PAYLOAD),
    row(Opcode::UcRdmaWriteMiddle, "UC RDMA Write Middle", Op::RdmaWrite, REQ, Middle, UC, NO_EXT, 12, PAYLOAD),
    row(Opcode::UcRdmaWriteLast, "UC RDMA Write Last", Op::RdmaWrite, REQ, Last, UC, NO_EXT, 12, PAYLOAD),
    row(Opcode::UcRdmaWriteLastWithImmediate, "UC RDMA Write Last with Immediate", Op::RdmaWrite, REQ, Last, UC, IMMDT, 16, PAYLOAD),
    row(Opcode::UcRdmaWriteOnly, "UC RDMA Write Only", Op::RdmaWrite, REQ, Only, UC, RETH, 28, PAYLOAD),
    row(Opcode::UcRdmaWriteOnlyWithImmediate, "UC RDMA Write Only with Immediate", Op::RdmaWrite, REQ, Only, UC, RETH_IMMDT, 32, PAYLOAD),
    // UD (011x_xxxx): one packet per message, the DETH names the sender.
    row(Opcode::UdSendOnly, "UD Send Only", Op::Send, REQ, Only, UD, DETH, 20, PAYLOAD),
    row(Opcode::UdSendOnlyWithImmediate, "UD Send Only with Immediate", Op::Send, REQ, Only, UD, DETH_IMMDT, 24, PAYLOAD),
    // CNP (annex A17): BTH then 16 reserved bytes; no extension header, no payload.
    row(Opcode::Cnp, "CNP", Op::Cnp, NOTE, Only, QpTypes::ANY, NO_EXT, 28, NO_PAYLOAD),
];

/// The whole table, in opcode order.
pub static TABLE: [OpcodeInfo; 40] = ROWS;

/// Bytes of reserved zeros a CNP carries after its BTH.
pub const CNP_RESERVED_LEN: usize = 16;

const NO_ROW: u8 = u8::MAX;

/// Row index per opcode byte, built at compile time so a lookup is one load.
static INDEX: [u8; 256] = {
    let mut index = [NO_ROW; 256];
    let mut i = 0;
    while i < ROWS.len() {
        index[ROWS[i].opcode.to_raw() as usize] = i as u8;
        i += 1;
    }
    index
};

/// The table row for `opcode`, or `None` for opcodes we do not handle (RD, XRC,
/// reserved and unknown values).
pub fn lookup(opcode: Opcode) -> Option<&'static OpcodeInfo> {
    let row = INDEX[usize::from(opcode.to_raw())];
    TABLE.get(usize::from(row))
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::wire::opcode::Transport;

    #[test]
    fn rows_are_sorted_and_unique() {
        for pair in TABLE.windows(2) {
            assert!(pair[0].opcode.to_raw() < pair[1].opcode.to_raw());
        }
    }

    #[test]
    fn lookup_finds_every_row_and_nothing_else() {
        let mut found = 0;
        for raw in 0..=u8::MAX {
            let op = Opcode::from_raw(raw);
            match lookup(op) {
                Some(info) => {
                    assert_eq!(info.opcode, op);
                    found += 1;
                }
                None => assert!(matches!(op, Opcode::Unknown(_)), "{op:?} has no row"),
            }
        }
        assert_eq!(found, TABLE.len());
    }

    /// The offsets are written out as data; check them against the header sizes so a
    /// typo cannot hide.
    #[test]
    fn offsets_are_contiguous() {
        for info in &TABLE {
            let mut end = bth::HEADER_LEN;
            for at in info.headers {
                assert_eq!(usize::from(at.offset), end, "{}", info.name);
                end += at.header.header_len();
            }
            if info.opcode == Opcode::Cnp {
                end += CNP_RESERVED_LEN;
            }
            assert_eq!(info.header_len(), end, "{}", info.name);
        }
    }

    #[test]
    fn qp_types_follow_the_transport_bits() {
        for info in &TABLE {
            let expected = match info.opcode.transport() {
                Transport::Rc => QpTypes::RC,
                Transport::Uc => QpTypes::UC,
                Transport::Ud => QpTypes::UD,
                Transport::Cnp => QpTypes::ANY,
                other => panic!("unexpected transport {other:?}"),
            };
            assert_eq!(info.qp_types, expected, "{}", info.name);
            assert!(info.name.starts_with(match info.opcode.transport() {
                Transport::Rc => "RC ",
                Transport::Uc => "UC ",
                Transport::Ud => "UD ",
                _ => "CNP",
            }));
        }
    }

    #[test]
    fn header_facts() {
        let imm = |op: Opcode| lookup(op).map(|i| i.has(Header::ImmDt));
        assert_eq!(imm(Opcode::RcRdmaWriteOnlyWithImmediate), Some(true));
        assert_eq!(imm(Opcode::RcRdmaWriteOnly), Some(false));
        let w = lookup(Opcode::RcRdmaWriteOnlyWithImmediate).map(|i| i.offset_of(Header::ImmDt));
        assert_eq!(w, Some(Some(28)));
        let ud = lookup(Opcode::UdSendOnlyWithImmediate).map(|i| i.offset_of(Header::ImmDt));
        assert_eq!(ud, Some(Some(20)));
        // IBA 1.5 A19: FLUSH is BTH, FETH, RETH; ATOMIC WRITE is BTH, RETH, 8 bytes.
        let flush = lookup(Opcode::RcFlush).map(|i| (i.offset_of(Header::Feth), i.offset_of(Header::Reth)));
        assert_eq!(flush, Some((Some(12), Some(16))));
        assert_eq!(lookup(Opcode::RcAtomicWrite).map(|i| (i.header_len(), i.payload)), Some((28, true)));
        for info in &TABLE {
            // Requests that ask for data or operate atomically never carry a payload.
            if matches!(
                info.operation,
                Operation::RdmaReadRequest
                    | Operation::CompareSwap
                    | Operation::FetchAdd
                    | Operation::Acknowledge
                    | Operation::AtomicAcknowledge
                    | Operation::Flush
                    | Operation::Cnp
            ) {
                assert!(!info.payload, "{}", info.name);
            } else {
                assert!(info.payload, "{}", info.name);
            }
            let responds = info.direction == Direction::Response;
            assert_eq!(responds, info.has(Header::Aeth) || info.opcode == Opcode::RcRdmaReadResponseMiddle);
        }
    }
}
