//! The console's RDMA commands: argument parsing in iproute2 / rdma-core style,
//! changes executed through the NLDEV control API. What the tools print
//! comes from [`verbs_ring::show`], the formatters the host tools use too,
//! fed with the core's state converted to the ring's command types by the
//! uverbs provider's own conversions ([`view`]): the console and a host
//! tool print the same text for the same appliance.
//!
//! Supported (words may be abbreviated to a prefix, as iproute2 allows):
//! - `rdma link add NAME type TYPE netdev NETDEV`
//! - `rdma link delete NAME`
//! - `rdma link [show] [DEV[/PORT]]`
//! - `rdma dev [show] [DEV]`, `rdma dev set DEV name NEWNAME`
//! - `rdma statistic [show] [link DEV[/PORT]]`
//! - `rdma resource [show] [DEV]`, `rdma resource show qp|cq|mr|pd|cm_id|ctx|srq [link
//!   DEV[/PORT] | dev DEV] [FILTER VALUE]...`, from a [`Resources`]
//!   snapshot the kernel takes of the ring server's objects
//! - `rdma system [show]`
//! - `-j` (JSON), `-p` (pretty JSON), `-d` (details) before the object
//! - `ibv_devices`, `ibv_devinfo [-v] [-d DEV]`, `show_gids [DEV]`
//!
//! The kernel splits the line into words and calls [`run`]; a refusal comes
//! back as an [`Error`] whose `Display` is the message to print.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use verbs_ring::cmd::{DEV_NAME_LEN, LinkInfo, ResEntry, ResourceCounts, Status};
use verbs_ring::show::json::JsonList;
use verbs_ring::show::{self as tools, DeviceView, PortView};
use verbs_ring::wire::name_field;

use super::device::Device;
use super::error::{Error, errno};
use super::netdev::NetdevProvider;
use super::nldev::NldevMsg;
use super::rdma_core::RdmaCore;
use super::show;
use crate::uverbs;

/// Devices in index order, as a LINK_SHOW dump reports them.
fn by_index(core: &RdmaCore) -> Vec<&Device> {
    let mut devs: Vec<&Device> = core.devices().collect();
    devs.sort_by_key(|d| d.index());
    devs
}

/// The device by name, or the console's error for it.
fn named<'a>(core: &'a RdmaCore, name: &str) -> Result<&'a Device, Error> {
    core.device_by_name(name).ok_or_else(|| Error::NoSuchDevice(String::from(name)))
}

/// Refuses a device name the ring could not carry: every device the console
/// makes must be one host tools can see.
fn fits_the_ring(name: &str) -> Result<(), Error> {
    name_field::<DEV_NAME_LEN>(name)
        .map(|_| ())
        .map_err(|_| Error::InvalidName { name: String::from(name), reason: "longer than the ring's 31-byte names" })
}

/// Port `port` of `dev` as the ring's LINK_SHOW answer.
fn link(core: &RdmaCore, dev: &Device, port: u32) -> Result<LinkInfo, Error> {
    if dev.port(port).is_none() {
        return Err(Error::NoSuchPort { device: String::from(dev.name()), port });
    }
    uverbs::link_info(core, dev.index(), port).map_err(|s| match s {
        Status::ENAMETOOLONG => {
            Error::InvalidName { name: String::from(dev.name()), reason: "does not fit the ring's name fields" }
        }
        _ => Error::NoSuchDevice(String::from(dev.name())),
    })
}

/// `dev` as the ring describes it: LINK_SHOW, QUERY_DEVICE, QUERY_PORT and
/// the GID table, each through the conversion the uverbs provider answers
/// the ring with.
pub fn view(core: &RdmaCore, dev: &Device) -> Result<DeviceView, Error> {
    let ports = dev
        .ports()
        .iter()
        .map(|p| PortView {
            num: p.num(),
            attr: uverbs::port_attr(&dev.query_port(p.num()).unwrap_or(*p.attr())),
            gids: p.gid_table().iter().map(|(i, g)| uverbs::gid_entry(i as u32, Some(g))).collect(),
        })
        .collect();
    Ok(DeviceView { link: link(core, dev, 1)?, attr: uverbs::device_attr(dev.attr(), dev.phys_port_cnt()), ports })
}

/// iproute2's `matches()`: `arg` is a non-empty prefix of `word`.
fn matches(arg: &str, word: &str) -> bool {
    !arg.is_empty() && word.starts_with(arg)
}

/// Split `DEV[/PORT]`.
fn dev_port(arg: &str) -> Result<(&str, Option<u32>), Error> {
    match arg.split_once('/') {
        None => Ok((arg, None)),
        Some((dev, port)) => {
            let p: u32 = port.parse().map_err(|_| Error::BadArgument(alloc::format!("bad port in \"{arg}\"")))?;
            if p == 0 {
                return Err(Error::BadArgument(alloc::format!("bad port in \"{arg}\"")));
            }
            Ok((dev, Some(p)))
        }
    }
}

fn unknown(word: &str) -> Error {
    Error::UnknownCommand(String::from(word))
}

fn extra(args: &[&str]) -> Result<(), Error> {
    match args.first() {
        None => Ok(()),
        Some(a) => Err(Error::BadArgument(alloc::format!("unexpected \"{a}\""))),
    }
}

/// What `rdma resource` lists: the ring server's objects and the
/// appliance's own, as its RES_ENTRY and QUERY_RESOURCES answer them (the
/// kernel takes the snapshot before the command runs, since the core is
/// lent to the command).
#[derive(Clone, Debug, Default)]
pub struct Resources {
    /// By device index.
    pub counts: Vec<(u32, ResourceCounts)>,
    /// Every device's objects, by kind, in the ring's listing order.
    pub entries: Vec<ResEntry>,
}

/// iproute2's output options.
#[derive(Clone, Copy, Debug, Default)]
struct Opts {
    json: bool,
    pretty: bool,
    details: bool,
}

/// Run one console command line, already split into words (`args[0]` is the
/// program: `rdma`, `ibv_devinfo`, `ibv_devices` or `show_gids`).
pub fn run(core: &mut RdmaCore, net: &dyn NetdevProvider, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    run_with(core, net, &Resources::default(), args, out)
}

/// [`run`], with the objects `rdma resource` lists.
pub fn run_with(
    core: &mut RdmaCore,
    net: &dyn NetdevProvider,
    res: &Resources,
    args: &[&str],
    out: &mut dyn Write,
) -> Result<(), Error> {
    let Some((prog, rest)) = args.split_first() else {
        return Err(unknown(""));
    };
    match *prog {
        "rdma" => rdma(core, net, res, rest, out),
        "ibv_devinfo" => ibv_devinfo(core, rest, out),
        "ibv_devices" => {
            extra(rest)?;
            let links = by_index(core).into_iter().map(|d| link(core, d, 1)).collect::<Result<Vec<_>, _>>()?;
            tools::devices::write(out, &links)?;
            Ok(())
        }
        "show_gids" => {
            let devs: Vec<&Device> = match rest {
                [] => by_index(core),
                [name] => alloc::vec![named(core, name)?],
                [_, more, ..] => return extra(&[more]),
            };
            let views = devs.into_iter().map(|d| view(core, d)).collect::<Result<Vec<_>, _>>()?;
            tools::gids::write(out, &views)?;
            Ok(())
        }
        other => Err(unknown(other)),
    }
}

fn rdma(
    core: &mut RdmaCore,
    net: &dyn NetdevProvider,
    res: &Resources,
    mut args: &[&str],
    out: &mut dyn Write,
) -> Result<(), Error> {
    let mut o = Opts::default();
    // iproute2's options, before the object: `-j`, `-p`, `-d`, combined
    // (`-jp`) or spelled out (`-json`, `--pretty`, `-details`).
    while let Some((opt, rest)) = args.split_first().filter(|(a, _)| a.starts_with('-') && a.len() > 1) {
        let word = opt.trim_start_matches('-');
        if matches(word, "json") {
            o.json = true;
        } else if matches(word, "pretty") {
            o.pretty = true;
        } else if matches(word, "details") {
            o.details = true;
        } else if word.chars().all(|c| matches!(c, 'j' | 'p' | 'd')) {
            o.json |= word.contains('j');
            o.pretty |= word.contains('p');
            o.details |= word.contains('d');
        } else {
            return Err(Error::BadArgument(alloc::format!("unknown option \"{opt}\"")));
        }
        args = rest;
    }
    let Some((obj, rest)) = args.split_first() else {
        return Err(Error::BadArgument(String::from(
            "usage: rdma [-j] [-p] [-d] { dev | link | resource | statistic | system } ...",
        )));
    };
    if matches(obj, "link") {
        rdma_link(core, net, o, rest, out)
    } else if matches(obj, "dev") {
        rdma_dev(core, net, o, rest, out)
    } else if matches(obj, "statistic") {
        rdma_stat(core, o, rest, out)
    } else if matches(obj, "resource") {
        rdma_res(core, res, o, rest, out)
    } else if matches(obj, "system") {
        match rest {
            [] => Ok(tools::rdma_sys::write(out)?),
            [cmd, tail @ ..] if matches(cmd, "show") || matches(cmd, "list") => match tail {
                [] => Ok(tools::rdma_sys::write(out)?),
                [what] if matches(what, "netns") => Ok(tools::rdma_sys::write(out)?),
                [_, more, ..] | [more] => extra(&[more]),
            },
            [cmd, ..] => Err(unknown(cmd)),
        }
    } else {
        Err(unknown(obj))
    }
}

/// Lines or a JSON list: `text` writes one item's line, `json` its members.
fn emit<T>(
    out: &mut dyn Write,
    o: Opts,
    items: &[T],
    text: impl Fn(&mut dyn Write, &T) -> core::fmt::Result,
    json: impl Fn(&mut verbs_ring::show::json::JsonObject<'_, '_>, &T) -> core::fmt::Result,
) -> Result<(), Error> {
    if o.json {
        let mut l = JsonList::new(out, o.pretty)?;
        for i in items {
            l.object(|obj| json(obj, i))?;
        }
        l.finish()?;
    } else {
        for i in items {
            text(out, i)?;
        }
    }
    Ok(())
}

fn rdma_res(core: &RdmaCore, res: &Resources, o: Opts, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    let args = match args.split_first() {
        Some((cmd, rest)) if matches(cmd, "show") || matches(cmd, "list") => rest,
        _ => args,
    };
    let kind = args.first().and_then(|w| tools::rdma_res_obj::kind_of(w));
    let Some(kind) = kind else {
        // The summary, of every device or of one.
        let devs = match args {
            [] => by_index(core),
            [name] => alloc::vec![named(core, name)?],
            [_, more, ..] => return extra(&[more]),
        };
        let rows: Vec<(u32, &str, ResourceCounts)> = devs
            .iter()
            .map(|d| {
                let c = res.counts.iter().find(|(i, _)| *i == d.index()).map(|(_, c)| *c).unwrap_or_default();
                (d.index(), d.name(), c)
            })
            .collect();
        return emit(
            out,
            o,
            &rows,
            |w, (i, n, c)| tools::rdma_res::write(w, *i, n, c),
            |j, (i, n, c)| tools::rdma_res::write_json(j, *i, n, c),
        );
    };
    // `link DEV[/PORT]` or `dev DEV`, then FILTER VALUE pairs.
    let mut only: Option<(&Device, Option<u32>)> = None;
    let mut filters: Vec<(&str, &str)> = Vec::new();
    let mut it = args[1..].iter();
    while let Some(key) = it.next() {
        let value = it.next().ok_or_else(|| Error::BadArgument(alloc::format!("\"{key}\" needs a value")))?;
        if *key == "link" || *key == "dev" {
            let (name, port) = dev_port(value)?;
            only = Some((named(core, name)?, port));
        } else if tools::rdma_res_obj::filter_names(kind).contains(key) {
            filters.push((key, value));
        } else {
            return Err(Error::BadArgument(alloc::format!("unknown filter \"{key}\"")));
        }
    }
    let rows: Vec<(&str, ResEntry)> = res
        .entries
        .iter()
        .filter(|e| e.kind == kind)
        .filter(|e| only.is_none_or(|(d, p)| d.index() == e.dev_index && p.is_none_or(|p| p == e.port)))
        .filter_map(|e| tools::rdma_res_obj::filtered(e, &filters))
        .filter_map(|e| core.device(e.dev_index).map(|d| (d.name(), e)))
        .collect();
    emit(
        out,
        o,
        &rows,
        |w, (dev, e)| tools::rdma_res_obj::write(w, dev, e),
        |j, (dev, e)| tools::rdma_res_obj::write_json(j, e.dev_index, dev, e),
    )
}

fn rdma_link(
    core: &mut RdmaCore,
    net: &dyn NetdevProvider,
    o: Opts,
    args: &[&str],
    out: &mut dyn Write,
) -> Result<(), Error> {
    match args.split_first() {
        None => link_show(core, o, None, out),
        Some((cmd, rest)) if matches(cmd, "show") || matches(cmd, "list") => match rest {
            [] => link_show(core, o, None, out),
            [target] => link_show(core, o, Some(target), out),
            [_, more, ..] => extra(&[more]),
        },
        Some((cmd, rest)) if matches(cmd, "add") => {
            let Some((name, kv)) = rest.split_first() else {
                return Err(Error::BadArgument(String::from("usage: rdma link add NAME type TYPE netdev NETDEV")));
            };
            fits_the_ring(name)?;
            let (mut link_type, mut netdev) = (None, None);
            let mut it = kv.iter();
            while let Some(key) = it.next() {
                let value = it.next().ok_or_else(|| Error::BadArgument(alloc::format!("\"{key}\" needs a value")))?;
                if matches(key, "type") {
                    link_type = Some(*value);
                } else if matches(key, "netdev") {
                    netdev = Some(*value);
                } else {
                    return Err(Error::BadArgument(alloc::format!("unknown parameter \"{key}\"")));
                }
            }
            let mut msg = NldevMsg::new_link(name, "", "");
            msg.attrs.link_type = link_type.map(String::from);
            msg.attrs.ndev_name = netdev.map(String::from);
            core.nldev(net, &msg).map_err(as_netlink)?;
            Ok(())
        }
        Some((cmd, rest)) if matches(cmd, "delete") => match rest {
            [name] => core.link_del(net, name).map_err(as_netlink),
            [] => Err(Error::BadArgument(String::from("usage: rdma link delete NAME"))),
            [_, more, ..] => extra(&[more]),
        },
        Some((cmd, _)) => Err(unknown(cmd)),
    }
}

/// A refusal Linux's iproute2 reports as bare `error: <strerror>` (a name
/// or netdev that exists already, one that does not): the errno only, so the
/// console prints what Linux prints. Other refusals keep their reason, where
/// Linux would print `Invalid argument`.
fn as_netlink(e: Error) -> Error {
    match e.errno() {
        errno::EEXIST | errno::ENODEV => Error::Netlink(e.errno()),
        _ => e,
    }
}

fn link_show(core: &RdmaCore, o: Opts, target: Option<&str>, out: &mut dyn Write) -> Result<(), Error> {
    let (devs, only_port) = match target {
        None => (by_index(core), None),
        Some(t) => {
            let (name, port) = dev_port(t)?;
            (alloc::vec![named(core, name)?], port)
        }
    };
    let mut links = Vec::new();
    for dev in devs {
        match only_port {
            Some(p) => links.push(link(core, dev, p)?),
            None => {
                for port in dev.ports() {
                    links.push(link(core, dev, port.num())?);
                }
            }
        }
    }
    emit(out, o, &links, |w, l| tools::rdma_link::write_details(w, l, o.details), tools::rdma_link::write_json)
}

fn rdma_dev(
    core: &mut RdmaCore,
    net: &dyn NetdevProvider,
    o: Opts,
    args: &[&str],
    out: &mut dyn Write,
) -> Result<(), Error> {
    let show_target = |core: &mut RdmaCore, target: Option<&str>, out: &mut dyn Write| {
        let devs = match target {
            None => by_index(core),
            Some(name) => alloc::vec![named(core, name)?],
        };
        if o.details {
            // With the capability flags the uverbs provider answers QUERY_DEVICE with.
            let rows = devs
                .into_iter()
                .map(|d| Ok((link(core, d, 1)?, view(core, d)?.attr.device_cap_flags)))
                .collect::<Result<Vec<_>, Error>>()?;
            return emit(
                out,
                o,
                &rows,
                |w, (l, caps)| tools::rdma_dev::write_details(w, l, *caps),
                |j, (l, caps)| tools::rdma_dev::write_json_details(j, l, *caps),
            );
        }
        let links = devs.into_iter().map(|d| link(core, d, 1)).collect::<Result<Vec<_>, _>>()?;
        emit(out, o, &links, tools::rdma_dev::write, tools::rdma_dev::write_json)
    };
    match args.split_first() {
        None => show_target(core, None, out),
        Some((cmd, rest)) if matches(cmd, "show") || matches(cmd, "list") => match rest {
            [] => show_target(core, None, out),
            [name] => show_target(core, Some(name), out),
            [_, more, ..] => extra(&[more]),
        },
        Some((cmd, rest)) if matches(cmd, "set") => match rest {
            [dev, key, new] if matches(key, "name") => {
                fits_the_ring(new)?;
                let index = core.registry().index_of(dev)?;
                core.nldev(net, &NldevMsg::set_name(index, new))?;
                Ok(())
            }
            _ => Err(Error::BadArgument(String::from("usage: rdma dev set DEV name NEWNAME"))),
        },
        Some((cmd, _)) => Err(unknown(cmd)),
    }
}

fn rdma_stat(core: &RdmaCore, o: Opts, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    let rest = match args.split_first() {
        Some((cmd, rest)) if matches(cmd, "show") => rest,
        Some((cmd, _)) if !matches(cmd, "link") => return Err(unknown(cmd)),
        _ => args,
    };
    // (device, port) pairs to print, in device order.
    let ports: Vec<(&Device, u32)> = match rest {
        [] => by_index(core).into_iter().flat_map(|d| d.ports().iter().map(move |p| (d, p.num()))).collect(),
        [key] if matches(key, "link") => {
            by_index(core).into_iter().flat_map(|d| d.ports().iter().map(move |p| (d, p.num()))).collect()
        }
        [key, target] if matches(key, "link") => {
            let (name, port) = dev_port(target)?;
            let dev = named(core, name)?;
            match port {
                None => dev.ports().iter().map(|p| (dev, p.num())).collect(),
                Some(p) if dev.port(p).is_none() => {
                    return Err(Error::NoSuchPort { device: String::from(name), port: p });
                }
                Some(p) => alloc::vec![(dev, p)],
            }
        }
        [a, ..] => return Err(Error::BadArgument(alloc::format!("unexpected \"{a}\""))),
    };
    let rows: Vec<(&str, u32, Vec<u64>)> =
        ports.into_iter().map(|(d, p)| (d.name(), p, show::counter_values(&d.counters()))).collect();
    emit(
        out,
        o,
        &rows,
        |w, (n, p, v)| tools::rdma_stat::write(w, n, *p, v),
        |j, (n, p, v)| tools::rdma_stat::write_json(j, n, *p, v),
    )
}

fn ibv_devinfo(core: &RdmaCore, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    let mut verbose = false;
    let mut only: Option<&str> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "-v" | "--verbose" => verbose = true,
            "-d" | "--ib-dev" => {
                only = Some(it.next().ok_or_else(|| Error::BadArgument(String::from("-d needs a device")))?);
            }
            other => return Err(Error::BadArgument(alloc::format!("unknown option \"{other}\""))),
        }
    }
    let devs: Vec<&Device> = match only {
        Some(name) => alloc::vec![named(core, name)?],
        None => by_index(core),
    };
    if devs.is_empty() {
        return Err(Error::NoSuchDevice(String::from("no IB devices found")));
    }
    for dev in devs {
        tools::devinfo::write(out, &view(core, dev)?, verbose)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::testutil::{eth0, rxe_core};
    use alloc::vec;

    fn sh(core: &mut RdmaCore, net: &dyn NetdevProvider, line: &str) -> Result<String, Error> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut out = String::new();
        run(core, net, &words, &mut out).map(|_| out)
    }

    #[test]
    fn link_add_show_delete_round_trip() {
        let net = vec![eth0()];
        let mut core = rxe_core();
        assert_eq!(sh(&mut core, &net, "rdma link add rxe0 type rxe netdev eth0"), Ok(String::new()));
        // iproute2 ends every field with a blank, the last one too.
        let expect = "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0 \n";
        assert_eq!(sh(&mut core, &net, "rdma link show").as_deref(), Ok(expect));
        assert_eq!(sh(&mut core, &net, "rdma link").as_deref(), Ok(expect));
        assert_eq!(sh(&mut core, &net, "rdma l s rxe0/1").as_deref(), Ok(expect));
        assert_eq!(sh(&mut core, &net, "rdma link show rxe0").as_deref(), Ok(expect));
        assert!(matches!(sh(&mut core, &net, "rdma link show rxe0/2"), Err(Error::NoSuchPort { .. })));
        assert_eq!(sh(&mut core, &net, "rdma link del rxe0"), Ok(String::new()));
        assert_eq!(sh(&mut core, &net, "rdma link show"), Ok(String::new()));
    }

    #[test]
    fn errors_are_clear() {
        let net = vec![eth0()];
        let mut core = rxe_core();
        let err = |core: &mut RdmaCore, l: &str| sh(core, &net, l).err().map(|e| alloc::format!("{e}"));
        assert_eq!(err(&mut core, "rdma link add rxe0 type rxe netdev eth7").as_deref(), Some("No such device"));
        assert_eq!(
            err(&mut core, "rdma link add rxe0 type foo netdev eth0").as_deref(),
            Some("unknown link type \"foo\"")
        );
        assert_eq!(err(&mut core, "rdma link add rxe0 type rxe").as_deref(), Some("missing attribute NDEV_NAME"));
        assert_eq!(
            err(&mut core, "rdma link add rxe0 type rxe netdev").as_deref(),
            Some("bad argument: \"netdev\" needs a value")
        );
        assert_eq!(err(&mut core, "rdma link delete rxe9").as_deref(), Some("No such device"));
        assert_eq!(err(&mut core, "rdma bogus").as_deref(), Some("command \"bogus\" is unknown"));
        assert_eq!(err(&mut core, "ibv_devinfo").as_deref(), Some("no such RDMA device: no IB devices found"));
        // Every device must fit the ring's name fields, or host tools could not name it.
        let long = "rxe_0123456789abcdef0123456789abcdef";
        assert_eq!(
            err(&mut core, &alloc::format!("rdma link add {long} type rxe netdev eth0")),
            Some(alloc::format!("invalid device name \"{long}\": longer than the ring's 31-byte names"))
        );
    }

    #[test]
    fn dev_show_and_rename() {
        let net = vec![eth0()];
        let mut core = rxe_core();
        sh(&mut core, &net, "rdma link add rxe0 type rxe netdev eth0").unwrap();
        assert_eq!(
            sh(&mut core, &net, "rdma dev").as_deref(),
            Ok("0: rxe0: node_type ca node_guid 5054:00ff:fe00:0001 sys_image_guid 5054:00ff:fe00:0001 \n")
        );
        sh(&mut core, &net, "rdma dev set rxe0 name lan0").unwrap();
        assert!(sh(&mut core, &net, "rdma dev show lan0").unwrap().starts_with("0: lan0: "));
        assert!(sh(&mut core, &net, "rdma dev show rxe0").is_err());
    }

    #[test]
    fn stat_devinfo_gids_and_devices() {
        let net = vec![eth0()];
        let mut core = rxe_core();
        sh(&mut core, &net, "rdma link add rxe0 type rxe netdev eth0").unwrap();
        let stat = sh(&mut core, &net, "rdma statistic show").unwrap();
        assert!(stat.starts_with("link rxe0/1 sent_pkts 0 "));
        assert_eq!(sh(&mut core, &net, "rdma stat show link rxe0/1").unwrap(), stat);
        assert_eq!(sh(&mut core, &net, "rdma stat link rxe0").unwrap(), stat);
        assert_eq!(
            sh(&mut core, &net, "ibv_devinfo -d rxe0").unwrap(),
            "hca_id:\trxe0\n\
             \ttransport:\t\t\tInfiniBand (0)\n\
             \tfw_ver:\t\t\t\t0.0.0\n\
             \tnode_guid:\t\t\t5054:00ff:fe00:0001\n\
             \tsys_image_guid:\t\t\t5054:00ff:fe00:0001\n\
             \tvendor_id:\t\t\t0xffffff\n\
             \tvendor_part_id:\t\t\t0\n\
             \thw_ver:\t\t\t\t0x0\n\
             \tphys_port_cnt:\t\t\t1\n\
             \t\tport:\t1\n\
             \t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\
             \t\t\tmax_mtu:\t\t4096 (5)\n\
             \t\t\tactive_mtu:\t\t1024 (3)\n\
             \t\t\tsm_lid:\t\t\t0\n\
             \t\t\tport_lid:\t\t0\n\
             \t\t\tport_lmc:\t\t0x00\n\
             \t\t\tlink_layer:\t\tEthernet\n\n"
        );
        let verbose = sh(&mut core, &net, "ibv_devinfo -v").unwrap();
        for line in [
            "\tmax_qp:\t\t\t\t1048560\n",
            "\tdevice_cap_flags:\t\t0x01223c76\n",
            "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
            "\tnum_comp_vectors:\t\t1\n",
            "\t\t\tphys_state:\t\tLINK_UP (5)\n",
            "\t\t\tGID[  0]:\t\tfe80::5054:ff:fe00:1, RoCE v2\n",
            "\t\t\tGID[  1]:\t\t::ffff:10.0.0.1, RoCE v2\n",
        ] {
            assert!(verbose.contains(line), "no {line:?} in\n{verbose}");
        }
        assert_eq!(
            sh(&mut core, &net, "show_gids rxe0").unwrap(),
            "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n\
             ---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n\
             rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe00:0001\t\t\tv2\teth0\n\
             rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1  \tv2\teth0\n\
             n_gids_found=2\n"
        );
        assert!(sh(&mut core, &net, "show_gids rxe9").is_err());
        assert_eq!(
            sh(&mut core, &net, "ibv_devices").unwrap(),
            "    device          \t   node GUID\n    ------          \t----------------\n    rxe0            \t505400fffe000001\n"
        );
    }

    #[test]
    fn resource_listings_filters_json_and_system() {
        use verbs_ring::cmd::res_owner;
        let net = vec![eth0()];
        let mut core = rxe_core();
        sh(&mut core, &net, "rdma link add rxe0 type rxe netdev eth0").unwrap();
        let gsi = ResEntry::gsi(0, 0);
        let rc = ResEntry { num: 17, qp_type: 2, state: 1, owner: res_owner::USER, pid: 7, pdn: 3, ..gsi };
        let res = Resources {
            counts: vec![(0, ResourceCounts { counts: [2, 0, 0, 0, 0, 1], contexts: 1, reserved: 0 })],
            entries: vec![rc, gsi],
        };
        let run = |core: &mut RdmaCore, line: &str| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let mut out = String::new();
            run_with(core, &net, &res, &words, &mut out).map(|_| out)
        };
        assert_eq!(run(&mut core, "rdma res").unwrap(), "0: rxe0: pd 1 cq 0 qp 2 cm_id 0 mr 0 ctx 1 srq 0 \n");
        assert_eq!(run(&mut core, "rdma resource show rxe0").unwrap(), run(&mut core, "rdma res").unwrap());
        let qp = run(&mut core, "rdma resource show qp").unwrap();
        assert_eq!(qp.lines().count(), 2);
        assert!(qp.ends_with("link rxe0/1 lqpn 1 type GSI state RTS sq-psn 0 comm [ib_core] \n"), "{qp}");
        assert_eq!(
            run(&mut core, "rdma resource show qp lqpn 1").unwrap(),
            "link rxe0/1 lqpn 1 type GSI state RTS sq-psn 0 comm [ib_core] \n"
        );
        assert_eq!(run(&mut core, "rdma resource show qp link rxe0/1 pid 7").unwrap().lines().count(), 1);
        assert_eq!(run(&mut core, "rdma resource show cq").unwrap(), "");
        assert!(run(&mut core, "rdma resource show qp bogus 1").is_err());
        assert!(run(&mut core, "rdma resource show qp dev rxe9").is_err());
        assert!(
            run(&mut core, "rdma -j resource show qp lqpn 17")
                .unwrap()
                .starts_with("[{\"ifindex\":0,\"ifname\":\"rxe0\",\"port\":1,\"lqpn\":17,")
        );
        assert_eq!(
            run(&mut core, "rdma -jd link").unwrap(),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"port\":1,\"state\":\"ACTIVE\",\"physical_state\":\"LINK_UP\",\"netdev\":\"eth0\",\"netdev_index\":2}]\n"
        );
        assert!(run(&mut core, "rdma -d link").unwrap().ends_with("netdev eth0 netdev_index 2 \n"));
        assert_eq!(run(&mut core, "rdma system").unwrap(), "netns shared copy-on-fork on\n");
        assert_eq!(run(&mut core, "rdma sys show netns").unwrap(), "netns shared copy-on-fork on\n");
        assert!(run(&mut core, "rdma -x link").is_err());
    }

    #[test]
    fn dev_port_parsing() {
        assert_eq!(dev_port("rxe0"), Ok(("rxe0", None)));
        assert_eq!(dev_port("rxe0/1"), Ok(("rxe0", Some(1))));
        assert!(dev_port("rxe0/0").is_err());
        assert!(dev_port("rxe0/x").is_err());
    }
}
