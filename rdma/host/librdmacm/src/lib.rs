//! `librdmacm.so.1` for unmodified RDMA programs (issue 14 part 3):
//! rdma-core 44's RDMA CM C ABI over the ring's CM commands (`verbs::cm`)
//! and our `libibverbs.so.1`, so that Debian's rping, ucmatose, udaddy and
//! perftest's `-R` mode run with `LD_LIBRARY_PATH` pointing at the folder
//! that holds both libraries (`make -s abi-path`, `roce-run`).
//!
//! ```text
//! abi        rdma_cma.h's structs (layout checked in tests/layout.rs)
//! ffi        the unsafe edge: catch_unwind, errno, socket addresses
//! ibv        the libibverbs functions we call, found with dlvsym
//! state      the CM attachment, event channels (real fds), ids, events
//! cma        the rdma_* calls: ids, routes, QPs, connections, events
//! addrinfo   rdma_getaddrinfo / rdma_freeaddrinfo
//! rsocket    the r* symbols: rpoll/rselect are poll/select, the rest EBADF
//! ```
//!
//! An id's `verbs` is our libibverbs' `ibv_context`, its `qp` our
//! `ibv_qp`: librdmacm makes and moves them through that library's own
//! exported calls. The CM ids live in a ring context of their own (one per
//! process, opened on first use): the firmware never touches a host QP, so
//! the two contexts share nothing but QP numbers, which CM messages carry.
//!
//! Every `unsafe` block says which promise of the C API makes it sound; no
//! panic crosses into C (`ffi::guard`); every object pointer the program
//! passes back is looked up before use.

pub mod abi;
pub mod addrinfo;
pub mod cma;
pub mod ffi;
pub mod ibv;
pub mod rsocket;
pub mod state;
