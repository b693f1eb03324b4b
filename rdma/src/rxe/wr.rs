//! Work requests as a consumer posts them (IBA vol. 1 11.4.1.1 Post Send Request,
//! 11.4.1.2 Post Receive Request; Linux `struct ib_send_wr` / `ib_recv_wr`). The opcode
//! values are the verbs ABI's (`enum ibv_wr_opcode`), so the kernel's ring decoder maps
//! them one to one.

use super::ah::AhHandle;
use super::mr::MrHandle;

/// A scatter/gather element: `length` bytes at `addr` in the MR named by `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// What a send work request asks for (`enum ibv_wr_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrOpcode {
    RdmaWrite,
    RdmaWriteWithImm,
    Send,
    SendWithImm,
    RdmaRead,
    AtomicCmpSwp,
    AtomicFetchAdd,
    LocalInv,
    /// Bind a memory window (type 1 through the `bind_mw` verb, type 2B directly).
    BindMw,
    SendWithInv,
    /// IBA 1.5 FLUSH: make earlier writes to a range placed (visible).
    Flush,
    /// IBA 1.5 ATOMIC WRITE: write 8 bytes as one indivisible access.
    AtomicWrite,
    /// Fast-register an MR (the kernel's `IB_WR_REG_MR`; libibverbs has none).
    RegMr,
}

impl WrOpcode {
    /// The `ibv_wr_opcode` value.
    pub const fn to_raw(self) -> u32 {
        match self {
            WrOpcode::RdmaWrite => 0,
            WrOpcode::RdmaWriteWithImm => 1,
            WrOpcode::Send => 2,
            WrOpcode::SendWithImm => 3,
            WrOpcode::RdmaRead => 4,
            WrOpcode::AtomicCmpSwp => 5,
            WrOpcode::AtomicFetchAdd => 6,
            WrOpcode::LocalInv => 7,
            WrOpcode::BindMw => 8,
            WrOpcode::SendWithInv => 9,
            WrOpcode::Flush => 14,
            WrOpcode::AtomicWrite => 15,
            WrOpcode::RegMr => 0x20,
        }
    }

    /// Decodes an `ibv_wr_opcode` (and the kernel's REG_MR, 0x20); TSO (10) and
    /// driver opcodes are not supported and give `None`.
    pub const fn from_raw(raw: u32) -> Option<WrOpcode> {
        Some(match raw {
            0 => WrOpcode::RdmaWrite,
            1 => WrOpcode::RdmaWriteWithImm,
            2 => WrOpcode::Send,
            3 => WrOpcode::SendWithImm,
            4 => WrOpcode::RdmaRead,
            5 => WrOpcode::AtomicCmpSwp,
            6 => WrOpcode::AtomicFetchAdd,
            7 => WrOpcode::LocalInv,
            8 => WrOpcode::BindMw,
            9 => WrOpcode::SendWithInv,
            14 => WrOpcode::Flush,
            15 => WrOpcode::AtomicWrite,
            0x20 => WrOpcode::RegMr,
            _ => return None,
        })
    }

    pub const fn is_send(self) -> bool {
        matches!(self, WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv)
    }

    pub const fn is_write(self) -> bool {
        matches!(self, WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm)
    }

    pub const fn is_atomic(self) -> bool {
        matches!(self, WrOpcode::AtomicCmpSwp | WrOpcode::AtomicFetchAdd)
    }

    /// READ, atomics, and IBA 1.5's FLUSH and ATOMIC WRITE: they take a
    /// responder resource, are answered by a response (not a plain ACK) and
    /// count against `max_rd_atomic`.
    pub const fn is_rd_atomic(self) -> bool {
        matches!(self, WrOpcode::RdmaRead | WrOpcode::Flush | WrOpcode::AtomicWrite) || self.is_atomic()
    }

    /// Moves no data through its SGEs: nothing to check there.
    pub const fn has_no_sges(self) -> bool {
        matches!(self, WrOpcode::Flush | WrOpcode::AtomicWrite) || self.is_local()
    }

    pub const fn has_imm(self) -> bool {
        matches!(self, WrOpcode::RdmaWriteWithImm | WrOpcode::SendWithImm)
    }

    /// Executed by the local QP without a packet.
    pub const fn is_local(self) -> bool {
        matches!(self, WrOpcode::LocalInv | WrOpcode::BindMw | WrOpcode::RegMr)
    }
}

/// `enum ibv_send_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendFlags(pub u32);

impl SendFlags {
    /// Wait for every earlier READ and atomic to complete before starting.
    pub const FENCE: u32 = 1 << 0;
    /// Generate a completion even on a QP created with `sq_sig_all` off.
    pub const SIGNALED: u32 = 1 << 1;
    /// Set the BTH solicited-event bit.
    pub const SOLICITED: u32 = 1 << 2;
    /// The data is copied into the WQE at post time; SGE lkeys are not checked.
    pub const INLINE: u32 = 1 << 3;

    pub const fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
}

/// The per-opcode part of a send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RemoteOp {
    /// RDMA READ/WRITE and atomics: the remote virtual address.
    pub remote_addr: u64,
    pub rkey: u32,
    /// FETCH_ADD: the addend. CMP_SWAP: the compare value. ATOMIC_WRITE: the
    /// 8 bytes to write, as `u64::from_ne_bytes` of them. FLUSH: the length.
    pub compare_add: u64,
    /// CMP_SWAP: the swap value.
    pub swap: u64,
    /// FLUSH: the FETH placement type (bit 0 global visibility, bit 1
    /// persistence) and selectivity level (0 the range, 1 the whole MR).
    pub flush_type: u8,
    pub flush_level: u8,
}

/// The memory operation of a REG_MR or BIND_MW work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemOp {
    #[default]
    None,
    /// REG_MR: make the fast-register MR valid with lkey/rkey `key` (same
    /// index, the key byte the consumer chose) and `access`, over the page
    /// list `map_mr_sg` gave it.
    Reg { mr: MrHandle, key: u32, access: u32 },
    /// BIND_MW: bind the window named by `mw_rkey` to `addr..addr + length` of
    /// the MR `mr_lkey` with `access`; its rkey takes the key byte of
    /// `new_rkey`. A zero length unbinds a type 1 window.
    Bind { mw_rkey: u32, new_rkey: u32, mr_lkey: u32, addr: u64, length: u64, access: u32 },
}

/// UD addressing of a send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    pub ah: AhHandle,
    pub remote_qpn: u32,
    /// The Q_Key to send. When its top bit is set the QP's own Q_Key is sent instead
    /// (IBA vol. 1 10.2.4.2; the GSI QP cannot send a controlled Q_Key).
    pub remote_qkey: u32,
}

/// A send work request. `sg_list` is copied into the WQE at post time.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    pub wr_id: u64,
    pub opcode: WrOpcode,
    pub flags: SendFlags,
    pub sg_list: &'a [Sge],
    /// Immediate data (network order value as the consumer gave it), or for
    /// SEND_WITH_INV and LOCAL_INV the rkey to invalidate.
    pub imm_or_rkey: u32,
    pub remote: RemoteOp,
    /// UD only.
    pub ud: Option<UdDest>,
    /// INLINE only: the data itself (the SGEs are ignored).
    pub inline_data: &'a [u8],
    /// REG_MR and BIND_MW only.
    pub mem: MemOp,
}

impl<'a> SendWr<'a> {
    /// A signaled work request with nothing but an opcode and a gather list.
    pub fn new(wr_id: u64, opcode: WrOpcode, sg_list: &'a [Sge]) -> SendWr<'a> {
        SendWr {
            wr_id,
            opcode,
            flags: SendFlags(SendFlags::SIGNALED),
            sg_list,
            imm_or_rkey: 0,
            remote: RemoteOp::default(),
            ud: None,
            inline_data: &[],
            mem: MemOp::None,
        }
    }

    pub fn with_remote(mut self, remote_addr: u64, rkey: u32) -> Self {
        self.remote.remote_addr = remote_addr;
        self.remote.rkey = rkey;
        self
    }

    pub fn with_flags(mut self, flags: u32) -> Self {
        self.flags = SendFlags(flags);
        self
    }

    pub fn with_imm(mut self, imm: u32) -> Self {
        self.imm_or_rkey = imm;
        self
    }

    pub fn with_atomic(mut self, compare_add: u64, swap: u64) -> Self {
        self.remote.compare_add = compare_add;
        self.remote.swap = swap;
        self
    }

    pub fn with_ud(mut self, ud: UdDest) -> Self {
        self.ud = Some(ud);
        self
    }

    pub fn with_mem(mut self, mem: MemOp) -> Self {
        self.mem = mem;
        self
    }

    /// FLUSH's placement type and selectivity level (FETH).
    pub fn with_flush(mut self, flush_type: u8, flush_level: u8) -> Self {
        self.remote.flush_type = flush_type;
        self.remote.flush_level = flush_level;
        self
    }

    /// ATOMIC WRITE's 8 bytes.
    pub fn with_atomic_write(mut self, bytes: [u8; 8]) -> Self {
        self.remote.compare_add = u64::from_ne_bytes(bytes);
        self
    }

    pub fn with_inline(mut self, data: &'a [u8]) -> Self {
        self.inline_data = data;
        self.flags.0 |= SendFlags::INLINE;
        self
    }
}

/// A receive work request.
#[derive(Debug, Clone, Copy)]
pub struct RecvWr<'a> {
    pub wr_id: u64,
    pub sg_list: &'a [Sge],
}
