//! What every tool shares: the `--ring` option (else `$RDMA_RING`, else
//! the ring `make run` uses) and `-d` device selection, and the exits
//! (which detach the process's contexts).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::{Context, Device, Error};

/// `--ring PATH` / `$RDMA_RING`.
#[derive(Args, Clone, Debug)]
pub struct RingArgs {
    /// The appliance's shared-memory ring file [default: $RDMA_RING, else /dev/shm/roce-appliance-1]
    #[arg(long, value_name = "PATH")]
    pub ring: Option<PathBuf>,
}

impl RingArgs {
    pub fn open(&self) -> Result<Context, Error> {
        Context::open_default(self.ring.as_deref())
    }

    /// Attach and open device `name` (the first device when `None`).
    pub fn device(&self, name: Option<&str>) -> Result<Device, Error> {
        self.open()?.device(name)
    }
}

/// The two ends of the extension tools (`ext_verbs`, `frmr_cm`):
/// `-R target|initiator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Owns the memory: registers it, announces its keys, checks what lands.
    Target,
    /// WRITEs, READs and SENDs WITH INVALIDATE through the target's keys.
    Initiator,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Target => "target",
            Role::Initiator => "initiator",
        }
    }
}

/// Print `prog: error` and exit 1 (the errno name in the message when it
/// helps: `ENODEV`, `EBUSY`, ...).
pub fn fail(prog: &str, e: &Error) -> ! {
    eprintln!("{prog}: {e} [{}]", e.errno().0);
    exit(1)
}

/// End the process with `code`, detaching every context it has open first:
/// `std::process::exit` runs no destructors, and a context not detached
/// keeps its slot (and its objects) until the firmware sees the lease
/// expire.
pub fn exit(code: i32) -> ! {
    crate::context::detach_all();
    std::process::exit(code)
}
