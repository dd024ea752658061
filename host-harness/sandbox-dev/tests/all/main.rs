//! The `sandbox-dev` binary from outside, one test binary (one link) for all of it.

mod cli;
mod demo;

use std::path::PathBuf;

/// A component `make component` builds, by file name: the Kubernetes provider
/// (`provider.wasm`) is built for wasm32-unknown-unknown, the reference provider for
/// wasm32-wasip2.
fn built(file: &str) -> PathBuf {
    let target = if file == "provider.wasm" { "wasm32-unknown-unknown" } else { "wasm32-wasip2" };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target").join(target).join("component").join(file);
    assert!(path.exists(), "no component at {}: run `make component` (make test does)", path.display());
    path
}
