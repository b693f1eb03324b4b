//! rdma-core's `ibv_devinfo` (libibverbs/examples/devinfo.c, rdma-core 44):
//! one block per device, `-v` for every attribute and the GID table, `-l`
//! for the names only. Field order, tabs and the decoded names are
//! devinfo.c's, including its spellings (`PORT_CONFIGURATION TRAINNING`).

use core::fmt::{self, Write};

use super::words::{GidFull, GidText, Guid};
use super::{DeviceView, PortView};
use crate::cmd::{DeviceAttr, GidEntry, gid_type};

/// `ibv_devinfo -l`: how many devices, then their names.
pub fn list(out: &mut dyn Write, names: &[&str]) -> fmt::Result {
    let n = names.len();
    writeln!(out, "{n} HCA{} found:", if n == 1 { "" } else { "s" })?;
    for name in names {
        writeln!(out, "\t{name}")?;
    }
    writeln!(out)
}

/// `ibv_devinfo [-v]` for one device and the ports in `dev.ports`.
pub fn write(out: &mut dyn Write, dev: &DeviceView, verbose: bool) -> fmt::Result {
    let a = &dev.attr;
    writeln!(out, "hca_id:\t{}", dev.name())?;
    // Every device of the appliance is rxe: the InfiniBand transport
    // (IBV_TRANSPORT_IB) over an Ethernet link.
    writeln!(out, "\ttransport:\t\t\tInfiniBand (0)")?;
    // libibverbs makes the string from the number, so rxe (fw_ver 0) shows 0.0.0.
    writeln!(
        out,
        "\tfw_ver:\t\t\t\t{}.{}.{}",
        (a.fw_ver >> 32) & 0xffff,
        (a.fw_ver >> 16) & 0xffff,
        a.fw_ver & 0xffff
    )?;
    writeln!(out, "\tnode_guid:\t\t\t{}", Guid(a.node_guid))?;
    writeln!(out, "\tsys_image_guid:\t\t\t{}", Guid(a.sys_image_guid))?;
    writeln!(out, "\tvendor_id:\t\t\t0x{:04x}", a.vendor_id)?;
    writeln!(out, "\tvendor_part_id:\t\t\t{}", a.vendor_part_id)?;
    writeln!(out, "\thw_ver:\t\t\t\t0x{:X}", a.hw_ver)?;
    // No `board_id`: rxe has no such sysfs file.
    writeln!(out, "\tphys_port_cnt:\t\t\t{}", a.phys_port_cnt)?;
    if verbose {
        device_verbose(out, a)?;
    }
    for port in &dev.ports {
        write_port(out, port, verbose)?;
    }
    Ok(())
}

fn device_verbose(out: &mut dyn Write, a: &DeviceAttr) -> fmt::Result {
    writeln!(out, "\tmax_mr_size:\t\t\t0x{:x}", a.max_mr_size)?;
    writeln!(out, "\tpage_size_cap:\t\t\t0x{:x}", a.page_size_cap)?;
    writeln!(out, "\tmax_qp:\t\t\t\t{}", a.max_qp)?;
    writeln!(out, "\tmax_qp_wr:\t\t\t{}", a.max_qp_wr)?;
    // `struct ibv_device_attr` holds the low 32 bits; the rest are the
    // extended flags printed below.
    let low = a.device_cap_flags as u32;
    writeln!(out, "\tdevice_cap_flags:\t\t0x{low:08x}")?;
    flag_lines(out, u64::from(low), &DEVICE_CAP_FLAGS, u64::from(u32::MAX))?;
    writeln!(out, "\tmax_sge:\t\t\t{}", a.max_sge)?;
    writeln!(out, "\tmax_sge_rd:\t\t\t{}", a.max_sge_rd)?;
    writeln!(out, "\tmax_cq:\t\t\t\t{}", a.max_cq)?;
    writeln!(out, "\tmax_cqe:\t\t\t{}", a.max_cqe)?;
    writeln!(out, "\tmax_mr:\t\t\t\t{}", a.max_mr)?;
    writeln!(out, "\tmax_pd:\t\t\t\t{}", a.max_pd)?;
    writeln!(out, "\tmax_qp_rd_atom:\t\t\t{}", a.max_qp_rd_atom)?;
    writeln!(out, "\tmax_ee_rd_atom:\t\t\t{}", a.max_ee_rd_atom)?;
    writeln!(out, "\tmax_res_rd_atom:\t\t{}", a.max_res_rd_atom)?;
    writeln!(out, "\tmax_qp_init_rd_atom:\t\t{}", a.max_qp_init_rd_atom)?;
    writeln!(out, "\tmax_ee_init_rd_atom:\t\t{}", a.max_ee_init_rd_atom)?;
    writeln!(out, "\tatomic_cap:\t\t\t{} ({})", atomic_cap(a.atomic_cap), a.atomic_cap)?;
    writeln!(out, "\tmax_ee:\t\t\t\t{}", a.max_ee)?;
    writeln!(out, "\tmax_rdd:\t\t\t{}", a.max_rdd)?;
    writeln!(out, "\tmax_mw:\t\t\t\t{}", a.max_mw)?;
    writeln!(out, "\tmax_raw_ipv6_qp:\t\t{}", a.max_raw_ipv6_qp)?;
    writeln!(out, "\tmax_raw_ethy_qp:\t\t{}", a.max_raw_ethy_qp)?;
    writeln!(out, "\tmax_mcast_grp:\t\t\t{}", a.max_mcast_grp)?;
    writeln!(out, "\tmax_mcast_qp_attach:\t\t{}", a.max_mcast_qp_attach)?;
    writeln!(out, "\tmax_total_mcast_qp_attach:\t{}", a.max_total_mcast_qp_attach)?;
    writeln!(out, "\tmax_ah:\t\t\t\t{}", a.max_ah)?;
    writeln!(out, "\tmax_fmr:\t\t\t{}", a.max_fmr)?;
    if a.max_fmr != 0 {
        writeln!(out, "\tmax_map_per_fmr:\t\t{}", a.max_map_per_fmr)?;
    }
    writeln!(out, "\tmax_srq:\t\t\t{}", a.max_srq)?;
    if a.max_srq != 0 {
        writeln!(out, "\tmax_srq_wr:\t\t\t{}", a.max_srq_wr)?;
        writeln!(out, "\tmax_srq_sge:\t\t\t{}", a.max_srq_sge)?;
    }
    writeln!(out, "\tmax_pkeys:\t\t\t{}", a.max_pkeys)?;
    writeln!(out, "\tlocal_ca_ack_delay:\t\t{}", a.local_ca_ack_delay)?;
    extended(out, a)?;
    writeln!(out, "\tnum_comp_vectors:\t\t{}", a.num_comp_vectors)
}

/// The `ibv_query_device_ex` part. The ring carries none of these values
/// but the extended capability flags: Linux 6.1's rxe reports no ODP, no
/// completion timestamps or core clock, no raw packet, TSO, RSS, WQ, packet
/// pacing, tag matching, CQ moderation or device memory, so these lines are
/// what rdma-core prints for those zeros.
fn extended(out: &mut dyn Write, a: &DeviceAttr) -> fmt::Result {
    out.write_str("\tgeneral_odp_caps:\n")?;
    for transport in ["rc", "uc", "ud", "xrc"] {
        writeln!(out, "\t{transport}_odp_caps:\n\t\t\t\t\tNO SUPPORT")?;
    }
    out.write_str("\tcompletion_timestamp_mask not supported\n")?;
    out.write_str("\tcore clock not supported\n")?;
    // The kernel answers the whole 64-bit word as `device_cap_flags_ex`;
    // devinfo names only its high half.
    writeln!(out, "\tdevice_cap_flags_ex:\t\t0x{:X}", a.device_cap_flags)?;
    flag_lines(out, a.device_cap_flags & !u64::from(u32::MAX), &DEVICE_CAP_FLAGS_EX, !u64::from(u32::MAX))?;
    out.write_str("\ttso_caps:\n\t\tmax_tso:\t\t\t0\n")?;
    out.write_str("\trss_caps:\n")?;
    out.write_str("\t\tmax_rwq_indirection_tables:\t\t\t0\n")?;
    out.write_str("\t\tmax_rwq_indirection_table_size:\t\t\t0\n")?;
    out.write_str("\t\trx_hash_function:\t\t\t\t0x0\n")?;
    out.write_str("\t\trx_hash_fields_mask:\t\t\t\t0x0\n")?;
    out.write_str("\tmax_wq_type_rq:\t\t\t0\n")?;
    out.write_str("\tpacket_pacing_caps:\n")?;
    out.write_str("\t\tqp_rate_limit_min:\t0kbps\n")?;
    out.write_str("\t\tqp_rate_limit_max:\t0kbps\n")?;
    out.write_str("\ttag matching not supported\n")
}

fn write_port(out: &mut dyn Write, port: &PortView, verbose: bool) -> fmt::Result {
    let p = &port.attr;
    writeln!(out, "\t\tport:\t{}", port.num)?;
    writeln!(out, "\t\t\tstate:\t\t\t{} ({})", port_state(p.state), p.state)?;
    writeln!(out, "\t\t\tmax_mtu:\t\t{} ({})", mtu(p.max_mtu), p.max_mtu)?;
    writeln!(out, "\t\t\tactive_mtu:\t\t{} ({})", mtu(p.active_mtu), p.active_mtu)?;
    writeln!(out, "\t\t\tsm_lid:\t\t\t{}", p.sm_lid)?;
    writeln!(out, "\t\t\tport_lid:\t\t{}", p.lid)?;
    writeln!(out, "\t\t\tport_lmc:\t\t0x{:02x}", p.lmc)?;
    writeln!(out, "\t\t\tlink_layer:\t\t{}", link_layer(p.link_layer))?;
    if verbose {
        writeln!(out, "\t\t\tmax_msg_sz:\t\t0x{:x}", p.max_msg_sz)?;
        writeln!(out, "\t\t\tport_cap_flags:\t\t0x{:08x}", p.port_cap_flags)?;
        writeln!(out, "\t\t\tport_cap_flags2:\t0x{:04x}", p.port_cap_flags2)?;
        writeln!(out, "\t\t\tmax_vl_num:\t\t{} ({})", vl(p.max_vl_num), p.max_vl_num)?;
        writeln!(out, "\t\t\tbad_pkey_cntr:\t\t0x{:x}", p.bad_pkey_cntr)?;
        writeln!(out, "\t\t\tqkey_viol_cntr:\t\t0x{:x}", p.qkey_viol_cntr)?;
        writeln!(out, "\t\t\tsm_sl:\t\t\t{}", p.sm_sl)?;
        writeln!(out, "\t\t\tpkey_tbl_len:\t\t{}", p.pkey_tbl_len)?;
        writeln!(out, "\t\t\tgid_tbl_len:\t\t{}", p.gid_tbl_len)?;
        writeln!(out, "\t\t\tsubnet_timeout:\t\t{}", p.subnet_timeout)?;
        writeln!(out, "\t\t\tinit_type_reply:\t{}", p.init_type_reply)?;
        writeln!(out, "\t\t\tactive_width:\t\t{}X ({})", width(p.active_width), p.active_width)?;
        writeln!(out, "\t\t\tactive_speed:\t\t{} ({})", speed(p.active_speed), p.active_speed)?;
        // devinfo prints it for the InfiniBand transport, which rxe is.
        writeln!(out, "\t\t\tphys_state:\t\t{} ({})", phys_state(p.phys_state), p.phys_state)?;
        for g in &port.gids {
            write_gid(out, g, p.link_layer)?;
        }
    }
    writeln!(out)
}

/// One `GID[  i]:` line: RoCE v2 GIDs in `inet_ntop` form, others in full;
/// the type after a comma on Ethernet only. Like devinfo, a GID whose
/// interface id is zero is not printed, nor one of an unknown type.
fn write_gid(out: &mut dyn Write, g: &GidEntry, link_layer: u8) -> fmt::Result {
    if g.gid[8..].iter().all(|&b| b == 0) {
        return Ok(());
    }
    let ty = match g.gid_type {
        gid_type::ROCE_V1 => "RoCE v1",
        gid_type::ROCE_V2 => "RoCE v2",
        _ => return Ok(()),
    };
    write!(out, "\t\t\tGID[{:3}]:\t\t", g.index)?;
    if g.gid_type == gid_type::ROCE_V2 {
        write!(out, "{}", GidText(&g.gid))?;
    } else {
        write!(out, "{}", GidFull(&g.gid))?;
    }
    if link_layer == LINK_LAYER_ETHERNET {
        write!(out, ", {ty}")?;
    }
    writeln!(out)
}

/// Writes the name of every bit of `flags` in `table`, then the bits of
/// `mask` the table does not know, devinfo's `Unknown flags` line.
fn flag_lines(out: &mut dyn Write, flags: u64, table: &[(u64, &str)], mask: u64) -> fmt::Result {
    for (bit, name) in table {
        if flags & bit != 0 {
            writeln!(out, "\t\t\t\t\t{name}")?;
        }
    }
    let known = table.iter().fold(0, |acc, (bit, _)| acc | bit);
    let unknown = flags & mask & !known;
    if unknown != 0 {
        writeln!(out, "\t\t\t\t\tUnknown flags: 0x{unknown:X}")?;
    }
    Ok(())
}

/// `enum ibv_device_cap_flags`, in the order devinfo tests them.
const DEVICE_CAP_FLAGS: [(u64, &str); 24] = [
    (1 << 0, "RESIZE_MAX_WR"),
    (1 << 1, "BAD_PKEY_CNTR"),
    (1 << 2, "BAD_QKEY_CNTR"),
    (1 << 3, "RAW_MULTI"),
    (1 << 4, "AUTO_PATH_MIG"),
    (1 << 5, "CHANGE_PHY_PORT"),
    (1 << 6, "UD_AV_PORT_ENFORCE"),
    (1 << 7, "CURR_QP_STATE_MOD"),
    (1 << 8, "SHUTDOWN_PORT"),
    (1 << 9, "INIT_TYPE"),
    (1 << 10, "PORT_ACTIVE_EVENT"),
    (1 << 11, "SYS_IMAGE_GUID"),
    (1 << 12, "RC_RNR_NAK_GEN"),
    (1 << 13, "SRQ_RESIZE"),
    (1 << 14, "N_NOTIFY_CQ"),
    (1 << 17, "MEM_WINDOW"),
    (1 << 18, "UD_IP_CSUM"),
    (1 << 20, "XRC"),
    (1 << 21, "MEM_MGT_EXTENSIONS"),
    (1 << 23, "MEM_WINDOW_TYPE_2A"),
    (1 << 24, "MEM_WINDOW_TYPE_2B"),
    (1 << 25, "RC_IP_CSUM"),
    (1 << 26, "RAW_IP_CSUM"),
    (1 << 29, "MANAGED_FLOW_STEERING"),
];

/// The named bits of the high half (`IBV_DEVICE_RAW_SCATTER_FCS`, ...).
const DEVICE_CAP_FLAGS_EX: [(u64, &str); 2] = [(1 << 34, "RAW_SCATTER_FCS"), (1 << 36, "PCI_WRITE_END_PADDING")];

/// `IBV_LINK_LAYER_ETHERNET`.
const LINK_LAYER_ETHERNET: u8 = 2;

fn atomic_cap(c: u32) -> &'static str {
    match c {
        0 => "ATOMIC_NONE",
        1 => "ATOMIC_HCA",
        2 => "ATOMIC_GLOB",
        _ => "invalid atomic capability",
    }
}

fn port_state(s: u32) -> &'static str {
    match s {
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        _ => "invalid state",
    }
}

fn mtu(m: u32) -> &'static str {
    match m {
        1 => "256",
        2 => "512",
        3 => "1024",
        4 => "2048",
        5 => "4096",
        _ => "invalid MTU",
    }
}

fn link_layer(l: u8) -> &'static str {
    match l {
        0 | 1 => "InfiniBand",
        LINK_LAYER_ETHERNET => "Ethernet",
        _ => "Unknown",
    }
}

fn vl(v: u8) -> &'static str {
    match v {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    }
}

fn width(w: u8) -> &'static str {
    match w {
        1 => "1",
        2 => "4",
        4 => "8",
        8 => "12",
        16 => "2",
        _ => "invalid width",
    }
}

fn speed(s: u16) -> &'static str {
    match s {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        _ => "invalid speed",
    }
}

fn phys_state(s: u8) -> &'static str {
    match s {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION TRAINNING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY TEST",
        _ => "invalid physical state",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::show::fixture;
    use alloc::string::String;

    const PORT: &str = "\t\tport:\t1\n\
                        \t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\
                        \t\t\tmax_mtu:\t\t4096 (5)\n\
                        \t\t\tactive_mtu:\t\t1024 (3)\n\
                        \t\t\tsm_lid:\t\t\t0\n\
                        \t\t\tport_lid:\t\t0\n\
                        \t\t\tport_lmc:\t\t0x00\n\
                        \t\t\tlink_layer:\t\tEthernet\n";

    const HEAD: &str = "hca_id:\trxe0\n\
                        \ttransport:\t\t\tInfiniBand (0)\n\
                        \tfw_ver:\t\t\t\t0.0.0\n\
                        \tnode_guid:\t\t\t5054:00ff:fe00:0001\n\
                        \tsys_image_guid:\t\t\t5054:00ff:fe00:0001\n\
                        \tvendor_id:\t\t\t0xffffff\n\
                        \tvendor_part_id:\t\t\t0\n\
                        \thw_ver:\t\t\t\t0x0\n\
                        \tphys_port_cnt:\t\t\t1\n";

    fn text(dev: &DeviceView, verbose: bool) -> String {
        let mut s = String::new();
        write(&mut s, dev, verbose).unwrap();
        s
    }

    #[test]
    fn plain_is_linux_rxe0() {
        assert_eq!(text(&fixture::rxe0(), false), alloc::format!("{HEAD}{PORT}\n"));
    }

    #[test]
    fn verbose_is_linux_rxe0() {
        let device = "\tmax_mr_size:\t\t\t0xffffffffffffffff\n\
                      \tpage_size_cap:\t\t\t0xfffff000\n\
                      \tmax_qp:\t\t\t\t1048560\n\
                      \tmax_qp_wr:\t\t\t1048576\n\
                      \tdevice_cap_flags:\t\t0x01223c76\n\
                      \t\t\t\t\tBAD_PKEY_CNTR\n\
                      \t\t\t\t\tBAD_QKEY_CNTR\n\
                      \t\t\t\t\tAUTO_PATH_MIG\n\
                      \t\t\t\t\tCHANGE_PHY_PORT\n\
                      \t\t\t\t\tUD_AV_PORT_ENFORCE\n\
                      \t\t\t\t\tPORT_ACTIVE_EVENT\n\
                      \t\t\t\t\tSYS_IMAGE_GUID\n\
                      \t\t\t\t\tRC_RNR_NAK_GEN\n\
                      \t\t\t\t\tSRQ_RESIZE\n\
                      \t\t\t\t\tMEM_WINDOW\n\
                      \t\t\t\t\tMEM_MGT_EXTENSIONS\n\
                      \t\t\t\t\tMEM_WINDOW_TYPE_2B\n\
                      \tmax_sge:\t\t\t32\n\
                      \tmax_sge_rd:\t\t\t32\n\
                      \tmax_cq:\t\t\t\t1048576\n\
                      \tmax_cqe:\t\t\t32767\n\
                      \tmax_mr:\t\t\t\t524287\n\
                      \tmax_pd:\t\t\t\t1048576\n\
                      \tmax_qp_rd_atom:\t\t\t128\n\
                      \tmax_ee_rd_atom:\t\t\t0\n\
                      \tmax_res_rd_atom:\t\t258048\n\
                      \tmax_qp_init_rd_atom:\t\t128\n\
                      \tmax_ee_init_rd_atom:\t\t0\n\
                      \tatomic_cap:\t\t\tATOMIC_HCA (1)\n\
                      \tmax_ee:\t\t\t\t0\n\
                      \tmax_rdd:\t\t\t0\n\
                      \tmax_mw:\t\t\t\t524287\n\
                      \tmax_raw_ipv6_qp:\t\t0\n\
                      \tmax_raw_ethy_qp:\t\t0\n\
                      \tmax_mcast_grp:\t\t\t8192\n\
                      \tmax_mcast_qp_attach:\t\t56\n\
                      \tmax_total_mcast_qp_attach:\t458752\n\
                      \tmax_ah:\t\t\t\t32767\n\
                      \tmax_fmr:\t\t\t0\n\
                      \tmax_srq:\t\t\t917503\n\
                      \tmax_srq_wr:\t\t\t1048576\n\
                      \tmax_srq_sge:\t\t\t27\n\
                      \tmax_pkeys:\t\t\t64\n\
                      \tlocal_ca_ack_delay:\t\t15\n\
                      \tgeneral_odp_caps:\n\
                      \trc_odp_caps:\n\
                      \t\t\t\t\tNO SUPPORT\n\
                      \tuc_odp_caps:\n\
                      \t\t\t\t\tNO SUPPORT\n\
                      \tud_odp_caps:\n\
                      \t\t\t\t\tNO SUPPORT\n\
                      \txrc_odp_caps:\n\
                      \t\t\t\t\tNO SUPPORT\n\
                      \tcompletion_timestamp_mask not supported\n\
                      \tcore clock not supported\n\
                      \tdevice_cap_flags_ex:\t\t0x1223C76\n\
                      \ttso_caps:\n\
                      \t\tmax_tso:\t\t\t0\n\
                      \trss_caps:\n\
                      \t\tmax_rwq_indirection_tables:\t\t\t0\n\
                      \t\tmax_rwq_indirection_table_size:\t\t\t0\n\
                      \t\trx_hash_function:\t\t\t\t0x0\n\
                      \t\trx_hash_fields_mask:\t\t\t\t0x0\n\
                      \tmax_wq_type_rq:\t\t\t0\n\
                      \tpacket_pacing_caps:\n\
                      \t\tqp_rate_limit_min:\t0kbps\n\
                      \t\tqp_rate_limit_max:\t0kbps\n\
                      \ttag matching not supported\n\
                      \tnum_comp_vectors:\t\t1\n";
        let port = "\t\t\tmax_msg_sz:\t\t0x800000\n\
                    \t\t\tport_cap_flags:\t\t0x00010000\n\
                    \t\t\tport_cap_flags2:\t0x0000\n\
                    \t\t\tmax_vl_num:\t\t1 (1)\n\
                    \t\t\tbad_pkey_cntr:\t\t0x0\n\
                    \t\t\tqkey_viol_cntr:\t\t0x0\n\
                    \t\t\tsm_sl:\t\t\t0\n\
                    \t\t\tpkey_tbl_len:\t\t1\n\
                    \t\t\tgid_tbl_len:\t\t1024\n\
                    \t\t\tsubnet_timeout:\t\t0\n\
                    \t\t\tinit_type_reply:\t0\n\
                    \t\t\tactive_width:\t\t1X (1)\n\
                    \t\t\tactive_speed:\t\t2.5 Gbps (1)\n\
                    \t\t\tphys_state:\t\tLINK_UP (5)\n\
                    \t\t\tGID[  0]:\t\tfe80::5054:ff:fe00:1, RoCE v2\n\
                    \t\t\tGID[  1]:\t\t::ffff:10.0.0.1, RoCE v2\n\n";
        assert_eq!(text(&fixture::rxe0(), true), alloc::format!("{HEAD}{device}{PORT}{port}"));
    }

    #[test]
    fn odd_values_print_as_devinfo_prints_them() {
        let mut dev = fixture::rxe0();
        dev.attr.device_cap_flags = (1 << 36) | (1 << 40) | (1 << 31);
        dev.attr.max_srq = 0;
        dev.attr.max_fmr = 2;
        dev.attr.max_map_per_fmr = 7;
        let p = &mut dev.ports[0];
        (p.attr.state, p.attr.max_mtu, p.attr.active_speed, p.attr.phys_state) = (5, 9, 3, 4);
        p.gids.push(GidEntry { gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], index: 2, ..p.gids[0] });
        p.gids.push(GidEntry { gid_type: gid_type::ROCE_V1, index: 3, ..p.gids[0] });
        p.gids.push(GidEntry { gid_type: 7, index: 4, ..p.gids[0] });
        let s = text(&dev, true);
        for line in [
            "\tdevice_cap_flags:\t\t0x80000000\n\t\t\t\t\tUnknown flags: 0x80000000\n",
            "\tdevice_cap_flags_ex:\t\t0x11080000000\n\t\t\t\t\tPCI_WRITE_END_PADDING\n\t\t\t\t\tUnknown flags: 0x10000000000\n",
            "\tmax_fmr:\t\t\t2\n\tmax_map_per_fmr:\t\t7\n\tmax_srq:\t\t\t0\n\tmax_pkeys:",
            "\t\t\tstate:\t\t\tinvalid state (5)\n",
            "\t\t\tmax_mtu:\t\tinvalid MTU (9)\n",
            "\t\t\tactive_speed:\t\tinvalid speed (3)\n",
            "\t\t\tphys_state:\t\tPORT_CONFIGURATION TRAINNING (4)\n",
            "\t\t\tGID[  3]:\t\tfe80:0000:0000:0000:5054:00ff:fe00:0001, RoCE v1\n\n",
        ] {
            assert!(s.contains(line), "no {line:?} in\n{s}");
        }
        assert!(!s.contains("GID[  2]") && !s.contains("GID[  4]"), "{s}");
    }

    #[test]
    fn list_names_the_devices() {
        let mut s = String::new();
        list(&mut s, &["rxe0"]).unwrap();
        assert_eq!(s, "1 HCA found:\n\trxe0\n\n");
        s.clear();
        list(&mut s, &["rxe0", "rxe1"]).unwrap();
        assert_eq!(s, "2 HCAs found:\n\trxe0\n\trxe1\n\n");
    }
}
