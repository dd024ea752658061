//! The `sandbox-host` binary from outside, one test binary (one link) for all of it.

mod cli;
mod installed;
mod kubeconfig;
mod leases;
mod lost_leases;
mod metrics;
mod namespaces;
mod no_test_bed;
mod probe;
mod progress;
mod readme;
mod reference_provider_cli;
mod secrets;
mod serve;
mod shell;
mod support;

/// The test bed's binary, `sandbox-dev`, built beside `sandbox-host` by `cargo test --workspace`
/// (`make test`): a test that needs a cluster in another process (at its own log level) runs
/// `sandbox-dev cluster`.
fn dev_bin() -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_sandbox-host")).with_file_name("sandbox-dev");
    assert!(
        path.exists(),
        "no sandbox-dev at {}: build it with `cargo build -p sandbox-dev` (make test does)",
        path.display()
    );
    path
}
