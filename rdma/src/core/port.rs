//! Port attributes and the port state machine of a RoCE port.
//!
//! Seed §1–2: a port has immutable data read once at registration
//! (`get_port_immutable`: core capability flags, GID and pkey table lengths,
//! max MAD size) and a state that follows its netdev the way Linux rxe does
//! (`rxe_port_up`, `rxe_port_down`, `rxe_set_port_state`, `rxe_set_mtu`,
//! `rxe_query_port`):
//! - `NETDEV_UP` → ACTIVE / LINK_UP, event PORT_ACTIVE;
//! - `NETDEV_DOWN` → DOWN / DISABLED, event PORT_ERR, `link_downed` counted;
//! - carrier lost on an administratively up netdev → DOWN / POLLING;
//! - active MTU = the largest IB MTU not above the netdev MTU minus the 80
//!   bytes rxe reserves for headers, 256 at least and capped at the port's
//!   max MTU (4096): 1500 gives 1024, 9000 gives 4096.
//!
//! The pkey table of a RoCE port has one entry, the default pkey 0xFFFF.

use alloc::vec;
use alloc::vec::Vec;

use super::error::Error;
use super::gid::GidType;
use super::gid_cache::GidTable;
use super::netdev::NetdevInfo;

/// The default (full-membership) partition key, the only one RoCE uses.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Bytes rxe keeps free below the netdev MTU for Ethernet, IP, UDP and
/// transport headers (`RXE_MAX_HDR_LENGTH`).
pub const RXE_MAX_HDR_LENGTH: u32 = 80;

/// The size of a MAD including headers (`IB_MGMT_MAD_SIZE`).
pub const IB_MGMT_MAD_SIZE: u32 = 256;

/// An InfiniBand path MTU (`enum ib_mtu`); the discriminant is the IBA code.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(u8)]
pub enum IbMtu {
    Mtu256 = 1,
    Mtu512 = 2,
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

impl IbMtu {
    pub fn bytes(self) -> u32 {
        match self {
            IbMtu::Mtu256 => 256,
            IbMtu::Mtu512 => 512,
            IbMtu::Mtu1024 => 1024,
            IbMtu::Mtu2048 => 2048,
            IbMtu::Mtu4096 => 4096,
        }
    }

    /// The IBA code (1..=5) as tools print it in parentheses.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The MTU of an IBA code (1..=5), as messages carry it.
    pub fn from_code(code: u8) -> Option<IbMtu> {
        Some(match code {
            1 => IbMtu::Mtu256,
            2 => IbMtu::Mtu512,
            3 => IbMtu::Mtu1024,
            4 => IbMtu::Mtu2048,
            5 => IbMtu::Mtu4096,
            _ => return None,
        })
    }

    /// The largest IB MTU that fits in `bytes` (`rxe_mtu_int_to_enum`);
    /// `None` below 256.
    pub fn fitting(bytes: u32) -> Option<IbMtu> {
        match bytes {
            0..=255 => None,
            256..=511 => Some(IbMtu::Mtu256),
            512..=1023 => Some(IbMtu::Mtu512),
            1024..=2047 => Some(IbMtu::Mtu1024),
            2048..=4095 => Some(IbMtu::Mtu2048),
            _ => Some(IbMtu::Mtu4096),
        }
    }
}

/// The IB MTU for a netdev MTU (`eth_mtu_int_to_enum`): headers first.
pub fn eth_mtu_to_ib_mtu(netdev_mtu: u32) -> Option<IbMtu> {
    IbMtu::fitting(netdev_mtu.saturating_sub(RXE_MAX_HDR_LENGTH))
}

/// The active MTU rxe sets for a netdev MTU (`rxe_set_mtu`): a link too
/// small for any IB MTU still gets 256, and nothing exceeds `max`.
pub fn active_mtu_for(netdev_mtu: u32, max: IbMtu) -> IbMtu {
    match eth_mtu_to_ib_mtu(netdev_mtu) {
        Some(mtu) => mtu.min(max),
        None => IbMtu::Mtu256,
    }
}

/// Logical port state (`enum ib_port_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum PortState {
    Nop = 0,
    Down = 1,
    Init = 2,
    Armed = 3,
    Active = 4,
    ActiveDefer = 5,
}

impl PortState {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Physical port state (`enum ib_port_phys_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum PhysState {
    Sleep = 1,
    Polling = 2,
    Disabled = 3,
    PortConfigurationTraining = 4,
    LinkUp = 5,
    LinkErrorRecovery = 6,
    PhyTest = 7,
}

impl PhysState {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// The link layer under a port.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
}

/// Core capability flags of a port (`RDMA_CORE_CAP_*`, `RDMA_CORE_PORT_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CoreCapFlags(pub u32);

impl CoreCapFlags {
    pub const IB_MAD: u32 = 0x0000_0001;
    pub const IB_SMI: u32 = 0x0000_0002;
    pub const IB_CM: u32 = 0x0000_0004;
    pub const IW_CM: u32 = 0x0000_0008;
    pub const IB_SA: u32 = 0x0000_0010;
    pub const OPA_MAD: u32 = 0x0000_0020;
    pub const AF_IB: u32 = 0x0000_1000;
    pub const ETH_AH: u32 = 0x0000_2000;
    pub const PROT_IB: u32 = 0x0010_0000;
    pub const PROT_ROCE: u32 = 0x0020_0000;
    pub const PROT_IWARP: u32 = 0x0040_0000;
    pub const PROT_ROCE_UDP_ENCAP: u32 = 0x0080_0000;
    /// Every protocol bit; a port speaks exactly one protocol family.
    const PROTOCOLS: u32 = Self::PROT_IB | Self::PROT_ROCE | Self::PROT_IWARP | Self::PROT_ROCE_UDP_ENCAP;
    /// What rxe reports (`RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP`): RoCE v2 only.
    pub const ROCE_UDP_ENCAP_PORT: CoreCapFlags =
        CoreCapFlags(Self::PROT_ROCE_UDP_ENCAP | Self::IB_MAD | Self::IB_CM | Self::AF_IB | Self::ETH_AH);

    pub fn has(self, bit: u32) -> bool {
        self.0 & bit == bit
    }

    /// A RoCE port (v1, v2 or both)?
    pub fn is_roce(self) -> bool {
        self.0 & (Self::PROT_ROCE | Self::PROT_ROCE_UDP_ENCAP) != 0
    }

    /// The GID types the port supports, in `enum ib_gid_type` order; one
    /// default GID is reserved per type (`roce_gid_type_mask_support`).
    pub fn gid_types(self) -> Vec<GidType> {
        let mut types = Vec::new();
        if self.has(Self::PROT_ROCE) {
            types.push(GidType::RoceV1);
        }
        if self.has(Self::PROT_ROCE_UDP_ENCAP) {
            types.push(GidType::RoceV2);
        }
        types
    }
}

/// Per-port data fixed for the life of the device (`struct ib_port_immutable`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PortImmutable {
    pub core_cap_flags: CoreCapFlags,
    pub gid_tbl_len: u32,
    pub pkey_tbl_len: u16,
    pub max_mad_size: u32,
}

/// The largest GID table we accept from a driver; bounds memory per port.
pub const MAX_GID_TBL_LEN: u32 = 4096;

impl PortImmutable {
    /// `verify_immutable` plus the sanity checks `setup_port_data` relies on.
    /// `attr` is the driver's `query_port` answer: both must agree.
    pub fn verify(&self, attr: &PortAttr) -> Result<(), &'static str> {
        let caps = self.core_cap_flags;
        if caps.0 & CoreCapFlags::PROTOCOLS == 0 {
            return Err("no protocol in core capability flags");
        }
        if caps.has(CoreCapFlags::PROT_IB) && caps.is_roce() {
            return Err("port claims both InfiniBand and RoCE");
        }
        if !caps.is_roce() {
            return Err("only RoCE ports are supported");
        }
        if caps.has(CoreCapFlags::IB_MAD) && self.max_mad_size == 0 {
            return Err("MAD capable port with max MAD size 0");
        }
        let defaults = u32::try_from(caps.gid_types().len()).unwrap_or(u32::MAX);
        if self.gid_tbl_len <= defaults {
            return Err("GID table too small for its default GIDs");
        }
        if self.gid_tbl_len > MAX_GID_TBL_LEN {
            return Err("GID table larger than 4096 entries");
        }
        if self.pkey_tbl_len == 0 {
            return Err("empty pkey table");
        }
        if self.gid_tbl_len != attr.gid_tbl_len || u32::from(self.pkey_tbl_len) != attr.pkey_tbl_len {
            return Err("immutable table lengths disagree with query_port");
        }
        Ok(())
    }
}

/// Port attributes (`struct ib_port_attr`), what `query_port` answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PortAttr {
    pub state: PortState,
    pub max_mtu: IbMtu,
    pub active_mtu: IbMtu,
    pub gid_tbl_len: u32,
    pub port_cap_flags: u32,
    pub port_cap_flags2: u16,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u32,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: PhysState,
    pub link_layer: LinkLayer,
}

/// One port of a registered device: immutable data, live state, pkey and GID
/// tables.
#[derive(Clone, Debug)]
pub struct Port {
    num: u32,
    attr: PortAttr,
    immutable: PortImmutable,
    pkeys: Vec<u16>,
    gids: GidTable,
}

/// What a port transition asks the caller to announce.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PortTransition {
    /// `rxe_port_up`: dispatch PORT_ACTIVE.
    Up,
    /// `rxe_port_down`: dispatch PORT_ERR and count `link_downed`.
    Down,
}

impl Port {
    /// Build port `num` from the driver's answers, verified. The GID table
    /// reserves one default slot per supported GID type.
    pub(crate) fn new(num: u32, attr: PortAttr, immutable: PortImmutable) -> Result<Self, Error> {
        immutable.verify(&attr).map_err(|reason| Error::BadPortImmutable { port: num, reason })?;
        let gid_len = usize::try_from(immutable.gid_tbl_len)
            .map_err(|_| Error::BadPortImmutable { port: num, reason: "GID table length does not fit in memory" })?;
        let gids = GidTable::new(gid_len, &immutable.core_cap_flags.gid_types())
            .map_err(|_| Error::BadPortImmutable { port: num, reason: "GID table too small for its default GIDs" })?;
        // verify() guarantees at least one slot; RoCE uses only the default.
        let mut pkeys = vec![0u16; usize::from(immutable.pkey_tbl_len)];
        if let Some(first) = pkeys.first_mut() {
            *first = DEFAULT_PKEY;
        }
        Ok(Port { num, attr, immutable, pkeys, gids })
    }

    /// The port number (ports count from 1).
    pub fn num(&self) -> u32 {
        self.num
    }

    /// The full attributes, live state included (`ib_query_port`).
    pub fn attr(&self) -> &PortAttr {
        &self.attr
    }

    pub fn immutable(&self) -> &PortImmutable {
        &self.immutable
    }

    pub fn state(&self) -> PortState {
        self.attr.state
    }

    pub fn phys_state(&self) -> PhysState {
        self.attr.phys_state
    }

    pub fn active_mtu(&self) -> IbMtu {
        self.attr.active_mtu
    }

    /// `ib_query_pkey`.
    pub fn pkey(&self, index: u32) -> Result<u16, Error> {
        usize::try_from(index).ok().and_then(|i| self.pkeys.get(i).copied()).ok_or(Error::InvalidPkeyIndex(index))
    }

    pub fn pkeys(&self) -> &[u16] {
        &self.pkeys
    }

    pub fn gid_table(&self) -> &GidTable {
        &self.gids
    }

    pub(crate) fn gid_table_mut(&mut self) -> &mut GidTable {
        &mut self.gids
    }

    /// `rxe_port_up`.
    pub(crate) fn port_up(&mut self) -> PortTransition {
        self.attr.state = PortState::Active;
        self.attr.phys_state = PhysState::LinkUp;
        PortTransition::Up
    }

    /// `rxe_port_down`. The physical state is what `rxe_query_port` would
    /// report: POLLING while the netdev is still administratively up.
    pub(crate) fn port_down(&mut self, admin_up: bool) -> PortTransition {
        self.attr.state = PortState::Down;
        self.attr.phys_state = if admin_up { PhysState::Polling } else { PhysState::Disabled };
        PortTransition::Down
    }

    /// `rxe_set_port_state`: up when the netdev runs with carrier.
    pub(crate) fn follow_netdev(&mut self, ndev: &NetdevInfo) -> PortTransition {
        if ndev.running() { self.port_up() } else { self.port_down(ndev.up) }
    }

    /// `rxe_set_mtu`.
    pub(crate) fn set_netdev_mtu(&mut self, netdev_mtu: u32) {
        self.attr.active_mtu = active_mtu_for(netdev_mtu, self.attr.max_mtu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::netdev::MacAddr;
    use crate::core::rxe_params;

    fn port() -> Port {
        Port::new(1, rxe_params::port_attr(), rxe_params::port_immutable()).unwrap()
    }

    #[test]
    fn mtu_rule_matches_rxe() {
        assert_eq!(active_mtu_for(1500, IbMtu::Mtu4096), IbMtu::Mtu1024);
        assert_eq!(active_mtu_for(9000, IbMtu::Mtu4096), IbMtu::Mtu4096);
        // The 80 header bytes matter at the boundaries.
        assert_eq!(active_mtu_for(1104, IbMtu::Mtu4096), IbMtu::Mtu1024);
        assert_eq!(active_mtu_for(1103, IbMtu::Mtu4096), IbMtu::Mtu512);
        assert_eq!(active_mtu_for(2128, IbMtu::Mtu4096), IbMtu::Mtu2048);
        assert_eq!(active_mtu_for(2127, IbMtu::Mtu4096), IbMtu::Mtu1024);
        assert_eq!(active_mtu_for(4176, IbMtu::Mtu4096), IbMtu::Mtu4096);
        assert_eq!(active_mtu_for(4175, IbMtu::Mtu4096), IbMtu::Mtu2048);
        // Too small for anything still gives 256; nothing beats the cap.
        assert_eq!(active_mtu_for(0, IbMtu::Mtu4096), IbMtu::Mtu256);
        assert_eq!(active_mtu_for(335, IbMtu::Mtu4096), IbMtu::Mtu256);
        assert_eq!(active_mtu_for(65535, IbMtu::Mtu2048), IbMtu::Mtu2048);
        assert_eq!(eth_mtu_to_ib_mtu(300), None);
        assert_eq!(IbMtu::Mtu1024.code(), 3);
        assert_eq!(IbMtu::Mtu4096.bytes(), 4096);
    }

    #[test]
    fn pkey_table_is_one_default_entry() {
        let p = port();
        assert_eq!(p.pkeys(), &[0xffff]);
        assert_eq!(p.pkey(0), Ok(0xffff));
        assert_eq!(p.pkey(1), Err(Error::InvalidPkeyIndex(1)));
    }

    #[test]
    fn port_follows_the_netdev() {
        let mut p = port();
        assert_eq!(p.state(), PortState::Down);
        let mut nd = NetdevInfo::new(2, "eth0", MacAddr::default());
        assert_eq!(p.follow_netdev(&nd), PortTransition::Up);
        assert_eq!((p.state(), p.phys_state()), (PortState::Active, PhysState::LinkUp));
        nd.carrier = false;
        assert_eq!(p.follow_netdev(&nd), PortTransition::Down);
        assert_eq!((p.state(), p.phys_state()), (PortState::Down, PhysState::Polling));
        nd.up = false;
        p.follow_netdev(&nd);
        assert_eq!((p.state(), p.phys_state()), (PortState::Down, PhysState::Disabled));
    }

    #[test]
    fn rxe_port_has_a_1024_gid_table_with_one_v2_default() {
        let p = port();
        assert_eq!(p.gid_table().len(), 1024);
        assert_eq!(p.gid_table().default_types(), &[GidType::RoceV2]);
    }

    #[test]
    fn immutable_verification() {
        let attr = rxe_params::port_attr();
        let good = rxe_params::port_immutable();
        assert_eq!(good.verify(&attr), Ok(()));
        let bad = |f: fn(&mut PortImmutable)| {
            let mut i = good;
            f(&mut i);
            Port::new(1, attr, i).err()
        };
        assert!(bad(|i| i.max_mad_size = 0).is_some());
        assert!(bad(|i| i.gid_tbl_len = 1).is_some());
        assert!(bad(|i| i.gid_tbl_len = 512).is_some()); // disagrees with query_port
        assert!(bad(|i| i.pkey_tbl_len = 0).is_some());
        assert!(bad(|i| i.core_cap_flags = CoreCapFlags(CoreCapFlags::IB_MAD)).is_some());
        assert!(bad(|i| i.core_cap_flags.0 |= CoreCapFlags::PROT_IB).is_some());
        assert!(matches!(bad(|i| i.pkey_tbl_len = 0), Some(Error::BadPortImmutable { port: 1, .. })));
    }

    #[test]
    fn state_codes_are_the_verbs_values() {
        // The tools' names for them are in verbs_ring::show.
        assert_eq!(PortState::Active.code(), 4);
        assert_eq!(PhysState::LinkUp.code(), 5);
        assert_eq!(PhysState::Disabled.code(), 3);
    }
}
