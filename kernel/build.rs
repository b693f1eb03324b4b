//! Links the image with boot's linker script (bare-metal target only).
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let script = format!("{dir}/../boot/linker.ld");
    println!("cargo:rerun-if-changed={script}");
    println!("cargo:rerun-if-changed={dir}/../boot/src/entry.S");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-T{script}");
        println!("cargo:rustc-link-arg-bins=--gc-sections");
    }
}
