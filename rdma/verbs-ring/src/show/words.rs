//! Spellings several tools share: GUIDs, the two forms of a GID, the IPv4
//! address inside one, and names from the ring's name fields.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::wire::name_str;

/// A GUID as libibverbs and iproute2 print it: four groups of four hex
/// digits (`5054:00ff:fe00:0001`).
pub struct Guid(pub u64);

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.0;
        write!(f, "{:04x}:{:04x}:{:04x}:{:04x}", g >> 48, (g >> 32) & 0xffff, (g >> 16) & 0xffff, g & 0xffff)
    }
}

/// A GID in full, eight groups of four hex digits, as sysfs shows it (and
/// so `show_gids`, and `ibv_devinfo` for RoCE v1):
/// `fe80:0000:0000:0000:5054:00ff:fe00:0001`.
pub struct GidFull<'a>(pub &'a [u8; 16]);

impl fmt::Display for GidFull<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks_exact(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// A GID as glibc's `inet_ntop(AF_INET6)` prints it (`ibv_devinfo` for
/// RoCE v2): `fe80::5054:ff:fe00:1`, `::ffff:10.0.0.1`.
pub struct GidText<'a>(pub &'a [u8; 16]);

impl fmt::Display for GidText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.0;
        // glibc also writes IPv4-compatible addresses (`::a.b.c.d`, the first
        // 96 bits zero, the seventh group not) in dotted form, where Rust
        // prints hex groups; every other address prints alike.
        if g[..12].iter().all(|&b| b == 0) && (g[12] | g[13]) != 0 {
            return write!(f, "::{}", Ipv4Addr::new(g[12], g[13], g[14], g[15]));
        }
        fmt::Display::fmt(&Ipv6Addr::from(*g), f)
    }
}

/// The name in a ring name field, or `?` when the field holds no valid name
/// (no NUL, or not UTF-8: what a broken peer might send).
pub fn name(field: &[u8]) -> &str {
    name_str(field).unwrap_or("?")
}

/// Orders two numbers as `ls` orders the files named after them
/// (`/sys/class/infiniband/*/ports/*/gids/*`): by their decimal digits, so
/// 10 comes before 2.
pub fn cmp_as_file_names(a: u32, b: u32) -> core::cmp::Ordering {
    fn digits(mut n: u32) -> ([u8; 10], usize) {
        let mut d = [0u8; 10];
        let mut len = 0;
        loop {
            d[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        d[..len].reverse();
        (d, len)
    }
    let ((da, la), (db, lb)) = (digits(a), digits(b));
    da[..la].cmp(&db[..lb])
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec::Vec;

    fn gid(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn guids_and_gids() {
        assert_eq!(format!("{}", Guid(0x5054_00ff_fe00_0001)), "5054:00ff:fe00:0001");
        let ll = gid("fe80::5054:ff:fe00:1");
        assert_eq!(format!("{}", GidFull(&ll)), "fe80:0000:0000:0000:5054:00ff:fe00:0001");
        assert_eq!(format!("{}", GidText(&ll)), "fe80::5054:ff:fe00:1");
        let v4 = gid("::ffff:10.0.0.1");
        assert_eq!(format!("{}", GidFull(&v4)), "0000:0000:0000:0000:0000:ffff:0a00:0001");
        assert_eq!(format!("{}", GidText(&v4)), "::ffff:10.0.0.1");
        // glibc's special cases.
        assert_eq!(format!("{}", GidText(&gid("::10.0.0.1"))), "::10.0.0.1");
        assert_eq!(format!("{}", GidText(&gid("::1"))), "::1");
        assert_eq!(format!("{}", GidText(&[0; 16])), "::");
        assert_eq!(format!("{}", GidText(&gid("fe80:0:1::1"))), "fe80:0:1::1");
    }

    #[test]
    fn names_and_file_order() {
        assert_eq!(name(b"rxe0\0\0"), "rxe0");
        assert_eq!(name(b"rxe0"), "?");
        let mut v: Vec<u32> = alloc::vec![2, 10, 1, 0, 100, 11];
        v.sort_by(|a, b| cmp_as_file_names(*a, *b));
        assert_eq!(v, [0, 1, 10, 100, 11, 2]);
    }
}

/// glibc's `strerror` text for the Linux errnos the RDMA paths return, as
/// iproute2's `rdma` prints a refused netlink request (`error: File exists`).
pub fn strerror(errno: i32) -> &'static str {
    match errno {
        1 => "Operation not permitted",
        2 => "No such file or directory",
        5 => "Input/output error",
        12 => "Cannot allocate memory",
        16 => "Device or resource busy",
        17 => "File exists",
        19 => "No such device",
        22 => "Invalid argument",
        23 => "Too many open files in system",
        28 => "No space left on device",
        36 => "File name too long",
        95 => "Operation not supported",
        105 => "No buffer space available",
        _ => "Unknown error",
    }
}

#[cfg(test)]
mod strerror_tests {
    #[test]
    fn glibc_texts() {
        assert_eq!(super::strerror(17), "File exists");
        assert_eq!(super::strerror(19), "No such device");
        assert_eq!(super::strerror(-1), "Unknown error");
    }
}
