//! A UDP wire end with a receive buffer of our choosing, handed to QEMU.
//!
//! QEMU's `-netdev socket,udp=` opens its own socket, whose receive buffer is
//! the system default (`net.core.rmem_default`, 208 KiB). Each 4 KiB RoCE
//! frame takes ~8.7 KiB of it (a datagram is charged its whole allocation),
//! so the wire holds ~24 such frames in front of a receiving QEMU whose
//! I/O thread waits for a core: a burst any longer is dropped, where a
//! real NIC's ring of hundreds of descriptors would have taken it. A wire
//! end opened here gets a deeper buffer and goes to QEMU as a connected
//! socket (`-netdev dgram,local.type=fd`), so a benchmark measures the
//! transports rather than this one socket's size. Opt-in per NIC
//! ([`crate::Nic::deep`]): a connected socket takes frames only from its
//! peer's port, and the fault relay and injector send from ports of their own.

use std::net::UdpSocket;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The receive buffer a deep wire end asks for: room for ~240 frames of
/// 4 KiB, the order of a NIC's receive ring.
pub const DEEP_BUFFER: usize = 2 << 20;

/// Our end of the wire: bound to `local`, connected to `peer` on 127.0.0.1,
/// with a receive buffer of `buffer` bytes (forced past `net.core.rmem_max`
/// where we may, as root may; else as much as that allows).
pub fn socket(local: u16, peer: u16, buffer: usize) -> std::io::Result<OwnedFd> {
    let sock = UdpSocket::bind(("127.0.0.1", local))?;
    sock.connect(("127.0.0.1", peer))?;
    // The kernel doubles the value for its bookkeeping: ask for half.
    if rustix::net::sockopt::set_socket_recv_buffer_size_force(&sock, buffer / 2).is_err() {
        rustix::net::sockopt::set_socket_recv_buffer_size(&sock, buffer / 2)?;
    }
    Ok(sock.into())
}

/// Whether `qemu` sends on a connected socket it was handed: from QEMU 8 on
/// (7.2's `dgram` backend still `sendto`s a zeroed address, which a connected
/// UDP socket refuses).
pub fn qemu_takes_connected_socket(qemu: &Path) -> bool {
    // Asked once per binary: every QEMU a run starts would ask again.
    static KNOWN: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());
    let mut known = KNOWN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, takes)) = known.iter().find(|(q, _)| q == qemu) {
        return *takes;
    }
    let major = Command::new(qemu).arg("--version").output().ok().and_then(|out| {
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split("version ").nth(1)?.split('.').next()?.parse::<u32>().ok()
    });
    let takes = major.is_some_and(|m| m >= 8);
    known.push((qemu.to_path_buf(), takes));
    takes
}

/// QEMU's `-netdev` for the socket `fd`, which `cmd`'s child inherits.
pub fn netdev(cmd: &mut Command, id: &str, fd: OwnedFd) -> String {
    let n = fd.as_raw_fd();
    inherit(cmd, fd);
    format!("dgram,id={id},local.type=fd,local.str={n}")
}

/// Makes `fd` survive into `cmd`'s program; our copy closes when `cmd` is
/// dropped. Only the child clears close-on-exec, so no other thread's child
/// inherits the socket meanwhile (a stray copy would keep the port bound).
#[allow(unsafe_code)]
fn inherit(cmd: &mut Command, fd: OwnedFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes one fcntl(2) system call
    // (rustix enters the kernel directly: no allocation, no lock) on a
    // descriptor it owns, and builds an io::Error from an errno on failure.
    unsafe {
        cmd.pre_exec(move || rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty()).map_err(std::io::Error::from));
    }
}
