//! `rdma`: iproute2's RDMA tool for the appliance, same syntax and output
//! shape: `link [show|add|delete]`, `dev [show]`, `resource [show]
//! [qp|cq|mr|pd|cm_id|ctx|srq]`, `statistic [show]`, `system [show]`, with `-j` (JSON),
//! `-p` (pretty JSON) and `-d` (details). Objects and keywords may be
//! abbreviated, as in iproute2 (`rdma l s`, `rdma res`).

use clap::Parser;
use verbs::Context;
use verbs::cli::{RingArgs, fail};
use verbs_ring::cmd::res_kind;
use verbs_ring::show;

#[derive(Parser)]
#[command(name = "rdma", about = "RDMA tool for the appliance (iproute2 syntax)")]
struct Cli {
    #[command(flatten)]
    ring: RingArgs,
    /// JSON output (iproute2's keys and types).
    #[arg(short = 'j', long = "json")]
    json: bool,
    /// Pretty JSON (with -j).
    #[arg(short = 'p', long = "pretty")]
    pretty: bool,
    /// More details (`netdev_index`, a device's caps).
    #[arg(short = 'd', long = "details")]
    details: bool,
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
        "Usage: rdma [--ring PATH] [-j] [-p] [-d] OBJECT {{ COMMAND | help }}\n\
         where  OBJECT := {{ dev | link | resource | statistic | system }}\n\
         \x20      rdma link [show [DEV[/PORT]]]\n\
         \x20      rdma link add NAME type TYPE netdev NETDEV\n\
         \x20      rdma link delete NAME\n\
         \x20      rdma dev [show [DEV]]\n\
         \x20      rdma resource [show [DEV]]\n\
         \x20      rdma resource show {{ qp | cq | mr | pd | cm_id }} [link DEV[/PORT] | dev DEV] [FILTER VALUE]...\n\
         \x20      rdma statistic [show [link DEV[/PORT]]]\n\
         \x20      rdma system [show]"
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
    let out = Out { json: cli.json, pretty: cli.pretty, details: cli.details };
    let cmd = w.get(1).map(String::as_str).unwrap_or("show");
    let rest = w.get(2..).unwrap_or(&[]);
    if is(object, "system") {
        // One namespace, registered memory that a fork keeps: see
        // `verbs_ring::show::rdma_sys`. Nothing to ask the ring.
        if !is(cmd, "show") && !is(cmd, "list") || rest.first().is_some_and(|n| !is(n, "netns")) {
            usage();
        }
        let mut line = String::new();
        let _ = show::rdma_sys::write(&mut line);
        print!("{line}");
        return;
    }
    let ctx = cli.ring.open().unwrap_or_else(|e| fail("rdma", &e));
    let r = if is(object, "link") {
        link(&ctx, out, cmd, rest)
    } else if is(object, "dev") {
        if !is(cmd, "show") && !is(cmd, "list") {
            usage();
        }
        dev_show(&ctx, out, rest.first())
    } else if is(object, "resource") {
        if !is(cmd, "show") && !is(cmd, "list") {
            usage();
        }
        match rest.first().and_then(|k| show::rdma_res_obj::kind_of(k)) {
            Some(kind) => resource_objects(&ctx, out, kind, &rest[1..]),
            None => resource_show(&ctx, out, rest.first()),
        }
    } else if is(object, "statistic") {
        if !is(cmd, "show") && !is(cmd, "list") {
            usage();
        }
        let target = if rest.first().is_some_and(|k| is(k, "link")) { rest.get(1) } else { rest.first() };
        statistic_show(&ctx, out, target)
    } else {
        eprintln!("Object \"{object}\" is unknown, try \"rdma help\".");
        verbs::cli::exit(1)
    };
    if let Err(e) = r {
        fail("rdma", &e)
    }
}

/// iproute2's output options.
#[derive(Clone, Copy)]
struct Out {
    json: bool,
    pretty: bool,
    details: bool,
}

impl Out {
    /// Prints `items`: a line each, or one JSON list.
    fn print<T>(
        self,
        items: &[T],
        text: impl Fn(&mut dyn std::fmt::Write, &T) -> std::fmt::Result,
        json: impl Fn(&mut show::json::JsonObject<'_, '_>, &T) -> std::fmt::Result,
    ) {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = if self.json {
            show::json::JsonList::new(&mut s, self.pretty).and_then(|mut l| {
                for i in items {
                    l.object(|o| json(o, i))?;
                }
                l.finish()
            })
        } else {
            items.iter().try_for_each(|i| text(&mut s, i))
        };
        print!("{s}");
    }
}

fn link(ctx: &Context, out: Out, cmd: &str, rest: &[String]) -> verbs::Result<()> {
    if is(cmd, "show") || is(cmd, "list") {
        let (dev, port) = dev_filter(rest.first());
        let links: Vec<_> = ctx
            .links()?
            .into_iter()
            .filter(|l| dev.as_ref().is_none_or(|d| *d == l.name) && port.is_none_or(|p| p == l.port))
            .map(|l| l.info)
            .collect();
        if let (Some(d), true) = (dev, links.is_empty()) {
            return Err(verbs::Error::NoDevice(d));
        }
        out.print(&links, |w, l| show::rdma_link::write_details(w, l, out.details), show::rdma_link::write_json);
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

fn devices(ctx: &Context, name: Option<&String>) -> verbs::Result<Vec<verbs::Device>> {
    match name {
        Some(n) => Ok(vec![ctx.device(Some(n))?]),
        None => ctx.devices(),
    }
}

fn dev_show(ctx: &Context, out: Out, filter: Option<&String>) -> verbs::Result<()> {
    let (name, _) = dev_filter(filter);
    let devs = devices(ctx, name.as_ref())?;
    if out.details {
        let mut rows = Vec::new();
        for d in &devs {
            rows.push((d.link().info, d.query_device()?.device_cap_flags));
        }
        out.print(
            &rows,
            |w, (l, caps)| show::rdma_dev::write_details(w, l, *caps),
            |o, (l, caps)| show::rdma_dev::write_json_details(o, l, *caps),
        );
        return Ok(());
    }
    let links: Vec<_> = devs.iter().map(|d| d.link().info).collect();
    out.print(&links, show::rdma_dev::write, show::rdma_dev::write_json);
    Ok(())
}

fn resource_show(ctx: &Context, out: Out, filter: Option<&String>) -> verbs::Result<()> {
    let (name, _) = dev_filter(filter);
    let mut rows = Vec::new();
    for d in devices(ctx, name.as_ref())? {
        // The appliance's own objects (QP1) count, as Linux's kernel's do.
        let mut own = Vec::new();
        for kind in [res_kind::QP, res_kind::CQ, res_kind::MR, res_kind::PD] {
            own.extend(d.res_entries(kind)?.into_iter().filter(|e| e.owner == verbs_ring::cmd::res_owner::KERNEL));
        }
        let counts = show::rdma_res::with_kernel(&d.resource_counts()?, &own);
        rows.push((d.index(), d.name().to_string(), counts));
    }
    out.print(
        &rows,
        |w, (i, n, r)| show::rdma_res::write(w, *i, n, r),
        |o, (i, n, r)| show::rdma_res::write_json(o, *i, n, r),
    );
    Ok(())
}

/// `rdma resource show qp|cq|mr|pd|cm_id|ctx|srq [link DEV[/PORT] | dev DEV] [FILTER VALUE]...`.
fn resource_objects(ctx: &Context, out: Out, kind: u32, args: &[String]) -> verbs::Result<()> {
    let mut only: (Option<String>, Option<u32>) = (None, None);
    let mut filters: Vec<(&str, &str)> = Vec::new();
    let mut it = args.iter();
    while let Some(key) = it.next() {
        let Some(value) = it.next() else { usage() };
        if key == "link" || key == "dev" {
            only = dev_filter(Some(value));
        } else if show::rdma_res_obj::filter_names(kind).contains(&key.as_str()) {
            filters.push((key, value));
        } else {
            eprintln!("Unknown filter \"{key}\"");
            verbs::cli::exit(1)
        }
    }
    let mut rows = Vec::new();
    for d in devices(ctx, only.0.as_ref())? {
        for e in d.res_entries(kind)? {
            if only.1.is_some_and(|p| p != e.port) {
                continue;
            }
            if let Some(e) = show::rdma_res_obj::filtered(&e, &filters) {
                rows.push((d.name().to_string(), e));
            }
        }
    }
    out.print(
        &rows,
        |w, (dev, e)| show::rdma_res_obj::write(w, dev, e),
        |o, (dev, e)| show::rdma_res_obj::write_json(o, e.dev_index, dev, e),
    );
    Ok(())
}

fn statistic_show(ctx: &Context, out: Out, filter: Option<&String>) -> verbs::Result<()> {
    let (name, port) = dev_filter(filter);
    let mut rows = Vec::new();
    for d in devices(ctx, name.as_ref())? {
        let p = port.unwrap_or(d.link().port).clamp(1, 255) as u8;
        let values: Vec<u64> = d.counters(p)?.into_iter().map(|(_, v)| v).collect();
        rows.push((d.name().to_string(), u32::from(p), values));
    }
    out.print(
        &rows,
        |w, (n, p, v)| show::rdma_stat::write(w, n, *p, v),
        |o, (n, p, v)| show::rdma_stat::write_json(o, n, *p, v),
    );
    Ok(())
}
