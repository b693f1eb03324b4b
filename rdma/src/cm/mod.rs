//! Connection management (IBA vol. 1 ch. 12): [`ib_cm`], the IB CM protocol (REQ, REP,
//! RTU, DREQ, DREP, MRA, REJ, SIDR) and its connection state machine, pure and
//! host-tested; the RDMA CM (rdma_cm addressing) builds on it.

pub mod ib_cm;
