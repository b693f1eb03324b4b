//! BTH opcodes (IBA vol. 1 9.2.1) for the RC, UC and UD transports, and the RoCE v2
//! congestion notification packet (annex A17). Every byte decodes: opcodes
//! we do not implement (RD, XRC, reserved) stay representable as `Unknown`.

use core::fmt;

enum_with_unknown! {
    /// The transport service an opcode belongs to: its top three bits.
    pub enum Transport(u8) {
        /// Reliable Connection.
        Rc = 0b000,
        /// Unreliable Connection.
        Uc = 0b001,
        /// Reliable Datagram (not implemented by rxe or by us).
        Rd = 0b010,
        /// Unreliable Datagram.
        Ud = 0b011,
        /// Congestion notification (RoCE v2 CNP).
        Cnp = 0b100,
        /// Extended Reliable Connection (not implemented).
        Xrc = 0b101,
    }
}

enum_with_unknown! {
    /// The BTH opcode byte.
    pub enum Opcode(u8) {
        RcSendFirst = 0x00,
        RcSendMiddle = 0x01,
        RcSendLast = 0x02,
        RcSendLastWithImmediate = 0x03,
        RcSendOnly = 0x04,
        RcSendOnlyWithImmediate = 0x05,
        RcRdmaWriteFirst = 0x06,
        RcRdmaWriteMiddle = 0x07,
        RcRdmaWriteLast = 0x08,
        RcRdmaWriteLastWithImmediate = 0x09,
        RcRdmaWriteOnly = 0x0A,
        RcRdmaWriteOnlyWithImmediate = 0x0B,
        RcRdmaReadRequest = 0x0C,
        RcRdmaReadResponseFirst = 0x0D,
        RcRdmaReadResponseMiddle = 0x0E,
        RcRdmaReadResponseLast = 0x0F,
        RcRdmaReadResponseOnly = 0x10,
        RcAcknowledge = 0x11,
        RcAtomicAcknowledge = 0x12,
        RcCompareSwap = 0x13,
        RcFetchAdd = 0x14,
        RcSendLastWithInvalidate = 0x16,
        RcSendOnlyWithInvalidate = 0x17,
        /// IBA 1.5 FLUSH (annex A19).
        RcFlush = 0x1C,
        /// IBA 1.5 ATOMIC WRITE (annex A19).
        RcAtomicWrite = 0x1D,

        UcSendFirst = 0x20,
        UcSendMiddle = 0x21,
        UcSendLast = 0x22,
        UcSendLastWithImmediate = 0x23,
        UcSendOnly = 0x24,
        UcSendOnlyWithImmediate = 0x25,
        UcRdmaWriteFirst = 0x26,
        UcRdmaWriteMiddle = 0x27,
        UcRdmaWriteLast = 0x28,
        UcRdmaWriteLastWithImmediate = 0x29,
        UcRdmaWriteOnly = 0x2A,
        UcRdmaWriteOnlyWithImmediate = 0x2B,

        UdSendOnly = 0x64,
        UdSendOnlyWithImmediate = 0x65,

        /// Congestion Notification Packet: sent back to the source of a CE-marked packet.
        Cnp = 0x81,
    }
}

impl Opcode {
    /// The transport service, from the top three bits. Defined for every byte, including
    /// opcodes without a name here.
    pub const fn transport(self) -> Transport {
        Transport::from_raw(self.to_raw() >> 5)
    }

    /// This opcode's entry in the opcode table, or `None` for opcodes we do not handle.
    pub fn info(self) -> Option<&'static crate::wire::OpcodeInfo> {
        crate::wire::opcode_table::lookup(self)
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.info() {
            Some(info) => f.write_str(info.name),
            None => write!(f, "opcode {:#04x}", self.to_raw()),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn every_byte_round_trips() {
        for raw in 0..=u8::MAX {
            let op = Opcode::from_raw(raw);
            assert_eq!(op.to_raw(), raw);
            assert_eq!(u8::from(Opcode::from(raw)), raw);
        }
    }

    #[test]
    fn transport_bits() {
        assert_eq!(Opcode::RcAcknowledge.transport(), Transport::Rc);
        assert_eq!(Opcode::UcRdmaWriteOnly.transport(), Transport::Uc);
        assert_eq!(Opcode::UdSendOnly.transport(), Transport::Ud);
        assert_eq!(Opcode::Cnp.transport(), Transport::Cnp);
        assert_eq!(Opcode::from_raw(0x40).transport(), Transport::Rd);
        assert_eq!(Opcode::from_raw(0xA0).transport(), Transport::Xrc);
        assert_eq!(Opcode::from_raw(0xE0).transport(), Transport::Unknown(7));
    }

    #[test]
    fn unknown_opcodes_stay_unknown() {
        // RC RESYNC, RD SEND FIRST, XRC SEND FIRST: real opcodes we do not implement.
        for raw in [0x15, 0x40, 0xA0, 0xFF] {
            assert_eq!(Opcode::from_raw(raw), Opcode::Unknown(raw));
            assert!(Opcode::from_raw(raw).info().is_none());
        }
    }
}
