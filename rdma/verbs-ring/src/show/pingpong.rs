//! rdma-core's pingpongs' `-c` (`--chk`, rdma-core 44 `rc_pingpong.c`,
//! `uc_pingpong.c`, `ud_pingpong.c`): the client marks its message before
//! the first send, and the server checks the mark when the run is over,
//! printing one line per page that lacks it. The message otherwise holds the
//! examples' 0x7b fill, and each side sends what its buffer last received, so
//! with `-c` on both sides every message of a run is the same bytes.
//!
//! The mark is rdma-core's: byte 0 of every page (4 KiB, x86-64 Linux's page
//! size) of the message is `page % sizeof(char)`, i.e. 0. Our tools check
//! more than that: [`bad_pages`] compares every byte with the marked fill, so
//! a message that differs anywhere is reported, on the page it differs in.

use core::fmt;

/// The page the mark is made in (what `sysconf(_SC_PAGESIZE)` is on x86-64 Linux).
pub const PAGE: usize = 4096;
/// The fill rdma-core's examples give their buffer.
pub const FILL: u8 = 0x7b;

/// What a marked message holds at `i`.
pub fn expected(i: usize) -> u8 {
    if i.is_multiple_of(PAGE) { 0 } else { FILL }
}

/// Marks a message (the client, before its first send, with `-c`).
pub fn mark(msg: &mut [u8]) {
    for b in msg.iter_mut().step_by(PAGE) {
        *b = 0;
    }
}

/// The pages of a received message that differ from a marked message, in order.
pub fn bad_pages(msg: &[u8]) -> impl Iterator<Item = usize> + '_ {
    msg.chunks(PAGE)
        .enumerate()
        .filter(|(p, chunk)| chunk.iter().enumerate().any(|(i, &b)| b != expected(p * PAGE + i)))
        .map(|(p, _)| p)
}

/// rdma-core's line for a page that failed the check.
pub struct InvalidPage(pub usize);

impl fmt::Display for InvalidPage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid data in page {}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn a_marked_fill_passes_and_a_change_is_found_on_its_page() {
        let mut msg = vec![FILL; 3 * PAGE + 10];
        assert_eq!(bad_pages(&msg).collect::<Vec<_>>(), [0, 1, 2, 3], "unmarked: every page lacks its mark");
        mark(&mut msg);
        assert_eq!(msg[PAGE], 0);
        assert_eq!(msg[PAGE + 1], FILL);
        assert_eq!(bad_pages(&msg).count(), 0);
        msg[2 * PAGE + 7] = 1;
        assert_eq!(bad_pages(&msg).collect::<Vec<_>>(), [2]);
        assert_eq!(alloc::format!("{}", InvalidPage(2)), "invalid data in page 2");
        assert_eq!(bad_pages(&[]).count(), 0);
    }
}
