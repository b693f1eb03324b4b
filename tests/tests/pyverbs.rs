//! pyverbs (Debian's `python3-pyverbs`, unmodified) over our
//! `libibverbs.so.1` (issue 14): its Cython modules import only symbols our
//! library exports, and tests/pyverbs/smoke.py lists the devices, queries
//! the device, port and a GID, and creates a PD, an MR (pyverbs' own
//! buffer, read back), a CQ on a completion channel and RC/UC/UD QPs taken
//! to INIT, on one appliance's ring.

#![deny(unsafe_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::tool::finish;
use tests::{Appliance, abi_dir};

/// Debian's interpreter: pyverbs is installed for it, not for another
/// `python3` that may come first on PATH.
const PYTHON: &str = "/usr/bin/python3";

#[test]
fn pyverbs_over_our_libibverbs() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("pyverbs/smoke.py");
    let probe = Command::new(PYTHON).args(["-c", "import pyverbs.device"]).status();
    assert!(
        probe.is_ok_and(|s| s.success()),
        "{PYTHON} cannot import pyverbs: `make deps-rdma-core` installs python3-pyverbs"
    );
    let (_app, shm) = Appliance::with_ring("pyverbs", 64 << 20).unwrap();

    let child = Command::new(PYTHON)
        .arg(&script)
        .env("LD_LIBRARY_PATH", abi_dir())
        .env("RDMA_RING", &shm.path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start python3");
    let (ok, out) = finish(child, Duration::from_secs(120)).unwrap();
    assert!(ok, "pyverbs smoke failed:\n{out}");
    for step in [
        "ok devices rxe0",
        "ok query_device",
        "ok query_port state=4",
        "ok query_gid 1 0000:0000:0000:0000:0000:ffff:0a00:0001",
        "ok pd",
        "readback",
        "ok cq",
        "ok qp rc",
        "ok qp uc",
        "ok qp ud",
        "ok done",
    ] {
        assert!(out.contains(step), "pyverbs: no `{step}` in:\n{out}");
    }
}
