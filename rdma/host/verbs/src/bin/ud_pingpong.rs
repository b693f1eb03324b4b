//! `ud_pingpong`: ibv_ud_pingpong for the appliance: the same options, the
//! same TCP exchange on port 18515 ([`verbs::pingpong`]) and the same
//! ping-pong of UD datagrams, each received behind its 40-byte GRH
//! ([`verbs::pingpong::session`]). Without a server name it is the server.

use clap::Parser;
use verbs::pingpong::CommonArgs;
use verbs::pingpong::session::{self, Session, Transport};

#[derive(Parser)]
#[command(name = "ud_pingpong", about = "Ping-pong of UD datagrams (as ibv_ud_pingpong)")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// size of message to exchange
    #[arg(short = 's', long = "size", default_value_t = 2048)]
    size: usize,
    /// validate received buffer
    #[arg(short = 'c', long = "chk")]
    chk: bool,
}

fn main() {
    let cli = Cli::parse();
    session::main(&Session { transport: Transport::Ud, common: &cli.common, size: cli.size, mtu: None, chk: cli.chk });
}
