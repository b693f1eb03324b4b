//! The object commands on the rxe transport: what the provider keeps per
//! object, how the ring's values (ibverbs numbering) become the transport's
//! types, and how an address vector gets its destination MAC.
//!
//! Object ids are the transport's raw handles (pool index and key), unique
//! per kind as the dispatcher needs; the QP's wire number is its QPN. The
//! dispatcher has already checked handles, ownership, sizes and areas; what
//! is left here is the transport's own validation (attribute ranges, the
//! modify-QP table), answered with a status, never a panic.

use alloc::collections::{BTreeMap, VecDeque};
use core::net::IpAddr;

use verbs_ring::abi::{Cqe, RingPlacement};
use verbs_ring::cmd::{self, Status, qp_type};
use verbs_ring::dispatch::ObjId;
use verbs_ring::ring::{Consumer, Producer, RingGeometry};
use verbs_ring::shm::SharedMem;

use crate::core::gid::Gid;
use crate::core::port::IbMtu;
use crate::rxe::ah::{self, AhAttr, AhError};
use crate::rxe::memory::Memory;
use crate::rxe::mr::AccessFlags;
use crate::rxe::qp::{MigState, QpAttr, QpCap};
use crate::rxe::qp_state::{AttrMask, QpState, QpType};
use crate::rxe::queue::PostError;
use crate::rxe::sink::FrameSink;
use crate::rxe::time::Instant;
use crate::rxe::transport::{RxeTransport, VerbsError};
use crate::wire::MacAddr;

/// What the neighbour tables (ARP, IPv6 neighbour discovery) answer for a
/// next hop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MacResolution {
    Known(MacAddr),
    /// A request is out: ask again later (the command answers `EAGAIN`).
    Pending,
    /// No answer came (the command answers `EHOSTUNREACH`).
    Failed,
}

/// How the provider reaches the transport of a device, the shared region
/// its rings live in, and the neighbour table. The kernel implements it
/// over its network state; tests over a transport of their own.
pub trait TransportAccess {
    /// The transport's memory (addresses are region offsets).
    type Mem: Memory;
    /// The shared region the SQ/RQ/SRQ/CQ rings are placed in.
    type Shm: SharedMem + ?Sized;

    /// Runs `f` with the transport of device `dev` (`ENODEV` when the device
    /// has none), a sink for the frames it sends, and the region.
    fn with_transport<R>(
        &mut self,
        dev: u32,
        f: impl FnOnce(&mut RxeTransport<Self::Mem>, &mut dyn FrameSink, &Self::Shm) -> Result<R, Status>,
    ) -> Result<R, Status>;

    /// The MAC of the next hop `ip` (IPv4 through ARP, IPv6 through neighbour
    /// discovery) on device `dev`'s netdev, starting a resolution when it is
    /// unknown; never blocks.
    fn resolve(&mut self, dev: u32, ip: IpAddr, now: Instant) -> MacResolution;
}

/// Bits of an object id that hold the transport's handle (pool index and
/// key byte: the largest pools, PDs and MRs, need 16 + 8).
const RAW_BITS: u32 = 24;

/// The id the ring knows an object by: the transport's raw handle under
/// the device index, so handles of two devices' transports (each numbering
/// its own pools) never collide in the dispatcher's tables. A device index
/// past 255 cannot be tagged and its objects are refused (`ENOMEM`).
pub fn obj_id(dev: u32, raw: u32) -> Result<ObjId, Status> {
    if dev >= 1 << (32 - RAW_BITS) || raw >= 1 << RAW_BITS {
        return Err(Status::ENOMEM);
    }
    Ok(dev << RAW_BITS | raw)
}

/// The transport's handle inside an object id.
pub fn raw(id: ObjId) -> u32 {
    id & ((1 << RAW_BITS) - 1)
}

/// The device an object id belongs to.
pub fn dev_of(id: ObjId) -> u32 {
    id >> RAW_BITS
}

/// A CQ: the completion ring the provider produces into, and completions
/// the provider itself generated (WQEs refused before the transport saw
/// them), written after the transport's.
pub(super) struct CqObj {
    pub dev: u32,
    pub ring: Producer,
    pub local: VecDeque<Cqe>,
    /// Completions dropped because the ring was full.
    pub overruns: u64,
    /// The host broke the ring protocol: nothing more is written.
    pub dead: bool,
    /// The host's completion event requests, as answered ([`verbs_ring::wake`]).
    pub notify: verbs_ring::wake::CqNotify,
}

/// A QP: its rings (consumed by the pump) and what decoding needs.
pub(super) struct QpObj {
    pub dev: u32,
    pub qpn: u32,
    pub qp_type: u8,
    pub sq_sig_all: bool,
    pub send_cq: ObjId,
    pub recv_cq: ObjId,
    pub cap: cmd::QpCap,
    pub sq: Consumer,
    pub rq: Option<Consumer>,
    /// A ring broke the protocol: the QP was moved to ERR and its rings are
    /// no longer read.
    pub failed: bool,
}

/// An SRQ: its ring and the SGE limit its entries were placed for.
pub(super) struct SrqObj {
    pub dev: u32,
    pub ring: Consumer,
    pub max_sge: u32,
    pub failed: bool,
}

/// Everything the provider keeps, by object id.
#[derive(Default)]
pub(super) struct Objects {
    pub pds: BTreeMap<ObjId, u32>,
    pub mrs: BTreeMap<ObjId, u32>,
    pub mws: BTreeMap<ObjId, u32>,
    pub ahs: BTreeMap<ObjId, u32>,
    pub cqs: BTreeMap<ObjId, CqObj>,
    pub qps: BTreeMap<ObjId, QpObj>,
    pub srqs: BTreeMap<ObjId, SrqObj>,
}

impl Objects {
    /// The device PD `pd` lives on (`ENOENT` for a PD this provider does
    /// not hold).
    pub fn dev_of_pd(&self, pd: ObjId) -> Result<u32, Status> {
        self.pds.get(&pd).copied().ok_or(Status::ENOENT)
    }

    /// Forgets every object on device `dev` (it went away with them);
    /// returns how many there were.
    pub fn forget_dev(&mut self, dev: u32) -> usize {
        let before = self.count();
        self.pds.retain(|_, d| *d != dev);
        self.mrs.retain(|_, d| *d != dev);
        self.mws.retain(|_, d| *d != dev);
        self.ahs.retain(|_, d| *d != dev);
        self.cqs.retain(|_, c| c.dev != dev);
        self.qps.retain(|_, q| q.dev != dev);
        self.srqs.retain(|_, s| s.dev != dev);
        before - self.count()
    }

    fn count(&self) -> usize {
        self.pds.len()
            + self.mrs.len()
            + self.mws.len()
            + self.ahs.len()
            + self.cqs.len()
            + self.qps.len()
            + self.srqs.len()
    }

    /// Devices with a QP, SRQ or CQ: the ones the pump visits.
    pub fn active_devs(&self) -> alloc::vec::Vec<u32> {
        let mut devs: alloc::vec::Vec<u32> = self
            .qps
            .values()
            .map(|q| q.dev)
            .chain(self.cqs.values().map(|c| c.dev))
            .chain(self.srqs.values().map(|s| s.dev))
            .collect();
        devs.sort_unstable();
        devs.dedup();
        devs
    }
}

/// A transport error as a ring status (the errno rxe's verbs would give).
pub fn verbs_status(e: &VerbsError) -> Status {
    match e {
        VerbsError::BadHandle(_) => Status::ENOENT,
        VerbsError::Busy(_) => Status::EBUSY,
        VerbsError::TooMany(_) => Status::ENOMEM,
        VerbsError::InvalidArgument(_) | VerbsError::Modify(_) | VerbsError::InvalidState(_) => Status::EINVAL,
        VerbsError::Post(PostError::Full) => Status::ENOMEM,
        VerbsError::Post(_) => Status::EINVAL,
        VerbsError::Address(AhError::Unresolved) => Status::EAGAIN,
        VerbsError::Address(_) => Status::EINVAL,
    }
}

/// The deepest CQ the transport makes (rxe's `max_cqe`); a deeper ring is
/// fine, the transport's CQ is only a staging queue the pump empties.
pub(super) const MAX_TRANSPORT_CQE: usize = (1 << 15) - 1;

pub(super) fn ring_geometry(p: RingPlacement, region: usize) -> Result<RingGeometry, Status> {
    // The dispatcher placed it inside the region; a failure is its bug.
    RingGeometry::new(p, region).map_err(|_| Status::EFAULT)
}

/// `enum ibv_qp_type` (the ring's numbering) as the transport's.
pub(super) fn qp_type_of(t: u8) -> Result<QpType, Status> {
    match t {
        qp_type::RC => Ok(QpType::Rc),
        qp_type::UC => Ok(QpType::Uc),
        qp_type::UD => Ok(QpType::Ud),
        _ => Err(Status::EINVAL),
    }
}

pub(super) fn qp_cap(c: &cmd::QpCap) -> QpCap {
    QpCap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// `enum ibv_qp_state` both ways.
fn state_of(s: u32) -> Option<QpState> {
    Some(match s {
        cmd::qp_state::RESET => QpState::Reset,
        cmd::qp_state::INIT => QpState::Init,
        cmd::qp_state::RTR => QpState::Rtr,
        cmd::qp_state::RTS => QpState::Rts,
        cmd::qp_state::SQD => QpState::Sqd,
        cmd::qp_state::SQE => QpState::Sqe,
        cmd::qp_state::ERR => QpState::Err,
        _ => return None,
    })
}

fn state_num(s: QpState) -> u32 {
    match s {
        QpState::Reset => cmd::qp_state::RESET,
        QpState::Init => cmd::qp_state::INIT,
        QpState::Rtr => cmd::qp_state::RTR,
        QpState::Rts => cmd::qp_state::RTS,
        QpState::Sqd => cmd::qp_state::SQD,
        QpState::Sqe => cmd::qp_state::SQE,
        QpState::Err => cmd::qp_state::ERR,
    }
}

/// `enum ibv_mtu` (1 = 256 .. 5 = 4096).
fn mtu_of(m: u32) -> Option<IbMtu> {
    Some(match m {
        1 => IbMtu::Mtu256,
        2 => IbMtu::Mtu512,
        3 => IbMtu::Mtu1024,
        4 => IbMtu::Mtu2048,
        5 => IbMtu::Mtu4096,
        _ => return None,
    })
}

/// The MAC of a link-local GID (fe80::/64 with an EUI-64 of the MAC), as
/// Linux derives it without asking the network for RoCE v1 GIDs (`rdma_get_ll_mac`).
/// RoCE v2 destinations, link-local ones included, go through neighbour
/// discovery instead (see [`resolve_dmac`]).
pub fn mac_of_link_local(g: &Gid) -> Option<MacAddr> {
    let b = &g.0;
    (b[..8] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0] && b[11] == 0xff && b[12] == 0xfe)
        .then(|| MacAddr([b[8] ^ 0x02, b[9], b[10], b[13], b[14], b[15]]))
}

/// The hop limit a RoCE v2 address vector to a unicast GID gets from Linux's
/// route lookup (`ip4_dst_hoplimit` / `ip6_dst_hoplimit` with the default
/// `ip_default_ttl` and `hop_limit` sysctls), whatever the caller asked:
/// `ib_resolve_unicast_gid_dmac` overwrites the GRH's hop limit with it.
pub const ROUTE_HOP_LIMIT: u8 = 64;

/// The Ethernet group of a multicast GID: `33:33` and the low 32 bits of an
/// IPv6 group (`ipv6_eth_mc_map`), `01:00:5e` and the low 23 bits of an
/// IPv4-mapped one (`ip_eth_mc_map`).
pub fn multicast_mac(g: &Gid) -> Option<MacAddr> {
    let b = &g.0;
    match g.to_ipv4_mapped() {
        Some(v4) if v4.is_multicast() => Some(MacAddr([0x01, 0x00, 0x5e, b[13] & 0x7f, b[14], b[15]])),
        Some(_) => None,
        None => (b[0] == 0xff).then(|| MacAddr([0x33, 0x33, b[12], b[13], b[14], b[15]])),
    }
}

/// The next hop of `dgid` as an IP address: IPv4 for an IPv4-mapped GID,
/// IPv6 for any other.
pub fn gid_ip(dgid: &Gid) -> IpAddr {
    match dgid.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(dgid.as_ipv6()),
    }
}

/// The destination MAC of `dgid` (Linux's `ib_resolve_eth_dmac` for RoCE v2):
/// mapped for a multicast GID, else from the neighbour tables (ARP for an
/// IPv4-mapped GID, neighbour discovery for the rest, link-local included),
/// with the hop limit the route gives (`None`: keep the caller's). `EAGAIN`
/// while the request is out, so the host retries.
pub(super) fn resolve_dmac<A: TransportAccess>(
    access: &mut A,
    dev: u32,
    dgid: &Gid,
    now: Instant,
) -> Result<(MacAddr, Option<u8>), Status> {
    if let Some(mac) = multicast_mac(dgid) {
        return Ok((mac, None));
    }
    match access.resolve(dev, gid_ip(dgid), now) {
        MacResolution::Known(mac) => Ok((mac, Some(ROUTE_HOP_LIMIT))),
        MacResolution::Pending => Err(Status::EAGAIN),
        MacResolution::Failed => Err(Status::EHOSTUNREACH),
    }
}

/// An address vector as the transport takes it, MAC resolved.
pub(super) fn ah_attr<A: TransportAccess>(
    access: &mut A,
    dev: u32,
    a: &cmd::AhAttr,
    now: Instant,
) -> Result<AhAttr, Status> {
    // RoCE addresses by GID: without a GRH there is no destination. The
    // port (which the transport checks too) is refused before the neighbour
    // is looked up, as Linux's core refuses it (`rdma_check_ah_attr`) before
    // resolving the MAC: a vector naming no port asks nothing of the network.
    if a.is_global == 0 || a.port_num != ah::PORT {
        return Err(Status::EINVAL);
    }
    let dgid = Gid(a.dgid);
    let (dmac, route_hop_limit) = resolve_dmac(access, dev, &dgid, now)?;
    Ok(AhAttr {
        dgid,
        sgid_index: a.sgid_index,
        hop_limit: route_hop_limit.unwrap_or(a.hop_limit),
        traffic_class: a.traffic_class,
        flow_label: a.flow_label & 0xF_FFFF,
        dmac,
        port_num: a.port_num,
    })
}

/// Translate a MODIFY_QP request: only the attributes the mask names are
/// read (and range-checked here where the ring's integer is wider than the
/// transport's type); the transport checks the transition and the ranges.
pub(super) fn qp_attr<A: TransportAccess>(
    access: &mut A,
    dev: u32,
    mask: u32,
    a: &cmd::QpAttr,
    alt: &cmd::AltPath,
    now: Instant,
) -> Result<(QpAttr, AttrMask), Status> {
    // Bits the transport does not know (CAP, RATE_LIMIT, ...) are passed on
    // so its modify-QP table refuses them by name.
    let m = AttrMask(mask);
    let mut attr = QpAttr::default();
    if m.has(AttrMask::STATE) {
        attr.qp_state = state_of(a.qp_state).ok_or(Status::EINVAL)?;
    }
    if m.has(AttrMask::CUR_STATE) {
        attr.cur_qp_state = state_of(a.cur_qp_state).ok_or(Status::EINVAL)?;
    }
    if m.has(AttrMask::PATH_MTU) {
        attr.path_mtu = mtu_of(a.path_mtu).ok_or(Status::EINVAL)?;
    }
    if m.has(AttrMask::PKEY_INDEX) {
        attr.pkey_index = a.pkey_index;
    }
    if m.has(AttrMask::ACCESS_FLAGS) {
        // MW_BIND and the MR-only flags mean nothing on a QP; the rest are
        // the transport's bits, which it checks.
        attr.qp_access_flags = AccessFlags(a.qp_access_flags & !cmd::access::MW_BIND);
    }
    if m.has(AttrMask::AV) {
        attr.ah_attr = ah_attr(access, dev, &a.ah_attr, now)?;
    }
    if m.has(AttrMask::ALT_PATH) {
        // uverbs refuses an alternate path whose two port numbers differ
        // before the driver sees it; the vector's own port is checked in
        // ah_attr, the QP's alternate port by the transport (rxe_qp_chk_attr).
        if alt.alt_port_num != alt.alt_ah_attr.port_num {
            return Err(Status::EINVAL);
        }
        attr.alt_ah_attr = ah_attr(access, dev, &alt.alt_ah_attr, now)?;
        attr.alt_pkey_index = alt.alt_pkey_index;
        attr.alt_port_num = alt.alt_port_num;
        attr.alt_timeout = alt.alt_timeout;
    }
    if m.has(AttrMask::PATH_MIG_STATE) {
        attr.path_mig_state = MigState::from_raw(a.path_mig_state).ok_or(Status::EINVAL)?;
    }
    attr.qkey = a.qkey;
    attr.rq_psn = a.rq_psn;
    attr.sq_psn = a.sq_psn;
    attr.dest_qp_num = a.dest_qp_num;
    attr.en_sqd_async_notify = a.en_sqd_async_notify != 0;
    attr.max_rd_atomic = a.max_rd_atomic;
    attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr.min_rnr_timer = a.min_rnr_timer;
    attr.port_num = a.port_num;
    attr.timeout = a.timeout;
    attr.retry_cnt = a.retry_cnt;
    attr.rnr_retry = a.rnr_retry;
    Ok((attr, m))
}

/// An address vector as the ring answers it, naming port `port_num`.
fn ah_out(a: &AhAttr, port_num: u8) -> cmd::AhAttr {
    cmd::AhAttr {
        dgid: a.dgid.0,
        flow_label: a.flow_label,
        sgid_index: a.sgid_index,
        hop_limit: a.hop_limit,
        traffic_class: a.traffic_class,
        is_global: u8::from(a.dgid != Gid([0; 16])),
        dlid: 0,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        port_num,
        reserved: [0; 2],
    }
}

/// A QUERY_QP answer from the transport's attributes: the alternate path
/// as loaded (zeros when none was), as rxe answers what it stored.
pub(super) fn query_resp(attr: &QpAttr, q: &QpObj) -> cmd::QueryQpResp {
    let ah_attr = ah_out(&attr.ah_attr, attr.port_num);
    cmd::QueryQpResp {
        attr: cmd::QpAttr {
            qp_state: state_num(attr.qp_state),
            cur_qp_state: state_num(attr.cur_qp_state),
            path_mtu: u32::from(attr.path_mtu.code()),
            path_mig_state: attr.path_mig_state.raw(),
            qkey: attr.qkey,
            rq_psn: attr.rq_psn,
            sq_psn: attr.sq_psn,
            dest_qp_num: attr.dest_qp_num,
            qp_access_flags: attr.qp_access_flags.0,
            rate_limit: 0,
            cap: q.cap,
            ah_attr,
            pkey_index: attr.pkey_index,
            sq_draining: 0,
            max_rd_atomic: attr.max_rd_atomic,
            max_dest_rd_atomic: attr.max_dest_rd_atomic,
            min_rnr_timer: attr.min_rnr_timer,
            port_num: attr.port_num,
            timeout: attr.timeout,
            retry_cnt: attr.retry_cnt,
            rnr_retry: attr.rnr_retry,
            en_sqd_async_notify: u8::from(attr.en_sqd_async_notify),
            reserved: [0; 9],
        },
        init_cap: q.cap,
        qp_type: q.qp_type,
        sq_sig_all: u8::from(q.sq_sig_all),
        reserved: [0; 2],
        alt: cmd::AltPath {
            alt_ah_attr: ah_out(&attr.alt_ah_attr, attr.alt_ah_attr.port_num),
            alt_pkey_index: attr.alt_pkey_index,
            alt_port_num: attr.alt_port_num,
            alt_timeout: attr.alt_timeout,
            reserved: [0; 4],
        },
    }
}

/// The MR access bits the transport implements; the rest are refused
/// rather than silently ignored (ZERO_BASED would change what an address
/// means, ON_DEMAND has no meaning here), except MW_BIND, which only matters
/// for memory windows and is dropped.
pub(super) fn mr_access(access: u32) -> Result<u32, Status> {
    // No persistent memory here to flush to: refused as rxe refuses it for
    // MRs not backed by pmem.
    if access & (cmd::access::ZERO_BASED | cmd::access::ON_DEMAND | cmd::access::FLUSH_PERSISTENT) != 0 {
        return Err(Status::EOPNOTSUPP);
    }
    Ok(access & AccessFlags::ALL)
}
