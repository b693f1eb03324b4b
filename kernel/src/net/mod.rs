//! Networking: the virtio-net NIC, the netdev layer (`eth0`, addresses, the
//! notifier chain), frame steering, the neighbour table for the RDMA path, the
//! smoltcp interface (ICMP, `ping`) and the RDMA core that follows the netdev.
//!
//! One pass of [`Net::poll`]: take frames from the NIC and steer each (RoCE v2
//! to the RDMA hook, ARP to the neighbour table, the rest to smoltcp, malformed
//! ones dropped and counted); let smoltcp and the neighbour table transmit;
//! deliver netdev events, in order, to their subscribers (console log, RDMA core).

pub mod bench;
mod device;
mod hal;
pub mod memory;
pub mod ping;
pub mod pingpong;
pub mod rdma;

use crate::poll::{Task, Timers};
use crate::prof;
use crate::time::Instant;
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use device::{STACK_QUEUE, StackDevice};
use drivers::nic::Nic;
use drivers::virtio_net::VirtioNet;
use hal::{KernelHal, PciConfig};
use kbase::pci::Function;
use knet::neigh::{NeighConfig, NeighTable};
use knet::netdev::{NetdevConfig, NetdevError, Netdevs};
use knet::steer::{Steer, steer};
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, Ipv4Cidr, Ipv6Cidr};
use vocab::{IfIndex, MacAddr};
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::pci::bus::{Command, DeviceFunction, PciRoot};

pub type NetDevice = VirtioNet<KernelHal, PciTransport>;

/// Frames taken from the NIC per pass, so other tasks get their turn.
const RX_BUDGET: usize = 256;
/// The appliance's network: one NIC, its netdev and the stacks above it.
pub struct Net {
    pub nic: NetDevice,
    pub irq: u8,
    /// The NIC's interrupt count when the last pass acknowledged it.
    irq_seen: u64,
    /// virtio-net's `status` field (bit 0: link up) in the device's config
    /// structure, mapped with its BAR; `None` when the device has none.
    link_status: Option<u64>,
    pub ifindex: IfIndex,
    pub netdevs: Netdevs,
    pub neigh: NeighTable,
    pub iface: Interface,
    pub sockets: SocketSet<'static>,
    pub rdma: rdma::Rdma,
    pub ping: Option<ping::PingJob>,
    pub pingpong: Option<pingpong::Job>,
    /// Finished pingpongs' objects, kept a moment for the peer's retransmissions.
    pub pingpong_lingering: Vec<pingpong::Lingering>,
    pub bench: bench::Bench,
    /// The counters `perf` shows, as they were at its last reset.
    pub perf_base: Vec<(&'static str, u64)>,
    stack_queue: VecDeque<Vec<u8>>,
    scratch: Vec<u8>,
}

fn smol_now(now: Instant) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(now.as_micros() as i64)
}

/// Finds the first virtio-net function and brings it up as `eth0`.
pub fn probe(functions: &[Function], now: Instant) -> Option<Net> {
    let f = functions.iter().find(|f| f.vendor == 0x1af4 && matches!(f.device, 0x1000 | 0x1041))?;
    let df = DeviceFunction { bus: f.bdf.bus, device: f.bdf.device, function: f.bdf.function };
    let mut root = PciRoot::new(PciConfig);
    root.set_command(df, Command::IO_SPACE | Command::MEMORY_SPACE | Command::BUS_MASTER);
    let nic = PciTransport::new::<KernelHal, _>(&mut root, df)
        .map_err(|e| log::error!("{}: virtio transport: {e:?}", f.bdf))
        .ok()
        .and_then(|t| VirtioNet::new(t).map_err(|e| log::error!("{}: virtio-net: {e:?}", f.bdf)).ok())?;
    match Net::new(nic, f.interrupt_line, now) {
        Ok(mut net) => {
            net.link_status = link_status_address(f);
            net.refresh_carrier();
            Some(net)
        }
        Err(e) => {
            log::error!("{}: {e}", f.bdf);
            None
        }
    }
}

/// Where virtio-net's `status` field is: the vendor capability of type 4
/// (device configuration) names a BAR and an offset; `status` follows the MAC.
fn link_status_address(f: &Function) -> Option<u64> {
    use kbase::pci::{Bar, Capability, ConfigAccess};
    const DEVICE_CFG: u8 = 4;
    const STATUS_OFFSET: u64 = 6;
    let offset = f.capabilities.iter().find_map(|c| match *c {
        Capability::Vendor { offset, cfg_type: DEVICE_CFG } => Some(offset),
        _ => None,
    })?;
    let bar = usize::from(crate::pci::CONFIG.read8(f.bdf, offset.wrapping_add(4)));
    let within = u64::from(crate::pci::CONFIG.read32(f.bdf, offset.wrapping_add(8)));
    match f.bars.get(bar).copied().flatten() {
        Some(Bar::Memory { addr, size, .. }) if within + STATUS_OFFSET + 2 <= size => {
            Some(addr + within + STATUS_OFFSET)
        }
        _ => None,
    }
}

impl Net {
    /// Reads the device's link status and tells the netdev layer (NETDEV_CHANGE
    /// when it changed; the RDMA port follows).
    fn refresh_carrier(&mut self) {
        let Some(addr) = self.link_status else { return };
        // SAFETY: `addr` lies in the device's memory BAR (checked against its
        // size), identity-mapped when the bus was scanned; reading the status
        // field has no side effect.
        let status = unsafe { core::ptr::read_volatile(addr as *const u16) };
        let up = status & 1 != 0;
        let name = String::from(self.name());
        if let Err(e) = self.netdevs.set_carrier(&name, up) {
            log::warn!("{name}: carrier: {e}");
        }
    }

    fn new(mut nic: NetDevice, irq: u8, now: Instant) -> Result<Self, NetdevError> {
        let mac = MacAddr(nic.mac());
        let mtu = nic.mtu() as u32;
        let mut netdevs = Netdevs::new();
        let rdma = rdma::Rdma::new();
        // Subscribers first, so they see the device appear: the console log,
        // then the RDMA core (GID cache, port state).
        netdevs.subscribe(Box::new(|ev: &knet::events::NetdevEvent| log::info!("{ev}")));
        netdevs.subscribe(Box::new(rdma.notifier()));
        let ifindex = netdevs.register(&NetdevConfig { mtu, max_mtu: mtu, ..NetdevConfig::ethernet(mac) })?;
        let name = String::from(netdevs.by_index(ifindex).map_or("eth0", |d| d.name()));
        netdevs.set_up(&name, true)?;
        // smoltcp on the same device answers ARP requests: the table only learns and asks.
        let cfg = NeighConfig { answer_requests: false, ..NeighConfig::default() };
        let neigh = NeighTable::new(ifindex, name.as_str().try_into().unwrap_or_default(), mac, cfg);

        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac.0)));
        config.random_seed = now.as_micros() ^ u64::from(u32::from_be_bytes([mac.0[2], mac.0[3], mac.0[4], mac.0[5]]));
        let (mut queue, mut scratch, mut stats) = (VecDeque::new(), Vec::new(), knet::steer::LinkStats::default());
        let iface = {
            let mut dev =
                StackDevice { queue: &mut queue, nic: &mut nic, stats: &mut stats, scratch: &mut scratch, up: true };
            Interface::new(config, &mut dev, smol_now(now))
        };
        log::info!("{name}: virtio-net mac {} mtu {mtu} irq {irq}", mac);
        let mut net = Net {
            nic,
            irq,
            irq_seen: 0,
            link_status: None,
            ifindex,
            netdevs,
            neigh,
            iface,
            sockets: SocketSet::new(Vec::new()),
            rdma,
            ping: None,
            pingpong: None,
            pingpong_lingering: Vec::new(),
            bench: bench::Bench::default(),
            perf_base: Vec::new(),
            stack_queue: queue,
            scratch,
        };
        net.sync_addresses();
        Ok(net)
    }

    /// The counters the `perf` profile shows next to its time spans: the
    /// driver's, the transport's (retransmissions, timeouts, drops by reason),
    /// by name; zero ones included, so a reset's snapshot lines up.
    pub fn perf_counters(&self) -> Vec<(&'static str, u64)> {
        let nic = self.nic.stats();
        let mut v = alloc::vec![
            ("nic rx_frames", nic.rx_frames),
            ("nic tx_frames", nic.tx_frames),
            ("nic rx_errors", nic.rx_errors),
            ("nic tx_queue_full", nic.tx_queue_full),
            ("nic tx_kicks", nic.tx_kicks),
            ("nic rx_kicks", nic.rx_kicks),
            ("nic interrupts", crate::arch::irq::count(self.irq)),
            ("timer interrupts", crate::arch::irq::count(crate::arch::irq::IRQ_TIMER)),
        ];
        if let Some(t) = self.rdma.transport.as_ref() {
            let s = t.stats();
            for c in ::rdma::core::RxeCounter::ALL {
                v.push((c.name(), s.get(c)));
            }
            v.extend([
                ("retransmitted_pkts", s.retransmitted_pkts),
                ("timeouts", s.timeouts),
                ("rewinds", s.rewinds),
                ("window_cuts", s.window_cuts),
                ("tx_full", s.tx_full),
                ("ghost_acks", s.ghost_acks),
                ("implied_naks", s.implied_naks),
            ]);
            v.extend(s.drops());
            v.extend(s.wire_drops.iter().map(|(r, n)| (r.name(), n)));
        }
        v
    }

    /// The device's name (`eth0`).
    pub fn name(&self) -> &str {
        self.dev().map_or("eth0", |d| d.name())
    }

    pub fn dev(&self) -> Option<&knet::netdev::Netdev> {
        self.netdevs.by_index(self.ifindex)
    }

    /// Up and with carrier: frames flow.
    fn is_up(&self) -> bool {
        self.dev().is_some_and(|d| d.is_running())
    }

    /// Makes smoltcp and the neighbour table use the netdev's current addresses.
    pub fn sync_addresses(&mut self) {
        let Some(dev) = self.netdevs.by_index(self.ifindex) else { return };
        let v4: Vec<_> = dev.ipv4().to_vec();
        let v6: Vec<_> = dev.ipv6().iter().map(|a| a.cidr).collect();
        self.neigh.set_local_addrs(&v4);
        self.iface.update_ip_addrs(|addrs| {
            addrs.clear();
            // smoltcp's own cidr types, converted here where smoltcp is configured.
            let v4 = v4.iter().map(|c| IpCidr::Ipv4(Ipv4Cidr::new(c.address(), c.prefix_len())));
            let v6 = v6.iter().map(|c| IpCidr::Ipv6(Ipv6Cidr::new(c.address(), c.prefix_len())));
            for c in v4.chain(v6) {
                // smoltcp holds 8; the netdev may hold more, which smoltcp then won't answer for.
                let _ = addrs.push(c);
            }
        });
    }

    /// Takes frames from the NIC and steers them; returns how many.
    fn receive(&mut self, now: Instant) -> usize {
        let mac = self.nic.mac();
        let up = self.is_up();
        let Self { nic, netdevs, neigh, rdma, bench, stack_queue, ifindex, .. } = self;
        let Some(stats) = netdevs.stats_mut(*ifindex) else { return 0 };
        let mut n = 0;
        while n < RX_BUDGET {
            let t = prof::start();
            let Some(rx) = nic.receive() else { break };
            prof::RX_NIC.add(t);
            n += 1;
            let frame = rx.as_ref();
            if !up {
                stats.rx_dropped += 1;
                nic.recycle(rx);
                continue;
            }
            match steer(frame, mac, stats) {
                // The transport decides when its ACKs go and when to kick the NIC.
                Steer::Rdma => match rdma.transport.as_mut() {
                    Some(t) => prof::RX_ROCE.time(|| t.receive(frame, now, &mut rdma::NicSink { nic, stats })),
                    None => rdma.rx.receive(frame),
                },
                Steer::Arp => {
                    // smoltcp answers requests (and learns from them, as Linux
                    // does); the neighbour table learns for the RDMA path. Two
                    // caches, because smoltcp's cannot be fed or read (see
                    // knet::neigh's module doc).
                    if let Err(e) = neigh.process_arp(frame, now) {
                        log::debug!("arp: {e}");
                    }
                    if stack_queue.len() < STACK_QUEUE {
                        stack_queue.push_back(frame.to_vec());
                    }
                }
                Steer::Stack if bench::is_discard(frame) => bench.receive(frame, now),
                Steer::Stack if stack_queue.len() < STACK_QUEUE => stack_queue.push_back(frame.to_vec()),
                Steer::Stack => stats.rx_dropped += 1,
                Steer::Drop(_) => {}
            }
            let t = prof::start();
            nic.recycle(rx);
            prof::RX_NIC.add_cycles(prof::start().saturating_sub(t));
        }
        if let Some(t) = rdma.transport.as_mut() {
            t.end_batch(&mut rdma::NicSink { nic, stats });
        }
        n
    }

    /// Lets the transport send what its windows and timers allow.
    fn poll_transport(&mut self, now: Instant) {
        let Self { nic, netdevs, rdma, ifindex, .. } = self;
        let (Some(t), Some(stats)) = (rdma.transport.as_mut(), netdevs.stats_mut(*ifindex)) else { return };
        t.poll(now, &mut rdma::NicSink { nic, stats });
    }

    /// Sends what the neighbour table queued (ARP requests and replies).
    fn transmit_arp(&mut self, now: Instant) -> bool {
        self.neigh.poll(now);
        let mut sent = false;
        let mut frame = [0u8; 64];
        while let Ok(Some(len)) = self.neigh.poll_transmit(now, &mut frame) {
            let bytes = &frame[..len];
            if self.nic.transmit(len, |buf| buf.copy_from_slice(bytes)).is_some()
                && let Some(s) = self.netdevs.stats_mut(self.ifindex)
            {
                s.record_tx(len);
            }
            sent = true;
        }
        sent
    }

    /// When the network next needs a pass even without an interrupt.
    fn next_deadline(&mut self, now: Instant) -> Option<Instant> {
        let smol = self
            .iface
            .poll_at(smol_now(now), &self.sockets)
            .map(|t| Instant::from_micros(t.total_micros().max(0) as u64));
        let ping = self.ping.as_ref().map(|p| p.deadline());
        let rxe = self
            .rdma
            .transport
            .as_ref()
            .and_then(|t| t.next_deadline(now));
        [smol, ping, self.neigh.poll_at(), self.bench.deadline(), rxe, pingpong::deadline(self)]
            .into_iter()
            .flatten()
            .min()
    }
}

impl Task for Net {
    fn poll(&mut self, now: Instant, timers: &mut Timers) -> bool {
        prof::NET.time(|| self.pass(now, timers))
    }

    fn deadline(&mut self, now: Instant) -> Option<Instant> {
        self.next_deadline(now)
    }
}

impl Net {
    /// One pass of the network task (see the module's doc).
    fn pass(&mut self, now: Instant, _timers: &mut Timers) -> bool {
        // Acknowledge at the device and unmask at the PIC only after an
        // interrupt (its handler masked the line): under emulation each is a
        // trap that waits for QEMU's I/O thread, and most passes follow none.
        // One that comes during the pass leaves the line masked and wakes the
        // loop, and the next pass acknowledges it.
        let irqs = crate::arch::irq::count(self.irq);
        let fired = irqs != self.irq_seen;
        self.irq_seen = irqs;
        if fired && prof::IRQ.time(|| self.nic.ack_interrupt()) {
            self.refresh_carrier();
        }
        let frames = self.receive(now);
        let up = self.is_up();
        let mut busy = frames > 0;
        {
            let stats = self.netdevs.stats_mut(self.ifindex);
            let mut fallback = knet::steer::LinkStats::default();
            let mut dev = StackDevice {
                queue: &mut self.stack_queue,
                nic: &mut self.nic,
                stats: stats.unwrap_or(&mut fallback),
                scratch: &mut self.scratch,
                up,
            };
            let t = prof::start();
            self.iface.poll(smol_now(now), &mut dev, &mut self.sockets);
            prof::SMOLTCP.add(t);
        }
        prof::TRANSPORT.time(|| self.poll_transport(now));
        busy |= self.transmit_arp(now);
        busy |= ping::poll(self, now);
        busy |= pingpong::poll(self, now);
        busy |= bench::poll(self, now);
        busy |= self.netdevs.process_events() > 0;
        busy |= self.rdma.process_events();
        prof::KICK.time(|| self.nic.service());
        if fired {
            prof::IRQ.time(|| crate::arch::irq::unmask(self.irq));
        }
        busy
    }
}
