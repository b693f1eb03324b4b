//! Every struct size and field offset this library relies on, checked
//! against rdma-core's installed headers (`/usr/include/infiniband/verbs.h`,
//! Debian's `libibverbs-dev`): a C program prints each expression of
//! [`ibverbs_abi::abi::layout_checks`] and we compare.

use std::fmt::Write as _;
use std::process::Command;

#[test]
fn every_size_and_offset_matches_verbs_h() {
    let header = std::path::Path::new("/usr/include/infiniband/verbs.h");
    assert!(header.exists(), "install libibverbs-dev (rdma-core's headers) for this test");
    let checks = ibverbs_abi::abi::layout_checks();
    let mut c =
        String::from("#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\nint main(void) {\n");
    for k in &checks {
        writeln!(c, "  printf(\"%zu\\n\", (size_t)({}));", k.c_expr).unwrap();
    }
    c.push_str("  return 0;\n}\n");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("layout.c");
    let exe = dir.path().join("layout");
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
        .map(|(k, t)| format!("{}: ours {}, verbs.h {}", k.c_expr, k.ours, t))
        .collect();
    assert!(wrong.is_empty(), "layout differs from rdma-core:\n{}", wrong.join("\n"));
}
