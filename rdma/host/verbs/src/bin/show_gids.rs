//! `show_gids`: the GID tables of the appliance's devices, in the layout
//! of rdma-core's `show_gids` script (full GID, IPv4 for mapped GIDs,
//! RoCE version, netdev).

use clap::Parser;
use verbs::cli::{RingArgs, fail};
use verbs::names;

#[derive(Parser)]
#[command(name = "show_gids", about = "Show the GID tables of the appliance's RDMA devices")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// Only this device
    dev: Option<String>,
    /// Only this port
    port: Option<u8>,
}

fn main() {
    let cli = Cli::parse();
    let run = || -> verbs::Result<()> {
        let ctx = cli.ring.open()?;
        let devs = match &cli.dev {
            Some(n) => vec![ctx.device(Some(n))?],
            None => ctx.devices()?,
        };
        println!("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV");
        println!("---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---");
        let mut n = 0;
        for d in &devs {
            let ports = d.query_device()?.phys_port_cnt;
            for port in 1..=ports {
                if cli.port.is_some_and(|p| p != port) {
                    continue;
                }
                for g in d.gid_table(port)? {
                    let v4 = names::gid_ipv4(&g.gid).map(|a| a.to_string()).unwrap_or_default();
                    let ver = if g.gid_type == verbs_ring::cmd::gid_type::ROCE_V2 { "v2" } else { "v1" };
                    let netdev = &d.link().netdev;
                    println!(
                        "{}\t{port}\t{}\t{}\t{v4:<12}  \t{ver}\t{netdev}",
                        d.name(),
                        g.index,
                        names::gid_full(&g.gid)
                    );
                    n += 1;
                }
            }
        }
        println!("n_gids_found={n}");
        Ok(())
    };
    if let Err(e) = run() {
        fail("show_gids", &e)
    }
}
