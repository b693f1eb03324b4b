//! The exported `rdma_*` calls (rdma-core's `cma.c` surface) over
//! `verbs::cm` and our libibverbs: ids, addresses and routes, the QP's
//! moves between states as librdmacm makes them (CM_INIT_QP_ATTR, then
//! `ibv_modify_qp` on the program's QP), connect/accept/reject/disconnect,
//! events, synchronous ids and the `rdma_create_ep` helpers.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::net::SocketAddr;

use verbs::cm::{CmEvent, ConnParam, from_wire_addr};
use verbs_ring::cm::{CmRoute, NO_DEVICE, cm_event, port_space};
use verbs_ring::cmd::{self, qp_attr_mask, qp_state};

use crate::abi::ibv::*;
use crate::abi::*;
use crate::ffi::{guard, minus_one, ptr_or_errno, read_addr, write_addr};
use crate::ibv::{create_qp_ex, ibv};
use crate::state::{ChanObj, EvObj, Global, IdObj, errno_of, global, lock};

const IBV_QPT_RC: c_int = 2;
const IBV_QPT_UD: c_int = 4;

fn verr(e: verbs::Error) -> c_int {
    errno_of(&e)
}

fn is_ud(obj: &IdObj) -> bool {
    obj.id.qp_type == IBV_QPT_UD
}

/// The ring's QP attributes as `struct ibv_qp_attr` (every field written,
/// as librdmacm's copy from the kernel does).
fn qp_attr_out(a: &cmd::QpAttr) -> ibv_qp_attr {
    ibv_qp_attr {
        qp_state: a.qp_state as c_int,
        cur_qp_state: a.cur_qp_state as c_int,
        path_mtu: a.path_mtu as c_int,
        path_mig_state: a.path_mig_state as c_int,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags,
        cap: ibv_qp_cap {
            max_send_wr: a.cap.max_send_wr,
            max_recv_wr: a.cap.max_recv_wr,
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline_data: a.cap.max_inline_data,
        },
        ah_attr: ibv_ah_attr::from(&a.ah_attr),
        alt_ah_attr: ibv_ah_attr::default(),
        pkey_index: a.pkey_index,
        alt_pkey_index: 0,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: a.sq_draining,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        alt_port_num: 0,
        alt_timeout: 0,
        rate_limit: a.rate_limit,
    }
}

/// `ibv_modify_qp` on the id's QP through the process's libibverbs.
fn modify(qp: *mut ibv_qp, attr: &mut ibv_qp_attr, mask: u32) -> Result<(), c_int> {
    // SAFETY: `qp` is the id's QP, made by the program's libibverbs and not
    // destroyed (rdma_destroy_qp clears it); `attr` a live local.
    match unsafe { (ibv()?.modify_qp)(qp, attr, mask as c_int) } {
        0 => Ok(()),
        e => Err(e),
    }
}

/// CM_INIT_QP_ATTR for `state`, `adjust`, then modify the QP.
fn step(obj: &IdObj, state: u32, adjust: impl FnOnce(&mut ibv_qp_attr)) -> Result<(), c_int> {
    let (a, mask) = obj.cm.init_qp_attr(state).map_err(verr)?;
    let mut attr = qp_attr_out(&a);
    adjust(&mut attr);
    modify(obj.id.qp, &mut attr, mask)
}

/// librdmacm's `ucma_modify_qp_rtr` and `_rts`: INIT again (the access the
/// connection grants is known only now), RTR, RTS; 0xff leaves the
/// firmware's resources and depth.
fn to_rtr_rts(obj: &IdObj, resources: u8, depth: u8) -> Result<(), c_int> {
    if obj.id.qp.is_null() {
        return Ok(());
    }
    step(obj, qp_state::INIT, |_| {})?;
    step(obj, qp_state::RTR, |a| {
        if resources != RDMA_MAX_RESP_RES {
            a.max_dest_rd_atomic = resources;
        }
    })?;
    step(obj, qp_state::RTS, |a| {
        if depth != RDMA_MAX_INIT_DEPTH {
            a.max_rd_atomic = depth;
        }
    })
}

fn to_err(obj: &IdObj) {
    if !obj.id.qp.is_null() {
        let mut a = ibv_qp_attr { qp_state: qp_state::ERR as c_int, ..Default::default() };
        let _ = modify(obj.id.qp, &mut a, qp_attr_mask::STATE);
    }
}

/// The id's public fields from the route the firmware holds: addresses,
/// GIDs, path, port, and the device (`verbs`, `pd`) once it has one.
fn fill_route(g: &Global, obj: &mut IdObj, r: &CmRoute) {
    write_addr(&mut obj.id.route.addr.src_storage, from_wire_addr(&r.src));
    write_addr(&mut obj.id.route.addr.dst_storage, from_wire_addr(&r.dst));
    obj.id.route.addr.ibaddr =
        rdma_ib_addr { sgid: ibv_gid { raw: r.sgid }, dgid: ibv_gid { raw: r.ah_attr.dgid }, pkey: r.pkey.to_be() };
    if r.num_paths > 0 {
        *obj.path = ibv_sa_path_rec {
            dgid: ibv_gid { raw: r.ah_attr.dgid },
            sgid: ibv_gid { raw: r.sgid },
            flow_label: r.ah_attr.flow_label.to_be(),
            hop_limit: r.ah_attr.hop_limit,
            traffic_class: r.ah_attr.traffic_class,
            reversible: 1,
            numb_path: 1,
            pkey: r.pkey.to_be(),
            sl: r.ah_attr.sl,
            mtu_selector: 2, // exactly
            mtu: r.path_mtu,
            rate_selector: 2,
            rate: r.ah_attr.static_rate,
            packet_life_time_selector: 2,
            ..Default::default()
        };
        obj.id.route.path_rec = &mut *obj.path;
        obj.id.route.num_paths = 1;
    } else {
        obj.id.route.path_rec = std::ptr::null_mut();
        obj.id.route.num_paths = 0;
    }
    if r.dev_index != NO_DEVICE
        && let Ok(d) = g.dev(r.dev_index)
    {
        obj.id.verbs = d.ctx as *mut ibv_context;
        obj.id.port_num = u8::try_from(r.port_num).unwrap_or(1).max(1);
        if obj.id.pd.is_null() {
            obj.id.pd = d.pd as *mut ibv_pd;
        }
    }
}

fn refresh(g: &Global, obj: &mut IdObj) -> Result<(), c_int> {
    let r = obj.cm.query_route().map_err(verr)?;
    fill_route(g, obj, &r);
    Ok(())
}

fn dev_limits(g: &Global, obj: &IdObj) -> (u8, u8) {
    let idx = obj.cm.route().map_or(NO_DEVICE, |r| r.dev_index);
    g.dev(idx).map_or((1, 1), |d| (d.max_init_depth, d.max_resp_res))
}

/// `ucma_valid_param`.
fn valid_param(g: &Global, obj: &IdObj, p: Option<&rdma_conn_param>) -> Result<(), c_int> {
    if obj.id.ps != c_int::from(port_space::TCP) {
        return Ok(());
    }
    let Some(p) = p else {
        return if obj.id.qp.is_null() { Err(libc::EINVAL) } else { Ok(()) };
    };
    let (max_init, max_resp) = dev_limits(g, obj);
    if (p.responder_resources != RDMA_MAX_RESP_RES && p.responder_resources > max_resp)
        || (p.initiator_depth != RDMA_MAX_INIT_DEPTH && p.initiator_depth > max_init)
    {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// The conn param the firmware gets: the id's resources and depth, the
/// caller's flow control, retries and private data.
///
/// # Safety
/// `p.private_data` points to `p.private_data_len` readable bytes (the C
/// API's promise).
unsafe fn conn_param(obj: &IdObj, p: Option<&rdma_conn_param>, qp_num: u32, srq: bool) -> ConnParam {
    let st = lock(&obj.st);
    let mut c = ConnParam {
        responder_resources: st.responder_resources,
        initiator_depth: st.initiator_depth,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num,
        srq,
        ..Default::default()
    };
    if let Some(p) = p {
        c.flow_control = p.flow_control;
        c.retry_count = p.retry_count;
        c.rnr_retry_count = p.rnr_retry_count;
        if !p.private_data.is_null() && p.private_data_len > 0 {
            // SAFETY: the caller's promise.
            let d = unsafe { std::slice::from_raw_parts(p.private_data.cast::<u8>(), p.private_data_len.into()) };
            c.private_data = d.to_vec();
        }
    }
    c
}

/// librdmacm's `ucma_complete`: a synchronous id waits for the event its
/// call brings and keeps it in `id->event`.
fn complete(g: &Global, obj: &mut IdObj) -> Result<(), c_int> {
    if !obj.sync {
        return Ok(());
    }
    if !obj.id.event.is_null() {
        let _ = g.drop_event(obj.id.event);
        obj.id.event = std::ptr::null_mut();
    }
    let ev = get_event(g, obj.id.channel)?;
    obj.id.event = ev;
    // SAFETY: an event `get_event` just made.
    let (status, kind) = unsafe { ((*ev).status, (*ev).event) };
    if status != 0 {
        return Err(if kind == cm_event::REJECTED as c_int {
            libc::ECONNREFUSED
        } else if status < 0 {
            -status
        } else {
            status
        });
    }
    Ok(())
}

/// The next event of channel `ch`, processed as librdmacm does.
fn get_event(g: &Global, ch: *mut rdma_event_channel) -> Result<*mut rdma_cm_event, c_int> {
    let chan = g.chan(ch)?;
    loop {
        let mut count = 0u64;
        // SAFETY: the channel's eventfd, open while `chan` is; eight bytes
        // into a local, as eventfd(2) gives them.
        let n = unsafe { libc::read(chan.inner.fd, (&raw mut count).cast(), 8) };
        if n < 0 {
            let e = crate::ibv::errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        if n != 8 {
            return Err(libc::ENODATA);
        }
        let Some(raw) = chan.inner.pop() else { continue };
        if let Some(ev) = process(g, chan, raw) {
            return Ok(ev.cast());
        }
    }
}

/// One event as the program sees it, after librdmacm's processing; `None`
/// for one it does not show.
fn process(g: &Global, chan: &ChanObj, mut raw: CmEvent) -> Option<*mut EvObj> {
    let (id_ptr, listen_ptr): (*mut IdObj, *mut IdObj);
    if raw.event == cm_event::CONNECT_REQUEST {
        let listener = g.id_by_handle(raw.listen_id?)?;
        let cm = raw.request.take()?;
        let ch = g.chan(listener.id.channel).ok()?;
        let new = g.register_id(cm, ch, false, listener.id.ps, listener.id.qp_type);
        // SAFETY: just registered, not yet seen by the program.
        let obj = unsafe { &mut *new };
        obj.id.context = listener.id.context;
        {
            let mut st = lock(&obj.st);
            st.responder_resources = raw.param.responder_resources;
            st.initiator_depth = raw.param.initiator_depth;
        }
        if let Some(r) = obj.cm.route() {
            fill_route(g, obj, &r);
        }
        id_ptr = new;
        listen_ptr = listener as *mut IdObj;
    } else {
        let obj = g.id_by_handle(raw.id)?;
        // Events of an id routed elsewhere meanwhile still belong to it.
        let _ = chan;
        match raw.event {
            cm_event::ADDR_RESOLVED | cm_event::ROUTE_RESOLVED | cm_event::ADDR_ERROR | cm_event::ROUTE_ERROR => {
                if let Some(r) = obj.cm.route() {
                    fill_route(g, obj, &r);
                }
            }
            cm_event::CONNECT_RESPONSE if !obj.id.qp.is_null() => {
                let done = to_rtr_rts(obj, RDMA_MAX_RESP_RES, RDMA_MAX_INIT_DEPTH)
                    .and_then(|()| obj.cm.establish().map_err(verr));
                match done {
                    Ok(()) => raw.event = cm_event::ESTABLISHED,
                    Err(e) => {
                        to_err(obj);
                        let _ = obj.cm.reject(&[]);
                        lock(&obj.st).connect_error = true;
                        raw.event = cm_event::CONNECT_ERROR;
                        raw.status = -e;
                    }
                }
            }
            cm_event::REJECTED | cm_event::DISCONNECTED if lock(&obj.st).connect_error => return None,
            cm_event::REJECTED => to_err(obj),
            _ => {}
        }
        id_ptr = obj as *mut IdObj;
        listen_ptr = std::ptr::null_mut();
    }
    let evp = g.new_event();
    // SAFETY: a fresh event box and the two ids just looked up (registered,
    // live).
    unsafe {
        let e = &mut *evp;
        e.ev.id = id_ptr.cast();
        e.ev.listen_id = listen_ptr.cast();
        e.ev.event = raw.event as c_int;
        e.ev.status = raw.status;
        let n = raw.param.private_data.len().min(e.private.len());
        e.private[..n].copy_from_slice(&raw.param.private_data[..n]);
        let pd = if n > 0 { e.private.as_ptr().cast::<c_void>() } else { std::ptr::null() };
        if is_ud(&*id_ptr) {
            let ah = raw
                .ah_attr
                .or_else(|| {
                    (*id_ptr).cm.route().map(|r| cmd::AhAttr { is_global: 1, port_num: r.port_num as u8, ..r.ah_attr })
                })
                .map(|a| ibv_ah_attr::from(&a))
                .unwrap_or_default();
            e.ev.param.ud = rdma_ud_param {
                private_data: pd,
                private_data_len: n as u8,
                ah_attr: ah,
                qp_num: raw.param.qp_num,
                qkey: raw.param.qkey,
            };
        } else {
            e.ev.param.conn = rdma_conn_param {
                private_data: pd,
                private_data_len: n as u8,
                responder_resources: raw.param.responder_resources,
                initiator_depth: raw.param.initiator_depth,
                flow_control: raw.param.flow_control,
                retry_count: raw.param.retry_count,
                rnr_retry_count: raw.param.rnr_retry_count,
                srq: u8::from(raw.param.srq),
                qp_num: raw.param.qp_num,
            };
        }
    }
    Some(evp)
}

fn with_id(id: *mut rdma_cm_id, f: impl FnOnce(&'static Global, &mut IdObj) -> Result<(), c_int>) -> c_int {
    guard(-1, || {
        minus_one((|| {
            let g = global()?;
            let obj = g.id(id)?;
            f(g, obj)
        })())
    })
}

// ---- event channels and ids ----

#[unsafe(no_mangle)]
pub extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    guard(std::ptr::null_mut(), || ptr_or_errno(global().and_then(|g| g.new_channel()).map(|p| p.cast())))
}

/// # Safety
/// `channel` came from `rdma_create_event_channel` (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    guard((), || {
        if let Ok(g) = global() {
            let _ = g.drop_channel(channel);
        }
    })
}

fn create_id(
    g: &'static Global,
    channel: *mut rdma_event_channel,
    context: *mut c_void,
    ps: c_int,
    qp_type: c_int,
) -> Result<*mut IdObj, c_int> {
    let ps16 = u16::try_from(ps).map_err(|_| libc::EINVAL)?;
    if !port_space::is_known(ps16) {
        return Err(libc::EINVAL);
    }
    let (ch, sync) = if channel.is_null() {
        (g.new_channel()?, true)
    } else {
        (g.chan(channel)? as *const ChanObj as *mut ChanObj, false)
    };
    let cm = match g.chan.create_id_with(ps16, qp_type as u8) {
        Ok(cm) => cm,
        Err(e) => {
            if sync {
                let _ = g.drop_channel(ch.cast());
            }
            return Err(verr(e));
        }
    };
    // SAFETY: `ch` is registered (made or checked above) and lives at
    // least as long as the id that now holds it.
    let p = g.register_id(cm, unsafe { &*ch }, sync, ps, qp_type);
    // SAFETY: just registered, not yet handed out.
    unsafe { (*p).id.context = context };
    Ok(p)
}

/// # Safety
/// `id` is writable; `channel` null or ours (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    guard(-1, || {
        minus_one((|| {
            if id.is_null() {
                return Err(libc::EINVAL);
            }
            let g = global()?;
            let qp_type = if ps == c_int::from(port_space::UDP) || ps == c_int::from(port_space::IPOIB) {
                IBV_QPT_UD
            } else {
                IBV_QPT_RC
            };
            let p = create_id(g, channel, context, ps, qp_type)?;
            // SAFETY: the caller's out pointer.
            unsafe { *id = p.cast() };
            Ok(())
        })())
    })
}

/// # Safety
/// `id` came from this library (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    with_id(id, |g, obj| {
        if !obj.id.event.is_null() {
            let _ = g.drop_event(obj.id.event);
            obj.id.event = std::ptr::null_mut();
        }
        g.drop_id(id)
    })
}

/// # Safety
/// `addr` is a valid socket address (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    with_id(id, |g, obj| {
        // SAFETY: the caller's promise.
        let a = unsafe { read_addr(addr)? };
        obj.cm.bind_addr(a).map_err(verr)?;
        refresh(g, obj)
    })
}

/// # Safety
/// `src` null or a valid socket address, `dst` a valid one (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    with_id(id, |g, obj| {
        // SAFETY: the caller's promise.
        let (s, d) = unsafe { (if src.is_null() { None } else { Some(read_addr(src)?) }, read_addr(dst)?) };
        // An unspecified source is no source (as the kernel treats it).
        let s = s.filter(|a: &SocketAddr| !a.ip().is_unspecified() || a.port() != 0);
        obj.cm.resolve_addr(s, d, timeout_ms.max(0) as u32).map_err(verr)?;
        write_addr(&mut obj.id.route.addr.dst_storage, Some(d));
        complete(g, obj)
    })
}

/// # Safety
/// `id` came from this library (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    with_id(id, |g, obj| {
        obj.cm.resolve_route(timeout_ms.max(0) as u32).map_err(verr)?;
        complete(g, obj)
    })
}

/// # Safety
/// `id` came from this library (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    with_id(id, |g, obj| {
        obj.cm.listen(backlog.max(0) as u32).map_err(verr)?;
        refresh(g, obj)
    })
}

/// # Safety
/// `channel` null or ours (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int {
    with_id(id, |g, obj| {
        let (ch, sync) = if channel.is_null() {
            (g.new_channel()?, true)
        } else {
            (g.chan(channel)? as *const ChanObj as *mut ChanObj, false)
        };
        let old = (obj.sync, obj.id.channel);
        // SAFETY: `ch` is registered (made or checked above).
        *lock(&obj.sh.chan) = unsafe { (*ch).inner.clone() };
        obj.id.channel = ch.cast();
        obj.sync = sync;
        if old.0 {
            let _ = g.drop_channel(old.1);
        }
        Ok(())
    })
}

// ---- QPs and SRQs ----

fn create_cqs(obj: &mut IdObj, send: u32, recv: u32) -> Result<(), c_int> {
    let t = ibv()?;
    let ctx = obj.id.verbs;
    let cq_context = &raw mut obj.id as *mut c_void;
    let one = |n: u32| -> Result<(*mut ibv_comp_channel, *mut ibv_cq), c_int> {
        // SAFETY: `ctx` is the id's open context (ours, for the process's life).
        unsafe {
            let ch = (t.create_comp_channel)(ctx);
            if ch.is_null() {
                return Err(crate::ibv::errno());
            }
            let cq = (t.create_cq)(ctx, n.max(1) as c_int, cq_context, ch, 0);
            if cq.is_null() {
                let e = crate::ibv::errno();
                (t.destroy_comp_channel)(ch);
                return Err(e);
            }
            Ok((ch, cq))
        }
    };
    if send > 0 {
        let (ch, cq) = one(send)?;
        obj.id.send_cq_channel = ch;
        obj.id.send_cq = cq;
    }
    if recv > 0 {
        let (ch, cq) = one(recv)?;
        obj.id.recv_cq_channel = ch;
        obj.id.recv_cq = cq;
    }
    if send > 0 || recv > 0 {
        lock(&obj.st).own_cqs = true;
    }
    Ok(())
}

fn destroy_cqs(obj: &mut IdObj) {
    if !std::mem::take(&mut lock(&obj.st).own_cqs) {
        return;
    }
    let Ok(t) = ibv() else { return };
    // SAFETY: CQs and channels `create_cqs` made for this id.
    unsafe {
        for (cq, ch) in [(obj.id.send_cq, obj.id.send_cq_channel), (obj.id.recv_cq, obj.id.recv_cq_channel)] {
            if !cq.is_null() {
                (t.destroy_cq)(cq);
            }
            if !ch.is_null() {
                (t.destroy_comp_channel)(ch);
            }
        }
    }
    obj.id.send_cq = std::ptr::null_mut();
    obj.id.recv_cq = std::ptr::null_mut();
    obj.id.send_cq_channel = std::ptr::null_mut();
    obj.id.recv_cq_channel = std::ptr::null_mut();
}

/// `rdma_create_qp_ex`'s work on a validated id.
fn create_qp(obj: &mut IdObj, a: &mut ibv_qp_init_attr_ex) -> Result<(), c_int> {
    if !obj.id.qp.is_null() || obj.id.verbs.is_null() {
        return Err(libc::EINVAL);
    }
    if a.comp_mask & qp_init_attr_mask::PD == 0 || a.pd.is_null() {
        a.comp_mask |= qp_init_attr_mask::PD;
        a.pd = obj.id.pd;
    // SAFETY: a PD the program got from libibverbs (C API).
    } else if unsafe { (*a.pd).context } != obj.id.verbs {
        return Err(libc::EINVAL);
    }
    if a.pd.is_null() {
        return Err(libc::EINVAL);
    }
    if (!obj.id.recv_cq.is_null() && !a.recv_cq.is_null() && obj.id.recv_cq != a.recv_cq)
        || (!obj.id.send_cq.is_null() && !a.send_cq.is_null() && obj.id.send_cq != a.send_cq)
    {
        return Err(libc::EINVAL);
    }
    let send = if a.send_cq.is_null() && obj.id.send_cq.is_null() { a.cap.max_send_wr } else { 0 };
    let recv = if a.recv_cq.is_null() && obj.id.recv_cq.is_null() { a.cap.max_recv_wr } else { 0 };
    create_cqs(obj, send, recv)?;
    if a.send_cq.is_null() {
        a.send_cq = obj.id.send_cq;
    }
    if a.recv_cq.is_null() {
        a.recv_cq = obj.id.recv_cq;
    }
    if !obj.id.srq.is_null() && a.srq.is_null() {
        a.srq = obj.id.srq;
    }
    a.qp_type = obj.id.qp_type;
    // SAFETY: the id's open context and the caller's attributes.
    let qp = match unsafe { create_qp_ex(obj.id.verbs, a) } {
        Ok(qp) => qp,
        Err(e) => {
            destroy_cqs(obj);
            return Err(e);
        }
    };
    obj.id.qp = qp;
    let moved = if is_ud(obj) {
        step(obj, qp_state::INIT, |_| {}).and_then(|()| {
            let mut rtr = ibv_qp_attr { qp_state: qp_state::RTR as c_int, ..Default::default() };
            modify(qp, &mut rtr, qp_attr_mask::STATE)?;
            let mut rts = ibv_qp_attr { qp_state: qp_state::RTS as c_int, sq_psn: 0, ..Default::default() };
            modify(qp, &mut rts, qp_attr_mask::STATE | qp_attr_mask::SQ_PSN)
        })
    } else {
        step(obj, qp_state::INIT, |_| {})
    };
    if let Err(e) = moved {
        obj.id.qp = std::ptr::null_mut();
        // SAFETY: the QP just made.
        unsafe { (ibv()?.destroy_qp)(qp) };
        destroy_cqs(obj);
        return Err(e);
    }
    // SAFETY: the QP just made.
    obj.id.pd = unsafe { (*qp).pd };
    Ok(())
}

/// # Safety
/// `attr` is a valid `ibv_qp_init_attr_ex` (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_qp_ex(id: *mut rdma_cm_id, attr: *mut ibv_qp_init_attr_ex) -> c_int {
    with_id(id, |_, obj| {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's promise.
        create_qp(obj, unsafe { &mut *attr })
    })
}

/// # Safety
/// `attr` is a valid `ibv_qp_init_attr` (C API); `pd` null or the program's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> c_int {
    with_id(id, |_, obj| {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's promise.
        let a = unsafe { &mut *attr };
        let mut ex = ibv_qp_init_attr_ex {
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
            comp_mask: qp_init_attr_mask::PD,
            pd: if pd.is_null() { obj.id.pd } else { pd },
            xrcd: std::ptr::null_mut(),
            create_flags: 0,
            max_tso_header: 0,
            rwq_ind_tbl: std::ptr::null_mut(),
            rx_hash_conf: ibv_rx_hash_conf {
                rx_hash_function: 0,
                rx_hash_key_len: 0,
                rx_hash_key: std::ptr::null_mut(),
                rx_hash_fields_mask: 0,
            },
            source_qpn: 0,
            send_ops_flags: 0,
        };
        let r = create_qp(obj, &mut ex);
        // Back to the caller, as librdmacm copies: the CQs and the
        // capabilities the QP got.
        a.send_cq = ex.send_cq;
        a.recv_cq = ex.recv_cq;
        a.srq = ex.srq;
        a.cap = ex.cap;
        a.qp_type = ex.qp_type;
        r
    })
}

/// # Safety
/// `id` came from this library (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    let _ = with_id(id, |_, obj| {
        if !obj.id.qp.is_null() {
            // SAFETY: the id's QP, made by `rdma_create_qp`.
            unsafe { (ibv()?.destroy_qp)(obj.id.qp) };
            obj.id.qp = std::ptr::null_mut();
        }
        destroy_cqs(obj);
        Ok(())
    });
}

/// # Safety
/// `attr` is a valid `ibv_srq_init_attr` (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_srq(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> c_int {
    with_id(id, |_, obj| {
        let pd = if pd.is_null() { obj.id.pd } else { pd };
        if attr.is_null() || pd.is_null() || !obj.id.srq.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the program's PD and attributes (C API).
        let srq = unsafe { (ibv()?.create_srq)(pd, attr) };
        if srq.is_null() {
            return Err(crate::ibv::errno());
        }
        obj.id.srq = srq;
        obj.id.pd = pd;
        Ok(())
    })
}

/// `rdma_create_srq_ex`: the extended SRQ attributes are not offered.
#[unsafe(no_mangle)]
pub extern "C" fn rdma_create_srq_ex(_id: *mut rdma_cm_id, _attr: *mut c_void) -> c_int {
    minus_one(Err(libc::EOPNOTSUPP))
}

/// # Safety
/// `id` came from this library (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    let _ = with_id(id, |_, obj| {
        if !obj.id.srq.is_null() {
            // SAFETY: the id's SRQ, made by `rdma_create_srq`.
            unsafe { (ibv()?.destroy_srq)(obj.id.srq) };
            obj.id.srq = std::ptr::null_mut();
        }
        Ok(())
    });
}

// ---- connections ----

/// # Safety
/// `param` null or a valid `rdma_conn_param` (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    with_id(id, |g, obj| {
        // SAFETY: the caller's promise.
        let p = unsafe { param.as_ref() };
        valid_param(g, obj, p)?;
        let (max_init, max_resp) = dev_limits(g, obj);
        {
            let mut st = lock(&obj.st);
            st.initiator_depth = p.map_or(RDMA_MAX_INIT_DEPTH, |p| p.initiator_depth);
            if st.initiator_depth == RDMA_MAX_INIT_DEPTH {
                st.initiator_depth = max_init;
            }
            st.responder_resources = p.map_or(RDMA_MAX_RESP_RES, |p| p.responder_resources);
            if st.responder_resources == RDMA_MAX_RESP_RES {
                st.responder_resources = max_resp;
            }
        }
        let (qpn, srq) = if obj.id.qp.is_null() {
            p.map_or((0, false), |p| (p.qp_num, p.srq != 0))
        } else {
            // SAFETY: the id's QP.
            unsafe { ((*obj.id.qp).qp_num, !(*obj.id.qp).srq.is_null()) }
        };
        // SAFETY: the caller's promise on the private data.
        let c = unsafe { conn_param(obj, p, qpn, srq) };
        obj.cm.connect(&c).map_err(verr)?;
        complete(g, obj)
    })
}

/// # Safety
/// `param` null or a valid `rdma_conn_param` (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    with_id(id, |g, obj| {
        // SAFETY: the caller's promise.
        let p = unsafe { param.as_ref() };
        let (qpn, srq) = if obj.id.qp.is_null() {
            p.map(|p| (p.qp_num, p.srq != 0)).ok_or(libc::EINVAL)?
        } else {
            // SAFETY: the id's QP.
            unsafe { ((*obj.id.qp).qp_num, !(*obj.id.qp).srq.is_null()) }
        };
        valid_param(g, obj, p)?;
        let (max_init, max_resp) = dev_limits(g, obj);
        let (rr, depth) = {
            let mut st = lock(&obj.st);
            match p {
                Some(p) if p.initiator_depth != RDMA_MAX_INIT_DEPTH => st.initiator_depth = p.initiator_depth,
                _ => st.initiator_depth = st.initiator_depth.min(max_init),
            }
            match p {
                Some(p) if p.responder_resources != RDMA_MAX_RESP_RES => st.responder_resources = p.responder_resources,
                _ => st.responder_resources = st.responder_resources.min(max_resp),
            }
            (st.responder_resources, st.initiator_depth)
        };
        if !is_ud(obj) {
            to_rtr_rts(obj, rr, depth)?;
        }
        // SAFETY: the caller's promise on the private data.
        let c = unsafe { conn_param(obj, p, qpn, srq) };
        if let Err(e) = obj.cm.accept(&c) {
            to_err(obj);
            return Err(verr(e));
        }
        if is_ud(obj) { Ok(()) } else { complete(g, obj) }
    })
}

fn reject(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    with_id(id, |_, obj| {
        let d: &[u8] = if data.is_null() || len == 0 {
            &[]
        } else {
            // SAFETY: `len` readable bytes at `data` (C API).
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len.into()) }
        };
        obj.cm.reject(d).map_err(verr)
    })
}

/// # Safety
/// `data` null or `len` readable bytes (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_reject(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    reject(id, data, len)
}

/// `rdma_reject_ece`: as `rdma_reject` (no ECE options are offered).
///
/// # Safety
/// As `rdma_reject`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_reject_ece(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    reject(id, data, len)
}

/// `rdma_notify`: nothing to tell the firmware (its CM sees the QP's
/// traffic itself).
#[unsafe(no_mangle)]
pub extern "C" fn rdma_notify(id: *mut rdma_cm_id, _event: c_int) -> c_int {
    with_id(id, |_, _| Ok(()))
}

/// # Safety
/// `id` came from this library (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    with_id(id, |g, obj| {
        if !is_ud(obj) {
            to_err(obj);
        }
        obj.cm.disconnect().map_err(verr)?;
        complete(g, obj)
    })
}

/// # Safety
/// `id` came from this library (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    with_id(id, |_, obj| {
        if !obj.id.qp.is_null() {
            return Err(libc::EINVAL);
        }
        obj.cm.establish().map_err(verr)
    })
}

/// # Safety
/// `attr` and `mask` are writable, `attr->qp_state` set (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_init_qp_attr(id: *mut rdma_cm_id, attr: *mut ibv_qp_attr, mask: *mut c_int) -> c_int {
    with_id(id, |_, obj| {
        if attr.is_null() || mask.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's promise.
        let state = unsafe { (*attr).qp_state };
        let (a, m) = obj.cm.init_qp_attr(state as u32).map_err(verr)?;
        // SAFETY: the caller's promise.
        unsafe {
            *attr = qp_attr_out(&a);
            *mask = m as c_int;
        }
        Ok(())
    })
}

// ---- events ----

/// # Safety
/// `event` is writable; `channel` ours (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int {
    guard(-1, || {
        minus_one((|| {
            if event.is_null() {
                return Err(libc::EINVAL);
            }
            let ev = get_event(global()?, channel)?;
            // SAFETY: the caller's out pointer.
            unsafe { *event = ev };
            Ok(())
        })())
    })
}

/// # Safety
/// `event` came from `rdma_get_cm_event` (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    guard(-1, || minus_one(global().and_then(|g| g.drop_event(event))))
}

#[unsafe(no_mangle)]
pub extern "C" fn rdma_event_str(event: c_int) -> *const c_char {
    const NAMES: [&CStr; 16] = [
        c"RDMA_CM_EVENT_ADDR_RESOLVED",
        c"RDMA_CM_EVENT_ADDR_ERROR",
        c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        c"RDMA_CM_EVENT_ROUTE_ERROR",
        c"RDMA_CM_EVENT_CONNECT_REQUEST",
        c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        c"RDMA_CM_EVENT_CONNECT_ERROR",
        c"RDMA_CM_EVENT_UNREACHABLE",
        c"RDMA_CM_EVENT_REJECTED",
        c"RDMA_CM_EVENT_ESTABLISHED",
        c"RDMA_CM_EVENT_DISCONNECTED",
        c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        c"RDMA_CM_EVENT_MULTICAST_JOIN",
        c"RDMA_CM_EVENT_MULTICAST_ERROR",
        c"RDMA_CM_EVENT_ADDR_CHANGE",
        c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
    ];
    usize::try_from(event).ok().and_then(|i| NAMES.get(i)).map_or(c"UNKNOWN EVENT".as_ptr(), |s| s.as_ptr())
}

// ---- addresses, devices, options ----

fn port_of(s: &libc::sockaddr_storage) -> u16 {
    let p: *const libc::sockaddr_storage = s;
    // SAFETY: the storage holds the sockaddr its family names (we wrote
    // it); sockaddr_storage is large and aligned enough for either.
    unsafe {
        match c_int::from(s.ss_family) {
            libc::AF_INET => (*p.cast::<libc::sockaddr_in>()).sin_port,
            libc::AF_INET6 => (*p.cast::<libc::sockaddr_in6>()).sin6_port,
            _ => 0,
        }
    }
}

/// The id's source port, in network order (0 for none).
#[unsafe(no_mangle)]
pub extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    let mut port = 0;
    let _ = with_id(id, |_, obj| {
        port = port_of(&obj.id.route.addr.src_storage);
        Ok(())
    });
    port
}

/// The id's destination port, in network order (0 for none).
#[unsafe(no_mangle)]
pub extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    let mut port = 0;
    let _ = with_id(id, |_, obj| {
        port = port_of(&obj.id.route.addr.dst_storage);
        Ok(())
    });
    port
}

/// # Safety
/// `num` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_devices(num: *mut c_int) -> *mut *mut ibv_context {
    guard(std::ptr::null_mut(), || {
        ptr_or_errno((|| {
            let g = global()?;
            let links = g.ctx.links().map_err(verr)?;
            let ctxs: Vec<usize> = links.iter().filter_map(|l| g.dev(l.dev_index).ok()).map(|d| d.ctx).collect();
            let list = g.new_list(&ctxs)?;
            if !num.is_null() {
                // SAFETY: the caller's promise.
                unsafe { *num = ctxs.len() as c_int };
            }
            Ok(list)
        })())
    })
}

/// # Safety
/// `list` came from `rdma_get_devices` (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    guard((), || {
        if let Ok(g) = global() {
            g.drop_list(list);
        }
    })
}

const RDMA_OPTION_ID: c_int = 0;

/// `rdma_set_option`: the id-level options (TOS, REUSEADDR, AFONLY,
/// ACK_TIMEOUT) are accepted and have no effect (the firmware's CM uses
/// its defaults); IB path records cannot be set.
///
/// # Safety
/// `optval` points to `optlen` readable bytes (C API); not read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    with_id(id, |_, _| {
        if optval.is_null() {
            return Err(libc::EINVAL);
        }
        match (level, optname) {
            (RDMA_OPTION_ID, 0 | 3) if optlen == 1 => Ok(()),
            (RDMA_OPTION_ID, 1 | 2) if optlen == std::mem::size_of::<c_int>() => Ok(()),
            (RDMA_OPTION_ID, _) => Err(libc::EINVAL),
            _ => Err(libc::ENOSYS),
        }
    })
}

/// `rdma_set_local_ece`: kept; the appliance negotiates no ECE options.
///
/// # Safety
/// `ece` is readable (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    with_id(id, |_, obj| {
        // SAFETY: the caller's promise.
        let e = unsafe { ece.as_ref() }.ok_or(libc::EINVAL)?;
        lock(&obj.st).local_ece = *e;
        Ok(())
    })
}

/// `rdma_get_remote_ece`: no ECE from the peer (vendor 0, no options).
///
/// # Safety
/// `ece` is writable (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    with_id(id, |_, _| {
        if ece.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's promise.
        unsafe { *ece = ibv_ece::default() };
        Ok(())
    })
}

/// Multicast is not offered by the appliance's CM.
#[unsafe(no_mangle)]
pub extern "C" fn rdma_join_multicast(_id: *mut rdma_cm_id, _addr: *mut libc::sockaddr, _ctx: *mut c_void) -> c_int {
    minus_one(Err(libc::ENOSYS))
}

#[unsafe(no_mangle)]
pub extern "C" fn rdma_join_multicast_ex(_id: *mut rdma_cm_id, _attr: *mut c_void, _ctx: *mut c_void) -> c_int {
    minus_one(Err(libc::ENOSYS))
}

#[unsafe(no_mangle)]
pub extern "C" fn rdma_leave_multicast(_id: *mut rdma_cm_id, _addr: *mut libc::sockaddr) -> c_int {
    minus_one(Err(libc::ENOSYS))
}

// ---- synchronous endpoints ----

/// # Safety
/// `listen` came from this library (checked); `id` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    with_id(listen, |g, l| {
        if !l.sync || id.is_null() {
            return Err(libc::EINVAL);
        }
        if !l.id.event.is_null() {
            let _ = g.drop_event(l.id.event);
            l.id.event = std::ptr::null_mut();
        }
        let ev = get_event(g, l.id.channel)?;
        // SAFETY: an event `get_event` just made.
        let (kind, status, new) = unsafe { ((*ev).event, (*ev).status, (*ev).id) };
        let fail = if kind == cm_event::REJECTED as c_int {
            Some(libc::ECONNREFUSED)
        } else if status != 0 {
            Some(status.abs())
        } else if kind != cm_event::CONNECT_REQUEST as c_int {
            Some(libc::EINVAL)
        } else {
            None
        };
        if let Some(e) = fail {
            l.id.event = ev;
            return Err(e);
        }
        let n = g.id(new)?;
        // A request's id on a synchronous listener is synchronous too.
        let ch = g.new_channel()?;
        // SAFETY: `ch` was just made.
        *lock(&n.sh.chan) = unsafe { (*ch).inner.clone() };
        n.id.channel = ch.cast();
        n.sync = true;
        if let Some(a) = l.ep_qp_attr.as_deref() {
            // SAFETY: a copy of the caller's attributes, plain data.
            let mut attr = unsafe { std::ptr::read(a) };
            // SAFETY: the new id is ours; the listener's PD.
            if unsafe { rdma_create_qp(new, l.id.pd, &mut attr) } != 0 {
                l.id.event = ev;
                return Err(crate::ibv::errno());
            }
        }
        n.id.event = ev;
        // SAFETY: the caller's out pointer.
        unsafe { *id = new };
        Ok(())
    })
}

/// # Safety
/// `id` writable, `res` a valid `rdma_addrinfo`, `attr` null or valid (C API).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard(-1, || {
        minus_one((|| {
            if id.is_null() || res.is_null() {
                return Err(libc::EINVAL);
            }
            let g = global()?;
            // SAFETY: the caller's promise.
            let r = unsafe { &*res };
            let p = create_id(g, std::ptr::null_mut(), std::ptr::null_mut(), r.ai_port_space, r.ai_qp_type)?;
            let cid: *mut rdma_cm_id = p.cast();
            let made = (|| {
                // SAFETY: just made, ours.
                let obj = unsafe { &mut *p };
                if r.ai_flags & RAI_PASSIVE != 0 {
                    // SAFETY: the caller's addresses.
                    let a = unsafe { read_addr(r.ai_src_addr)? };
                    obj.cm.bind_addr(a).map_err(verr)?;
                    refresh(g, obj)?;
                    if !pd.is_null() {
                        obj.id.pd = pd;
                    }
                    if !attr.is_null() {
                        // SAFETY: the caller's attributes, plain data.
                        obj.ep_qp_attr = Some(Box::new(unsafe { std::ptr::read(attr) }));
                    }
                    return Ok(());
                }
                // SAFETY: the caller's addresses.
                let rc = unsafe { rdma_resolve_addr(cid, r.ai_src_addr, r.ai_dst_addr, 2000) };
                if rc != 0 || unsafe { rdma_resolve_route(cid, 2000) } != 0 {
                    return Err(crate::ibv::errno());
                }
                if !attr.is_null() {
                    // SAFETY: the caller's attributes.
                    unsafe { (*attr).qp_type = r.ai_qp_type };
                    if unsafe { rdma_create_qp(cid, pd, attr) } != 0 {
                        return Err(crate::ibv::errno());
                    }
                }
                Ok(())
            })();
            if let Err(e) = made {
                // SAFETY: our id.
                unsafe { rdma_destroy_ep(cid) };
                return Err(e);
            }
            // SAFETY: the caller's out pointer.
            unsafe { *id = cid };
            Ok(())
        })())
    })
}

/// # Safety
/// `id` came from this library (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    // SAFETY: each checks `id` itself.
    unsafe {
        rdma_destroy_qp(id);
        rdma_destroy_srq(id);
        rdma_destroy_id(id);
    }
}
