//! The verbs ring: host programs reach the appliance through the ivshmem
//! region; the firmware serves their commands from the poll loop.
//!
//! `ivshmem-plain` raises no interrupt, so the ring is polled: every
//! heartbeat period (1 ms) while idle, and at once again while commands keep
//! coming, so a burst is served back to back and an idle appliance still halts.

use crate::net::Net;
use crate::poll::{Task, Timers};
use crate::time::{Duration, Instant};
use alloc::rc::Rc;
use core::cell::RefCell;
use drivers::ivshmem::{self, IvshmemRegion};
use kbase::pci::{Bar, Function};
use rdma::core::{NetdevProvider, RdmaCore};
use rdma::uverbs::{CoreAccess, CoreVerbs};
use verbs_ring::dispatch::Limits;
use verbs_ring::{Firmware, Layout, LayoutParams, Status};

/// Commands served per context per tick.
const BUDGET: u32 = 32;

/// The core and the netdevs, as the provider borrows them per command.
pub struct NetAccess(pub Rc<RefCell<Option<Net>>>);

impl CoreAccess for NetAccess {
    fn with<R>(&self, f: impl FnOnce(&mut RdmaCore, &dyn NetdevProvider) -> Result<R, Status>) -> Result<R, Status> {
        let mut guard = self.0.borrow_mut();
        let net = guard.as_mut().ok_or(Status::ENODEV)?;
        net.rdma.sync_counters();
        let provider = crate::net::rdma::Provider(&net.netdevs);
        let result = f(&mut net.rdma.core, &provider);
        // A link added or removed over the ring settles like one from the console.
        net.rdma.process_events();
        result
    }
}

pub struct Verbs {
    mem: Rc<IvshmemRegion>,
    firmware: Firmware<CoreVerbs<NetAccess>>,
    period: Duration,
    next_tick: Instant,
}

/// Finds the ivshmem device and publishes the ring layout in its memory.
pub fn probe(functions: &[Function], net: Rc<RefCell<Option<Net>>>, now: Instant) -> Option<Verbs> {
    let f = functions.iter().find(|f| f.vendor == ivshmem::VENDOR && f.device == ivshmem::DEVICE)?;
    let Some(Bar::Memory { addr, size, .. }) = f.bars[ivshmem::MEMORY_BAR] else {
        log::error!("{}: ivshmem without a memory BAR 2", f.bdf);
        return None;
    };
    let len = usize::try_from(size).ok()?;
    // SAFETY: BAR 2 was identity-mapped write-back when the bus was scanned; it
    // is the device's shared RAM, 4 KiB aligned, and only this module uses it.
    let mem = Rc::new(unsafe { IvshmemRegion::new(addr as *mut u8, len) });
    let params = LayoutParams::default();
    let layout = match Layout::new(size, params) {
        Ok(l) => l,
        Err(e) => {
            log::error!("{}: a {size}-byte region cannot hold the verbs ring: {e:?}", f.bdf);
            return None;
        }
    };
    if let Some(n) = net.borrow_mut().as_mut() {
        // Host buffers registered over the ring live in this region.
        n.rdma.set_shared_memory(mem.clone());
    }
    let provider = CoreVerbs::new(NetAccess(net));
    let firmware = match Firmware::new(&*mem, layout, provider, Limits::default(), BUDGET) {
        Ok(fw) => fw,
        Err(e) => {
            log::error!("{}: verbs ring: {e:?}", f.bdf);
            return None;
        }
    };
    log::info!("ring ready in ivshmem {} at {addr:#x} ({} MiB, {} contexts)", f.bdf, size >> 20, params.num_contexts);
    let period = Duration::from_micros(u64::from(params.heartbeat_period_us));
    Some(Verbs { mem, firmware, period, next_tick: now })
}

impl Task for Verbs {
    fn poll(&mut self, now: Instant, _timers: &mut Timers) -> bool {
        if now < self.next_tick {
            return false;
        }
        match self.firmware.tick(&*self.mem) {
            Ok(report) => {
                for ev in &report.events {
                    log::info!("{ev:?}");
                }
                let busy = report.commands > 0;
                self.next_tick = if busy { now } else { now + self.period };
                busy
            }
            Err(e) => {
                log::error!("region access failed: {e}; the ring is stopped");
                self.next_tick = Instant::from_micros(u64::MAX);
                false
            }
        }
    }

    fn deadline(&mut self, _now: Instant) -> Option<Instant> {
        Some(self.next_tick)
    }
}
