//! The kernel command line (`-append`): whitespace-separated `key=value` or bare
//! `flag` words, as Linux takes them.

/// Iterates the words of a command line as `(key, value)`; a bare word has value "".
pub fn params(cmdline: &str) -> impl Iterator<Item = (&str, &str)> {
    cmdline.split_ascii_whitespace().map(|w| w.split_once('=').unwrap_or((w, "")))
}

/// The value of the last `key=...` on the line (later words win, as in Linux).
pub fn get<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    params(cmdline).filter(|(k, _)| *k == key).map(|(_, v)| v).last()
}

/// A size as the command line writes it: bytes, or with a `K`, `M` or `G`
/// suffix (binary multiples, as Linux's `memparse`); `None` if it is not one
/// or overflows.
pub fn size(value: &str) -> Option<u64> {
    let (digits, shift) = match value.as_bytes().last()? {
        b'K' | b'k' => (&value[..value.len() - 1], 10),
        b'M' | b'm' => (&value[..value.len() - 1], 20),
        b'G' | b'g' => (&value[..value.len() - 1], 30),
        _ => (value, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn words_and_values() {
        let line = "  ip=10.0.0.2/24 quiet log=debug log=trace ";
        let all: Vec<_> = params(line).collect();
        assert_eq!(all, [("ip", "10.0.0.2/24"), ("quiet", ""), ("log", "debug"), ("log", "trace")]);
        assert_eq!(get(line, "log"), Some("trace"));
        assert_eq!(get(line, "quiet"), Some(""));
        assert_eq!(get(line, "missing"), None);
        assert_eq!(get("", "x"), None);
    }

    #[test]
    fn sizes_with_suffixes() {
        assert_eq!(size("4096"), Some(4096));
        assert_eq!(size("16K"), Some(16 << 10));
        assert_eq!(size("8m"), Some(8 << 20));
        assert_eq!(size("1G"), Some(1 << 30));
        for bad in ["", "K", "-1", "1.5M", "12Q", "0x10", "99999999999999999999", "18446744073709551615K"] {
            assert_eq!(size(bad), None, "{bad}");
        }
    }
}
