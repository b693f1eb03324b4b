//! Connection management (IBA vol. 1 ch. 12): [`ib_cm`], the IB CM protocol (REQ, REP,
//! RTU, DREQ, DREP, MRA, REJ, SIDR) and its connection state machine, pure and
//! host-tested; [`cma`], rdma_cm on top of it (ids named by IP address and port,
//! [`route`] resolution, the cma header), served to host programs by the ring;
//! [`client`], how the CM hears of devices coming and going.

pub mod client;
pub mod cma;
mod cma_ib;
pub mod ib_cm;
pub mod route;

pub use cma::RdmaCm;
