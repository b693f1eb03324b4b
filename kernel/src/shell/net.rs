//! Network commands: `ip` (iproute2 shapes), `ping`, `netbench`, and the RDMA
//! tools that read the core (`rdma`, `ibv_devinfo`, `ibv_devices`, `show_gids`).

use super::table::{CommandError, CommandResult, Context};
use crate::jobs::{netbench, ping};
use crate::net::{Net, discard};
use crate::{print, println, time};
use alloc::format;
use alloc::string::{String, ToString};
use core::net::IpAddr;
use knet::cmd::IpFamily;
use knet::cmd::{IP_USAGE, IpCommand, parse_ip, parse_ping};
use knet::format::{AddrShow, LinkShow, NeighShow};
use knet::neigh::Family;

fn with_net<R>(
    ctx: &mut Context,
    f: impl FnOnce(&mut Net, &mut Context) -> Result<R, CommandError>,
) -> Result<R, CommandError> {
    let Some(net) = ctx.net.take() else { return Err(CommandError::Invalid("no network device".to_string())) };
    let result = f(&mut *net, ctx);
    ctx.net = Some(net);
    result
}

/// A refusal as one line; iproute2's own "Error: " lead-in gives way to the
/// shell's `error: <command>: `.
fn fail(e: impl ToString) -> CommandError {
    let msg = e.to_string();
    CommandError::Invalid(msg.strip_prefix("Error: ").map_or_else(|| msg.clone(), ToString::to_string))
}

pub fn ip(ctx: &mut Context, args: &[&str]) -> CommandResult {
    let cmd = parse_ip(args).map_err(fail)?;
    with_net(ctx, |net, _| {
        let dev_filter = |dev: &Option<String>| -> Result<(), CommandError> {
            match dev {
                Some(d) => net.netdevs.dev(d).map(|_| ()).map_err(fail),
                None => Ok(()),
            }
        };
        match cmd {
            IpCommand::Help => println!("{IP_USAGE}"),
            IpCommand::LinkShow { dev, stats } => {
                dev_filter(&dev)?;
                for d in net.netdevs.iter().filter(|d| dev.as_deref().is_none_or(|n| n == d.name())) {
                    print!("{}", LinkShow { dev: d, stats });
                }
            }
            IpCommand::AddrShow { dev, family } => {
                dev_filter(&dev)?;
                for d in net.netdevs.iter().filter(|d| dev.as_deref().is_none_or(|n| n == d.name())) {
                    print!("{}", AddrShow { dev: d, family });
                }
            }
            IpCommand::NeighShow { dev, family } => {
                dev_filter(&dev)?;
                let links = || {
                    net.links.iter().filter(|l| {
                        dev.is_none()
                            || net.netdevs.dev(dev.as_deref().unwrap_or("")).is_ok_and(|d| d.ifindex() == l.ifindex)
                    })
                };
                // The kernel dumps arp_tbl, then nd_tbl.
                if IpFamily::V4.shown_by(family) {
                    links().for_each(|l| print!("{}", NeighShow(&l.neigh)));
                }
                if IpFamily::V6.shown_by(family) {
                    links().for_each(|l| print!("{}", NeighShow(&l.nd)));
                }
            }
            IpCommand::LinkSet { dev, up, mtu } => {
                if let Some(mtu) = mtu {
                    net.netdevs.set_mtu(&dev, mtu).map_err(fail)?;
                }
                if let Some(up) = up {
                    net.netdevs.set_up(&dev, up).map_err(fail)?;
                }
            }
            IpCommand::AddrAdd { dev, addr } => {
                net.netdevs.add_addr(&dev, addr).map_err(fail)?;
                net.sync_all_addresses();
            }
            IpCommand::AddrDel { dev, addr } => {
                net.netdevs.del_addr(&dev, addr).map_err(fail)?;
                net.sync_all_addresses();
            }
        }
        // Deliver the events now, so their log lines come before the prompt.
        net.netdevs.process_events();
        net.rdma.process_events();
        Ok(())
    })
}

pub fn ping(ctx: &mut Context, args: &[&str]) -> CommandResult {
    let args = parse_ping(args).map_err(fail)?;
    if args.size > 8192 {
        return Err(fail(format!("packet size {} is too large (at most 8192)", args.size)));
    }
    with_net(ctx, |net, ctx| {
        if ctx.jobs.ping.is_some() {
            return Err(fail("a ping is already running"));
        }
        let (link, src) = match args.dst {
            IpAddr::V4(dst) => {
                let link = net.link_for(dst);
                (link, net.dev(link).and_then(|d| d.ipv4().first().map(|c| IpAddr::V4(c.address()))))
            }
            IpAddr::V6(dst) => {
                let scope = match args.scope.as_deref() {
                    Some(name) => Some(net.netdevs.dev(name).map_err(fail)?.ifindex()),
                    None => None,
                };
                let link = net.link_for6(dst, scope);
                let cidrs: alloc::vec::Vec<_> =
                    net.dev(link).map(|d| d.ipv6().iter().map(|a| a.cidr).collect()).unwrap_or_default();
                (link, knet::neigh::Nd::source_for(&cidrs, dst).map(IpAddr::V6))
            }
        };
        let Some(src) = src else {
            let name = net.name(link);
            return Err(fail(format!("connect: Network is unreachable ({name} has no address to ping from)")));
        };
        let count = args.count.unwrap_or(ping::DEFAULT_COUNT);
        let (interval, size, ready) = (args.interval, args.size, ctx.ready.clone());
        ping::start(&mut ctx.jobs.ping, net, link, src, args.dst, count, interval, size, time::now(), ready);
        Ok(())
    })
}

pub fn netbench(ctx: &mut Context, args: &[&str]) -> CommandResult {
    with_net(ctx, |net, ctx| match args {
        ["send", dst, len, ms, mode @ ..] if mode.len() <= 1 => {
            let mode = match mode.first() {
                None => netbench::Mode::Copy,
                Some(m) => netbench::Mode::parse(m)
                    .ok_or_else(|| fail(format!("'{m}' is not a mode (copy, prebuilt, icrc)")))?,
            };
            let dst = dst.parse().map_err(|_| fail(format!("'{dst}' is not an IPv4 address")))?;
            let link = net.link_for(dst);
            let max = net.links.get(link).map_or(0, |l| drivers::nic::Nic::max_frame_len(&l.nic));
            let len: usize = len
                .parse()
                .ok()
                .filter(|l| (60..=max).contains(l))
                .ok_or_else(|| fail(format!("frame length '{len}' is not in 60..={max}")))?;
            let ms: u64 = ms
                .parse()
                .ok()
                .filter(|m| (1..=60_000).contains(m))
                .ok_or_else(|| fail(format!("'{ms}' ms is not in 1..=60000")))?;
            if ctx.jobs.netbench.running() {
                return Err(fail("a send is already running"));
            }
            let duration = time::Duration::from_millis(ms);
            ctx.jobs.netbench.start(link, dst, len, mode, duration, time::now(), ctx.ready.clone());
            Ok(())
        }
        ["rx"] => {
            let rx = &net.discard;
            let span = rx.first.map_or(0, |f| rx.last.saturating_since(f).as_micros());
            let (fps, gbps) = netbench::rate(rx.frames.saturating_sub(1), rx.bytes, span);
            println!(
                "netbench rx: {} frames, {} bytes over {span} us: {fps} frames/s, {gbps:.3} Gb/s",
                rx.frames, rx.bytes
            );
            Ok(())
        }
        ["reset"] => {
            net.discard = discard::RxCount::default();
            Ok(())
        }
        _ => Err(CommandError::Usage),
    })
}

/// `rdma ...`, `ibv_devinfo`, `ibv_devices`, `show_gids`: the RDMA core's tools.
pub fn rdma_tool(ctx: &mut Context, words: &[&str]) -> CommandResult {
    // `rdma resource` lists the ring server's objects: a snapshot taken
    // before the core is lent to the command (without a ring, none).
    let listing = words.first() == Some(&"rdma");
    let res = match (listing, ctx.verbs.as_deref_mut(), ctx.net.as_deref_mut()) {
        (true, Some(verbs), Some(net)) => verbs.resources(net),
        _ => rdma::core::console::Resources::default(),
    };
    with_net(ctx, |net, _| {
        let mut out = String::new();
        let provider = crate::net::rdma::Provider(&net.netdevs);
        let result = rdma::core::console::run_with(&mut net.rdma.core, &provider, &res, words, &mut out);
        print!("{out}");
        if !out.is_empty() && !out.ends_with('\n') {
            println!();
        }
        net.rdma.process_events();
        match result {
            // A refused `rdma link` request: iproute2's own line.
            Err(e @ rdma::core::Error::Netlink(_)) => {
                println!("error: {e}");
                Ok(())
            }
            r => r.map_err(fail),
        }
    })
}

/// `ibv_rc_pingpong [options] [server]`, with rdma-core's options and defaults
/// (except `-g`, which RoCE needs: 1, the IPv4-mapped GID, when not given).
pub fn rc_pingpong(ctx: &mut Context, args: &[&str]) -> CommandResult {
    pingpong(ctx, args, rdma::rxe::qp_state::QpType::Rc)
}

/// `ibv_uc_pingpong`: the same over an unreliable connection.
pub fn uc_pingpong(ctx: &mut Context, args: &[&str]) -> CommandResult {
    pingpong(ctx, args, rdma::rxe::qp_state::QpType::Uc)
}

/// `ibv_ud_pingpong`: datagrams (default size 2048, at most one MTU).
pub fn ud_pingpong(ctx: &mut Context, args: &[&str]) -> CommandResult {
    pingpong(ctx, args, rdma::rxe::qp_state::QpType::Ud)
}

fn pingpong(ctx: &mut Context, args: &[&str], qp_type: rdma::rxe::qp_state::QpType) -> CommandResult {
    let ud = qp_type == rdma::rxe::qp_state::QpType::Ud;
    use crate::jobs::pingpong::{Args, DEFAULT_PORT, start};
    use rdma::core::port::IbMtu;
    let mut a = Args {
        server: None,
        port: DEFAULT_PORT,
        size: if ud { 2048 } else { 4096 },
        iters: 1000,
        rx_depth: 500,
        mtu: IbMtu::Mtu1024,
        gid_index: 1,
        qp_type,
        dev: None,
        chk: false,
    };
    let mut rest = args;
    while let Some((&word, tail)) = rest.split_first() {
        rest = tail;
        let mut value = || -> Result<u64, CommandError> {
            let (&v, tail) = rest.split_first().ok_or(CommandError::Usage)?;
            rest = tail;
            v.parse().map_err(|_| fail(format!("bad value '{v}' for {word}")))
        };
        match word {
            "-p" => a.port = u16::try_from(value()?).map_err(|_| fail("port out of range"))?,
            "-s" => a.size = u32::try_from(value()?).map_err(|_| fail("size out of range"))?,
            "-n" => {
                a.iters = u32::try_from(value()?).ok().filter(|&n| n > 0).ok_or_else(|| fail("iters out of range"))?
            }
            "-r" => {
                a.rx_depth = u32::try_from(value()?)
                    .ok()
                    .filter(|r| (1..=4096).contains(r))
                    .ok_or_else(|| fail("rx depth out of range"))?
            }
            "-m" => {
                let m = value()?;
                a.mtu = u32::try_from(m)
                    .ok()
                    .and_then(IbMtu::fitting)
                    .filter(|f| u64::from(f.bytes()) == m)
                    .ok_or_else(|| fail(format!("invalid MTU {m}")))?;
            }
            "-g" => a.gid_index = u8::try_from(value()?).map_err(|_| fail("GID index out of range"))?,
            "-i" => {
                if value()? != 1 {
                    return Err(fail("the device has one port: 1"));
                }
            }
            "-l" => {
                value()?; // service level: RoCE carries no SL; accepted like rxe does
            }
            "-d" => {
                let (&dev, tail) = rest.split_first().ok_or(CommandError::Usage)?;
                rest = tail;
                let index = with_net(ctx, |net, _| Ok(net.rdma.core.device_by_name(dev).map(|d| d.index())))?;
                a.dev = Some(index.ok_or_else(|| fail(format!("IB device {dev} not found")))?);
            }
            "-c" => a.chk = true,
            "-e" => {} // completions are polled
            w if w.starts_with('-') => return Err(CommandError::Usage),
            server => {
                a.server = Some(server.parse().map_err(|_| fail(format!("'{server}' is not an IPv4 address")))?);
            }
        }
    }
    if ud {
        // ud_pingpong takes the port's active MTU: the link decides.
        let mtu = with_net(ctx, |net, _| {
            let dev = a.dev.and_then(|i| net.rdma.core.device(i)).or_else(|| net.rdma.core.devices().next());
            Ok(dev.and_then(|d| d.port(1)).map(|p| p.active_mtu()))
        })?;
        a.mtu = mtu.unwrap_or(IbMtu::Mtu1024);
    }
    with_net(ctx, |net, ctx| start(&mut ctx.jobs.pingpong, net, a, time::now(), ctx.ready.clone()).map_err(fail))
}

/// `perf [reset]`: where the time went since the last reset (halted, in the
/// network task, per frame received and sent, in the verbs pump) and what the
/// NIC and the transport counted meanwhile (non-zero counters only).
pub fn perf(ctx: &mut Context, args: &[&str]) -> CommandResult {
    use crate::prof;
    match args {
        ["reset"] => with_net(ctx, |net, _| {
            prof::reset();
            net.perf_base = net.perf_counters();
            Ok(())
        }),
        [] => with_net(ctx, |net, _| {
            let hz = time::tsc_hz().max(1) as f64;
            let wall = prof::elapsed().max(1) as f64;
            println!("{:.1} ms since reset", wall * 1e3 / hz);
            println!("{:<18} {:>9} {:>10} {:>6} {:>9}", "span", "count", "ms", "share", "us each");
            for s in prof::ALL {
                let (c, n) = (s.cycles() as f64, s.count());
                let each = if n == 0 { 0.0 } else { c * 1e6 / hz / n as f64 };
                println!("{:<18} {n:>9} {:>10.1} {:>5.1}% {each:>9.2}", s.name, c * 1e3 / hz, c * 100.0 / wall);
            }
            let base = &net.perf_base;
            for (i, (name, n)) in net.perf_counters().into_iter().enumerate() {
                let before = base.get(i).filter(|(b, _)| *b == name).map_or(0, |(_, v)| *v);
                let d = n.saturating_sub(before);
                if d > 0 {
                    println!("{name} {d}");
                }
            }
            Ok(())
        }),
        _ => Err(CommandError::Usage),
    }
}
