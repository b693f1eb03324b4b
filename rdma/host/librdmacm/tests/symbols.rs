//! Every exported symbol under the version rdma-core 44's `librdmacm.map`
//! gives it: our library's default-versioned dynamic symbols are exactly
//! those of the installed rdma-core library (Debian's `librdmacm1`).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// `name@VERSION` of every defined, default-versioned function or object.
fn exports(lib: &Path) -> BTreeSet<String> {
    let out = Command::new("objdump").arg("-T").arg(lib).output().expect("objdump (binutils)");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| (l.contains(" DF ") || l.contains(" DO ")) && !l.contains("*UND*"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (ver, name) = (f.get(f.len().checked_sub(2)?)?, f.last()?);
            (!ver.starts_with('(') && *ver != "Base").then(|| format!("{name}@{ver}"))
        })
        .collect()
}

#[test]
fn every_symbol_has_rdma_cores_version() {
    let theirs = Path::new("/usr/lib/x86_64-linux-gnu/librdmacm.so.1");
    assert!(theirs.exists(), "install librdmacm1 for this test");
    let ours = exports(&common::lib_dir().join("librdmacm.so.1"));
    let theirs = exports(theirs);
    let missing: Vec<_> = theirs.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&theirs).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:?}\nextra {extra:?}");
    assert!(ours.contains("rdma_create_id@RDMACM_1.0"));
    assert!(ours.contains("rdma_establish@RDMACM_1.2"));
    assert!(ours.contains("rdma_set_local_ece@RDMACM_1.3"));
}

/// librdmacm sits on libibverbs: ours names it, as rdma-core's does.
#[test]
fn needs_libibverbs() {
    let out = Command::new("objdump").arg("-p").arg(common::lib_dir().join("librdmacm.so.1")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("NEEDED               libibverbs.so.1"), "{text}");
    assert!(text.contains("SONAME               librdmacm.so.1"), "{text}");
}
