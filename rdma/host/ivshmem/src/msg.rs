//! One message of the protocol: a little-endian `i64` and at most one file
//! descriptor passed with it (QEMU's ivshmem-spec.rst).

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
    recvmsg, sendmsg,
};

/// The protocol version this server speaks and peers accept.
pub const VERSION: i64 = 0;
/// The value that carries the shared-memory file.
pub const SHM: i64 = -1;
/// The largest peer ID (the Doorbell register's 16 bits).
pub const MAX_ID: i64 = 0xffff;

/// A message as received.
#[derive(Debug)]
pub struct Message {
    pub value: i64,
    pub fd: Option<OwnedFd>,
}

/// Sends `value`, with `fd` if given.
pub fn send(sock: impl AsFd, value: i64, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
    let bytes = value.to_le_bytes();
    let fds = fd.as_slice();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("no room for the descriptor"));
    }
    let mut sent = 0;
    while sent < bytes.len() {
        let n = sendmsg(sock.as_fd(), &[IoSlice::new(&bytes[sent..])], &mut control, SendFlags::NOSIGNAL)?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        sent += n;
        // The descriptor went with the first byte.
        control.clear();
    }
    Ok(())
}

/// Receives one message: `Ok(None)` when the other end closed the
/// connection before a message began. Descriptors beyond the first are
/// closed (the protocol passes one at most).
pub fn recv(sock: impl AsFd) -> io::Result<Option<Message>> {
    let mut bytes = [0u8; 8];
    let mut got = 0;
    let mut fd = None;
    while got < bytes.len() {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let r =
            recvmsg(sock.as_fd(), &mut [IoSliceMut::new(&mut bytes[got..])], &mut control, RecvFlags::CMSG_CLOEXEC)?;
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = m {
                for f in fds {
                    if fd.is_none() {
                        fd = Some(f);
                    }
                }
            }
        }
        if r.bytes == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed inside a message"));
        }
        got += r.bytes;
    }
    Ok(Some(Message { value: i64::from_le_bytes(bytes), fd }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn values_and_descriptors_round_trip() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        file.set_len(12345).unwrap();
        send(&a, 7, None).unwrap();
        send(&a, SHM, Some(file.as_fd())).unwrap();
        send(&a, -5, None).unwrap();
        let m = recv(&b).unwrap().unwrap();
        assert_eq!((m.value, m.fd.is_none()), (7, true));
        let m = recv(&b).unwrap().unwrap();
        assert_eq!(m.value, SHM);
        let st = rustix::fs::fstat(m.fd.unwrap()).unwrap();
        assert_eq!(st.st_size, 12345);
        assert_eq!(recv(&b).unwrap().unwrap().value, -5);
        drop(a);
        assert!(recv(&b).unwrap().is_none(), "closed");
    }
}
