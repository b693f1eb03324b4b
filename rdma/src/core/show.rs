//! Text formatters for the console, in the shapes of the Linux tools so an
//! operator (or a script written against Linux) reads the same lines:
//! iproute2's `rdma link show`, `rdma dev show`, `rdma statistic show`,
//! rdma-core's `ibv_devinfo [-v]`, and the `show_gids` script.
//!
//! All are pure: they read replies or devices and write to a
//! [`core::fmt::Write`]. `rdma link` and `rdma dev` format NLDEV replies, as
//! iproute2 formats netlink replies, so the console goes through the same
//! control API as everything else. Lines carry no trailing blanks (iproute2
//! leaves one after each field; nobody should depend on it).
//!
//! Left out of `ibv_devinfo -v`: the extended capability blocks rdma-core
//! prints after `local_ca_ack_delay` (ODP, TSO, RSS, packet pacing, tag
//! matching), which rxe reports as unsupported or zero.

use core::fmt::{self, Write};

use super::counters::Counters;
use super::device::Device;
use super::gid::GidType;
use super::nldev::NldevMsg;

/// Joins space-separated fields without a trailing blank.
struct Fields<'a> {
    out: &'a mut dyn Write,
    first: bool,
}

impl<'a> Fields<'a> {
    fn new(out: &'a mut dyn Write) -> Self {
        Fields { out, first: true }
    }

    fn field(&mut self, args: fmt::Arguments<'_>) -> fmt::Result {
        if !self.first {
            self.out.write_char(' ')?;
        }
        self.first = false;
        self.out.write_fmt(args)
    }

    fn end(self) -> fmt::Result {
        self.out.write_char('\n')
    }
}

/// `rdma link show`: one line per PORT_GET reply, e.g.
/// `link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0`.
pub fn rdma_link_show(out: &mut dyn Write, ports: &[NldevMsg]) -> fmt::Result {
    for msg in ports {
        let a = &msg.attrs;
        let (Some(name), Some(port)) = (a.dev_name.as_deref(), a.port_index) else {
            continue;
        };
        let mut f = Fields::new(out);
        f.field(format_args!("link {name}/{port}"))?;
        if let Some(s) = a.port_state {
            f.field(format_args!("state {}", s.name()))?;
        }
        if let Some(s) = a.port_phys_state {
            f.field(format_args!("physical_state {}", s.name()))?;
        }
        if let Some(n) = a.ndev_name.as_deref() {
            f.field(format_args!("netdev {n}"))?;
        }
        f.end()?;
    }
    Ok(())
}

/// `rdma dev show`: one line per GET reply, e.g.
/// `0: rxe0: node_type ca fw 6.1.0 node_guid 5054:00ff:fe00:0001 sys_image_guid 5054:00ff:fe00:0001`.
pub fn rdma_dev_show(out: &mut dyn Write, devs: &[NldevMsg]) -> fmt::Result {
    for msg in devs {
        let a = &msg.attrs;
        let (Some(index), Some(name)) = (a.dev_index, a.dev_name.as_deref()) else {
            continue;
        };
        let mut f = Fields::new(out);
        f.field(format_args!("{index}: {name}:"))?;
        if let Some(t) = a.node_type {
            f.field(format_args!("node_type {}", t.name()))?;
        }
        if let Some(fw) = a.fw_version.as_deref() {
            f.field(format_args!("fw {fw}"))?;
        }
        if let Some(g) = a.node_guid {
            f.field(format_args!("node_guid {g}"))?;
        }
        if let Some(g) = a.sys_image_guid {
            f.field(format_args!("sys_image_guid {g}"))?;
        }
        f.end()?;
    }
    Ok(())
}

/// `rdma statistic show` for one port: `link rxe0/1 sent_pkts 0 rcvd_pkts 0 ...`.
pub fn rdma_stat_show(out: &mut dyn Write, dev_name: &str, port: u32, counters: &Counters) -> fmt::Result {
    let mut f = Fields::new(out);
    f.field(format_args!("link {dev_name}/{port}"))?;
    for (name, value) in counters.iter() {
        f.field(format_args!("{name} {value}"))?;
    }
    f.end()
}

/// `rdma statistic show` for every port of every device given.
pub fn rdma_stat_show_all<'a>(out: &mut dyn Write, devices: impl IntoIterator<Item = &'a Device>) -> fmt::Result {
    for dev in devices {
        for port in dev.ports() {
            rdma_stat_show(out, dev.name(), port.num(), &dev.counters())?;
        }
    }
    Ok(())
}

fn width_str(width: u8) -> &'static str {
    match width {
        1 => "1",
        2 => "4",
        4 => "8",
        8 => "12",
        16 => "2",
        _ => "invalid width",
    }
}

fn speed_str(speed: u8) -> &'static str {
    match speed {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        _ => "invalid speed",
    }
}

fn vl_str(vl: u8) -> &'static str {
    match vl {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    }
}

/// `ibv_devinfo` (`verbose` = `-v`) for one device.
pub fn ibv_devinfo(out: &mut dyn Write, dev: &Device, verbose: bool) -> fmt::Result {
    let a = dev.attr();
    writeln!(out, "hca_id:\t{}", dev.name())?;
    // rxe devices present the InfiniBand transport over an Ethernet link.
    writeln!(out, "\ttransport:\t\t\tInfiniBand (0)")?;
    writeln!(out, "\tfw_ver:\t\t\t\t{}", a.fw_ver_string())?;
    writeln!(out, "\tnode_guid:\t\t\t{}", a.node_guid)?;
    writeln!(out, "\tsys_image_guid:\t\t\t{}", a.sys_image_guid)?;
    writeln!(out, "\tvendor_id:\t\t\t0x{:04x}", a.vendor_id)?;
    writeln!(out, "\tvendor_part_id:\t\t\t{}", a.vendor_part_id)?;
    writeln!(out, "\thw_ver:\t\t\t\t0x{:X}", a.hw_ver)?;
    writeln!(out, "\tphys_port_cnt:\t\t\t{}", dev.phys_port_cnt())?;
    if verbose {
        writeln!(out, "\tmax_mr_size:\t\t\t0x{:x}", a.max_mr_size)?;
        writeln!(out, "\tpage_size_cap:\t\t\t0x{:x}", a.page_size_cap)?;
        writeln!(out, "\tmax_qp:\t\t\t\t{}", a.max_qp)?;
        writeln!(out, "\tmax_qp_wr:\t\t\t{}", a.max_qp_wr)?;
        writeln!(out, "\tdevice_cap_flags:\t\t0x{:08x}", a.device_cap_flags.0 & 0xffff_ffff)?;
        for name in a.device_cap_flags.names() {
            writeln!(out, "\t\t\t\t\t{name}")?;
        }
        let unknown = a.device_cap_flags.unknown();
        if unknown != 0 {
            writeln!(out, "\t\t\t\t\tUnknown flags: 0x{unknown:X}")?;
        }
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
        writeln!(out, "\tatomic_cap:\t\t\t{} ({})", a.atomic_cap.name(), a.atomic_cap as u8)?;
        writeln!(out, "\tmax_ee:\t\t\t\t{}", a.max_ee)?;
        writeln!(out, "\tmax_rdd:\t\t\t{}", a.max_rdd)?;
        writeln!(out, "\tmax_mw:\t\t\t\t{}", a.max_mw)?;
        writeln!(out, "\tmax_raw_ipv6_qp:\t\t{}", a.max_raw_ipv6_qp)?;
        writeln!(out, "\tmax_raw_ethy_qp:\t\t{}", a.max_raw_ethy_qp)?;
        writeln!(out, "\tmax_mcast_grp:\t\t\t{}", a.max_mcast_grp)?;
        writeln!(out, "\tmax_mcast_qp_attach:\t\t{}", a.max_mcast_qp_attach)?;
        writeln!(out, "\tmax_total_mcast_qp_attach:\t{}", a.max_total_mcast_qp_attach)?;
        writeln!(out, "\tmax_ah:\t\t\t\t{}", a.max_ah)?;
        writeln!(out, "\tmax_fmr:\t\t\t0")?;
        writeln!(out, "\tmax_srq:\t\t\t{}", a.max_srq)?;
        if a.max_srq != 0 {
            writeln!(out, "\tmax_srq_wr:\t\t\t{}", a.max_srq_wr)?;
            writeln!(out, "\tmax_srq_sge:\t\t\t{}", a.max_srq_sge)?;
        }
        writeln!(out, "\tmax_pkeys:\t\t\t{}", a.max_pkeys)?;
        writeln!(out, "\tlocal_ca_ack_delay:\t\t{}", a.local_ca_ack_delay)?;
    }
    for port in dev.ports() {
        let p = port.attr();
        writeln!(out, "\t\tport:\t{}", port.num())?;
        writeln!(out, "\t\t\tstate:\t\t\t{} ({})", p.state.verbs_name(), p.state.code())?;
        writeln!(out, "\t\t\tmax_mtu:\t\t{} ({})", p.max_mtu.bytes(), p.max_mtu.code())?;
        writeln!(out, "\t\t\tactive_mtu:\t\t{} ({})", p.active_mtu.bytes(), p.active_mtu.code())?;
        writeln!(out, "\t\t\tsm_lid:\t\t\t{}", p.sm_lid)?;
        writeln!(out, "\t\t\tport_lid:\t\t{}", p.lid)?;
        writeln!(out, "\t\t\tport_lmc:\t\t0x{:02x}", p.lmc)?;
        writeln!(out, "\t\t\tlink_layer:\t\t{}", p.link_layer.name())?;
        if verbose {
            writeln!(out, "\t\t\tmax_msg_sz:\t\t0x{:x}", p.max_msg_sz)?;
            writeln!(out, "\t\t\tport_cap_flags:\t\t0x{:08x}", p.port_cap_flags)?;
            writeln!(out, "\t\t\tport_cap_flags2:\t0x{:04x}", p.port_cap_flags2)?;
            writeln!(out, "\t\t\tmax_vl_num:\t\t{} ({})", vl_str(p.max_vl_num), p.max_vl_num)?;
            writeln!(out, "\t\t\tbad_pkey_cntr:\t\t0x{:x}", p.bad_pkey_cntr)?;
            writeln!(out, "\t\t\tqkey_viol_cntr:\t\t0x{:x}", p.qkey_viol_cntr)?;
            writeln!(out, "\t\t\tsm_sl:\t\t\t{}", p.sm_sl)?;
            writeln!(out, "\t\t\tpkey_tbl_len:\t\t{}", p.pkey_tbl_len)?;
            writeln!(out, "\t\t\tgid_tbl_len:\t\t{}", p.gid_tbl_len)?;
            writeln!(out, "\t\t\tsubnet_timeout:\t\t{}", p.subnet_timeout)?;
            writeln!(out, "\t\t\tinit_type_reply:\t{}", p.init_type_reply)?;
            writeln!(out, "\t\t\tactive_width:\t\t{}X ({})", width_str(p.active_width), p.active_width)?;
            writeln!(out, "\t\t\tactive_speed:\t\t{} ({})", speed_str(p.active_speed), p.active_speed)?;
            writeln!(out, "\t\t\tphys_state:\t\t{} ({})", p.phys_state.verbs_name(), p.phys_state.code())?;
            for (i, g) in port.gid_table().iter() {
                match g.gid_type {
                    GidType::RoceV2 => {
                        writeln!(out, "\t\t\tGID[{i:3}]:\t\t{}, {}", g.gid.compressed(), g.gid_type.devinfo_name())?
                    }
                    GidType::RoceV1 => writeln!(out, "\t\t\tGID[{i:3}]:\t\t{}, {}", g.gid, g.gid_type.devinfo_name())?,
                }
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The `show_gids` script: every non-zero GID of every port, devices in name
/// order (the script globs `/sys/class/infiniband/*`), then the count.
pub fn show_gids<'a>(out: &mut dyn Write, devices: impl IntoIterator<Item = &'a Device>) -> fmt::Result {
    let mut devs: alloc::vec::Vec<&Device> = devices.into_iter().collect();
    devs.sort_by(|a, b| a.name().cmp(b.name()));
    writeln!(out, "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV")?;
    writeln!(out, "---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---")?;
    let mut count = 0usize;
    for dev in devs {
        for port in dev.ports() {
            for (i, g) in port.gid_table().iter() {
                let ver = g.gid_type.short_name();
                match g.gid.to_ipv4_mapped() {
                    Some(v4) => writeln!(
                        out,
                        "{}\t{}\t{}\t{}\t{} \t{}\t{}",
                        dev.name(),
                        port.num(),
                        i,
                        g.gid,
                        v4,
                        ver,
                        g.ndev.name
                    )?,
                    None => {
                        writeln!(out, "{}\t{}\t{}\t{}\t\t\t{}\t{}", dev.name(), port.num(), i, g.gid, ver, g.ndev.name)?
                    }
                }
                count += 1;
            }
        }
    }
    writeln!(out, "n_gids_found={count}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::netdev::NetdevInfo;
    use crate::core::nldev::NldevMsg;
    use crate::core::testutil::{eth0, rxe_core};
    use alloc::string::String;
    use alloc::vec;
    use alloc::vec::Vec;

    fn setup() -> (crate::core::RdmaCore, Vec<NetdevInfo>) {
        let net = vec![eth0()];
        let mut core = rxe_core();
        core.link_add(&net, "rxe0", "rxe", "eth0").unwrap();
        (core, net)
    }

    #[test]
    fn link_show_matches_the_issue_line() {
        let (mut core, net) = setup();
        let replies = core.nldev(&net, &NldevMsg::port_dump(None)).unwrap();
        let mut s = String::new();
        rdma_link_show(&mut s, &replies).unwrap();
        assert_eq!(s, "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0\n");
    }

    #[test]
    fn dev_show_matches_the_linux_shape() {
        let (mut core, net) = setup();
        let replies = core.nldev(&net, &NldevMsg::get_dump()).unwrap();
        let mut s = String::new();
        rdma_dev_show(&mut s, &replies).unwrap();
        assert_eq!(
            s,
            "0: rxe0: node_type ca fw 6.1.0 node_guid 5054:00ff:fe00:0001 \
             sys_image_guid 5054:00ff:fe00:0001\n"
        );
    }

    #[test]
    fn stat_show_lists_counters_in_rxe_order() {
        let (core, _net) = setup();
        let mut s = String::new();
        rdma_stat_show_all(&mut s, core.devices()).unwrap();
        assert_eq!(
            s,
            "link rxe0/1 sent_pkts 0 rcvd_pkts 0 duplicate_request 0 out_of_seq_request 0 \
             rcvd_rnr_err 0 send_rnr_err 0 rcvd_seq_err 0 ack_deferred 0 retry_exceeded_err 0 \
             retry_rnr_exceeded_err 0 completer_retry_err 0 send_err 0 link_downed 0 \
             rdma_sends 0 rdma_recvs 0\n"
        );
    }

    #[test]
    fn show_gids_matches_the_issue_table() {
        let (core, _net) = setup();
        let mut s = String::new();
        show_gids(&mut s, core.devices()).unwrap();
        assert_eq!(
            s,
            "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV\n\
             ---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---\n\
             rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe00:0001\t\t\tv2\teth0\n\
             rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1 \tv2\teth0\n\
             n_gids_found=2\n"
        );
    }

    #[test]
    fn ibv_devinfo_shape() {
        let (core, _net) = setup();
        let dev = core.device_by_name("rxe0").unwrap();
        let mut s = String::new();
        ibv_devinfo(&mut s, dev, false).unwrap();
        assert_eq!(
            s,
            "hca_id:\trxe0\n\
             \ttransport:\t\t\tInfiniBand (0)\n\
             \tfw_ver:\t\t\t\t0.0.0\n\
             \tnode_guid:\t\t\t5054:00ff:fe00:0001\n\
             \tsys_image_guid:\t\t\t5054:00ff:fe00:0001\n\
             \tvendor_id:\t\t\t0xffffff\n\
             \tvendor_part_id:\t\t\t0\n\
             \thw_ver:\t\t\t\t0x0\n\
             \tphys_port_cnt:\t\t\t1\n\
             \t\tport:\t1\n\
             \t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\
             \t\t\tmax_mtu:\t\t4096 (5)\n\
             \t\t\tactive_mtu:\t\t1024 (3)\n\
             \t\t\tsm_lid:\t\t\t0\n\
             \t\t\tport_lid:\t\t0\n\
             \t\t\tport_lmc:\t\t0x00\n\
             \t\t\tlink_layer:\t\tEthernet\n\n"
        );
    }

    #[test]
    fn ibv_devinfo_verbose_has_limits_and_gids() {
        let (core, _net) = setup();
        let dev = core.device_by_name("rxe0").unwrap();
        let mut s = String::new();
        ibv_devinfo(&mut s, dev, true).unwrap();
        for line in [
            "\tmax_qp:\t\t\t\t1048560\n",
            "\tmax_qp_wr:\t\t\t1048576\n",
            "\tdevice_cap_flags:\t\t0x01223c76\n",
            "\t\t\t\t\tMEM_WINDOW_TYPE_2B\n",
            "\tmax_sge:\t\t\t32\n",
            "\tmax_cqe:\t\t\t32767\n",
            "\tmax_mr:\t\t\t\t524287\n",
            "\tmax_pd:\t\t\t\t1048576\n",
            "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
            "\t\t\tmax_msg_sz:\t\t0x800000\n",
            "\t\t\tport_cap_flags:\t\t0x00010000\n",
            "\t\t\tpkey_tbl_len:\t\t1\n",
            "\t\t\tgid_tbl_len:\t\t1024\n",
            "\t\t\tactive_width:\t\t1X (1)\n",
            "\t\t\tactive_speed:\t\t2.5 Gbps (1)\n",
            "\t\t\tphys_state:\t\tLINK_UP (5)\n",
            "\t\t\tGID[  0]:\t\tfe80::5054:ff:fe00:1, RoCE v2\n",
            "\t\t\tGID[  1]:\t\t::ffff:10.0.0.1, RoCE v2\n",
        ] {
            assert!(s.contains(line), "missing {line:?} in\n{s}");
        }
        assert_eq!(s.matches("GID[").count(), 2);
    }
}
