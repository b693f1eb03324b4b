//! `ibv_devinfo`: the appliance's devices and ports, as rdma-core's tool
//! prints them (`-v` for every attribute and the GID table, `-l` to list),
//! formatted by `verbs_ring::show::devinfo` like the firmware console's.

use clap::Parser;
use verbs::cli::{RingArgs, fail};
use verbs_ring::show::devinfo;

#[derive(Parser)]
#[command(name = "ibv_devinfo", about = "Print the appliance's RDMA devices (as rdma-core's ibv_devinfo)")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// use IB device DEV (default: all devices)
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    dev: Option<String>,
    /// use port PORT of IB device (default: all ports)
    #[arg(short = 'i', long = "ib-port", value_name = "PORT", value_parser = clap::value_parser!(u8).range(1..))]
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
    let mut out = String::new();
    if cli.list {
        let names: Vec<&str> = devs.iter().map(|d| d.name()).collect();
        // Writing into a String cannot fail.
        let _ = devinfo::list(&mut out, &names);
        print!("{out}");
        return;
    }
    if devs.is_empty() {
        eprintln!("No IB devices found");
        verbs::cli::exit(255);
    }
    let mut status = 0;
    for d in &devs {
        let view = d.view(cli.port).unwrap_or_else(|e| fail("ibv_devinfo", &e));
        // rdma-core's code for a port the device does not have; the other
        // devices are still printed.
        if cli.port.is_some_and(|p| p > view.attr.phys_port_cnt) {
            eprintln!("Invalid port requested for device");
            status |= 4;
            continue;
        }
        let _ = devinfo::write(&mut out, &view, cli.verbose);
    }
    print!("{out}");
    verbs::cli::exit(status);
}
