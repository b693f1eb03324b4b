//! iproute2's `rdma link show` line (rdma/link.c, iproute2 6.1) for a RoCE
//! port: no subnet prefix or LIDs (the kernel sends them for InfiniBand
//! ports only), then state, physical state and netdev. Like iproute2, every
//! field ends with a blank, the last one too.

use core::fmt::{self, Write};

use super::json::JsonObject;
use super::words::name;
use crate::cmd::LinkInfo;

/// One `link DEV/PORT ...` line.
pub fn write(out: &mut dyn Write, l: &LinkInfo) -> fmt::Result {
    write_details(out, l, false)
}

/// One line, with `-d`'s details: the netdev's index.
pub fn write_details(out: &mut dyn Write, l: &LinkInfo, details: bool) -> fmt::Result {
    write!(out, "link {}/{} ", name(&l.dev_name), l.port_num)?;
    write!(out, "state {} ", state(l.port_state))?;
    write!(out, "physical_state {} ", phys_state(l.phys_state))?;
    let netdev = name(&l.netdev);
    if !netdev.is_empty() {
        write!(out, "netdev {netdev} ")?;
        if details {
            write!(out, "netdev_index {} ", l.netdev_index)?;
        }
    }
    writeln!(out)
}

/// One link as `rdma -j link` prints it (the netdev's index always: JSON
/// prints what `-d` adds).
pub fn write_json(o: &mut JsonObject<'_, '_>, l: &LinkInfo) -> fmt::Result {
    o.uint("ifindex", u64::from(l.dev_index))?;
    o.str("ifname", name(&l.dev_name))?;
    o.uint("port", u64::from(l.port_num))?;
    o.str("state", state(l.port_state))?;
    o.str("physical_state", phys_state(l.phys_state))?;
    let netdev = name(&l.netdev);
    if !netdev.is_empty() {
        o.str("netdev", netdev)?;
        o.uint("netdev_index", u64::from(l.netdev_index))?;
    }
    Ok(())
}

/// iproute2's `link_state_to_str`.
fn state(s: u32) -> &'static str {
    const NAMES: [&str; 6] = ["NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"];
    usize::try_from(s).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or("UNKNOWN")
}

/// iproute2's `phys_state_to_str` (its spellings, `ARMED` for 4 included).
fn phys_state(s: u32) -> &'static str {
    const NAMES: [&str; 12] = [
        "NOP",
        "SLEEP",
        "POLLING",
        "DISABLED",
        "ARMED",
        "LINK_UP",
        "LINK_ERROR_RECOVER",
        "PHY_TEST",
        "UNKNOWN",
        "OPA_OFFLINE",
        "UNKNOWN",
        "OPA_TEST",
    ];
    usize::try_from(s).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or("UNKNOWN")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::show::fixture;
    use alloc::string::String;

    fn line(l: &LinkInfo) -> String {
        let mut s = String::new();
        write(&mut s, l).unwrap();
        s
    }

    #[test]
    fn line_is_iproute2s() {
        assert_eq!(line(&fixture::link()), "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0 \n");
        let down = LinkInfo { port_state: 1, phys_state: 3, ..fixture::link() };
        assert_eq!(line(&down), "link rxe0/1 state DOWN physical_state DISABLED netdev eth0 \n");
        let odd = LinkInfo { port_state: 6, phys_state: 99, netdev: [0; 16], ..fixture::link() };
        assert_eq!(line(&odd), "link rxe0/1 state UNKNOWN physical_state UNKNOWN \n");
        let mut d = String::new();
        write_details(&mut d, &fixture::link(), true).unwrap();
        assert_eq!(d, "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0 netdev_index 2 \n");
    }

    #[test]
    fn json_is_iproute2s() {
        let mut s = String::new();
        let mut l = crate::show::json::JsonList::new(&mut s, false).unwrap();
        l.object(|o| write_json(o, &fixture::link())).unwrap();
        l.finish().unwrap();
        assert_eq!(
            s,
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"port\":1,\"state\":\"ACTIVE\",\"physical_state\":\"LINK_UP\",\"netdev\":\"eth0\",\"netdev_index\":2}]\n"
        );
    }
}
