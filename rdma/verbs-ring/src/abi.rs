//! The shared-region ABI: superblock, context slots, ring headers, the region
//! layout, and the data-path descriptors (send WQE, SGE, receive WQE, CQE).
//!
//! Every structure here is `#[repr(C)]`, little-endian, made of plain
//! integers, and its size is asserted at compile time (see [`crate::wire`]).
//! Enumerations (states, opcodes, statuses) are `u32`/`u16`/`u8` fields with
//! named constants, never Rust enums: the peer may write any value, and an
//! unknown one must be representable so that it can be refused.
//!
//! Offsets inside the region are byte offsets from its start. Memory
//! registered as an MR is addressed by region offset too: an MR's iova is
//! the region offset of its first byte, so SGE `addr` and RDMA `remote_addr`
//! values are region offsets of the appliance that owns the MR.

use crate::shm::{SharedMem, ShmError, check_range};
use crate::wire::Wire;
use crate::wire_struct;

/// `"VERBRING"` as a little-endian `u64`: the first eight bytes of the region.
pub const MAGIC: u64 = u64::from_le_bytes(*b"VERBRING");

/// ABI major version: a host library refuses a region with another major.
pub const ABI_MAJOR: u32 = 1;
/// ABI minor version: additions that an older host may ignore
/// (1: QUERY_RESOURCES; 2: the RDMA CM commands, REG_MR's iova; 3: memory
/// windows, fast-register MRs, multicast; 4: the slot's `host_comm`,
/// RES_ENTRY; 5: RES_ENTRY's contexts and SRQs, the entry grown to carry an
/// SRQ's QPs at its end; 6: RESIZE_SRQ, and the alternate path (`AltPath`)
/// after MODIFY_QP's request and QUERY_QP's answer; 7: wake-ups without
/// polling, [`crate::wake`]: the wake block after the superblock, the slot's
/// `host_peer`, the completion rings' `notified` and `arm` words). An older
/// host leaves
/// `host_comm` zero: its objects list with a pid and no name. A 1.5 host's
/// MODIFY_QP is taken (its alternate path reads as zeros), but its
/// QUERY_QP gets the longer 1.6 answer, which that host refuses, as a 1.4
/// host refused 1.5's longer RES_ENTRY: host and firmware are built from
/// one tree.
pub const ABI_MINOR: u32 = 7;
/// The `abi_version` field: major in the high 16 bits, minor in the low 16.
pub const ABI_VERSION: u32 = (ABI_MAJOR << 16) | ABI_MINOR;

/// Page size the layout aligns areas to (and the host buffer allocator's grain).
pub const PAGE: u64 = 4096;
/// Cache line: ring indices live on separate lines so producer and consumer
/// never write the same line.
pub const CACHE_LINE: u64 = 64;

/// Firmware states (`Superblock::fw_state`).
pub mod fw_state {
    /// The region is fresh (all zero): no firmware has touched it.
    pub const ABSENT: u32 = 0;
    /// The firmware is initialising the layout; nothing else is valid yet.
    pub const BOOTING: u32 = 1;
    /// Layout valid, contexts may be claimed.
    pub const READY: u32 = 2;
    /// The firmware stopped serving; `fail_code` says why.
    pub const FAILED: u32 = 3;

    pub fn name(s: u32) -> &'static str {
        match s {
            ABSENT => "absent",
            BOOTING => "booting",
            READY => "ready",
            FAILED => "failed",
            _ => "unknown",
        }
    }
}

wire_struct! {
    /// Page 0 of the region. Written by the firmware at boot with
    /// `fw_state = BOOTING`, then published by a release store of
    /// `fw_state = READY`; a host reads `fw_state` with acquire before
    /// trusting the rest. Offsets marked "context-relative" are added to
    /// `ctx_area_off + i * ctx_area_stride` for context `i`.
    pub struct Superblock, size 256 {
        /// [`MAGIC`].
        pub magic: u64,
        /// Size of the whole region in bytes.
        pub region_size: u64,
        /// [`ABI_VERSION`].
        pub abi_version: u32,
        /// One of [`fw_state`].
        pub fw_state: u32,
        /// Incremented by the firmware once per poll tick: a host that sees it
        /// stop knows the appliance is gone.
        pub heartbeat: u32,
        /// Nominal time between two heartbeats, microseconds.
        pub heartbeat_period_us: u32,
        /// A context whose `host_heartbeat` has not changed for this many
        /// firmware heartbeats is reclaimed with all its objects.
        pub lease_beats: u32,
        /// Number of context slots.
        pub num_contexts: u32,
        /// Region offset of the context slot table.
        pub ctx_slots_off: u32,
        /// Size of one [`ContextSlot`].
        pub ctx_slot_size: u32,
        /// Region offset of context 0's area.
        pub ctx_area_off: u64,
        /// Distance between two context areas.
        pub ctx_area_stride: u64,
        /// Context-relative offset of the command ring header.
        pub cmd_ring_off: u32,
        /// Command ring capacity (a power of two).
        pub cmd_entries: u32,
        /// Context-relative offset of the response ring header.
        pub resp_ring_off: u32,
        /// Response ring capacity (a power of two).
        pub resp_entries: u32,
        /// Bytes per command and response slot (header included).
        pub cmd_slot_size: u32,
        /// Why the firmware failed (a status code), when `fw_state == FAILED`.
        pub fail_code: u32,
        /// Context-relative offset of the queue area, where the firmware
        /// places SQ, RQ, SRQ and CQ rings.
        pub queue_area_off: u64,
        /// Size of each context's queue area.
        pub queue_area_size: u64,
        /// Context-relative offset of the host buffer area (MR memory).
        pub buf_area_off: u64,
        /// Size of each context's buffer area.
        pub buf_area_size: u64,
        /// Zero; room for minor versions.
        pub reserved: [u64; 17],
    }
}

/// Region offset of `Superblock::fw_state` (read with acquire).
pub const SB_FW_STATE: usize = core::mem::offset_of!(Superblock, fw_state);
/// Region offset of `Superblock::heartbeat`.
pub const SB_HEARTBEAT: usize = core::mem::offset_of!(Superblock, heartbeat);
/// Region offset of `Superblock::fail_code`.
pub const SB_FAIL_CODE: usize = core::mem::offset_of!(Superblock, fail_code);

/// Context slot states (`ContextSlot::state`).
pub mod ctx_state {
    /// Unowned; rings reset. A host claims it with CAS `FREE -> ATTACHED`.
    pub const FREE: u32 = 0;
    /// Owned by a host process; the firmware serves its rings.
    pub const ATTACHED: u32 = 1;
    /// The owner asks to detach: the firmware destroys its objects and frees
    /// the slot.
    pub const DETACHING: u32 = 2;
    /// The firmware is tearing the context down (lease expired, protocol
    /// violation, or after DETACHING); the host must not touch it.
    pub const RECLAIMING: u32 = 3;

    pub fn name(s: u32) -> &'static str {
        match s {
            FREE => "free",
            ATTACHED => "attached",
            DETACHING => "detaching",
            RECLAIMING => "reclaiming",
            _ => "unknown",
        }
    }
}

/// Why the firmware last reclaimed a slot (`ContextSlot::reclaim_reason`).
pub mod reclaim_reason {
    pub const NONE: u32 = 0;
    /// The owner detached.
    pub const DETACHED: u32 = 1;
    /// The owner's heartbeat stopped for `lease_beats`.
    pub const LEASE_EXPIRED: u32 = 2;
    /// The owner broke the ring protocol (indices beyond capacity or going
    /// backwards, an unknown slot state).
    pub const PROTOCOL: u32 = 3;

    pub fn name(r: u32) -> &'static str {
        match r {
            NONE => "none",
            DETACHED => "detached",
            LEASE_EXPIRED => "lease expired",
            PROTOCOL => "protocol violation",
            _ => "unknown",
        }
    }
}

wire_struct! {
    /// One context slot. `state`, `generation` and `host_heartbeat` are
    /// accessed atomically; the rest is informational.
    pub struct ContextSlot, size 64 {
        /// One of [`ctx_state`]; claimed by compare-and-swap.
        pub state: u32,
        /// Bumped by the firmware each time the slot returns to FREE, so a
        /// host that lost its slot (lease expired) can tell.
        pub generation: u32,
        /// Bumped by the owner at least once per lease; the firmware only
        /// looks for change.
        pub host_heartbeat: u32,
        /// The owner's process id, for `rdma resource show`.
        pub host_pid: u32,
        /// One of [`reclaim_reason`]: why the slot was last reclaimed.
        pub reclaim_reason: u32,
        /// The owner's command name (Linux's `comm`, at most 15 bytes,
        /// NUL-padded), for `rdma resource show` (ABI 1.4; zero from an
        /// older host). Only informational: the firmware reads it through
        /// [`sanitize_comm`], whatever a host wrote.
        pub host_comm: [u8; COMM_LEN],
        /// The owner's ivshmem peer ID plus one, written right after the
        /// claim (ABI 1.7): whom the firmware rings when one of the
        /// owner's armed CQs gets a completion ([`crate::wake`]). Zero: the
        /// owner has no doorbell and polls. Checked at each use (at most
        /// 65536, never the appliance's own ID).
        pub host_peer: u32,
        /// Zero.
        pub reserved: [u32; 6],
    }
}

/// Slot-relative offset of `ContextSlot::state`.
pub const SLOT_STATE: usize = core::mem::offset_of!(ContextSlot, state);
/// Slot-relative offset of `ContextSlot::generation`.
pub const SLOT_GENERATION: usize = core::mem::offset_of!(ContextSlot, generation);
/// Slot-relative offset of `ContextSlot::host_heartbeat`.
pub const SLOT_HOST_HEARTBEAT: usize = core::mem::offset_of!(ContextSlot, host_heartbeat);
/// Slot-relative offset of `ContextSlot::host_pid`.
pub const SLOT_HOST_PID: usize = core::mem::offset_of!(ContextSlot, host_pid);
/// Slot-relative offset of `ContextSlot::host_comm`.
pub const SLOT_HOST_COMM: usize = core::mem::offset_of!(ContextSlot, host_comm);
/// Slot-relative offset of `ContextSlot::host_peer`.
pub const SLOT_HOST_PEER: usize = core::mem::offset_of!(ContextSlot, host_peer);

/// Size of a command name field (Linux's `TASK_COMM_LEN`).
pub const COMM_LEN: usize = 16;

/// A command name as a host wrote it, made safe to print and to put in
/// JSON: up to the first NUL and at most 15 bytes, every byte that is not
/// printable ASCII (or is a quote, a backslash or a blank, which would
/// break a line's words or a JSON string) replaced by `?`, NUL-padded.
pub fn sanitize_comm(raw: &[u8]) -> [u8; COMM_LEN] {
    let mut out = [0u8; COMM_LEN];
    for (o, &b) in out.iter_mut().zip(raw.iter().take(COMM_LEN - 1).take_while(|&&b| b != 0)) {
        *o = if b.is_ascii_graphic() && b != b'"' && b != b'\\' { b } else { b'?' };
    }
    out
}

/// Slot-relative offset of `ContextSlot::reclaim_reason`.
pub const SLOT_RECLAIM_REASON: usize = core::mem::offset_of!(ContextSlot, reclaim_reason);

wire_struct! {
    /// The header in front of every ring's entries: the two free-running
    /// indices, each on its own cache line. The producer writes only
    /// `producer` (release), the consumer only `consumer` (release); each
    /// reads the other's with acquire. Entry `i` lives at slot
    /// `i & (entries - 1)`. Capacity and entry size are not here: each side
    /// holds them privately (the firmware from its own layout), so the peer
    /// cannot change them.
    ///
    /// Completion rings use one more word on each line (ABI 1.7; zero on
    /// every other ring): `arm`, the host's request for a completion event,
    /// on the consumer's line, and `notified`, the firmware's answer, on
    /// the producer's ([`crate::wake`]).
    pub struct RingHeader, size 128 {
        pub producer: u32,
        /// Completion rings: the `arm` value the firmware last answered
        /// with an event (written by the firmware, the producer).
        pub notified: u32,
        pub reserved0: [u32; 14],
        pub consumer: u32,
        /// Completion rings: the host's request for an event, a sequence
        /// and the solicited-only bit (written by the host, the consumer).
        pub arm: u32,
        pub reserved1: [u32; 14],
    }
}

/// Ring-relative offset of the producer index.
pub const RING_PRODUCER: usize = core::mem::offset_of!(RingHeader, producer);
/// Ring-relative offset of the consumer index.
pub const RING_CONSUMER: usize = core::mem::offset_of!(RingHeader, consumer);
/// Ring-relative offset of a completion ring's `notified` word.
pub const RING_NOTIFIED: usize = core::mem::offset_of!(RingHeader, notified);
/// Ring-relative offset of a completion ring's `arm` word.
pub const RING_ARM: usize = core::mem::offset_of!(RingHeader, arm);

// The layout the two sides agree on, checked where the compiler sees it: each
// side writes only its own cache line of a ring header, and a slot's
// `host_peer` is where ABI 1.6 had its first reserved word.
const _: () = {
    assert!(RING_PRODUCER == 0 && RING_NOTIFIED == 4);
    assert!(RING_CONSUMER == CACHE_LINE as usize && RING_ARM == RING_CONSUMER + 4);
    assert!(SLOT_HOST_PEER == 36 && ContextSlot::SIZE == 64);
};
/// Entries start this far after the ring header.
pub const RING_HEADER_SIZE: usize = RingHeader::SIZE;
/// Largest ring capacity the ABI allows.
pub const MAX_RING_ENTRIES: u32 = 1 << 20;

wire_struct! {
    /// Where the firmware placed a ring: returned by CREATE_CQ / CREATE_QP /
    /// CREATE_SRQ so the host can use it directly.
    pub struct RingPlacement, size 16 {
        /// Region offset of the [`RingHeader`].
        pub off: u64,
        /// Capacity, a power of two.
        pub entries: u32,
        /// Bytes per entry.
        pub entry_size: u32,
    }
}

impl RingPlacement {
    /// Bytes the ring occupies: header and entries. `None` on overflow.
    pub fn bytes(entries: u32, entry_size: u32) -> Option<u64> {
        u64::from(entries).checked_mul(u64::from(entry_size))?.checked_add(RING_HEADER_SIZE as u64)
    }
}

/// Parameters the firmware chooses at boot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LayoutParams {
    pub num_contexts: u32,
    pub cmd_entries: u32,
    pub resp_entries: u32,
    pub cmd_slot_size: u32,
    /// Per-context queue area; the rest of each context area is buffer area.
    pub queue_area_size: u64,
    pub heartbeat_period_us: u32,
    pub lease_beats: u32,
}

impl Default for LayoutParams {
    /// 8 contexts, 64-entry command and response rings of 256-byte slots,
    /// 1 MiB of queues per context, a 1 ms heartbeat and a 2 s lease.
    fn default() -> Self {
        LayoutParams {
            num_contexts: 8,
            cmd_entries: 64,
            resp_entries: 64,
            cmd_slot_size: 256,
            queue_area_size: 1 << 20,
            heartbeat_period_us: 1000,
            lease_beats: 2000,
        }
    }
}

/// Why a layout was refused (by the firmware computing it, or by a host
/// checking the superblock it found).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LayoutError {
    BadMagic(u64),
    /// Major version differs.
    Version(u32),
    /// `region_size` does not match the mapping.
    RegionSize {
        superblock: u64,
        mapped: u64,
    },
    /// Not ready: the state the firmware is in.
    NotReady(u32),
    /// A field is out of range; the name says which.
    Field(&'static str),
    /// The areas do not fit in the region.
    TooSmall,
    Shm(ShmError),
}

impl From<ShmError> for LayoutError {
    fn from(e: ShmError) -> Self {
        LayoutError::Shm(e)
    }
}

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LayoutError::BadMagic(m) => write!(f, "bad magic {m:#018x}: not a verbs ring region"),
            LayoutError::Version(v) => {
                write!(f, "ABI version {}.{}, this side speaks {ABI_MAJOR}.{ABI_MINOR}", v >> 16, v & 0xffff)
            }
            LayoutError::RegionSize { superblock, mapped } => {
                write!(f, "superblock says {superblock} bytes but {mapped} are mapped")
            }
            LayoutError::NotReady(s) => write!(f, "firmware is {}", fw_state::name(*s)),
            LayoutError::Field(name) => write!(f, "superblock field {name} is out of range"),
            LayoutError::TooSmall => f.write_str("region too small for the requested layout"),
            LayoutError::Shm(e) => write!(f, "{e}"),
        }
    }
}

fn align_up(v: u64, a: u64) -> Option<u64> {
    Some(v.checked_add(a - 1)? & !(a - 1))
}

/// The validated layout: the firmware computes it and keeps it privately (it
/// never re-reads the superblock); a host derives it from the superblock and
/// checks it the same way.
///
/// ```text
/// 0x0000  +------------------------------+
///         | Superblock (256 B)           |  page 0
/// 0x1000  +------------------------------+
///         | ContextSlot[num_contexts]    |  64 B each
///         +------------------------------+  ctx_area_off (page aligned)
///         | context 0 area               |  ctx_area_stride bytes:
///         |  +0              cmd ring    |    RingHeader + cmd_entries x slot
///         |  +resp_ring_off  resp ring   |    RingHeader + resp_entries x slot
///         |  +queue_area_off queue area  |    SQ/RQ/SRQ/CQ rings, firmware-placed
///         |  +buf_area_off   buffer area |    MR memory, host-allocated
///         +------------------------------+
///         | context 1 area ...           |
///         +------------------------------+  region_size
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Layout {
    pub region_size: u64,
    pub params: LayoutParams,
    pub ctx_slots_off: u64,
    pub ctx_area_off: u64,
    pub ctx_area_stride: u64,
    pub cmd_ring_off: u64,
    pub resp_ring_off: u64,
    pub queue_area_off: u64,
    pub buf_area_off: u64,
    pub buf_area_size: u64,
}

/// Smallest command slot: a header and the largest fixed request or response.
pub const MIN_CMD_SLOT: u32 = 256;
/// Largest command slot.
pub const MAX_CMD_SLOT: u32 = 4096;
/// Most contexts a region may have.
pub const MAX_CONTEXTS: u32 = 256;

impl Layout {
    /// Compute the layout for a region of `region_size` bytes. The buffer
    /// area of each context gets what is left after the rings and queues.
    pub fn new(region_size: u64, p: LayoutParams) -> Result<Layout, LayoutError> {
        if p.num_contexts == 0 || p.num_contexts > MAX_CONTEXTS {
            return Err(LayoutError::Field("num_contexts"));
        }
        for (v, name) in [(p.cmd_entries, "cmd_entries"), (p.resp_entries, "resp_entries")] {
            if !v.is_power_of_two() || v > MAX_RING_ENTRIES {
                return Err(LayoutError::Field(name));
            }
        }
        if p.cmd_slot_size < MIN_CMD_SLOT || p.cmd_slot_size > MAX_CMD_SLOT || !p.cmd_slot_size.is_multiple_of(64) {
            return Err(LayoutError::Field("cmd_slot_size"));
        }
        if !p.queue_area_size.is_multiple_of(PAGE) {
            return Err(LayoutError::Field("queue_area_size"));
        }
        if p.lease_beats == 0 {
            return Err(LayoutError::Field("lease_beats"));
        }
        let too_small = LayoutError::TooSmall;
        let ctx_slots_off = PAGE;
        let slots_end = ctx_slots_off + u64::from(p.num_contexts) * ContextSlot::SIZE as u64;
        let ctx_area_off = align_up(slots_end, PAGE).ok_or(too_small)?;
        let cmd_bytes = RingPlacement::bytes(p.cmd_entries, p.cmd_slot_size).ok_or(too_small)?;
        let resp_bytes = RingPlacement::bytes(p.resp_entries, p.cmd_slot_size).ok_or(too_small)?;
        let cmd_ring_off = 0;
        let resp_ring_off = align_up(cmd_bytes, CACHE_LINE).ok_or(too_small)?;
        let queue_area_off = align_up(resp_ring_off + resp_bytes, PAGE).ok_or(too_small)?;
        let buf_area_off = queue_area_off.checked_add(p.queue_area_size).ok_or(too_small)?;
        let avail = region_size.checked_sub(ctx_area_off).ok_or(too_small)?;
        let stride = (avail / u64::from(p.num_contexts)) & !(PAGE - 1);
        let buf_area_size = stride.checked_sub(buf_area_off).ok_or(too_small)?;
        if buf_area_size < PAGE {
            return Err(too_small);
        }
        Ok(Layout {
            region_size,
            params: p,
            ctx_slots_off,
            ctx_area_off,
            ctx_area_stride: stride,
            cmd_ring_off,
            resp_ring_off,
            queue_area_off,
            buf_area_off,
            buf_area_size,
        })
    }

    /// The superblock describing this layout, in state `fw_state`.
    pub fn superblock(&self, fw_state: u32) -> Superblock {
        Superblock {
            magic: MAGIC,
            region_size: self.region_size,
            abi_version: ABI_VERSION,
            fw_state,
            heartbeat: 0,
            heartbeat_period_us: self.params.heartbeat_period_us,
            lease_beats: self.params.lease_beats,
            num_contexts: self.params.num_contexts,
            ctx_slots_off: self.ctx_slots_off as u32,
            ctx_slot_size: ContextSlot::SIZE as u32,
            ctx_area_off: self.ctx_area_off,
            ctx_area_stride: self.ctx_area_stride,
            cmd_ring_off: self.cmd_ring_off as u32,
            cmd_entries: self.params.cmd_entries,
            resp_ring_off: self.resp_ring_off as u32,
            resp_entries: self.params.resp_entries,
            cmd_slot_size: self.params.cmd_slot_size,
            fail_code: 0,
            queue_area_off: self.queue_area_off,
            queue_area_size: self.params.queue_area_size,
            buf_area_off: self.buf_area_off,
            buf_area_size: self.buf_area_size,
            reserved: [0; 17],
        }
    }

    /// Host side: the layout a superblock describes, if it is exactly what
    /// [`Layout::new`] would compute for its parameters and the mapping's
    /// size. Recomputing (rather than trusting each offset) means a damaged
    /// superblock cannot point the host outside the region.
    pub fn from_superblock(sb: &Superblock, mapped: u64) -> Result<Layout, LayoutError> {
        if sb.magic != MAGIC {
            return Err(LayoutError::BadMagic(sb.magic));
        }
        if sb.abi_version >> 16 != ABI_MAJOR {
            return Err(LayoutError::Version(sb.abi_version));
        }
        if sb.region_size != mapped {
            return Err(LayoutError::RegionSize { superblock: sb.region_size, mapped });
        }
        let p = LayoutParams {
            num_contexts: sb.num_contexts,
            cmd_entries: sb.cmd_entries,
            resp_entries: sb.resp_entries,
            cmd_slot_size: sb.cmd_slot_size,
            queue_area_size: sb.queue_area_size,
            heartbeat_period_us: sb.heartbeat_period_us,
            lease_beats: sb.lease_beats,
        };
        let l = Layout::new(mapped, p)?;
        let mut expect = l.superblock(sb.fw_state);
        expect.heartbeat = sb.heartbeat;
        expect.fail_code = sb.fail_code;
        expect.abi_version = sb.abi_version;
        expect.reserved = sb.reserved;
        if expect != *sb {
            return Err(LayoutError::Field("layout offsets"));
        }
        Ok(l)
    }

    /// Host side: read the superblock (state first, with acquire) and return
    /// the layout once the firmware is READY.
    pub fn read<M: SharedMem + ?Sized>(mem: &M) -> Result<Layout, LayoutError> {
        let state = mem.load_u32_acquire(SB_FW_STATE)?;
        if state != fw_state::READY {
            return Err(LayoutError::NotReady(state));
        }
        let mut b = [0u8; Superblock::SIZE];
        mem.read(0, &mut b)?;
        let sb = Superblock::decode(&b).ok_or(LayoutError::TooSmall)?;
        Layout::from_superblock(&sb, mem.len() as u64)
    }

    /// Firmware side: write the superblock and `wake` (the doorbell, see
    /// [`crate::wake`]), zero the slots and every ring header, then publish
    /// READY with a release store.
    pub fn init<M: SharedMem + ?Sized>(&self, mem: &M, wake: &crate::wake::WakeBlock) -> Result<(), LayoutError> {
        if mem.len() as u64 != self.region_size {
            return Err(LayoutError::RegionSize { superblock: self.region_size, mapped: mem.len() as u64 });
        }
        mem.store_u32_release(SB_FW_STATE, fw_state::BOOTING)?;
        let mut b = [0u8; Superblock::SIZE];
        self.superblock(fw_state::BOOTING).encode(&mut b).ok_or(LayoutError::TooSmall)?;
        mem.write(0, &b)?;
        mem.zero(crate::wake::WAKE_BLOCK, crate::wake::WAKE_BYTES)?;
        wake.publish(mem)?;
        mem.zero(self.ctx_slots_off as usize, self.params.num_contexts as usize * ContextSlot::SIZE)?;
        for ctx in 0..self.params.num_contexts {
            for ring in [self.cmd_ring(ctx), self.resp_ring(ctx)].into_iter().flatten() {
                mem.zero(ring.off as usize, RING_HEADER_SIZE)?;
            }
        }
        mem.store_u32_release(SB_FW_STATE, fw_state::READY)?;
        Ok(())
    }

    /// Number of context slots.
    pub fn num_contexts(&self) -> u32 {
        self.params.num_contexts
    }

    /// Region offset of context `ctx`'s slot.
    pub fn slot_off(&self, ctx: u32) -> Option<usize> {
        (ctx < self.params.num_contexts).then(|| self.ctx_slots_off as usize + ctx as usize * ContextSlot::SIZE)
    }

    /// Region offset of context `ctx`'s area.
    pub fn ctx_base(&self, ctx: u32) -> Option<u64> {
        (ctx < self.params.num_contexts).then(|| self.ctx_area_off + u64::from(ctx) * self.ctx_area_stride)
    }

    /// Context `ctx`'s command ring.
    pub fn cmd_ring(&self, ctx: u32) -> Option<RingPlacement> {
        Some(RingPlacement {
            off: self.ctx_base(ctx)? + self.cmd_ring_off,
            entries: self.params.cmd_entries,
            entry_size: self.params.cmd_slot_size,
        })
    }

    /// Context `ctx`'s response ring.
    pub fn resp_ring(&self, ctx: u32) -> Option<RingPlacement> {
        Some(RingPlacement {
            off: self.ctx_base(ctx)? + self.resp_ring_off,
            entries: self.params.resp_entries,
            entry_size: self.params.cmd_slot_size,
        })
    }

    /// Context `ctx`'s queue area: `(region offset, size)`.
    pub fn queue_area(&self, ctx: u32) -> Option<(u64, u64)> {
        Some((self.ctx_base(ctx)? + self.queue_area_off, self.params.queue_area_size))
    }

    /// Context `ctx`'s host buffer area: `(region offset, size)`.
    pub fn buf_area(&self, ctx: u32) -> Option<(u64, u64)> {
        Some((self.ctx_base(ctx)? + self.buf_area_off, self.buf_area_size))
    }
}

/// Whether `[off, off + len)` lies inside `[area_off, area_off + area_len)`,
/// with overflow-checked arithmetic (both come from a hostile peer).
pub fn range_within(off: u64, len: u64, area_off: u64, area_len: u64) -> bool {
    match (off.checked_add(len), area_off.checked_add(area_len)) {
        (Some(end), Some(area_end)) => off >= area_off && end <= area_end,
        _ => false,
    }
}

/// `check_range` on `u64` offsets (a region is at most `usize` long).
pub fn check_region(region: usize, off: u64, len: u64) -> Result<(usize, usize), ShmError> {
    let o = usize::try_from(off).map_err(|_| ShmError::OutOfBounds { off: usize::MAX, len: 0, region })?;
    let l = usize::try_from(len).map_err(|_| ShmError::OutOfBounds { off: o, len: usize::MAX, region })?;
    check_range(region, o, l)?;
    Ok((o, l))
}

// ---------------------------------------------------------------------------
// Data-path descriptors: what the host writes into SQ/RQ rings and reads from
// CQ rings. Numbering follows libibverbs so the host library maps 1:1.
// ---------------------------------------------------------------------------

/// `enum ibv_wr_opcode` (send WQE `opcode`).
pub mod wr_opcode {
    pub const RDMA_WRITE: u32 = 0;
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const SEND: u32 = 2;
    pub const SEND_WITH_IMM: u32 = 3;
    pub const RDMA_READ: u32 = 4;
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub const LOCAL_INV: u32 = 7;
    pub const BIND_MW: u32 = 8;
    pub const SEND_WITH_INV: u32 = 9;
    /// IBA 1.5 FLUSH (ABI 1.3).
    pub const FLUSH: u32 = 14;
    /// IBA 1.5 ATOMIC WRITE (ABI 1.3).
    pub const ATOMIC_WRITE: u32 = 15;
    /// Fast-register an MR from `ALLOC_MR` (the kernel's `IB_WR_REG_MR`;
    /// libibverbs has no such opcode) (ABI 1.3).
    pub const REG_MR: u32 = 0x20;
}

/// `enum ibv_send_flags` (send WQE `send_flags`).
pub mod send_flags {
    pub const FENCE: u32 = 1 << 0;
    pub const SIGNALED: u32 = 1 << 1;
    pub const SOLICITED: u32 = 1 << 2;
    pub const INLINE: u32 = 1 << 3;
    pub const IP_CSUM: u32 = 1 << 4;
}

/// `enum ibv_wc_status` (CQE `status`).
pub mod wc_status {
    pub const SUCCESS: u32 = 0;
    pub const LOC_LEN_ERR: u32 = 1;
    pub const LOC_QP_OP_ERR: u32 = 2;
    pub const LOC_EEC_OP_ERR: u32 = 3;
    pub const LOC_PROT_ERR: u32 = 4;
    pub const WR_FLUSH_ERR: u32 = 5;
    pub const MW_BIND_ERR: u32 = 6;
    pub const BAD_RESP_ERR: u32 = 7;
    pub const LOC_ACCESS_ERR: u32 = 8;
    pub const REM_INV_REQ_ERR: u32 = 9;
    pub const REM_ACCESS_ERR: u32 = 10;
    pub const REM_OP_ERR: u32 = 11;
    pub const RETRY_EXC_ERR: u32 = 12;
    pub const RNR_RETRY_EXC_ERR: u32 = 13;
    pub const LOC_RDD_VIOL_ERR: u32 = 14;
    pub const REM_INV_RD_REQ_ERR: u32 = 15;
    pub const REM_ABORT_ERR: u32 = 16;
    pub const INV_EECN_ERR: u32 = 17;
    pub const INV_EEC_STATE_ERR: u32 = 18;
    pub const FATAL_ERR: u32 = 19;
    pub const RESP_TIMEOUT_ERR: u32 = 20;
    pub const GENERAL_ERR: u32 = 21;
}

/// `enum ibv_wc_opcode` (CQE `opcode`).
pub mod wc_opcode {
    pub const SEND: u32 = 0;
    pub const RDMA_WRITE: u32 = 1;
    pub const RDMA_READ: u32 = 2;
    pub const COMP_SWAP: u32 = 3;
    pub const FETCH_ADD: u32 = 4;
    pub const BIND_MW: u32 = 5;
    pub const LOCAL_INV: u32 = 6;
    pub const FLUSH: u32 = 8;
    pub const ATOMIC_WRITE: u32 = 9;
    /// The kernel's `IB_WC_REG_MR`.
    pub const REG_MR: u32 = 10;
    pub const RECV: u32 = 128;
    pub const RECV_RDMA_WITH_IMM: u32 = 129;
}

/// `enum ibv_wc_flags` (CQE `wc_flags`).
pub mod wc_flags {
    pub const GRH: u32 = 1 << 0;
    pub const WITH_IMM: u32 = 1 << 1;
    pub const IP_CSUM_OK: u32 = 1 << 2;
    pub const WITH_INV: u32 = 1 << 3;
}

wire_struct! {
    /// A scatter/gather element (`struct ibv_sge`). `addr` is a region offset
    /// inside the MR named by `lkey`.
    pub struct Sge, size 16 {
        pub addr: u64,
        pub length: u32,
        pub lkey: u32,
    }
}

wire_struct! {
    /// The fixed part of a send WQE (`struct ibv_send_wr` without the list
    /// pointers). It is followed in the same ring entry by `num_sge` [`Sge`]s,
    /// or, with [`send_flags::INLINE`], by `inline_len` bytes of data.
    ///
    /// The operations of ABI 1.3 reuse the fields (they carry no SGEs):
    /// - `LOCAL_INV`: `imm_data` the rkey (or window rkey) to invalidate;
    /// - `REG_MR`: `ud_ah` the MR's handle (from `ALLOC_MR`, same context),
    ///   `imm_data` its new key (same index, the key byte chosen),
    ///   `ud_remote_qpn` the access flags;
    /// - `BIND_MW`: `rkey` the window's current rkey, `imm_data` the rkey it
    ///   takes (only its key byte counts), `ud_remote_qkey` the MR's lkey,
    ///   `remote_addr`/`compare_add` the window's address and length,
    ///   `ud_remote_qpn` its access flags;
    /// - `FLUSH`: `remote_addr`/`rkey` the range's start, `compare_add` its
    ///   length, `imm_data` the placement type (bits 7..0) and selectivity
    ///   level (bits 15..8);
    /// - `ATOMIC_WRITE`: `remote_addr`/`rkey`, `compare_add` the 8 bytes to
    ///   write (little-endian: byte 0 is the first written).
    pub struct SendWqe, size 80 {
        pub wr_id: u64,
        /// `wr.rdma.remote_addr` / `wr.atomic.remote_addr`.
        pub remote_addr: u64,
        /// `wr.atomic.compare_add`.
        pub compare_add: u64,
        /// `wr.atomic.swap`.
        pub swap: u64,
        /// One of [`wr_opcode`].
        pub opcode: u32,
        /// Bits of [`send_flags`].
        pub send_flags: u32,
        pub num_sge: u32,
        /// Bytes of inline data following the header (with `INLINE`).
        pub inline_len: u32,
        /// `imm_data` (the value, not network order) or `invalidate_rkey`.
        pub imm_data: u32,
        /// `wr.rdma.rkey` / `wr.atomic.rkey`.
        pub rkey: u32,
        /// UD: the address handle (a handle of this context).
        pub ud_ah: u32,
        /// UD: `remote_qpn`.
        pub ud_remote_qpn: u32,
        /// UD: `remote_qkey`.
        pub ud_remote_qkey: u32,
        pub reserved: [u32; 3],
    }
}

wire_struct! {
    /// The fixed part of a receive WQE (`struct ibv_recv_wr`), followed by
    /// `num_sge` [`Sge`]s.
    pub struct RecvWqe, size 16 {
        pub wr_id: u64,
        pub num_sge: u32,
        pub reserved: u32,
    }
}

wire_struct! {
    /// A completion (`struct ibv_wc`, every field).
    pub struct Cqe, size 64 {
        pub wr_id: u64,
        /// One of [`wc_status`].
        pub status: u32,
        /// One of [`wc_opcode`].
        pub opcode: u32,
        pub vendor_err: u32,
        pub byte_len: u32,
        /// `imm_data` (the value) or `invalidated_rkey`, per `wc_flags`.
        pub imm_data: u32,
        pub qp_num: u32,
        pub src_qp: u32,
        /// Bits of [`wc_flags`].
        pub wc_flags: u32,
        pub pkey_index: u16,
        pub slid: u16,
        pub sl: u8,
        pub dlid_path_bits: u8,
        pub reserved0: [u8; 2],
        pub reserved1: [u64; 2],
    }
}

/// Most SGEs per WQE the ABI allows (rxe: 32).
pub const MAX_SGE: u32 = 32;
/// Most inline bytes per send WQE the ABI allows.
pub const MAX_INLINE: u32 = 1024;

/// Entry size of a send queue for these limits: header plus the larger of
/// the SGE list and the inline data, rounded to 64 bytes.
pub fn send_wqe_size(max_sge: u32, max_inline: u32) -> Option<u32> {
    if max_sge > MAX_SGE || max_inline > MAX_INLINE {
        return None;
    }
    let body = (max_sge * Sge::SIZE as u32).max(max_inline);
    Some((SendWqe::SIZE as u32 + body).next_multiple_of(64))
}

/// Entry size of a receive queue for `max_sge` SGEs, rounded to 16 bytes.
pub fn recv_wqe_size(max_sge: u32) -> Option<u32> {
    if max_sge > MAX_SGE {
        return None;
    }
    Some((RecvWqe::SIZE as u32 + max_sge * Sge::SIZE as u32).next_multiple_of(16))
}

/// Entry size of a completion ring.
pub const CQE_SIZE: u32 = Cqe::SIZE as u32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::fake::HeapShm;

    #[test]
    fn default_layout_for_16_mib() {
        let l = Layout::new(16 << 20, LayoutParams::default()).unwrap();
        assert_eq!(l.ctx_area_off, 0x2000);
        assert_eq!(l.resp_ring_off, 128 + 64 * 256);
        assert_eq!(l.queue_area_off, 0x9000);
        assert_eq!(l.ctx_area_stride % PAGE, 0);
        let (bo, bl) = l.buf_area(7).unwrap();
        assert!(bo + bl <= 16 << 20);
        assert!(bl > 800 * 1024, "{bl}");
        assert_eq!(l.buf_area(8), None);
        // Areas of consecutive contexts do not overlap.
        let (q0, ql) = l.queue_area(0).unwrap();
        assert!(q0 + ql <= l.buf_area(0).unwrap().0);
        assert!(l.buf_area(0).unwrap().0 + l.buf_area_size <= l.ctx_base(1).unwrap());
    }

    #[test]
    fn bad_params_are_refused() {
        let p = LayoutParams::default();
        assert_eq!(
            Layout::new(16 << 20, LayoutParams { cmd_entries: 60, ..p }),
            Err(LayoutError::Field("cmd_entries"))
        );
        assert_eq!(
            Layout::new(16 << 20, LayoutParams { num_contexts: 0, ..p }),
            Err(LayoutError::Field("num_contexts"))
        );
        assert_eq!(Layout::new(64 << 10, p), Err(LayoutError::TooSmall));
        assert_eq!(Layout::new(0, p), Err(LayoutError::TooSmall));
    }

    #[test]
    fn host_reads_what_firmware_wrote_and_refuses_tampering() {
        let m = HeapShm::new(4 << 20);
        assert_eq!(Layout::read(&m), Err(LayoutError::NotReady(fw_state::ABSENT)));
        let l = Layout::new(4 << 20, LayoutParams { num_contexts: 2, ..Default::default() }).unwrap();
        l.init(&m, &crate::wake::WakeBlock::NONE).unwrap();
        assert_eq!(Layout::read(&m), Ok(l));
        // A shifted offset is caught by recomputation.
        let off = core::mem::offset_of!(Superblock, buf_area_off);
        m.write(off, &(l.buf_area_off + 8).to_le_bytes()).unwrap();
        assert_eq!(Layout::read(&m), Err(LayoutError::Field("layout offsets")));
        m.write(off, &l.buf_area_off.to_le_bytes()).unwrap();
        m.write(16, &((2 << 16) as u32).to_le_bytes()).unwrap();
        assert_eq!(Layout::read(&m), Err(LayoutError::Version(2 << 16)));
        m.write(0, &0u64.to_le_bytes()).unwrap();
        assert_eq!(Layout::read(&m), Err(LayoutError::BadMagic(0)));
    }

    #[test]
    fn descriptor_sizes_and_offsets() {
        assert_eq!(core::mem::offset_of!(Cqe, pkey_index), 40);
        assert_eq!(core::mem::offset_of!(SendWqe, opcode), 32);
        assert_eq!(send_wqe_size(1, 0), Some(128));
        assert_eq!(send_wqe_size(0, 64), Some(192));
        assert_eq!(send_wqe_size(33, 0), None);
        assert_eq!(recv_wqe_size(2), Some(48));
        assert_eq!(RING_CONSUMER, 64);
        assert!(range_within(10, 5, 10, 5));
        assert!(!range_within(u64::MAX, 2, 0, u64::MAX));
        assert!(!range_within(9, 1, 10, 5));
    }
}

#[cfg(test)]
mod comm_tests {
    use super::sanitize_comm;

    #[test]
    fn a_lying_host_comm_is_bounded_and_printable() {
        assert_eq!(&sanitize_comm(b"rping\0garbage")[..6], b"rping\0");
        // No NUL at all, quotes, blanks, control and non-ASCII bytes.
        let c = sanitize_comm(b"a\"b c\n\xff0123456789abcdef");
        assert_eq!(&c[..15], b"a?b?c??01234567");
        assert_eq!(c[15], 0);
        assert_eq!(sanitize_comm(b""), [0; 16]);
    }
}
