//! The command table (seed §5, uverbs' method table): one row per command
//! with its request and response sizes and the capability it needs.
//!
//! The dispatcher looks a command up here and checks, before any handler
//! runs: the number is known (else `ENOSYS`), the request length is the
//! request size (longer is accepted only when the extra bytes are zero, the
//! way uverbs accepts a newer, larger struct; shorter only for a request
//! that grew in a later ABI minor, down to its older size, the handler
//! reading the missing tail as zeros; else `EMSGSIZE`), the response
//! fits the response slot (`EMSGSIZE`), and the provider has the capability
//! (`EOPNOTSUPP`).

use crate::cm::*;
use crate::cmd::*;
use crate::wire::Wire;

/// A capability a command needs: the driver op of `struct ib_device_ops`
/// (names as in `rdma::core::Op::name`) or a core service.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Cap {
    QueryDevice,
    QueryPort,
    QueryGid,
    QueryPkey,
    AllocPd,
    DeallocPd,
    RegUserMr,
    DeregMr,
    CreateCq,
    DestroyCq,
    CreateQp,
    ModifyQp,
    QueryQp,
    DestroyQp,
    CreateSrq,
    ModifySrq,
    DestroySrq,
    CreateAh,
    DestroyAh,
    /// Hardware counters (`get_hw_stats`).
    HwStats,
    /// Link ops (`rdma link add/delete`).
    LinkOps,
    /// Async events.
    AsyncEvents,
    /// The RDMA connection manager (Linux's `rdma_cm` client, ucma).
    Cm,
    /// Fast-register MRs (`alloc_mr`, `map_mr_sg`).
    AllocMr,
    /// Memory windows (`alloc_mw`, `dealloc_mw`).
    AllocMw,
    /// UD multicast (`attach_mcast`, `detach_mcast`).
    Mcast,
}

impl Cap {
    pub const ALL: [Cap; 26] = [
        Cap::QueryDevice,
        Cap::QueryPort,
        Cap::QueryGid,
        Cap::QueryPkey,
        Cap::AllocPd,
        Cap::DeallocPd,
        Cap::RegUserMr,
        Cap::DeregMr,
        Cap::CreateCq,
        Cap::DestroyCq,
        Cap::CreateQp,
        Cap::ModifyQp,
        Cap::QueryQp,
        Cap::DestroyQp,
        Cap::CreateSrq,
        Cap::ModifySrq,
        Cap::DestroySrq,
        Cap::CreateAh,
        Cap::DestroyAh,
        Cap::HwStats,
        Cap::LinkOps,
        Cap::AsyncEvents,
        Cap::Cm,
        Cap::AllocMr,
        Cap::AllocMw,
        Cap::Mcast,
    ];

    /// The op's name (`struct ib_device_ops` member where there is one).
    pub fn name(self) -> &'static str {
        match self {
            Cap::QueryDevice => "query_device",
            Cap::QueryPort => "query_port",
            Cap::QueryGid => "query_gid",
            Cap::QueryPkey => "query_pkey",
            Cap::AllocPd => "alloc_pd",
            Cap::DeallocPd => "dealloc_pd",
            Cap::RegUserMr => "reg_user_mr",
            Cap::DeregMr => "dereg_mr",
            Cap::CreateCq => "create_cq",
            Cap::DestroyCq => "destroy_cq",
            Cap::CreateQp => "create_qp",
            Cap::ModifyQp => "modify_qp",
            Cap::QueryQp => "query_qp",
            Cap::DestroyQp => "destroy_qp",
            Cap::CreateSrq => "create_srq",
            Cap::ModifySrq => "modify_srq",
            Cap::DestroySrq => "destroy_srq",
            Cap::CreateAh => "create_ah",
            Cap::DestroyAh => "destroy_ah",
            Cap::HwStats => "get_hw_stats",
            Cap::LinkOps => "link_ops",
            Cap::AsyncEvents => "async_events",
            Cap::Cm => "rdma_cm",
            Cap::AllocMr => "alloc_mr",
            Cap::AllocMw => "alloc_mw",
            Cap::Mcast => "attach_mcast",
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u8)
    }
}

/// The capabilities a provider has.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CapSet(u32);

impl CapSet {
    pub const EMPTY: CapSet = CapSet(0);

    pub fn of(caps: &[Cap]) -> CapSet {
        CapSet(caps.iter().fold(0, |a, c| a | c.bit()))
    }

    pub fn all() -> CapSet {
        CapSet::of(&Cap::ALL)
    }

    pub fn with(self, c: Cap) -> CapSet {
        CapSet(self.0 | c.bit())
    }

    pub fn without(self, c: Cap) -> CapSet {
        CapSet(self.0 & !c.bit())
    }

    pub fn contains(self, c: Cap) -> bool {
        self.0 & c.bit() != 0
    }
}

/// One row of the command table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CmdSpec {
    /// Command number ([`nr`]).
    pub nr: u16,
    /// Name for logs and tools (`"CREATE_QP"`).
    pub name: &'static str,
    /// Size of the request structure.
    pub req_size: usize,
    /// The shortest request taken: `req_size`, or the size an older ABI
    /// minor had for a request that grew since.
    pub req_min: usize,
    /// Size of the response structure (on success).
    pub resp_size: usize,
    /// The capability the provider must have, if any.
    pub cap: Option<Cap>,
}

const fn row(nr: u16, name: &'static str, req_size: usize, resp_size: usize, cap: Option<Cap>) -> CmdSpec {
    CmdSpec { nr, name, req_size, req_min: req_size, resp_size, cap }
}

/// A row whose request grew from `req_min` bytes in a later ABI minor.
const fn grown(nr: u16, name: &'static str, req_min: usize, req_size: usize, resp_size: usize, cap: Cap) -> CmdSpec {
    CmdSpec { nr, name, req_size, req_min, resp_size, cap: Some(cap) }
}

/// The largest request that grew: the dispatcher zero-extends a shorter
/// one into a buffer of this size.
pub const GROWN_REQ_MAX: usize = ModifyQpReq::SIZE;
const _: () = {
    let mut i = 0;
    while i < TABLE.len() {
        assert!(TABLE[i].req_min == TABLE[i].req_size || TABLE[i].req_size <= GROWN_REQ_MAX);
        i += 1;
    }
};

/// Every command, sorted by number.
pub const TABLE: [CmdSpec; 48] = [
    row(nr::QUERY_DEVICE, "QUERY_DEVICE", DevReq::SIZE, DeviceAttr::SIZE, Some(Cap::QueryDevice)),
    row(nr::QUERY_PORT, "QUERY_PORT", PortReq::SIZE, PortAttr::SIZE, Some(Cap::QueryPort)),
    row(nr::ALLOC_PD, "ALLOC_PD", DevReq::SIZE, HandleResp::SIZE, Some(Cap::AllocPd)),
    row(nr::DEALLOC_PD, "DEALLOC_PD", HandleReq::SIZE, Empty::SIZE, Some(Cap::DeallocPd)),
    row(nr::CREATE_AH, "CREATE_AH", CreateAhReq::SIZE, HandleResp::SIZE, Some(Cap::CreateAh)),
    row(nr::DESTROY_AH, "DESTROY_AH", HandleReq::SIZE, Empty::SIZE, Some(Cap::DestroyAh)),
    row(nr::REG_MR, "REG_MR", RegMrReq::SIZE, RegMrResp::SIZE, Some(Cap::RegUserMr)),
    row(nr::DEREG_MR, "DEREG_MR", HandleReq::SIZE, Empty::SIZE, Some(Cap::DeregMr)),
    row(nr::ALLOC_MW, "ALLOC_MW", AllocMwReq::SIZE, AllocMwResp::SIZE, Some(Cap::AllocMw)),
    row(nr::DEALLOC_MW, "DEALLOC_MW", HandleReq::SIZE, Empty::SIZE, Some(Cap::AllocMw)),
    row(nr::CREATE_CQ, "CREATE_CQ", CreateCqReq::SIZE, CreateCqResp::SIZE, Some(Cap::CreateCq)),
    row(nr::DESTROY_CQ, "DESTROY_CQ", HandleReq::SIZE, DestroyResp::SIZE, Some(Cap::DestroyCq)),
    row(nr::ATTACH_MCAST, "ATTACH_MCAST", McastReq::SIZE, Empty::SIZE, Some(Cap::Mcast)),
    row(nr::DETACH_MCAST, "DETACH_MCAST", McastReq::SIZE, Empty::SIZE, Some(Cap::Mcast)),
    row(nr::CREATE_QP, "CREATE_QP", CreateQpReq::SIZE, CreateQpResp::SIZE, Some(Cap::CreateQp)),
    row(nr::QUERY_QP, "QUERY_QP", QueryQpReq::SIZE, QueryQpResp::SIZE, Some(Cap::QueryQp)),
    grown(nr::MODIFY_QP, "MODIFY_QP", MODIFY_QP_REQ_1_5, ModifyQpReq::SIZE, Empty::SIZE, Cap::ModifyQp),
    row(nr::DESTROY_QP, "DESTROY_QP", HandleReq::SIZE, DestroyResp::SIZE, Some(Cap::DestroyQp)),
    row(nr::CREATE_SRQ, "CREATE_SRQ", CreateSrqReq::SIZE, CreateSrqResp::SIZE, Some(Cap::CreateSrq)),
    row(nr::MODIFY_SRQ, "MODIFY_SRQ", ModifySrqReq::SIZE, Empty::SIZE, Some(Cap::ModifySrq)),
    row(nr::DESTROY_SRQ, "DESTROY_SRQ", HandleReq::SIZE, DestroyResp::SIZE, Some(Cap::DestroySrq)),
    row(nr::NOP, "NOP", Empty::SIZE, Empty::SIZE, None),
    row(nr::QUERY_GID, "QUERY_GID", GidReq::SIZE, GidEntry::SIZE, Some(Cap::QueryGid)),
    row(nr::QUERY_GID_TABLE, "QUERY_GID_TABLE", GidReq::SIZE, GidTablePage::SIZE, Some(Cap::QueryGid)),
    row(nr::QUERY_PKEY, "QUERY_PKEY", GidReq::SIZE, PkeyResp::SIZE, Some(Cap::QueryPkey)),
    row(nr::GET_ASYNC_EVENT, "GET_ASYNC_EVENT", Empty::SIZE, AsyncEvent::SIZE, Some(Cap::AsyncEvents)),
    row(nr::QUERY_COUNTERS, "QUERY_COUNTERS", PortReq::SIZE, CountersResp::SIZE, Some(Cap::HwStats)),
    row(nr::QUERY_RESOURCES, "QUERY_RESOURCES", DevReq::SIZE, ResourceCounts::SIZE, None),
    row(nr::ALLOC_MR, "ALLOC_MR", AllocMrReq::SIZE, RegMrResp::SIZE, Some(Cap::AllocMr)),
    row(nr::MAP_MR_SG, "MAP_MR_SG", MapMrSgReq::SIZE, Empty::SIZE, Some(Cap::AllocMr)),
    row(nr::RES_ENTRY, "RES_ENTRY", ResEntryReq::SIZE, ResEntry::SIZE, None),
    row(nr::RESIZE_SRQ, "RESIZE_SRQ", ResizeSrqReq::SIZE, ResizeSrqResp::SIZE, Some(Cap::ModifySrq)),
    row(nr::LINK_ADD, "LINK_ADD", LinkAddReq::SIZE, HandleResp::SIZE, Some(Cap::LinkOps)),
    row(nr::LINK_DEL, "LINK_DEL", DevReq::SIZE, Empty::SIZE, Some(Cap::LinkOps)),
    row(nr::LINK_SHOW, "LINK_SHOW", LinkShowReq::SIZE, LinkInfo::SIZE, Some(Cap::LinkOps)),
    row(nr::CM_CREATE_ID, "CM_CREATE_ID", CmCreateIdReq::SIZE, HandleResp::SIZE, Some(Cap::Cm)),
    row(nr::CM_DESTROY_ID, "CM_DESTROY_ID", HandleReq::SIZE, DestroyResp::SIZE, Some(Cap::Cm)),
    row(nr::CM_BIND, "CM_BIND", CmBindReq::SIZE, Empty::SIZE, Some(Cap::Cm)),
    row(nr::CM_RESOLVE_ADDR, "CM_RESOLVE_ADDR", CmResolveAddrReq::SIZE, Empty::SIZE, Some(Cap::Cm)),
    row(nr::CM_RESOLVE_ROUTE, "CM_RESOLVE_ROUTE", CmResolveRouteReq::SIZE, Empty::SIZE, Some(Cap::Cm)),
    row(nr::CM_QUERY_ROUTE, "CM_QUERY_ROUTE", HandleReq::SIZE, CmRoute::SIZE, Some(Cap::Cm)),
    row(nr::CM_CONNECT, "CM_CONNECT", CmConnectReq::SIZE, Empty::SIZE, Some(Cap::Cm)),
    row(nr::CM_LISTEN, "CM_LISTEN", CmListenReq::SIZE, Empty::SIZE, Some(Cap::Cm)),
    row(nr::CM_ACCEPT, "CM_ACCEPT", CmAcceptReq::SIZE, Empty::SIZE, Some(Cap::Cm)),
    row(nr::CM_REJECT, "CM_REJECT", CmRejectReq::SIZE, Empty::SIZE, Some(Cap::Cm)),
    row(nr::CM_DISCONNECT, "CM_DISCONNECT", HandleReq::SIZE, Empty::SIZE, Some(Cap::Cm)),
    row(nr::CM_INIT_QP_ATTR, "CM_INIT_QP_ATTR", CmInitQpAttrReq::SIZE, CmInitQpAttrResp::SIZE, Some(Cap::Cm)),
    row(nr::CM_GET_EVENT, "CM_GET_EVENT", Empty::SIZE, CmEvent::SIZE, Some(Cap::Cm)),
];

/// The row for command `nr`.
pub fn lookup(nr: u16) -> Option<&'static CmdSpec> {
    TABLE.binary_search_by_key(&nr, |r| r.nr).ok().map(|i| &TABLE[i])
}

/// The checks that run before a handler: `Ok(spec)` or the status to answer.
/// `req` is the request payload (after the header); `resp_room` the bytes
/// available for the response payload.
pub fn check(nr: u16, req: &[u8], resp_room: usize, caps: CapSet) -> Result<&'static CmdSpec, Status> {
    let spec = lookup(nr).ok_or(Status::ENOSYS)?;
    if req.len() < spec.req_min || req.get(spec.req_size..).is_some_and(|extra| extra.iter().any(|&b| b != 0)) {
        return Err(Status::EMSGSIZE);
    }
    if spec.resp_size > resp_room {
        return Err(Status::EMSGSIZE);
    }
    if let Some(cap) = spec.cap
        && !caps.contains(cap)
    {
        return Err(Status::EOPNOTSUPP);
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(TABLE.windows(2).all(|w| w[0].nr < w[1].nr));
        assert_eq!(lookup(nr::CREATE_QP).map(|r| r.name), Some("CREATE_QP"));
        assert_eq!(lookup(0), None);
        assert!(Cap::ALL.iter().enumerate().all(|(i, c)| *c as usize == i));
    }

    #[test]
    fn checks_run_in_order() {
        let all = CapSet::all();
        assert_eq!(check(0, &[], 240, all), Err(Status::ENOSYS));
        assert_eq!(check(nr::ALLOC_PD, &[0; 4], 240, all), Err(Status::EMSGSIZE));
        assert!(check(nr::ALLOC_PD, &[0; 8], 240, all).is_ok());
        // Longer is accepted when the extra bytes are zero (a newer struct).
        assert!(check(nr::ALLOC_PD, &[0; 12], 240, all).is_ok());
        assert_eq!(check(nr::ALLOC_PD, &[0, 0, 0, 0, 0, 0, 0, 0, 1], 240, all), Err(Status::EMSGSIZE));
        assert_eq!(check(nr::QUERY_DEVICE, &[0; 8], 100, all), Err(Status::EMSGSIZE));
        assert_eq!(check(nr::CREATE_SRQ, &[0; 24], 240, all.without(Cap::CreateSrq)), Err(Status::EOPNOTSUPP));
        // MODIFY_QP grew in 1.6: its 1.5 size is taken, nothing shorter.
        assert!(check(nr::MODIFY_QP, &[0; MODIFY_QP_REQ_1_5], 240, all).is_ok());
        assert_eq!(check(nr::MODIFY_QP, &[0; MODIFY_QP_REQ_1_5 - 1], 240, all), Err(Status::EMSGSIZE));
        assert!(check(nr::MODIFY_QP, &[0; ModifyQpReq::SIZE], 240, all).is_ok());
        assert!(check(nr::NOP, &[], 0, CapSet::EMPTY).is_ok());
    }
}
