//! The rxe (Soft-RoCE) device: what `rdma link add NAME type rxe netdev DEV`
//! creates. Today it answers the core's queries with Linux rxe's attributes; the
//! transport (objects, requester, responder, completer) joins it here.

mod driver;

pub use driver::RxeDriver;
