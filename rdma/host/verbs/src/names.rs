//! Names the host programs print beside the tools' text (which is
//! `verbs_ring::show`'s, shared with the firmware console): MTUs,
//! completion statuses, event types, the link layer in the
//! perftest banner.

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

/// Link layer name (the perftest banner's `Link type`).
pub fn link_layer(l: u8) -> &'static str {
    match l {
        1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!((mtu_bytes(3), mtu_enum(4096), mtu_enum(1000)), (1024, Some(5), None));
        assert_eq!(wc_status(13), "RNR retry counter exceeded");
        assert_eq!(wc_status(99), "unknown");
        assert_eq!(link_layer(2), "Ethernet");
    }
}
