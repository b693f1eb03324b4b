//! The QEMU harness every integration test uses: boot an appliance image,
//! talk to its serial console, and always kill QEMU when done.
//!
//! ```no_run
//! use tests::{Appliance, Options};
//! let mut a = Appliance::boot(Options::default()).unwrap();
//! let out = a.cmd("version").unwrap();
//! assert!(out.contains("RoCE appliance"));
//! a.shutdown().unwrap();
//! ```
#![deny(unsafe_code)]

mod console;
pub mod echo;
pub mod fuzz;
mod guest;
mod image;
pub mod iplink;
mod linux;
pub mod load;
mod make_run;
mod pair;
pub mod passthrough;
pub mod pcap;
pub mod progress;
mod qemu;
pub mod rc;
pub mod relay;
pub mod report;
pub mod tool;
pub mod udp_wire;
mod vde;

pub use console::PROMPT;
pub use guest::Running;
pub use image::{abi_dir, image, verbs_tool};
pub use linux::{
    LinuxPeer, MGMT_GUEST_IP, MGMT_GUEST_PORT, MGMT_HOST_IP, PEER_PROMPT, PEER_READY, PeerOptions, backports_peer_dir,
    free_tcp_port, peer_dir,
};
pub use make_run::MakeRun;
pub use pair::ring_pair;
pub use qemu::{Accel, Appliance, Error, Exit, Firmware, Ivshmem, Medium, Nic, NicModel, Options, qemu_binary};
pub use vde::VdeSwitch;

/// A free UDP port on 127.0.0.1 for a wire between two appliances.
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("no free UDP port on 127.0.0.1")
}
