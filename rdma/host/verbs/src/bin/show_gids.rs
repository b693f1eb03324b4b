//! `show_gids`: the GID tables of the appliance's devices, as the
//! `show_gids` script prints them, formatted by `verbs_ring::show::gids`
//! like the firmware console's.

use clap::Parser;
use verbs::cli::{RingArgs, fail};
use verbs_ring::show::gids;

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
    let run = || -> verbs::Result<String> {
        let ctx = cli.ring.open()?;
        let devs = match &cli.dev {
            Some(n) => vec![ctx.device(Some(n))?],
            None => ctx.devices()?,
        };
        let views = devs.iter().map(|d| d.view(cli.port)).collect::<verbs::Result<Vec<_>>>()?;
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = gids::write(&mut out, &views);
        Ok(out)
    };
    match run() {
        Ok(out) => print!("{out}"),
        Err(e) => fail("show_gids", &e),
    }
}
