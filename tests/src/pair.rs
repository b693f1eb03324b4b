//! Two appliances on one wire, each with a ring: where most ring tests
//! start. 10.0.0.1 and 10.0.0.2 on a UDP socket wire, rxe0 on each.

use crate::{Appliance, Ivshmem, Nic, Options, free_udp_port};

/// Boots appliance a (10.0.0.1, ring `rings[0]`, `append[0]` on its command
/// line) and b (10.0.0.2, `rings[1]`, `append[1]`), adds rxe0 on each, and
/// gives back both and their rings (kept alive beside them).
pub fn ring_pair(rings: [Ivshmem; 2], append: [&str; 2]) -> (Appliance, Appliance, Ivshmem, Ivshmem) {
    let (p1, p2) = (free_udp_port(), free_udp_port());
    let [s1, s2] = rings;
    let node = |mac: &str, local, peer, ip: &str, extra: &str, shm: &Ivshmem| Options {
        nic: Some(Nic::new(mac, local, peer)),
        append: if extra.is_empty() { format!("ip={ip}") } else { format!("ip={ip} {extra}") },
        ivshmem: Some(shm.clone()),
        ..Options::default()
    };
    let mut a = Appliance::boot(node("52:54:00:00:00:01", p1, p2, "10.0.0.1/24", append[0], &s1)).unwrap();
    let mut b = Appliance::boot(node("52:54:00:00:00:02", p2, p1, "10.0.0.2/24", append[1], &s2)).unwrap();
    for x in [&mut a, &mut b] {
        let out = x.cmd("rdma link add rxe0 type rxe netdev eth0").unwrap();
        assert!(out.contains("rxe0: set active"), "{out}");
    }
    (a, b, s1, s2)
}
