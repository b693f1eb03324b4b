//! QEMU's ivshmem server protocol (QEMU's docs/specs/ivshmem-spec.rst,
//! "The ivshmem Client-Server Protocol"), both ends: the server that owns
//! the shared-memory file and hands every peer the file and the eventfds
//! ([`server`]), and the peer end host programs use ([`peer`]) to ring the
//! appliance (whose `ivshmem-doorbell` device is a peer of the same server)
//! and to be woken by it. Debian ships no ivshmem server, hence this one.
//!
//! ```text
//!   server                          peer (QEMU's device, or a host program)
//!   ------                          ----
//!   listen on the UNIX socket  <--  connect
//!   version 0                  -->
//!   your ID                    -->
//!   -1 + the file's fd         -->
//!   peer P, N times + eventfds -->  for each peer already there: ring P's vectors
//!   your ID, N times + fds     -->  your own vectors: read them to be woken
//!   (to the others: your ID, N times + your eventfds)
//!   ... later: ID + fds (a peer came), ID alone (a peer left)
//! ```
//!
//! Every message is one little-endian `i64`, with at most one file
//! descriptor (SCM_RIGHTS). To interrupt a peer, write the 8-byte integer 1
//! to its vector's eventfd; to take an interrupt, read one's own.

pub mod msg;
pub mod peer;
pub mod server;

pub use peer::Peer;
pub use server::{Server, Stopper};

/// The socket beside a ring file: `make run` and the test harness start the
/// server there, and host programs look for it there.
pub fn socket_for(ring: &std::path::Path) -> std::path::PathBuf {
    let mut s = ring.as_os_str().to_os_string();
    s.push(".sock");
    std::path::PathBuf::from(s)
}
