//! The console's diagnostic jobs: work a command starts that runs over many
//! passes of the poll loop (`ping`, the pingpongs, `netbench send`) while
//! the prompt waits. They are not part of the network: the appliance owns
//! them beside it and lends each job the network for the pass
//! ([`Jobs::poll`]); the console starts them through [`Jobs`]' fields and
//! each job releases the prompt when it ends.

pub mod netbench;
pub mod ping;
pub mod pingpong;

use crate::net::Net;
use crate::time::Instant;

#[derive(Default)]
pub struct Jobs {
    pub ping: Option<ping::PingJob>,
    pub pingpong: pingpong::Pingpong,
    pub netbench: netbench::Sender,
}

impl Jobs {
    /// Advances every running job on `net`; returns whether any did work.
    pub fn poll(&mut self, net: &mut Net, now: Instant) -> bool {
        let mut busy = ping::poll(&mut self.ping, net, now);
        busy |= pingpong::poll(&mut self.pingpong, net, now);
        busy |= netbench::poll(&mut self.netbench, net, now);
        busy
    }

    /// Ctrl-C: ends every running job as its tool ends on SIGINT (ping
    /// prints its statistics; a pingpong's QP lingers for the peer's last
    /// retransmissions); each releases the prompt.
    pub fn interrupt(&mut self, net: &mut Net, now: Instant) {
        ping::interrupt(&mut self.ping, net, now);
        pingpong::interrupt(&mut self.pingpong, net, now);
        self.netbench.interrupt();
    }

    /// When a job next needs a pass by itself.
    pub fn deadline(&self) -> Option<Instant> {
        let ping = self.ping.as_ref().map(|p| p.deadline());
        [ping, pingpong::deadline(&self.pingpong), self.netbench.deadline()].into_iter().flatten().min()
    }
}
