//! iproute2's `rdma link show` line (rdma/link.c, iproute2 6.1) for a RoCE
//! port: no subnet prefix or LIDs (the kernel sends them for InfiniBand
//! ports only), then state, physical state and netdev. Like iproute2, every
//! field ends with a blank, the last one too.

use core::fmt::{self, Write};

use super::words::name;
use crate::cmd::LinkInfo;

/// One `link DEV/PORT ...` line.
pub fn write(out: &mut dyn Write, l: &LinkInfo) -> fmt::Result {
    write!(out, "link {}/{} ", name(&l.dev_name), l.port_num)?;
    write!(out, "state {} ", state(l.port_state))?;
    write!(out, "physical_state {} ", phys_state(l.phys_state))?;
    let netdev = name(&l.netdev);
    if !netdev.is_empty() {
        write!(out, "netdev {netdev} ")?;
    }
    writeln!(out)
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
    }
}
