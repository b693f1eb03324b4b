//! `rc_pingpong`: ibv_rc_pingpong for the appliance: the same options, the
//! same TCP exchange on port 18515 ([`verbs::pingpong`]) and the same
//! ping-pong of SENDs over an RC connection ([`verbs::pingpong::session`]).
//! Without a server name it is the server.
//! `-e` sleeps on each completion event (the appliance's doorbell) without
//! spinning first; without a doorbell both ways poll.

use clap::Parser;
use verbs::pingpong::PingpongArgs;
use verbs::pingpong::session::{self, Session, Transport};

#[derive(Parser)]
#[command(name = "rc_pingpong", about = "Ping-pong over an RC connection (as ibv_rc_pingpong)")]
struct Cli {
    #[command(flatten)]
    pp: PingpongArgs,
    /// validate received buffer
    #[arg(short = 'c', long = "chk")]
    chk: bool,
}

fn main() {
    let cli = Cli::parse();
    let pp = &cli.pp;
    session::main(&Session {
        transport: Transport::Rc,
        common: &pp.common,
        size: pp.size,
        mtu: Some(pp.mtu),
        chk: cli.chk,
    });
}
