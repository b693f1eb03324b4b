//! iproute2's `rdma system show` line (rdma/sys.c, iproute2 6.1):
//! `netns shared copy-on-fork on`. iproute2 6.1 prints this text with `-j`
//! too (its JSON path ends the line itself), so there is one formatter.
//!
//! The appliance's truthful values: it has one network namespace, which
//! every RDMA device is in (Linux's `shared` mode: devices visible in all
//! namespaces); and host programs' registered memory is the shared region
//! itself, never copied or write-protected by a fork, so memory stays
//! valid in a forked child as with Linux's copy-on-fork support.

use core::fmt::{self, Write};

/// The line.
pub fn write(out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "netns shared copy-on-fork on")
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_is_linux_6_1s() {
        let mut s = alloc::string::String::new();
        super::write(&mut s).unwrap();
        assert_eq!(s, "netns shared copy-on-fork on\n");
    }
}
