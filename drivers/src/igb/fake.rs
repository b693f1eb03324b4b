//! A fake 82576 for the igb driver's tests: a register file with the
//! device's side effects (reset of MAC and PHY, auto-negotiation started
//! through MDIC and finished by the test, read-to-clear causes and
//! counters, NVM reads, queue enables, MSI-X routing and messages) and the
//! device's half of the advanced rings, stepped by the test (or told to lie).

extern crate std;

use super::desc::{
    CTX_IPLEN_MASK, CTX_MACLEN_SHIFT, RX_ERR_IPE, RX_ERR_L4E, TX_CMD, TX_DCMD_EOP, TX_DCMD_RS, TX_DTYP_CTXT,
    TX_PAYLEN_SHIFT, TX_POPTS_IXSM, TX_POPTS_TXSM, TX_TUCMD_IPV4, TX_TUCMD_L4T_TCP,
};
use super::regs::{self, Regs};
use crate::csum;
use crate::intel::desc::{RX_IPCS, RX_TCPCS, RX_UDPCS, TX_DD};
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use virtio_drivers::PhysAddr;

/// The atomic at a DMA address.
///
/// # Safety
///
/// `addr` must lie inside memory `FakeHal` handed out (or a buffer it
/// shared) that is still alive, aligned for `A`; the driver touches it only
/// through atomics too.
unsafe fn at<'a, A>(addr: PhysAddr) -> &'a A {
    // SAFETY: the caller's obligations.
    unsafe { &*(addr as usize as *const A) }
}

/// Registers that clear when read.
const READ_TO_CLEAR: [u32; 14] = [
    regs::ICR,
    regs::EICR,
    regs::CRCERRS,
    regs::MPC,
    regs::GPRC,
    regs::GPTC,
    regs::GORCL,
    regs::GORCH,
    regs::GOTCL,
    regs::GOTCH,
    regs::RNBC,
    regs::ROC,
    regs::TPR,
    regs::TPT,
];

/// The write-back's status bits: descriptor done, end of packet.
pub const DD_EOP: u32 = 0b11;

/// The device model; the test keeps a clone of the `Rc`.
#[derive(Default)]
pub struct Device {
    pub regs: BTreeMap<u32, u32>,
    /// What a reset loads into RAL0/RAH0 (`None`: leave them invalid, so
    /// the driver must read the NVM).
    pub ral_mac: Option<[u8; 6]>,
    /// NVM words (the MAC in 0..=2).
    pub nvm: Vec<u16>,
    /// The cable: whether a partner is there to negotiate with.
    pub cable: bool,
    /// Auto-negotiation restarted and not yet finished.
    pub negotiating: bool,
    /// Negotiation finished since the last reset (the PHY then follows the
    /// cable at once, as QEMU's does).
    pub negotiated: bool,
    /// CTRL.RST never clears.
    pub reset_stuck: bool,
    /// The PHY answers MDIC with an error.
    pub phy_broken: bool,
    /// RXDCTL.ENABLE never reads back set.
    pub rx_queue_stuck: bool,
    /// RXDCTL.ENABLE never reads back clear.
    pub rx_queue_wont_stop: bool,
    pub resets: u32,
    /// Writes per register, to count doorbells.
    pub writes: BTreeMap<u32, u32>,
    /// MSI-X enabled in configuration space (the kernel's side, set by the
    /// test): with GPIE.MSIX_MODE, a vector whose EICR bit rises while
    /// enabled in EIMS sends its message (as QEMU's igb: queue causes
    /// through IVAR0, newly enabled ICR causes through IVAR_MISC's other
    /// entry; EIAC bits cleared once sent).
    pub msix: bool,
    /// The MSI-X table entries messages were sent to, in order.
    pub messages: Vec<u8>,
    /// Context 0 as the last context descriptor set it (§7.2.2):
    /// MACLEN, IPLEN, TCP (else UDP).
    pub context: Option<(usize, usize, bool)>,
    /// Context descriptors seen, and frames sent from several buffers.
    pub contexts: u32,
    pub chained: u32,
}

impl Device {
    pub fn new(mac: [u8; 6]) -> Rc<RefCell<Device>> {
        Rc::new(RefCell::new(Device { ral_mac: Some(mac), cable: true, ..Device::default() }))
    }

    pub fn reg(&self, r: u32) -> u32 {
        self.regs.get(&r).copied().unwrap_or(0)
    }

    fn set(&mut self, r: u32, v: u32) {
        self.regs.insert(r, v);
    }

    pub fn writes(&self, r: u32) -> u32 {
        self.writes.get(&r).copied().unwrap_or(0)
    }

    /// Power-on state: everything zero (the link down, the queues off) but
    /// the address; the PHY forgets its negotiation.
    fn reset(&mut self) {
        self.resets += 1;
        self.regs.clear();
        (self.negotiating, self.negotiated) = (false, false);
        self.set(regs::CTRL, regs::CTRL_LRST);
        if let Some(m) = self.ral_mac {
            self.set(regs::RAL0, u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
            self.set(regs::RAH0, u32::from(u16::from_le_bytes([m[4], m[5]])) | regs::RAH_AV);
        }
        if self.reset_stuck {
            self.set(regs::CTRL, regs::CTRL_RST);
        }
    }

    fn set_lu(&mut self, up: bool) {
        let status = self.reg(regs::STATUS) & !regs::STATUS_LU;
        self.set(regs::STATUS, status | if up { regs::STATUS_LU } else { 0 });
    }

    /// The PHY finishes negotiating: the link comes up (if the cable is
    /// there) with an LSC cause.
    pub fn finish_negotiation(&mut self) {
        if !self.negotiating || !self.cable {
            return;
        }
        (self.negotiating, self.negotiated) = (false, true);
        self.set_lu(true);
        self.cause(regs::INT_LSC);
    }

    /// The cable is pulled or plugged back: STATUS.LU follows (once the
    /// PHY has negotiated) with an LSC cause.
    pub fn set_link(&mut self, up: bool) {
        self.cable = up;
        if !up || self.negotiated {
            self.set_lu(up);
            self.cause(regs::INT_LSC);
        }
    }

    fn msix_mode(&self) -> bool {
        self.reg(regs::GPIE) & regs::GPIE_MSIX_MODE != 0
    }

    /// ICR causes (and, in MSI-X mode, the other vector if one of them
    /// newly shows through IMS).
    fn cause(&mut self, bits: u32) {
        let old = self.reg(regs::ICR) & self.reg(regs::IMS);
        let icr = self.reg(regs::ICR) | bits;
        self.set(regs::ICR, icr);
        self.icr_raised(old);
    }

    fn icr_raised(&mut self, old: u32) {
        if self.msix_mode() && self.reg(regs::ICR) & self.reg(regs::IMS) & !old != 0 {
            self.vector_cause(self.reg(regs::IVAR_MISC) >> regs::IVAR_OTHER_SHIFT);
        }
    }

    /// A queue's cause in MSI-X mode: its IVAR0 entry.
    fn queue_cause(&mut self, shift: u32) {
        if self.msix_mode() {
            self.vector_cause(self.reg(regs::IVAR0) >> shift);
        }
    }

    /// An IVAR entry's cause: its vector's EICR bit, when valid.
    fn vector_cause(&mut self, entry: u32) {
        if entry & regs::IVAR_VALID != 0 {
            self.eicr(1 << (entry & regs::IVAR_VECTOR_MASK));
        }
    }

    fn eicr(&mut self, bits: u32) {
        let old = self.reg(regs::EICR) & self.reg(regs::EIMS);
        let eicr = self.reg(regs::EICR) | bits;
        self.set(regs::EICR, eicr);
        self.eicr_raised(old);
    }

    fn eicr_raised(&mut self, old: u32) {
        let raised = self.reg(regs::EICR) & self.reg(regs::EIMS) & !old;
        if !self.msix || raised == 0 {
            return;
        }
        for v in (0..32).filter(|v| raised & 1 << v != 0) {
            self.messages.push(v as u8);
        }
        let eicr = self.reg(regs::EICR) & !(raised & self.reg(regs::EIAC));
        self.set(regs::EICR, eicr);
    }

    /// Adds to a statistics register.
    pub fn count(&mut self, r: u32, n: u32) {
        let v = self.reg(r).wrapping_add(n);
        self.set(r, v);
    }

    fn ring(&self, bal: u32, bah: u32, len: u32) -> (u64, u32) {
        (u64::from(self.reg(bal)) | u64::from(self.reg(bah)) << 32, self.reg(len) / 16)
    }

    /// Receive descriptors the driver gave and the device has not used.
    pub fn rx_available(&self) -> u32 {
        let (_, size) = self.ring(regs::RXQ.bal(), regs::RXQ.bah(), regs::RXQ.dlen());
        let (h, t) = (self.reg(regs::RXQ.head()), self.reg(regs::RXQ.tail()));
        if size == 0 { 0 } else { (t + size - h) % size }
    }

    /// The packet buffer size SRRCTL names (it must ask for the advanced
    /// one-buffer descriptor).
    pub fn rx_buffer_size(&self) -> usize {
        let srrctl = self.reg(regs::SRRCTL);
        assert_eq!(srrctl & (0b111 << 25), regs::SRRCTL_DESCTYPE_ADV_ONEBUF, "advanced one-buffer descriptors");
        (srrctl & regs::SRRCTL_BSIZEPKT_MASK) as usize * 1024
    }

    fn rx_on(&self) -> bool {
        self.reg(regs::RCTL) & regs::RCTL_EN != 0 && self.reg(regs::RXDCTL) & regs::XDCTL_ENABLE != 0
    }

    /// The device receives `frame` as the 82576 does: dropped (ROC) when
    /// longer than the receiver admits, spread over as many buffers as it
    /// needs, or missed (MPC, RXO) when there are not enough.
    pub fn deliver(&mut self, frame: &[u8]) -> bool {
        let rctl = self.reg(regs::RCTL);
        let limit = if rctl & regs::RCTL_LPE != 0 { self.reg(regs::RLPML) as usize - 4 } else { 1518 };
        if frame.len() > limit {
            self.count(regs::ROC, 1);
            return false;
        }
        let size = self.rx_buffer_size().max(1);
        let pieces: Vec<&[u8]> = frame.chunks(size).collect();
        if !self.rx_on() || (self.rx_available() as usize) < pieces.len() {
            self.count(regs::MPC, 1);
            self.cause(regs::INT_RXO);
            return false;
        }
        let csum = self.rx_checksums(frame);
        for (i, piece) in pieces.iter().enumerate() {
            let status = if i + 1 == pieces.len() { DD_EOP | csum } else { 1 };
            self.write_back(piece, piece.len() as u16, status);
        }
        self.count(regs::GPRC, 1);
        self.queue_cause(regs::IVAR_RXQ0_SHIFT);
        self.cause(regs::INT_RXDW);
        true
    }

    /// The checksum status and error bits RXCSUM asks for (§7.1): IPCS
    /// (and IPE) for an IPv4 frame, TCPCS (UDPCS for UDP, and L4E) for TCP
    /// or UDP over IPv4 (a UDP checksum of zero counts as checked and
    /// right, as QEMU's model has it).
    fn rx_checksums(&self, frame: &[u8]) -> u32 {
        let rxcsum = self.reg(regs::RXCSUM);
        let mut bits = 0;
        if rxcsum & regs::RXCSUM_IPOFLD != 0
            && let Some(ok) = csum::ipv4_header_ok(frame)
        {
            bits |= RX_IPCS | if ok { 0 } else { RX_ERR_IPE };
        }
        if rxcsum & regs::RXCSUM_TUOFLD != 0
            && let Some(ok) = csum::l4_ok(frame)
        {
            let udp = frame.get(23) == Some(&csum::PROTO_UDP);
            bits |= RX_TCPCS | if udp { RX_UDPCS } else { 0 } | if ok { 0 } else { RX_ERR_L4E };
        }
        bits
    }

    /// One descriptor written back with the length and status/error word
    /// given (a test may lie); false when none is available.
    pub fn deliver_raw(&mut self, bytes: &[u8], len: u16, status_error: u32) -> bool {
        if !self.rx_on() || self.rx_available() == 0 {
            return false;
        }
        self.write_back(bytes, len, status_error);
        self.queue_cause(regs::IVAR_RXQ0_SHIFT);
        self.cause(regs::INT_RXDW);
        true
    }

    fn write_back(&mut self, bytes: &[u8], len: u16, status_error: u32) {
        let (base, size) = self.ring(regs::RXQ.bal(), regs::RXQ.bah(), regs::RXQ.dlen());
        let head = self.reg(regs::RXQ.head());
        let d = base + 16 * u64::from(head);
        // SAFETY: the ring and the buffers it names are the driver's FakeHal
        // memory, alive while the driver is; the descriptor between head
        // and tail is the device's to write, and so is its buffer.
        unsafe {
            let addr = at::<AtomicU64>(d).load(Ordering::Acquire);
            assert_ne!(addr, 0, "a posted descriptor names its buffer");
            let room = self.rx_buffer_size().min(bytes.len());
            for (i, &b) in bytes.iter().take(room).enumerate() {
                core::ptr::write_volatile((addr as usize + i) as *mut u8, b);
            }
            // The write-back format replaces the address: packet type and
            // RSS hash there now, as the device writes them.
            at::<AtomicU64>(d).store(0x5a5a_0000_0000_0011, Ordering::Relaxed);
            at::<AtomicU16>(d + 12).store(len, Ordering::Relaxed);
            at::<AtomicU16>(d + 14).store(0, Ordering::Relaxed);
            at::<AtomicU32>(d + 8).store(status_error, Ordering::Release);
        }
        self.set(regs::RXQ.head(), (head + 1) % size);
    }

    /// The device sends every frame between TDH and TDT, writing DD back;
    /// the frames.
    pub fn send_all(&mut self) -> Vec<Vec<u8>> {
        self.send_up_to(usize::MAX)
    }

    /// Sends up to `max` frames from TDH: context descriptors are taken
    /// in, data descriptors gathered until EOP (PAYLEN on the first must be
    /// the frame's length), the checksums POPTS asks for computed as the
    /// device does from context 0, DD written back where RS asks.
    pub fn send_up_to(&mut self, max: usize) -> Vec<Vec<u8>> {
        let (base, size) = self.ring(regs::TXQ.bal(), regs::TXQ.bah(), regs::TXQ.dlen());
        let mut sent = Vec::new();
        if self.reg(regs::TCTL) & regs::TCTL_EN == 0 || self.reg(regs::TXDCTL) & regs::XDCTL_ENABLE == 0 {
            return sent;
        }
        let mut frame = Vec::new();
        let (mut parts, mut first_olinfo) = (0, 0u32);
        while self.reg(regs::TXQ.head()) != self.reg(regs::TXQ.tail()) && sent.len() < max {
            let head = self.reg(regs::TXQ.head());
            let d = base + 16 * u64::from(head);
            // SAFETY: as in `write_back`, for the transmit ring.
            let (lo, addr, cmd_type_len, olinfo) = unsafe {
                (
                    at::<AtomicU32>(d).load(Ordering::Acquire),
                    at::<AtomicU64>(d).load(Ordering::Relaxed),
                    at::<AtomicU32>(d + 8).load(Ordering::Relaxed),
                    at::<AtomicU32>(d + 12).load(Ordering::Relaxed),
                )
            };
            self.set(regs::TXQ.head(), (head + 1) % size);
            if cmd_type_len & (0xf << 20) == TX_DTYP_CTXT {
                assert_ne!(cmd_type_len & TX_TUCMD_IPV4, 0, "an IPv4 context");
                assert_eq!(olinfo >> 4 & 7, 0, "context index 0");
                let tcp = cmd_type_len & TX_TUCMD_L4T_TCP != 0;
                self.context = Some(((lo >> CTX_MACLEN_SHIFT) as usize & 0x7f, (lo & CTX_IPLEN_MASK) as usize, tcp));
                self.contexts += 1;
                continue;
            }
            let end = TX_DCMD_EOP | TX_DCMD_RS;
            assert_eq!(cmd_type_len & 0xff00_0000 & !end, TX_CMD & 0xff00_0000, "an advanced data descriptor, IFCS");
            assert_eq!(cmd_type_len & (0xf << 20), TX_CMD & (0xf << 20));
            let len = (cmd_type_len & 0xffff) as usize;
            // SAFETY: the buffer the descriptor names, the driver's until
            // the descriptor is done.
            frame.extend((0..len).map(|i| unsafe { core::ptr::read_volatile((addr as usize + i) as *const u8) }));
            if parts == 0 {
                first_olinfo = olinfo;
            } else {
                assert_eq!(olinfo & !TX_DD, 0, "PAYLEN and POPTS on the first descriptor only");
            }
            parts += 1;
            if cmd_type_len & TX_DCMD_RS != 0 {
                // SAFETY: as above; DD into STA, the rest as written.
                unsafe { at::<AtomicU32>(d + 12).fetch_or(TX_DD, Ordering::Release) };
            }
            if cmd_type_len & TX_DCMD_EOP == 0 {
                continue;
            }
            assert_ne!(cmd_type_len & TX_DCMD_RS, 0, "RS on the last descriptor of a frame");
            assert_eq!((first_olinfo >> TX_PAYLEN_SHIFT) as usize, frame.len(), "PAYLEN is the frame's length");
            self.insert_checksums(&mut frame, first_olinfo);
            self.chained += u32::from(parts > 1);
            sent.push(core::mem::take(&mut frame));
            parts = 0;
            self.count(regs::GPTC, 1);
        }
        assert!(frame.is_empty(), "the tail stops inside a frame");
        if !sent.is_empty() {
            self.queue_cause(regs::IVAR_TXQ0_SHIFT);
            self.cause(regs::INT_TXDW);
        }
        sent
    }

    fn insert_checksums(&self, frame: &mut [u8], olinfo: u32) {
        if olinfo & (TX_POPTS_IXSM | TX_POPTS_TXSM) == 0 {
            return;
        }
        let (maclen, iplen, tcp) = self.context.expect("a context before checksum offload");
        let l4 = maclen + iplen;
        if olinfo & TX_POPTS_IXSM != 0 {
            let sum = !csum::add(0, &frame[maclen..l4]);
            frame[maclen + 10..maclen + 12].copy_from_slice(&sum.to_be_bytes());
        }
        if olinfo & TX_POPTS_TXSM != 0 {
            let at = l4 + if tcp { 16 } else { 6 };
            let sum = csum::finish_l4(!csum::add(0, &frame[l4..]), tcp);
            frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
        }
    }

    /// Writes DD into the transmit descriptor `i` slots past the head, as a
    /// device that lies (or runs ahead) would.
    pub fn mark_tx_done_ahead(&mut self, i: u32) {
        let (base, size) = self.ring(regs::TXQ.bal(), regs::TXQ.bah(), regs::TXQ.dlen());
        let d = base + 16 * u64::from((self.reg(regs::TXQ.head()) + i) % size.max(1));
        // SAFETY: as in `write_back`; the slot is inside the ring.
        unsafe { at::<AtomicU32>(d + 12).fetch_or(TX_DD, Ordering::Release) };
    }
}

/// The driver's handle on the device.
pub struct FakeRegs(pub Rc<RefCell<Device>>);

impl Regs for FakeRegs {
    fn read(&self, offset: u32) -> u32 {
        let mut d = self.0.borrow_mut();
        // In MSI-X mode ICR keeps its causes until written back.
        if offset == regs::ICR && d.msix && d.msix_mode() && d.reg(regs::IMS) != 0 {
            return d.reg(offset);
        }
        if READ_TO_CLEAR.contains(&offset) {
            return d.regs.remove(&offset).unwrap_or(0);
        }
        d.reg(offset)
    }

    fn write(&mut self, offset: u32, value: u32) {
        let mut d = self.0.borrow_mut();
        *d.writes.entry(offset).or_default() += 1;
        match offset {
            regs::CTRL if value & regs::CTRL_RST != 0 => d.reset(),
            regs::ICR => {
                let icr = d.reg(regs::ICR) & !value;
                d.set(regs::ICR, icr);
            }
            regs::ICS => d.cause(value),
            regs::IMS => {
                let old = d.reg(regs::ICR) & d.reg(regs::IMS);
                let ims = d.reg(regs::IMS) | value;
                d.set(regs::IMS, ims);
                d.icr_raised(old);
            }
            regs::EICR => {
                let eicr = d.reg(regs::EICR) & !value;
                d.set(regs::EICR, eicr);
            }
            regs::EICS => d.eicr(value),
            regs::EIMS => {
                let old = d.reg(regs::EICR) & d.reg(regs::EIMS);
                let eims = d.reg(regs::EIMS) | value;
                d.set(regs::EIMS, eims);
                d.eicr_raised(old);
            }
            regs::EIMC => {
                let eims = d.reg(regs::EIMS) & !value;
                d.set(regs::EIMS, eims);
            }
            regs::IMC => {
                let ims = d.reg(regs::IMS) & !value;
                d.set(regs::IMS, ims);
            }
            regs::MDIC => {
                let phy = (value >> regs::MDIC_PHY_SHIFT) & 0x1f;
                let reg = (value >> regs::MDIC_REG_SHIFT) & 0x1f;
                if d.phy_broken || phy != regs::MDIC_PHY_INTERNAL {
                    d.set(regs::MDIC, value | regs::MDIC_READY | regs::MDIC_ERROR);
                    return;
                }
                let restart = u32::from(regs::BMCR_AN_ENABLE | regs::BMCR_RESTART_AN);
                if value & regs::MDIC_OP_WRITE != 0 && reg == regs::PHY_BMCR && value & restart == restart {
                    // Negotiation starts over: the link is down meanwhile.
                    (d.negotiating, d.negotiated) = (true, false);
                    d.set_lu(false);
                }
                d.set(regs::MDIC, value | regs::MDIC_READY);
            }
            regs::RXDCTL if d.rx_queue_stuck => d.set(offset, value & !regs::XDCTL_ENABLE),
            regs::RXDCTL if d.rx_queue_wont_stop => d.set(offset, value | regs::XDCTL_ENABLE),
            regs::EERD if value & regs::EERD_START != 0 => {
                let word = (value >> regs::EERD_ADDR_SHIFT) as usize & 0x3fff;
                let data = d.nvm.get(word).copied();
                match data {
                    Some(w) => d.set(regs::EERD, u32::from(w) << regs::EERD_DATA_SHIFT | regs::EERD_DONE),
                    // No such word: never done.
                    None => d.set(regs::EERD, 0),
                }
            }
            _ => d.set(offset, value),
        }
    }
}
