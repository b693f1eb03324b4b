//! 24-bit packet sequence numbers with wrap-around arithmetic (IBA vol. 1 9.7.1:
//! PSNs are compared modulo 2^24, "earlier" meaning within half the space behind).

use core::cmp::Ordering;
use core::fmt;

/// A packet sequence number: 24 bits, wrapping from 0xFF_FFFF to 0.
///
/// There is deliberately no `Ord`: wrap-around order is not transitive over the whole
/// space, so comparisons go through [`Psn::cmp_wrapping`] or [`Psn::diff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// The valid bits of a PSN.
    pub const MASK: u32 = 0x00FF_FFFF;
    /// Half the PSN space: the farthest two PSNs can be apart and still be ordered.
    pub const HALF: u32 = 1 << 23;

    /// A PSN from the low 24 bits of `value`; higher bits are dropped, as on the wire.
    pub const fn new(value: u32) -> Psn {
        Psn(value & Self::MASK)
    }

    /// The PSN as a number in `0..=0xFF_FFFF`.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n`, modulo 2^24.
    pub const fn wrapping_add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }

    /// `self - n`, modulo 2^24.
    pub const fn wrapping_sub(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// The next PSN.
    pub const fn next(self) -> Psn {
        self.wrapping_add(1)
    }

    /// Signed distance from `other` to `self` in `-2^23..2^23`: positive when `self` is
    /// after `other`. Exactly half the space apart counts as before (-2^23).
    pub const fn diff(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back, so its bit 23
        // becomes the sign.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Wrap-around order: `Less` when `self` comes before `other`.
    pub const fn cmp_wrapping(self, other: Psn) -> Ordering {
        let d = self.diff(other);
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// Whether `self` comes strictly before `other`.
    pub const fn is_before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// Whether `self` comes strictly after `other`.
    pub const fn is_after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// Whether `self` lies in the window of `len` PSNs starting at `start`.
    pub const fn in_window(self, start: Psn, len: u32) -> bool {
        Psn::new(self.0.wrapping_sub(start.0)).0 < len
    }
}

impl From<Psn> for u32 {
    fn from(psn: Psn) -> u32 {
        psn.0
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const MAX: Psn = Psn::new(Psn::MASK);

    #[test]
    fn new_masks_to_24_bits() {
        assert_eq!(Psn::new(0x0123_4567).value(), 0x23_4567);
        assert_eq!(Psn::new(u32::MAX), MAX);
    }

    #[test]
    fn add_and_sub_wrap() {
        assert_eq!(MAX.next(), Psn::new(0));
        assert_eq!(MAX.wrapping_add(3), Psn::new(2));
        assert_eq!(Psn::new(1).wrapping_sub(2), MAX);
        assert_eq!(Psn::new(5).wrapping_add(u32::MAX), Psn::new(4));
    }

    #[test]
    fn diff_across_the_wrap() {
        assert_eq!(Psn::new(0).diff(MAX), 1);
        assert_eq!(MAX.diff(Psn::new(0)), -1);
        assert_eq!(Psn::new(2).diff(Psn::new(0xFF_FFFE)), 4);
        assert_eq!(Psn::new(10).diff(Psn::new(10)), 0);
    }

    #[test]
    fn order_at_the_wrap() {
        assert!(MAX.is_before(Psn::new(0)));
        assert!(Psn::new(0).is_after(MAX));
        assert_eq!(Psn::new(0x10).cmp_wrapping(Psn::new(0xFF_FFF0)), Ordering::Greater);
        assert_eq!(Psn::new(7).cmp_wrapping(Psn::new(7)), Ordering::Equal);
    }

    #[test]
    fn half_space_boundary() {
        let zero = Psn::new(0);
        let almost_half = Psn::new(Psn::HALF - 1);
        assert!(almost_half.is_after(zero));
        assert!(zero.is_before(almost_half));
        // Exactly half apart is ambiguous; both directions read as "before".
        let half = Psn::new(Psn::HALF);
        assert_eq!(half.diff(zero), -(Psn::HALF as i32));
        assert_eq!(zero.diff(half), -(Psn::HALF as i32));
    }

    #[test]
    fn window_wraps() {
        let start = Psn::new(0xFF_FFFE);
        assert!(start.in_window(start, 1));
        assert!(Psn::new(1).in_window(start, 4));
        assert!(!Psn::new(2).in_window(start, 4));
        assert!(!Psn::new(0xFF_FFFD).in_window(start, 4));
        assert!(!start.in_window(start, 0));
    }

    #[test]
    fn diff_matches_a_wide_reference() {
        // Exhaustive over a band around the wrap for a few anchors.
        for anchor in [0u32, 1, Psn::HALF, Psn::MASK - 1, Psn::MASK] {
            for delta in -1000i64..1000 {
                let other = Psn::new(anchor);
                let moved = Psn::new((i64::from(anchor) + delta).rem_euclid(1 << 24) as u32);
                assert_eq!(i64::from(moved.diff(other)), delta);
            }
        }
    }
}
