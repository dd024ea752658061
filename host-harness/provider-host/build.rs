//! Un-ignores the real-provider test (`tests/all/runner.rs`) when `PROVIDER_WASM` names an existing
//! file at build time, so `PROVIDER_WASM=... cargo test` runs it and a plain `cargo test` lists
//! it as ignored instead of pretending it passed.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(provider_wasm)");
    println!("cargo::rerun-if-env-changed=PROVIDER_WASM");
    if let Some(path) = std::env::var_os("PROVIDER_WASM") {
        println!("cargo::rerun-if-changed={}", std::path::Path::new(&path).display());
        if std::path::Path::new(&path).is_file() {
            println!("cargo::rustc-cfg=provider_wasm");
        }
    }
}
