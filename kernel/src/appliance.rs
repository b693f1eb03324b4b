//! The one owner of the appliance's state: the network (NICs, netdevs, the
//! RDMA core and its devices), the verbs ring server and the console. The
//! poll loop polls it with `&mut`; each pass lends every part exactly the
//! `&mut` it needs, in order: the ring's receive queues (so a frame finds
//! the receive the host posted before it), the network (frames in,
//! transports, timers), then the ring (WQEs into the transports, completions out to the
//! host's CQ rings), then the console's running jobs (ping, pingpong,
//! netbench), then the console (a typed command runs against the network
//! and may start a job). Nothing is shared behind a cell.

use crate::jobs::Jobs;
use crate::net::Net;
use crate::poll::{Task, Timers};
use crate::shell::Shell;
use crate::time::Instant;
use crate::verbs::Verbs;

pub struct Appliance {
    /// `None` on a machine without a supported NIC: the console still runs.
    pub net: Option<Net>,
    /// `None` without an ivshmem device.
    pub verbs: Option<Verbs>,
    pub shell: Shell,
    /// What console commands left running (ping, pingpong, netbench).
    pub jobs: Jobs,
}

impl Task for Appliance {
    fn poll(&mut self, now: Instant, timers: &mut Timers) -> bool {
        let mut busy = false;
        // The receives the host posted go in before the frames that may be
        // meant for them: a host's receive is posted once it is in the ring.
        if let Some(verbs) = self.verbs.as_mut() {
            busy |= verbs.pump_receives(now, self.net.as_mut());
        }
        if let Some(net) = self.net.as_mut() {
            busy |= net.poll(now, timers);
        }
        if let Some(verbs) = self.verbs.as_mut() {
            busy |= verbs.poll(now, self.net.as_mut());
        }
        let t = crate::prof::start();
        if let Some(net) = self.net.as_mut() {
            busy |= self.jobs.poll(net, now);
        }
        busy |= self.shell.poll(now, timers, self.net.as_mut(), self.verbs.as_mut(), &mut self.jobs);
        crate::prof::SHELL.add(t);
        busy
    }

    fn may_halt(&mut self) -> bool {
        self.verbs.as_mut().is_none_or(|v| v.may_halt())
    }

    fn deadline(&mut self, now: Instant) -> Option<Instant> {
        let net = self.net.as_mut().and_then(|n| n.deadline(now));
        let verbs = self.verbs.as_ref().and_then(|v| v.deadline(now));
        [net, verbs, self.jobs.deadline()].into_iter().flatten().min()
    }
}
