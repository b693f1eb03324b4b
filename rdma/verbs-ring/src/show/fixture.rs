//! The device the formatter tests print: Linux 6.1's rxe0 on a 1500-byte
//! eth0 (MAC 52:54:00:00:00:01, ifindex 2, 10.0.0.1), the values
//! `rxe_init_device_param` / `rxe_init_port_param` set.

use alloc::vec;

use super::{DeviceView, PortView};
use crate::cmd::{DeviceAttr, GidEntry, LinkInfo, NO_MORE, PortAttr, gid_type};
use crate::wire::name_field;

pub const GUID: u64 = 0x5054_00ff_fe00_0001;

pub fn link() -> LinkInfo {
    LinkInfo {
        node_guid: GUID,
        sys_image_guid: GUID,
        dev_index: 0,
        port_num: 1,
        port_state: 4,
        phys_state: 5,
        netdev_index: 2,
        next: NO_MORE,
        dev_name: name_field("rxe0").unwrap(),
        netdev: name_field("eth0").unwrap(),
    }
}

pub fn device_attr() -> DeviceAttr {
    DeviceAttr {
        fw_ver: 0,
        node_guid: GUID,
        sys_image_guid: GUID,
        max_mr_size: u64::MAX,
        page_size_cap: 0xffff_f000,
        device_cap_flags: 0x0122_3c76,
        vendor_id: 0xff_ffff,
        vendor_part_id: 0,
        hw_ver: 0,
        max_qp: 1_048_560,
        max_qp_wr: 1_048_576,
        max_sge: 32,
        max_sge_rd: 32,
        max_cq: 1_048_576,
        max_cqe: 32_767,
        max_mr: 524_287,
        max_pd: 1_048_576,
        max_qp_rd_atom: 128,
        max_ee_rd_atom: 0,
        max_res_rd_atom: 258_048,
        max_qp_init_rd_atom: 128,
        max_ee_init_rd_atom: 0,
        atomic_cap: 1,
        max_ee: 0,
        max_rdd: 0,
        max_mw: 524_287,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 8192,
        max_mcast_qp_attach: 56,
        max_total_mcast_qp_attach: 458_752,
        max_ah: 32_767,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: 917_503,
        max_srq_wr: 1_048_576,
        max_srq_sge: 27,
        max_fast_reg_page_list_len: 512,
        max_pkeys: 64,
        local_ca_ack_delay: 15,
        phys_port_cnt: 1,
        num_comp_vectors: 1,
    }
}

pub fn port_attr() -> PortAttr {
    PortAttr {
        state: 4,
        max_mtu: 5,
        active_mtu: 3,
        gid_tbl_len: 1024,
        port_cap_flags: 0x0001_0000,
        max_msg_sz: 0x0080_0000,
        pkey_tbl_len: 1,
        max_vl_num: 1,
        active_width: 1,
        active_speed: 1,
        phys_state: 5,
        link_layer: 2,
        ..Default::default()
    }
}

pub fn gid(index: u32, addr: &str) -> GidEntry {
    let gid = addr.parse::<core::net::Ipv6Addr>().unwrap().octets();
    GidEntry { gid, index, gid_type: gid_type::ROCE_V2, ndev_ifindex: 2, valid: 1 }
}

pub fn rxe0() -> DeviceView {
    DeviceView {
        link: link(),
        attr: device_attr(),
        ports: vec![PortView {
            num: 1,
            attr: port_attr(),
            gids: vec![gid(0, "fe80::5054:ff:fe00:1"), gid(1, "::ffff:10.0.0.1")],
        }],
    }
}
