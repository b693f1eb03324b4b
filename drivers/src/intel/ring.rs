//! The geometry both descriptor rings ([`super::rx`], [`super::tx`])
//! share: a ring is `size` descriptors of [`DESC_LEN`] bytes in DMA
//! pages, its length a multiple of the 128 bytes RDLEN and TDLEN take on
//! both controllers, its indices wrapping at `size`.
#![forbid(unsafe_code)]

use super::desc::DESC_LEN;
use virtio_drivers::PAGE_SIZE;

/// The DMA pages a ring of `size` descriptors takes.
pub(super) fn pages(size: u16) -> usize {
    (usize::from(size) * DESC_LEN).div_ceil(PAGE_SIZE)
}

/// A size a ring can have: at least 8 descriptors and a multiple of 8, so
/// its length is a multiple of 128 bytes.
pub(super) fn valid_size(size: u16) -> bool {
    size >= 8 && size.is_multiple_of(8)
}

/// The slot after `i` in a ring of `size`.
pub(super) fn next(i: u16, size: u16) -> u16 {
    if i + 1 == size { 0 } else { i + 1 }
}
