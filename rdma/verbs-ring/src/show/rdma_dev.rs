//! iproute2's `rdma dev show` line (rdma/dev.c, iproute2 6.1) for an rxe
//! device. Like iproute2, every field ends with a blank, the last one too.

use core::fmt::{self, Write};

use super::json::JsonObject;
use super::words::{Guid, name};
use crate::cmd::LinkInfo;

/// One `INDEX: NAME: ...` line.
pub fn write(out: &mut dyn Write, l: &LinkInfo) -> fmt::Result {
    write!(out, "{}: {}: ", l.dev_index, name(&l.dev_name))?;
    // Every device of the appliance is rxe: a channel adapter
    // (RDMA_NODE_IB_CA), and no `fw` field, since rxe gives the kernel no
    // firmware string (it has no get_dev_fw_str).
    write!(out, "node_type ca ")?;
    write!(out, "node_guid {} ", Guid(l.node_guid))?;
    write!(out, "sys_image_guid {} ", Guid(l.sys_image_guid))?;
    writeln!(out)
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
}
