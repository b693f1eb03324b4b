//! The counters of the appliance's `ip -s link` listing, by name: `rx
//! packets`, `tx dropped`, ... from the columns under its `RX:` and `TX:`
//! headers, `steer arp`, ... from its `RX steer:` line, and each drop
//! reason by its own name (`otherhost`, `arp_sender`, ...) from its `RX
//! drops:` line, which names only the reasons that counted something.

use std::collections::BTreeMap;

/// Every counter of one device's listing (of the last device, if several).
pub fn counters(out: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    for (i, l) in lines.iter().enumerate() {
        for (head, key) in [("RX:", "rx"), ("TX:", "tx")] {
            if l.starts_with(head) {
                let names = l.split_whitespace().skip(1);
                let values = lines.get(i + 1).map_or(vec![], |v| v.split_whitespace().collect());
                for (name, v) in names.zip(values) {
                    if let Ok(n) = v.parse() {
                        m.insert(format!("{key} {name}"), n);
                    }
                }
            }
        }
        for (prefix, key) in [("RX steer:", "steer"), ("RX drops:", "")] {
            if let Some(rest) = l.strip_prefix(prefix) {
                let w: Vec<&str> = rest.split_whitespace().collect();
                for p in w.chunks(2) {
                    if let [name, n] = p
                        && let Ok(n) = n.parse()
                    {
                        let k = if key.is_empty() { name.to_string() } else { format!("{key} {name}") };
                        m.insert(k, n);
                    }
                }
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_steering_and_drop_reasons_are_read() {
        let out = "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\n    \
                   link/ether 52:54:00:00:00:02 brd ff:ff:ff:ff:ff:ff\n    \
                   RX:       bytes  packets errors dropped missed  mcast\n        \
                   18434710444 18572592      0    1332      0      1\n    \
                   TX:      bytes packets errors dropped carrier collsns\n        \
                   7559438626 9572425      0 2067082       0       0\n    \
                   RX steer: rdma 18569506 arp 121 ndisc 0 stack 1633\n    \
                   RX drops: otherhost 1105 truncated 24 bad_ip_version 144\n";
        let c = counters(out);
        let get = |k: &str| c.get(k).copied();
        assert_eq!((get("rx packets"), get("rx dropped"), get("rx mcast")), (Some(18572592), Some(1332), Some(1)));
        assert_eq!((get("tx packets"), get("tx dropped"), get("tx collsns")), (Some(9572425), Some(2067082), Some(0)));
        assert_eq!((get("steer arp"), get("steer stack")), (Some(121), Some(1633)));
        assert_eq!((get("otherhost"), get("truncated"), get("arp_sender")), (Some(1105), Some(24), None));
        assert!(!counters("RX steer: rdma 1 arp 1").contains_key("otherhost"));
    }
}
