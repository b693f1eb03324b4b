//! Finds (or builds, once per test process) the bootable image.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ lives in the workspace").to_path_buf()
}

/// The image path: `$APPLIANCE_IMAGE` (what `make test` passes), else a build
/// in `target/image` (not the outer build's target directory, whose lock the
/// running `cargo test` holds).
pub fn image() -> &'static Path {
    static IMAGE: OnceLock<PathBuf> = OnceLock::new();
    IMAGE.get_or_init(|| {
        if let Some(p) = std::env::var_os("APPLIANCE_IMAGE") {
            return PathBuf::from(p);
        }
        let root = workspace_root();
        let target_dir = root.join("target/image");
        let status = Command::new(env!("CARGO"))
            .current_dir(&root)
            .args(["build", "--release", "-p", "kernel", "--target", "x86_64-unknown-none", "--target-dir"])
            .arg(&target_dir)
            .status()
            .expect("cannot run cargo to build the image");
        assert!(status.success(), "building the appliance image failed");
        target_dir.join("x86_64-unknown-none/release/appliance")
    })
}

/// A host tool of the `verbs` crate (`rc_pingpong`, `rdma`, ...): from
/// `$VERBS_BIN` (what `make test` passes), else built once into
/// `target/tools` (not the outer build's target directory, whose lock the
/// running `cargo test` holds).
pub fn verbs_tool(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        if let Some(p) = std::env::var_os("VERBS_BIN") {
            return PathBuf::from(p);
        }
        let root = workspace_root();
        let target_dir = root.join("target/tools");
        let status = Command::new(env!("CARGO"))
            .current_dir(&root)
            .args(["build", "--release", "-q", "-p", "verbs", "--bins", "--examples", "--target-dir"])
            .arg(&target_dir)
            .status()
            .expect("cannot run cargo to build the verbs tools");
        assert!(status.success(), "building the verbs tools failed");
        target_dir.join("release")
    });
    dir.join(name)
}

/// The folder holding our `libibverbs.so.1` and `librdmacm.so.1`:
/// `$ROCE_ABI_DIR` (what `make` passes), else `target/abi` (`make abi`).
pub fn abi_dir() -> PathBuf {
    let dir = std::env::var_os("ROCE_ABI_DIR").map_or_else(|| workspace_root().join("target/abi"), PathBuf::from);
    assert!(dir.join("libibverbs.so.1").exists(), "no {}/libibverbs.so.1: run `make abi` first", dir.display());
    dir
}
