//! Profiling counters: where the firmware's time goes on the data path. Each
//! [`Span`] adds up the TSC cycles spent in one kind of work and how often it
//! ran; the console's `perf` prints them as shares of the wall time since the
//! last `perf reset`. One `rdtsc` on each side of a span is cheap enough to
//! leave on (tens of ns under TCG, against microseconds per frame).

use crate::time;
use core::sync::atomic::{AtomicU64, Ordering};

/// Cycles spent in one kind of work, and how many times it ran.
pub struct Span {
    pub name: &'static str,
    cycles: AtomicU64,
    count: AtomicU64,
}

impl Span {
    const fn new(name: &'static str) -> Span {
        Span { name, cycles: AtomicU64::new(0), count: AtomicU64::new(0) }
    }

    /// Adds one run that started at TSC `since` (from [`start`]).
    pub fn add(&self, since: u64) {
        self.add_cycles(time::cycles().saturating_sub(since));
    }

    pub fn add_cycles(&self, cycles: u64) {
        self.cycles.fetch_add(cycles, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Times `f` as one run.
    pub fn time<R>(&self, f: impl FnOnce() -> R) -> R {
        let t = start();
        let r = f();
        self.add(t);
        r
    }

    pub fn cycles(&self) -> u64 {
        self.cycles.load(Ordering::Relaxed)
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn reset(&self) {
        self.cycles.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
    }
}

/// The TSC now, to pass to [`Span::add`].
pub fn start() -> u64 {
    time::cycles()
}

/// Halted in the idle loop (waiting for an interrupt or a deadline).
pub static IDLE: Span = Span::new("idle (hlt)");
/// Waking from a halt: from the interrupt handler's first cycles to the
/// loop running again (the handler's own work, its EOI, the return). What
/// came before the handler (the device model raising the interrupt, the
/// emulator leaving its halt) is outside the guest's clock.
pub static WAKE: Span = Span::new("wake: irq to loop");
/// The network task's whole pass (everything below RX/TX is inside it).
pub static NET: Span = Span::new("net task");
/// Taking a frame from virtio-net's used ring and reposting its buffer.
pub static RX_NIC: Span = Span::new("rx: virtio ring");
/// One RoCE frame through the transport: parse, ICRC check, scatter into
/// memory, the responder's or completer's work (an ACK it sends included).
pub static RX_ROCE: Span = Span::new("rx: roce frame");
/// Writing one frame into a TX buffer: headers, the payload's gather copy,
/// the ICRC.
pub static TX_FILL: Span = Span::new("tx: build frame");
/// Queueing one frame on virtio-net (buffer, descriptor, notify, reclaim),
/// without building it.
pub static TX_QUEUE: Span = Span::new("tx: virtio queue");
/// The verbs ring's pump: SQ/RQ rings into the transport, CQEs out.
pub static PUMP: Span = Span::new("verbs pump");
/// The verbs ring's command tick.
pub static TICK: Span = Span::new("verbs tick");
/// rdma_cm's pass: MADs in and out of QP1, CM timers.
pub static CM: Span = Span::new("rdma_cm");

/// The network task's interrupt handling: reading virtio's ISR (which
/// deasserts INTx), unmasking the line at the PIC.
pub static IRQ: Span = Span::new("net: irq ack");
/// smoltcp's pass (ICMP, ARP answers, the pingpong's TCP).
pub static SMOLTCP: Span = Span::new("net: smoltcp");
/// The transport's timers and sends outside a received frame.
pub static TRANSPORT: Span = Span::new("net: rxe poll");

/// Ending a burst of frames: `Nic::service` (reclaiming sent buffers, and
/// ringing the device's doorbell when the driver holds it until then).
pub static KICK: Span = Span::new("nic: doorbell");

/// The console's and the jobs' share of each pass (reading the UART,
/// ping, pingpong, netbench).
pub static SHELL: Span = Span::new("shell, jobs");

pub static ALL: [&Span; 15] = [
    &IDLE, &WAKE, &NET, &IRQ, &SMOLTCP, &TRANSPORT, &RX_NIC, &RX_ROCE, &TX_FILL, &TX_QUEUE, &KICK, &PUMP, &TICK, &CM,
    &SHELL,
];

/// TSC at the last reset.
static SINCE: AtomicU64 = AtomicU64::new(0);
/// TSC when the latest interrupt handler started ([`irq_taken`]).
static IRQ_AT: AtomicU64 = AtomicU64::new(0);

/// Called first by every interrupt handler: stamps the interrupt, so the
/// loop can tell how long waking took ([`WAKE`]). One `rdtsc` and a store:
/// nothing that could contend with the interrupted code.
pub fn irq_taken() {
    IRQ_AT.store(time::cycles(), Ordering::Relaxed);
}

/// After a halt that began at TSC `halted`: counts the wake-up, if an
/// interrupt ended it.
pub fn woke(halted: u64) {
    let at = IRQ_AT.load(Ordering::Relaxed);
    if at >= halted {
        WAKE.add(at);
    }
}

pub fn reset() {
    for s in ALL {
        s.reset();
    }
    SINCE.store(time::cycles(), Ordering::Relaxed);
}

/// Cycles since the last reset (since boot before the first).
pub fn elapsed() -> u64 {
    time::cycles().saturating_sub(SINCE.load(Ordering::Relaxed))
}
