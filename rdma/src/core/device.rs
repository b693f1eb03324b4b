//! An RDMA device: the driver behind it (`struct ib_device_ops`), its
//! attributes (`struct ib_device_attr`) and its ports, as registered with the
//! core.
//!
//! Seed §2, `ib_register_device`: a driver advertises which ops it implements
//! ([`OpSet`]); registration refuses a driver missing one of the mandatory ops
//! (`ib_device_check_mandatory`), and a later command that needs an optional
//! op the driver lacks (SRQ, memory windows, address handles, multicast, ...)
//! is refused with "not supported" through [`Device::require`]. Device
//! attributes are queried once at registration (`setup_device`) and cached.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::any::Any;

use super::counters::{Counters, RxeCounter};
use super::error::Error;
use super::gid::Guid;
use super::gid_cache::GidAttr;
use super::netdev::NetdevInfo;
use super::port::{Port, PortAttr, PortImmutable};

/// Which driver a device belongs to (`enum rdma_driver_id`); rxe's check
/// "this netdev already has an rxe" compares it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DriverId(pub &'static str);

impl DriverId {
    pub const RXE: DriverId = DriverId("rxe");
}

/// `enum rdma_node_type`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NodeType {
    /// A channel adapter: every rxe device.
    Ca,
}

impl NodeType {
    /// The name `rdma dev show` prints after `node_type`.
    pub fn name(self) -> &'static str {
        match self {
            NodeType::Ca => "ca",
        }
    }
}

/// `enum ib_atomic_cap`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum AtomicCap {
    None = 0,
    Hca = 1,
    Glob = 2,
}

impl AtomicCap {
    pub fn name(self) -> &'static str {
        match self {
            AtomicCap::None => "ATOMIC_NONE",
            AtomicCap::Hca => "ATOMIC_HCA",
            AtomicCap::Glob => "ATOMIC_GLOB",
        }
    }
}

/// One driver op (a member of `struct ib_device_ops`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Op {
    QueryDevice,
    QueryPort,
    GetPortImmutable,
    AllocPd,
    DeallocPd,
    CreateQp,
    ModifyQp,
    QueryQp,
    DestroyQp,
    PostSend,
    PostRecv,
    CreateCq,
    ResizeCq,
    DestroyCq,
    PollCq,
    ReqNotifyCq,
    GetDmaMr,
    RegUserMr,
    DeregMr,
    CreateSrq,
    ModifySrq,
    QuerySrq,
    DestroySrq,
    PostSrqRecv,
    AllocMw,
    DeallocMw,
    CreateAh,
    DestroyAh,
    AttachMcast,
    DetachMcast,
    AllocUcontext,
    DeallocUcontext,
    Mmap,
}

impl Op {
    pub const ALL: [Op; 33] = [
        Op::QueryDevice,
        Op::QueryPort,
        Op::GetPortImmutable,
        Op::AllocPd,
        Op::DeallocPd,
        Op::CreateQp,
        Op::ModifyQp,
        Op::QueryQp,
        Op::DestroyQp,
        Op::PostSend,
        Op::PostRecv,
        Op::CreateCq,
        Op::ResizeCq,
        Op::DestroyCq,
        Op::PollCq,
        Op::ReqNotifyCq,
        Op::GetDmaMr,
        Op::RegUserMr,
        Op::DeregMr,
        Op::CreateSrq,
        Op::ModifySrq,
        Op::QuerySrq,
        Op::DestroySrq,
        Op::PostSrqRecv,
        Op::AllocMw,
        Op::DeallocMw,
        Op::CreateAh,
        Op::DestroyAh,
        Op::AttachMcast,
        Op::DetachMcast,
        Op::AllocUcontext,
        Op::DeallocUcontext,
        Op::Mmap,
    ];

    /// The op's name in `struct ib_device_ops`.
    pub fn name(self) -> &'static str {
        match self {
            Op::QueryDevice => "query_device",
            Op::QueryPort => "query_port",
            Op::GetPortImmutable => "get_port_immutable",
            Op::AllocPd => "alloc_pd",
            Op::DeallocPd => "dealloc_pd",
            Op::CreateQp => "create_qp",
            Op::ModifyQp => "modify_qp",
            Op::QueryQp => "query_qp",
            Op::DestroyQp => "destroy_qp",
            Op::PostSend => "post_send",
            Op::PostRecv => "post_recv",
            Op::CreateCq => "create_cq",
            Op::ResizeCq => "resize_cq",
            Op::DestroyCq => "destroy_cq",
            Op::PollCq => "poll_cq",
            Op::ReqNotifyCq => "req_notify_cq",
            Op::GetDmaMr => "get_dma_mr",
            Op::RegUserMr => "reg_user_mr",
            Op::DeregMr => "dereg_mr",
            Op::CreateSrq => "create_srq",
            Op::ModifySrq => "modify_srq",
            Op::QuerySrq => "query_srq",
            Op::DestroySrq => "destroy_srq",
            Op::PostSrqRecv => "post_srq_recv",
            Op::AllocMw => "alloc_mw",
            Op::DeallocMw => "dealloc_mw",
            Op::CreateAh => "create_ah",
            Op::DestroyAh => "destroy_ah",
            Op::AttachMcast => "attach_mcast",
            Op::DetachMcast => "detach_mcast",
            Op::AllocUcontext => "alloc_ucontext",
            Op::DeallocUcontext => "dealloc_ucontext",
            Op::Mmap => "mmap",
        }
    }

    fn bit(self) -> u64 {
        1u64 << (self as u8)
    }
}

/// The set of ops a driver implements.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct OpSet(u64);

impl OpSet {
    pub const EMPTY: OpSet = OpSet(0);

    /// The ops every device must have (`ib_device_check_mandatory`).
    pub const MANDATORY: [Op; 17] = [
        Op::QueryDevice,
        Op::QueryPort,
        Op::GetPortImmutable,
        Op::AllocPd,
        Op::DeallocPd,
        Op::CreateQp,
        Op::ModifyQp,
        Op::DestroyQp,
        Op::PostSend,
        Op::PostRecv,
        Op::CreateCq,
        Op::DestroyCq,
        Op::PollCq,
        Op::ReqNotifyCq,
        Op::GetDmaMr,
        Op::RegUserMr,
        Op::DeregMr,
    ];

    pub fn of(ops: &[Op]) -> OpSet {
        OpSet(ops.iter().fold(0, |acc, op| acc | op.bit()))
    }

    /// Every op there is.
    pub fn all() -> OpSet {
        OpSet::of(&Op::ALL)
    }

    /// Just the mandatory ops.
    pub fn mandatory() -> OpSet {
        OpSet::of(&OpSet::MANDATORY)
    }

    pub fn with(self, op: Op) -> OpSet {
        OpSet(self.0 | op.bit())
    }

    pub fn without(self, op: Op) -> OpSet {
        OpSet(self.0 & !op.bit())
    }

    pub fn contains(self, op: Op) -> bool {
        self.0 & op.bit() != 0
    }

    /// The first mandatory op missing, if any.
    pub fn first_missing_mandatory(self) -> Option<Op> {
        OpSet::MANDATORY.into_iter().find(|op| !self.contains(*op))
    }
}

/// Device capability flags (`enum ib_device_cap_flags`, same bits as
/// libibverbs' `IBV_DEVICE_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct DeviceCapFlags(pub u64);

impl DeviceCapFlags {
    // Their names, as `ibv_devinfo -v` prints them, live with that output
    // (`verbs_ring::show::devinfo`).
    pub const BAD_PKEY_CNTR: u64 = 1 << 1;
    pub const BAD_QKEY_CNTR: u64 = 1 << 2;
    pub const AUTO_PATH_MIG: u64 = 1 << 4;
    pub const CHANGE_PHY_PORT: u64 = 1 << 5;
    pub const UD_AV_PORT_ENFORCE: u64 = 1 << 6;
    pub const PORT_ACTIVE_EVENT: u64 = 1 << 10;
    pub const SYS_IMAGE_GUID: u64 = 1 << 11;
    pub const RC_RNR_NAK_GEN: u64 = 1 << 12;
    pub const SRQ_RESIZE: u64 = 1 << 13;
    pub const MEM_WINDOW: u64 = 1 << 17;
    pub const MEM_MGT_EXTENSIONS: u64 = 1 << 21;
    pub const MEM_WINDOW_TYPE_2B: u64 = 1 << 24;
    /// IBA 1.5 FLUSH with global visibility placement.
    pub const FLUSH_GLOBAL: u64 = 1 << 38;
    /// IBA 1.5 FLUSH with persistence placement (not offered: no pmem).
    pub const FLUSH_PERSISTENT: u64 = 1 << 39;
    /// IBA 1.5 ATOMIC WRITE.
    pub const ATOMIC_WRITE: u64 = 1 << 40;
}

/// Device attributes (`struct ib_device_attr`), queried once at registration.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DeviceAttr {
    /// Firmware version as a number; verbs print it `major.minor.sub`
    /// from bits 47..32, 31..16 and 15..0.
    pub fw_ver: u64,
    pub node_guid: Guid,
    pub sys_image_guid: Guid,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: DeviceCapFlags,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_ee_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_ee_init_rd_atom: u32,
    pub atomic_cap: AtomicCap,
    pub max_ee: u32,
    pub max_rdd: u32,
    pub max_mw: u32,
    pub max_raw_ipv6_qp: u32,
    pub max_raw_ethy_qp: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_fast_reg_page_list_len: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    /// `IBK_ALLOW_USER_UNREG`: `rdma link delete` may remove the device.
    pub allow_user_unreg: bool,
}

/// The driver behind a device: what Linux calls `struct ib_device_ops`,
/// reduced to what the control path needs. A test fake and the rxe transport
/// both implement it.
pub trait Driver {
    /// Which driver this is; one rxe per netdev is enforced with it.
    fn driver_id(&self) -> DriverId;

    /// The ops this driver implements; registration checks the mandatory
    /// ones and commands check the optional ones.
    fn ops(&self) -> OpSet;

    /// Number of physical ports (rxe: 1). Ports are numbered from 1.
    fn phys_port_cnt(&self) -> u32;

    fn node_type(&self) -> NodeType {
        NodeType::Ca
    }

    /// `query_device`: asked once, at registration.
    fn query_device(&self) -> Result<DeviceAttr, Error>;

    /// `query_port`: the port's attributes. The core owns the live state
    /// (state, physical state, active MTU) and overrides those fields; it
    /// asks again for the violation counters on every query.
    fn query_port(&self, port: u32) -> Result<PortAttr, Error>;

    /// `get_port_immutable`: asked once per port, at registration.
    fn get_port_immutable(&self, port: u32) -> Result<PortImmutable, Error>;

    /// `get_dev_fw_str`: the firmware string `rdma dev show` prints after
    /// `fw`; empty means none is printed.
    fn dev_fw_str(&self) -> String {
        String::new()
    }

    /// `enable_driver`: the device is live, clients are about to be added.
    fn enable_driver(&mut self) -> Result<(), Error> {
        Ok(())
    }

    /// A port's live state or active MTU changed (the transport needs the
    /// path MTU and must stop sending on a down port).
    fn port_changed(&mut self, _port: u32, _attr: &PortAttr) {}

    /// `add_gid`: the GID cache wrote `attr` into slot `index` of `port`'s
    /// table (a new entry, or a changed one in that slot).
    fn add_gid(&mut self, _port: u32, _index: usize, _attr: &GidAttr) {}

    /// `del_gid`: slot `index` of `port`'s table was emptied.
    fn del_gid(&mut self, _port: u32, _index: usize) {}

    /// The device's own netdev changed (its MAC, MTU or state): rxe builds
    /// its frames from the netdev's MAC.
    fn netdev_changed(&mut self, _ndev: &NetdevInfo) {}

    /// `get_hw_stats`: the driver's counters as they are now. The core
    /// counts `link_downed` itself (it runs the port state machine) and
    /// overrides that one.
    fn hw_stats(&self) -> Counters {
        Counters::new()
    }

    /// Downcast hooks for the code that created this driver (the verbs
    /// server reaches rxe's transport through them).
    fn as_any(&self) -> Option<&dyn Any> {
        None
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        None
    }
}

/// A registered device.
pub struct Device {
    pub(crate) index: u32,
    pub(crate) name: String,
    pub(crate) driver: Box<dyn Driver>,
    pub(crate) driver_id: DriverId,
    pub(crate) node_type: NodeType,
    pub(crate) ops: OpSet,
    pub(crate) attr: DeviceAttr,
    pub(crate) fw_str: String,
    pub(crate) ports: Vec<Port>,
    pub(crate) netdev: NetdevInfo,
    /// Port transitions to down (`link_downed`), counted by the core.
    pub(crate) link_downed: u64,
    pub(crate) created_by_link: bool,
}

impl Device {
    /// The device index (stable for the device's life, not reused at once).
    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn driver_id(&self) -> DriverId {
        self.driver_id
    }

    pub fn node_type(&self) -> NodeType {
        self.node_type
    }

    pub fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    /// The firmware string for `rdma dev show` (may be empty).
    pub fn fw_str(&self) -> &str {
        &self.fw_str
    }

    pub fn ops(&self) -> OpSet {
        self.ops
    }

    /// Does the driver implement `op`?
    pub fn supports(&self, op: Op) -> bool {
        self.ops.contains(op)
    }

    /// Refuse a command whose op the driver lacks ("not supported").
    pub fn require(&self, op: Op) -> Result<(), Error> {
        if self.supports(op) { Ok(()) } else { Err(Error::NotSupported(op.name())) }
    }

    /// Number of ports.
    pub fn phys_port_cnt(&self) -> u32 {
        u32::try_from(self.ports.len()).unwrap_or(u32::MAX)
    }

    /// Port `num`, counting from 1.
    pub fn port(&self, num: u32) -> Option<&Port> {
        let i = usize::try_from(num).ok()?.checked_sub(1)?;
        self.ports.get(i)
    }

    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// `ib_query_port`: port `num` as the core keeps it (state, physical
    /// state, active MTU, tables' lengths), with the violation counters the
    /// driver keeps (`bad_pkey_cntr`, `qkey_viol_cntr`: rxe counts the
    /// packets it drops for a bad P_Key or Q_Key in its port attributes),
    /// as [`Device::counters`] lays the core's `link_downed` over the
    /// driver's counters.
    pub fn query_port(&self, num: u32) -> Option<PortAttr> {
        let mut attr = *self.port(num)?.attr();
        if let Ok(d) = self.driver.query_port(num) {
            attr.bad_pkey_cntr = d.bad_pkey_cntr;
            attr.qkey_viol_cntr = d.qkey_viol_cntr;
        }
        Some(attr)
    }

    /// The netdev the device's ports are bound to, as last seen.
    pub fn netdev(&self) -> &NetdevInfo {
        &self.netdev
    }

    /// The device's counters: the driver's (`get_hw_stats`) with the
    /// core's own `link_downed`.
    pub fn counters(&self) -> Counters {
        let mut c = self.driver.hw_stats();
        c.set(RxeCounter::LinkDowned, self.link_downed);
        c
    }

    /// Was the device created with `rdma link add` (and so may be deleted)?
    pub fn created_by_link(&self) -> bool {
        self.created_by_link
    }

    pub fn driver(&self) -> &dyn Driver {
        self.driver.as_ref()
    }

    pub fn driver_mut(&mut self) -> &mut dyn Driver {
        self.driver.as_mut()
    }
}

impl core::fmt::Debug for Device {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Device")
            .field("index", &self.index)
            .field("name", &self.name)
            .field("driver_id", &self.driver_id)
            .field("netdev", &self.netdev.name)
            .field("ports", &self.ports.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::rxe_params;

    #[test]
    fn mandatory_ops_are_checked_one_by_one() {
        assert_eq!(OpSet::all().first_missing_mandatory(), None);
        assert_eq!(OpSet::mandatory().first_missing_mandatory(), None);
        assert_eq!(OpSet::all().without(Op::PollCq).first_missing_mandatory(), Some(Op::PollCq));
        assert_eq!(OpSet::EMPTY.first_missing_mandatory(), Some(Op::QueryDevice));
        assert!(!OpSet::mandatory().contains(Op::CreateSrq));
    }

    #[test]
    fn op_bits_are_distinct() {
        let mut seen = 0u64;
        for op in Op::ALL {
            assert_eq!(seen & op.bit(), 0, "{}", op.name());
            seen |= op.bit();
        }
    }

    /// The low word is Linux 6.1's; the high word has the IBA 1.5 bits Linux
    /// 6.2 added, but for FLUSH_PERSISTENT (no persistent memory here).
    #[test]
    fn rxe_cap_flags_match_linux_6_1_plus_iba_1_5() {
        let attr = rxe_params::device_attr(crate::core::netdev::MacAddr::default());
        assert_eq!(attr.device_cap_flags.0 as u32, 0x0122_3c76);
        assert_eq!(attr.device_cap_flags.0 >> 32, (DeviceCapFlags::FLUSH_GLOBAL | DeviceCapFlags::ATOMIC_WRITE) >> 32);
    }
}
