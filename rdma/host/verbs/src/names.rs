//! Names and formats the tools print, as libibverbs and iproute2 spell
//! them: port states, MTUs, completion statuses, event types, GIDs, GUIDs.

use std::net::Ipv6Addr;

/// Counter names in QUERY_COUNTERS order: the core's `RxeCounter::ALL`,
/// which is Linux's `rxe_counter_name[]` (kept in step by hand: the
/// host library does not link the transport crate).
pub const COUNTER_NAMES: [&str; 15] = [
    "sent_pkts",
    "rcvd_pkts",
    "duplicate_request",
    "out_of_seq_request",
    "rcvd_rnr_err",
    "send_rnr_err",
    "rcvd_seq_err",
    "ack_deferred",
    "retry_exceeded_err",
    "retry_rnr_exceeded_err",
    "completer_retry_err",
    "send_err",
    "link_downed",
    "rdma_sends",
    "rdma_recvs",
];

/// `ibv_port_state_str`.
pub fn port_state(s: u32) -> &'static str {
    match s {
        0 => "PORT_NOP",
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        5 => "PORT_ACTIVE_DEFER",
        _ => "invalid state",
    }
}

/// iproute2's `rdma link` state word.
pub fn link_state(s: u32) -> &'static str {
    match s {
        0 => "NOP",
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "UNKNOWN",
    }
}

/// Physical port state (`phys_state`), as `ibv_devinfo -v` and `rdma link` print it.
pub fn phys_state(s: u32) -> &'static str {
    match s {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION_TRAINING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY_TEST",
        _ => "invalid physical state",
    }
}

/// Bytes of an `enum ibv_mtu` value (0 when invalid).
pub fn mtu_bytes(m: u32) -> u32 {
    match m {
        1..=5 => 128 << m,
        _ => 0,
    }
}

/// The `enum ibv_mtu` value for a size in bytes.
pub fn mtu_enum(bytes: u32) -> Option<u32> {
    (1..=5).find(|&m| mtu_bytes(m) == bytes)
}

/// `ibv_wc_status_str`.
pub fn wc_status(s: u32) -> &'static str {
    const S: [&str; 22] = [
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "Work Request Flushed Error",
        "memory management operation error",
        "bad response error",
        "local access error",
        "remote invalid request error",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation error",
        "remote invalid RD request",
        "aborted error",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout error",
        "general error",
    ];
    S.get(s as usize).copied().unwrap_or("unknown")
}

/// `ibv_event_type_str`.
pub fn event_type(t: u32) -> &'static str {
    const S: [&str; 19] = [
        "CQ error",
        "local work queue catastrophic error",
        "invalid request local work queue error",
        "local access violation work queue error",
        "communication established",
        "send queue drained",
        "path migrated",
        "path migration request error",
        "local catastrophic error",
        "port active",
        "port error",
        "LID change",
        "P_Key change",
        "SM change",
        "SRQ catastrophic error",
        "SRQ limit reached",
        "last WQE reached",
        "client reregistration",
        "GID table change",
    ];
    S.get(t as usize).copied().unwrap_or("unknown")
}

/// A GID as `inet_ntop(AF_INET6)` prints it (`fe80::5054:ff:fe12:3456`).
pub fn gid_compact(gid: &[u8; 16]) -> String {
    Ipv6Addr::from(*gid).to_string()
}

/// A GID as eight full groups (`show_gids`: `fe80:0000:...:3456`).
pub fn gid_full(gid: &[u8; 16]) -> String {
    gid.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

/// The IPv4 address inside an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub fn gid_ipv4(gid: &[u8; 16]) -> Option<std::net::Ipv4Addr> {
    Ipv6Addr::from(*gid).to_ipv4_mapped()
}

/// A GUID as libibverbs prints it (`5054:00ff:fe12:3456`).
pub fn guid(g: u64) -> String {
    format!("{:04x}:{:04x}:{:04x}:{:04x}", g >> 48, (g >> 32) & 0xffff, (g >> 16) & 0xffff, g & 0xffff)
}

/// A firmware version `major.minor.sub` (bits 47..32, 31..16, 15..0).
pub fn fw_ver(v: u64) -> String {
    format!("{}.{}.{}", (v >> 32) & 0xffff, (v >> 16) & 0xffff, v & 0xffff)
}

/// Link layer name (`ibv_devinfo`).
pub fn link_layer(l: u8) -> &'static str {
    match l {
        1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unknown",
    }
}

/// `enum ibv_atomic_cap` (`ibv_devinfo -v`).
pub fn atomic_cap(c: u32) -> &'static str {
    match c {
        0 => "ATOMIC_NONE",
        1 => "ATOMIC_HCA",
        2 => "ATOMIC_GLOB",
        _ => "invalid atomic capability",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let mut gid = [0u8; 16];
        gid[..2].copy_from_slice(&[0xfe, 0x80]);
        gid[8..].copy_from_slice(&[0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56]);
        assert_eq!(gid_compact(&gid), "fe80::5054:ff:fe12:3456");
        assert_eq!(gid_full(&gid), "fe80:0000:0000:0000:5054:00ff:fe12:3456");
        let mut v4 = [0u8; 16];
        v4[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 2]);
        assert_eq!(gid_ipv4(&v4).map(|a| a.to_string()), Some("10.0.0.2".into()));
        assert_eq!(gid_ipv4(&gid), None);
        assert_eq!(guid(0x5054_00ff_fe12_3456), "5054:00ff:fe12:3456");
        assert_eq!(fw_ver(0x0001_0002_0003), "1.2.3");
        assert_eq!((mtu_bytes(3), mtu_enum(4096), mtu_enum(1000)), (1024, Some(5), None));
        assert_eq!(wc_status(13), "RNR retry counter exceeded");
        assert_eq!(wc_status(99), "unknown");
        assert_eq!(port_state(4), "PORT_ACTIVE");
    }
}
