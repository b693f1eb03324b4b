//! Time as the transport sees it: the shared [`Instant`] and [`Duration`]
//! (`vocab::time`), which the caller passes in, and the IBA's timer encodings.
//! There is no clock in `rdma/`: every entry point takes `now`, and the transport
//! answers with the next instant it wants to be polled at.

pub use vocab::time::{Duration, Instant};

/// The IBA local ACK timeout (vol. 1 9.7.6.1.3, QP attribute `timeout`): 4.096 µs ×
/// 2^`code`, rounded up to whole microseconds. Code 0 disables the timer (`None`), as
/// the spec and Linux do. Codes above 31 are refused by modify-QP before they get here;
/// they are clamped to 31 so this stays total.
pub const fn local_ack_timeout(code: u8) -> Option<Duration> {
    if code == 0 {
        return None;
    }
    let code = if code > 31 { 31 } else { code };
    let nanos = 4096u64 << code;
    Some(Duration::from_micros(nanos.div_ceil(1000)))
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn ack_timeout_table() {
        assert_eq!(local_ack_timeout(0), None);
        assert_eq!(local_ack_timeout(1), Some(Duration::from_micros(9)));
        // 4.096 µs × 2^14 = 67.108864 ms: what `timeout 14` (perftest's default) means.
        assert_eq!(local_ack_timeout(14), Some(Duration::from_micros(67_109)));
        assert_eq!(local_ack_timeout(31), Some(Duration::from_micros(8_796_093_023)));
        assert_eq!(local_ack_timeout(200), local_ack_timeout(31));
    }
}
