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
}
