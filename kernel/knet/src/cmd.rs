//! The console's `ip` and `ping` argument parsers: words in, a typed command or
//! one clear usage error out. The console runs the command against
//! [`Netdevs`](crate::netdev::Netdevs) and prints with [`format`](crate::format).
//!
//! The grammar is the part of iproute2's we support, with its habits: objects
//! and verbs may be abbreviated (`ip a s`, `ip l`), `dev` may be left out before
//! a device name, a missing verb means `show`, and the error texts follow
//! iproute2's. `ping -i` takes milliseconds (iputils takes seconds), because the
//! console has no floating-point parsing and sub-second intervals are common.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::net::IpAddr;

use vocab::time::Duration;

pub use crate::addr::IpFamily;
use crate::addr::{AddrSpec, parse_addr_spec};

/// A parsed `ip` command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpCommand {
    /// `ip [-s] link [show [dev] DEV]`
    LinkShow { dev: Option<String>, stats: bool },
    /// `ip link set [dev] DEV [up|down] [mtu N]` (at least one setting).
    LinkSet { dev: String, up: Option<bool>, mtu: Option<u32> },
    /// `ip addr add ADDR[/N] dev DEV`
    AddrAdd { dev: String, addr: AddrSpec },
    /// `ip addr del ADDR[/N] dev DEV`
    AddrDel { dev: String, addr: AddrSpec },
    /// `ip [-4|-6] addr [show [dev] DEV]`
    AddrShow { dev: Option<String>, family: Option<IpFamily> },
    /// `ip [-4|-6] neigh [show [dev DEV]]`
    NeighShow { dev: Option<String>, family: Option<IpFamily> },
    /// `ip help` or `ip OBJECT help`.
    Help,
}

/// A usage error, worded as iproute2 or ping words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// What `ip help` prints.
pub const IP_USAGE: &str = "Usage: ip [ -s ] [ -4 | -6 ] OBJECT ...\n\
    \x20      ip [ -s ] link [ show [ dev ] DEV ]\n\
    \x20      ip link set [ dev ] DEV { up | down | mtu MTU }\n\
    \x20      ip addr { add | del } ADDR[/PREFIX] dev DEV\n\
    \x20      ip addr [ show [ dev ] DEV ]\n\
    \x20      ip neigh [ show [ dev DEV ] ]";

/// What a bad `ping` prints after its error.
pub const PING_USAGE: &str = "Usage: ping ADDRESS[%DEV] [ -c COUNT ] [ -s SIZE ] [ -i INTERVAL_MS ]";

/// iproute2's `matches`: `word` is a non-empty prefix of `full`.
fn matches(word: &str, full: &str) -> bool {
    !word.is_empty() && full.starts_with(word)
}

/// Parses the words after `ip` (a leading `ip` is skipped if present).
pub fn parse_ip(words: &[&str]) -> Result<IpCommand, UsageError> {
    let mut w = words;
    if w.first() == Some(&"ip") {
        w = &w[1..];
    }
    let mut stats = false;
    let mut family = None;
    while let Some(opt) = w.first().filter(|o| o.starts_with('-')) {
        match opt.trim_start_matches('-') {
            "4" => family = Some(IpFamily::V4),
            "6" => family = Some(IpFamily::V6),
            o if matches(o, "family") => {
                family = match w.get(1) {
                    Some(&"inet") => Some(IpFamily::V4),
                    Some(&"inet6") => Some(IpFamily::V6),
                    Some(f) => return err(alloc::format!("Error: argument \"{f}\" is wrong: invalid protocol family")),
                    None => return err("Command line is not complete. Try option \"help\""),
                };
                w = &w[1..];
            }
            o if matches(o, "statistics") || matches(o, "stats") => stats = true,
            o if matches(o, "help") => return Ok(IpCommand::Help),
            _ => return err(alloc::format!("Option \"{opt}\" is unknown, try \"ip -help\".")),
        }
        w = &w[1..];
    }
    let Some((&object, rest)) = w.split_first() else {
        return err(IP_USAGE);
    };
    if matches(object, "link") {
        parse_link(rest, stats)
    } else if matches(object, "address") {
        parse_addr(rest, family)
    } else if matches(object, "neighbour") || matches(object, "neighbor") {
        parse_neigh(rest, family)
    } else if matches(object, "help") {
        Ok(IpCommand::Help)
    } else {
        err(alloc::format!("Object \"{object}\" is unknown, try \"ip help\"."))
    }
}

fn is_show(verb: &str) -> bool {
    matches(verb, "show") || matches(verb, "list") || verb == "lst"
}

fn parse_link(w: &[&str], stats: bool) -> Result<IpCommand, UsageError> {
    match w.split_first() {
        None => Ok(IpCommand::LinkShow { dev: None, stats }),
        Some((&v, rest)) if is_show(v) => Ok(IpCommand::LinkShow { dev: optional_dev(rest)?, stats }),
        Some((&v, rest)) if matches(v, "set") => parse_link_set(rest),
        Some((&v, _)) if matches(v, "help") => Ok(IpCommand::Help),
        Some((&v, _)) => err(alloc::format!("Command \"{v}\" is unknown, try \"ip link help\".")),
    }
}

fn parse_link_set(w: &[&str]) -> Result<IpCommand, UsageError> {
    let (mut dev, mut up, mut mtu) = (None, None, None);
    let mut it = w.iter().copied();
    while let Some(word) = it.next() {
        match word {
            "up" | "down" => up = Some(word == "up"),
            "mtu" => {
                let Some(v) = it.next() else {
                    return err("Command line is not complete. Try option \"help\"");
                };
                let n = v.parse::<u32>().map_err(|_| {
                    UsageError(alloc::format!("Error: argument \"{v}\" is wrong: Invalid \"mtu\" value"))
                })?;
                mtu = Some(n);
            }
            "dev" => {
                let Some(v) = it.next() else {
                    return err("Command line is not complete. Try option \"help\"");
                };
                set_once(&mut dev, v)?;
            }
            _ => set_once(&mut dev, word)?,
        }
    }
    let Some(dev) = dev else {
        return err("Not enough information: \"dev\" argument is required.");
    };
    if up.is_none() && mtu.is_none() {
        return err(alloc::format!("Nothing to set on \"{dev}\": give up, down or mtu N."));
    }
    Ok(IpCommand::LinkSet { dev, up, mtu })
}

/// The device name, given once; a second bare word is iproute2's "garbage".
fn set_once(dev: &mut Option<String>, word: &str) -> Result<(), UsageError> {
    if dev.is_some() {
        return err(alloc::format!("Error: either \"dev\" is duplicate, or \"{word}\" is a garbage."));
    }
    *dev = Some(word.to_string());
    Ok(())
}

/// `[dev] DEV` or nothing.
fn optional_dev(w: &[&str]) -> Result<Option<String>, UsageError> {
    match w {
        [] => Ok(None),
        ["dev"] => err("Command line is not complete. Try option \"help\""),
        ["dev", d] | [d] => Ok(Some(d.to_string())),
        ["dev", _, extra, ..] | [_, extra, ..] => {
            err(alloc::format!("Error: either \"dev\" is duplicate, or \"{extra}\" is a garbage."))
        }
    }
}

fn parse_addr(w: &[&str], family: Option<IpFamily>) -> Result<IpCommand, UsageError> {
    match w.split_first() {
        None => Ok(IpCommand::AddrShow { dev: None, family }),
        Some((&v, rest)) if is_show(v) => Ok(IpCommand::AddrShow { dev: optional_dev(rest)?, family }),
        Some((&v, rest)) if matches(v, "add") => {
            let (addr, dev) = addr_and_dev(rest)?;
            Ok(IpCommand::AddrAdd { dev, addr })
        }
        Some((&v, rest)) if matches(v, "delete") => {
            let (addr, dev) = addr_and_dev(rest)?;
            Ok(IpCommand::AddrDel { dev, addr })
        }
        Some((&v, _)) if matches(v, "help") => Ok(IpCommand::Help),
        Some((&v, _)) => err(alloc::format!("Command \"{v}\" is unknown, try \"ip address help\".")),
    }
}

/// `ADDR dev DEV` in any order, `local ADDR` accepted.
fn addr_and_dev(w: &[&str]) -> Result<(AddrSpec, String), UsageError> {
    let (mut addr, mut dev): (Option<AddrSpec>, Option<String>) = (None, None);
    let mut it = w.iter().copied();
    while let Some(word) = it.next() {
        let (is_dev, value) = match word {
            "dev" | "local" => match it.next() {
                Some(v) => (word == "dev", v),
                None => return err("Command line is not complete. Try option \"help\""),
            },
            _ => (false, word),
        };
        if is_dev {
            set_once(&mut dev, value)?;
        } else if addr.is_some() {
            return err(alloc::format!("Error: either \"local\" is duplicate, or \"{value}\" is a garbage."));
        } else {
            addr = Some(parse_addr_spec(value).map_err(|e| UsageError(alloc::format!("Error: {e}.")))?);
        }
    }
    match (addr, dev) {
        (Some(a), Some(d)) => Ok((a, d)),
        (None, _) => err("Not enough information: an address is required."),
        (_, None) => err("Not enough information: \"dev\" argument is required."),
    }
}

fn parse_neigh(w: &[&str], family: Option<IpFamily>) -> Result<IpCommand, UsageError> {
    match w.split_first() {
        None => Ok(IpCommand::NeighShow { dev: None, family }),
        Some((&v, rest)) if is_show(v) => match rest {
            [] => Ok(IpCommand::NeighShow { dev: None, family }),
            ["dev", d] => Ok(IpCommand::NeighShow { dev: Some(d.to_string()), family }),
            [first, ..] => err(alloc::format!("Error: either \"dev\" is duplicate, or \"{first}\" is a garbage.")),
        },
        Some((&v, _)) if matches(v, "help") => Ok(IpCommand::Help),
        Some((&v, _)) => err(alloc::format!("Command \"{v}\" is unknown, try \"ip neigh help\".")),
    }
}

/// Parsed `ping` arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PingArgs {
    pub dst: IpAddr,
    /// The device of `ADDR%DEV` (an IPv6 link-local address names no link).
    pub scope: Option<String>,
    /// `-c`: stop after this many requests; `None` runs until interrupted.
    pub count: Option<u32>,
    /// `-s`: ICMP payload bytes (56 by default, so replies are 64 bytes).
    pub size: usize,
    /// `-i`: time between requests (1 s by default).
    pub interval: Duration,
}

enum PingOpt {
    Count,
    Size,
    Interval,
}

/// The largest ICMP payload in one IPv4 packet: 65535 - 20 (IP) - 8 (ICMP).
pub const PING_MAX_SIZE: usize = 65507;

/// Parses the words after `ping` (a leading `ping` is skipped if present).
/// Options may come before or after the address, and may be glued (`-c3`).
pub fn parse_ping(words: &[&str]) -> Result<PingArgs, UsageError> {
    let mut w = words;
    if w.first() == Some(&"ping") {
        w = &w[1..];
    }
    let (mut dst, mut count, mut size, mut interval) = (None, None, 56usize, Duration::from_secs(1));
    let mut scope = None;
    let mut i = 0;
    while let Some(&word) = w.get(i) {
        i += 1;
        let Some(opt) = word.strip_prefix('-').filter(|o| !o.is_empty()) else {
            if dst.is_some() {
                return err(alloc::format!("ping: extra argument \"{word}\"\n{PING_USAGE}"));
            }
            let (addr, dev) = match word.split_once('%') {
                Some((a, d)) if !d.is_empty() => (a, Some(d.to_string())),
                _ => (word, None),
            };
            let a: IpAddr = addr.parse().map_err(|_| UsageError(alloc::format!("ping: {word}: invalid address")))?;
            if dev.is_some() && a.is_ipv4() {
                return err(alloc::format!("ping: {word}: invalid address"));
            }
            scope = dev;
            dst = Some(a);
            continue;
        };
        let (flag, glued) = opt.split_at(opt.chars().next().map_or(0, char::len_utf8));
        let opt = match flag {
            "c" => PingOpt::Count,
            "s" => PingOpt::Size,
            "i" => PingOpt::Interval,
            _ => return err(alloc::format!("ping: invalid option -- '{flag}'\n{PING_USAGE}")),
        };
        let value = if glued.is_empty() {
            i += 1;
            match w.get(i - 1) {
                Some(v) => *v,
                None => return err(alloc::format!("ping: option requires an argument -- '{flag}'\n{PING_USAGE}")),
            }
        } else {
            glued
        };
        let bad = || UsageError(alloc::format!("ping: invalid argument: '{value}'"));
        match opt {
            PingOpt::Count => count = Some(value.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(bad)?),
            PingOpt::Size => size = value.parse::<usize>().ok().filter(|&n| n <= PING_MAX_SIZE).ok_or_else(bad)?,
            PingOpt::Interval => {
                interval = Duration::from_millis(value.parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(bad)?)
            }
        }
    }
    let Some(dst) = dst else {
        return err(alloc::format!("ping: usage error: Destination address required\n{PING_USAGE}"));
    };
    Ok(PingArgs { dst, scope, count, size, interval })
}

/// Splits a console line into words (for callers and tests that start from text).
pub fn words(line: &str) -> Vec<&str> {
    line.split_ascii_whitespace().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use core::net::Ipv4Addr;
    use proptest::strategy::Strategy;

    fn ip(line: &str) -> Result<IpCommand, UsageError> {
        parse_ip(&words(line))
    }
    fn msg(line: &str) -> String {
        ip(line).unwrap_err().0
    }
    fn s(x: &str) -> String {
        x.to_string()
    }

    #[test]
    fn link_commands() {
        assert_eq!(ip("ip link show"), Ok(IpCommand::LinkShow { dev: None, stats: false }));
        assert_eq!(ip("link"), Ok(IpCommand::LinkShow { dev: None, stats: false }));
        assert_eq!(ip("ip l sh eth0"), Ok(IpCommand::LinkShow { dev: Some(s("eth0")), stats: false }));
        assert_eq!(ip("ip link show dev eth0"), Ok(IpCommand::LinkShow { dev: Some(s("eth0")), stats: false }));
        assert_eq!(ip("ip -s link"), Ok(IpCommand::LinkShow { dev: None, stats: true }));
        assert_eq!(ip("ip -stats link show eth1"), Ok(IpCommand::LinkShow { dev: Some(s("eth1")), stats: true }));
        assert_eq!(ip("ip link set eth0 up"), Ok(IpCommand::LinkSet { dev: s("eth0"), up: Some(true), mtu: None }));
        assert_eq!(
            ip("ip link set dev eth0 down"),
            Ok(IpCommand::LinkSet { dev: s("eth0"), up: Some(false), mtu: None })
        );
        assert_eq!(
            ip("ip link set eth0 mtu 9000 up"),
            Ok(IpCommand::LinkSet { dev: s("eth0"), up: Some(true), mtu: Some(9000) })
        );
    }

    #[test]
    fn link_errors() {
        assert_eq!(msg("ip link set up"), "Not enough information: \"dev\" argument is required.");
        assert_eq!(msg("ip link set eth0 mtu abc"), "Error: argument \"abc\" is wrong: Invalid \"mtu\" value");
        assert_eq!(msg("ip link set eth0 mtu"), "Command line is not complete. Try option \"help\"");
        assert_eq!(msg("ip link set eth0 eth1 up"), "Error: either \"dev\" is duplicate, or \"eth1\" is a garbage.");
        assert_eq!(msg("ip link set eth0"), "Nothing to set on \"eth0\": give up, down or mtu N.");
        assert_eq!(msg("ip link show eth0 extra"), "Error: either \"dev\" is duplicate, or \"extra\" is a garbage.");
        assert_eq!(msg("ip link frob"), "Command \"frob\" is unknown, try \"ip link help\".");
        assert_eq!(msg("ip route"), "Object \"route\" is unknown, try \"ip help\".");
        assert_eq!(msg("ip -x link"), "Option \"-x\" is unknown, try \"ip -help\".");
        assert_eq!(msg("ip"), IP_USAGE);
    }

    #[test]
    fn addr_commands() {
        let spec = parse_addr_spec("10.0.0.2/24").unwrap();
        assert_eq!(ip("ip addr add 10.0.0.2/24 dev eth0"), Ok(IpCommand::AddrAdd { dev: s("eth0"), addr: spec }));
        assert_eq!(ip("ip a add dev eth0 10.0.0.2/24"), Ok(IpCommand::AddrAdd { dev: s("eth0"), addr: spec }));
        assert_eq!(
            ip("ip address add local 10.0.0.2/24 dev eth0"),
            Ok(IpCommand::AddrAdd { dev: s("eth0"), addr: spec })
        );
        assert_eq!(ip("ip addr del 10.0.0.2/24 dev eth0"), Ok(IpCommand::AddrDel { dev: s("eth0"), addr: spec }));
        let v6 = parse_addr_spec("fe80::1/64").unwrap();
        assert_eq!(ip("ip addr delete fe80::1/64 dev eth0"), Ok(IpCommand::AddrDel { dev: s("eth0"), addr: v6 }));
        assert_eq!(ip("ip addr"), Ok(IpCommand::AddrShow { dev: None, family: None }));
        assert_eq!(ip("ip a s"), Ok(IpCommand::AddrShow { dev: None, family: None }));
        assert_eq!(ip("ip addr show dev eth0"), Ok(IpCommand::AddrShow { dev: Some(s("eth0")), family: None }));
        assert_eq!(ip("ip addr show eth0"), Ok(IpCommand::AddrShow { dev: Some(s("eth0")), family: None }));
    }

    #[test]
    fn addr_errors() {
        assert_eq!(msg("ip addr add 10.0.0.300/24 dev eth0"), "Error: invalid address \"10.0.0.300/24\".");
        assert_eq!(msg("ip addr add 10.0.0.2/33 dev eth0"), "Error: prefix length 33 out of range (0-32).");
        assert_eq!(msg("ip addr add 10.0.0.2/24"), "Not enough information: \"dev\" argument is required.");
        assert_eq!(msg("ip addr add dev eth0"), "Not enough information: an address is required.");
        assert_eq!(
            msg("ip addr add 10.0.0.2/24 10.0.0.3/24 dev eth0"),
            "Error: either \"local\" is duplicate, or \"10.0.0.3/24\" is a garbage."
        );
        assert_eq!(msg("ip addr add 10.0.0.2/24 dev"), "Command line is not complete. Try option \"help\"");
        assert_eq!(msg("ip addr flush"), "Command \"flush\" is unknown, try \"ip address help\".");
    }

    #[test]
    fn family_options() {
        let v6 = Some(IpFamily::V6);
        assert_eq!(ip("ip -6 addr"), Ok(IpCommand::AddrShow { dev: None, family: v6 }));
        assert_eq!(ip("ip -6 a s eth0"), Ok(IpCommand::AddrShow { dev: Some(s("eth0")), family: v6 }));
        assert_eq!(ip("ip -f inet6 neigh"), Ok(IpCommand::NeighShow { dev: None, family: v6 }));
        assert_eq!(
            ip("ip -4 n show dev eth0"),
            Ok(IpCommand::NeighShow { dev: Some(s("eth0")), family: Some(IpFamily::V4) })
        );
        assert_eq!(ip("ip -6 -s link"), Ok(IpCommand::LinkShow { dev: None, stats: true }));
        assert_eq!(msg("ip -f ipx addr"), "Error: argument \"ipx\" is wrong: invalid protocol family");
        assert!(IpFamily::V4.shown_by(None) && IpFamily::V6.shown_by(v6) && !IpFamily::V4.shown_by(v6));
    }

    #[test]
    fn neigh_and_help() {
        assert_eq!(ip("ip neigh show"), Ok(IpCommand::NeighShow { dev: None, family: None }));
        assert_eq!(ip("ip n"), Ok(IpCommand::NeighShow { dev: None, family: None }));
        assert_eq!(ip("ip neighbor show dev eth0"), Ok(IpCommand::NeighShow { dev: Some(s("eth0")), family: None }));
        assert!(ip("ip neigh show eth0").is_err());
        assert_eq!(ip("ip help"), Ok(IpCommand::Help));
        assert_eq!(ip("ip link help"), Ok(IpCommand::Help));
        assert_eq!(ip("ip -h"), Ok(IpCommand::Help));
    }

    #[test]
    fn ping_arguments() {
        let dst = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let p = |l: &str| parse_ping(&words(l));
        assert_eq!(
            p("ping 10.0.0.2"),
            Ok(PingArgs { dst, scope: None, count: None, size: 56, interval: Duration::from_secs(1) })
        );
        assert_eq!(
            p("10.0.0.2 -c 3 -s 1000 -i 200"),
            Ok(PingArgs { dst, scope: None, count: Some(3), size: 1000, interval: Duration::from_millis(200) })
        );
        let ll = p("ping fe80::2%eth0 -c 1").unwrap();
        assert_eq!((ll.dst, ll.scope.as_deref()), ("fe80::2".parse::<IpAddr>().unwrap(), Some("eth0")));
        assert!(p("ping 10.0.0.2%eth0").is_err());
        assert_eq!(p("-c3 -s0 10.0.0.2").unwrap().count, Some(3));
        assert_eq!(p("ping fe80::1 -c 1").unwrap().dst, "fe80::1".parse::<IpAddr>().unwrap());
        let e = |l: &str| p(l).unwrap_err().0;
        assert_eq!(e("ping 10.0.0.2 -c 0"), "ping: invalid argument: '0'");
        assert_eq!(e("ping 10.0.0.2 -c x"), "ping: invalid argument: 'x'");
        assert_eq!(e("ping 10.0.0.2 -s 65508"), "ping: invalid argument: '65508'");
        assert_eq!(e("ping 10.0.0.2 -i 0"), "ping: invalid argument: '0'");
        assert!(e("ping 10.0.0.2 -c").starts_with("ping: option requires an argument -- 'c'"));
        assert!(e("ping 10.0.0.2 -q").starts_with("ping: invalid option -- 'q'"));
        assert!(e("ping").starts_with("ping: usage error: Destination address required"));
        assert_eq!(e("ping 10.0.0.300"), "ping: 10.0.0.300: invalid address");
        assert!(e("ping 10.0.0.2 10.0.0.3").starts_with("ping: extra argument \"10.0.0.3\""));
        assert!(e("ping 10.0.0.2 -").starts_with("ping: extra argument \"-\""));
        assert!(p("ping -é 1 10.0.0.2").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_words_parse_or_fail_cleanly(ws in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::sample::select(vec![
                    "ip", "-s", "link", "addr", "a", "neigh", "show", "set", "add", "del", "dev", "eth0",
                    "up", "down", "mtu", "9000", "10.0.0.2/24", "fe80::1/64", "local", "-c", "-s", "-i", "3", "ping",
                ]).prop_map(String::from),
                ".{0,12}",
            ],
            0..8,
        )) {
            let refs: Vec<&str> = ws.iter().map(String::as_str).collect();
            let _ = parse_ip(&refs);
            let _ = parse_ping(&refs);
        }
    }
}
