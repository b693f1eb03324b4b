//! The ivshmem server: owns the shared-memory file, gives each peer that
//! connects an ID and a set of eventfds (one per vector), and tells every
//! peer who came and who left (QEMU's docs/specs/ivshmem-spec.rst, "The
//! ivshmem server"). One thread, one `poll` over the listening socket, the
//! peers' sockets (a peer never writes: readable means gone) and a stop
//! eventfd.
//!
//! Every peer must read its notices (QEMU does as they come; our host
//! library's wake-up thread does). One that does not fills its socket after
//! a few hundred comings and goings of others, and a blocking send to it
//! would stall the server for everyone: no new peer could connect. So a
//! send may wait [`SEND_TIMEOUT`] at most, and a peer it times out on is
//! disconnected like one that closed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};

use crate::msg::{self, MAX_ID, SHM, VERSION};

/// How long a send to one peer may wait for room in its socket.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// A connected peer: its socket and the eventfds of its vectors.
struct Conn {
    stream: UnixStream,
    eventfds: Vec<OwnedFd>,
}

/// Ends [`Server::run`] from another thread.
#[derive(Clone)]
pub struct Stopper(Arc<OwnedFd>);

impl Stopper {
    pub fn stop(&self) {
        let _ = rustix::io::write(&*self.0, &1u64.to_ne_bytes());
    }
}

pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    shm: File,
    vectors: u16,
    peers: BTreeMap<u16, Conn>,
    /// Where the search for the next free ID starts: IDs are handed out in
    /// turn, so one that just left is not reused at once (a disconnect
    /// notice still on its way must not be taken for the newcomer's).
    next: u32,
    stop: Arc<OwnedFd>,
}

impl Server {
    /// Listens on `socket`, serving `shm` (the ring file) with `vectors`
    /// interrupt vectors per peer. A socket file left by a server that died
    /// is replaced; one a live server answers on is refused (`AddrInUse`).
    pub fn bind(socket: &Path, shm: File, vectors: u16) -> io::Result<Server> {
        if vectors == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "at least one vector"));
        }
        if socket.exists() {
            if UnixStream::connect(socket).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("a server already answers on {}", socket.display()),
                ));
            }
            std::fs::remove_file(socket)?;
        }
        let listener = UnixListener::bind(socket)?;
        let stop = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
        Ok(Server { listener, path: socket.to_path_buf(), shm, vectors, peers: BTreeMap::new(), next: 0, stop })
    }

    pub fn stopper(&self) -> Stopper {
        Stopper(self.stop.clone())
    }

    /// The IDs of the peers connected now.
    pub fn peers(&self) -> Vec<u16> {
        self.peers.keys().copied().collect()
    }

    /// Serves until [`Stopper::stop`]. Errors are the server's own
    /// (`poll`, `accept`); a peer that misbehaves is only disconnected.
    pub fn run(&mut self) -> io::Result<()> {
        loop {
            let ids: Vec<u16> = self.peers.keys().copied().collect();
            let (stop_ready, accept_ready, gone) = {
                let mut fds = Vec::with_capacity(2 + ids.len());
                fds.push(PollFd::new(&*self.stop, PollFlags::IN));
                fds.push(PollFd::new(&self.listener, PollFlags::IN));
                for id in &ids {
                    if let Some(c) = self.peers.get(id) {
                        fds.push(PollFd::new(&c.stream, PollFlags::IN));
                    }
                }
                match poll(&mut fds, None) {
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(e.into()),
                }
                let gone: Vec<u16> =
                    ids.iter().zip(&fds[2..]).filter(|(_, f)| !f.revents().is_empty()).map(|(id, _)| *id).collect();
                (!fds[0].revents().is_empty(), !fds[1].revents().is_empty(), gone)
            };
            if stop_ready {
                return Ok(());
            }
            for id in gone {
                self.disconnect(id);
            }
            if accept_ready {
                let (stream, _) = self.listener.accept()?;
                self.welcome(stream);
            }
        }
    }

    fn free_id(&mut self) -> Option<u16> {
        for i in 0..=MAX_ID as u32 {
            let id = ((self.next + i) % (MAX_ID as u32 + 1)) as u16;
            if !self.peers.contains_key(&id) {
                self.next = u32::from(id) + 1;
                return Some(id);
            }
        }
        None
    }

    /// The spec's sequence for a new peer: version, its ID, the file; the
    /// peers already there; then the others hear of it, and it gets its own
    /// vectors.
    fn welcome(&mut self, stream: UnixStream) {
        if stream.set_write_timeout(Some(SEND_TIMEOUT)).is_err() {
            return;
        }
        let Some(id) = self.free_id() else { return };
        let eventfds: io::Result<Vec<OwnedFd>> =
            (0..self.vectors).map(|_| eventfd(0, EventfdFlags::CLOEXEC).map_err(io::Error::from)).collect();
        let Ok(eventfds) = eventfds else { return };
        let hello = || -> io::Result<()> {
            msg::send(&stream, VERSION, None)?;
            msg::send(&stream, i64::from(id), None)?;
            msg::send(&stream, SHM, Some(self.shm.as_fd()))?;
            for (&other, c) in &self.peers {
                for fd in &c.eventfds {
                    msg::send(&stream, i64::from(other), Some(fd.as_fd()))?;
                }
            }
            Ok(())
        };
        if hello().is_err() {
            return;
        }
        let mut broken = Vec::new();
        for (&other, c) in &self.peers {
            for fd in &eventfds {
                if msg::send(&c.stream, i64::from(id), Some(fd.as_fd())).is_err() {
                    broken.push(other);
                    break;
                }
            }
        }
        let own = eventfds.iter().try_for_each(|fd| msg::send(&stream, i64::from(id), Some(fd.as_fd())));
        let joined = own.is_ok();
        self.peers.insert(id, Conn { stream, eventfds });
        if !joined {
            broken.push(id);
        }
        for b in broken {
            self.disconnect(b);
        }
    }

    /// Forgets peer `id` and tells the others (its ID alone).
    fn disconnect(&mut self, id: u16) {
        if self.peers.remove(&id).is_none() {
            return;
        }
        let mut broken = Vec::new();
        for (&other, c) in &self.peers {
            if msg::send(&c.stream, i64::from(id), None).is_err() {
                broken.push(other);
            }
        }
        for b in broken {
            self.disconnect(b);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Message, recv};

    /// A server on a temporary socket and ring file, run in a thread.
    pub(crate) struct Running {
        pub dir: tempfile::TempDir,
        pub socket: PathBuf,
        stopper: Stopper,
        thread: Option<std::thread::JoinHandle<io::Result<()>>>,
    }

    impl Running {
        pub fn start(vectors: u16) -> Running {
            let dir = tempfile::tempdir().unwrap();
            let socket = dir.path().join("ring.sock");
            let shm = File::options().read(true).write(true).create(true).truncate(true).open(dir.path().join("ring"));
            let shm = shm.unwrap();
            shm.set_len(1 << 20).unwrap();
            let mut server = Server::bind(&socket, shm, vectors).unwrap();
            let stopper = server.stopper();
            let thread = Some(std::thread::spawn(move || server.run()));
            Running { dir, socket, stopper, thread }
        }
    }

    impl Drop for Running {
        fn drop(&mut self) {
            self.stopper.stop();
            if let Some(t) = self.thread.take() {
                t.join().unwrap().unwrap();
            }
        }
    }

    fn next(s: &UnixStream) -> Message {
        recv(s).unwrap().expect("a message")
    }

    /// A fake client reading the raw protocol: the messages, in the spec's
    /// order, with the descriptors where the spec puts them.
    #[test]
    fn peers_get_the_spec_sequence_and_hear_of_each_other() {
        let r = Running::start(2);
        let a = UnixStream::connect(&r.socket).unwrap();
        assert_eq!(next(&a).value, VERSION);
        let m = next(&a);
        assert_eq!((m.value, m.fd.is_none()), (0, true), "the first peer is ID 0");
        let m = next(&a);
        assert_eq!(m.value, SHM);
        assert_eq!(rustix::fs::fstat(m.fd.unwrap()).unwrap().st_size, 1 << 20);
        let a_own: Vec<OwnedFd> = (0..2)
            .map(|_| next(&a))
            .map(|m| (m.value, m.fd))
            .map(|(v, fd)| {
                assert_eq!(v, 0);
                fd.expect("an eventfd")
            })
            .collect();

        let b = UnixStream::connect(&r.socket).unwrap();
        assert_eq!(next(&b).value, VERSION);
        assert_eq!(next(&b).value, 1);
        assert_eq!(next(&b).value, SHM);
        // A's two vectors, then B's own two.
        let to_a: Vec<OwnedFd> = (0..2)
            .map(|_| next(&b))
            .map(|m| {
                assert_eq!(m.value, 0);
                m.fd.unwrap()
            })
            .collect();
        for _ in 0..2 {
            let m = next(&b);
            assert_eq!((m.value, m.fd.is_some()), (1, true));
        }
        // A hears of B: B's ID twice, with B's vectors.
        for _ in 0..2 {
            let m = next(&a);
            assert_eq!((m.value, m.fd.is_some()), (1, true));
        }
        // B rings A's vector 1: A's own eventfd for vector 1 counts it.
        rustix::io::write(&to_a[1], &1u64.to_ne_bytes()).unwrap();
        let mut v = [0u8; 8];
        rustix::io::read(&a_own[1], &mut v).unwrap();
        assert_eq!(u64::from_ne_bytes(v), 1);
        // B leaves: A gets B's ID alone.
        drop(b);
        let m = next(&a);
        assert_eq!((m.value, m.fd.is_none()), (1, true), "a disconnect notice");
        // The next peer gets a new ID, not B's.
        let c = UnixStream::connect(&r.socket).unwrap();
        assert_eq!(next(&c).value, VERSION);
        assert_eq!(next(&c).value, 2);
    }

    /// A peer that never reads its notices: once its socket is full the
    /// server drops it after [`SEND_TIMEOUT`] instead of stalling every
    /// other peer behind it (a soak's host processes found the server so,
    /// blocked in a send, after ~140 of them had come and gone).
    #[test]
    fn a_peer_that_never_reads_is_dropped_not_waited_for() {
        let r = Running::start(1);
        let silent = UnixStream::connect(&r.socket).unwrap();
        let socket = r.socket.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        const CHURN: usize = 2000;
        std::thread::spawn(move || {
            for _ in 0..CHURN {
                // Each comes (its eventfd to every peer) and goes (its ID).
                let _ = tx.send(crate::Peer::connect(&socket).is_ok());
            }
        });
        for i in 0..CHURN {
            let ok = rx.recv_timeout(Duration::from_secs(60)).expect("the server stalled");
            assert!(ok, "peer {i} was refused");
        }
        // The silent peer's backlog ends with the server closing it.
        silent.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut notices = 0;
        while recv(&silent).expect("closed, not stalled").is_some() {
            notices += 1;
        }
        assert!(notices < 2 * CHURN, "dropped before it heard of all {CHURN} peers ({notices} notices)");
    }

    #[test]
    fn a_live_server_is_not_replaced_and_a_stale_socket_is() {
        let r = Running::start(1);
        let f = tempfile::tempfile().unwrap();
        let e = Server::bind(&r.socket, f, 1).err().expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        let stale = r.dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        assert!(stale.exists());
        let s = Server::bind(&stale, tempfile::tempfile().unwrap(), 1).expect("a stale socket is replaced");
        drop(s);
        assert!(!stale.exists(), "the server removes its socket");
    }
}
