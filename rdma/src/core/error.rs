//! Errors of the RDMA core, one enum for the whole control path.
//!
//! Each variant names whose fault it is (the caller's name, the netdev, the
//! driver, a full table) and carries what a person needs to fix it. `Display`
//! gives a one-line message in the tone of iproute2 and the kernel log;
//! `errno()` gives the Linux error number the same request would have earned
//! from `nldev_newlink`, `ib_register_device` and friends, so a host-side tool
//! that expects Linux semantics can map our answer back.

use alloc::string::String;
use core::fmt;

/// Linux error numbers used by [`Error::errno`] (positive values).
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const ENODEV: i32 = 19;
    pub const EINVAL: i32 = 22;
    pub const ENFILE: i32 = 23;
    pub const ENOSPC: i32 = 28;
    pub const EOPNOTSUPP: i32 = 95;
    pub const ENOBUFS: i32 = 105;
}

/// Everything the RDMA core can refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    // ---- names (assign_name / ib_device_rename) ----
    /// The requested device name is malformed; `reason` says how.
    InvalidName { name: String, reason: &'static str },
    /// Another device already has this name.
    NameInUse(String),

    // ---- lookups ----
    /// No registered device has this name or index.
    NoSuchDevice(String),
    /// The device exists but has no such port.
    NoSuchPort { device: String, port: u32 },
    /// The network stack has no netdev of this name.
    NoSuchNetdev(String),
    /// No client with this id is registered.
    NoSuchClient(u32),
    /// No event handler with this id is registered.
    NoSuchHandler(u32),

    // ---- device registration (ib_register_device) ----
    /// The driver does not implement an op every device must have.
    MissingDriverOp(&'static str),
    /// The driver reported an unusable number of ports.
    InvalidPortCount(u32),
    /// A port's immutable data failed verification.
    BadPortImmutable { port: u32, reason: &'static str },
    /// The device table is full.
    TooManyDevices,
    /// The client table is full.
    TooManyClients,
    /// The driver refused a query or its enable hook.
    Driver(&'static str),

    // ---- link ops and nldev ----
    /// `rdma link add ... type X` with no link ops registered for X.
    UnknownLinkType(String),
    /// Link ops for this type are already registered.
    LinkTypeExists(String),
    /// rxe may only sit on a real device, not on a VLAN netdev.
    VlanNetdev(String),
    /// The netdev already carries a device of this link type.
    NetdevHasDevice { netdev: String, device: String },
    /// The device was not created through `rdma link add`, so it cannot be deleted.
    NotRemovable(String),
    /// A control message lacks an attribute its command requires.
    MissingAttribute(&'static str),
    /// A control message or console command this core does not implement.
    UnknownCommand(String),
    /// A console argument that does not parse.
    BadArgument(String),

    // ---- GID cache ----
    /// Every non-reserved slot of the port's GID table is in use.
    GidTableFull { device: String, port: u32 },
    /// No GID table entry matches.
    GidNotFound,
    /// The GID index is outside the table.
    InvalidGidIndex(u32),
    /// The all-zero GID is reserved and never stored.
    ZeroGid,
    /// The pkey index is outside the pkey table.
    InvalidPkeyIndex(u32),

    // ---- verbs ----
    /// The device does not implement the op a command needs.
    NotSupported(&'static str),

    // ---- the ordered work queue ----
    /// The netdev event queue is full; process events and retry.
    QueueFull,

    // ---- the console ----
    /// Writing console output failed.
    Output,
    /// A `rdma link` request the core refused, as netlink carries it back:
    /// the errno only (iproute2 prints `error: <strerror>`).
    Netlink(i32),
}

impl Error {
    /// The Linux errno the equivalent kernel path returns.
    pub fn errno(&self) -> i32 {
        use errno::*;
        match self {
            Error::InvalidName { .. } => EINVAL,
            // assign_name() returns ENFILE for a taken name; rename returns EEXIST.
            // One answer keeps callers simple and EEXIST says what happened.
            Error::NameInUse(_) => EEXIST,
            Error::NoSuchDevice(_) => ENODEV,
            Error::NoSuchPort { .. } => EINVAL,
            Error::NoSuchNetdev(_) => ENODEV,
            Error::NoSuchClient(_) | Error::NoSuchHandler(_) => ENOENT,
            Error::MissingDriverOp(_) => EINVAL,
            Error::InvalidPortCount(_) => EINVAL,
            Error::BadPortImmutable { .. } => EINVAL,
            Error::TooManyDevices => ENFILE,
            Error::TooManyClients => ENFILE,
            Error::Driver(_) => EINVAL,
            Error::UnknownLinkType(_) => EINVAL,
            Error::LinkTypeExists(_) => EEXIST,
            Error::VlanNetdev(_) => EPERM,
            Error::NetdevHasDevice { .. } => EEXIST,
            Error::NotRemovable(_) => EINVAL,
            Error::MissingAttribute(_) => EINVAL,
            Error::UnknownCommand(_) => EOPNOTSUPP,
            Error::BadArgument(_) => EINVAL,
            Error::GidTableFull { .. } => ENOSPC,
            Error::GidNotFound => ENOENT,
            Error::InvalidGidIndex(_) => EINVAL,
            Error::ZeroGid => EINVAL,
            Error::InvalidPkeyIndex(_) => EINVAL,
            Error::NotSupported(_) => EOPNOTSUPP,
            Error::QueueFull => ENOBUFS,
            Error::Output => EIO,
            Error::Netlink(e) => *e,
        }
    }
}

impl From<fmt::Error> for Error {
    fn from(_: fmt::Error) -> Self {
        Error::Output
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidName { name, reason } => {
                write!(f, "invalid device name \"{name}\": {reason}")
            }
            Error::NameInUse(name) => write!(f, "device name \"{name}\" is already in use"),
            Error::NoSuchDevice(dev) => write!(f, "no such RDMA device: {dev}"),
            Error::NoSuchPort { device, port } => write!(f, "{device} has no port {port}"),
            Error::NoSuchNetdev(name) => write!(f, "no such netdev: {name}"),
            Error::NoSuchClient(id) => write!(f, "no client with id {id}"),
            Error::NoSuchHandler(id) => write!(f, "no event handler with id {id}"),
            Error::MissingDriverOp(op) => {
                write!(f, "driver does not implement the mandatory op {op}")
            }
            Error::InvalidPortCount(n) => write!(f, "driver reports {n} ports; need 1 or more"),
            Error::BadPortImmutable { port, reason } => {
                write!(f, "port {port} immutable data rejected: {reason}")
            }
            Error::TooManyDevices => f.write_str("too many RDMA devices"),
            Error::TooManyClients => f.write_str("too many RDMA clients"),
            Error::Driver(what) => write!(f, "driver error: {what}"),
            Error::UnknownLinkType(t) => write!(f, "unknown link type \"{t}\""),
            Error::LinkTypeExists(t) => write!(f, "link type \"{t}\" is already registered"),
            Error::VlanNetdev(n) => {
                write!(f, "{n} is a VLAN netdev; rxe creation is allowed on top of a real device only")
            }
            Error::NetdevHasDevice { netdev, device } => {
                write!(f, "{device} is already configured on {netdev}")
            }
            Error::NotRemovable(dev) => {
                write!(f, "{dev} was not created by \"rdma link add\" and cannot be deleted")
            }
            Error::MissingAttribute(a) => write!(f, "missing attribute {a}"),
            Error::UnknownCommand(c) => write!(f, "command \"{c}\" is unknown"),
            Error::BadArgument(a) => write!(f, "bad argument: {a}"),
            Error::GidTableFull { device, port } => {
                write!(f, "GID table of {device}/{port} is full")
            }
            Error::GidNotFound => f.write_str("no matching GID table entry"),
            Error::InvalidGidIndex(i) => write!(f, "GID index {i} is out of range"),
            Error::ZeroGid => f.write_str("the zero GID is reserved"),
            Error::InvalidPkeyIndex(i) => write!(f, "pkey index {i} is out of range"),
            Error::NotSupported(op) => write!(f, "operation not supported: {op}"),
            Error::QueueFull => f.write_str("netdev event queue is full"),
            Error::Output => f.write_str("console output failed"),
            Error::Netlink(e) => f.write_str(verbs_ring::show::words::strerror(*e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn messages_name_the_culprit() {
        let e = Error::NetdevHasDevice { netdev: "eth0".into(), device: "rxe0".into() };
        assert_eq!(e.to_string(), "rxe0 is already configured on eth0");
        assert_eq!(e.errno(), errno::EEXIST);
        assert_eq!(Error::NoSuchNetdev("eth9".into()).to_string(), "no such netdev: eth9");
        assert_eq!(Error::VlanNetdev("eth0.5".into()).errno(), errno::EPERM);
        assert_eq!(Error::NotSupported("create_srq").to_string(), "operation not supported: create_srq");
    }
}
