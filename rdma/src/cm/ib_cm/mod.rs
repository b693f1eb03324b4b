//! The IB communication manager (IBA vol. 1 ch. 12; Linux's drivers/infiniband/core/
//! cm.c): one per RDMA device, pure. The caller feeds it the CM MADs QP1 received and
//! the time, calls it to send, and takes what it produced (MADs to send, events) with
//! [`IbCm::take_output`]; timers run in [`IbCm::poll`].

mod types;

pub use self::types::*;
pub use crate::wire::cm::RejReason;

use alloc::collections::VecDeque;
use vocab::Instant;

/// The CM of one device.
#[derive(Debug)]
pub struct IbCm {
    local_ca_guid: u64,
    seed: u32,
    output: VecDeque<Output>,
    counters: CmCounters,
}

impl IbCm {
    /// A CM for the device whose node GUID is `local_ca_guid`; `seed` randomises the
    /// communication IDs, as Linux's random starting ID does.
    pub fn new(local_ca_guid: u64, seed: u32) -> Self {
        IbCm { local_ca_guid, seed, output: VecDeque::new(), counters: CmCounters::default() }
    }

    pub fn listen(&mut self, _service_id: u64, _mask: u64) -> Result<ListenId, CmError> {
        Err(CmError::Invalid)
    }

    pub fn cancel_listen(&mut self, _id: ListenId) {}

    pub fn send_req(&mut self, _now: Instant, _to: MadAddr, _p: &ReqParams) -> Result<ConnId, CmError> {
        Err(CmError::Invalid)
    }

    pub fn send_mra(
        &mut self,
        _now: Instant,
        _conn: ConnId,
        _service_timeout: u8,
        _private: &[u8],
    ) -> Result<(), CmError> {
        Err(CmError::NotFound)
    }

    pub fn send_rep(&mut self, _now: Instant, _conn: ConnId, _p: &RepParams) -> Result<(), CmError> {
        Err(CmError::NotFound)
    }

    pub fn send_rtu(&mut self, _now: Instant, _conn: ConnId, _private: &[u8]) -> Result<(), CmError> {
        Err(CmError::NotFound)
    }

    pub fn send_rej(
        &mut self,
        _now: Instant,
        _conn: ConnId,
        _reason: RejReason,
        _ari: &[u8],
        _private: &[u8],
    ) -> Result<(), CmError> {
        Err(CmError::NotFound)
    }

    pub fn send_dreq(&mut self, _now: Instant, _conn: ConnId, _private: &[u8]) -> Result<(), CmError> {
        Err(CmError::NotFound)
    }

    pub fn send_drep(&mut self, _now: Instant, _conn: ConnId, _private: &[u8]) -> Result<(), CmError> {
        Err(CmError::NotFound)
    }

    /// ib_destroy_cm_id: REJ / DREQ / nothing as the state asks; the id lingers in
    /// timewait as Linux's does, then is freed.
    pub fn destroy(&mut self, _now: Instant, _conn: ConnId) {}

    pub fn send_sidr_req(&mut self, _now: Instant, _to: MadAddr, _p: &SidrReqParams) -> Result<ConnId, CmError> {
        Err(CmError::Invalid)
    }

    pub fn send_sidr_rep(&mut self, _now: Instant, _conn: ConnId, _p: &SidrRepParams) -> Result<(), CmError> {
        Err(CmError::NotFound)
    }

    /// Everything the REQ/REP carried that QP attributes come from (cm_init_qp_*_attr).
    pub fn conn_info(&self, _conn: ConnId) -> Option<&ConnInfo> {
        None
    }

    pub fn state(&self, _conn: ConnId) -> Option<CmState> {
        None
    }

    /// A MAD received on QP1 (any MAD bytes: what is not a CM MAD is counted and dropped).
    pub fn receive(&mut self, _now: Instant, _from: &MadAddr, _mad: &[u8]) {}

    /// Timers: retries, timeouts, timewait.
    pub fn poll(&mut self, _now: Instant) {}

    /// When `poll` next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        None
    }

    pub fn take_output(&mut self) -> Option<Output> {
        self.output.pop_front()
    }

    pub fn counters(&self) -> &CmCounters {
        &self.counters
    }

    /// The node GUID REQs and REPs carry.
    pub fn local_ca_guid(&self) -> u64 {
        self.local_ca_guid
    }

    #[allow(dead_code)]
    fn seed(&self) -> u32 {
        self.seed
    }
}
