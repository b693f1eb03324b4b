//! iproute2's `rdma resource show qp|cq|mr|pd|cm_id|ctx|srq` lines
//! (rdma/res-qp.c, res-cq.c, res-mr.c, res-pd.c, res-cmid.c, res-ctx.c,
//! res-srq.c, iproute2 6.1), text and JSON, from the ring's RES_ENTRY answer.
//!
//! Which fields a line has follows Linux 6.1's nldev, which sends an
//! attribute only where it applies: RC and UC QPs have `rqpn`, `rq-psn`
//! and `path-mig-state`; a QP without a port (before INIT) prints
//! `link DEV/-`; objects of a host context have `ctxn` (CQ, PD), `pdn`
//! (QP, MR) and `pid`, the appliance's own have none of those and print
//! `comm [NAME]`; only the appliance's CQs have `poll-ctx`. The appliance
//! has no adaptive moderation (`adaptive-moderation off`). Every text field
//! ends in a blank, as iproute2 prints them.

use core::fmt::{self, Write};

use super::json::JsonObject;
use super::words::name;
use crate::cm::{CmSockAddr, af};
use crate::cmd::{ResEntry, SRQ_QP_RUNS, qp_state, res_kind, res_owner};

/// The kind named on the command line (`qp`, `cq`, `mr`, `pd`, `cm_id`,
/// `ctx`, `srq`; iproute2 takes no abbreviations of these).
pub fn kind_of(word: &str) -> Option<u32> {
    match word {
        "qp" => Some(res_kind::QP),
        "cq" => Some(res_kind::CQ),
        "mr" => Some(res_kind::MR),
        "pd" => Some(res_kind::PD),
        "cm_id" => Some(res_kind::CM_ID),
        "ctx" => Some(res_kind::CTX),
        "srq" => Some(res_kind::SRQ),
        _ => None,
    }
}

/// `enum ib_qp_type` as iproute2 spells it (`qp_types_to_str`).
pub fn qp_type(t: u8) -> &'static str {
    const NAMES: [&str; 11] =
        ["SMI", "GSI", "RC", "UC", "UD", "RAW_IPV6", "RAW_ETHERTYPE", "UNKNOWN", "RAW_PACKET", "XRC_INI", "XRC_TGT"];
    NAMES.get(usize::from(t)).copied().unwrap_or("UNKNOWN")
}

/// `enum ib_qp_state` as iproute2 spells it.
pub fn state(s: u8) -> &'static str {
    const NAMES: [&str; 7] = ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"];
    debug_assert_eq!(NAMES[qp_state::RTS as usize], "RTS");
    NAMES.get(usize::from(s)).copied().unwrap_or("UNKNOWN")
}

fn path_mig(s: u8) -> &'static str {
    ["MIGRATED", "REARM", "ARMED"].get(usize::from(s)).copied().unwrap_or("UNKNOWN")
}

/// `enum ib_srq_type` as iproute2 spells it.
fn srq_type(t: u8) -> &'static str {
    ["BASIC", "XRC", "TM"].get(usize::from(t)).copied().unwrap_or("UNKNOWN")
}

fn poll_ctx(p: u8) -> &'static str {
    ["DIRECT", "SOFTIRQ", "WORKQUEUE", "UNBOUND_WORKQUEUE"].get(usize::from(p)).copied().unwrap_or("UNKNOWN")
}

/// `enum rdma_cm_state` (Linux 6.1) as iproute2 spells it.
fn cm_state(s: u8) -> &'static str {
    const NAMES: [&str; 11] = [
        "IDLE",
        "ADDR_QUERY",
        "ADDR_RESOLVED",
        "ROUTE_QUERY",
        "ROUTE_RESOLVED",
        "CONNECT",
        "DISCONNECT",
        "ADDR_BOUND",
        "LISTEN",
        "DEVICE_REMOVAL",
        "DESTROYING",
    ];
    NAMES.get(usize::from(s)).copied().unwrap_or("UNKNOWN")
}

/// A port space as iproute2 names it (`RDMA_PS_IB` too is "IPoIB" there).
fn ps(p: u16) -> &'static str {
    match p {
        0x0002 | 0x013f => "IPoIB",
        0x0106 => "TCP",
        0x0111 => "UDP",
        _ => "---",
    }
}

/// `ADDR:PORT` as iproute2 prints a CM id's address (`inet_ntop`).
fn sockaddr(a: &CmSockAddr) -> alloc::string::String {
    match a.family {
        af::INET6 => alloc::format!("{}:{}", core::net::Ipv6Addr::from(a.addr), a.port),
        _ => {
            let [b0, b1, b2, b3, ..] = a.addr;
            alloc::format!("{}:{}", core::net::Ipv4Addr::new(b0, b1, b2, b3), a.port)
        }
    }
}

/// RC and UC QPs are connected: nldev sends their remote QPN, RQ PSN and
/// path migration state.
fn connected(e: &ResEntry) -> bool {
    matches!(e.qp_type, 2 | 3)
}

fn user(e: &ResEntry) -> bool {
    e.owner == res_owner::USER
}

/// The value a field prints, as a filter compares it (`rdma resource show
/// qp lqpn 17`): `None` for a field the line does not have.
pub fn field(e: &ResEntry, key: &str) -> Option<FieldValue> {
    use FieldValue::{Num, Str};
    let k = e.kind;
    let v = match key {
        "lqpn" if k == res_kind::QP => Num(e.num),
        "rqpn" | "rq-psn" if k == res_kind::QP && connected(e) => Num(if key == "rqpn" { e.rqpn } else { e.rq_psn }),
        "sq-psn" if k == res_kind::QP => Num(e.sq_psn),
        "type" if k == res_kind::QP => Str(qp_type(e.qp_type)),
        "state" if k == res_kind::QP => Str(state(e.state)),
        "path-mig-state" if k == res_kind::QP && connected(e) => Str(path_mig(e.path_mig_state)),
        "cqn" if k == res_kind::CQ => Num(e.num),
        "mrn" if k == res_kind::MR => Num(e.num),
        "pdn" if k == res_kind::PD => Num(e.num),
        "pdn" if (k == res_kind::QP || k == res_kind::MR) && user(e) => Num(e.pdn),
        "users" if k == res_kind::CQ || k == res_kind::PD => Num(e.users),
        "cqe" if k == res_kind::CQ => Num(e.cqe),
        "mrlen" if k == res_kind::MR => return u32::try_from(e.mrlen).ok().map(Num),
        "ctxn" if (k == res_kind::CQ || k == res_kind::PD) && user(e) => Num(e.ctxn),
        "cm-idn" if k == res_kind::CM_ID => Num(e.num),
        "ctxn" if k == res_kind::CTX => Num(e.num),
        "srqn" if k == res_kind::SRQ => Num(e.num),
        "type" if k == res_kind::SRQ => Str(srq_type(e.srq_type)),
        "pdn" if k == res_kind::SRQ => Num(e.pdn),
        "state" if k == res_kind::CM_ID => Str(cm_state(e.state)),
        "lqpn" if k == res_kind::CM_ID && e.cm_lqpn != 0 => Num(e.cm_lqpn),
        "qp-type" if k == res_kind::CM_ID && e.cm_lqpn != 0 => Str(qp_type(e.qp_type)),
        "ps" if k == res_kind::CM_ID => Str(ps(e.ps)),
        "pid" if user(e) => Num(e.pid),
        _ => return None,
    };
    Some(v)
}

/// A field's value for [`field`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValue {
    Num(u32),
    Str(&'static str),
}

impl FieldValue {
    /// Whether a filter's value selects this one: a number, a list of
    /// numbers and ranges (`1,3-5`), or a name, as iproute2 compares them.
    pub fn matches(self, filter: &str) -> bool {
        match self {
            FieldValue::Str(s) => s == filter,
            FieldValue::Num(n) => filter.split(',').any(|part| match part.split_once('-') {
                Some((lo, hi)) => matches!((lo.parse::<u32>(), hi.parse::<u32>()), (Ok(l), Ok(h)) if l <= n && n <= h),
                None => part.parse::<u32>() == Ok(n),
            }),
        }
    }
}

/// The names a filter may use for `kind` (iproute2's filter lists).
pub fn filter_names(kind: u32) -> &'static [&'static str] {
    match kind {
        res_kind::QP => &["lqpn", "rqpn", "pid", "sq-psn", "rq-psn", "type", "path-mig-state", "state", "pdn"],
        res_kind::CQ => &["cqn", "cqe", "users", "pid", "ctxn"],
        res_kind::MR => &["mrn", "rkey", "lkey", "mrlen", "pid", "pdn"],
        res_kind::PD => &["pdn", "users", "pid", "ctxn"],
        res_kind::CM_ID => &["cm-idn", "lqpn", "qp-type", "pid", "state", "ps"],
        res_kind::CTX => &["ctxn", "pid"],
        res_kind::SRQ => &["srqn", "type", "pdn", "cqn", "lqpn", "pid"],
        _ => &[],
    }
}

/// `e` if every `(key, value)` filter selects it, as iproute2 filters:
/// each key names one of the line's fields ([`field`]). An SRQ's `lqpn`
/// filter keeps the QPs it names in the SRQ's list, and the SRQ only if
/// one is left.
pub fn filtered(e: &ResEntry, filters: &[(&str, &str)]) -> Option<ResEntry> {
    let mut e = *e;
    for &(key, value) in filters {
        if e.kind == res_kind::SRQ && key == "lqpn" {
            e = srq_qps_named(&e, value)?;
        } else if !field(&e, key).is_some_and(|f| f.matches(value)) {
            return None;
        }
    }
    Some(e)
}

/// An SRQ's QP runs cut down to the QPNs `filter` names (`None` when
/// none is left), each run split where a QPN is not named.
fn srq_qps_named(e: &ResEntry, filter: &str) -> Option<ResEntry> {
    let mut out = ResEntry { srq_runs: 0, srq_qps: [[0; 2]; SRQ_QP_RUNS], ..*e };
    let mut n = 0;
    for &[first, last] in runs(e) {
        let mut open: Option<[u32; 2]> = None;
        for q in first..=last {
            if FieldValue::Num(q).matches(filter) {
                open = Some(open.map_or([q, q], |[a, _]| [a, q]));
            } else if let Some(r) = open.take() {
                push_run(&mut out, &mut n, r);
            }
        }
        if let Some(r) = open {
            push_run(&mut out, &mut n, r);
        }
    }
    (n > 0).then_some(out)
}

fn push_run(e: &mut ResEntry, n: &mut usize, r: [u32; 2]) {
    match e.srq_qps.get_mut(*n) {
        Some(slot) => {
            *slot = r;
            *n += 1;
            e.srq_runs = *n as u8;
        }
        None => e.srq_runs_cut = 1,
    }
}

/// The runs of QPNs an SRQ entry carries.
fn runs(e: &ResEntry) -> &[[u32; 2]] {
    &e.srq_qps[..usize::from(e.srq_runs).min(SRQ_QP_RUNS)]
}

/// A run as iproute2 prints it: `17` or `17-32`.
fn run_text(&[first, last]: &[u32; 2]) -> alloc::string::String {
    if first == last { alloc::format!("{first}") } else { alloc::format!("{first}-{last}") }
}

/// The owner's command name, or `None` when the host gave none (an older
/// library: Linux prints no comm when it cannot read it either).
fn comm(e: &ResEntry) -> Option<&str> {
    Some(name(&e.comm)).filter(|c| !c.is_empty())
}

/// One object's text line; `dev` is its device's name.
pub fn write(out: &mut dyn Write, dev: &str, e: &ResEntry) -> fmt::Result {
    if e.kind == res_kind::CM_ID {
        // The addresses come after the owner on this line.
        if e.port != 0 {
            write!(out, "link {dev}/{} ", e.port)?;
        } else {
            write!(out, "link {dev}/- ")?;
        }
        write!(out, "cm-idn {} ", e.num)?;
        if e.cm_lqpn != 0 {
            write!(out, "lqpn {} qp-type {} ", e.cm_lqpn, qp_type(e.qp_type))?;
        }
        write!(out, "state {} ps {} ", cm_state(e.state), ps(e.ps))?;
        write!(out, "pid {} ", e.pid)?;
        if let Some(c) = comm(e) {
            write!(out, "comm {c} ")?;
        }
        if e.src.family != 0 {
            write!(out, "src-addr {} ", sockaddr(&e.src))?;
        }
        if e.dst.family != 0 {
            write!(out, "dst-addr {} ", sockaddr(&e.dst))?;
        }
        return writeln!(out);
    }
    match e.kind {
        res_kind::QP => {
            if e.port != 0 {
                write!(out, "link {dev}/{} ", e.port)?;
            } else {
                write!(out, "link {dev}/- ")?;
            }
            write!(out, "lqpn {} ", e.num)?;
            if connected(e) {
                write!(out, "rqpn {} ", e.rqpn)?;
            }
            write!(out, "type {} state {} ", qp_type(e.qp_type), state(e.state))?;
            if connected(e) {
                write!(out, "rq-psn {} ", e.rq_psn)?;
            }
            write!(out, "sq-psn {} ", e.sq_psn)?;
            if connected(e) {
                write!(out, "path-mig-state {} ", path_mig(e.path_mig_state))?;
            }
            if user(e) {
                write!(out, "pdn {} ", e.pdn)?;
            }
        }
        res_kind::CQ => {
            write!(out, "dev {dev} cqn {} cqe {} users {} ", e.num, e.cqe, e.users)?;
            if !user(e) {
                write!(out, "poll-ctx {} ", poll_ctx(e.poll_ctx))?;
            }
            write!(out, "adaptive-moderation off ")?;
            if user(e) {
                write!(out, "ctxn {} ", e.ctxn)?;
            }
        }
        res_kind::CTX => write!(out, "dev {dev} ctxn {} ", e.num)?,
        res_kind::SRQ => {
            write!(out, "dev {dev} srqn {} type {} ", e.num, srq_type(e.srq_type))?;
            if !runs(e).is_empty() {
                write!(out, "lqpn ")?;
                for (i, r) in runs(e).iter().enumerate() {
                    write!(out, "{}{}", if i > 0 { "," } else { "" }, run_text(r))?;
                }
                write!(out, " ")?;
            }
            write!(out, "pdn {} ", e.pdn)?;
        }
        res_kind::MR => {
            write!(out, "dev {dev} mrn {} rkey {:#x} lkey {:#x} mrlen {} ", e.num, e.rkey, e.lkey, e.mrlen)?;
            if user(e) {
                write!(out, "pdn {} ", e.pdn)?;
            }
        }
        _ => {
            write!(out, "dev {dev} pdn {} local_dma_lkey {:#x} users {} ", e.num, e.lkey, e.users)?;
            if user(e) {
                write!(out, "ctxn {} ", e.ctxn)?;
            }
        }
    }
    if user(e) {
        write!(out, "pid {} ", e.pid)?;
        if let Some(c) = comm(e) {
            write!(out, "comm {c} ")?;
        }
    } else if let Some(c) = comm(e) {
        write!(out, "comm [{c}] ")?;
    }
    writeln!(out)
}

/// One object's JSON members (`rdma -j resource show qp`); keys and types
/// are iproute2's: numbers as numbers, keys as hex strings without `0x`,
/// the kernel's comm without brackets.
pub fn write_json(o: &mut JsonObject<'_, '_>, dev_index: u32, dev: &str, e: &ResEntry) -> fmt::Result {
    o.uint("ifindex", u64::from(dev_index))?;
    o.str("ifname", dev)?;
    if e.kind == res_kind::CM_ID {
        if e.port != 0 {
            o.uint("port", u64::from(e.port))?;
        }
        o.uint("cm-idn", u64::from(e.num))?;
        if e.cm_lqpn != 0 {
            o.uint("lqpn", u64::from(e.cm_lqpn))?;
            o.str("qp-type", qp_type(e.qp_type))?;
        }
        o.str("state", cm_state(e.state))?;
        o.str("ps", ps(e.ps))?;
        o.uint("pid", u64::from(e.pid))?;
        if let Some(c) = comm(e) {
            o.str("comm", c)?;
        }
        if e.src.family != 0 {
            o.str("src-addr", &sockaddr(&e.src))?;
        }
        if e.dst.family != 0 {
            o.str("dst-addr", &sockaddr(&e.dst))?;
        }
        return Ok(());
    }
    match e.kind {
        res_kind::QP => {
            if e.port != 0 {
                o.uint("port", u64::from(e.port))?;
            }
            o.uint("lqpn", u64::from(e.num))?;
            if connected(e) {
                o.uint("rqpn", u64::from(e.rqpn))?;
            }
            o.str("type", qp_type(e.qp_type))?;
            o.str("state", state(e.state))?;
            if connected(e) {
                o.uint("rq-psn", u64::from(e.rq_psn))?;
            }
            o.uint("sq-psn", u64::from(e.sq_psn))?;
            if connected(e) {
                o.str("path-mig-state", path_mig(e.path_mig_state))?;
            }
            if user(e) {
                o.uint("pdn", u64::from(e.pdn))?;
            }
        }
        res_kind::CQ => {
            o.uint("cqn", u64::from(e.num))?;
            o.uint("cqe", u64::from(e.cqe))?;
            o.uint("users", u64::from(e.users))?;
            if !user(e) {
                o.str("poll-ctx", poll_ctx(e.poll_ctx))?;
            }
            o.bool("adaptive-moderation", false)?;
            if user(e) {
                o.uint("ctxn", u64::from(e.ctxn))?;
            }
        }
        res_kind::CTX => o.uint("ctxn", u64::from(e.num))?,
        res_kind::SRQ => {
            o.uint("srqn", u64::from(e.num))?;
            o.str("type", srq_type(e.srq_type))?;
            if !runs(e).is_empty() {
                let list: alloc::vec::Vec<alloc::string::String> = runs(e).iter().map(run_text).collect();
                o.strs("lqpn", &list.iter().map(|s| s.as_str()).collect::<alloc::vec::Vec<_>>())?;
            }
            o.uint("pdn", u64::from(e.pdn))?;
        }
        res_kind::MR => {
            o.uint("mrn", u64::from(e.num))?;
            o.str("rkey", &hex(e.rkey))?;
            o.str("lkey", &hex(e.lkey))?;
            o.uint("mrlen", e.mrlen)?;
            if user(e) {
                o.uint("pdn", u64::from(e.pdn))?;
            }
        }
        _ => {
            o.uint("pdn", u64::from(e.num))?;
            o.str("local_dma_lkey", &hex(e.lkey))?;
            o.uint("users", u64::from(e.users))?;
            if user(e) {
                o.uint("ctxn", u64::from(e.ctxn))?;
            }
        }
    }
    if user(e) {
        o.uint("pid", u64::from(e.pid))?;
    }
    if let Some(c) = comm(e) {
        o.str("comm", c)?;
    }
    Ok(())
}

/// A key as iproute2's JSON has it: lower-case hex, no `0x`.
fn hex(v: u32) -> alloc::string::String {
    alloc::format!("{v:x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::show::json::JsonList;
    use crate::wire::name_field;
    use alloc::string::String;

    /// The objects of Linux 6.1's fixtures: an ibv_rc_pingpong server's QP
    /// (INIT), CQ, MR and PD, the GSI QP1.
    fn rc_qp() -> ResEntry {
        ResEntry {
            kind: res_kind::QP,
            port: 1,
            num: 17,
            qp_type: 2,
            state: 1,
            pdn: 1,
            ctxn: 2,
            pid: 151,
            comm: name_field("ibv_rc_pingpong").unwrap(),
            ..Default::default()
        }
    }

    fn gsi() -> ResEntry {
        ResEntry::gsi(0, 0)
    }

    fn line(e: &ResEntry) -> String {
        let mut s = String::new();
        write(&mut s, "rxe0", e).unwrap();
        s
    }

    fn json(e: &ResEntry) -> String {
        let mut s = String::new();
        let mut l = JsonList::new(&mut s, false).unwrap();
        l.object(|o| write_json(o, 0, "rxe0", e)).unwrap();
        l.finish().unwrap();
        s
    }

    #[test]
    fn qp_lines_are_linux_6_1s() {
        assert_eq!(
            line(&rc_qp()),
            "link rxe0/1 lqpn 17 rqpn 0 type RC state INIT rq-psn 0 sq-psn 0 path-mig-state MIGRATED pdn 1 pid 151 comm ibv_rc_pingpong \n"
        );
        assert_eq!(line(&gsi()), "link rxe0/1 lqpn 1 type GSI state RTS sq-psn 0 comm [ib_core] \n");
        let fresh = ResEntry { port: 0, state: 0, qp_type: 4, ..rc_qp() };
        assert_eq!(
            line(&fresh),
            "link rxe0/- lqpn 17 type UD state RESET sq-psn 0 pdn 1 pid 151 comm ibv_rc_pingpong \n"
        );
        // A state or type no table names, and a host that gave no name.
        let odd = ResEntry { state: 200, qp_type: 99, comm: [0; 16], ..rc_qp() };
        assert!(line(&odd).contains("type UNKNOWN state UNKNOWN "));
        assert!(line(&odd).ends_with("pid 151 \n"));
        assert_eq!(
            json(&rc_qp()),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"port\":1,\"lqpn\":17,\"rqpn\":0,\"type\":\"RC\",\"state\":\"INIT\",\"rq-psn\":0,\"sq-psn\":0,\"path-mig-state\":\"MIGRATED\",\"pdn\":1,\"pid\":151,\"comm\":\"ibv_rc_pingpong\"}]\n"
        );
        assert_eq!(
            json(&gsi()),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"port\":1,\"lqpn\":1,\"type\":\"GSI\",\"state\":\"RTS\",\"sq-psn\":0,\"comm\":\"ib_core\"}]\n"
        );
    }

    #[test]
    fn cq_mr_pd_lines_are_linux_6_1s() {
        let cq = ResEntry { kind: res_kind::CQ, num: 1, cqe: 511, users: 2, ..rc_qp() };
        assert_eq!(
            line(&cq),
            "dev rxe0 cqn 1 cqe 511 users 2 adaptive-moderation off ctxn 2 pid 151 comm ibv_rc_pingpong \n"
        );
        let kcq = ResEntry { poll_ctx: 2, ..ResEntry { kind: res_kind::CQ, num: 0, cqe: 1023, users: 2, ..gsi() } };
        assert_eq!(
            line(&kcq),
            "dev rxe0 cqn 0 cqe 1023 users 2 poll-ctx WORKQUEUE adaptive-moderation off comm [ib_core] \n"
        );
        assert_eq!(
            json(&cq),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"cqn\":1,\"cqe\":511,\"users\":2,\"adaptive-moderation\":false,\"ctxn\":2,\"pid\":151,\"comm\":\"ibv_rc_pingpong\"}]\n"
        );
        let mr = ResEntry { kind: res_kind::MR, num: 0, lkey: 0x29b, rkey: 0, mrlen: 4096, ..rc_qp() };
        assert_eq!(line(&mr), "dev rxe0 mrn 0 rkey 0x0 lkey 0x29b mrlen 4096 pdn 1 pid 151 comm ibv_rc_pingpong \n");
        assert_eq!(
            json(&mr),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"mrn\":0,\"rkey\":\"0\",\"lkey\":\"29b\",\"mrlen\":4096,\"pdn\":1,\"pid\":151,\"comm\":\"ibv_rc_pingpong\"}]\n"
        );
        let pd = ResEntry {
            kind: res_kind::PD,
            num: 2,
            users: 0,
            ctxn: 3,
            pid: 152,
            comm: name_field("rping").unwrap(),
            ..rc_qp()
        };
        assert_eq!(line(&pd), "dev rxe0 pdn 2 local_dma_lkey 0x0 users 0 ctxn 3 pid 152 comm rping \n");
        assert_eq!(
            json(&pd),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"pdn\":2,\"local_dma_lkey\":\"0\",\"users\":0,\"ctxn\":3,\"pid\":152,\"comm\":\"rping\"}]\n"
        );
    }

    #[test]
    fn cm_id_lines_are_linux_6_1s() {
        let id = ResEntry {
            kind: res_kind::CM_ID,
            port: 1,
            num: 0,
            state: 8,
            ps: 0x0106,
            pid: 152,
            comm: name_field("rping").unwrap(),
            src: CmSockAddr::ipv4([10, 0, 0, 3], 7471),
            dst: CmSockAddr::ipv4([0; 4], 0),
            ..Default::default()
        };
        assert_eq!(
            line(&id),
            "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 152 comm rping src-addr 10.0.0.3:7471 dst-addr 0.0.0.0:0 \n"
        );
        assert_eq!(
            json(&id),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"port\":1,\"cm-idn\":0,\"state\":\"LISTEN\",\"ps\":\"TCP\",\"pid\":152,\"comm\":\"rping\",\"src-addr\":\"10.0.0.3:7471\",\"dst-addr\":\"0.0.0.0:0\"}]\n"
        );
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[15] = 1;
        let v6 = ResEntry { state: 5, ps: 0x0111, src: CmSockAddr::ipv6(ll, 1, 2), ..id };
        assert!(line(&v6).contains("state CONNECT ps UDP "), "{}", line(&v6));
        assert!(line(&v6).contains("src-addr fe80::1:1 "), "{}", line(&v6));
        assert!(field(&id, "state").unwrap().matches("LISTEN"));
    }

    #[test]
    fn wildcard_and_connected_cm_ids_are_linux_6_1s() {
        // A wildcard listener's per-device id (captured from Linux 6.1).
        let any = ResEntry {
            kind: res_kind::CM_ID,
            port: 0,
            num: 1,
            state: 8,
            ps: 0x0106,
            pid: 172,
            comm: name_field("rping").unwrap(),
            src: CmSockAddr::ipv4([0; 4], 7472),
            ..Default::default()
        };
        assert_eq!(
            line(&any),
            "link rxe0/- cm-idn 1 state LISTEN ps TCP pid 172 comm rping src-addr 0.0.0.0:7472 
"
        );
        assert_eq!(
            json(&any),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"cm-idn\":1,\"state\":\"LISTEN\",\"ps\":\"TCP\",\"pid\":172,\"comm\":\"rping\",\"src-addr\":\"0.0.0.0:7472\"}]\n"
        );
        // A connected id names its QP (iproute2 6.1's res-cmid.c order).
        let conn =
            ResEntry { port: 1, state: 5, cm_lqpn: 18, qp_type: 2, dst: CmSockAddr::ipv4([10, 0, 0, 1], 40000), ..any };
        assert_eq!(
            line(&conn),
            "link rxe0/1 cm-idn 1 lqpn 18 qp-type RC state CONNECT ps TCP pid 172 comm rping src-addr 0.0.0.0:7472 dst-addr 10.0.0.1:40000 \n"
        );
        assert!(json(&conn).contains("\"cm-idn\":1,\"lqpn\":18,\"qp-type\":\"RC\",\"state\""), "{}", json(&conn));
        assert_eq!(field(&conn, "lqpn"), Some(FieldValue::Num(18)));
        assert_eq!(field(&any, "lqpn"), None);
    }

    #[test]
    fn ctx_and_srq_lines_are_linux_6_1s() {
        let ctx =
            ResEntry { kind: res_kind::CTX, num: 4, pid: 171, comm: name_field("ibv_srq_pingpon").unwrap(), ..rc_qp() };
        assert_eq!(line(&ctx), "dev rxe0 ctxn 4 pid 171 comm ibv_srq_pingpon \n");
        assert_eq!(
            json(&ctx),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"ctxn\":4,\"pid\":171,\"comm\":\"ibv_srq_pingpon\"}]\n"
        );
        let mut qps = [[0; 2]; SRQ_QP_RUNS];
        qps[0] = [18, 33];
        let srq = ResEntry { kind: res_kind::SRQ, num: 0, pdn: 3, srq_runs: 1, srq_qps: qps, ..ctx };
        // iproute2 6.1 prints the QP list again where the owner's name
        // belongs (its name buffer is out of scope by then); we print the name.
        assert_eq!(line(&srq), "dev rxe0 srqn 0 type BASIC lqpn 18-33 pdn 3 pid 171 comm ibv_srq_pingpon \n");
        assert_eq!(
            json(&srq),
            "[{\"ifindex\":0,\"ifname\":\"rxe0\",\"srqn\":0,\"type\":\"BASIC\",\"lqpn\":[\"18-33\"],\"pdn\":3,\"pid\":171,\"comm\":\"ibv_srq_pingpon\"}]\n"
        );
        // An lqpn filter keeps the QPs it names, splitting runs; none left
        // drops the SRQ.
        let some = filtered(&srq, &[("lqpn", "18,20-22,33")]).unwrap();
        assert!(line(&some).contains(" lqpn 18,20-22,33 pdn 3 "), "{}", line(&some));
        assert!(filtered(&srq, &[("lqpn", "40")]).is_none());
        assert!(filtered(&srq, &[("srqn", "0"), ("type", "BASIC")]).is_some());
        assert!(filtered(&srq, &[("pdn", "4")]).is_none());
        // No QP on it: no lqpn field.
        let lone = ResEntry { srq_runs: 0, ..srq };
        assert_eq!(line(&lone), "dev rxe0 srqn 0 type BASIC pdn 3 pid 171 comm ibv_srq_pingpon \n");
        assert_eq!((kind_of("ctx"), kind_of("srq")), (Some(res_kind::CTX), Some(res_kind::SRQ)));
    }

    #[test]
    fn filters_compare_printed_values() {
        assert_eq!(field(&gsi(), "lqpn"), Some(FieldValue::Num(1)));
        assert!(field(&gsi(), "lqpn").unwrap().matches("1"));
        assert!(field(&rc_qp(), "lqpn").unwrap().matches("2,10-20"));
        assert!(!field(&rc_qp(), "lqpn").unwrap().matches("1"));
        assert!(field(&rc_qp(), "type").unwrap().matches("RC"));
        // The kernel's QP has no pid or rqpn: a filter on them skips it.
        assert_eq!(field(&gsi(), "pid"), None);
        assert_eq!(field(&gsi(), "rqpn"), None);
        assert_eq!(kind_of("cm_id"), Some(res_kind::CM_ID));
        assert_eq!(kind_of("q"), None);
    }
}
