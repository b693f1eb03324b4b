//! Wake-ups without polling, both ways (ABI 1.7).
//!
//! With QEMU's `ivshmem-doorbell` device (QEMU's docs/specs/ivshmem-spec.rst)
//! the appliance and the host processes of one ring are peers of one ivshmem
//! server: each has an ID and an eventfd per interrupt vector, and each can
//! raise any other's vector (a host writes the peer's eventfd, the appliance
//! writes its device's Doorbell register). An interrupt is a syscall on one
//! side and an exit on the other, so neither side rings for every entry:
//! each publishes in the region whether it wants to be rung, in the manner
//! of virtio's event suppression (the virtio 1.x spec, "Driver and Device
//! Event Suppression"), and the handshakes below close the race between
//! "publish work" and "go to sleep".
//!
//! Host to appliance ([`host_must_ring`], [`Idle`]): the appliance, about to
//! halt, stores 1 in [`FW_IDLE`] and then looks at every ring once more; a
//! host, having published an entry, looks at [`FW_IDLE`] and rings only when
//! it finds 1, which it swaps back to 0 first, so one host rings per sleep.
//! Each side's store is followed by a full fence before its load of the
//! other's word (Dekker's pattern): of the two loads at least one sees the
//! other side's store, so either the appliance finds the entry before it
//! halts or the host finds it asking and rings. A ring that comes while the
//! appliance is still awake only makes its next halt return at once.
//!
//! Appliance to host ([`CqArm`], [`CqNotify`]): `ibv_req_notify_cq` stores a
//! new request in the completion ring's `arm` word (a sequence number, and
//! bit 0 for solicited-only); the appliance, having published completions,
//! loads `arm` and, when it holds a request not yet answered that these
//! completions satisfy, stores it in `notified` and rings the owner's peer
//! (the slot's `host_peer`). One event per request: the host arms again for
//! the next. Here too a fence sits between each side's store and its load:
//! the host, after arming, polls the ring (as `ibv_req_notify_cq`'s callers
//! do), so a completion published before the appliance saw the request is
//! found by that poll.
//!
//! Everything the host writes here is only a request: the appliance keeps
//! its own copy of what it answered and of whether it asked to be rung, and
//! validates a peer ID before ringing it ([`host_peer`]).

use crate::abi::{CACHE_LINE, Layout, RING_ARM, RING_NOTIFIED, SLOT_HOST_PEER, Superblock};
use crate::ring::RingGeometry;
use crate::shm::{SharedMem, ShmError};
use crate::wire::Wire;
use crate::wire_struct;

/// Region offset of the [`WakeBlock`]: right after the superblock, in page 0.
pub const WAKE_BLOCK: usize = Superblock::SIZE;

/// Region offset of the appliance's "ring me" word, on its own cache line
/// after the wake block: 1 while the appliance halts (or is about to) and
/// wants a doorbell for new work, 0 while it is awake.
pub const FW_IDLE: usize = WAKE_BLOCK + WakeBlock::SIZE;

/// Bytes of page 0 this module owns, zeroed at boot.
pub const WAKE_BYTES: usize = WakeBlock::SIZE + CACHE_LINE as usize;

const _: () = {
    assert!(WAKE_BLOCK.is_multiple_of(CACHE_LINE as usize) && FW_IDLE.is_multiple_of(CACHE_LINE as usize));
    // Page 0 holds the superblock and this; the slots start at page 1.
    assert!(FW_IDLE + CACHE_LINE as usize <= crate::abi::PAGE as usize);
};

/// How the appliance can be woken (`WakeBlock::doorbell`).
pub mod doorbell {
    /// No doorbell (`ivshmem-plain`): the appliance polls the rings, hosts
    /// poll their completion rings.
    pub const NONE: u32 = 0;
    /// `ivshmem-doorbell`: peers of one ivshmem server.
    pub const IVSHMEM: u32 = 1;

    pub fn name(d: u32) -> &'static str {
        match d {
            NONE => "none (polled)",
            IVSHMEM => "ivshmem-doorbell",
            _ => "unknown",
        }
    }
}

wire_struct! {
    /// What the appliance publishes about its doorbell, before READY (so a
    /// host that read READY sees it) and again whenever a host changed it.
    pub struct WakeBlock, size 64 {
        /// One of [`doorbell`].
        pub doorbell: u32,
        /// The appliance's ivshmem peer ID (its IVPosition register).
        pub fw_peer: u32,
        /// The vector a host rings the appliance on.
        pub fw_vector: u32,
        /// The vector the appliance rings a host on.
        pub host_vector: u32,
        /// Zero.
        pub reserved: [u32; 12],
    }
}

impl WakeBlock {
    /// No doorbell: the block an `ivshmem-plain` appliance publishes.
    pub const NONE: WakeBlock =
        WakeBlock { doorbell: doorbell::NONE, fw_peer: 0, fw_vector: 0, host_vector: 0, reserved: [0; 12] };

    /// An `ivshmem-doorbell` appliance with peer ID `fw_peer`, rung on
    /// vector 0 both ways.
    pub fn ivshmem(fw_peer: u16) -> WakeBlock {
        WakeBlock { doorbell: doorbell::IVSHMEM, fw_peer: u32::from(fw_peer), ..WakeBlock::NONE }
    }

    /// The block as the region shows it.
    pub fn read<M: SharedMem + ?Sized>(mem: &M) -> Result<WakeBlock, ShmError> {
        let mut b = [0u8; WakeBlock::SIZE];
        mem.read(WAKE_BLOCK, &mut b)?;
        // Decoding a buffer of the block's own size cannot fail.
        Ok(WakeBlock::decode(&b).unwrap_or(WakeBlock::NONE))
    }

    /// Writes the block (firmware).
    pub fn publish<M: SharedMem + ?Sized>(&self, mem: &M) -> Result<(), ShmError> {
        let mut b = [0u8; WakeBlock::SIZE];
        if self.encode(&mut b).is_some() {
            mem.write(WAKE_BLOCK, &b)?;
        }
        Ok(())
    }
}

/// Host side, after publishing an entry (a producer index) in any ring the
/// appliance consumes: whether this host must ring the appliance now. True
/// at most once per halt of the appliance, for whichever host swaps
/// [`FW_IDLE`] from 1 to 0 first.
pub fn host_must_ring<M: SharedMem + ?Sized>(mem: &M) -> Result<bool, ShmError> {
    mem.fence();
    if mem.load_u32_acquire(FW_IDLE)? != 1 {
        return Ok(false);
    }
    Ok(mem.compare_exchange_u32(FW_IDLE, 1, 0)?.is_ok())
}

/// The appliance's side of [`FW_IDLE`]: whether it asked to be rung, kept
/// privately (a host may write the word; only this decides).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Idle {
    asked: bool,
}

impl Idle {
    /// About to halt: ask hosts to ring. The caller then looks at every ring
    /// once more and halts only when all are empty.
    pub fn ask<M: SharedMem + ?Sized>(&mut self, mem: &M) -> Result<(), ShmError> {
        mem.store_u32_release(FW_IDLE, 1)?;
        self.asked = true;
        mem.fence();
        Ok(())
    }

    /// Awake (woken, or work found before halting): hosts need not ring.
    /// One store per wake-up, none while busy.
    pub fn awake<M: SharedMem + ?Sized>(&mut self, mem: &M) -> Result<(), ShmError> {
        if self.asked {
            self.asked = false;
            mem.store_u32_release(FW_IDLE, 0)?;
        }
        Ok(())
    }

    /// Whether the appliance asked to be rung and has not woken since.
    pub fn asked(&self) -> bool {
        self.asked
    }
}

/// Bit 0 of an `arm` word: only a solicited completion (a receive whose
/// message asked for an event, IBA 9.2.1's SE bit) or an unsuccessful one
/// raises the event (`ibv_req_notify_cq(cq, 1)`; IBA 11.4.2.2).
pub const ARM_SOLICITED_ONLY: u32 = 1;

/// The host's side of one completion ring's event requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CqArm {
    /// The last `arm` value written; 0 before the first request.
    last: u32,
}

impl CqArm {
    /// Requests an event for the next completion (solicited ones only with
    /// `solicited_only`). The caller polls the ring afterwards: completions
    /// published before the appliance saw this request raise no event.
    pub fn arm<M: SharedMem + ?Sized>(
        &mut self,
        mem: &M,
        ring: &RingGeometry,
        solicited_only: bool,
    ) -> Result<(), ShmError> {
        // A sequence in bits 31..1, never zero, so each request differs
        // from the answer to the one before.
        let seq = match (self.last >> 1).wrapping_add(1) & 0x7fff_ffff {
            0 => 1,
            s => s,
        };
        let word = (seq << 1) | if solicited_only { ARM_SOLICITED_ONLY } else { 0 };
        mem.store_u32_release(ring.base() + RING_ARM, word)?;
        self.last = word;
        mem.fence();
        Ok(())
    }

    /// Whether the event last asked for has come (the appliance answered
    /// that request). Stays true until the next [`CqArm::arm`].
    pub fn fired<M: SharedMem + ?Sized>(&self, mem: &M, ring: &RingGeometry) -> Result<bool, ShmError> {
        Ok(self.last != 0 && mem.load_u32_acquire(ring.base() + RING_NOTIFIED)? == self.last)
    }

    /// Whether a request is out and not yet answered.
    pub fn armed<M: SharedMem + ?Sized>(&self, mem: &M, ring: &RingGeometry) -> Result<bool, ShmError> {
        Ok(self.last != 0 && !self.fired(mem, ring)?)
    }
}

/// The appliance's side of one completion ring's event requests: the last
/// request it answered, kept privately.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CqNotify {
    answered: u32,
}

impl CqNotify {
    /// After publishing completions into `ring`: whether they answer the
    /// host's request, which is then marked answered (the caller rings the
    /// owner). `solicited`: a solicited or unsuccessful completion was
    /// among them.
    pub fn completions_added<M: SharedMem + ?Sized>(
        &mut self,
        mem: &M,
        ring: &RingGeometry,
        solicited: bool,
    ) -> Result<bool, ShmError> {
        mem.fence();
        let arm = mem.load_u32_acquire(ring.base() + RING_ARM)?;
        if arm == 0 || arm == self.answered || (arm & ARM_SOLICITED_ONLY != 0 && !solicited) {
            return Ok(false);
        }
        self.answered = arm;
        mem.store_u32_release(ring.base() + RING_NOTIFIED, arm)?;
        Ok(true)
    }
}

/// Largest ivshmem peer ID (the Doorbell register has 16 bits for it).
pub const MAX_PEER: u32 = 0xffff;

/// The ivshmem peer ID of context `ctx`'s owner, as its slot says, if it is
/// one the appliance may ring: present, within 16 bits, not `fw_peer`.
pub fn host_peer<M: SharedMem + ?Sized>(mem: &M, layout: &Layout, ctx: u32, fw_peer: u32) -> Option<u16> {
    let off = layout.slot_off(ctx)? + SLOT_HOST_PEER;
    let id = mem.load_u32_acquire(off).ok()?.checked_sub(1)?;
    (id <= MAX_PEER && id != fw_peer).then_some(id as u16)
}

/// A set of context indices (at most [`crate::abi::MAX_CONTEXTS`]): whom a
/// pump owes a wake-up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextSet {
    bits: [u64; 4],
}

impl ContextSet {
    /// Adds `ctx` (one beyond the largest is ignored).
    pub fn insert(&mut self, ctx: u32) {
        if let Some(w) = self.bits.get_mut(ctx as usize / 64) {
            *w |= 1 << (ctx % 64);
        }
    }

    pub fn contains(&self, ctx: u32) -> bool {
        self.bits.get(ctx as usize / 64).is_some_and(|w| w & 1 << (ctx % 64) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    /// Adds every member of `other`.
    pub fn extend(&mut self, other: &ContextSet) {
        for (a, b) in self.bits.iter_mut().zip(other.bits) {
            *a |= b;
        }
    }

    /// The members, smallest first.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.bits.len() as u32 * 64).filter(|&c| self.contains(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{LayoutParams, RingPlacement};
    use crate::ring::{Consumer, Producer};
    use crate::shm::fake::HeapShm;
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    fn ring(mem: &HeapShm) -> RingGeometry {
        let g = RingGeometry::new(RingPlacement { off: 0x1000, entries: 16, entry_size: 64 }, mem.len()).unwrap();
        g.reset(mem).unwrap();
        g
    }

    /// Every interleaving of one host's two steps (publish an entry, then
    /// decide whether to ring) with the appliance's two (ask to be rung,
    /// then look at the ring): whenever the appliance halts on an empty
    /// ring, the host rings. The lost wake-up would be the appliance
    /// halting with the entry unseen and no ring coming.
    #[test]
    fn no_interleaving_of_publish_and_halt_loses_the_wake_up() {
        // 0, 1: the host's steps; 2, 3: the appliance's.
        let orders = [[0, 1, 2, 3], [0, 2, 1, 3], [0, 2, 3, 1], [2, 0, 1, 3], [2, 0, 3, 1], [2, 3, 0, 1]];
        for order in orders {
            let mem = HeapShm::new(0x2000);
            let g = ring(&mem);
            let (mut producer, mut consumer, mut idle) = (Producer::new(g), Consumer::new(g), Idle::default());
            let (mut rang, mut halted) = (false, false);
            for step in order {
                match step {
                    0 => producer.push(&mem, &[1]).unwrap(),
                    1 => rang = host_must_ring(&mem).unwrap(),
                    2 => idle.ask(&mem).unwrap(),
                    _ => {
                        halted = consumer.available(&mem).unwrap() == 0;
                        if !halted {
                            idle.awake(&mem).unwrap();
                        }
                    }
                }
            }
            assert!(!halted || rang, "order {order:?}: halted on an unseen entry and nobody rang");
            if !halted {
                assert_eq!(mem.load_u32_acquire(FW_IDLE), Ok(0), "order {order:?}: awake, yet asking");
            }
        }
    }

    /// Two hosts publishing while the appliance sleeps: exactly one rings.
    #[test]
    fn one_ring_per_sleep() {
        let mem = HeapShm::new(0x2000);
        let mut idle = Idle::default();
        assert!(!host_must_ring(&mem).unwrap(), "awake: nobody rings");
        idle.ask(&mem).unwrap();
        assert!(host_must_ring(&mem).unwrap());
        assert!(!host_must_ring(&mem).unwrap(), "the second host finds it rung");
        idle.awake(&mem).unwrap();
        idle.ask(&mem).unwrap();
        idle.awake(&mem).unwrap();
        assert!(!host_must_ring(&mem).unwrap(), "woke by itself: nobody rings");
        // A host that wrote nonsense into the word makes nobody ring: the
        // appliance then finds the work at its next heartbeat.
        mem.store_u32_release(FW_IDLE, 7).unwrap();
        assert!(!host_must_ring(&mem).unwrap());
    }

    /// The real thing with threads: a host thread publishes entries with
    /// pauses of every length, an appliance thread consumes them and, when
    /// it finds none, asks, looks again and sleeps on a channel that only a
    /// ring fills (no timeout but a generous deadlock bound): a lost
    /// wake-up leaves the appliance asleep with entries waiting.
    #[test]
    fn a_sleeping_consumer_is_always_woken() {
        const N: u32 = 20_000;
        let mem = Arc::new(HeapShm::new(0x2000));
        let g = ring(&mem);
        let (tx, rx) = mpsc::channel::<()>();
        let fw = {
            let mem = mem.clone();
            std::thread::spawn(move || {
                let (mut consumer, mut idle, mut got, mut sleeps) = (Consumer::new(g), Idle::default(), 0u32, 0u32);
                let mut b = [0u8; 64];
                while got < N {
                    idle.awake(&*mem).unwrap();
                    while consumer.pop(&*mem, &mut b).unwrap() {
                        got += 1;
                    }
                    if got == N {
                        break;
                    }
                    idle.ask(&*mem).unwrap();
                    if consumer.available(&*mem).unwrap() > 0 {
                        continue;
                    }
                    sleeps += 1;
                    rx.recv_timeout(Duration::from_secs(60)).expect("lost wake-up: asleep with entries waiting");
                }
                sleeps
            })
        };
        let mut producer = Producer::new(g);
        let mut rings = 0u32;
        for i in 0..N {
            while producer.free(&*mem).unwrap() == 0 {
                std::thread::yield_now();
            }
            producer.push(&*mem, &[i as u8]).unwrap();
            if host_must_ring(&*mem).unwrap() {
                rings += 1;
                tx.send(()).unwrap();
            }
            for _ in 0..(i % 7) * (i % 13) {
                std::hint::spin_loop();
            }
            if i % 97 == 0 {
                std::thread::yield_now();
            }
        }
        let sleeps = fw.join().unwrap();
        assert!(rings >= sleeps, "{rings} rings for {sleeps} sleeps");
    }

    #[test]
    fn an_armed_cq_fires_once_per_request() {
        let mem = HeapShm::new(0x2000);
        let g = ring(&mem);
        let (mut host, mut fw) = (CqArm::default(), CqNotify::default());
        assert!(!fw.completions_added(&mem, &g, true).unwrap(), "never armed");
        assert!(!host.fired(&mem, &g).unwrap() && !host.armed(&mem, &g).unwrap());
        host.arm(&mem, &g, false).unwrap();
        assert!(host.armed(&mem, &g).unwrap());
        assert!(fw.completions_added(&mem, &g, false).unwrap());
        assert!(host.fired(&mem, &g).unwrap() && !host.armed(&mem, &g).unwrap());
        assert!(!fw.completions_added(&mem, &g, true).unwrap(), "answered: no second event");
        host.arm(&mem, &g, false).unwrap();
        assert!(!host.fired(&mem, &g).unwrap(), "a new request is not the old answer");
        assert!(fw.completions_added(&mem, &g, false).unwrap());
    }

    #[test]
    fn solicited_only_waits_for_a_solicited_completion() {
        let mem = HeapShm::new(0x2000);
        let g = ring(&mem);
        let (mut host, mut fw) = (CqArm::default(), CqNotify::default());
        host.arm(&mem, &g, true).unwrap();
        assert!(!fw.completions_added(&mem, &g, false).unwrap());
        assert!(host.armed(&mem, &g).unwrap(), "still armed");
        assert!(fw.completions_added(&mem, &g, true).unwrap());
        assert!(host.fired(&mem, &g).unwrap());
    }

    /// The arm race: the host arms and then polls, the appliance publishes
    /// and then looks at `arm`; in every interleaving the host either finds
    /// the completion by polling or gets the event.
    #[test]
    fn arming_then_polling_never_misses_a_completion() {
        let orders = [[0, 1, 2, 3], [0, 2, 1, 3], [0, 2, 3, 1], [2, 0, 1, 3], [2, 0, 3, 1], [2, 3, 0, 1]];
        for order in orders {
            let mem = HeapShm::new(0x2000);
            let g = ring(&mem);
            let (mut host, mut fw) = (CqArm::default(), CqNotify::default());
            let (mut producer, mut consumer) = (Producer::new(g), Consumer::new(g));
            let (mut polled, mut event) = (false, false);
            for step in order {
                match step {
                    0 => host.arm(&mem, &g, false).unwrap(),
                    1 => polled = consumer.available(&mem).unwrap() > 0,
                    2 => producer.push(&mem, &[0; 64]).unwrap(),
                    _ => event = fw.completions_added(&mem, &g, false).unwrap(),
                }
            }
            assert!(polled || event, "order {order:?}: the completion was neither polled nor signalled");
            assert_eq!(event, host.fired(&mem, &g).unwrap());
        }
    }

    #[test]
    fn host_peers_are_checked_before_use() {
        let mem = HeapShm::new(4 << 20);
        let l = Layout::new(4 << 20, LayoutParams { num_contexts: 2, ..LayoutParams::default() }).unwrap();
        let slot = l.slot_off(1).unwrap() + SLOT_HOST_PEER;
        assert_eq!(host_peer(&mem, &l, 1, 0), None, "zero: no doorbell");
        mem.store_u32_release(slot, 4).unwrap();
        assert_eq!(host_peer(&mem, &l, 1, 0), Some(3));
        assert_eq!(host_peer(&mem, &l, 1, 3), None, "the appliance itself");
        mem.store_u32_release(slot, 0x1_0001).unwrap();
        assert_eq!(host_peer(&mem, &l, 1, 0), None, "beyond 16 bits");
        assert_eq!(host_peer(&mem, &l, 2, 0), None, "no such context");
    }

    #[test]
    fn context_sets() {
        let mut s = ContextSet::default();
        assert!(s.is_empty());
        s.insert(3);
        s.insert(200);
        s.insert(256);
        let mut t = ContextSet::default();
        t.insert(64);
        s.extend(&t);
        assert_eq!(s.iter().collect::<std::vec::Vec<_>>(), [3, 64, 200]);
    }

    #[test]
    fn the_wake_block_round_trips_after_the_superblock() {
        let mem = HeapShm::new(0x2000);
        assert_eq!(WakeBlock::read(&mem), Ok(WakeBlock::NONE));
        WakeBlock::ivshmem(5).publish(&mem).unwrap();
        let w = WakeBlock::read(&mem).unwrap();
        assert_eq!((w.doorbell, w.fw_peer, w.fw_vector, w.host_vector), (doorbell::IVSHMEM, 5, 0, 0));
        assert_eq!((WAKE_BLOCK, FW_IDLE), (256, 320));
    }
}
