//! The fake 82574 for the driver's tests: the family's fake device
//! ([`crate::intel::fake`]) with what this controller does its own way: a
//! link that is simply there or not, MSI-X routing through IVAR's nibbles
//! (§7.4.2), RCTL's buffer sizes, and the legacy descriptors (§7.1.3, the
//! receive write-back in place; §7.2, the legacy and extended transmit
//! descriptors and the TCP/IP context).

use super::desc::{TX_DEXT, TX_DTYP_DATA, TX_POPTS_IXSM, TX_POPTS_TXSM, TX_TUCMD_IP, TX_TUCMD_TCP};
use super::driver::I82574;
use super::regs;
use crate::intel::fake::{Desc, Device, Model, Offsets, TxDesc};

/// What the fake 82574 keeps of its own.
pub struct Fake82574 {
    /// The cable: STATUS.LU follows it (the link is forced up, nothing to
    /// negotiate).
    pub link: bool,
}

impl Default for Fake82574 {
    fn default() -> Self {
        Fake82574 { link: true }
    }
}

impl Model for Fake82574 {
    type Ctl = I82574;
    const RESET_RENEGOTIATES: bool = false;
    const READ_TO_CLEAR: &'static [u32] = &[];

    fn reset(dev: &mut Device<Self>) {
        dev.set_lu(dev.model.link);
    }

    fn set_link(dev: &mut Device<Self>, up: bool) {
        dev.model.link = up;
        dev.set_lu(up);
        dev.cause(regs::INT_LSC);
    }

    /// In MSI-X mode (the test's `msix`): receive write-backs raise RXQ0
    /// instead of RXT0, other causes add OTHER, and each enabled cause
    /// sends its IVAR entry's message.
    fn cause(dev: &mut Device<Self>, mut bits: u32) {
        if dev.msix {
            if bits & regs::INT_RXT0 != 0 {
                bits = bits & !regs::INT_RXT0 | regs::INT_RXQ0;
            }
            if bits & !(regs::INT_RXQ0 | regs::INT_TXQ0) != 0 {
                bits |= regs::INT_OTHER;
            }
            let (ivar, ims) = (dev.reg(regs::IVAR), dev.reg(regs::IMS));
            for (cause, shift) in [
                (regs::INT_RXQ0, regs::IVAR_RXQ0_SHIFT),
                (regs::INT_TXQ0, regs::IVAR_TXQ0_SHIFT),
                (regs::INT_OTHER, regs::IVAR_OTHER_SHIFT),
            ] {
                let alloc = ivar >> shift;
                if bits & ims & cause != 0 && alloc & regs::IVAR_VALID != 0 {
                    dev.messages.push((alloc & 7) as u8);
                }
            }
        }
        let icr = dev.reg(regs::ICR);
        dev.set(regs::ICR, icr | bits);
    }

    /// In MSI-X mode ICR keeps its causes until written back.
    fn icr_held(dev: &Device<Self>) -> bool {
        dev.msix
    }

    fn write(_dev: &mut Device<Self>, _offset: u32, _value: u32) -> bool {
        false
    }

    fn rx_on(dev: &Device<Self>) -> bool {
        dev.reg(regs::RCTL) & regs::RCTL_EN != 0
    }

    fn tx_on(dev: &Device<Self>) -> bool {
        dev.reg(regs::TCTL) & regs::TCTL_EN != 0
    }

    /// The receive buffer size RCTL names.
    fn rx_buffer_size(dev: &Device<Self>) -> usize {
        let rctl = dev.reg(regs::RCTL);
        let bsize = (rctl >> regs::RCTL_BSIZE_SHIFT) & 3;
        match (rctl & regs::RCTL_BSEX != 0, bsize) {
            (false, b) => 2048 >> b,
            (true, 1) => 16384,
            (true, 2) => 8192,
            (true, 3) => 4096,
            (true, _) => 0,
        }
    }

    /// The legacy write-back: the address kept, the length at 8, status
    /// and errors at 12.
    fn write_back(d: &Desc, len: u16, status: u32) {
        d.store16(8, len);
        d.store16(12, status as u16);
    }

    fn received(dev: &mut Device<Self>) {
        dev.cause(regs::INT_RXT0);
    }

    /// Context descriptors (IPCSS, IPCSO, IPCSE, TUCSS, TUCSO, TUCMD), data
    /// descriptors legacy or extended (POPTS on the first), IFCS on every
    /// data descriptor.
    fn tx_desc(d: &Desc, first: bool) -> TxDesc {
        let [lo, hi, len_cmd, sta] = d.words();
        let cmd = (len_cmd >> 24) as u8;
        let ext = len_cmd & TX_DEXT != 0;
        if ext && len_cmd & (0xf << 20) == 0 {
            assert_eq!(len_cmd & TX_TUCMD_IP, TX_TUCMD_IP, "an IPv4 context");
            let field = |w: u32, byte: u32| (w >> (8 * byte) & 0xff) as usize;
            return TxDesc::Context(Offsets {
                ip_start: field(lo, 0),
                ip_csum: field(lo, 1),
                ip_end: (lo >> 16) as usize + 1,
                l4_start: field(hi, 0),
                l4_csum: field(hi, 1),
                tcp: len_cmd & TX_TUCMD_TCP != 0,
            });
        }
        assert!(!ext || len_cmd & (0xf << 20) == TX_DTYP_DATA, "an extended data descriptor");
        assert_ne!(cmd & 0b10, 0, "IFCS on every data descriptor");
        let popts = if first && ext { (sta >> 8) as u8 } else { 0 };
        TxDesc::Data {
            addr: u64::from(lo) | u64::from(hi) << 32,
            len: (len_cmd & if ext { 0xf_ffff } else { 0xffff }) as usize,
            eop: cmd & 0b1 != 0,
            rs: cmd & 0b1000 != 0,
            insert: (popts & TX_POPTS_IXSM != 0, popts & TX_POPTS_TXSM != 0),
            frame_len: None,
        }
    }
}
