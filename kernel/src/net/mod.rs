//! Networking: the virtio-net NIC, frame steering (RoCE v2 to the RDMA hook,
//! the rest to smoltcp) and the smoltcp interface that answers ARP and ICMP and
//! runs `ping`.

mod device;
mod hal;
pub mod ping;

use crate::poll::{Task, Timers};
use crate::time::Instant;
use alloc::vec::Vec;
use device::{NoRdma, SteerStats, Steered};
use drivers::nic::Nic;
use drivers::virtio_net::VirtioNet;
use hal::{KernelHal, PciConfig};
use kbase::pci::Function;
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr};
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::pci::bus::{Command, DeviceFunction, PciRoot};

pub type NetDevice = VirtioNet<KernelHal, PciTransport>;

/// One network interface and its stack.
pub struct Net {
    pub name: &'static str,
    pub nic: NetDevice,
    pub irq: u8,
    pub iface: Interface,
    pub sockets: SocketSet<'static>,
    rx_buf: Vec<u8>,
    rdma: NoRdma,
    pub steer: SteerStats,
    pub ping: Option<ping::PingJob>,
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
    let transport = match PciTransport::new::<KernelHal, _>(&mut root, df) {
        Ok(t) => t,
        Err(e) => {
            log::error!("{}: virtio transport: {e:?}", f.bdf);
            return None;
        }
    };
    let mut nic = match VirtioNet::new(transport, None) {
        Ok(n) => n,
        Err(e) => {
            log::error!("{}: virtio-net init: {e:?}", f.bdf);
            return None;
        }
    };
    let mac = EthernetAddress(nic.mac());
    let mut config = Config::new(HardwareAddress::Ethernet(mac));
    config.random_seed =
        now.as_micros() ^ u64::from_le_bytes([mac.0[0], mac.0[1], mac.0[2], mac.0[3], mac.0[4], mac.0[5], 0, 0]);
    let (mut rx_buf, mut rdma, mut steer, mut frames) = (Vec::new(), NoRdma::default(), SteerStats::default(), 0);
    let iface = {
        let mut dev =
            Steered { nic: &mut nic, rdma: &mut rdma, rx_buf: &mut rx_buf, stats: &mut steer, frames_in: &mut frames };
        Interface::new(config, &mut dev, smol_now(now))
    };
    log::info!("eth0: virtio-net at {} mac {} mtu {} irq {}", f.bdf, mac, nic.mtu(), f.interrupt_line);
    Some(Net {
        name: "eth0",
        nic,
        irq: f.interrupt_line,
        iface,
        sockets: SocketSet::new(Vec::new()),
        rx_buf,
        rdma,
        steer,
        ping: None,
    })
}

impl Net {
    pub fn add_address(&mut self, cidr: IpCidr) -> Result<(), &'static str> {
        let mut result = Ok(());
        self.iface.update_ip_addrs(|addrs| {
            if addrs.contains(&cidr) {
                result = Err("address already assigned");
            } else if addrs.push(cidr).is_err() {
                result = Err("too many addresses on the interface");
            }
        });
        result
    }

    pub fn del_address(&mut self, cidr: IpCidr) -> Result<(), &'static str> {
        let mut result = Err("no such address on the interface");
        self.iface.update_ip_addrs(|addrs| {
            if let Some(i) = addrs.iter().position(|a| *a == cidr) {
                addrs.remove(i);
                result = Ok(());
            }
        });
        result
    }

    /// RoCE frames dropped for want of a transport.
    pub fn rdma_dropped(&self) -> u64 {
        self.rdma.dropped
    }

    /// When the interface next needs polling by itself (timers inside smoltcp, ping).
    pub fn deadline(&mut self, now: Instant) -> Option<Instant> {
        let smol = self
            .iface
            .poll_at(smol_now(now), &self.sockets)
            .map(|t| Instant::from_micros(t.total_micros().max(0) as u64));
        let ping = self.ping.as_ref().map(|p| p.deadline());
        [smol, ping].into_iter().flatten().min()
    }
}

impl Task for Net {
    fn poll(&mut self, now: Instant, _timers: &mut Timers) -> bool {
        self.nic.ack_interrupt();
        let mut frames = 0;
        {
            let mut dev = Steered {
                nic: &mut self.nic,
                rdma: &mut self.rdma,
                rx_buf: &mut self.rx_buf,
                stats: &mut self.steer,
                frames_in: &mut frames,
            };
            self.iface.poll(smol_now(now), &mut dev, &mut self.sockets);
        }
        self.nic.service();
        let pinged = ping::poll(self, now);
        crate::arch::irq::unmask(self.irq);
        frames > 0 || pinged
    }

    fn deadline(&mut self, now: Instant) -> Option<Instant> {
        Net::deadline(self, now)
    }
}
