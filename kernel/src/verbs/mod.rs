//! The verbs ring: host programs reach the appliance through the ivshmem
//! region; the firmware serves their commands from the poll loop, and the
//! provider's pump carries their WQEs into the rxe transport and its
//! completions back into their CQ rings.
//!
//! With `ivshmem-doorbell` ([`doorbell`]) hosts ring the appliance: before
//! it halts it asks to be rung and looks at the rings once more
//! (`verbs_ring::wake`), so it sleeps until a host posts, a frame comes or
//! the next heartbeat (1 ms while a host is attached: leases, slot changes,
//! rdma_cm; [`IDLE_BEAT`] while none is, a host that attaches ringing the
//! beat that attaches it at once); commands are answered
//! on every pass, between heartbeats; and a completion on a CQ its host
//! armed rings that host's peer. The data path's pump runs on every pass of
//! the poll loop, so completions the network task produced in the same pass
//! reach the CQ rings at once.
//!
//! `ivshmem-plain` raises no interrupt, so there the ring is polled.
//! Commands: one tick (a heartbeat) every period (1 ms) while idle, and at
//! once again while commands keep coming, so a burst is served back to
//! back. While WQEs or completions moved within [`LINGER`] the loop halts
//! only [`DOORBELL_POLL`] at a time (a host that just got a completion
//! usually posts again soon). An idle appliance halts a heartbeat at a time.

pub mod doorbell;

use crate::net::Net;
use crate::net::memory::ApplianceMemory;
use crate::net::rdma::NicSink;
use crate::time::{Duration, Instant};
use alloc::rc::Rc;
use core::net::IpAddr;
use drivers::ivshmem::{self, IvshmemRegion};
use kbase::pci::{Bar, Function};
use knet::neigh::Resolution;
use knet::steer::LinkStats;
use rdma::core::{NetdevProvider, RdmaCore};
use rdma::rxe::sink::FrameSink;
use rdma::rxe::transport::RxeTransport;
use rdma::uverbs::{CoreAccess, MacResolution, TransportAccess, Uverbs};
use verbs_ring::dispatch::Limits;
use verbs_ring::wake::{self, Idle, WakeBlock};
use verbs_ring::{Firmware, Layout, LayoutParams, Status};

/// Commands served per context per tick.
const BUDGET: u32 = 32;

/// Without a doorbell: how long the ring is polled often after WQEs or
/// completions last moved, before falling back to one poll per heartbeat.
const LINGER: Duration = Duration::from_millis(5);
/// How often "often" is: the halt between two looks at the doorbells.
const DOORBELL_POLL: Duration = Duration::from_micros(50);

/// With a doorbell and no host attached: the beat that still republishes a
/// superblock or wake block a host overwrote and notices a slot claimed
/// without a ring.
const IDLE_BEAT: Duration = Duration::from_millis(50);

/// What the ring's provider is lent for one tick or one pump: the network
/// (the core, whose devices own their transports; the NICs and neighbour
/// tables) and the region. Nothing is kept past the call.
pub struct NetAccess<'a> {
    pub net: Option<&'a mut Net>,
    pub mem: &'a IvshmemRegion,
}

impl CoreAccess for NetAccess<'_> {
    fn with<R>(
        &mut self,
        f: impl FnOnce(&mut RdmaCore, &dyn NetdevProvider) -> Result<R, Status>,
    ) -> Result<R, Status> {
        let Net { netdevs, rdma, .. } = self.net.as_deref_mut().ok_or(Status::ENODEV)?;
        let result = f(&mut rdma.core, &crate::net::rdma::Provider(netdevs));
        // A link added or removed over the ring settles like one from the console.
        rdma.process_events();
        result
    }
}

impl TransportAccess for NetAccess<'_> {
    type Mem = ApplianceMemory;
    type Shm = IvshmemRegion;

    fn with_transport<R>(
        &mut self,
        dev: u32,
        f: impl FnOnce(&mut RxeTransport<ApplianceMemory>, &mut dyn FrameSink, &IvshmemRegion) -> Result<R, Status>,
    ) -> Result<R, Status> {
        let net = self.net.as_deref_mut().ok_or(Status::ENODEV)?;
        // The device's transport sends on its own netdev's NIC.
        let ifindex = net.rdma.core.device(dev).ok_or(Status::ENODEV)?.netdev().ifindex;
        let link = net.link_of(ifindex).ok_or(Status::ENODEV)?;
        let Net { links, netdevs, rdma, .. } = net;
        let nic = &mut links.get_mut(link).ok_or(Status::ENODEV)?.nic;
        let t = rdma.transport_mut(dev).ok_or(Status::ENODEV)?;
        let mut fallback = LinkStats::default();
        let stats = netdevs.stats_mut(ifindex).unwrap_or(&mut fallback);
        let result = f(t, &mut NicSink { nic, stats }, self.mem);
        // The NIC rings its doorbell once per burst: this one ends here.
        crate::prof::KICK.time(|| drivers::nic::Nic::service(nic));
        result
    }

    fn resolve(&mut self, dev: u32, ip: IpAddr, now: Instant) -> MacResolution {
        let Some(net) = self.net.as_deref_mut() else { return MacResolution::Failed };
        // The next hop is asked for on the device's own netdev.
        match net.resolve(dev, ip, now) {
            Resolution::Known(mac) => MacResolution::Known(mac),
            Resolution::Pending => MacResolution::Pending,
            Resolution::Failed => MacResolution::Failed,
        }
    }
}

/// The ring server: the firmware's end of the region and the uverbs state,
/// served with the network its owner lends on each poll.
pub struct Verbs {
    mem: Rc<IvshmemRegion>,
    firmware: Firmware,
    uverbs: Uverbs,
    period: Duration,
    next_tick: Instant,
    /// Doorbell interrupts seen by the last pass.
    rings_seen: u64,
    /// When WQEs, completions or commands last moved.
    last_moved: Instant,
    /// `None` on `ivshmem-plain`: the ring is polled.
    doorbell: Option<doorbell::Doorbell>,
    /// Whether the appliance asked hosts to ring it.
    idle: Idle,
    /// Halts the appliance asked to be rung for, and those it gave up
    /// because a host had posted meanwhile (the race the handshake closes).
    halts_asked: u64,
    halts_averted: u64,
}

/// The ivshmem device's shared memory (BAR 2), mapped for the firmware.
pub fn map_region(functions: &[Function]) -> Option<(Rc<IvshmemRegion>, &Function)> {
    let f = functions.iter().find(|f| f.vendor == ivshmem::VENDOR && f.device == ivshmem::DEVICE)?;
    let Some(Bar::Memory { addr, size, .. }) = f.bars[ivshmem::MEMORY_BAR] else {
        log::error!("{}: ivshmem without a memory BAR 2", f.bdf);
        return None;
    };
    let len = usize::try_from(size).ok()?;
    // SAFETY: BAR 2 was identity-mapped write-back when the bus was scanned; it
    // is the device's shared RAM, 4 KiB aligned, and only this module uses it.
    Some((Rc::new(unsafe { IvshmemRegion::new(addr as *mut u8, len) }), f))
}

/// The ring's shape from the command line: `ring.contexts=N` host contexts
/// (default 8, at most 256) and `ring.queues=SIZE` of queue area for each
/// (default 1M; a QP's send and receive rings and a CQ's ring live there);
/// each context's buffer area is what the region has left. A value that is
/// not a number is reported and the default kept.
fn params_from_cmdline(cmdline: &str) -> LayoutParams {
    let mut p = LayoutParams::default();
    let get = |key: &str| {
        let v = kbase::cmdline::get(cmdline, key)?;
        let n = kbase::cmdline::size(v);
        if n.is_none() {
            log::error!("{key}={v}: not a number (a size may end in K, M or G); keeping the default");
        }
        n
    };
    if let Some(n) = get("ring.contexts") {
        p.num_contexts = u32::try_from(n).unwrap_or(u32::MAX);
    }
    if let Some(n) = get("ring.queues") {
        p.queue_area_size = n;
    }
    p
}

/// Publishes the ring layout in the region and serves it.
pub fn start(mem: Rc<IvshmemRegion>, f: &Function, cmdline: &str, now: Instant) -> Option<Verbs> {
    let size = verbs_ring::SharedMem::len(&*mem) as u64;
    let params = params_from_cmdline(cmdline);
    let layout = match Layout::new(size, params) {
        Ok(l) => l,
        Err(e) => {
            log::error!(
                "{}: a {} MiB region cannot hold a verbs ring of {} contexts with {} KiB of queues each: {e:?}",
                f.bdf,
                size >> 20,
                params.num_contexts,
                params.queue_area_size >> 10
            );
            return None;
        }
    };
    let doorbell = doorbell::Doorbell::setup(f);
    let wake = doorbell.as_ref().map_or(WakeBlock::NONE, |d| WakeBlock::ivshmem(d.position()));
    let firmware = match Firmware::with_wake(&*mem, layout, Limits::default(), BUDGET, wake) {
        Ok(fw) => fw,
        Err(e) => {
            log::error!("{}: verbs ring: {e:?}", f.bdf);
            return None;
        }
    };
    log::info!(
        "ring ready in ivshmem {} ({} MiB, {} contexts, {})",
        f.bdf,
        size >> 20,
        params.num_contexts,
        if doorbell.is_some() { "doorbell" } else { "polled" }
    );
    let period = Duration::from_micros(u64::from(params.heartbeat_period_us));
    Some(Verbs {
        mem,
        firmware,
        uverbs: Uverbs::new(),
        period,
        next_tick: now,
        last_moved: now,
        doorbell,
        rings_seen: 0,
        idle: Idle::default(),
        halts_asked: 0,
        halts_averted: 0,
    })
}

impl Verbs {
    /// Serves the ring with the network its owner lends for this pass: the
    /// data path every time, commands on the beat (with a doorbell, on every
    /// pass), and rings the hosts whose completion events came; returns
    /// whether anything moved.
    pub fn poll(&mut self, now: Instant, net: Option<&mut Net>) -> bool {
        // Awake: hosts need not ring until the next halt.
        if self.idle.awake(&*self.mem).is_err() {
            log::error!("region access failed at the ring-me word");
        }
        let mut access = NetAccess { net, mem: &self.mem };
        let mut p = self.uverbs.provider(&mut access);
        // The data path first: completions the network produced this pass go
        // out now, whatever the beat.
        let report = crate::prof::PUMP.time(|| rdma::uverbs::pump(self.firmware.dispatcher_mut(), &mut p, now));
        let moved = report.moved();
        let mut wake = report.wake;
        let mut commands = false;
        // A host attaching rings with its first command; with none attached
        // the beat is slow, so that ring brings the tick that attaches it.
        let rings = self.doorbell.as_ref().map_or(0, |d| d.interrupts());
        let rung = core::mem::replace(&mut self.rings_seen, rings) != rings;
        let tick_due = now >= self.next_tick || (rung && !self.firmware.any_attached());
        if self.doorbell.is_some() && !tick_due {
            // Between heartbeats: whatever a host rang for, or queued while
            // the appliance was awake, is answered now.
            match crate::prof::TICK.time(|| self.firmware.serve_commands(&*self.mem, &mut p)) {
                Ok(report) => {
                    for ev in &report.events {
                        log::info!("{ev}");
                    }
                    if report.commands > 0 {
                        commands = true;
                        let r = rdma::uverbs::pump(self.firmware.dispatcher_mut(), &mut p, now);
                        wake.extend(&r.wake);
                    }
                }
                Err(e) => log::error!("region access failed: {e}"),
            }
        }
        if tick_due {
            // What the core told the server's client (port events, devices
            // gone) reaches the contexts before their commands are served.
            rdma::uverbs::deliver_events(self.firmware.dispatcher_mut(), &mut p);
            match crate::prof::TICK.time(|| self.firmware.tick(&*self.mem, &mut p)) {
                Ok(report) => {
                    for ev in &report.events {
                        log::info!("{ev}");
                    }
                    commands = report.commands > 0;
                    if commands {
                        // A command may have brought a QP to RTS with WQEs waiting.
                        let r = rdma::uverbs::pump(self.firmware.dispatcher_mut(), &mut p, now);
                        wake.extend(&r.wake);
                    }
                    // rdma_cm on the beat: MADs that came, those the commands
                    // queued, retries and address resolutions.
                    crate::prof::CM.time(|| rdma::uverbs::cm_pump(&mut p, now));
                }
                Err(e) => {
                    log::error!("region access failed: {e}; the ring is stopped");
                    self.next_tick = Instant::from_micros(u64::MAX);
                    return false;
                }
            }
            // Only commands make the next tick come at once: a tick is a
            // heartbeat, and leases are counted in them, so a busy data path
            // must not speed the beat up (it would expire idle contexts'
            // leases early). The data path is pumped on every pass instead.
            // With a doorbell, commands are served between beats anyway,
            // and with no host attached there are no leases to count and no
            // rdma_cm ids: the beat slows to IDLE_BEAT, since each beat
            // wakes a halted appliance (at 1 ms an idle QEMU used 11% of a
            // host core).
            let period = match &self.doorbell {
                Some(_) if !self.firmware.any_attached() => IDLE_BEAT,
                _ => self.period,
            };
            self.next_tick = if commands && self.doorbell.is_none() { now } else { now + period };
        }
        self.ring_hosts(&wake);
        if moved || commands {
            self.last_moved = now;
        }
        moved || commands
    }

    /// Rings the hosts whose armed CQs got their completions.
    fn ring_hosts(&mut self, wake: &wake::ContextSet) {
        let Some(d) = self.doorbell.as_mut() else { return };
        if wake.is_empty() {
            return;
        }
        let fw_peer = u32::from(d.position());
        for ctx in wake.iter() {
            if let Some(peer) = wake::host_peer(&*self.mem, self.firmware.layout(), ctx, fw_peer) {
                d.ring_host(peer);
            }
        }
    }

    /// Whether the poll loop may halt now. With a doorbell: ask hosts to
    /// ring, then look at every ring once more (`verbs_ring::wake`'s
    /// handshake); work found meanwhile keeps the appliance awake. Without
    /// one the ring is polled on the deadline, and the loop may halt.
    pub fn may_halt(&mut self) -> bool {
        if self.doorbell.is_none() {
            return true;
        }
        if self.idle.ask(&*self.mem).is_err() {
            return true;
        }
        self.halts_asked += 1;
        let pending = self.firmware.commands_pending(&*self.mem) || self.uverbs.rings_pending(&*self.mem);
        if pending {
            self.halts_averted += 1;
            let _ = self.idle.awake(&*self.mem);
        }
        !pending
    }

    /// What `ring` prints: how hosts wake the appliance and are woken.
    pub fn wake_status(&self) -> alloc::string::String {
        match &self.doorbell {
            Some(d) => alloc::format!(
                "ring: doorbell ivshmem peer {} {}\n\
                 doorbell interrupts {} host rings {} halts asked {} averted {}",
                d.position(),
                d.irq(),
                d.interrupts(),
                d.rings(),
                self.halts_asked,
                self.halts_averted
            ),
            None => alloc::string::String::from("ring: polled (ivshmem-plain: no doorbell)"),
        }
    }

    /// Takes the receives the host posted into the transports: the poll
    /// loop runs this before the network takes frames in (see
    /// `rdma::uverbs::pump_receives`). Whether any moved.
    pub fn pump_receives(&mut self, now: Instant, net: Option<&mut Net>) -> bool {
        let mut access = NetAccess { net, mem: &self.mem };
        let mut p = self.uverbs.provider(&mut access);
        crate::prof::PUMP.time(|| rdma::uverbs::pump_receives(self.firmware.dispatcher_mut(), &mut p, now).moved())
    }

    /// What `rdma resource` lists on the console: every device's objects,
    /// through the dispatcher's RES_ENTRY and QUERY_RESOURCES, so the
    /// console prints what a host tool reads from the ring.
    pub fn resources(&mut self, net: &mut Net) -> rdma::core::console::Resources {
        use verbs_ring::cmd::{NO_MORE, res_kind};
        let devs: alloc::vec::Vec<u32> = net.rdma.core.devices().map(|d| d.index()).collect();
        let mut access = NetAccess { net: Some(net), mem: &self.mem };
        let mut p = self.uverbs.provider(&mut access);
        let d = self.firmware.dispatcher();
        let mut res = rdma::core::console::Resources::default();
        for dev in devs {
            let first = res.entries.len();
            for kind in
                [res_kind::QP, res_kind::CQ, res_kind::MR, res_kind::PD, res_kind::CM_ID, res_kind::CTX, res_kind::SRQ]
            {
                let mut cursor = 0;
                while let Ok(e) = d.res_entry(&*self.mem, &mut p, dev, kind, cursor) {
                    res.entries.push(e);
                    // Cursors grow: a dispatcher that answered otherwise would loop.
                    if e.next == NO_MORE || e.next <= cursor {
                        break;
                    }
                    cursor = e.next;
                }
            }
            let counts =
                verbs_ring::show::rdma_res::with_kernel(&d.resource_counts(&mut p, dev), &res.entries[first..]);
            res.counts.push((dev, counts));
        }
        res
    }

    /// While data moved recently the next doorbell is likely close: look again
    /// after a short halt rather than a whole beat. Spinning instead would take
    /// a core from QEMU's I/O threads and the host programs (measured: it
    /// doubles round trips on a 2-core host).
    pub fn deadline(&self, now: Instant) -> Option<Instant> {
        if self.doorbell.is_some() {
            // Hosts ring: only the heartbeat is due.
            return Some(self.next_tick);
        }
        if now.saturating_since(self.last_moved) < LINGER {
            Some(self.next_tick.min(now + DOORBELL_POLL))
        } else {
            Some(self.next_tick)
        }
    }
}
