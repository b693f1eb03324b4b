//! The console's RDMA commands: argument parsing in iproute2 / rdma-core style,
//! executed through the NLDEV control API and printed by [`show`].
//!
//! Supported (words may be abbreviated to a prefix, as iproute2 allows):
//! - `rdma link add NAME type TYPE netdev NETDEV`
//! - `rdma link delete NAME`
//! - `rdma link [show] [DEV[/PORT]]`
//! - `rdma dev [show] [DEV]`, `rdma dev set DEV name NEWNAME`
//! - `rdma statistic [show] [link DEV[/PORT]]`
//! - `ibv_devices`, `ibv_devinfo [-v] [-d DEV]`, `show_gids [DEV]`
//!
//! The kernel splits the line into words and calls [`run`]; a refusal comes
//! back as an [`Error`] whose `Display` is the message to print.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use super::device::Device;
use super::error::Error;
use super::netdev::NetdevProvider;
use super::nldev::NldevMsg;
use super::rdma_core::RdmaCore;
use super::show;

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

/// Run one console command line, already split into words (`args[0]` is the
/// program: `rdma`, `ibv_devinfo`, `ibv_devices` or `show_gids`).
pub fn run(core: &mut RdmaCore, net: &dyn NetdevProvider, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    let Some((prog, rest)) = args.split_first() else {
        return Err(unknown(""));
    };
    match *prog {
        "rdma" => rdma(core, net, rest, out),
        "ibv_devinfo" => ibv_devinfo(core, rest, out),
        "ibv_devices" => {
            extra(rest)?;
            writeln!(out, "    device          \t   node GUID")?;
            writeln!(out, "    ------          \t----------------")?;
            for dev in core.devices() {
                writeln!(out, "    {:<16}\t{:016x}", dev.name(), dev.attr().node_guid.0)?;
            }
            Ok(())
        }
        "show_gids" => {
            let devs: Vec<&Device> = match rest {
                [] => core.devices().collect(),
                [name] => vec_of(core.device_by_name(name), name)?,
                [_, more, ..] => return extra(&[more]),
            };
            show::show_gids(out, devs)?;
            Ok(())
        }
        other => Err(unknown(other)),
    }
}

fn vec_of<'a>(dev: Option<&'a Device>, name: &str) -> Result<Vec<&'a Device>, Error> {
    dev.map(|d| alloc::vec![d]).ok_or_else(|| Error::NoSuchDevice(String::from(name)))
}

fn rdma(core: &mut RdmaCore, net: &dyn NetdevProvider, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    let Some((obj, rest)) = args.split_first() else {
        return Err(Error::BadArgument(String::from("usage: rdma { dev | link | statistic } ...")));
    };
    if matches(obj, "link") {
        rdma_link(core, net, rest, out)
    } else if matches(obj, "dev") {
        rdma_dev(core, net, rest, out)
    } else if matches(obj, "statistic") {
        rdma_stat(core, rest, out)
    } else {
        Err(unknown(obj))
    }
}

fn rdma_link(core: &mut RdmaCore, net: &dyn NetdevProvider, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    match args.split_first() {
        None => link_show(core, net, None, out),
        Some((cmd, rest)) if matches(cmd, "show") || matches(cmd, "list") => match rest {
            [] => link_show(core, net, None, out),
            [target] => link_show(core, net, Some(target), out),
            [_, more, ..] => extra(&[more]),
        },
        Some((cmd, rest)) if matches(cmd, "add") => {
            let Some((name, kv)) = rest.split_first() else {
                return Err(Error::BadArgument(String::from("usage: rdma link add NAME type TYPE netdev NETDEV")));
            };
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
            core.nldev(net, &msg)?;
            Ok(())
        }
        Some((cmd, rest)) if matches(cmd, "delete") => match rest {
            [name] => core.link_del(net, name),
            [] => Err(Error::BadArgument(String::from("usage: rdma link delete NAME"))),
            [_, more, ..] => extra(&[more]),
        },
        Some((cmd, _)) => Err(unknown(cmd)),
    }
}

fn link_show(
    core: &mut RdmaCore,
    net: &dyn NetdevProvider,
    target: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let replies = match target {
        None => core.nldev(net, &NldevMsg::port_dump(None))?,
        Some(t) => {
            let (name, port) = dev_port(t)?;
            let index = core.registry().index_of(name)?;
            match port {
                Some(p) => core.nldev(net, &NldevMsg::port_get(index, p))?,
                None => core.nldev(net, &NldevMsg::port_dump(Some(index)))?,
            }
        }
    };
    show::rdma_link_show(out, &replies)?;
    Ok(())
}

fn rdma_dev(core: &mut RdmaCore, net: &dyn NetdevProvider, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    let show_target = |core: &mut RdmaCore, target: Option<&str>, out: &mut dyn Write| {
        let replies = match target {
            None => core.nldev(net, &NldevMsg::get_dump())?,
            Some(name) => {
                let index = core.registry().index_of(name)?;
                core.nldev(net, &NldevMsg::get(index))?
            }
        };
        show::rdma_dev_show(out, &replies)?;
        Ok(())
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
                let index = core.registry().index_of(dev)?;
                core.nldev(net, &NldevMsg::set_name(index, new))?;
                Ok(())
            }
            _ => Err(Error::BadArgument(String::from("usage: rdma dev set DEV name NEWNAME"))),
        },
        Some((cmd, _)) => Err(unknown(cmd)),
    }
}

fn rdma_stat(core: &RdmaCore, args: &[&str], out: &mut dyn Write) -> Result<(), Error> {
    let rest = match args.split_first() {
        Some((cmd, rest)) if matches(cmd, "show") => rest,
        Some((cmd, _)) if !matches(cmd, "link") => return Err(unknown(cmd)),
        _ => args,
    };
    match rest {
        [] => show::rdma_stat_show_all(out, core.devices())?,
        [key] if matches(key, "link") => show::rdma_stat_show_all(out, core.devices())?,
        [key, target] if matches(key, "link") => {
            let (name, port) = dev_port(target)?;
            let dev = core.device_by_name(name).ok_or_else(|| Error::NoSuchDevice(String::from(name)))?;
            match port {
                None => show::rdma_stat_show_all(out, [dev])?,
                Some(p) => {
                    if dev.port(p).is_none() {
                        return Err(Error::NoSuchPort { device: String::from(name), port: p });
                    }
                    show::rdma_stat_show(out, dev.name(), p, &dev.counters())?
                }
            }
        }
        [a, ..] => return Err(Error::BadArgument(alloc::format!("unexpected \"{a}\""))),
    }
    Ok(())
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
        Some(name) => vec_of(core.device_by_name(name), name)?,
        None => core.devices().collect(),
    };
    if devs.is_empty() {
        return Err(Error::NoSuchDevice(String::from("no IB devices found")));
    }
    for dev in devs {
        show::ibv_devinfo(out, dev, verbose)?;
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
        let expect = "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0\n";
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
        assert_eq!(err(&mut core, "rdma link add rxe0 type rxe netdev eth7").as_deref(), Some("no such netdev: eth7"));
        assert_eq!(
            err(&mut core, "rdma link add rxe0 type foo netdev eth0").as_deref(),
            Some("unknown link type \"foo\"")
        );
        assert_eq!(err(&mut core, "rdma link add rxe0 type rxe").as_deref(), Some("missing attribute NDEV_NAME"));
        assert_eq!(
            err(&mut core, "rdma link add rxe0 type rxe netdev").as_deref(),
            Some("bad argument: \"netdev\" needs a value")
        );
        assert_eq!(err(&mut core, "rdma link delete rxe9").as_deref(), Some("no such RDMA device: rxe9"));
        assert_eq!(err(&mut core, "rdma bogus").as_deref(), Some("command \"bogus\" is unknown"));
        assert_eq!(err(&mut core, "ibv_devinfo").as_deref(), Some("no such RDMA device: no IB devices found"));
    }

    #[test]
    fn dev_show_and_rename() {
        let net = vec![eth0()];
        let mut core = rxe_core();
        sh(&mut core, &net, "rdma link add rxe0 type rxe netdev eth0").unwrap();
        assert_eq!(
            sh(&mut core, &net, "rdma dev").as_deref(),
            Ok("0: rxe0: node_type ca fw 6.1.0 node_guid 5054:00ff:fe00:0001 sys_image_guid 5054:00ff:fe00:0001\n")
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
        assert!(sh(&mut core, &net, "ibv_devinfo -d rxe0").unwrap().starts_with("hca_id:\trxe0\n"));
        assert!(sh(&mut core, &net, "ibv_devinfo -v").unwrap().contains("GID[  1]:"));
        assert!(sh(&mut core, &net, "show_gids rxe0").unwrap().ends_with("n_gids_found=2\n"));
        assert!(sh(&mut core, &net, "show_gids rxe9").is_err());
        assert_eq!(
            sh(&mut core, &net, "ibv_devices").unwrap(),
            "    device          \t   node GUID\n    ------          \t----------------\n    rxe0            \t505400fffe000001\n"
        );
    }

    #[test]
    fn dev_port_parsing() {
        assert_eq!(dev_port("rxe0"), Ok(("rxe0", None)));
        assert_eq!(dev_port("rxe0/1"), Ok(("rxe0", Some(1))));
        assert!(dev_port("rxe0/0").is_err());
        assert!(dev_port("rxe0/x").is_err());
    }
}
