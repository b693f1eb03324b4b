//! The 16550 UART on COM1: the console. Polled transmit; receive raises IRQ 4 so
//! an idle, halted CPU wakes up when a key arrives.

use x86_64::instructions::port::Port;

/// The console's byte I/O, so the shell can be driven by a fake in tests.
pub trait ByteIo {
    /// Sends one byte, waiting while the transmitter is full.
    fn write_byte(&mut self, byte: u8);
    /// A received byte, if one is waiting.
    fn read_byte(&mut self) -> Option<u8>;
}

/// COM1's I/O base.
pub const COM1: u16 = 0x3f8;

// Register offsets from the base (DLAB = 0 unless noted).
const DATA: u16 = 0;
const INT_ENABLE: u16 = 1;
const FIFO_CTRL: u16 = 2;
const LINE_CTRL: u16 = 3;
const MODEM_CTRL: u16 = 4;
const LINE_STATUS: u16 = 5;

const LSR_DATA_READY: u8 = 1 << 0;
const LSR_THR_EMPTY: u8 = 1 << 5;

/// A 16550-compatible UART at an I/O port base.
pub struct Uart16550 {
    base: u16,
}

impl Uart16550 {
    /// # Safety
    /// `base` must be the I/O base of a 16550 UART that nothing else drives.
    pub const unsafe fn new(base: u16) -> Self {
        Self { base }
    }

    fn out(&mut self, reg: u16, v: u8) {
        // SAFETY: `new`'s contract: the ports belong to our UART alone.
        unsafe { Port::new(self.base + reg).write(v) }
    }

    fn inb(&mut self, reg: u16) -> u8 {
        // SAFETY: as in `out`; reading UART registers has no effect on memory.
        unsafe { Port::new(self.base + reg).read() }
    }

    /// 115200 baud, 8N1, FIFOs on, receive-data interrupt enabled.
    pub fn init(&mut self) {
        self.out(INT_ENABLE, 0x00);
        self.out(LINE_CTRL, 0x80); // DLAB on: divisor follows
        self.out(DATA, 0x01); // divisor 1 = 115200 baud
        self.out(INT_ENABLE, 0x00);
        self.out(LINE_CTRL, 0x03); // 8 bits, no parity, one stop bit
        self.out(FIFO_CTRL, 0xc7); // enable and clear FIFOs, 14-byte threshold
        self.out(MODEM_CTRL, 0x0b); // DTR, RTS, OUT2 (gates the IRQ line)
        self.out(INT_ENABLE, 0x01); // received data available
    }
}

impl ByteIo for Uart16550 {
    fn write_byte(&mut self, byte: u8) {
        // Bounded: a UART that never drains must not hang the kernel forever.
        for _ in 0..100_000 {
            if self.inb(LINE_STATUS) & LSR_THR_EMPTY != 0 {
                break;
            }
            core::hint::spin_loop();
        }
        self.out(DATA, byte);
    }

    fn read_byte(&mut self) -> Option<u8> {
        (self.inb(LINE_STATUS) & LSR_DATA_READY != 0).then(|| self.inb(DATA))
    }
}

impl core::fmt::Write for Uart16550 {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                self.write_byte(b'\r');
            }
            self.write_byte(b);
        }
        Ok(())
    }
}
