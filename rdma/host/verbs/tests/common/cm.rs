//! A loopback RDMA CM inside the test appliance: ids of any context meet
//! by port, a connect becomes the listener's CONNECT_REQUEST, accept the
//! active side's CONNECT_RESPONSE (UD: ESTABLISHED with the peer's QPN),
//! the active side's accept (the RTU) the passive side's ESTABLISHED, and
//! disconnect or destroy the peer's DISCONNECTED. INIT_QP_ATTR answers
//! what the loopback transport needs (the peer's QPN for RTR). Tests can
//! also script events (`script`) to play a firmware that says odd things.

use std::collections::{BTreeMap, VecDeque};

use verbs_ring::Status;
use verbs_ring::cm::*;
use verbs_ring::cmd::{AhAttr, QpAttr, access, qp_attr_mask, qp_state, qp_type};
use verbs_ring::dispatch::{CmEventOut, ObjId};

/// A destination address that never resolves (ADDR_ERROR, EHOSTUNREACH).
pub const UNREACHABLE: [u8; 4] = [10, 0, 0, 99];

#[derive(Clone, Debug, Default)]
struct Id {
    ctx: u32,
    ps: u16,
    qp_type: u8,
    src: CmSockAddr,
    dst: CmSockAddr,
    listening: bool,
    peer: Option<ObjId>,
    /// The peer's QPN (from its REQ or REP).
    remote_qpn: u32,
    /// Passive: a request not yet answered.
    pending: bool,
    connected: bool,
}

#[derive(Default)]
pub struct LoopCm {
    ids: BTreeMap<ObjId, Id>,
    next: ObjId,
    next_port: u16,
    pub events: VecDeque<(u32, CmEventOut)>,
    /// Every call, for tests: "connect 3", "accept 5", ...
    pub log: Vec<String>,
}

fn ev(id: ObjId, event: u32, status: i32, param: CmConnParam) -> CmEventOut {
    CmEventOut { id, new_id: None, event, status, param }
}

impl LoopCm {
    pub fn new() -> LoopCm {
        LoopCm { next: 0x5000, next_port: 40000, ..Default::default() }
    }

    pub fn live(&self) -> usize {
        self.ids.len()
    }

    /// Queue a scripted event for context `ctx`.
    pub fn script(&mut self, ctx: u32, e: CmEventOut) {
        self.events.push_back((ctx, e));
    }

    /// The provider id of the newest CM id (for scripting).
    pub fn newest(&self) -> Option<ObjId> {
        self.ids.keys().max().copied()
    }

    fn push(&mut self, id: ObjId, e: CmEventOut) {
        if let Some(ctx) = self.ids.get(&id).map(|i| i.ctx) {
            self.events.push_back((ctx, e));
        }
    }

    fn get(&mut self, id: ObjId) -> Result<&mut Id, Status> {
        self.ids.get_mut(&id).ok_or(Status::ENOENT)
    }

    pub fn create_id(&mut self, ctx: u32, ps: u16, qp_type: u8) -> Result<ObjId, Status> {
        self.next += 1;
        self.ids.insert(self.next, Id { ctx, ps, qp_type, ..Default::default() });
        Ok(self.next)
    }

    pub fn destroy_id(&mut self, id: ObjId) -> Result<u32, Status> {
        let me = self.ids.remove(&id).ok_or(Status::ENOENT)?;
        self.log.push(format!("destroy {id}"));
        self.events.retain(|(_, e)| e.id != id && e.new_id != Some(id));
        if let Some(peer) = me.peer {
            if me.connected {
                self.push(peer, ev(peer, cm_event::DISCONNECTED, 0, CmConnParam::default()));
            } else {
                // A request never answered, or a REP never confirmed: the
                // peer is rejected (ib_destroy_cm_id's REJ).
                self.push(peer, ev(peer, cm_event::REJECTED, 28, CmConnParam::default()));
            }
            if let Some(p) = self.ids.get_mut(&peer) {
                p.peer = None;
                p.connected = false;
            }
        }
        Ok(0)
    }

    pub fn bind(&mut self, id: ObjId, addr: &CmSockAddr) -> Result<(), Status> {
        let mut a = *addr;
        if a.port == 0 {
            self.next_port += 1;
            a.port = self.next_port;
        }
        let taken = self.ids.iter().any(|(k, i)| *k != id && i.src.port == a.port && i.src.family != 0);
        if taken {
            return Err(Status::EEXIST);
        }
        self.get(id)?.src = a;
        Ok(())
    }

    pub fn resolve_addr(&mut self, id: ObjId, src: &CmSockAddr, dst: &CmSockAddr) -> Result<(), Status> {
        let i = self.get(id)?;
        i.dst = *dst;
        if src.family != af::UNSPEC {
            i.src = *src;
        } else if i.src.family == af::UNSPEC {
            i.src = CmSockAddr::ipv4([10, 0, 0, 1], 0);
        }
        if i.src.port == 0 {
            self.next_port += 1;
            let port = self.next_port;
            self.get(id)?.src.port = port;
        }
        let bad = dst.addr[..4] == UNREACHABLE;
        let e = if bad {
            ev(id, cm_event::ADDR_ERROR, -113, CmConnParam::default())
        } else {
            ev(id, cm_event::ADDR_RESOLVED, 0, CmConnParam::default())
        };
        self.push(id, e);
        Ok(())
    }

    pub fn resolve_route(&mut self, id: ObjId) -> Result<(), Status> {
        self.get(id)?;
        self.push(id, ev(id, cm_event::ROUTE_RESOLVED, 0, CmConnParam::default()));
        Ok(())
    }

    pub fn query_route(&mut self, id: ObjId) -> Result<CmRoute, Status> {
        let i = self.get(id)?;
        let mut dgid = [0u8; 16];
        dgid[10] = 0xff;
        dgid[11] = 0xff;
        dgid[12..].copy_from_slice(&i.dst.addr[..4]);
        let bound = i.src.family != af::UNSPEC;
        Ok(CmRoute {
            src: i.src,
            dst: i.dst,
            dev_index: if bound { 0 } else { NO_DEVICE },
            port_num: 1,
            ah_attr: AhAttr { dgid, hop_limit: 64, is_global: 1, port_num: 1, ..Default::default() },
            pkey: 0xffff,
            path_mtu: 3,
            num_paths: u8::from(i.dst.family != af::UNSPEC),
            ..Default::default()
        })
    }

    pub fn listen(&mut self, id: ObjId) -> Result<(), Status> {
        let i = self.get(id)?;
        if i.src.family == af::UNSPEC {
            return Err(Status::EINVAL);
        }
        i.listening = true;
        Ok(())
    }

    pub fn connect(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        let me = self.get(id)?.clone();
        self.log.push(format!("connect {id} {}", p.private_data_len));
        let limit = if me.qp_type == qp_type::UD { SIDR_REQ_PRIVATE_DATA } else { REQ_PRIVATE_DATA };
        if usize::from(p.private_data_len) > limit {
            return Err(Status::EINVAL);
        }
        let listener = self.ids.iter().find(|(_, i)| i.listening && i.ps == me.ps && i.src.port == me.dst.port);
        let Some((&lid, l)) = listener else {
            // Nobody listens: REJ reason 8 (invalid service ID), as IbCm answers.
            self.push(id, ev(id, cm_event::REJECTED, 8, CmConnParam::default()));
            return Ok(());
        };
        let lctx = l.ctx;
        self.next += 1;
        let new = self.next;
        let passive = Id {
            ctx: lctx,
            ps: me.ps,
            qp_type: me.qp_type,
            src: l.src,
            dst: me.src,
            peer: Some(id),
            remote_qpn: p.qp_num,
            pending: true,
            ..Default::default()
        };
        self.ids.insert(new, passive);
        self.get(id)?.peer = Some(new);
        let e = CmEventOut { id: lid, new_id: Some(new), event: cm_event::CONNECT_REQUEST, status: 0, param: *p };
        self.events.push_back((lctx, e));
        Ok(())
    }

    pub fn accept(&mut self, id: ObjId, p: &CmConnParam) -> Result<(), Status> {
        let me = self.get(id)?.clone();
        self.log.push(format!("accept {id} {}", p.qp_num));
        let peer = me.peer.ok_or(Status::EINVAL)?;
        if me.pending {
            let limit = if me.qp_type == qp_type::UD { SIDR_REP_PRIVATE_DATA } else { REP_PRIVATE_DATA };
            if usize::from(p.private_data_len) > limit {
                return Err(Status::EINVAL);
            }
            self.get(id)?.pending = false;
            if let Some(a) = self.ids.get_mut(&peer) {
                a.remote_qpn = p.qp_num;
            }
            if me.qp_type == qp_type::UD {
                self.push(peer, ev(peer, cm_event::ESTABLISHED, 0, *p));
            } else {
                self.push(peer, ev(peer, cm_event::CONNECT_RESPONSE, 0, *p));
            }
        } else {
            // The active side's RTU.
            self.get(id)?.connected = true;
            if let Some(pp) = self.ids.get_mut(&peer) {
                pp.connected = true;
            }
            self.push(peer, ev(peer, cm_event::ESTABLISHED, 0, CmConnParam::default()));
        }
        Ok(())
    }

    pub fn reject(&mut self, id: ObjId, private: &[u8]) -> Result<(), Status> {
        let me = self.get(id)?.clone();
        self.log.push(format!("reject {id} {}", private.len()));
        if let Some(peer) = me.peer {
            let param = CmConnParam::default().with_private(private).unwrap_or_default();
            self.push(peer, ev(peer, cm_event::REJECTED, 28, param));
            if let Some(p) = self.ids.get_mut(&peer) {
                p.peer = None;
            }
        }
        let i = self.get(id)?;
        i.peer = None;
        i.pending = false;
        Ok(())
    }

    pub fn disconnect(&mut self, id: ObjId) -> Result<(), Status> {
        let me = self.get(id)?.clone();
        self.log.push(format!("disconnect {id}"));
        if !me.connected {
            return Err(Status::EINVAL);
        }
        self.get(id)?.connected = false;
        self.push(id, ev(id, cm_event::DISCONNECTED, 0, CmConnParam::default()));
        if let Some(peer) = me.peer
            && self.ids.get(&peer).is_some_and(|p| p.connected)
        {
            if let Some(p) = self.ids.get_mut(&peer) {
                p.connected = false;
            }
            self.push(peer, ev(peer, cm_event::DISCONNECTED, 0, CmConnParam::default()));
        }
        Ok(())
    }

    pub fn init_qp_attr(&mut self, id: ObjId, state: u32) -> Result<(u32, QpAttr), Status> {
        let i = self.get(id)?;
        use qp_attr_mask::*;
        Ok(match state {
            qp_state::INIT => {
                let a = QpAttr {
                    qp_state: state,
                    port_num: 1,
                    qkey: RDMA_UDP_QKEY_FAKE,
                    qp_access_flags: access::LOCAL_WRITE | access::REMOTE_READ | access::REMOTE_WRITE,
                    ..Default::default()
                };
                let extra = if i.qp_type == qp_type::UD { QKEY } else { ACCESS_FLAGS };
                (STATE | PKEY_INDEX | PORT | extra, a)
            }
            qp_state::RTR => {
                let a = QpAttr {
                    qp_state: state,
                    path_mtu: 3,
                    dest_qp_num: i.remote_qpn,
                    rq_psn: 0x100,
                    max_dest_rd_atomic: 4,
                    min_rnr_timer: 12,
                    ..Default::default()
                };
                (STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER, a)
            }
            _ => {
                let a = QpAttr {
                    qp_state: state,
                    sq_psn: 0x100,
                    timeout: 14,
                    retry_cnt: 7,
                    rnr_retry: 7,
                    max_rd_atomic: 4,
                    ..Default::default()
                };
                (STATE | TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC, a)
            }
        })
    }

    pub fn get_event(&mut self, ctx: u32) -> Result<CmEventOut, Status> {
        let i = self.events.iter().position(|(c, _)| *c == ctx).ok_or(Status::EAGAIN)?;
        self.events.remove(i).map(|(_, e)| e).ok_or(Status::EAGAIN)
    }
}

/// rdma_cm's UD Q_Key.
const RDMA_UDP_QKEY_FAKE: u32 = 0x0123_4567;
