//! `libibverbs.so.1` for unmodified programs (issue 14).
pub mod abi;
