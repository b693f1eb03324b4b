//! The 48-bit Ethernet (MAC) address, as every layer names it: the netdev
//! registry, the neighbour table, the RoCE frame codec and the RDMA core's port.

use core::fmt;

/// A 48-bit MAC address, printed as iproute2 prints it (`52:54:00:00:00:01`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// Whether the group bit is set (multicast or broadcast).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    pub const fn is_broadcast(&self) -> bool {
        matches!(self.0, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
    }

    /// Not a group address (all zeros counts as unicast here; the netdev layer
    /// refuses it as a device address separately).
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> MacAddr {
        MacAddr(b)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn prints_lowercase_with_colons() {
        assert_eq!(MacAddr([0x52, 0x54, 0x00, 0xAB, 0x00, 0x01]).to_string(), "52:54:00:ab:00:01");
    }

    #[test]
    fn classes() {
        assert!(MacAddr::BROADCAST.is_multicast() && MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr([0x33, 0x33, 0, 0, 0, 1]).is_multicast());
        assert!(MacAddr([0x52, 0x54, 0, 0, 0, 1]).is_unicast());
        assert!(!MacAddr([0x52, 0x54, 0, 0, 0, 1]).is_broadcast());
    }
}
