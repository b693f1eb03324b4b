//! iproute2's `rdma dev show` line (rdma/dev.c, iproute2 6.1) for an rxe
//! device. Like iproute2, every field ends with a blank, the last one too.

use core::fmt::{self, Write};

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
    }
}
