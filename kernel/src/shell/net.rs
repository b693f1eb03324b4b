//! Network commands: `ip` (iproute2 shapes) and `ping`.

use super::table::{CommandError, CommandResult, Context};
use crate::net::{Net, ping};
use crate::{println, time};
use alloc::format;
use alloc::string::ToString;
use core::str::FromStr;
use smoltcp::wire::{IpAddress, IpCidr, Ipv4Address};

fn with_net<R>(
    ctx: &mut Context,
    f: impl FnOnce(&mut Net, &mut Context) -> Result<R, CommandError>,
) -> Result<R, CommandError> {
    let net = ctx.net.clone();
    let mut guard = net.borrow_mut();
    match guard.as_mut() {
        Some(n) => f(n, ctx),
        None => Err(CommandError::Invalid("no network device".to_string())),
    }
}

fn check_dev(net: &Net, dev: &str) -> CommandResult {
    if dev == net.name { Ok(()) } else { Err(CommandError::Invalid(format!("Cannot find device \"{dev}\""))) }
}

fn parse_cidr(s: &str) -> Result<IpCidr, CommandError> {
    IpCidr::from_str(s).map_err(|_| CommandError::Invalid(format!("invalid address \"{s}\" (expected a.b.c.d/len)")))
}

fn show_link(net: &Net, stats: bool) {
    let m = drivers::nic::Nic::mac(&net.nic);
    let mac = format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
    println!("2: {}: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu {} state UP", net.name, drivers::nic::Nic::mtu(&net.nic));
    println!("    link/ether {mac} brd ff:ff:ff:ff:ff:ff");
    if stats {
        let s = net.nic.stats();
        println!("    RX:  packets  errors  to_rdma  rdma_dropped");
        println!("    {:>9} {:>7} {:>8} {:>13}", s.rx_frames, s.rx_errors, net.steer.to_rdma, net.rdma_dropped());
        println!("    TX:  packets  dropped");
        println!("    {:>9} {:>8}", s.tx_frames, net.steer.tx_dropped + s.tx_queue_full);
    }
}

pub fn ip(ctx: &mut Context, args: &[&str]) -> CommandResult {
    with_net(ctx, |net, _| match args {
        ["link"] | ["link", "show"] => {
            show_link(net, false);
            Ok(())
        }
        ["-s", "link"] | ["-s", "link", "show"] => {
            show_link(net, true);
            Ok(())
        }
        ["addr"] | ["addr", "show"] | ["a"] => {
            show_link(net, false);
            for cidr in net.iface.ip_addrs() {
                match cidr {
                    IpCidr::Ipv4(c) => println!("    inet {c} scope global {}", net.name),
                    IpCidr::Ipv6(c) => println!("    inet6 {c} scope global"),
                }
            }
            Ok(())
        }
        ["addr", op @ ("add" | "del"), cidr, "dev", dev] => {
            check_dev(net, dev)?;
            let cidr = parse_cidr(cidr)?;
            let r = if *op == "add" { net.add_address(cidr) } else { net.del_address(cidr) };
            r.map_err(|e| CommandError::Invalid(format!("{cidr} on {dev}: {e}")))
        }
        _ => Err(CommandError::Usage),
    })
}

pub fn ping(ctx: &mut Context, args: &[&str]) -> CommandResult {
    let Some((target, mut rest)) = args.split_first() else { return Err(CommandError::Usage) };
    let target = Ipv4Address::from_str(target)
        .map_err(|_| CommandError::Invalid(format!("unknown host {target} (an IPv4 address is needed)")))?;
    let (mut count, mut interval_ms, mut size) = (4u32, 1000u64, 56usize);
    while let [flag, value, tail @ ..] = rest {
        let n: u64 = value.parse().map_err(|_| CommandError::Invalid(format!("bad value '{value}' for {flag}")))?;
        match *flag {
            "-c" if (1..=10_000).contains(&n) => count = n as u32,
            "-i" if (10..=60_000).contains(&n) => interval_ms = n,
            "-s" if n <= 1400 => size = n as usize,
            "-c" | "-i" | "-s" => return Err(CommandError::Invalid(format!("{flag} {value} is out of range"))),
            _ => return Err(CommandError::Usage),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(CommandError::Usage);
    }
    with_net(ctx, |net, ctx| {
        if net.ping.is_some() {
            return Err(CommandError::Invalid("a ping is already running".to_string()));
        }
        if !net.iface.ip_addrs().iter().any(|a| matches!(a.address(), IpAddress::Ipv4(_))) {
            return Err(CommandError::Invalid(format!(
                "connect: Network is unreachable ({} has no IPv4 address)",
                net.name
            )));
        }
        ping::start(net, target, count, time::Duration::from_millis(interval_ms), size, time::now(), ctx.ready.clone());
        Ok(())
    })?;
    Ok(())
}
