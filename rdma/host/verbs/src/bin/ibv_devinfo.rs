//! `ibv_devinfo`: the appliance's devices and ports, in rdma-core's
//! layout (`-v` for every attribute and the GID table, `-l` to list).

use clap::Parser;
use verbs::cli::{RingArgs, fail};
use verbs::{Device, names};

#[derive(Parser)]
#[command(name = "ibv_devinfo", about = "Print the appliance's RDMA devices (as rdma-core's ibv_devinfo)")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// use IB device DEV (default: all devices)
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    dev: Option<String>,
    /// use port PORT of IB device (default: all ports)
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    port: Option<u8>,
    /// print only the IB devices names
    #[arg(short = 'l', long = "list")]
    list: bool,
    /// print all the attributes of the IB device(s)
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,
}

fn main() {
    let cli = Cli::parse();
    let ctx = cli.ring.open().unwrap_or_else(|e| fail("ibv_devinfo", &e));
    let devs = match &cli.dev {
        Some(n) => vec![ctx.device(Some(n)).unwrap_or_else(|e| fail("ibv_devinfo", &e))],
        None => ctx.devices().unwrap_or_else(|e| fail("ibv_devinfo", &e)),
    };
    if cli.list {
        println!("{} HCA{} found:", devs.len(), if devs.len() == 1 { "" } else { "s" });
        for d in &devs {
            println!("\t{}", d.name());
        }
        return;
    }
    if devs.is_empty() {
        println!("No IB devices found");
        return;
    }
    for d in &devs {
        if let Err(e) = print_device(d, cli.port, cli.verbose) {
            fail("ibv_devinfo", &e);
        }
    }
}

fn print_device(d: &Device, only_port: Option<u8>, verbose: bool) -> verbs::Result<()> {
    let a = d.query_device()?;
    println!("hca_id:\t{}", d.name());
    println!("\ttransport:\t\t\tInfiniBand (0)");
    println!("\tfw_ver:\t\t\t\t{}", names::fw_ver(a.fw_ver));
    println!("\tnode_guid:\t\t\t{}", names::guid(a.node_guid));
    println!("\tsys_image_guid:\t\t\t{}", names::guid(a.sys_image_guid));
    println!("\tvendor_id:\t\t\t{:#06x}", a.vendor_id);
    println!("\tvendor_part_id:\t\t\t{}", a.vendor_part_id);
    println!("\thw_ver:\t\t\t\t{:#x}", a.hw_ver);
    println!("\tphys_port_cnt:\t\t\t{}", a.phys_port_cnt);
    if verbose {
        println!("\tmax_mr_size:\t\t\t{:#x}", a.max_mr_size);
        println!("\tpage_size_cap:\t\t\t{:#x}", a.page_size_cap);
        for (k, v) in [("max_qp", a.max_qp), ("max_qp_wr", a.max_qp_wr)] {
            println!("\t{k}:\t\t\t\t{v}");
        }
        println!("\tdevice_cap_flags:\t\t{:#010x}", a.device_cap_flags);
        for (k, v) in [
            ("max_sge", a.max_sge),
            ("max_sge_rd", a.max_sge_rd),
            ("max_cq", a.max_cq),
            ("max_cqe", a.max_cqe),
            ("max_mr", a.max_mr),
            ("max_pd", a.max_pd),
            ("max_qp_rd_atom", a.max_qp_rd_atom),
            ("max_ee_rd_atom", a.max_ee_rd_atom),
            ("max_res_rd_atom", a.max_res_rd_atom),
            ("max_qp_init_rd_atom", a.max_qp_init_rd_atom),
            ("max_ee_init_rd_atom", a.max_ee_init_rd_atom),
        ] {
            println!("\t{k}:{}{v}", tabs(k));
        }
        println!("\tatomic_cap:\t\t\t{} ({})", names::atomic_cap(a.atomic_cap), a.atomic_cap);
        for (k, v) in [
            ("max_ee", a.max_ee),
            ("max_rdd", a.max_rdd),
            ("max_mw", a.max_mw),
            ("max_raw_ipv6_qp", a.max_raw_ipv6_qp),
            ("max_raw_ethy_qp", a.max_raw_ethy_qp),
            ("max_mcast_grp", a.max_mcast_grp),
            ("max_mcast_qp_attach", a.max_mcast_qp_attach),
            ("max_total_mcast_qp_attach", a.max_total_mcast_qp_attach),
            ("max_ah", a.max_ah),
            ("max_fmr", a.max_fmr),
            ("max_srq", a.max_srq),
            ("max_srq_wr", a.max_srq_wr),
            ("max_srq_sge", a.max_srq_sge),
            ("max_pkeys", u32::from(a.max_pkeys)),
            ("local_ca_ack_delay", u32::from(a.local_ca_ack_delay)),
        ] {
            println!("\t{k}:{}{v}", tabs(k));
        }
    }
    for port in 1..=a.phys_port_cnt {
        if only_port.is_some_and(|p| p != port) {
            continue;
        }
        let p = d.query_port(port)?;
        println!("\t\tport:\t{port}");
        println!("\t\t\tstate:\t\t\t{} ({})", names::port_state(p.state), p.state);
        println!("\t\t\tmax_mtu:\t\t{} ({})", names::mtu_bytes(p.max_mtu), p.max_mtu);
        println!("\t\t\tactive_mtu:\t\t{} ({})", names::mtu_bytes(p.active_mtu), p.active_mtu);
        println!("\t\t\tsm_lid:\t\t\t{}", p.sm_lid);
        println!("\t\t\tport_lid:\t\t{}", p.lid);
        println!("\t\t\tport_lmc:\t\t{:#04x}", p.lmc);
        println!("\t\t\tlink_layer:\t\t{}", names::link_layer(p.link_layer));
        if verbose {
            println!("\t\t\tmax_msg_sz:\t\t{:#x}", p.max_msg_sz);
            println!("\t\t\tport_cap_flags:\t\t{:#010x}", p.port_cap_flags);
            println!("\t\t\tport_cap_flags2:\t{:#06x}", p.port_cap_flags2);
            println!("\t\t\tmax_vl_num:\t\t{}", p.max_vl_num);
            println!("\t\t\tbad_pkey_cntr:\t\t{:#x}", p.bad_pkey_cntr);
            println!("\t\t\tqkey_viol_cntr:\t\t{:#x}", p.qkey_viol_cntr);
            println!("\t\t\tsm_sl:\t\t\t{}", p.sm_sl);
            println!("\t\t\tpkey_tbl_len:\t\t{}", p.pkey_tbl_len);
            println!("\t\t\tgid_tbl_len:\t\t{}", p.gid_tbl_len);
            println!("\t\t\tsubnet_timeout:\t\t{}", p.subnet_timeout);
            println!("\t\t\tinit_type_reply:\t{}", p.init_type_reply);
            println!("\t\t\tactive_width:\t\t{}", p.active_width);
            println!("\t\t\tactive_speed:\t\t{}", p.active_speed);
            println!("\t\t\tphys_state:\t\t{} ({})", names::phys_state(u32::from(p.phys_state)), p.phys_state);
            for g in d.gid_table(port)? {
                let ty = if g.gid_type == verbs_ring::cmd::gid_type::ROCE_V2 { "RoCE v2" } else { "RoCE v1" };
                println!("\t\t\tGID[{:>3}]:\t\t{}, {ty}", g.index, names::gid_compact(&g.gid));
            }
        }
        println!();
    }
    Ok(())
}

/// Tabs after `key:` so values line up at column 40, as rdma-core prints.
fn tabs(key: &str) -> &'static str {
    match key.len() + 2 {
        0..=7 => "\t\t\t\t",
        8..=15 => "\t\t\t",
        16..=23 => "\t\t",
        _ => "\t",
    }
}
