//! iproute2's `rdma resource show` summary line for one device, in the
//! order Linux's nldev lists the kinds (`pd cq qp cm_id mr ctx srq`), each
//! field ending in a blank as iproute2 prints them:
//! `0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 1 ctx 1 srq 0 `.

use core::fmt::{self, Write};

use super::json::JsonObject;
use crate::cmd::{ResEntry, ResourceCounts, res_kind, res_owner};

/// One device's line from its QUERY_RESOURCES answer (counts by kind in
/// teardown order: qp, ah, srq, mr, cq, pd; address handles are not listed,
/// as Linux lists none).
pub fn write(out: &mut dyn Write, index: u32, dev: &str, r: &ResourceCounts) -> fmt::Result {
    write!(out, "{index}: {dev}: ")?;
    for (name, n) in by_name(r) {
        write!(out, "{name} {n} ")?;
    }
    writeln!(out)
}

/// The line as `rdma -j resource show` prints it.
pub fn write_json(o: &mut JsonObject<'_, '_>, index: u32, dev: &str, r: &ResourceCounts) -> fmt::Result {
    o.uint("ifindex", u64::from(index))?;
    o.str("ifname", dev)?;
    for (name, n) in by_name(r) {
        o.uint(name, u64::from(n))?;
    }
    Ok(())
}

/// QUERY_RESOURCES' counts (the hosts' objects) with the appliance's own
/// objects among `entries` added, as Linux counts its kernel's (QP1).
pub fn with_kernel(r: &ResourceCounts, entries: &[ResEntry]) -> ResourceCounts {
    let mut out = *r;
    for e in entries.iter().filter(|e| e.owner == res_owner::KERNEL) {
        // Counts are in teardown order: qp, ah, srq, mr, cq, pd.
        let i = match e.kind {
            res_kind::QP => 0,
            res_kind::MR => 3,
            res_kind::CQ => 4,
            res_kind::PD => 5,
            _ => continue,
        };
        out.counts[i] = out.counts[i].saturating_add(1);
    }
    out
}

/// The counts in nldev's order, by iproute2's names.
fn by_name(r: &ResourceCounts) -> [(&'static str, u32); 7] {
    let [qp, _ah, srq, mr, cq, pd] = r.counts;
    [("pd", pd), ("cq", cq), ("qp", qp), ("cm_id", r.reserved), ("mr", mr), ("ctx", r.contexts), ("srq", srq)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn linux_6_1_shape() {
        let mut s = String::new();
        let r = ResourceCounts { counts: [2, 1, 0, 1, 2, 3], contexts: 2, reserved: 1 };
        write(&mut s, 0, "rxe0", &r).unwrap();
        // Linux 6.1's rxe0 with an ibv_rc_pingpong server and an rping server.
        assert_eq!(s, "0: rxe0: pd 3 cq 2 qp 2 cm_id 1 mr 1 ctx 2 srq 0 \n");
        let mut s = String::new();
        let mut l = crate::show::json::JsonList::new(&mut s, true).unwrap();
        l.object(|o| write_json(o, 0, "rxe0", &r)).unwrap();
        l.finish().unwrap();
        assert!(
            s.starts_with("[ {\n        \"ifindex\": 0,\n        \"ifname\": \"rxe0\",\n        \"pd\": 3,\n"),
            "{s}"
        );
        assert!(s.ends_with("        \"srq\": 0\n    } ]\n"), "{s}");
        // The appliance's QP1 counts; a host's object is in `r` already.
        let gsi = ResEntry { kind: res_kind::QP, owner: res_owner::KERNEL, ..Default::default() };
        let host = ResEntry { kind: res_kind::PD, owner: res_owner::USER, ..Default::default() };
        assert_eq!(with_kernel(&r, &[gsi, host]).counts, [3, 1, 0, 1, 2, 3]);
    }
}
