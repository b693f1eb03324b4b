//! perftest's multicast mode (`-g`, and `-M` for the group), as perftest
//! 4.5 runs it in `ib_send_bw` and `ib_send_lat` (its `send_bw.c`,
//! `send_lat.c`, `multicast_resources.c`): UD only, one QP, no `-b`.
//!
//! - Who attaches: in send_bw the server (which receives) attaches its QP
//!   to the group and the client sends to it; in send_lat both sides
//!   attach, each to its own group, and send to the other's.
//! - Which group: `-M`'s on both sides; without it perftest's default MGID
//!   `ff01:0:0:2:c985::` for the server and the same with its last byte one
//!   higher for the client (so that the two send_lat sides have two
//!   groups). The default is an IPv6 interface-local group: perftest then
//!   refuses an IPv4-mapped port GID beside it (its GID-kind check), so on
//!   RoCE over IPv4 `-M` names the group, an IPv4-mapped one
//!   (`0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3`).
//! - What an attached side announces in the keys exchange: the group as its
//!   GID, the multicast LID (0 on RoCE, which has no subnet manager to
//!   give one) and QPN 0xFFFFFF, the multicast QPN; the sender's AH goes to
//!   that GID and its sends to that QPN, with perftest's Q_Key.
//! - What it prints: `Multicast` in the title, ` MultiCast runs on UD!`
//!   under it, and a group's address line labelled `MGID` where perftest
//!   labels it so ([`labels_mgid`]).
//!
//! On Linux rdma_rxe the receiving side also needs its IP stack to be a
//! member of the group (rxe's attach does not join it): see
//! tests/linux-peer/mcast_join.c.

use super::Test;
use crate::Error;

/// perftest's `MCG_GID`: the server's group when `-M` is not given.
pub const DEFAULT_MGID: [u8; 16] = [255, 1, 0, 0, 0, 2, 201, 133, 0, 0, 0, 0, 0, 0, 0, 0];
/// The QPN an attached side announces (`QPNUM_MCAST`), the multicast QPN
/// of IBA 10.5.1.1 its peer sends to.
pub const MCAST_QPN: u32 = 0xff_ffff;

/// The group a side attaches to: `-M`'s, else the default MGID, one higher
/// in its last byte for the client.
pub fn group(user: Option<[u8; 16]>, client: bool) -> [u8; 16] {
    match user {
        Some(g) => g,
        None => {
            let mut g = DEFAULT_MGID;
            if client {
                g[15] = g[15].wrapping_add(1);
            }
            g
        }
    }
}

/// Whether this side attaches its QP to a group: send_bw's server, and
/// both sides of send_lat.
pub fn attaches(test: Test, client: bool) -> bool {
    test.is_lat() || !client
}

/// Whether an address line's GID is labelled `MGID`: perftest labels the
/// server's own line and the client's line for the server, by side and
/// role only (so a send_lat client's own group prints as `GID`).
pub fn labels_mgid(local: bool, client: bool) -> bool {
    local != client
}

/// `-M`'s group as perftest reads it: 16 bytes separated by `:`, each a C
/// integer (`strtoll` base 0: decimal, `0x` hex or `0` octal). perftest
/// takes any text and truncates each number to a byte; this refuses what
/// is not 16 numbers of 0 to 255.
pub fn parse_mgid(text: &str) -> crate::Result<[u8; 16]> {
    const BAD: &str = "the MGID (-M) is 16 bytes separated by ':', each 0-255 (decimal, 0x hex or 0 octal), \
                       e.g. 0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3";
    let fields: Vec<&str> = text.split(':').collect();
    if fields.len() != 16 {
        return Err(Error::InvalidArgument(BAD));
    }
    let mut gid = [0u8; 16];
    for (b, f) in gid.iter_mut().zip(fields) {
        let f = f.trim();
        let v = if let Some(hex) = f.strip_prefix("0x").or_else(|| f.strip_prefix("0X")) {
            u32::from_str_radix(hex, 16)
        } else if f.len() > 1 && f.starts_with('0') {
            u32::from_str_radix(&f[1..], 8)
        } else {
            f.parse::<u32>()
        };
        *b = v.ok().and_then(|v| u8::try_from(v).ok()).ok_or(Error::InvalidArgument(BAD))?;
    }
    Ok(gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_perftests() {
        let user = parse_mgid("0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3").unwrap();
        assert_eq!(user, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3]);
        assert_eq!((group(Some(user), true), group(Some(user), false)), (user, user));
        // ff01:0000:0002:c985:: for the server, ...:0001 for the client.
        assert_eq!(group(None, false)[..8], [0xff, 0x01, 0, 0, 0, 0x02, 0xc9, 0x85]);
        assert_eq!((group(None, false)[15], group(None, true)[15]), (0, 1));
        assert!(attaches(Test::SendBw, false) && !attaches(Test::SendBw, true));
        assert!(attaches(Test::SendLat, true) && attaches(Test::SendLat, false));
        // The server's own line and the client's line for the server.
        assert!(labels_mgid(true, false) && labels_mgid(false, true));
        assert!(!labels_mgid(true, true) && !labels_mgid(false, false));
    }

    #[test]
    fn mgid_numbers_are_c_integers() {
        let g = parse_mgid("0xff:0x0e:0:0:0:0:0:0:0:0:0377:255:010:1:2:3").unwrap();
        assert_eq!((g[0], g[1], g[10], g[11], g[12]), (0xff, 0x0e, 0xff, 0xff, 8));
        for bad in ["", "1:2:3", "0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:256", "0:0:0:0:0:0:0:0:0:0:ff:ff:239:1:2:3"] {
            assert!(parse_mgid(bad).is_err(), "{bad}");
        }
        assert!(parse_mgid("0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3:4").is_err());
    }
}
