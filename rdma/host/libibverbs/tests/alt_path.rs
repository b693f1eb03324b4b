//! The alternate path through the C ABI: `tests/c/alt_path.c`, built
//! against rdma-core 44's `verbs.h` and linked with our `libibverbs.so.1`,
//! loads an armed alternate path on one host-simulated appliance and reads
//! it back with `ibv_query_qp` (see the program for what it checks).

mod common;

use std::process::Command;

use common::{Pair, lib_dir};

#[test]
fn ibv_modify_qp_and_ibv_query_qp_carry_the_alternate_path() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/alt_path.c");
    let exe = lib_dir().join("alt_path");
    let cc = Command::new("cc")
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-L")
        .arg(lib_dir())
        .arg("-l:libibverbs.so.1")
        .output()
        .expect("cc");
    assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
    let pair = Pair::start();
    let out = Command::new(&exe).env("LD_LIBRARY_PATH", lib_dir()).env("RDMA_RING", &pair.rings[0]).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.trim_end().ends_with("OK"), "{text}");
}
