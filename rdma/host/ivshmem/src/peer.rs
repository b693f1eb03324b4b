//! A host program as a peer of the ring's ivshmem server: it gets an ID and
//! its own eventfds (to be woken on), and the eventfds of every other peer
//! (to ring them), the appliance's `ivshmem-doorbell` device among them.
//! The connection stays open while the program runs: when it closes, the
//! server tells the others that this ID left.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::msg::{self, MAX_ID, SHM, VERSION};

pub struct Peer {
    stream: UnixStream,
    id: u16,
    shm: OwnedFd,
    /// Every other peer's eventfds, vector 0 first.
    peers: BTreeMap<u16, Vec<OwnedFd>>,
    /// This peer's own eventfds, vector 0 first.
    own: Vec<OwnedFd>,
    /// The server closed the connection: no more peers will be heard of.
    server_gone: bool,
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("ivshmem server: {what}"))
}

impl Peer {
    /// Connects to the server on `socket` and reads its greeting up to this
    /// peer's first own vector (the peers already there come before it, so
    /// they are known on return). Later notices are taken by
    /// [`Peer::update`].
    pub fn connect(socket: &Path) -> io::Result<Peer> {
        let stream = UnixStream::connect(socket)?;
        let next = || msg::recv(&stream)?.ok_or_else(|| invalid("closed the connection during the greeting"));
        let v = next()?;
        if v.value != VERSION || v.fd.is_some() {
            return Err(invalid(&format!("protocol version {}, this side speaks {VERSION}", v.value)));
        }
        let m = next()?;
        let id = match u16::try_from(m.value) {
            Ok(id) if m.fd.is_none() && m.value <= MAX_ID => id,
            _ => return Err(invalid(&format!("bad ID message {}", m.value))),
        };
        let m = next()?;
        let shm = match (m.value, m.fd) {
            (SHM, Some(fd)) => fd,
            (v, _) => return Err(invalid(&format!("expected the shared memory, got {v}"))),
        };
        let mut peer = Peer { stream, id, shm, peers: BTreeMap::new(), own: Vec::new(), server_gone: false };
        while peer.own.is_empty() {
            let m = msg::recv(&peer.stream)?.ok_or_else(|| invalid("closed the connection before our vectors"))?;
            peer.take(m)?;
        }
        Ok(peer)
    }

    fn take(&mut self, m: msg::Message) -> io::Result<()> {
        let id = u16::try_from(m.value).map_err(|_| invalid(&format!("bad peer ID {}", m.value)))?;
        match (id == self.id, m.fd) {
            (true, Some(fd)) => self.own.push(fd),
            (true, None) => return Err(invalid("told that we left")),
            (false, Some(fd)) => self.peers.entry(id).or_default().push(fd),
            (false, None) => {
                self.peers.remove(&id);
            }
        }
        Ok(())
    }

    /// Takes the notices the server sent since (peers that came or left,
    /// this peer's further vectors), without waiting for more.
    pub fn update(&mut self) -> io::Result<()> {
        while !self.server_gone {
            let ready = {
                let mut fds = [PollFd::new(&self.stream, PollFlags::IN)];
                poll(&mut fds, Some(&Timespec::default()))?;
                !fds[0].revents().is_empty()
            };
            if !ready {
                break;
            }
            match msg::recv(&self.stream)? {
                Some(m) => self.take(m)?,
                None => self.server_gone = true,
            }
        }
        Ok(())
    }

    /// This peer's ID.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The connection to the server: readable when notices wait for
    /// [`Peer::update`]. A long-lived peer must take them as they come: the
    /// server drops one whose socket stays full.
    pub fn socket(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// The shared-memory file the server handed out.
    pub fn shm(&self) -> BorrowedFd<'_> {
        self.shm.as_fd()
    }

    /// Whether peer `id` is connected (as of the last [`Peer::update`]).
    pub fn has_peer(&self, id: u16) -> bool {
        self.peers.contains_key(&id)
    }

    /// Whether the server has gone away (as of the last [`Peer::update`]).
    pub fn server_gone(&self) -> bool {
        self.server_gone
    }

    /// Raises `vector` of peer `peer` (`NotFound` when it is not connected,
    /// or has no such vector).
    pub fn ring(&mut self, peer: u16, vector: u16) -> io::Result<()> {
        if !self.has_peer(peer) {
            self.update()?;
        }
        let fd = self.peers.get(&peer).and_then(|v| v.get(usize::from(vector))).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no ivshmem peer {peer} vector {vector}"))
        })?;
        signal(fd.as_fd())
    }

    /// This peer's own eventfd for `vector`: readable once rung.
    pub fn own(&self, vector: u16) -> Option<BorrowedFd<'_>> {
        self.own.get(usize::from(vector)).map(|f| f.as_fd())
    }
}

/// Raises an eventfd (adds 1 to its count).
pub fn signal(fd: BorrowedFd<'_>) -> io::Result<()> {
    rustix::io::write(fd, &1u64.to_ne_bytes())?;
    Ok(())
}

/// Waits until `fd` (an eventfd) is readable or `timeout` passes (`None`:
/// for ever), then takes its count; 0 when it timed out.
pub fn wait(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<u64> {
    let ts = timeout.map(|t| Timespec { tv_sec: t.as_secs() as i64, tv_nsec: i64::from(t.subsec_nanos()) });
    loop {
        let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
        match poll(&mut fds, ts.as_ref()) {
            Ok(0) => return Ok(0),
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let mut v = [0u8; 8];
    match rustix::io::read(fd, &mut v) {
        Ok(8) => Ok(u64::from_ne_bytes(v)),
        Ok(_) => Ok(0),
        // Another reader took it first.
        Err(rustix::io::Errno::AGAIN) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::Server;
    use std::fs::File;

    #[test]
    fn two_peers_ring_each_other_and_see_each_other_leave() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("ring.sock");
        let shm = File::options().read(true).write(true).create(true).truncate(true).open(dir.path().join("r"));
        let shm = shm.unwrap();
        shm.set_len(4096).unwrap();
        let mut server = Server::bind(&socket, shm, 1).unwrap();
        let stopper = server.stopper();
        let t = std::thread::spawn(move || server.run());
        let mut a = Peer::connect(&socket).unwrap();
        let mut b = Peer::connect(&socket).unwrap();
        assert_eq!((a.id(), b.id()), (0, 1));
        assert!(b.has_peer(0), "peers already there are known at once");
        assert_eq!(rustix::fs::fstat(b.shm()).unwrap().st_size, 4096);
        // A hears of B when it looks (ring does, for a peer it does not know).
        a.ring(1, 0).unwrap();
        assert_eq!(wait(b.own(0).unwrap(), Some(Duration::from_secs(60))).unwrap(), 1);
        b.ring(0, 0).unwrap();
        b.ring(0, 0).unwrap();
        assert_eq!(wait(a.own(0).unwrap(), None).unwrap(), 2, "an eventfd counts the rings");
        assert_eq!(wait(a.own(0).unwrap(), Some(Duration::ZERO)).unwrap(), 0, "nothing more");
        assert_eq!(b.ring(0, 1).err().map(|e| e.kind()), Some(io::ErrorKind::NotFound), "one vector only");
        let bid = b.id();
        drop(b);
        // The notice comes through the server: wait for it (bounded).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while a.has_peer(bid) {
            assert!(std::time::Instant::now() < deadline, "no disconnect notice");
            std::thread::sleep(Duration::from_millis(5));
            a.update().unwrap();
        }
        stopper.stop();
        t.join().unwrap().unwrap();
        a.update().unwrap();
        assert!(a.server_gone());
    }
}
