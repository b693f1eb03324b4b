//! Boot-to-prompt time: boots the image N times (default 5) and prints each
//! time and the median, from QEMU's start to the first prompt, with the devices
//! `make run` attaches (a virtio-net NIC and a 16 MiB ivshmem region).

#![deny(unsafe_code)]

use std::time::Instant;
use tests::{Accel, Appliance, Ivshmem, Nic, Options, free_udp_port};

fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(5).max(1);
    let accel = Accel::from_env();
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs {
        let start = Instant::now();
        let opts = Options {
            nic: Some(Nic::new("52:54:00:00:00:01", free_udp_port(), free_udp_port())),
            ivshmem: Some(Ivshmem::temp("boot-time", 16 << 20)),
            ..Options::default()
        };
        let a = match Appliance::boot(opts) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("boot {i} failed: {e}");
                std::process::exit(1);
            }
        };
        let t = start.elapsed();
        drop(a);
        println!("boot {}: {:.3} s", i + 1, t.as_secs_f64());
        times.push(t);
    }
    times.sort();
    println!("boot-to-prompt ({accel:?}): median {:.3} s over {runs} boots", times[runs / 2].as_secs_f64());
}
