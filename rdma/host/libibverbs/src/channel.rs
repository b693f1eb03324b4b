//! Completion channels: a real file descriptor (a pipe's read end) that
//! becomes readable when an armed CQ gets a completion, so programs can
//! `poll`/`epoll` it as rdma-core's expect.
//!
//! `ibv_req_notify_cq` writes the request into the CQ ring's `arm` word
//! (`verbs_ring::wake`) and puts the CQ on the armed list. When the appliance
//! has a doorbell, it answers the request and rings this process, whose
//! wake-up thread (`verbs::wake`) runs [`fire`]: every armed CQ whose
//! request was answered is disarmed, queued on its channel, and one byte is
//! written into the channel's pipe. Nothing polls: a program blocked on
//! the channel costs no CPU. Without a doorbell (`ivshmem-plain`) nobody
//! answers, so one watcher thread per process looks at the armed CQs'
//! rings with a short back-off instead, as before the doorbell.
//! `ibv_get_cq_event` reads the byte (blocking, or `EAGAIN` when the
//! program made the fd non-blocking) and takes the CQ off the queue.

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
static WATCHER: std::sync::Once = std::sync::Once::new();

/// Arm `cq` (its channel is not null) for its next completion, or its next
/// solicited one: an event follows. Returns 0 or an errno.
///
/// # Safety
/// `cq` is a live CQ of this library (the C API's promise for the call).
pub unsafe fn arm(cq: *mut CqObj, solicited_only: bool) -> c_int {
    // SAFETY: the caller's promise.
    let c = unsafe { &*cq };
    let doorbell = c.sh.ctx.doorbell();
    match doorbell {
        Some(w) => c.sh.listening.call_once(|| {
            w.on_wake(Box::new(|| {
                fire(true);
            }))
        }),
        None => WATCHER.call_once(|| {
            let _ = std::thread::Builder::new().name("ibv-cq-events".into()).spawn(watch);
        }),
    }
    // The request goes into the ring under the list's lock, and the wake-up
    // thread scans under it too: an answer that comes at once is found by
    // the scan that follows, never missed between the two.
    let mut armed = lock(&ARMED);
    let geo = *lock(&c.ring).geometry();
    if lock(&c.arm).arm(c.sh.ctx.shared_mem(), &geo, solicited_only).is_err() {
        return libc::EIO;
    }
    if !armed.contains(&(cq as usize)) {
        armed.push(cq as usize);
    }
    drop(armed);
    if doorbell.is_none() {
        WAKE.notify_one();
    }
    0
}

/// Forget `cq` (it is being destroyed); once this returns the watcher no
/// longer looks at it.
pub fn disarm(cq: *mut CqObj) {
    lock(&ARMED).retain(|&c| c != cq as usize);
}

/// Moves every armed CQ that is ready onto its channel: with a doorbell,
/// those whose request the appliance answered; without, those whose ring
/// holds a completion. Whether any was.
fn fire(doorbell: bool) -> bool {
    let mut fired = false;
    lock(&ARMED).retain(|&c| {
        // SAFETY: an address in ARMED is a live CqObj: `disarm` removes it
        // (under this lock, which we hold) before the CQ is freed.
        let cq = unsafe { &*(c as *const CqObj) };
        let mem = cq.sh.ctx.shared_mem();
        let ready = if doorbell {
            let geo = *lock(&cq.ring).geometry();
            lock(&cq.arm).fired(mem, &geo).unwrap_or(true)
        } else {
            lock(&cq.ring).available(mem).map_or(true, |n| n > 0)
        };
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
    fired
}

/// Without a doorbell: look at the armed CQs' rings, sleeping on a
/// condition variable while nothing is armed and backing off while
/// something is.
fn watch() {
    let mut idle = 0u32;
    loop {
        {
            let mut armed = lock(&ARMED);
            while armed.is_empty() {
                armed = WAKE.wait(armed).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
        if fire(false) {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            if idle < 32 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(if idle < 1000 { 20 } else { 200 }));
            }
        }
    }
}
