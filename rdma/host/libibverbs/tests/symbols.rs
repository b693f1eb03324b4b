//! Every exported symbol under the version rdma-core 44's
//! `libibverbs.map.in` gives it: our library's default-versioned dynamic
//! symbols are exactly those of the installed rdma-core library (Debian's
//! `libibverbs1`, built from that map).

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
    let theirs = Path::new("/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
    assert!(theirs.exists(), "install libibverbs1 for this test");
    let ours = exports(&common::lib_dir().join("libibverbs.so.1"));
    let theirs = exports(theirs);
    let missing: Vec<_> = theirs.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&theirs).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:?}\nextra {extra:?}");
    assert!(ours.contains("ibv_get_device_list@IBVERBS_1.1"));
    assert!(ours.contains("verbs_register_driver_34@IBVERBS_PRIVATE_34"));
}
