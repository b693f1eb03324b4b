//! Errors of the verbs library: one enum, each variant with the errno a
//! libibverbs call would have returned, and a message that says whose
//! fault it is (this process, the firmware, or the ring between them).

use std::fmt;
use std::io;
use std::path::PathBuf;

use verbs_ring::Status;
use verbs_ring::abi::LayoutError;
use verbs_ring::wire::NameError;

/// Why a verbs call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The ring file could not be opened or mapped (`ENOENT`, `EACCES`, ...).
    Open { path: PathBuf, source: io::Error },
    /// The region is not a usable verbs ring: wrong magic or major version,
    /// or the firmware is booting or failed (`ENODEV`).
    Layout { path: PathBuf, error: LayoutError },
    /// Every context slot of the appliance is taken (`EBUSY`).
    NoFreeContext { slots: u32 },
    /// No device of that name in the appliance (`ENODEV`).
    NoDevice(String),
    /// The firmware refused the command with this status.
    Command { cmd: &'static str, status: Status },
    /// No answer in time (`ETIMEDOUT`). `firmware_alive` says whether the
    /// appliance's heartbeat moved meanwhile (alive but slow, or gone).
    TimedOut { cmd: &'static str, firmware_alive: bool },
    /// A wait for what the network brings (a completion, an rdma_cm event)
    /// ran out with nothing come (`ETIMEDOUT`): the firmware answered, the
    /// peer sent nothing.
    NothingCame { what: &'static str, waited: std::time::Duration },
    /// The firmware reclaimed this context: its lease expired, it broke the
    /// ring protocol, or the firmware stopped (`ENOTCONN`). Every object of
    /// the context is gone.
    Lost,
    /// This library gave the context up after a ring protocol error (`why`)
    /// and had the firmware reclaim it (`ENOTCONN`): every object of the
    /// context is gone. [`crate::Context::reopen`] attaches a new one.
    Abandoned { why: String },
    /// The firmware answered something that was not asked, or a ring it
    /// placed is unusable (`EPROTO`). When the context cannot be trusted after
    /// it, the context is given up: later calls return [`Error::Abandoned`].
    Protocol(String),
    /// A local check refused an argument before anything was sent (`EINVAL`).
    InvalidArgument(&'static str),
    /// A name does not fit its field in the ring's ABI (`ENAMETOOLONG`):
    /// `what` names the field ("device name", "netdev name", ...).
    Name { what: &'static str, name: String, error: NameError },
    /// The send or receive queue is full (`ENOMEM`, as `ibv_post_send`).
    QueueFull,
    /// The context's buffer area has no room for the memory asked (`ENOMEM`).
    OutOfBufferSpace { requested: u64, free: u64 },
    /// The appliance has a doorbell (`ivshmem-doorbell`) but its ivshmem
    /// server's socket, beside the ring, cannot be used (`ENOENT` when it is
    /// gone, `ECONNREFUSED`, `EPROTO`, ...).
    Doorbell { socket: PathBuf, source: io::Error },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The errno name and number a libibverbs call would report.
    pub fn errno(&self) -> (&'static str, i32) {
        match self {
            Error::Open { source, .. } => match source.kind() {
                io::ErrorKind::NotFound => ("ENOENT", 2),
                io::ErrorKind::PermissionDenied => ("EACCES", 13),
                _ => ("EIO", 5),
            },
            Error::Layout { .. } | Error::NoDevice(_) => ("ENODEV", 19),
            Error::NoFreeContext { .. } => ("EBUSY", 16),
            Error::Command { status, .. } => (status.name().unwrap_or("EIO"), i32::from(status.0)),
            Error::TimedOut { .. } | Error::NothingCame { .. } => ("ETIMEDOUT", 110),
            Error::Lost | Error::Abandoned { .. } => ("ENOTCONN", 107),
            Error::Protocol(_) => ("EPROTO", 71),
            Error::InvalidArgument(_) => ("EINVAL", 22),
            Error::Name { .. } => ("ENAMETOOLONG", 36),
            Error::QueueFull | Error::OutOfBufferSpace { .. } => ("ENOMEM", 12),
            Error::Doorbell { source, .. } => match source.kind() {
                io::ErrorKind::NotFound => ("ENOENT", 2),
                io::ErrorKind::ConnectionRefused => ("ECONNREFUSED", 111),
                io::ErrorKind::PermissionDenied => ("EACCES", 13),
                io::ErrorKind::InvalidData => ("EPROTO", 71),
                _ => ("EIO", 5),
            },
        }
    }

    /// The firmware's status, when the firmware refused the command.
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Command { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open { path, source } => write!(f, "cannot map ring {}: {source}", path.display()),
            Error::Layout { path, error } => write!(f, "ring {} is not usable: {error}", path.display()),
            Error::NoFreeContext { slots } => write!(f, "all {slots} context slots of the appliance are in use"),
            Error::NoDevice(name) => write!(f, "no RDMA device named {name:?} in the appliance"),
            Error::Command { cmd, status } => write!(f, "{cmd} refused by the firmware: {status}"),
            Error::TimedOut { cmd, firmware_alive: true } => {
                write!(f, "{cmd}: no answer in time (the appliance is alive but did not answer)")
            }
            Error::TimedOut { cmd, firmware_alive: false } => {
                write!(f, "{cmd}: no answer in time (the appliance's heartbeat stopped: is it running?)")
            }
            Error::NothingCame { what, waited } => {
                write!(f, "no {what} came in {:.1} s (has the peer stopped?)", waited.as_secs_f64())
            }
            Error::Lost => f.write_str(
                "the firmware reclaimed this context (lease expired or protocol error); its objects are gone: \
                 attach again (Context::reopen, or restart the program)",
            ),
            Error::Abandoned { why } => write!(
                f,
                "this context was given up after a ring protocol error ({why}) and reclaimed; its objects are \
                 gone: attach again (Context::reopen, or restart the program)"
            ),
            Error::Protocol(what) => write!(f, "ring protocol error: {what}"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Name { what, name, error } => write!(f, "{what} {name:?}: {error}"),
            Error::QueueFull => f.write_str("work queue full"),
            Error::OutOfBufferSpace { requested, free } => {
                write!(f, "no room for {requested} bytes in the context's buffer area ({free} free)")
            }
            Error::Doorbell { socket, source } => write!(
                f,
                "the appliance is rung through its ivshmem server, but {} cannot be used: {source} (was the \
                 server stopped? `make run` starts it beside the ring)",
                socket.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Open { source, .. } | Error::Doorbell { source, .. } => Some(source),
            _ => None,
        }
    }
}
