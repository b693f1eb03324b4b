//! iproute2's `rdma dev show` line (rdma/dev.c, iproute2 6.1) for an rxe
//! device. Like iproute2, every field ends with a blank, the last one too.

use core::fmt::{self, Write};

use super::json::JsonObject;
use super::words::{Guid, name};
use crate::cmd::LinkInfo;

/// One `INDEX: NAME: ...` line.
pub fn write(out: &mut dyn Write, l: &LinkInfo) -> fmt::Result {
    write_fields(out, l)?;
    writeln!(out)
}

/// `rdma -d dev`: the line with `adaptive-moderation off` (the appliance
/// has no adaptive CQ moderation), then the device's capability flags
/// (`device_cap_flags`, what nldev's CAP_FLAGS carries) by iproute2 6.1's
/// names on a second line: `    caps: <BAD_PKEY_CNTR, ...>`.
pub fn write_details(out: &mut dyn Write, l: &LinkInfo, caps: u64) -> fmt::Result {
    write_fields(out, l)?;
    write!(out, "adaptive-moderation off \n    caps: <")?;
    for (i, c) in cap_names(caps).enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        out.write_str(c)?;
    }
    writeln!(out, ">")
}

/// `rdma -j -d dev`'s members.
pub fn write_json_details(o: &mut JsonObject<'_, '_>, l: &LinkInfo, caps: u64) -> fmt::Result {
    write_json(o, l)?;
    o.bool("adaptive-moderation", false)?;
    let names: alloc::vec::Vec<&str> = cap_names(caps).collect();
    o.strs("caps", &names)
}

/// The names of the set bits, low to high (iproute2's `dev_caps_to_str`:
/// bits it has no name for are `UNKNOWN`).
fn cap_names(caps: u64) -> impl Iterator<Item = &'static str> {
    const LOW: [&str; 32] = [
        "RESIZE_MAX_WR",
        "BAD_PKEY_CNTR",
        "BAD_QKEY_CNTR",
        "RAW_MULTI",
        "AUTO_PATH_MIG",
        "CHANGE_PHY_PORT",
        "UD_AV_PORT_ENFORCE_PORT_ENFORCE",
        "CURR_QP_STATE_MOD",
        "SHUTDOWN_PORT",
        "INIT_TYPE",
        "PORT_ACTIVE_EVENT",
        "SYS_IMAGE_GUID",
        "RC_RNR_NAK_GEN",
        "SRQ_RESIZE",
        "N_NOTIFY_CQ",
        "LOCAL_DMA_LKEY",
        "UNKNOWN",
        "MEM_WINDOW",
        "UD_IP_CSUM",
        "UD_TSO",
        "XRC",
        "MEM_MGT_EXTENSIONS",
        "BLOCK_MULTICAST_LOOPBACK",
        "MEM_WINDOW_TYPE_2A",
        "MEM_WINDOW_TYPE_2B",
        "RC_IP_CSUM",
        "RAW_IP_CSUM",
        "CROSS_CHANNEL",
        "UNKNOWN",
        "MANAGED_FLOW_STEERING",
        "SIGNATURE_HANDOVER",
        "ON_DEMAND_PAGING",
    ];
    const HIGH: [&str; 5] =
        ["SG_GAPS_REG", "VIRTUAL_FUNCTION", "RAW_SCATTER_FCS", "RDMA_NETDEV_OPA_VNIC", "PCI_WRITE_END_PADDING"];
    (0..64usize)
        .filter(move |&i| caps >> i & 1 == 1)
        .map(|i| LOW.get(i).or_else(|| HIGH.get(i.wrapping_sub(32))).copied().unwrap_or("UNKNOWN"))
}

fn write_fields(out: &mut dyn Write, l: &LinkInfo) -> fmt::Result {
    write!(out, "{}: {}: ", l.dev_index, name(&l.dev_name))?;
    // Every device of the appliance is rxe: a channel adapter
    // (RDMA_NODE_IB_CA), and no `fw` field, since rxe gives the kernel no
    // firmware string (it has no get_dev_fw_str).
    write!(out, "node_type ca ")?;
    write!(out, "node_guid {} ", Guid(l.node_guid))?;
    write!(out, "sys_image_guid {} ", Guid(l.sys_image_guid))
}

/// One device as `rdma -j dev` prints it.
pub fn write_json(o: &mut JsonObject<'_, '_>, l: &LinkInfo) -> fmt::Result {
    o.uint("ifindex", u64::from(l.dev_index))?;
    o.str("ifname", name(&l.dev_name))?;
    o.str("node_type", "ca")?;
    o.str("node_guid", &alloc::format!("{}", Guid(l.node_guid)))?;
    o.str("sys_image_guid", &alloc::format!("{}", Guid(l.sys_image_guid)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::show::fixture;
    use alloc::string::String;

    #[test]
    fn line_is_iproute2s_for_rxe() {
        let mut s = String::new();
        write(&mut s, &fixture::link()).unwrap();
        assert_eq!(s, "0: rxe0: node_type ca node_guid 5054:00ff:fe00:0001 sys_image_guid 5054:00ff:fe00:0001 \n");
        let mut s = String::new();
        let mut l = crate::show::json::JsonList::new(&mut s, false).unwrap();
        l.object(|o| write_json(o, &fixture::link())).unwrap();
        l.finish().unwrap();
        assert_eq!(
            s,
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"node_type\":\"ca\",\"node_guid\":\"5054:00ff:fe00:0001\",\"sys_image_guid\":\"5054:00ff:fe00:0001\"}]\n"
        );
    }

    #[test]
    fn details_name_rxe_6_1s_caps() {
        let caps = fixture::device_attr().device_cap_flags;
        let mut s = String::new();
        write_details(&mut s, &fixture::link(), caps).unwrap();
        assert_eq!(
            s,
            "0: rxe0: node_type ca node_guid 5054:00ff:fe00:0001 sys_image_guid 5054:00ff:fe00:0001 adaptive-moderation off \n    caps: <BAD_PKEY_CNTR, BAD_QKEY_CNTR, AUTO_PATH_MIG, CHANGE_PHY_PORT, UD_AV_PORT_ENFORCE_PORT_ENFORCE, PORT_ACTIVE_EVENT, SYS_IMAGE_GUID, RC_RNR_NAK_GEN, SRQ_RESIZE, MEM_WINDOW, MEM_MGT_EXTENSIONS, MEM_WINDOW_TYPE_2B>\n"
        );
        let odd: alloc::vec::Vec<&str> = cap_names(1 << 16 | 1 << 33 | 1 << 50).collect();
        assert_eq!(odd, ["UNKNOWN", "VIRTUAL_FUNCTION", "UNKNOWN"]);
        let mut s = String::new();
        let mut l = crate::show::json::JsonList::new(&mut s, false).unwrap();
        l.object(|o| write_json_details(o, &fixture::link(), 1 << 1 | 1 << 2)).unwrap();
        l.finish().unwrap();
        assert!(
            s.ends_with(",\"adaptive-moderation\":false,\"caps\":[\"BAD_PKEY_CNTR\",\"BAD_QKEY_CNTR\"]}]\n"),
            "{s}"
        );
    }
}
