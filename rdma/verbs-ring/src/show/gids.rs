//! The `show_gids` script (Mellanox mlnx-tools, `sbin/show_gids`): every GID
//! of every port with its IPv4 address when it has one, RoCE version and
//! netdev, then the count. It reads sysfs, so the order is the order of the
//! file names there: devices by name, ports and GID indices by their
//! decimal digits (`ls` puts 10 before 2).

use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::net::Ipv4Addr;

use super::DeviceView;
use super::words::{GidFull, cmp_as_file_names, name};
use crate::cmd::{GidEntry, gid_type};

/// The table for `devices` (all of them, or the one `show_gids DEV` names).
pub fn write(out: &mut dyn Write, devices: &[DeviceView]) -> fmt::Result {
    writeln!(out, "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV")?;
    writeln!(out, "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---")?;
    let mut devs: Vec<&DeviceView> = devices.iter().collect();
    devs.sort_by(|a, b| a.name().cmp(b.name()));
    let mut count = 0usize;
    for dev in devs {
        let mut ports: Vec<_> = dev.ports.iter().collect();
        ports.sort_by(|a, b| cmp_as_file_names(a.num, b.num));
        for port in ports {
            let mut gids: Vec<&GidEntry> = port.gids.iter().filter(|g| shown(g)).collect();
            gids.sort_by(|a, b| cmp_as_file_names(a.index, b.index));
            for g in gids {
                // The script reads the netdev from gid_attrs/ndevs, and
                // prints nothing where there is none.
                let ndev = if g.ndev_ifindex == dev.link.netdev_index { name(&dev.link.netdev) } else { "" };
                write!(out, "{}\t{}\t{}\t{}\t", dev.name(), port.num, g.index, GidFull(&g.gid))?;
                // The script's test for an IPv4 GID: the first group is 0000.
                if g.gid[0] == 0 && g.gid[1] == 0 {
                    write!(out, "{}  \t", Ipv4Addr::new(g.gid[12], g.gid[13], g.gid[14], g.gid[15]))?;
                } else {
                    write!(out, "\t\t")?;
                }
                writeln!(out, "{}\t{ndev}", version(g.gid_type))?;
                count += 1;
            }
        }
    }
    writeln!(out, "n_gids_found={count}")
}

/// The script skips the empty GID and the bare link-local prefix.
fn shown(g: &GidEntry) -> bool {
    const LINK_LOCAL_PREFIX: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    g.gid != [0; 16] && g.gid != LINK_LOCAL_PREFIX
}

/// What the script cuts from gid_attrs/types (`IB/RoCE v1`, `RoCE v2`):
/// from the `v` on; nothing for a type sysfs would not name.
fn version(t: u32) -> &'static str {
    match t {
        gid_type::ROCE_V1 => "v1",
        gid_type::ROCE_V2 => "v2",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::show::fixture;
    use alloc::string::String;
    use alloc::vec;

    const HEADER: &str = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n\
                          ---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n";

    fn text(devs: &[DeviceView]) -> String {
        let mut s = String::new();
        write(&mut s, devs).unwrap();
        s
    }

    #[test]
    fn table_is_the_scripts() {
        assert_eq!(
            text(&[fixture::rxe0()]),
            alloc::format!(
                "{HEADER}\
                 rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe00:0001\t\t\tv2\teth0\n\
                 rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1  \tv2\teth0\n\
                 n_gids_found=2\n"
            )
        );
        assert_eq!(text(&[]), alloc::format!("{HEADER}n_gids_found=0\n"));
    }

    #[test]
    fn order_and_skips_are_sysfs_and_the_scripts() {
        let mut a = fixture::rxe0();
        let mut b = fixture::rxe0();
        b.link.dev_name = crate::wire::name_field("rxe1").unwrap();
        let gids = &mut a.ports[0].gids;
        gids.push(fixture::gid(2, "::ffff:10.0.0.2"));
        gids.push(fixture::gid(10, "::ffff:10.0.0.10"));
        gids.push(fixture::gid(3, "fe80::"));
        gids.push(GidEntry { ndev_ifindex: 9, ..fixture::gid(4, "::ffff:10.0.0.4") });
        b.ports[0].gids = vec![fixture::gid(0, "fe80::5054:ff:fe00:2")];
        let s = text(&[b, a]);
        let rows: Vec<&str> = s.lines().skip(2).collect();
        assert_eq!(
            rows,
            [
                "rxe0\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe00:0001\t\t\tv2\teth0",
                "rxe0\t1\t1\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1  \tv2\teth0",
                "rxe0\t1\t10\t0000:0000:0000:0000:0000:ffff:0a00:000a\t10.0.0.10  \tv2\teth0",
                "rxe0\t1\t2\t0000:0000:0000:0000:0000:ffff:0a00:0002\t10.0.0.2  \tv2\teth0",
                "rxe0\t1\t4\t0000:0000:0000:0000:0000:ffff:0a00:0004\t10.0.0.4  \tv2\t",
                "rxe1\t1\t0\tfe80:0000:0000:0000:5054:00ff:fe00:0002\t\t\tv2\teth0",
                "n_gids_found=6",
            ]
        );
    }
}
