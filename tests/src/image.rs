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
