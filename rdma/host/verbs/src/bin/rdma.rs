//! `rdma`: iproute2's RDMA tool for the appliance, same syntax and output
//! shape: `link [show|add|delete]`, `dev [show]`, `resource [show]`,
//! `statistic [show]`. Objects and keywords may be abbreviated, as in
//! iproute2 (`rdma l s`, `rdma res`).

use clap::Parser;
use verbs::Context;
use verbs::cli::{RingArgs, fail};
use verbs_ring::show;

#[derive(Parser)]
#[command(name = "rdma", about = "RDMA tool for the appliance (iproute2 syntax)")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// OBJECT [COMMAND [ARGS]]: link | dev | resource | statistic
    ///
    /// Plain positionals, so `--ring` counts wherever it stands (`rdma link show
    /// --ring FILE`) and an unknown option is refused; no keyword of ours starts
    /// with a hyphen.
    #[arg(value_name = "OBJECT")]
    words: Vec<String>,
}

/// Whether `word` abbreviates `full` (iproute2's `matches`).
fn is(word: &str, full: &str) -> bool {
    !word.is_empty() && full.starts_with(word)
}

fn usage() -> ! {
    eprintln!(
        "Usage: rdma [--ring PATH] OBJECT {{ COMMAND | help }}\n\
         where  OBJECT := {{ dev | link | resource | statistic }}\n\
         \x20      rdma link [show [DEV[/PORT]]]\n\
         \x20      rdma link add NAME type TYPE netdev NETDEV\n\
         \x20      rdma link delete NAME\n\
         \x20      rdma dev [show [DEV]]\n\
         \x20      rdma resource [show [DEV]]\n\
         \x20      rdma statistic [show [link DEV[/PORT]]]"
    );
    verbs::cli::exit(1)
}

/// `DEV` or `DEV/PORT`.
fn dev_filter(arg: Option<&String>) -> (Option<String>, Option<u32>) {
    match arg {
        None => (None, None),
        Some(a) => match a.split_once('/') {
            Some((d, p)) => (Some(d.to_string()), p.parse().ok()),
            None => (Some(a.clone()), None),
        },
    }
}

fn main() {
    let cli = Cli::parse();
    let w = &cli.words;
    let Some(object) = w.first() else { usage() };
    if is(object, "help") {
        usage();
    }
    let ctx = cli.ring.open().unwrap_or_else(|e| fail("rdma", &e));
    let cmd = w.get(1).map(String::as_str).unwrap_or("show");
    let rest = w.get(2..).unwrap_or(&[]);
    let r = if is(object, "link") {
        link(&ctx, cmd, rest)
    } else if is(object, "dev") {
        if !is(cmd, "show") && !is(cmd, "list") {
            usage();
        }
        dev_show(&ctx, rest.first())
    } else if is(object, "resource") {
        if !is(cmd, "show") && !is(cmd, "list") {
            usage();
        }
        resource_show(&ctx, rest.first())
    } else if is(object, "statistic") {
        if !is(cmd, "show") && !is(cmd, "list") {
            usage();
        }
        let target = if rest.first().is_some_and(|k| is(k, "link")) { rest.get(1) } else { rest.first() };
        statistic_show(&ctx, target)
    } else {
        eprintln!("Object \"{object}\" is unknown, try \"rdma help\".");
        verbs::cli::exit(1)
    };
    if let Err(e) = r {
        fail("rdma", &e)
    }
}

fn link(ctx: &Context, cmd: &str, rest: &[String]) -> verbs::Result<()> {
    if is(cmd, "show") || is(cmd, "list") {
        let (dev, port) = dev_filter(rest.first());
        let mut found = false;
        for l in ctx.links()? {
            if dev.as_ref().is_some_and(|d| *d != l.name) || port.is_some_and(|p| p != l.port) {
                continue;
            }
            found = true;
            let mut line = String::new();
            // Writing into a String cannot fail.
            let _ = show::rdma_link::write(&mut line, &l.info);
            print!("{line}");
        }
        if let (Some(d), false) = (dev, found) {
            return Err(verbs::Error::NoDevice(d));
        }
        Ok(())
    } else if is(cmd, "add") {
        // NAME type TYPE netdev NETDEV
        let mut name = None;
        let (mut ty, mut netdev) = (None, None);
        let mut it = rest.iter();
        while let Some(word) = it.next() {
            if word == "type" {
                ty = it.next();
            } else if word == "netdev" {
                netdev = it.next();
            } else if name.is_none() {
                name = Some(word);
            } else {
                usage();
            }
        }
        let (Some(name), Some(ty), Some(netdev)) = (name, ty, netdev) else { usage() };
        ctx.link_add(name, ty, netdev).map(|_| ()).map_err(refused)
    } else if is(cmd, "delete") || cmd == "del" {
        let Some(name) = rest.first() else { usage() };
        ctx.link_del(name).map_err(refused)
    } else {
        usage()
    }
}

/// A `rdma link` request the firmware refused: iproute2's line for the
/// errno netlink would have carried (`error: File exists`), and exit 1.
fn refused(e: verbs::Error) -> verbs::Error {
    if let Some(status) = e.status() {
        eprintln!("error: {}", show::words::strerror(i32::from(status.0)));
        verbs::cli::exit(1)
    }
    e
}

fn dev_show(ctx: &Context, filter: Option<&String>) -> verbs::Result<()> {
    let (name, _) = dev_filter(filter);
    let devs = match &name {
        Some(n) => vec![ctx.device(Some(n))?],
        None => ctx.devices()?,
    };
    let mut out = String::new();
    for d in devs {
        // Writing into a String cannot fail.
        let _ = show::rdma_dev::write(&mut out, &d.link().info);
    }
    print!("{out}");
    Ok(())
}

fn resource_show(ctx: &Context, filter: Option<&String>) -> verbs::Result<()> {
    let (name, _) = dev_filter(filter);
    let devs = match &name {
        Some(n) => vec![ctx.device(Some(n))?],
        None => ctx.devices()?,
    };
    for d in devs {
        let r = d.resource_counts()?;
        let mut line = String::new();
        let _ = show::rdma_res::write(&mut line, d.index(), d.name(), &r);
        print!("{line}");
    }
    Ok(())
}

fn statistic_show(ctx: &Context, filter: Option<&String>) -> verbs::Result<()> {
    let (name, port) = dev_filter(filter);
    let devs = match &name {
        Some(n) => vec![ctx.device(Some(n))?],
        None => ctx.devices()?,
    };
    for d in devs {
        let p = port.unwrap_or(d.link().port).clamp(1, 255) as u8;
        let values: Vec<u64> = d.counters(p)?.into_iter().map(|(_, v)| v).collect();
        let mut line = String::new();
        let _ = verbs_ring::show::rdma_stat::write(&mut line, d.name(), u32::from(p), &values);
        print!("{line}");
    }
    Ok(())
}
