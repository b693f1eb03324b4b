//! Every struct size and field offset this library relies on, checked
//! against rdma-core's installed headers (`/usr/include/rdma/rdma_cma.h`,
//! Debian's `librdmacm-dev`): a C program prints each expression of
//! [`rdmacm_abi::abi::layout_checks`] and we compare.

use std::fmt::Write as _;
use std::process::Command;

#[test]
fn every_size_and_offset_matches_rdma_cma_h() {
    let header = std::path::Path::new("/usr/include/rdma/rdma_cma.h");
    assert!(header.exists(), "install librdmacm-dev (rdma-core's headers) for this test");
    let checks = rdmacm_abi::abi::layout_checks();
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n#include <rdma/rdma_cma.h>\nint main(void) {\n");
    for k in &checks {
        writeln!(c, "  printf(\"%zu\\n\", (size_t)({}));", k.c_expr).unwrap();
    }
    c.push_str("  return 0;\n}\n");
    let dir = tempfile::tempdir().unwrap();
    let (src, exe) = (dir.path().join("layout.c"), dir.path().join("layout"));
    std::fs::write(&src, c).unwrap();
    let cc = Command::new("cc").arg("-o").arg(&exe).arg(&src).output().expect("cc");
    assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
    let out = Command::new(&exe).output().unwrap();
    let theirs: Vec<usize> = String::from_utf8(out.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(theirs.len(), checks.len());
    let wrong: Vec<String> = checks
        .iter()
        .zip(&theirs)
        .filter(|(k, t)| k.ours != **t)
        .map(|(k, t)| format!("{}: ours {}, rdma_cma.h {}", k.c_expr, k.ours, t))
        .collect();
    assert!(wrong.is_empty(), "layout differs from rdma-core:\n{}", wrong.join("\n"));
}
