//! rdma-core's `ibv_devices` (libibverbs/examples/device_list.c): each
//! device's name and node GUID.

use core::fmt::{self, Write};

use super::words::name;
use crate::cmd::LinkInfo;

/// The table for `links`, one device each, in the order given.
pub fn write(out: &mut dyn Write, links: &[LinkInfo]) -> fmt::Result {
    writeln!(out, "    {:<16}\t   node GUID", "device")?;
    writeln!(out, "    {:<16}\t----------------", "------")?;
    for l in links {
        writeln!(out, "    {:<16}\t{:016x}", name(&l.dev_name), l.node_guid)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::show::fixture;
    use alloc::string::String;

    #[test]
    fn table_is_rdma_cores() {
        let mut s = String::new();
        write(&mut s, &[fixture::link()]).unwrap();
        assert_eq!(
            s,
            "    device          \t   node GUID\n    ------          \t----------------\n    rxe0            \t505400fffe000001\n"
        );
    }
}
