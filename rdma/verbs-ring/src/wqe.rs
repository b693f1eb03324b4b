//! Work requests as ring entries: the host encodes send and receive WQEs into
//! SQ/RQ slots; the transport decodes and checks the copy it took of a slot.
//!
//! Decoding never trusts the entry: the SGE count and inline length are
//! checked against the queue's own capacities (which the firmware placed,
//! not what the entry claims) and against the entry size, the opcode against
//! the QP type. A failure names the `ibv_wc_status` the transport should
//! complete the WQE with, as rxe does for a malformed WQE
//! (`IBV_WC_LOC_QP_OP_ERR`, `IBV_WC_LOC_LEN_ERR`). Whether an SGE lies in
//! its MR (`lkey`) is the transport's check, with
//! [`range_within`](crate::abi::range_within).

use crate::abi::{MAX_SGE, RecvWqe, SendWqe, Sge, send_flags, wc_status, wr_opcode};
use crate::cmd::{QpCap, qp_type};
use crate::wire::Wire;

/// The SGEs of one WQE, copied out of the entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SgeList {
    len: usize,
    sges: [Sge; MAX_SGE as usize],
}

impl SgeList {
    pub fn as_slice(&self) -> &[Sge] {
        self.sges.get(..self.len).unwrap_or(&[])
    }

    /// Total bytes described, `None` on overflow (a hostile length).
    pub fn total_len(&self) -> Option<u64> {
        self.as_slice().iter().try_fold(0u64, |acc, s| acc.checked_add(u64::from(s.length)))
    }
}

/// A send WQE's payload.
// Large only by the SGE array, returned on the stack once per WQE: boxing
// would put an allocation on the data path.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SendPayload<'a> {
    Sges(SgeList),
    /// Inline data: a slice of the entry copy.
    Inline(&'a [u8]),
}

/// Why a WQE was refused: the completion status to report.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WqeError(pub u32);

impl WqeError {
    const OP: WqeError = WqeError(wc_status::LOC_QP_OP_ERR);
    const LEN: WqeError = WqeError(wc_status::LOC_LEN_ERR);
}

fn sges(body: &[u8], n: u32, max: u32) -> Result<SgeList, WqeError> {
    if n > max || n > MAX_SGE {
        return Err(WqeError::LEN);
    }
    let mut list = SgeList { len: n as usize, sges: [Sge::default(); MAX_SGE as usize] };
    for (i, s) in list.sges.iter_mut().take(n as usize).enumerate() {
        *s = body.get(i * Sge::SIZE..).and_then(Sge::decode).ok_or(WqeError::LEN)?;
    }
    Ok(list)
}

/// Decode and check a send WQE from the copy of an SQ entry, for a QP of
/// type `qpt` with the capacities it was created with.
pub fn decode_send<'a>(entry: &'a [u8], cap: &QpCap, qpt: u8) -> Result<(SendWqe, SendPayload<'a>), WqeError> {
    let wqe = SendWqe::decode(entry).ok_or(WqeError::LEN)?;
    let body = entry.get(SendWqe::SIZE..).unwrap_or(&[]);
    use wr_opcode::*;
    let allowed = match qpt {
        qp_type::RC => matches!(
            wqe.opcode,
            RDMA_WRITE
                | RDMA_WRITE_WITH_IMM
                | SEND
                | SEND_WITH_IMM
                | RDMA_READ
                | ATOMIC_CMP_AND_SWP
                | ATOMIC_FETCH_AND_ADD
                | SEND_WITH_INV
                | LOCAL_INV
                | BIND_MW
                | REG_MR
                | FLUSH
                | ATOMIC_WRITE
        ),
        // Memory operations run on RC and UC QPs (rxe's `rxe_wr_opcode_info`).
        qp_type::UC => {
            matches!(wqe.opcode, RDMA_WRITE | RDMA_WRITE_WITH_IMM | SEND | SEND_WITH_IMM | LOCAL_INV | BIND_MW | REG_MR)
        }
        qp_type::UD => matches!(wqe.opcode, SEND | SEND_WITH_IMM),
        _ => false,
    };
    if !allowed {
        return Err(WqeError::OP);
    }
    let payload = if wqe.send_flags & send_flags::INLINE != 0 {
        // Inline carries data, never for reads, atomics or memory operations.
        if matches!(
            wqe.opcode,
            RDMA_READ | ATOMIC_CMP_AND_SWP | ATOMIC_FETCH_AND_ADD | LOCAL_INV | BIND_MW | REG_MR | FLUSH | ATOMIC_WRITE
        ) {
            return Err(WqeError::OP);
        }
        if wqe.inline_len > cap.max_inline_data {
            return Err(WqeError::LEN);
        }
        SendPayload::Inline(body.get(..wqe.inline_len as usize).ok_or(WqeError::LEN)?)
    } else {
        let list = sges(body, wqe.num_sge, cap.max_send_sge)?;
        // An atomic moves exactly 8 bytes through one SGE.
        if matches!(wqe.opcode, ATOMIC_CMP_AND_SWP | ATOMIC_FETCH_AND_ADD)
            && (list.len != 1 || list.sges[0].length != 8)
        {
            return Err(WqeError::LEN);
        }
        SendPayload::Sges(list)
    };
    Ok((wqe, payload))
}

/// Decode and check a receive WQE from the copy of an RQ/SRQ entry.
pub fn decode_recv(entry: &[u8], max_sge: u32) -> Result<(RecvWqe, SgeList), WqeError> {
    let wqe = RecvWqe::decode(entry).ok_or(WqeError::LEN)?;
    let list = sges(entry.get(RecvWqe::SIZE..).unwrap_or(&[]), wqe.num_sge, max_sge)?;
    Ok((wqe, list))
}

/// Host side: encode a send WQE with SGEs into `entry`; the bytes used, or
/// `None` when it does not fit.
pub fn encode_send(entry: &mut [u8], wqe: &SendWqe, sges: &[Sge]) -> Option<usize> {
    let wqe = SendWqe { num_sge: u32::try_from(sges.len()).ok()?, inline_len: 0, ..*wqe };
    wqe.encode(entry)?;
    for (i, s) in sges.iter().enumerate() {
        s.encode(entry.get_mut(SendWqe::SIZE + i * Sge::SIZE..)?)?;
    }
    Some(SendWqe::SIZE + sges.len() * Sge::SIZE)
}

/// Host side: encode a send WQE with inline data into `entry`.
pub fn encode_send_inline(entry: &mut [u8], wqe: &SendWqe, data: &[u8]) -> Option<usize> {
    let wqe = SendWqe {
        num_sge: 0,
        inline_len: u32::try_from(data.len()).ok()?,
        send_flags: wqe.send_flags | send_flags::INLINE,
        ..*wqe
    };
    wqe.encode(entry)?;
    entry.get_mut(SendWqe::SIZE..SendWqe::SIZE + data.len())?.copy_from_slice(data);
    Some(SendWqe::SIZE + data.len())
}

/// Host side: encode a receive WQE into `entry`.
pub fn encode_recv(entry: &mut [u8], wr_id: u64, sges: &[Sge]) -> Option<usize> {
    RecvWqe { wr_id, num_sge: u32::try_from(sges.len()).ok()?, reserved: 0 }.encode(entry)?;
    for (i, s) in sges.iter().enumerate() {
        s.encode(entry.get_mut(RecvWqe::SIZE + i * Sge::SIZE..)?)?;
    }
    Some(RecvWqe::SIZE + sges.len() * Sge::SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CAP: QpCap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 64 };

    #[test]
    fn send_round_trip_and_checks() {
        let mut e = [0u8; 192];
        let sge = Sge { addr: 0x10_0000, length: 100, lkey: 7 };
        let w = SendWqe { wr_id: 5, opcode: wr_opcode::SEND, send_flags: send_flags::SIGNALED, ..Default::default() };
        let n = encode_send(&mut e, &w, &[sge, sge]).unwrap();
        assert_eq!(n, 112);
        let (got, p) = decode_send(&e, &CAP, qp_type::RC).unwrap();
        assert_eq!(got.wr_id, 5);
        let SendPayload::Sges(list) = p else { panic!() };
        assert_eq!((list.as_slice(), list.total_len()), (&[sge, sge][..], Some(200)));
        // More SGEs than the QP has.
        encode_send(&mut e, &w, &[sge; 3]).unwrap();
        assert_eq!(decode_send(&e, &CAP, qp_type::RC), Err(WqeError(wc_status::LOC_LEN_ERR)));
        // READ on UD, unknown opcode.
        encode_send(&mut e, &SendWqe { opcode: wr_opcode::RDMA_READ, ..w }, &[sge]).unwrap();
        assert_eq!(decode_send(&e, &CAP, qp_type::UD), Err(WqeError(wc_status::LOC_QP_OP_ERR)));
        encode_send(&mut e, &SendWqe { opcode: 99, ..w }, &[sge]).unwrap();
        assert_eq!(decode_send(&e, &CAP, qp_type::RC), Err(WqeError(wc_status::LOC_QP_OP_ERR)));
        // An atomic needs one 8-byte SGE.
        let atomic = SendWqe { opcode: wr_opcode::ATOMIC_FETCH_AND_ADD, ..w };
        encode_send(&mut e, &atomic, &[sge]).unwrap();
        assert_eq!(decode_send(&e, &CAP, qp_type::RC), Err(WqeError(wc_status::LOC_LEN_ERR)));
        encode_send(&mut e, &atomic, &[Sge { length: 8, ..sge }]).unwrap();
        assert!(decode_send(&e, &CAP, qp_type::RC).is_ok());
    }

    #[test]
    fn memory_operations_are_rc_and_uc_only() {
        let mut e = [0u8; 192];
        for op in [wr_opcode::LOCAL_INV, wr_opcode::BIND_MW, wr_opcode::REG_MR] {
            encode_send(&mut e, &SendWqe { opcode: op, ..Default::default() }, &[]).unwrap();
            assert!(decode_send(&e, &CAP, qp_type::RC).is_ok());
            assert!(decode_send(&e, &CAP, qp_type::UC).is_ok());
            assert_eq!(decode_send(&e, &CAP, qp_type::UD), Err(WqeError(wc_status::LOC_QP_OP_ERR)));
        }
        for op in [wr_opcode::FLUSH, wr_opcode::ATOMIC_WRITE] {
            encode_send(&mut e, &SendWqe { opcode: op, ..Default::default() }, &[]).unwrap();
            assert!(decode_send(&e, &CAP, qp_type::RC).is_ok());
            assert_eq!(decode_send(&e, &CAP, qp_type::UC), Err(WqeError(wc_status::LOC_QP_OP_ERR)));
            encode_send_inline(&mut e, &SendWqe { opcode: op, ..Default::default() }, b"12345678").unwrap();
            assert_eq!(decode_send(&e, &CAP, qp_type::RC), Err(WqeError(wc_status::LOC_QP_OP_ERR)));
        }
    }

    #[test]
    fn inline_round_trip_and_checks() {
        let mut e = [0u8; 192];
        let w = SendWqe { opcode: wr_opcode::SEND, ..Default::default() };
        encode_send_inline(&mut e, &w, b"hello").unwrap();
        assert_eq!(decode_send(&e, &CAP, qp_type::RC).unwrap().1, SendPayload::Inline(b"hello"));
        encode_send_inline(&mut e, &w, &[1; 65]).unwrap();
        assert_eq!(decode_send(&e, &CAP, qp_type::RC), Err(WqeError(wc_status::LOC_LEN_ERR)));
        // Inline length beyond the entry copy.
        let big = QpCap { max_inline_data: 1000, ..CAP };
        assert_eq!(decode_send(&e[..100], &big, qp_type::RC), Err(WqeError(wc_status::LOC_LEN_ERR)));
        assert_eq!(encode_send_inline(&mut e, &w, &[0; 200]), None);
    }

    #[test]
    fn recv_round_trip() {
        let mut e = [0u8; 48];
        let sge = Sge { addr: 1, length: 2, lkey: 3 };
        assert_eq!(encode_recv(&mut e, 9, &[sge, sge]), Some(48));
        let (w, l) = decode_recv(&e, 2).unwrap();
        assert_eq!((w.wr_id, l.as_slice()), (9, &[sge, sge][..]));
        assert_eq!(decode_recv(&e, 1), Err(WqeError(wc_status::LOC_LEN_ERR)));
        assert_eq!(decode_recv(&e[..40], 2), Err(WqeError(wc_status::LOC_LEN_ERR)));
    }

    proptest! {
        #[test]
        fn random_entries_never_panic(entry in prop::collection::vec(any::<u8>(), 0..300), qpt in 0u8..6) {
            let cap = QpCap { max_send_sge: 32, max_inline_data: 1024, ..CAP };
            if let Ok((_, SendPayload::Sges(l))) = decode_send(&entry, &cap, qpt) {
                prop_assert!(l.as_slice().len() <= 32);
            }
            let _ = decode_recv(&entry, 32);
        }
    }
}
