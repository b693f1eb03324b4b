//! The fake 82576 for the driver's tests: the family's fake device
//! ([`crate::intel::fake`]) with what this controller does its own way: a
//! reset that takes the PHY with it, auto-negotiation started through MDIC
//! and finished by the test, queue enables (RXDCTL, TXDCTL; told to stick
//! by a test), MSI-X routing through the extended interrupt registers
//! (§7.3), SRRCTL's buffer sizes and RLPML's limit, and the advanced
//! descriptors (§7.1, the write-back replacing the whole descriptor;
//! §7.2.2, the context; §7.2.2.3, PAYLEN and POPTS on a chain's first).

use super::desc::{
    CTX_IPLEN_MASK, CTX_MACLEN_SHIFT, TX_CMD, TX_DCMD_EOP, TX_DCMD_RS, TX_DTYP_CTXT, TX_PAYLEN_SHIFT, TX_POPTS_IXSM,
    TX_POPTS_TXSM, TX_TUCMD_IPV4, TX_TUCMD_L4T_TCP,
};
use super::driver::I82576;
use super::regs;
use crate::intel::desc::TX_DD;
use crate::intel::fake::{Desc, Device, Model, Offsets, TxDesc};

/// What the fake 82576 keeps of its own.
pub struct Fake82576 {
    /// The cable: whether a partner is there to negotiate with.
    pub cable: bool,
    /// Auto-negotiation restarted and not yet finished.
    pub negotiating: bool,
    /// Negotiation finished since the last reset (the PHY then follows the
    /// cable at once, as QEMU's does).
    pub negotiated: bool,
    /// The PHY answers MDIC with an error.
    pub phy_broken: bool,
    /// RXDCTL.ENABLE never reads back set.
    pub rx_queue_stuck: bool,
    /// RXDCTL.ENABLE never reads back clear.
    pub rx_queue_wont_stop: bool,
}

impl Default for Fake82576 {
    fn default() -> Self {
        Fake82576 {
            cable: true,
            negotiating: false,
            negotiated: false,
            phy_broken: false,
            rx_queue_stuck: false,
            rx_queue_wont_stop: false,
        }
    }
}

impl Device<Fake82576> {
    /// The PHY finishes negotiating: the link comes up (if the cable is
    /// there) with an LSC cause.
    pub fn finish_negotiation(&mut self) {
        if !self.model.negotiating || !self.model.cable {
            return;
        }
        (self.model.negotiating, self.model.negotiated) = (false, true);
        self.set_lu(true);
        self.cause(regs::INT_LSC);
    }

    fn msix_mode(&self) -> bool {
        self.reg(regs::GPIE) & regs::GPIE_MSIX_MODE != 0
    }

    /// In MSI-X mode, the other vector if an ICR cause newly shows through
    /// IMS (`old`: what showed before).
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

    /// A vector whose EICR bit rises while enabled in EIMS sends its
    /// message (as QEMU's igb; EIAC bits cleared once sent).
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

    /// PHY register writes through MDIC: a restart of auto-negotiation
    /// takes the link down until the test finishes it.
    fn mdic(&mut self, value: u32) {
        let phy = (value >> regs::MDIC_PHY_SHIFT) & 0x1f;
        let reg = (value >> regs::MDIC_REG_SHIFT) & 0x1f;
        if self.model.phy_broken || phy != regs::MDIC_PHY_INTERNAL {
            self.set(regs::MDIC, value | regs::MDIC_READY | regs::MDIC_ERROR);
            return;
        }
        let restart = u32::from(regs::BMCR_AN_ENABLE | regs::BMCR_RESTART_AN);
        if value & regs::MDIC_OP_WRITE != 0 && reg == regs::PHY_BMCR && value & restart == restart {
            (self.model.negotiating, self.model.negotiated) = (true, false);
            self.set_lu(false);
        }
        self.set(regs::MDIC, value | regs::MDIC_READY);
    }
}

impl Model for Fake82576 {
    type Ctl = I82576;
    const RESET_RENEGOTIATES: bool = true;
    const READ_TO_CLEAR: &'static [u32] = &[regs::EICR];

    /// The link down, the queues off, the PHY's negotiation forgotten.
    fn reset(dev: &mut Device<Self>) {
        (dev.model.negotiating, dev.model.negotiated) = (false, false);
        dev.set(regs::CTRL, regs::CTRL_LRST);
    }

    /// STATUS.LU follows the cable once the PHY has negotiated.
    fn set_link(dev: &mut Device<Self>, up: bool) {
        dev.model.cable = up;
        if !up || dev.model.negotiated {
            dev.set_lu(up);
            dev.cause(regs::INT_LSC);
        }
    }

    fn settle(dev: &mut Device<Self>) -> bool {
        let pending = dev.model.negotiating && dev.model.cable;
        dev.finish_negotiation();
        pending
    }

    /// ICR causes, and in MSI-X mode the other vector if one of them newly
    /// shows through IMS.
    fn cause(dev: &mut Device<Self>, bits: u32) {
        let old = dev.reg(regs::ICR) & dev.reg(regs::IMS);
        let icr = dev.reg(regs::ICR) | bits;
        dev.set(regs::ICR, icr);
        dev.icr_raised(old);
    }

    /// IMS enabled over a pending cause raises the other vector too.
    fn enabled(dev: &mut Device<Self>, old: u32) {
        dev.icr_raised(old);
    }

    /// In MSI-X mode ICR keeps its causes until written back.
    fn icr_held(dev: &Device<Self>) -> bool {
        dev.msix && dev.msix_mode() && dev.reg(regs::IMS) != 0
    }

    fn write(dev: &mut Device<Self>, offset: u32, value: u32) -> bool {
        match offset {
            regs::EICR => {
                let eicr = dev.reg(regs::EICR) & !value;
                dev.set(regs::EICR, eicr);
            }
            regs::EICS => dev.eicr(value),
            regs::EIMS => {
                let old = dev.reg(regs::EICR) & dev.reg(regs::EIMS);
                let eims = dev.reg(regs::EIMS) | value;
                dev.set(regs::EIMS, eims);
                dev.eicr_raised(old);
            }
            regs::EIMC => {
                let eims = dev.reg(regs::EIMS) & !value;
                dev.set(regs::EIMS, eims);
            }
            regs::MDIC => dev.mdic(value),
            regs::RXDCTL if dev.model.rx_queue_stuck => dev.set(offset, value & !regs::XDCTL_ENABLE),
            regs::RXDCTL if dev.model.rx_queue_wont_stop => dev.set(offset, value | regs::XDCTL_ENABLE),
            _ => return false,
        }
        true
    }

    fn rx_on(dev: &Device<Self>) -> bool {
        dev.reg(regs::RCTL) & regs::RCTL_EN != 0 && dev.reg(regs::RXDCTL) & regs::XDCTL_ENABLE != 0
    }

    fn tx_on(dev: &Device<Self>) -> bool {
        dev.reg(regs::TCTL) & regs::TCTL_EN != 0 && dev.reg(regs::TXDCTL) & regs::XDCTL_ENABLE != 0
    }

    /// The packet buffer size SRRCTL names (it must ask for the advanced
    /// one-buffer descriptor).
    fn rx_buffer_size(dev: &Device<Self>) -> usize {
        let srrctl = dev.reg(regs::SRRCTL);
        assert_eq!(srrctl & (0b111 << 25), regs::SRRCTL_DESCTYPE_ADV_ONEBUF, "advanced one-buffer descriptors");
        (srrctl & regs::SRRCTL_BSIZEPKT_MASK) as usize * 1024
    }

    /// RLPML (less the CRC) with LPE, else a plain frame with a VLAN tag.
    fn frame_limit(dev: &Device<Self>) -> Option<usize> {
        let lpe = dev.reg(regs::RCTL) & regs::RCTL_LPE != 0;
        Some(if lpe { dev.reg(regs::RLPML) as usize - 4 } else { 1518 })
    }

    /// The write-back replaces the address: packet type and RSS hash there
    /// now, as the device writes them; the status word, the length, no
    /// VLAN tag.
    fn write_back(d: &Desc, len: u16, status: u32) {
        d.store64(0, 0x5a5a_0000_0000_0011);
        d.store16(12, len);
        d.store16(14, 0);
        d.store32(8, status);
    }

    fn received(dev: &mut Device<Self>) {
        dev.queue_cause(regs::IVAR_RXQ0_SHIFT);
        dev.cause(regs::INT_RXDW);
    }

    /// Context descriptors (index 0), advanced data descriptors with IFCS,
    /// PAYLEN and POPTS on the first of a frame only.
    fn tx_desc(d: &Desc, first: bool) -> TxDesc {
        let [lens, _, cmd_type_len, olinfo] = d.words();
        if cmd_type_len & (0xf << 20) == TX_DTYP_CTXT {
            assert_ne!(cmd_type_len & TX_TUCMD_IPV4, 0, "an IPv4 context");
            assert_eq!(olinfo >> 4 & 7, 0, "context index 0");
            let tcp = cmd_type_len & TX_TUCMD_L4T_TCP != 0;
            let maclen = (lens >> CTX_MACLEN_SHIFT) as usize & 0x7f;
            let l4 = maclen + (lens & CTX_IPLEN_MASK) as usize;
            let l4_csum = l4 + if tcp { 16 } else { 6 };
            return TxDesc::Context(Offsets {
                ip_start: maclen,
                ip_csum: maclen + 10,
                ip_end: l4,
                l4_start: l4,
                l4_csum,
                tcp,
            });
        }
        let end = TX_DCMD_EOP | TX_DCMD_RS;
        assert_eq!(cmd_type_len & 0xff00_0000 & !end, TX_CMD & 0xff00_0000, "an advanced data descriptor, IFCS");
        assert_eq!(cmd_type_len & (0xf << 20), TX_CMD & (0xf << 20));
        if !first {
            assert_eq!(olinfo & !TX_DD, 0, "PAYLEN and POPTS on the first descriptor only");
        }
        TxDesc::Data {
            addr: d.load64(0),
            len: (cmd_type_len & 0xffff) as usize,
            eop: cmd_type_len & TX_DCMD_EOP != 0,
            rs: cmd_type_len & TX_DCMD_RS != 0,
            insert: (first && olinfo & TX_POPTS_IXSM != 0, first && olinfo & TX_POPTS_TXSM != 0),
            frame_len: first.then_some((olinfo >> TX_PAYLEN_SHIFT) as usize),
        }
    }

    /// The transmit queue's vector (routed, masked) and TXDW.
    fn sent(dev: &mut Device<Self>) {
        dev.queue_cause(regs::IVAR_TXQ0_SHIFT);
        dev.cause(regs::INT_TXDW);
    }
}
