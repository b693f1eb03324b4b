//! Completion channels: a real file descriptor (a pipe's read end) that
//! becomes readable when an armed CQ gets a completion.
//!
//! The appliance writes CQEs into the CQ rings and tells nobody, so one
//! watcher thread per process looks at every armed CQ (`ibv_req_notify_cq`)
//! and, when its ring holds a CQE, disarms it, queues it on its channel
//! and writes one byte into the channel's pipe. `ibv_get_cq_event` reads
//! the byte (blocking, or `EAGAIN` when the program made the fd
//! non-blocking) and takes the CQ off the queue. The thread sleeps on a
//! condition variable while nothing is armed and polls with a short
//! back-off while something is.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::abi::ibv_comp_channel;
use crate::state::{CqObj, lock};

/// A completion channel.
#[repr(C)]
pub struct ChanObj {
    pub ch: ibv_comp_channel,
    pub wfd: c_int,
    /// CQs with an event not yet taken by `ibv_get_cq_event` (addresses).
    pub ready: Mutex<VecDeque<usize>>,
}

/// The armed CQs (addresses of live `CqObj`s).
static ARMED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static WAKE: Condvar = Condvar::new();
static STARTED: std::sync::Once = std::sync::Once::new();

/// Arm `cq` (its channel is not null): the next CQE raises an event.
pub fn arm(cq: *mut CqObj) {
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new().name("ibv-cq-events".into()).spawn(watch);
    });
    let mut armed = lock(&ARMED);
    if !armed.contains(&(cq as usize)) {
        armed.push(cq as usize);
    }
    WAKE.notify_one();
}

/// Forget `cq` (it is being destroyed); once this returns the watcher no
/// longer looks at it.
pub fn disarm(cq: *mut CqObj) {
    lock(&ARMED).retain(|&c| c != cq as usize);
}

fn watch() {
    let mut idle = 0u32;
    let mut armed = lock(&ARMED);
    loop {
        while armed.is_empty() {
            armed = WAKE.wait(armed).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        let mut fired = false;
        armed.retain(|&c| {
            // SAFETY: an address in ARMED is a live CqObj: `disarm` removes
            // it (under this lock, which we hold) before the CQ is freed.
            let cq = unsafe { &*(c as *const CqObj) };
            let ready = lock(&cq.ring).available(cq.sh.ctx.shared_mem()).map_or(true, |n| n > 0);
            if !ready {
                return true;
            }
            let ch = cq.cq.channel as *const ChanObj;
            if !ch.is_null() {
                // SAFETY: a CQ's channel outlives it (`ibv_destroy_comp_channel`
                // refuses while CQs use it).
                let ch = unsafe { &*ch };
                lock(&ch.ready).push_back(c);
                let b = 1u8;
                // SAFETY: writes one byte from a live local into our pipe.
                let _ = unsafe { libc::write(ch.wfd, (&b as *const u8).cast(), 1) };
            }
            fired = true;
            false
        });
        drop(armed);
        if fired {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            if idle < 32 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(if idle < 1000 { 20 } else { 200 }));
            }
        }
        armed = lock(&ARMED);
    }
}
