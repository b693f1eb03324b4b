//! Why a received frame was dropped: one vocabulary for the whole receive path.
//! Steering below smoltcp uses the first few (a frame it cannot read the
//! EtherType, IP protocol or UDP port of, or that is not for us); the RoCE frame
//! parser (`rdma::wire::frame::parse`, the one validator of a RoCE frame) the
//! next ones; the rxe transport the last ones (a well-formed frame its QPs do
//! not take). Each drop is counted once, by whoever dropped it, in a
//! [`DropCounters`].
//!
//! Linux drops the same frames in `eth_type_trans`, `ip_rcv_core`, `ipv6_rcv`,
//! `__udp4_lib_rcv` and `rxe_rcv`; we have no MIB, so the reasons are the counters.

use core::fmt;

macro_rules! drop_reasons {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// Why a frame was dropped. Each has its own counter.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum DropReason {
            $(#[doc = $doc] $variant,)*
        }

        impl DropReason {
            /// Every reason, in counter order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            /// How many reasons there are: the length of a counter array.
            pub const COUNT: usize = Self::ALL.len();

            /// A short name for counters and logs.
            pub const fn name(self) -> &'static str {
                match self {
                    $(DropReason::$variant => $name,)*
                }
            }
        }
    };
}

drop_reasons! {
    Runt => "runt", "Shorter than an Ethernet header (14 bytes): a length error, not a drop.";
    OtherHost => "otherhost", "Unicast to another MAC (the wire is a hub; Linux's `PACKET_OTHERHOST`).";
    EtherType => "ethertype", "An EtherType this path does not take (VLAN tags, 802.3 lengths; ARP on the RoCE path).";
    ArpTruncated => "arp_short", "ARP shorter than its Ethernet/IPv4 body (28 bytes).";
    ArpSender => "arp_sender", "Ethernet/IPv4 ARP whose sender MAC is not the frame's source MAC: damaged after the FCS was checked, or forged. Nothing may learn from it.";
    Truncated => "truncated", "Shorter than a header, or than a length field says.";
    BadIpVersion => "bad_ip_version", "The IP version disagrees with the EtherType.";
    IpOptions => "ip_options", "An IPv4 header with options; RoCE v2 never sends them.";
    IpFragment => "ip_fragment", "An IPv4 fragment; RoCE v2 is sent unfragmented.";
    BadIpChecksum => "bad_ip_checksum", "The IPv4 header checksum is wrong.";
    BadLength => "bad_length", "IP and UDP lengths disagree or are too small for their headers.";
    NotUdp => "not_udp", "Not UDP (or IPv6 extension headers before it). Not RoCE.";
    NotRoce => "not_roce", "UDP to a port other than 4791. Not RoCE.";
    BadIcrc => "bad_icrc", "The ICRC does not match.";
    BadTransportVersion => "bad_transport_version", "BTH transport version other than 0.";
    UnknownOpcode => "unknown_opcode", "An opcode with no row in the opcode table (RD, XRC, reserved).";
    HeaderMismatch => "header_mismatch", "Too short for the headers the opcode calls for, or a payload where it allows none.";
    BadPadding => "bad_padding", "Payload and pad are not whole words, or the pad count exceeds them.";
    NoSuchQp => "no_such_qp", "Transport: the BTH names a QPN no QP has.";
    QpState => "qp_state", "Transport: the QP's state does not take packets (RESET, INIT, ERR; requests before RTR).";
    WrongQpType => "wrong_qp_type", "Transport: the opcode belongs to another transport than the QP's type.";
    BadPkey => "bad_pkey", "Transport: the P_Key is neither the default nor its limited form.";
    BadQkey => "bad_qkey", "Transport: UD/GSI, the DETH Q_Key is not the QP's.";
    BadAddress => "bad_address", "Transport: the destination IP is not ours, or a connected QP heard from a stranger.";
    OutOfSequence => "out_of_sequence", "Transport: RC, a request ahead of the expected PSN after the one sequence NAK was sent.";
    UcGap => "uc_gap", "Transport: UC, a packet of a message whose beginning was lost.";
    NoRecvWqe => "no_recv_wqe", "Transport: UD/UC, no receive WQE was posted (these cannot send RNR NAK).";
    TooLong => "too_long", "Transport: UD, a payload over the path MTU.";
    UnexpectedResponse => "unexpected_response", "Transport: a response whose PSN was never sent (a ghost ACK) or that nothing waits for.";
    DuplicateResponse => "duplicate_response", "Transport: a response for a PSN already completed.";
    BadResponse => "bad_response", "Transport: a READ response with the wrong length or position.";
    NoResource => "no_resource", "Transport: a duplicate READ or atomic whose saved responder resource was overwritten.";
    ResponderBusy => "responder_busy", "Transport: a request arrived while a READ response was still being sent.";
    BadOpSequence => "bad_op_sequence", "Transport: a request opcode out of order within a message (e.g. MIDDLE without FIRST), UC.";
    Unsupported => "unsupported", "Transport: a response opcode on a QP type that never gets responses, or a CNP.";
    BadMad => "bad_mad", "Transport: a frame for the firmware's QP1 that is not one 256-byte MAD in a UD SEND.";
    McastNoQp => "mcast_no_qp", "Transport: UD multicast to a group no QP of ours is attached to (never joined, or detached).";
}

impl DropReason {
    /// Index into a counter array, `0..COUNT`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether the transport dropped it: a well-formed RoCE frame its QPs do
    /// not take (no such QP, wrong state, a duplicate or unexpected
    /// response, ...), which retransmissions make ordinary; the rest are
    /// frames that are broken or not ours.
    pub const fn is_transport(self) -> bool {
        self as usize >= DropReason::NoSuchQp as usize
    }

    /// Whether the frame is simply not RoCE v2 (so another protocol may take it),
    /// or not for us, rather than a broken frame.
    pub const fn is_not_roce(self) -> bool {
        matches!(
            self,
            DropReason::OtherHost
                | DropReason::EtherType
                | DropReason::ArpTruncated
                | DropReason::ArpSender
                | DropReason::NotUdp
                | DropReason::NotRoce
        )
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A counter per drop reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropCounters([u64; DropReason::COUNT]);

impl Default for DropCounters {
    fn default() -> Self {
        DropCounters([0; DropReason::COUNT])
    }
}

impl DropCounters {
    pub fn record(&mut self, reason: DropReason) {
        if let Some(slot) = self.0.get_mut(reason.index()) {
            *slot = slot.wrapping_add(1);
        }
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        self.0.get(reason.index()).copied().unwrap_or(0)
    }

    /// `(reason, count)` for every reason, in counter order.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.get(r)))
    }

    /// The reasons that counted anything, in counter order.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        self.iter().filter(|&(_, n)| n > 0)
    }

    /// Frames dropped for any reason.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn transport_reasons_are_the_last_ones() {
        assert!(!DropReason::BadPadding.is_transport());
        assert!(DropReason::NoSuchQp.is_transport());
        assert!(DropReason::Unsupported.is_transport());
        assert!(DropReason::ALL.iter().all(|r| !(r.is_transport() && r.is_not_roce())));
    }

    #[test]
    fn names_are_unique_and_indices_dense() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        assert!(DropReason::ALL.iter().enumerate().all(|(i, r)| r.index() == i));
    }

    #[test]
    fn counters_count_per_reason() {
        let mut c = DropCounters::default();
        c.record(DropReason::BadIcrc);
        c.record(DropReason::BadIcrc);
        c.record(DropReason::Runt);
        assert_eq!(c.get(DropReason::BadIcrc), 2);
        assert_eq!(c.total(), 3);
        assert_eq!(c.nonzero().collect::<Vec<_>>(), [(DropReason::Runt, 1), (DropReason::BadIcrc, 2)]);
    }
}
