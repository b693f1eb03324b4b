//! Networking: the NICs (virtio-net, the 82574L), the netdev layer (`eth0`, addresses, the
//! notifier chain), frame steering, the neighbour table for the RDMA path, the
//! smoltcp interface (ICMP, `ping`) and the RDMA core that follows the netdev.
//!
//! One pass of [`Net::poll`]: take frames from the NIC and steer each (RoCE v2
//! to the RDMA hook, ARP and IPv6 neighbour discovery to the neighbour tables
//! and smoltcp, the rest to smoltcp, malformed ones dropped and counted); let
//! smoltcp and the neighbour tables transmit;
//! deliver netdev events, in order, to their subscribers (console log, RDMA core).

mod device;
pub mod discard;
pub(crate) mod hal;
pub mod memory;
mod nic;
pub mod rdma;
mod virtio_pci;

use crate::arch::source::IrqSource;
use crate::poll::{Task, Timers};
use crate::prof;
use crate::time::Instant;
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec::Vec;
use device::{STACK_QUEUE, StackDevice};
use drivers::nic::{Nic, RxChecksum};
use drivers::virtio_net::VirtioNet;
use hal::{KernelHal, PciConfig};
use kbase::pci::Function;
use knet::mcast_report::{Change, McastReports};
use knet::neigh::{ArpTable, NdTable, NeighConfig};
use knet::netdev::{NetdevConfig, NetdevError, Netdevs};
use knet::steer::{Steer, steer};
pub use nic::NetDevice;
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, Ipv4Cidr, Ipv6Cidr};
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::pci::bus::{Command, DeviceFunction, PciRoot};
use vocab::{IfIndex, MacAddr};

/// Frames taken from the NIC per pass, so other tasks get their turn.
const RX_BUDGET: usize = 256;
/// One NIC and what sits on it alone: its netdev, neighbour tables (ARP and
/// IPv6 neighbour discovery) and smoltcp interface with its sockets.
pub struct Link {
    pub nic: NetDevice,
    /// Its interrupts: a PIC line or MSI/MSI-X vectors.
    pub irq: IrqSource,
    /// The NIC's interrupt count when the last pass acknowledged it.
    irq_seen: u64,
    /// The netdev MTU the driver was last given.
    mtu_applied: u32,
    pub ifindex: IfIndex,
    pub neigh: ArpTable,
    pub nd: NdTable,
    /// IGMP/MLD reports for the multicast groups the RDMA device on this
    /// link joined and left.
    pub mcast: McastReports,
    pub iface: Interface,
    pub sockets: SocketSet<'static>,
    stack_queue: VecDeque<Vec<u8>>,
    scratch: Vec<u8>,
}

/// The appliance's network: every NIC, the netdevs on them, the RDMA core
/// above them, and the diagnostic jobs that run on them.
pub struct Net {
    pub links: Vec<Link>,
    pub netdevs: Netdevs,
    pub rdma: rdma::Rdma,
    /// Frames to the discard port (the receiving side of `netbench`).
    pub discard: discard::RxCount,
    /// The counters `perf` shows, as they were at its last reset.
    pub perf_base: Vec<(&'static str, u64)>,
}

fn smol_now(now: Instant) -> smoltcp::time::Instant {
    smoltcp::time::Instant::from_micros(now.as_micros() as i64)
}

/// Brings up every NIC function (virtio-net, 82574L, 82576) as `eth0`, `eth1`, ...
/// in PCI order, the driver chosen by PCI vendor and device,
/// with an RDMA core whose rxe devices use `config` and the host-shared
/// region. `None` when there is no NIC.
pub fn probe(
    functions: &[Function],
    config: ::rdma::rxe::device::Config,
    shared: Option<Rc<drivers::ivshmem::IvshmemRegion>>,
    now: Instant,
) -> Option<Net> {
    let mut net = Net::new(rdma::Rdma::new(config, shared));
    for f in functions {
        let nic = match (f.vendor, f.device) {
            (0x1af4, 0x1000 | 0x1041) => probe_virtio(f),
            (drivers::e1000e::VENDOR_INTEL, drivers::e1000e::DEVICE_82574L) => probe_e1000e(f),
            (drivers::igb::VENDOR_INTEL, drivers::igb::DEVICE_82576) => probe_igb(f),
            _ => continue,
        };
        let Some(mut nic) = nic else { continue };
        let irq = nic.setup_interrupts(f);
        match net.add_link(nic, irq, now) {
            Ok(i) => net.refresh_carrier(i),
            Err(e) => log::error!("{}: {e}", f.bdf),
        }
    }
    (!net.links.is_empty()).then_some(net)
}

fn probe_virtio(f: &Function) -> Option<NetDevice> {
    let df = DeviceFunction { bus: f.bdf.bus, device: f.bdf.device, function: f.bdf.function };
    let mut root = PciRoot::new(PciConfig);
    root.set_command(df, Command::IO_SPACE | Command::MEMORY_SPACE | Command::BUS_MASTER);
    let transport =
        PciTransport::new::<KernelHal, _>(&mut root, df).map_err(|e| log::error!("{}: virtio transport: {e:?}", f.bdf));
    let Some(transport) = virtio_pci::VirtioPci::new(transport.ok()?, f) else {
        log::error!("{}: virtio transport: no mapped common or notify structure", f.bdf);
        return None;
    };
    let nic = VirtioNet::new(transport).map_err(|e| log::error!("{}: virtio-net: {e:?}", f.bdf));
    nic.ok().map(NetDevice::Virtio)
}

/// The 82574L at its default MTU; the netdev's MTU reaches it later
/// (`ip link set eth0 mtu 9000`), as Linux's e1000e resizes on change.
fn probe_e1000e(f: &Function) -> Option<NetDevice> {
    let Some(regs) = hal::bar0_registers(f, drivers::intel::regs::BAR0_LEN) else {
        log::error!("{}: e1000e: BAR0 is not a mapped 128 KiB memory window", f.bdf);
        return None;
    };
    hal::enable_bus_master(f);
    let nic = drivers::e1000e::E1000e::new(regs, drivers::intel::DEFAULT_MTU)
        .map_err(|e| log::error!("{}: e1000e: {e:?}", f.bdf));
    nic.ok().map(NetDevice::E1000e)
}

/// The 82576 at its default MTU, as the 82574L; its carrier comes up with
/// the first link-change interrupt, once the PHY the reset restarted has
/// negotiated.
fn probe_igb(f: &Function) -> Option<NetDevice> {
    let Some(regs) = hal::bar0_registers(f, drivers::intel::regs::BAR0_LEN) else {
        log::error!("{}: igb: BAR0 is not a mapped 128 KiB memory window", f.bdf);
        return None;
    };
    hal::enable_bus_master(f);
    let nic =
        drivers::igb::Igb::new(regs, drivers::intel::DEFAULT_MTU).map_err(|e| log::error!("{}: igb: {e:?}", f.bdf));
    nic.ok().map(NetDevice::Igb)
}
impl Net {
    fn new(rdma: rdma::Rdma) -> Self {
        let mut netdevs = Netdevs::new();
        // Subscribers first, so they see every device appear: the console
        // log, then the RDMA core (GID cache, port state).
        netdevs.subscribe(Box::new(|ev: &knet::events::NetdevEvent| log::info!("{ev}")));
        netdevs.subscribe(Box::new(rdma.notifier()));
        Net { links: Vec::new(), netdevs, rdma, discard: discard::RxCount::default(), perf_base: Vec::new() }
    }

    /// Registers `nic` as the next `eth%d`, brings it up and gives it a
    /// neighbour table and a smoltcp interface; returns its link index.
    fn add_link(&mut self, mut nic: NetDevice, irq: IrqSource, now: Instant) -> Result<usize, NetdevError> {
        let mac = MacAddr(nic.mac());
        let mtu = nic.mtu() as u32;
        let max_mtu = nic.max_mtu() as u32;
        let ifindex = self.netdevs.register(&NetdevConfig { mtu, max_mtu, ..NetdevConfig::ethernet(mac) })?;
        let name = String::from(self.netdevs.by_index(ifindex).map_or("eth?", |d| d.name()));
        self.netdevs.set_up(&name, true)?;
        // smoltcp on the same device answers ARP requests and neighbour
        // solicitations: the tables only learn and ask.
        let cfg = NeighConfig { answer_requests: false, ..NeighConfig::default() };
        let neigh = ArpTable::new(ifindex, name.as_str().try_into().unwrap_or_default(), mac, cfg);
        let nd = NdTable::new(ifindex, name.as_str().try_into().unwrap_or_default(), mac, cfg);

        let (queue, mut scratch) = (VecDeque::new(), Vec::new());
        let iface = new_iface(&mut nic, &mut scratch, now);
        log::info!("{name}: {} mac {} mtu {mtu} {irq}", nic.model(), mac);
        self.links.push(Link {
            nic,
            irq,
            irq_seen: 0,
            mtu_applied: mtu,
            ifindex,
            neigh,
            nd,
            mcast: McastReports::default(),
            iface,
            sockets: SocketSet::new(Vec::new()),
            stack_queue: queue,
            scratch,
        });
        let i = self.links.len() - 1;
        self.sync_addresses(i);
        Ok(i)
    }

    /// Reads link `i`'s status and tells the netdev layer (NETDEV_CHANGE
    /// when it changed; the RDMA port follows).
    fn refresh_carrier(&mut self, i: usize) {
        let Some(up) = self.links.get(i).map(|l| l.nic.link_up()) else { return };
        let name = String::from(self.name(i));
        if let Err(e) = self.netdevs.set_carrier(&name, up) {
            log::warn!("{name}: carrier: {e}");
        }
    }

    /// Link `i`'s netdev name (`eth0`).
    pub fn name(&self, i: usize) -> &str {
        self.dev(i).map_or("eth?", |d| d.name())
    }

    /// Link `i`'s netdev.
    pub fn dev(&self, i: usize) -> Option<&knet::netdev::Netdev> {
        self.netdevs.by_index(self.links.get(i)?.ifindex)
    }

    /// The link of netdev `ifindex`.
    pub fn link_of(&self, ifindex: IfIndex) -> Option<usize> {
        self.links.iter().position(|l| l.ifindex == ifindex)
    }

    /// The link to reach `dst` on: the first whose netdev has an IPv4 subnet
    /// holding `dst`, else the first link (where a default route would go).
    pub fn link_for(&self, dst: core::net::Ipv4Addr) -> usize {
        (0..self.links.len())
            .find(|&i| self.dev(i).is_some_and(|d| d.ipv4().iter().any(|c| c.contains_addr(&dst))))
            .unwrap_or(0)
    }

    /// The link to reach IPv6 `dst` on: `scope`'s when given (a link-local
    /// address names no link by itself), else the first whose netdev has a
    /// prefix holding `dst`, else the first link.
    pub fn link_for6(&self, dst: core::net::Ipv6Addr, scope: Option<IfIndex>) -> usize {
        if let Some(i) = scope.and_then(|s| self.link_of(s)) {
            return i;
        }
        (0..self.links.len())
            .find(|&i| self.dev(i).is_some_and(|d| d.ipv6().iter().any(|a| a.cidr.contains_addr(&dst))))
            .unwrap_or(0)
    }

    /// The MAC of next hop `ip` on RDMA device `dev`'s netdev, from that
    /// link's ARP or IPv6 neighbour table, starting a request when unknown;
    /// never blocks (the RDMA path's `ib_resolve_eth_dmac`).
    pub fn resolve(&mut self, dev: u32, ip: core::net::IpAddr, now: Instant) -> knet::neigh::Resolution {
        use knet::neigh::Resolution;
        let Some(ifindex) = self.rdma.core.device(dev).map(|d| d.netdev().ifindex) else { return Resolution::Failed };
        let Some(link) = self.link_of(ifindex).and_then(|l| self.links.get_mut(l)) else { return Resolution::Failed };
        match ip {
            core::net::IpAddr::V4(v4) => link.neigh.lookup_or_request(v4, now),
            core::net::IpAddr::V6(v6) => link.nd.lookup_or_request(v6, now),
        }
    }

    /// Makes every link's smoltcp interface and neighbour table use its
    /// netdev's current addresses.
    pub fn sync_all_addresses(&mut self) {
        for i in 0..self.links.len() {
            self.sync_addresses(i);
        }
    }

    /// The counters the `perf` profile shows next to its time spans: the
    /// drivers', the transports' (retransmissions, timeouts, drops by reason),
    /// by name, summed over every NIC and every rxe device; zero ones
    /// included, so a reset's snapshot lines up.
    pub fn perf_counters(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = Vec::new();
        let mut add = |name: &'static str, n: u64| match v.iter_mut().find(|(k, _)| *k == name) {
            Some((_, sum)) => *sum += n,
            None => v.push((name, n)),
        };
        for l in &self.links {
            l.nic.counters(&mut add);
            add("nic interrupts", l.irq.count());
        }
        add("timer interrupts", crate::arch::irq::count(crate::arch::irq::IRQ_TIMER));
        for t in self.rdma.transports() {
            let s = t.stats();
            for c in ::rdma::core::RxeCounter::ALL {
                add(c.name(), s.get(c));
            }
            add("retransmitted_pkts", s.retransmitted_pkts);
            add("timeouts", s.timeouts);
            add("rewinds", s.rewinds);
            add("window_cuts", s.window_cuts);
            add("tx_full", s.tx_full);
            add("tx_zero_copy", s.tx_zero_copy);
            add("tx_copied", s.tx_copied);
            add("ghost_acks", s.ghost_acks);
            add("implied_naks", s.implied_naks);
            for (r, n) in s.drops.iter() {
                add(r.name(), n);
            }
        }
        v
    }

    /// Link `i`'s netdev is up and has carrier: frames flow.
    fn is_up(&self, i: usize) -> bool {
        self.dev(i).is_some_and(|d| d.is_running())
    }

    /// Makes link `i`'s smoltcp interface and neighbour table use its
    /// netdev's current addresses.
    pub fn sync_addresses(&mut self, i: usize) {
        let Some(link) = self.links.get_mut(i) else { return };
        let Some(dev) = self.netdevs.by_index(link.ifindex) else { return };
        let v4: Vec<_> = dev.ipv4().to_vec();
        let v6: Vec<_> = dev.ipv6().iter().map(|a| a.cidr).collect();
        link.neigh.set_local_addrs(&v4);
        link.nd.set_local_addrs(&v6);
        link.iface.update_ip_addrs(|addrs| {
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

    /// Takes frames from link `i`'s NIC and steers them; returns how many.
    /// `up`: the link's netdev is up with carrier (frames of a down one are
    /// dropped and counted).
    fn receive(&mut self, i: usize, up: bool, now: Instant) -> usize {
        let Self { links, netdevs, rdma, discard, .. } = self;
        let Some(link) = links.get_mut(i) else { return 0 };
        let Link { nic, neigh, nd, mcast, stack_queue, ifindex, .. } = link;
        let mac = nic.mac();
        let Some(stats) = netdevs.stats_mut(*ifindex) else { return 0 };
        // The device on this link's netdev, looked up once per batch.
        let (mut transport, roce_rx) = rdma.receiver(*ifindex);
        // smoltcp on this link skips IPv4 header checks (see device.rs):
        // what the NIC did not find good is checked here first.
        let nic_checks_ipv4 = nic.rx_checks_ipv4();
        let mut n = 0;
        while n < RX_BUDGET {
            let t = prof::start();
            let Some(rx) = nic.receive() else { break };
            prof::RX_NIC.add(t);
            n += 1;
            let frame = rx.as_ref();
            let verdict = rx.checksum();
            let ip_verified = verdict.ipv4 == RxChecksum::Good;
            if !up {
                stats.rx_dropped += 1;
                nic.recycle(rx);
                continue;
            }
            match steer(frame, mac, stats) {
                // The transport decides when its ACKs go and when to kick the NIC.
                // A header the NIC verified is not summed again (the ICRC is).
                Steer::Rdma => match transport.as_deref_mut() {
                    Some(t) => prof::RX_ROCE
                        .time(|| t.receive_verified(frame, ip_verified, now, &mut rdma::NicSink { nic, stats })),
                    None => roce_rx.receive(frame),
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
                Steer::Ndisc => {
                    // As for ARP: smoltcp answers solicitations for our
                    // addresses, the IPv6 table learns for the RDMA path.
                    if let Err(e) = nd.process_ndisc(frame, now) {
                        log::debug!("ndisc: {e}");
                    }
                    if stack_queue.len() < STACK_QUEUE {
                        stack_queue.push_back(frame.to_vec());
                    }
                }
                Steer::Stack
                    if nic_checks_ipv4 && !ip_verified && drivers::csum::ipv4_header_ok(frame) == Some(false) =>
                {
                    stats.rx_dropped += 1
                }
                Steer::Stack if discard::is_discard(frame) => discard.record(frame, now),
                // A router's IGMP/MLD query: the RDMA groups are reported
                // again (smoltcp, which joins none, gets it too and ignores it).
                Steer::Stack
                    if group_mac(frame)
                        && let Some(q) = knet::mcast_report::parse_query(frame) =>
                {
                    mcast.on_query(&q, now);
                    if stack_queue.len() < STACK_QUEUE {
                        stack_queue.push_back(frame.to_vec());
                    }
                }
                Steer::Stack if stack_queue.len() < STACK_QUEUE => stack_queue.push_back(frame.to_vec()),
                Steer::Stack => stats.rx_dropped += 1,
                Steer::Drop(_) => {}
            }
            let t = prof::start();
            nic.recycle(rx);
            prof::RX_NIC.add_cycles(prof::start().saturating_sub(t));
        }
        if let Some(t) = transport {
            t.end_batch(&mut rdma::NicSink { nic, stats });
        }
        n
    }

    /// Lets every transport send what its windows and timers allow, each on
    /// its own netdev's NIC.
    fn poll_transports(&mut self, now: Instant) {
        let Self { links, netdevs, rdma, .. } = self;
        for link in links.iter_mut() {
            let (Some(t), Some(stats)) = (rdma.transport_on(link.ifindex), netdevs.stats_mut(link.ifindex)) else {
                continue;
            };
            t.poll(now, &mut rdma::NicSink { nic: &mut link.nic, stats });
        }
    }

    /// Hands each link the multicast groups its RDMA device joined or left
    /// since the last pass, to report on the wire.
    fn take_group_changes(&mut self, now: Instant) {
        use ::rdma::rxe::mcast::GroupChange;
        let Self { links, rdma, .. } = self;
        for link in links.iter_mut() {
            let Some(t) = rdma.transport_on(link.ifindex) else {
                // No RDMA device (any more) on this link: its groups went with it.
                link.mcast.leave_all(now);
                continue;
            };
            while let Some(c) = t.poll_group_change() {
                let (gid, change) = match c {
                    GroupChange::Joined(g) => (g, Change::Join),
                    GroupChange::Left(g) => (g, Change::Leave),
                };
                let group = match gid.to_ipv4_mapped() {
                    Some(v4) => core::net::IpAddr::V4(v4),
                    None => core::net::IpAddr::V6(core::net::Ipv6Addr::from(gid.0)),
                };
                link.mcast.change(group, change, now);
            }
        }
    }

    /// Sends the IGMP/MLD reports that fell due, from each netdev's IPv4
    /// address and IPv6 link-local address.
    fn transmit_mcast_reports(&mut self, now: Instant) -> bool {
        let mut sent = false;
        for link in self.links.iter_mut() {
            if link.mcast.poll_at().is_none_or(|t| t > now) {
                continue;
            }
            let Some(dev) = self.netdevs.by_index(link.ifindex).map(|d| d.snapshot()) else { continue };
            let v4 = dev.ipv4.first().map(|c| c.address());
            let ll = dev.ipv6.iter().map(|c| c.address()).find(|a| knet::addr::is_link_local(*a));
            let mut frame = [0u8; knet::mcast_report::MLD_FRAME_LEN];
            while let Some(len) = link.mcast.poll_transmit(now, dev.mac, v4, ll, &mut frame) {
                let bytes = &frame[..len];
                if link.nic.transmit(len, |buf| buf.copy_from_slice(bytes)).is_some()
                    && let Some(s) = self.netdevs.stats_mut(link.ifindex)
                {
                    s.record_tx(len);
                }
                sent = true;
            }
        }
        sent
    }

    /// Sends what the neighbour tables queued (ARP requests and replies,
    /// neighbour solicitations).
    fn transmit_neigh(&mut self, now: Instant) -> bool {
        let mut sent = false;
        for link in self.links.iter_mut() {
            let Link { nic, neigh, nd, ifindex, .. } = link;
            let mut stats = self.netdevs.stats_mut(*ifindex);
            let mut send = |len: usize, frame: &[u8]| {
                let bytes = &frame[..len];
                if nic.transmit(len, |buf| buf.copy_from_slice(bytes)).is_some()
                    && let Some(s) = stats.as_deref_mut()
                {
                    s.record_tx(len);
                }
            };
            let mut frame = [0u8; 128];
            while let Ok(Some(len)) = neigh.poll_transmit(now, &mut frame) {
                send(len, &frame);
                sent = true;
            }
            while let Ok(Some(len)) = nd.poll_transmit(now, &mut frame) {
                send(len, &frame);
                sent = true;
            }
        }
        sent
    }

    /// When the network next needs a pass even without an interrupt.
    fn next_deadline(&mut self, now: Instant) -> Option<Instant> {
        let links = self.links.iter_mut().flat_map(|l| {
            let smol = l
                .iface
                .poll_at(smol_now(now), &l.sockets)
                .map(|t| Instant::from_micros(t.total_micros().max(0) as u64));
            [smol, l.neigh.poll_at(), l.nd.poll_at(), l.mcast.poll_at()]
        });
        let links = links.flatten().min();
        let rxe = self.rdma.transports().filter_map(|t| t.next_deadline(now)).min();
        links.into_iter().chain(rxe).min()
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
        let mut busy = false;
        let mut fired = Vec::new();
        for i in 0..self.links.len() {
            // Acknowledge at the device and unmask at the PIC only after an
            // interrupt (its handler masked the line): under emulation each is a
            // trap that waits for QEMU's I/O thread, and most passes follow none.
            // One that comes during the pass leaves the line masked and wakes the
            // loop, and the next pass acknowledges it.
            let link = &mut self.links[i];
            let irqs = link.irq.count();
            let irq_fired = irqs != link.irq_seen;
            link.irq_seen = irqs;
            if irq_fired {
                // Message vectors are edge-triggered: only a line is unmasked.
                fired.extend(link.irq.line());
                if prof::IRQ.time(|| link.nic.ack_interrupt()) {
                    self.refresh_carrier(i);
                }
            }
            let up = self.is_up(i);
            // Coming up announces our IPv4 addresses (the first pass after boot too).
            self.links[i].neigh.set_running(up);
            busy |= self.receive(i, up, now) > 0;
            let link = &mut self.links[i];
            let stats = self.netdevs.stats_mut(link.ifindex);
            let mut fallback = knet::steer::LinkStats::default();
            let rx_ipv4_checked = link.nic.rx_checks_ipv4();
            let mut dev = StackDevice {
                queue: &mut link.stack_queue,
                nic: &mut link.nic,
                stats: stats.unwrap_or(&mut fallback),
                scratch: &mut link.scratch,
                up,
                rx_ipv4_checked,
            };
            let t = prof::start();
            link.iface.poll(smol_now(now), &mut dev, &mut link.sockets);
            prof::SMOLTCP.add(t);
            // What smoltcp answered (an echo reply, an ARP reply) leaves now,
            // not after the rest of the pass: a kick with nothing new queued
            // costs no trap.
            prof::KICK.time(|| link.nic.service());
        }
        prof::TRANSPORT.time(|| self.poll_transports(now));
        busy |= self.transmit_neigh(now);
        self.take_group_changes(now);
        busy |= self.transmit_mcast_reports(now);
        busy |= self.netdevs.process_events() > 0;
        busy |= self.rdma.process_events();
        self.care_for_nics(now);
        for link in self.links.iter_mut() {
            prof::KICK.time(|| link.nic.service());
        }
        fired.sort_unstable();
        fired.dedup();
        for irq in fired {
            prof::IRQ.time(|| crate::arch::irq::unmask(irq));
        }
        busy
    }
}

impl Net {
    /// Hands each driver its netdev's MTU when it changed, runs its
    /// watchdog (a reset device has its carrier read again) and copies the
    /// frames it missed into the netdev's counters.
    fn care_for_nics(&mut self, now: Instant) {
        for i in 0..self.links.len() {
            let Some(mtu) = self.dev(i).map(|d| d.mtu()) else { continue };
            let Self { links, netdevs, .. } = self;
            let link = &mut links[i];
            let name = || netdevs.by_index(link.ifindex).map_or("eth?", |d| d.name());
            let mut reset = false;
            if mtu != link.mtu_applied {
                link.mtu_applied = mtu;
                if let Err(e) = link.nic.set_mtu(mtu) {
                    log::error!("{}: mtu {mtu}: {e}", name());
                }
                reset = true;
                // smoltcp reads the device's MTU only when an interface is
                // made: a new one (its addresses synced below, its
                // neighbour cache learnt again; the sockets live apart).
                link.iface = new_iface(&mut link.nic, &mut link.scratch, now);
            }
            if link.nic.watchdog(now) {
                log::warn!("{}: transmit timed out, device reset", name());
                reset = true;
            }
            if let Some(missed) = link.nic.rx_missed()
                && let Some(s) = netdevs.stats_mut(link.ifindex)
            {
                s.rx_missed = missed;
            }
            if reset {
                self.refresh_carrier(i);
                self.sync_addresses(i);
            }
        }
    }
}

/// A smoltcp interface on `nic`, with its MAC and the NIC's MTU.
fn new_iface(nic: &mut NetDevice, scratch: &mut Vec<u8>, now: Instant) -> Interface {
    let mac = nic.mac();
    let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
    config.random_seed = now.as_micros() ^ u64::from(u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]));
    let (mut queue, mut stats) = (VecDeque::new(), knet::steer::LinkStats::default());
    let rx_ipv4_checked = nic.rx_checks_ipv4();
    let mut dev = StackDevice { queue: &mut queue, nic, stats: &mut stats, scratch, up: true, rx_ipv4_checked };
    Interface::new(config, &mut dev, smol_now(now))
}

/// Whether a frame went to an Ethernet group address (queries always do).
fn group_mac(frame: &[u8]) -> bool {
    frame.first().is_some_and(|b| b & 1 != 0)
}
