//! An appliance without QEMU for the host tests: the real
//! `verbs_ring::Firmware` ticking in a background thread over its own
//! `shm-host` mapping of a temporary file, with a loopback provider that
//! plays the rxe transport inside one appliance: it consumes send WQEs
//! from the SQ rings the dispatcher placed, moves the bytes between memory
//! regions in the region (SEND into a posted receive, WRITE, READ,
//! atomics, checking keys and access), and produces CQEs.
#![allow(dead_code)]

pub mod cm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shm_host::ShmFile;
use verbs_ring::abi::{
    Cqe, Layout, LayoutParams, SendWqe, Sge, range_within, wc_flags, wc_opcode, wc_status, wr_opcode,
};
use verbs_ring::cm::{CmConnParam, CmRoute, CmSockAddr};
use verbs_ring::cmd::*;
use verbs_ring::dispatch::{
    CmEventOut, CqSpec, Created, Limits, MrKeys, MrSpec, ObjId, QpSpec, SrqSpec, VerbsProvider,
};
use verbs_ring::ring::{Consumer, Producer, RingGeometry};
use verbs_ring::table::CapSet;
use verbs_ring::wire::{Wire, name_field};
use verbs_ring::wqe::{SendPayload, decode_recv, decode_send};
use verbs_ring::{Firmware, SharedMem};

pub const REGION: usize = 8 << 20;

#[derive(Clone, Copy)]
struct Mr {
    start: u64,
    len: u64,
    lkey: u32,
    rkey: u32,
    access: u32,
}

#[derive(Clone, Copy)]
struct QpInfo {
    num: u32,
    spec: QpSpec,
    state: u32,
    dest_qpn: u32,
}

/// The loopback transport.
pub struct Loopback {
    region_len: usize,
    /// index -> (name, netdev)
    pub devices: BTreeMap<u32, (String, String)>,
    next: ObjId,
    pds: BTreeSet<ObjId>,
    mrs: BTreeMap<ObjId, Mr>,
    cqs: BTreeMap<ObjId, Producer>,
    qps: BTreeMap<ObjId, QpInfo>,
    sqs: BTreeMap<ObjId, Consumer>,
    rqs: BTreeMap<ObjId, Consumer>,
    srqs: BTreeMap<ObjId, (Consumer, u32)>,
    ahs: BTreeSet<ObjId>,
    /// Every send WQE consumed: (QPN, WQE).
    pub consumed: Vec<(u32, SendWqe)>,
    /// Set to stop the transport (the WQEs stay in their rings).
    pub hold: bool,
    sent_pkts: u64,
    /// The loopback connection manager.
    pub cm: cm::LoopCm,
}

fn geo(p: verbs_ring::abi::RingPlacement, len: usize) -> Result<RingGeometry, Status> {
    RingGeometry::new(p, len).map_err(|_| Status::EFAULT)
}

impl Loopback {
    pub fn new(region_len: usize) -> Loopback {
        let mut devices = BTreeMap::new();
        devices.insert(0, ("rxe0".to_string(), "eth0".to_string()));
        Loopback {
            region_len,
            devices,
            next: 0,
            pds: BTreeSet::new(),
            mrs: BTreeMap::new(),
            cqs: BTreeMap::new(),
            qps: BTreeMap::new(),
            sqs: BTreeMap::new(),
            rqs: BTreeMap::new(),
            srqs: BTreeMap::new(),
            ahs: BTreeSet::new(),
            consumed: Vec::new(),
            hold: false,
            sent_pkts: 0,
            cm: cm::LoopCm::new(),
        }
    }

    fn id(&mut self) -> ObjId {
        self.next += 1;
        self.next
    }

    fn dev(&self, dev: u32) -> Result<(), Status> {
        if self.devices.contains_key(&dev) { Ok(()) } else { Err(Status::ENODEV) }
    }

    /// Live objects the provider holds (for teardown checks).
    pub fn live(&self) -> usize {
        self.pds.len() + self.mrs.len() + self.cqs.len() + self.qps.len() + self.srqs.len() + self.ahs.len()
    }

    fn key_ok(&self, key: u32, remote: bool, addr: u64, len: u64, need: u32) -> bool {
        self.mrs.values().any(|m| {
            (if remote { m.rkey } else { m.lkey }) == key
                && range_within(addr, len, m.start, m.len)
                && m.access & need == need
        })
    }

    /// Write a CQE (dropped when the CQ is full, as an overrun).
    fn complete(&mut self, mem: &ShmFile, cq: ObjId, cqe: Cqe) {
        if let Some(p) = self.cqs.get_mut(&cq) {
            let mut b = [0u8; Cqe::SIZE];
            let _ = cqe.encode(&mut b);
            let _ = p.push(mem, &b);
        }
    }

    /// Run every QP's send queue as far as it goes.
    pub fn step(&mut self, mem: &ShmFile) {
        if self.hold {
            return;
        }
        let ids: Vec<ObjId> = self.qps.keys().copied().collect();
        for id in ids {
            for _ in 0..64 {
                if !self.one_wqe(mem, id) {
                    break;
                }
            }
        }
    }

    /// Execute the next send WQE of QP `id`; false when there is none or
    /// it must wait (no receive posted at the destination).
    fn one_wqe(&mut self, mem: &ShmFile, id: ObjId) -> bool {
        let Some(info) = self.qps.get(&id).copied() else { return false };
        if info.state != qp_state::RTS {
            return false;
        }
        let Some(sq) = self.sqs.get_mut(&id) else { return false };
        let mut entry = vec![0u8; sq.geometry().entry_size()];
        if !matches!(sq.peek(mem, &mut entry), Ok(true)) {
            return false;
        }
        let mut send_cqe = Cqe { qp_num: info.num, ..Default::default() };
        let signaled;
        match decode_send(&entry, &info.spec.cap, info.spec.qp_type) {
            Err(e) => {
                send_cqe.status = e.0;
                signaled = true;
            }
            Ok((wqe, payload)) => {
                signaled = info.spec.sq_sig_all || wqe.send_flags & verbs_ring::abi::send_flags::SIGNALED != 0;
                send_cqe.wr_id = wqe.wr_id;
                match self.execute(mem, &info, &wqe, &payload) {
                    None => return false, // RNR: try again later
                    Some((status, opcode, len)) => {
                        send_cqe.status = status;
                        send_cqe.opcode = opcode;
                        send_cqe.byte_len = len;
                    }
                }
                self.consumed.push((info.num, wqe));
                self.sent_pkts += 1;
            }
        }
        if let Some(sq) = self.sqs.get_mut(&id) {
            let _ = sq.release(mem);
        }
        if signaled || send_cqe.status != wc_status::SUCCESS {
            self.complete(mem, info.spec.send_cq, send_cqe);
        }
        true
    }

    fn gather(&self, mem: &ShmFile, payload: &SendPayload<'_>) -> Result<Vec<u8>, u32> {
        match payload {
            SendPayload::Inline(d) => Ok(d.to_vec()),
            SendPayload::Sges(list) => {
                let mut out = Vec::new();
                for s in list.as_slice() {
                    if !self.key_ok(s.lkey, false, s.addr, u64::from(s.length), 0) {
                        return Err(wc_status::LOC_PROT_ERR);
                    }
                    let mut b = vec![0u8; s.length as usize];
                    mem.read(s.addr as usize, &mut b).map_err(|_| wc_status::LOC_PROT_ERR)?;
                    out.extend_from_slice(&b);
                }
                Ok(out)
            }
        }
    }

    fn scatter(&self, mem: &ShmFile, sges: &[Sge], data: &[u8]) -> Result<(), u32> {
        let mut at = 0;
        for s in sges {
            if at == data.len() {
                break;
            }
            let n = (s.length as usize).min(data.len() - at);
            if !self.key_ok(s.lkey, false, s.addr, n as u64, access::LOCAL_WRITE) {
                return Err(wc_status::LOC_PROT_ERR);
            }
            mem.write(s.addr as usize, &data[at..at + n]).map_err(|_| wc_status::LOC_PROT_ERR)?;
            at += n;
        }
        if at < data.len() { Err(wc_status::LOC_LEN_ERR) } else { Ok(()) }
    }

    /// Consume a receive at QP `dest` for `data`; None when none is posted.
    fn receive(
        &mut self,
        mem: &ShmFile,
        dest: &QpInfo,
        src_qpn: u32,
        data: &[u8],
        imm: Option<u32>,
        write_imm: bool,
    ) -> Option<u32> {
        let (ring, max_sge) = match dest.spec.srq {
            Some(s) => {
                let (c, m) = self.srqs.get_mut(&s)?;
                (c, *m)
            }
            None => {
                let id = *self.qps.iter().find(|(_, q)| q.num == dest.num)?.0;
                (self.rqs.get_mut(&id)?, dest.spec.cap.max_recv_sge)
            }
        };
        let mut entry = vec![0u8; ring.geometry().entry_size()];
        if !matches!(ring.pop(mem, &mut entry), Ok(true)) {
            return None;
        }
        let mut cqe = Cqe { qp_num: dest.num, src_qp: src_qpn, byte_len: data.len() as u32, ..Default::default() };
        cqe.opcode = if write_imm { wc_opcode::RECV_RDMA_WITH_IMM } else { wc_opcode::RECV };
        if let Some(i) = imm {
            cqe.imm_data = i;
            cqe.wc_flags |= wc_flags::WITH_IMM;
        }
        let status = match decode_recv(&entry, max_sge) {
            Err(e) => e.0,
            Ok((wqe, sges)) => {
                cqe.wr_id = wqe.wr_id;
                if write_imm { wc_status::SUCCESS } else { self.scatter(mem, sges.as_slice(), data).err().unwrap_or(0) }
            }
        };
        cqe.status = status;
        self.complete(mem, dest.spec.recv_cq, cqe);
        Some(if status == wc_status::SUCCESS { 0 } else { wc_status::REM_OP_ERR })
    }

    /// (status, wc opcode, byte_len), or None to retry later.
    fn execute(
        &mut self,
        mem: &ShmFile,
        info: &QpInfo,
        wqe: &SendWqe,
        payload: &SendPayload<'_>,
    ) -> Option<(u32, u32, u32)> {
        use wr_opcode::*;
        let dest = self.qps.values().find(|q| q.num == info.dest_qpn).copied();
        let local_len = match payload {
            SendPayload::Inline(d) => d.len(),
            SendPayload::Sges(l) => l.total_len().unwrap_or(0) as usize,
        };
        let ok = wc_status::SUCCESS;
        Some(match wqe.opcode {
            SEND | SEND_WITH_IMM | SEND_WITH_INV => {
                let data = match self.gather(mem, payload) {
                    Ok(d) => d,
                    Err(s) => return Some((s, wc_opcode::SEND, 0)),
                };
                let Some(dest) = dest else { return Some((wc_status::RETRY_EXC_ERR, wc_opcode::SEND, 0)) };
                let imm = (wqe.opcode == SEND_WITH_IMM).then_some(wqe.imm_data);
                let st = self.receive(mem, &dest, info.num, &data, imm, false)?;
                (st, wc_opcode::SEND, data.len() as u32)
            }
            RDMA_WRITE | RDMA_WRITE_WITH_IMM => {
                let data = match self.gather(mem, payload) {
                    Ok(d) => d,
                    Err(s) => return Some((s, wc_opcode::RDMA_WRITE, 0)),
                };
                if !self.key_ok(wqe.rkey, true, wqe.remote_addr, data.len() as u64, access::REMOTE_WRITE) {
                    return Some((wc_status::REM_ACCESS_ERR, wc_opcode::RDMA_WRITE, 0));
                }
                if wqe.opcode == RDMA_WRITE_WITH_IMM {
                    let dest = dest?;
                    // Needs a receive; check first so the write is not done twice.
                    self.receive(mem, &dest, info.num, &data, Some(wqe.imm_data), true)?;
                }
                let _ = mem.write(wqe.remote_addr as usize, &data);
                (ok, wc_opcode::RDMA_WRITE, data.len() as u32)
            }
            RDMA_READ => {
                if !self.key_ok(wqe.rkey, true, wqe.remote_addr, local_len as u64, access::REMOTE_READ) {
                    return Some((wc_status::REM_ACCESS_ERR, wc_opcode::RDMA_READ, 0));
                }
                let mut data = vec![0u8; local_len];
                let _ = mem.read(wqe.remote_addr as usize, &mut data);
                let SendPayload::Sges(l) = payload else {
                    return Some((wc_status::LOC_QP_OP_ERR, wc_opcode::RDMA_READ, 0));
                };
                let st = self.scatter(mem, l.as_slice(), &data).err().unwrap_or(ok);
                (st, wc_opcode::RDMA_READ, local_len as u32)
            }
            ATOMIC_CMP_AND_SWP | ATOMIC_FETCH_AND_ADD => {
                let op = if wqe.opcode == ATOMIC_CMP_AND_SWP { wc_opcode::COMP_SWAP } else { wc_opcode::FETCH_ADD };
                if !self.key_ok(wqe.rkey, true, wqe.remote_addr, 8, access::REMOTE_ATOMIC) {
                    return Some((wc_status::REM_ACCESS_ERR, op, 0));
                }
                let mut b = [0u8; 8];
                let _ = mem.read(wqe.remote_addr as usize, &mut b);
                let old = u64::from_le_bytes(b);
                let new = if wqe.opcode == ATOMIC_CMP_AND_SWP {
                    if old == wqe.compare_add { wqe.swap } else { old }
                } else {
                    old.wrapping_add(wqe.compare_add)
                };
                let _ = mem.write(wqe.remote_addr as usize, &new.to_le_bytes());
                let SendPayload::Sges(l) = payload else { return Some((wc_status::LOC_QP_OP_ERR, op, 0)) };
                let st = self.scatter(mem, l.as_slice(), &b).err().unwrap_or(ok);
                (st, op, 8)
            }
            _ => (wc_status::LOC_QP_OP_ERR, wc_opcode::SEND, 0),
        })
    }
}

impl VerbsProvider for Loopback {
    fn caps(&self) -> CapSet {
        CapSet::all()
    }
    fn query_device(&mut self, dev: u32) -> Result<DeviceAttr, Status> {
        self.dev(dev)?;
        Ok(DeviceAttr {
            fw_ver: 0,
            node_guid: 0x5054_00ff_fe00_0001 + u64::from(dev),
            sys_image_guid: 0x5054_00ff_fe00_0001 + u64::from(dev),
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            vendor_id: 0xffffff,
            max_qp: 64,
            max_qp_wr: 1024,
            max_sge: 32,
            max_sge_rd: 32,
            max_cq: 64,
            max_cqe: 4096,
            max_mr: 256,
            max_pd: 64,
            max_qp_rd_atom: 128,
            max_res_rd_atom: 8192,
            max_qp_init_rd_atom: 128,
            atomic_cap: 1,
            max_ah: 64,
            max_srq: 64,
            max_srq_wr: 1024,
            max_srq_sge: 27,
            max_pkeys: 1,
            local_ca_ack_delay: 15,
            phys_port_cnt: 1,
            ..Default::default()
        })
    }
    fn query_port(&mut self, dev: u32, port: u32) -> Result<PortAttr, Status> {
        self.dev(dev)?;
        if port != 1 {
            return Err(Status::EINVAL);
        }
        Ok(PortAttr {
            state: 4,
            max_mtu: 5,
            active_mtu: 3,
            gid_tbl_len: 16,
            port_cap_flags: 0x0001_0000,
            max_msg_sz: 0x8000_0000,
            pkey_tbl_len: 1,
            active_speed: 1,
            active_width: 1,
            phys_state: 5,
            link_layer: 2,
            ..Default::default()
        })
    }
    fn query_gid(&mut self, dev: u32, port: u32, index: u32) -> Result<GidEntry, Status> {
        self.query_port(dev, port)?;
        if index >= 16 {
            return Err(Status::EINVAL);
        }
        let mut gid = [0u8; 16];
        let valid = match index {
            0 => {
                gid[..2].copy_from_slice(&[0xfe, 0x80]);
                gid[8..].copy_from_slice(&[0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 1 + dev as u8]);
                true
            }
            1 => {
                gid[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1 + dev as u8]);
                true
            }
            _ => false,
        };
        Ok(GidEntry {
            gid: if valid { gid } else { [0; 16] },
            index,
            gid_type: gid_type::ROCE_V2,
            ndev_ifindex: 2,
            valid: u32::from(valid),
        })
    }
    fn query_pkey(&mut self, dev: u32, port: u32, index: u32) -> Result<u16, Status> {
        self.query_port(dev, port)?;
        if index == 0 { Ok(0xffff) } else { Err(Status::EINVAL) }
    }
    fn alloc_pd(&mut self, dev: u32) -> Result<ObjId, Status> {
        self.dev(dev)?;
        let id = self.id();
        self.pds.insert(id);
        Ok(id)
    }
    fn dealloc_pd(&mut self, pd: ObjId) -> Result<(), Status> {
        self.pds.remove(&pd).then_some(()).ok_or(Status::ENOENT)
    }
    fn reg_mr(&mut self, pd: ObjId, mr: &MrSpec) -> Result<MrKeys, Status> {
        if !self.pds.contains(&pd) {
            return Err(Status::ENOENT);
        }
        let id = self.id();
        let keys = MrKeys { id, lkey: id << 8, rkey: (id << 8) | 0x80 };
        self.mrs
            .insert(id, Mr { start: mr.start, len: mr.length, lkey: keys.lkey, rkey: keys.rkey, access: mr.access });
        Ok(keys)
    }
    fn dereg_mr(&mut self, mr: ObjId) -> Result<(), Status> {
        self.mrs.remove(&mr).map(|_| ()).ok_or(Status::ENOENT)
    }
    fn create_cq(&mut self, cq: &CqSpec) -> Result<ObjId, Status> {
        self.dev(cq.dev_index)?;
        let p = Producer::new(geo(cq.ring, self.region_len)?);
        let id = self.id();
        self.cqs.insert(id, p);
        Ok(id)
    }
    fn destroy_cq(&mut self, cq: ObjId) -> Result<(), Status> {
        self.cqs.remove(&cq).map(|_| ()).ok_or(Status::ENOENT)
    }
    fn create_qp(&mut self, qp: &QpSpec) -> Result<Created, Status> {
        let sq = Consumer::new(geo(qp.sq, self.region_len)?);
        let rq = match qp.rq {
            Some(p) => Some(Consumer::new(geo(p, self.region_len)?)),
            None => None,
        };
        let id = self.id();
        let num = 0x100 + id;
        self.qps.insert(id, QpInfo { num, spec: *qp, state: qp_state::RESET, dest_qpn: 0 });
        self.sqs.insert(id, sq);
        if let Some(rq) = rq {
            self.rqs.insert(id, rq);
        }
        Ok(Created { id, num })
    }
    fn modify_qp(&mut self, qp: ObjId, attr_mask: u32, attr: &QpAttr, _alt: &AltPath) -> Result<(), Status> {
        let q = self.qps.get_mut(&qp).ok_or(Status::ENOENT)?;
        if attr_mask & qp_attr_mask::STATE != 0 {
            q.state = attr.qp_state;
        }
        if attr_mask & qp_attr_mask::DEST_QPN != 0 {
            q.dest_qpn = attr.dest_qp_num;
        }
        Ok(())
    }
    fn query_qp(&mut self, qp: ObjId, _attr_mask: u32) -> Result<QueryQpResp, Status> {
        let q = self.qps.get(&qp).ok_or(Status::ENOENT)?;
        Ok(QueryQpResp {
            attr: QpAttr { qp_state: q.state, dest_qp_num: q.dest_qpn, cap: q.spec.cap, ..Default::default() },
            init_cap: q.spec.cap,
            qp_type: q.spec.qp_type,
            sq_sig_all: u8::from(q.spec.sq_sig_all),
            ..Default::default()
        })
    }
    fn destroy_qp(&mut self, qp: ObjId) -> Result<(), Status> {
        self.sqs.remove(&qp);
        self.rqs.remove(&qp);
        self.qps.remove(&qp).map(|_| ()).ok_or(Status::ENOENT)
    }
    fn create_srq(&mut self, srq: &SrqSpec) -> Result<Created, Status> {
        let c = Consumer::new(geo(srq.ring, self.region_len)?);
        let id = self.id();
        self.srqs.insert(id, (c, srq.max_sge));
        Ok(Created { id, num: id })
    }
    fn modify_srq(&mut self, _srq: ObjId, _mask: u32, _max_wr: u32, _limit: u32) -> Result<(), Status> {
        Ok(())
    }
    fn destroy_srq(&mut self, srq: ObjId) -> Result<(), Status> {
        self.srqs.remove(&srq).map(|_| ()).ok_or(Status::ENOENT)
    }
    fn create_ah(&mut self, _dev: u32, _pd: ObjId, _attr: &AhAttr) -> Result<ObjId, Status> {
        let id = self.id();
        self.ahs.insert(id);
        Ok(id)
    }
    fn destroy_ah(&mut self, ah: ObjId) -> Result<(), Status> {
        self.ahs.remove(&ah).then_some(()).ok_or(Status::ENOENT)
    }
    fn query_counters(&mut self, dev: u32, _port: u32) -> Result<CountersResp, Status> {
        self.dev(dev)?;
        let mut values = [0u64; MAX_COUNTERS];
        values[0] = self.sent_pkts;
        values[1] = self.sent_pkts;
        Ok(CountersResp { num_counters: 15, reserved: 0, values })
    }
    fn link_add(&mut self, name: &str, link_type: &str, netdev: &str) -> Result<u32, Status> {
        if link_type != "rxe" {
            return Err(Status::EINVAL);
        }
        if self.devices.values().any(|(n, _)| n == name) {
            return Err(Status::EEXIST);
        }
        let idx = self.devices.keys().last().map_or(0, |k| k + 1);
        self.devices.insert(idx, (name.to_string(), netdev.to_string()));
        Ok(idx)
    }
    fn cm_create_id(&mut self, ctx: u32, _uid: u64, ps: u16, qp_type: u8) -> Result<ObjId, Status> {
        self.cm.create_id(ctx, ps, qp_type)
    }
    fn cm_destroy_id(&mut self, id: ObjId) -> Result<u32, Status> {
        self.cm.destroy_id(id)
    }
    fn cm_bind(&mut self, id: ObjId, addr: &CmSockAddr) -> Result<(), Status> {
        self.cm.bind(id, addr)
    }
    fn cm_resolve_addr(&mut self, id: ObjId, src: &CmSockAddr, dst: &CmSockAddr, _ms: u32) -> Result<(), Status> {
        self.cm.resolve_addr(id, src, dst)
    }
    fn cm_resolve_route(&mut self, id: ObjId, _ms: u32) -> Result<(), Status> {
        self.cm.resolve_route(id)
    }
    fn cm_query_route(&mut self, id: ObjId) -> Result<CmRoute, Status> {
        self.cm.query_route(id)
    }
    fn cm_listen(&mut self, id: ObjId, _backlog: u32) -> Result<(), Status> {
        self.cm.listen(id)
    }
    fn cm_connect(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        self.cm.connect(id, p)
    }
    fn cm_accept(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        self.cm.accept(id, p)
    }
    fn cm_reject(&mut self, id: ObjId, private: &[u8]) -> Result<(), Status> {
        self.cm.reject(id, private)
    }
    fn cm_disconnect(&mut self, id: ObjId) -> Result<(), Status> {
        self.cm.disconnect(id)
    }
    fn cm_init_qp_attr(&mut self, id: ObjId, qp_state: u32) -> Result<(u32, QpAttr), Status> {
        self.cm.init_qp_attr(id, qp_state)
    }
    fn cm_get_event(&mut self, ctx: u32) -> Result<CmEventOut, Status> {
        self.cm.get_event(ctx)
    }
    fn link_del(&mut self, dev: u32) -> Result<(), Status> {
        self.devices.remove(&dev).map(|_| ()).ok_or(Status::ENODEV)
    }
    fn link_show(&mut self, dev: u32, _port: u32) -> Result<LinkInfo, Status> {
        let (&idx, (name, netdev)) = self.devices.range(dev..).next().ok_or(Status::ENODEV)?;
        let next = self.devices.range(idx + 1..).next().map_or(NO_MORE, |(k, _)| *k);
        Ok(LinkInfo {
            node_guid: 0x5054_00ff_fe00_0001 + u64::from(idx),
            sys_image_guid: 0x5054_00ff_fe00_0001 + u64::from(idx),
            dev_index: idx,
            port_num: 1,
            port_state: 4,
            phys_state: 5,
            netdev_index: 2,
            next,
            dev_name: name_field(name).map_err(|_| Status::ENAMETOOLONG)?,
            netdev: name_field(netdev).map_err(|_| Status::ENAMETOOLONG)?,
        })
    }
}

/// Small, fast layout: 4 contexts, 100 µs beats, a 2000-beat lease.
pub fn params() -> LayoutParams {
    LayoutParams {
        num_contexts: 4,
        cmd_entries: 16,
        resp_entries: 16,
        cmd_slot_size: 256,
        queue_area_size: 256 << 10,
        heartbeat_period_us: 100,
        lease_beats: 2000,
    }
}

/// The firmware and the provider it serves the ring with.
pub struct Served {
    pub fw: Firmware,
    pub p: Loopback,
}

impl Served {
    pub fn dispatcher(&self) -> &verbs_ring::dispatch::Dispatcher {
        self.fw.dispatcher()
    }

    pub fn dispatcher_mut(&mut self) -> &mut verbs_ring::dispatch::Dispatcher {
        self.fw.dispatcher_mut()
    }

    pub fn read_slot(&self, mem: &ShmFile, ctx: u32) -> Option<verbs_ring::abi::ContextSlot> {
        self.fw.read_slot(mem, ctx)
    }

    pub fn layout(&self) -> &Layout {
        self.fw.layout()
    }
}

/// A running appliance: a temp ring file and the firmware ticking over it.
pub struct Appliance {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub mem: Arc<ShmFile>,
    fw: Arc<Mutex<Served>>,
    stop: Arc<AtomicBool>,
    /// While set, the firmware does not tick (a stalled appliance).
    pub paused: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Appliance {
    pub fn start() -> Appliance {
        Appliance::start_with(params())
    }

    pub fn start_with(p: LayoutParams) -> Appliance {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("roce-appliance-test");
        let mem = Arc::new(ShmFile::create(&path, REGION).unwrap());
        let layout = Layout::new(REGION as u64, p).unwrap();
        let fw = Firmware::new(&*mem, layout, Limits::default(), 16).unwrap();
        let fw = Arc::new(Mutex::new(Served { fw, p: Loopback::new(REGION) }));
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let thread = {
            let (fw, mem, stop, paused) = (fw.clone(), mem.clone(), stop.clone(), paused.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    if !paused.load(Ordering::Acquire) {
                        let mut guard = fw.lock().unwrap();
                        let Served { fw, p } = &mut *guard;
                        fw.tick(&*mem, p).unwrap();
                        p.step(&mem);
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
            })
        };
        Appliance { _dir: dir, path, mem, fw, stop, paused, thread: Some(thread) }
    }

    pub fn fw(&self) -> MutexGuard<'_, Served> {
        self.fw.lock().unwrap()
    }

    /// Wait (bounded) until `cond` holds on the firmware.
    pub fn wait_for(&self, what: &str, timeout: Duration, cond: impl Fn(&Served) -> bool) {
        let start = Instant::now();
        while !cond(&self.fw()) {
            assert!(start.elapsed() < timeout, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Appliance {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
