//! `libibverbs.so.1` for unmodified RDMA programs (issue 14): rdma-core
//! 44's C ABI over the appliance's verbs ring, so that Debian's binaries
//! (ibverbs-utils, perftest) run with `LD_LIBRARY_PATH` pointing here.
//!
//! ```text
//! abi       the C structs (verbs.h's layout, checked in tests/layout.rs)
//! ffi       the unsafe edge: catch_unwind, errno, C pointers to our objects
//! state     the process's ring attachment, the device list, our objects
//! verbs     exported control path (devices, queries, PD, MR, CQ, QP, ...)
//! datapath  post/poll through the context's ops table, ibv_qp_ex wr_*
//! channel   completion channels on real fds, the CQ watcher thread
//! mem       application memory registration: pages moved into the ring
//! mw        memory windows: alloc, dealloc, type 1 bind (context ops)
//! mcast     UD multicast attach/detach
//! misc      strings, rates, sysfs answers, unsupported verbs, PRIVATE_34
//! ```
//!
//! The staticlib is linked into `libibverbs.so.1` with `libibverbs.map`
//! (rdma-core's symbol versions) by `make abi` (`scripts`: see the
//! Makefile), and by the tests.
//!
//! Every `unsafe` block says which promise of the C API makes it sound; no
//! panic crosses into C (`ffi::guard`).

pub mod abi;
pub mod channel;
pub mod datapath;
pub mod ffi;
pub mod mcast;
pub mod mem;
pub mod misc;
pub mod mw;
pub mod state;
pub mod verbs;
