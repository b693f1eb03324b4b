//! The RDMA core on the appliance: one `RdmaCore` with the rxe link type, fed
//! by the netdev notifier chain (the GID cache follows addresses, ports follow
//! the link). Each rxe device's driver owns its transport; the network pass
//! reaches a device's transport here to hand it frames and time.

use super::memory::{self, ApplianceMemory};
use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::sync::atomic::{AtomicBool, Ordering};
use drivers::ivshmem::IvshmemRegion;
use drivers::nic::{MAX_SEGMENTS, Nic, TxSegment};
use knet::netdev::Netdevs;
use knet::steer::LinkStats;
use rdma::core::{Client, ClientData, ClientError, Device, IbEvent, IbEventType, PortState};
use rdma::core::{NetdevEvent, NetdevInfo, NetdevProvider, RdmaCore};
use rdma::rxe::RxeDriver;
use rdma::rxe::device::Config;
use rdma::rxe::memory::DmaSpan;
use rdma::rxe::sink::FrameSink;
use rdma::rxe::transport::RxeTransport;
use rdma::wire::frame::{DropCounters, parse};
use vocab::IfIndex;

/// The transport of an rxe device.
pub type Transport = RxeTransport<ApplianceMemory>;
type Driver = RxeDriver<ApplianceMemory>;

/// The core (its devices own their drivers and transports) and the events
/// the netdev chain handed over since the last pass.
pub struct Rdma {
    pub core: RdmaCore,
    pending: Rc<RefCell<Vec<NetdevEvent>>>,
    /// RoCE frames that arrived on a netdev with no rxe device.
    pub rx: RoceRx,
    shared: Option<Rc<IvshmemRegion>>,
}

/// Whether RoCE payloads from memory go out zero-copy where the NIC can
/// chain them (`rxe.zero_copy=0` on the command line turns it off, to compare).
static ZERO_COPY: AtomicBool = AtomicBool::new(true);

/// Reads `rxe.zero_copy=` from the kernel command line.
pub fn zero_copy_from_cmdline(cmdline: &str) {
    if let Some(v) = kbase::cmdline::get(cmdline, "rxe.zero_copy").and_then(|v| v.parse::<u32>().ok()) {
        ZERO_COPY.store(v != 0, Ordering::Relaxed);
    }
}

/// The transport's tunables, with the pacing ones taken from the kernel
/// command line when given (for experiments): `rxe.window=` (packets),
/// `rxe.inflight=` (bytes, 0 for no byte limit), `rxe.ack_every=` (packets),
/// `rxe.coalesce_acks=0` (one ACK per request that asks, instead of one per
/// QP every `rxe.ack_batch=` received frames, 4 by default, and at the
/// batch's end).
pub fn config_from_cmdline(cmdline: &str) -> Config {
    let mut c = Config::default();
    let num = |key: &str| kbase::cmdline::get(cmdline, key).and_then(|v| v.parse::<u32>().ok());
    if let Some(w) = num("rxe.window").filter(|&w| w >= c.min_window) {
        c.max_window = w;
    }
    if let Some(b) = num("rxe.inflight") {
        c.max_inflight_bytes = b;
    }
    if let Some(a) = num("rxe.ack_every").filter(|&a| a > 0) {
        c.max_pkt_per_ack = a;
    }
    if let Some(on) = num("rxe.coalesce_acks") {
        c.coalesce_acks = on != 0;
    }
    if let Some(n) = num("rxe.ack_batch").filter(|&n| n > 0) {
        c.ack_batch = n;
    }
    c
}

impl Rdma {
    /// A core whose rxe devices get transports with `config`, over the
    /// host-shared region (where host programs register memory) when there is one.
    pub fn new(config: Config, shared: Option<Rc<IvshmemRegion>>) -> Self {
        let region = shared.clone();
        let factory = RxeDriver::factory(move || ApplianceMemory::new(region.clone()), config);
        let mut core = RdmaCore::with_rxe(factory);
        // The console hears every device's port go up and down, as Linux's
        // log does; the ring server registers its own client on its first pass.
        if let Err(e) = core.register_client(Box::new(PortLog)) {
            log::warn!("rdma: no port log: {e}");
        }
        Rdma { core, pending: Rc::default(), rx: RoceRx::default(), shared }
    }

    /// The host-shared region, when there is one (`cost shm`).
    pub fn shared_memory(&self) -> Option<&IvshmemRegion> {
        self.shared.as_deref()
    }

    /// The transport of device `index`.
    pub fn transport_mut(&mut self, index: u32) -> Option<&mut Transport> {
        Some(Driver::of_mut(self.core.device_mut(index)?)?.transport_mut())
    }

    /// The rxe device bound to netdev `ifindex` (rxe: at most one per netdev).
    pub fn device_on(&self, ifindex: IfIndex) -> Option<u32> {
        self.core.devices().find(|d| d.netdev().ifindex == ifindex).map(|d| d.index())
    }

    /// What takes the RoCE frames arriving on netdev `ifindex`: the
    /// transport of the rxe device on it, and the counters of frames that
    /// find none.
    pub fn receiver(&mut self, ifindex: IfIndex) -> (Option<&mut Transport>, &mut RoceRx) {
        let index = self.device_on(ifindex);
        let Rdma { core, rx, .. } = self;
        let t = index.and_then(|i| core.device_mut(i)).and_then(Driver::of_mut).map(|d| d.transport_mut());
        (t, rx)
    }

    /// The transport of the rxe device on netdev `ifindex`.
    pub fn transport_on(&mut self, ifindex: IfIndex) -> Option<&mut Transport> {
        let index = self.device_on(ifindex)?;
        self.transport_mut(index)
    }

    /// Every device's transport, in index order.
    pub fn transports(&self) -> impl Iterator<Item = &Transport> {
        self.core.devices().filter_map(|d| Some(Driver::of(d)?.transport()))
    }

    /// A netdev-chain subscriber that forwards every event to the core's queue.
    pub fn notifier(&self) -> impl FnMut(&NetdevEvent) + 'static {
        let pending = self.pending.clone();
        move |ev: &NetdevEvent| pending.borrow_mut().push(ev.clone())
    }

    /// Hands queued netdev events to the core and lets it process them in order.
    pub fn process_events(&mut self) -> bool {
        let events = core::mem::take(&mut *self.pending.borrow_mut());
        let any = !events.is_empty();
        for ev in events {
            if let Err(e) = self.core.netdev_event(ev) {
                log::warn!("rdma: netdev event refused: {e}");
            }
        }
        any | (self.core.process_events() > 0)
    }
}

/// The netdev table as the core's control path queries it.
pub struct Provider<'a>(pub &'a Netdevs);

impl NetdevProvider for Provider<'_> {
    fn for_each_netdev(&self, f: &mut dyn FnMut(&NetdevInfo)) {
        for dev in self.0.iter() {
            f(&dev.snapshot());
        }
    }
}

/// A client of the core for the console: logs each device's port state as
/// Linux's rxe does (`rxe0: set active`, `rxe0: set down`), at the device's
/// arrival and at every change after.
struct PortLog;

impl Client for PortLog {
    fn name(&self) -> &str {
        "console"
    }

    fn add(&mut self, dev: &Device) -> Result<Option<ClientData>, ClientError> {
        if dev.ports().iter().any(|p| p.state() == PortState::Active) {
            log::info!("{}: set active", dev.name());
        }
        Ok(None)
    }

    fn remove(&mut self, _dev: &Device, _data: Option<ClientData>) {}

    fn event(&mut self, ev: &IbEvent, dev: &Device, _data: Option<&mut ClientData>) {
        match ev.kind {
            IbEventType::PortActive => log::info!("{}: set active", dev.name()),
            IbEventType::PortErr => log::info!("{}: set down", dev.name()),
            IbEventType::GidChange | IbEventType::PkeyChange => {}
        }
    }
}

/// What happened to the RoCE v2 frames steered to the RDMA path.
#[derive(Default)]
pub struct RoceRx {
    /// Well-formed frames (ICRC good) with no rxe device to take them.
    pub no_transport: u64,
    pub drops: DropCounters,
}

impl RoceRx {
    pub fn receive(&mut self, frame: &[u8]) {
        match parse(frame) {
            Ok(_) => self.no_transport += 1,
            Err(reason) => self.drops.record(reason),
        }
    }
}

/// The NIC as the transport's frame sink, counting what it sends.
pub struct NicSink<'a, N: Nic> {
    pub nic: &'a mut N,
    pub stats: &'a mut LinkStats,
}

impl<N: Nic> NicSink<'_, N> {
    /// Sends one frame from the parts `lens`, timing the writing apart from the
    /// queueing and counting the frame.
    fn send(&mut self, lens: &[usize], fill: impl FnOnce(&mut [&mut [u8]])) -> bool {
        use crate::prof::{TX_FILL, TX_QUEUE, start};
        let t = start();
        let built = self.nic.transmit_parts(lens, |parts| {
            let t = start();
            fill(parts);
            start().saturating_sub(t)
        });
        let all = start().saturating_sub(t);
        if let Some(fill) = built {
            TX_FILL.add_cycles(fill);
        }
        TX_QUEUE.add_cycles(all.saturating_sub(built.unwrap_or(0)));
        match built {
            Some(_) => self.stats.record_tx(lens.iter().sum()),
            None => self.stats.tx_dropped += 1,
        }
        built.is_some()
    }
}

impl<N: Nic> FrameSink for NicSink<'_, N> {
    fn transmit(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.send(&[len], |parts| {
            if let [buf] = parts {
                fill(buf);
            }
        })
    }

    /// Headers and payload from two buffers: one descriptor each on a NIC with
    /// scatter-gather, one buffer cut in two on the others (`Nic`'s default).
    fn transmit_parts(&mut self, head_len: usize, body_len: usize, fill: &mut dyn FnMut(&mut [u8], &mut [u8])) -> bool {
        self.send(&[head_len, body_len], |parts| {
            if let [head, body] = parts {
                fill(head, body);
            }
        })
    }

    /// The NIC's room for a chain, unless zero-copy is off.
    fn gather_room(&mut self) -> usize {
        if !ZERO_COPY.load(Ordering::Relaxed) {
            return 0;
        }
        self.nic.gather_room()
    }

    /// Headers and tail into the NIC's buffers, the payload's spans as
    /// segments of the chain, each checked to lie in memory a device may
    /// read for good ([`memory::device_readable`]) before the NIC sees it.
    fn transmit_gather(
        &mut self,
        head_len: usize,
        spans: &[DmaSpan],
        tail_len: usize,
        fill: &mut dyn FnMut(&mut [u8], &mut [u8]),
    ) -> bool {
        use crate::prof::{TX_FILL, TX_QUEUE, start};
        let mut segments: heapless::Vec<TxSegment, MAX_SEGMENTS> = heapless::Vec::new();
        for s in spans {
            if !memory::device_readable(s.bus, s.len) {
                // Only a bug can get here: the transport's memory gives no other spans.
                log::warn!("rdma: a payload span {:#x}+{} outside device-readable memory", s.bus, s.len);
                self.stats.tx_errors += 1;
                return false;
            }
            // SAFETY: `device_readable` says the span lies inside the ivshmem
            // BAR or a local RDMA buffer: RAM (or a RAM-backed BAR) mapped for
            // the firmware's life and never freed (net::memory's module doc),
            // so a NIC may read it whenever it gets to the frame.
            let segment = unsafe { TxSegment::new(s.bus, s.len) };
            if segments.push(segment).is_err() {
                return false;
            }
        }
        let t = start();
        let built = self.nic.transmit_gather(head_len, &segments, tail_len, |head, tail| {
            let t = start();
            fill(head, tail);
            start().saturating_sub(t)
        });
        let all = start().saturating_sub(t);
        if let Some(fill) = built {
            TX_FILL.add_cycles(fill);
        }
        TX_QUEUE.add_cycles(all.saturating_sub(built.unwrap_or(0)));
        match built {
            Some(_) => self.stats.record_tx(head_len + spans.iter().map(|s| s.len).sum::<usize>() + tail_len),
            None => self.stats.tx_dropped += 1,
        }
        built.is_some()
    }

    /// Kicks the NIC so what was queued leaves now.
    fn flush(&mut self) {
        crate::prof::KICK.time(|| self.nic.service());
    }
}
