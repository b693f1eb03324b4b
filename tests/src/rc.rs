//! RC queue pairs between the test appliances (10.0.0.N on one wire),
//! connected as rc_pingpong connects them: no TCP exchange, both sides know
//! each other's QPN, PSN 0x1234, GID index 1 (the IPv4-mapped RoCE v2 GID).

use verbs::{AccessFlags, Qp, RtrAttr};

/// The IPv4-mapped GID of 10.0.0.`n`.
pub fn ipv4_gid(n: u8) -> [u8; 16] {
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, n]
}

/// RESET to RTS towards QP `remote_qpn` on 10.0.0.`peer`, at `path_mtu`
/// (`enum ibv_mtu`: 3 = 1024, 5 = 4096).
pub fn connect(q: &Qp, remote_qpn: u32, peer: u8, path_mtu: u32) -> Result<(), verbs::Error> {
    q.to_init(1, AccessFlags::ALL_REMOTE)?;
    q.to_rtr(&RtrAttr {
        port: 1,
        path_mtu,
        dest_qp_num: remote_qpn,
        rq_psn: 0x1234,
        dgid: ipv4_gid(peer),
        sgid_index: 1,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ..Default::default()
    })?;
    q.to_rts(0x1234, 1)
}
