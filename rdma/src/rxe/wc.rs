//! Work completions (IBA vol. 1 11.4.2.1 Poll for Completion; `struct ibv_wc`): every
//! field a consumer reads, with the verbs ABI's values for status, opcode and flags.

/// `enum ibv_wc_status`: the ones this transport produces, plus the rest of the ABI's
/// values so a ring decoder round-trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcStatus {
    Success = 0,
    /// The message did not fit the receive buffer, or a work request's length was wrong.
    LocLenErr = 1,
    /// A work request the QP cannot run (wrong opcode for its type, misaligned atomic).
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    /// An SGE's lkey, bounds, access rights or PD were wrong.
    LocProtErr = 4,
    /// Flushed: the QP was in (or went to) the error state.
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    /// The responder NAKed with "invalid request".
    RemInvReqErr = 9,
    /// The responder NAKed with "remote access error" (rkey, bounds, rights, PD).
    RemAccessErr = 10,
    /// The responder NAKed with "remote operational error".
    RemOpErr = 11,
    /// The transport retry counter ran out (timeouts and sequence-error NAKs).
    RetryExcErr = 12,
    /// The RNR retry counter ran out.
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
}

/// `enum ibv_wc_opcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    BindMw = 5,
    LocalInv = 6,
    /// IBA 1.5 FLUSH.
    Flush = 8,
    /// IBA 1.5 ATOMIC WRITE.
    AtomicWrite = 9,
    /// A fast registration (the kernel's `IB_WC_REG_MR`; libibverbs has none).
    RegMr = 10,
    Recv = 128,
    RecvRdmaWithImm = 129,
}

/// `enum ibv_wc_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WcFlags(pub u32);

impl WcFlags {
    /// The first 40 bytes of the receive buffer hold the GRH (UD).
    pub const GRH: u32 = 1 << 0;
    /// `imm_data` holds immediate data.
    pub const WITH_IMM: u32 = 1 << 1;
    pub const IP_CSUM_OK: u32 = 1 << 2;
    /// `imm_data` holds the rkey a SEND WITH INVALIDATE invalidated.
    pub const WITH_INV: u32 = 1 << 3;

    pub const fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
}

/// One completion: `struct ibv_wc`, field for field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    /// Transport-specific detail for errors; 0 otherwise.
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data, or with [`WcFlags::WITH_INV`] the invalidated rkey (the ABI's
    /// union of `imm_data` and `invalidated_rkey`).
    pub imm_data: u32,
    pub qp_num: u32,
    /// The sender's QPN (UD: from the DETH; connected QPs: the remote QPN).
    pub src_qp: u32,
    pub wc_flags: WcFlags,
    pub pkey_index: u16,
    /// RoCE has no LIDs and one SL: always 0, kept for the ABI.
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
    /// A receive completion for a message whose last packet had the BTH's
    /// solicited-event bit (IBA 9.2.1, 10.2.1.3: it satisfies a CQ armed for
    /// solicited completions only, as unsuccessful ones do). Not an
    /// `ibv_wc` field: rxe hands it to `rxe_cq_post` beside the CQE.
    pub solicited: bool,
}

impl WorkCompletion {
    /// A completion with the given identity and every other field zero.
    pub const fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            qp_num,
            src_qp: 0,
            wc_flags: WcFlags(0),
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
            solicited: false,
        }
    }

    /// Whether the completion satisfies a CQ armed for solicited
    /// completions only: a solicited receive, or any unsuccessful
    /// completion (IBA 11.4.2.2).
    pub fn raises_solicited_event(&self) -> bool {
        self.solicited || self.status != WcStatus::Success
    }
}
