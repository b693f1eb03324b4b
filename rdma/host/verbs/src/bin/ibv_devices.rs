//! `ibv_devices`: the appliance's devices and their node GUIDs, as
//! rdma-core's tool prints them, formatted by `verbs_ring::show::devices`
//! like the firmware console's.

use clap::Parser;
use verbs::cli::{RingArgs, fail};
use verbs_ring::show::devices;

#[derive(Parser)]
#[command(name = "ibv_devices", about = "List the appliance's RDMA devices (as rdma-core's ibv_devices)")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
}

fn main() {
    let cli = Cli::parse();
    let ctx = cli.ring.open().unwrap_or_else(|e| fail("ibv_devices", &e));
    let links = ctx.links().unwrap_or_else(|e| fail("ibv_devices", &e));
    let infos: Vec<_> = links.iter().map(|l| l.info).collect();
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = devices::write(&mut out, &infos);
    print!("{out}");
}
