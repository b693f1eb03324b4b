//! The attributes a Soft-RoCE (rxe) device reports, as Linux 6.1 `rxe_param.h`
//! and `rxe_init_device_param` / `rxe_init_port_param` set them (seed §1).
//!
//! Shared by the rxe link ops, the real rxe transport and the test fakes, so
//! every rxe device the appliance registers answers `ibv_devinfo` with the same
//! numbers Linux does (the issue's facts: vendor_id 0xffffff, max_qp 1048560,
//! max_qp_wr 1048576, max_sge 32, max_cqe 32767, max_mr 524287, max_pd 1048576,
//! atomic_cap ATOMIC_HCA, a 1024-entry GID table, one pkey, max MTU 4096).

use super::device::{AtomicCap, DeviceAttr, DeviceCapFlags, Op, OpSet};
use super::gid::Guid;
use super::netdev::MacAddr;
use super::port::{CoreCapFlags, IB_MGMT_MAD_SIZE, IbMtu, LinkLayer, PhysState, PortAttr, PortImmutable, PortState};

/// Most rxe limits derive from this (`DEFAULT_MAX_VALUE`, 1 Mi).
const DEFAULT_MAX_VALUE: u32 = 1 << 20;
const MIN_QP_INDEX: u32 = 16;
const MIN_SRQ_INDEX: u32 = 0x0002_0001;
const MAX_MR_INDEX: u32 = DEFAULT_MAX_VALUE >> 1;
const MIN_MR_INDEX: u32 = 1;
const MIN_MW_INDEX: u32 = MAX_MR_INDEX + 1;

/// IBTA vendor id rxe uses (`RXE_VENDOR_ID`, IBTA A3.3.1).
pub const VENDOR_ID: u32 = 0x00ff_ffff;
/// rxe has one port.
pub const NUM_PORTS: u32 = 1;
/// GID table entries per port (`RXE_PORT_GID_TBL_LEN`).
pub const GID_TBL_LEN: u32 = 1024;
/// Pkey table entries per port (`RXE_PORT_PKEY_TBL_LEN`).
pub const PKEY_TBL_LEN: u16 = 1;
/// `IB_PORT_CM_SUP`.
pub const PORT_CAP_FLAGS: u32 = 1 << 16;
/// Largest message (`RXE_PORT_MAX_MSG_SZ` in 6.1).
pub const MAX_MSG_SZ: u32 = 0x0080_0000;

/// Device attributes of an rxe device on a netdev with this MAC: node and
/// system-image GUIDs are the EUI-64 of the MAC.
pub fn device_attr(mac: MacAddr) -> DeviceAttr {
    let guid = Guid::from_mac(mac);
    DeviceAttr {
        fw_ver: 0,
        node_guid: guid,
        sys_image_guid: guid,
        max_mr_size: u64::MAX,
        page_size_cap: 0xffff_f000,
        vendor_id: VENDOR_ID,
        vendor_part_id: 0,
        hw_ver: 0,
        max_qp: DEFAULT_MAX_VALUE - MIN_QP_INDEX,
        max_qp_wr: DEFAULT_MAX_VALUE,
        device_cap_flags: DeviceCapFlags(
            DeviceCapFlags::BAD_PKEY_CNTR
                | DeviceCapFlags::BAD_QKEY_CNTR
                | DeviceCapFlags::AUTO_PATH_MIG
                | DeviceCapFlags::CHANGE_PHY_PORT
                | DeviceCapFlags::UD_AV_PORT_ENFORCE
                | DeviceCapFlags::PORT_ACTIVE_EVENT
                | DeviceCapFlags::SYS_IMAGE_GUID
                | DeviceCapFlags::RC_RNR_NAK_GEN
                | DeviceCapFlags::SRQ_RESIZE
                | DeviceCapFlags::MEM_MGT_EXTENSIONS
                | DeviceCapFlags::MEM_WINDOW
                | DeviceCapFlags::MEM_WINDOW_TYPE_2B
                // Linux rxe (6.2+) also sets FLUSH_PERSISTENT; there is no
                // persistent memory here, so no MR can take such a FLUSH.
                | DeviceCapFlags::FLUSH_GLOBAL
                | DeviceCapFlags::ATOMIC_WRITE,
        ),
        max_sge: 32,
        max_sge_rd: 32,
        max_cq: DEFAULT_MAX_VALUE,
        max_cqe: (1 << 15) - 1,
        max_mr: MAX_MR_INDEX - MIN_MR_INDEX,
        max_pd: DEFAULT_MAX_VALUE,
        max_qp_rd_atom: 128,
        max_ee_rd_atom: 0,
        max_res_rd_atom: 0x3f000,
        max_qp_init_rd_atom: 128,
        max_ee_init_rd_atom: 0,
        atomic_cap: AtomicCap::Hca,
        max_ee: 0,
        max_rdd: 0,
        max_mw: DEFAULT_MAX_VALUE - MIN_MW_INDEX,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 8192,
        max_mcast_qp_attach: 56,
        max_total_mcast_qp_attach: 0x70000,
        max_ah: (1 << 15) - 1,
        max_srq: DEFAULT_MAX_VALUE - MIN_SRQ_INDEX,
        max_srq_wr: DEFAULT_MAX_VALUE,
        max_srq_sge: 27,
        max_fast_reg_page_list_len: 512,
        max_pkeys: 64,
        local_ca_ack_delay: 15,
        allow_user_unreg: true,
    }
}

/// Port attributes before the netdev is looked at (`rxe_init_port_param`):
/// DOWN until `enable_driver` sees the netdev running.
pub fn port_attr() -> PortAttr {
    PortAttr {
        state: PortState::Down,
        max_mtu: IbMtu::Mtu4096,
        active_mtu: IbMtu::Mtu256,
        gid_tbl_len: GID_TBL_LEN,
        port_cap_flags: PORT_CAP_FLAGS,
        port_cap_flags2: 0,
        max_msg_sz: MAX_MSG_SZ,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: u32::from(PKEY_TBL_LEN),
        lid: 0,
        sm_lid: 0,
        lmc: 0,
        max_vl_num: 1,
        sm_sl: 0,
        subnet_timeout: 0,
        init_type_reply: 0,
        // 1X at 2.5 Gbps: what `ib_get_eth_speed` reports for a netdev of
        // unknown speed such as virtio-net.
        active_width: 1,
        active_speed: 1,
        phys_state: PhysState::Disabled,
        link_layer: LinkLayer::Ethernet,
    }
}

/// `rxe_port_immutable`: RoCE v2 only.
pub fn port_immutable() -> PortImmutable {
    PortImmutable {
        core_cap_flags: CoreCapFlags::ROCE_UDP_ENCAP_PORT,
        gid_tbl_len: GID_TBL_LEN,
        pkey_tbl_len: PKEY_TBL_LEN,
        max_mad_size: IB_MGMT_MAD_SIZE,
    }
}

/// Every op rxe implements: all of them, SRQ, memory windows, address handles
/// and multicast included.
pub fn ops() -> OpSet {
    OpSet::of(&Op::ALL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::gid::GidType;
    use alloc::string::ToString;

    #[test]
    fn limits_match_the_issue_facts() {
        let a = device_attr(MacAddr([0x52, 0x54, 0, 0, 0, 1]));
        assert_eq!(a.vendor_id, 0xffffff);
        assert_eq!(a.node_guid.to_string(), "5054:00ff:fe00:0001");
        assert_eq!(a.sys_image_guid, a.node_guid);
        assert_eq!(a.max_qp, 1_048_560);
        assert_eq!(a.max_qp_wr, 1_048_576);
        assert_eq!(a.max_sge, 32);
        assert_eq!(a.max_cqe, 32_767);
        assert_eq!(a.max_mr, 524_287);
        assert_eq!(a.max_pd, 1_048_576);
        assert_eq!(a.atomic_cap, AtomicCap::Hca);
        assert_eq!(a.max_srq, 917_503);
        assert_eq!(a.max_mw, 524_287);
        assert_eq!(a.max_res_rd_atom, 258_048);
        assert_eq!(a.max_total_mcast_qp_attach, 458_752);
    }

    #[test]
    fn port_is_roce_v2_only_with_1024_gids_and_one_pkey() {
        let i = port_immutable();
        assert_eq!(i.core_cap_flags.gid_types(), &[GidType::RoceV2]);
        assert_eq!(i.gid_tbl_len, 1024);
        assert_eq!(i.pkey_tbl_len, 1);
        assert_eq!(i.verify(&port_attr()), Ok(()));
        assert_eq!(port_attr().max_mtu, IbMtu::Mtu4096);
        assert_eq!(port_attr().lid, 0);
    }

    #[test]
    fn rxe_has_every_mandatory_op() {
        assert_eq!(ops().first_missing_mandatory(), None);
        assert!(ops().contains(Op::CreateSrq));
        assert!(ops().contains(Op::AllocMw));
    }
}
