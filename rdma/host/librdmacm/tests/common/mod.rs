//! Test support: libibverbs' two host-simulated appliances (its
//! tests/common, included as source), and both our libraries,
//! `libibverbs.so.1` and `librdmacm.so.1`, linked into one folder from the
//! staticlibs cargo built, for Debian's programs.
#![allow(dead_code)]

#[path = "../../../libibverbs/tests/common/mod.rs"]
mod ibv_common;

use std::path::{Path, PathBuf};

#[allow(unused_imports)]
pub use ibv_common::{PATIENCE, Pair, free_port};

/// The newest `deps/{prefix}-*.a` (`cargo test` does not copy it up).
fn staticlib(profile: &Path, prefix: &str) -> PathBuf {
    std::fs::read_dir(profile.join("deps"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with(prefix) && n.ends_with(".a")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .unwrap_or_else(|| panic!("no {prefix}*.a under {}", profile.display()))
}

/// The folder holding both libraries, linked once per test binary.
pub fn lib_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile = exe.parent().unwrap().parent().unwrap();
        let out = profile.join(format!("rdmacm-test-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        for (script, prefix) in
            [(here.join("../libibverbs/link.sh"), "libibverbs_abi-"), (here.join("link.sh"), "librdmacm_abi-")]
        {
            let st = std::process::Command::new(script).arg(staticlib(profile, prefix)).arg(&out).status().unwrap();
            assert!(st.success(), "linking {prefix} failed");
        }
        out
    })
}

/// Debian's program `prog` over our libraries and ring `ring`.
/// Run under `stdbuf -oL`, so what it prints can be watched line by line
/// (a pipe would otherwise hold perftest's lines until it exits).
pub fn program(prog: &str, ring: &Path) -> std::process::Command {
    let mut c = std::process::Command::new("stdbuf");
    c.args(["-oL", prog]);
    c.env("LD_LIBRARY_PATH", lib_dir())
        .env("RDMA_RING", ring)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    c
}
