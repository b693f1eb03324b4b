//! The host's end of the appliance's doorbell (`verbs_ring::wake` has the
//! handshakes): when the appliance published an `ivshmem-doorbell` in its
//! wake block, the context connects to the ring's ivshmem server (the
//! socket beside the ring file, [`ivshmem::socket_for`]) as a peer, records
//! its peer ID in its slot, rings the appliance after publishing work the
//! appliance asked to be rung for ([`Wake::kick`]), and has a thread block on
//! its own eventfd: each wake-up the appliance sends (a CQ event it asked
//! for) bumps a generation that waiters sleep on ([`Wake::wait_after`]) and
//! runs the listeners a layer above registered (our libibverbs' completion
//! channels). The same thread takes the server's notices of other peers as
//! they come: left unread they would fill the connection, and the server
//! drops a peer it cannot tell (and with it the appliance's way to wake
//! this process). Without a doorbell (`ivshmem-plain`) none of this exists
//! and waiting is polling with a back-off.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ivshmem::Peer;
use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
use verbs_ring::SharedMem;
use verbs_ring::wake::{WakeBlock, host_must_ring};

use crate::context::lock;
use crate::error::{Error, Result};

/// A function the wake-up thread runs on every wake-up.
pub type Listener = Box<dyn Fn() + Send + Sync>;

/// What the wake-up thread shares with waiters.
#[derive(Default)]
struct Hub {
    /// Wake-ups so far.
    generation: Mutex<u64>,
    changed: Condvar,
    listeners: Mutex<Vec<Listener>>,
}

/// One context's doorbell.
pub struct Wake {
    peer: Arc<Mutex<Peer>>,
    fw_peer: u16,
    fw_vector: u16,
    hub: Arc<Hub>,
    /// Raised to end the wake-up thread.
    stop: Arc<OwnedFd>,
    /// Doorbells this process rang.
    rings: Mutex<u64>,
}

impl Wake {
    /// Connects to the ivshmem server beside `ring` as a peer of the
    /// appliance `block` describes.
    pub(crate) fn connect(ring: &Path, block: &WakeBlock) -> Result<Wake> {
        let socket = ivshmem::socket_for(ring);
        let err = |source: io::Error| Error::Doorbell { socket: socket.clone(), source };
        let mut peer = Peer::connect(&socket).map_err(err)?;
        let fw_peer = u16::try_from(block.fw_peer).map_err(|_| {
            err(io::Error::new(io::ErrorKind::InvalidData, format!("appliance peer ID {}", block.fw_peer)))
        })?;
        if !peer.has_peer(fw_peer) {
            peer.update().map_err(err)?;
        }
        if !peer.has_peer(fw_peer) {
            return Err(err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the server has no peer {fw_peer}, the appliance (a server of another ring?)"),
            )));
        }
        let own = peer
            .own(u16::try_from(block.host_vector).unwrap_or(u16::MAX))
            .ok_or_else(|| err(io::Error::new(io::ErrorKind::InvalidData, "no vector to be woken on")))?
            .try_clone_to_owned()
            .map_err(err)?;
        let notices = peer.socket().try_clone_to_owned().map_err(err)?;
        let stop = Arc::new(eventfd(0, EventfdFlags::CLOEXEC).map_err(|e| err(e.into()))?);
        let hub = Arc::new(Hub::default());
        let peer = Arc::new(Mutex::new(peer));
        spawn(Fds { own, notices, stop: stop.clone() }, peer.clone(), hub.clone()).map_err(err)?;
        let fw_vector = u16::try_from(block.fw_vector).unwrap_or(0);
        Ok(Wake { peer, fw_peer, fw_vector, hub, stop, rings: Mutex::new(0) })
    }

    /// This process's peer ID.
    pub fn peer_id(&self) -> u16 {
        lock(&self.peer).id()
    }

    /// After publishing an entry the appliance consumes: ring it if it asked
    /// (at most one host rings per halt). A ring that fails (the server or
    /// the appliance went away) is not reported: the appliance still finds
    /// the entry at its next heartbeat.
    pub fn kick(&self, mem: &impl SharedMem) {
        if host_must_ring(mem).unwrap_or(false) {
            let _ = lock(&self.peer).ring(self.fw_peer, self.fw_vector);
            *lock(&self.rings) += 1;
        }
    }

    /// Doorbells this process rang so far.
    pub fn rings(&self) -> u64 {
        *lock(&self.rings)
    }

    /// Wake-ups so far: read before arming, then [`Wake::wait_after`].
    pub fn generation(&self) -> u64 {
        *lock(&self.hub.generation)
    }

    /// Sleeps until a wake-up after generation `seen`, or `timeout`; whether
    /// one came.
    pub fn wait_after(&self, seen: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = lock(&self.hub.generation);
        while *g == seen {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self.hub.changed.wait_timeout(g, left).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        true
    }

    /// Runs `f` on the wake-up thread after every wake-up (until the
    /// context closes).
    pub fn on_wake(&self, f: Listener) {
        lock(&self.hub.listeners).push(f);
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        let _ = ivshmem::peer::signal(self.stop.as_fd());
    }
}

/// What the wake-up thread blocks on.
struct Fds {
    /// This peer's eventfd: the appliance rang.
    own: OwnedFd,
    /// The connection to the server: notices of other peers.
    notices: OwnedFd,
    /// The context closed.
    stop: Arc<OwnedFd>,
}

/// The wake-up thread.
fn spawn(fds: Fds, peer: Arc<Mutex<Peer>>, hub: Arc<Hub>) -> io::Result<()> {
    let Fds { own, notices, stop } = fds;
    let body = move || {
        // Until the server goes (or says something this side cannot read).
        let mut listening = true;
        loop {
            let (woken, stopped, noticed) = {
                // A closed connection reports a hang-up whatever is asked,
                // so once the server is gone its socket is left out.
                let mut fds = [
                    PollFd::new(&own, PollFlags::IN),
                    PollFd::new(&*stop, PollFlags::IN),
                    PollFd::new(&notices, PollFlags::IN),
                ];
                let n = if listening { 3 } else { 2 };
                match poll(&mut fds[..n], None) {
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => return,
                }
                (!fds[0].revents().is_empty(), !fds[1].revents().is_empty(), !fds[2].revents().is_empty())
            };
            if stopped {
                return;
            }
            if noticed && listening {
                let mut p = lock(&peer);
                listening = p.update().is_ok() && !p.server_gone();
            }
            if woken {
                let mut count = [0u8; 8];
                let _ = rustix::io::read(&own, &mut count);
                *lock(&hub.generation) += 1;
                hub.changed.notify_all();
                for f in lock(&hub.listeners).iter() {
                    f();
                }
            }
        }
    };
    std::thread::Builder::new().name("verbs-wake".into()).spawn(body).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ivshmem::{Server, Stopper};

    /// An ivshmem server for a ring file `ring` in a new folder, run in a
    /// thread: the folder, how to stop it, the thread.
    fn serve() -> (tempfile::TempDir, Stopper, std::thread::JoinHandle<io::Result<()>>) {
        let dir = tempfile::tempdir().unwrap();
        let ring = dir.path().join("ring");
        let shm = std::fs::File::create(&ring).unwrap();
        shm.set_len(4096).unwrap();
        let mut server = Server::bind(&ivshmem::socket_for(&ring), shm, 1).unwrap();
        let stopper = server.stopper();
        (dir, stopper, std::thread::spawn(move || server.run()))
    }

    /// Peers come and go by the thousand (a soak's host processes) while
    /// this context waits: its thread takes the notices, so the server keeps
    /// it, and the appliance can still wake it.
    #[test]
    fn the_server_keeps_a_peer_that_takes_its_notices() {
        let (dir, stopper, t) = serve();
        let ring = dir.path().join("ring");
        let socket = ivshmem::socket_for(&ring);
        // The appliance's side, reading its notices as QEMU does.
        let mut fw = Peer::connect(&socket).unwrap();
        let wake = Wake::connect(&ring, &WakeBlock::ivshmem(fw.id())).unwrap();
        for i in 0..2000 {
            drop(Peer::connect(&socket).unwrap());
            if i % 50 == 0 {
                fw.update().unwrap();
            }
        }
        let seen = wake.generation();
        fw.ring(wake.peer_id(), 0).expect("the server kept our peer");
        assert!(wake.wait_after(seen, Duration::from_secs(60)), "the ring woke the thread");
        drop(wake);
        stopper.stop();
        t.join().unwrap().unwrap();
    }

    /// CPU clock ticks each of this process's wake-up threads used so far,
    /// by thread ID (other tests' contexts come and go meanwhile).
    fn wake_threads_ticks() -> std::collections::BTreeMap<String, u64> {
        let tasks = std::fs::read_dir("/proc/self/task").unwrap();
        tasks
            .flatten()
            .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "verbs-wake"))
            .filter_map(|t| {
                Some((t.file_name().into_string().ok()?, std::fs::read_to_string(t.path().join("stat")).ok()?))
            })
            .map(|(tid, stat)| {
                // utime and stime: fields 14 and 15, counted after the
                // parenthesised command name.
                let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
                let f: Vec<&str> = rest.split_whitespace().collect();
                let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                (tid, field(11) + field(12))
            })
            .collect()
    }

    /// The server goes away under an open context: its thread stops
    /// listening to the closed connection instead of spinning on the
    /// hang-up, and the context's rings fail quietly.
    #[test]
    fn a_server_that_goes_leaves_the_thread_asleep() {
        let (dir, stopper, t) = serve();
        let ring = dir.path().join("ring");
        let socket = ivshmem::socket_for(&ring);
        let fw = Peer::connect(&socket).unwrap();
        let wake = Wake::connect(&ring, &WakeBlock::ivshmem(fw.id())).unwrap();
        stopper.stop();
        t.join().unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let before = wake_threads_ticks();
        std::thread::sleep(Duration::from_secs(1));
        let after = wake_threads_ticks();
        let used = after.iter().filter_map(|(tid, t)| Some(t.saturating_sub(*before.get(tid)?))).max();
        // A spinning thread would use about 100 ticks of the second.
        assert!(used.is_some_and(|u| u < 20), "a wake-up thread used {used:?} ticks in a second");
        drop(wake);
    }
}
