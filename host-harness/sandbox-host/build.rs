//! Builds the Kubernetes provider component that `sandbox-host` carries as its default, so an
//! installed binary (`cargo install --path host-harness/sandbox-host`) needs no file beside it.
//!
//! The component is built as `make component` builds it: the workspace's `provider` package,
//! for `wasm32-unknown-unknown` (linked as the workspace's `.cargo/config.toml` says), in the
//! `component` profile, into the same target directory, so after `make component` this is a
//! no-op and a build from scratch does that work once. The nested
//! cargo takes the locks of the `component` profile's directories, never the ones of the build
//! running this script (the debug or release profile), so the two do not wait on each other.
//! The path of the built component reaches the crate as `SANDBOX_HOST_PROVIDER_COMPONENT`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// What the crate's build inherits that must not reach the nested build: flags and wrappers for
/// the host's compilation (clippy's driver, under `cargo clippy`), not for the component's.
const NOT_PASSED_ON: [&str; 5] =
    ["CARGO_ENCODED_RUSTFLAGS", "RUSTC_WORKSPACE_WRAPPER", "CLIPPY_ARGS", "CLIPPY_CONF_DIR", "CARGO_BUILD_TARGET"];

fn main() -> ExitCode {
    match build() {
        Ok(component) => {
            println!("cargo::rustc-env=SANDBOX_HOST_PROVIDER_COMPONENT={}", component.display());
            ExitCode::SUCCESS
        }
        Err(why) => {
            println!("cargo::error={why}");
            ExitCode::FAILURE
        }
    }
}

fn build() -> Result<PathBuf, String> {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR is not set")?);
    let root = manifest_dir.join("../..");
    for input in ["provider", "contract", "wit", "Cargo.toml", "Cargo.lock", ".cargo/config.toml"] {
        println!("cargo::rerun-if-changed={}", root.join(input).display());
    }
    let target_dir = target_dir()?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--quiet", "-p", "provider", "--target", "wasm32-unknown-unknown", "--profile", "component"])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .stdout(Stdio::null());
    for name in NOT_PASSED_ON {
        command.env_remove(name);
    }
    let status = command.status().map_err(|e| format!("cannot run cargo to build the provider component: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the provider component failed ({status}); its errors are above. The wasm32-unknown-unknown \
             target comes with the toolchain rust-toolchain.toml pins (`rustup target add wasm32-unknown-unknown` \
             otherwise)"
        ));
    }
    let component = target_dir.join("wasm32-unknown-unknown/component/provider.wasm");
    if !component.exists() {
        return Err(format!("the provider build succeeded but left no component at {}", component.display()));
    }
    Ok(component)
}

/// The target directory of this build: the nearest ancestor of `OUT_DIR` that cargo marked as
/// one (`CACHEDIR.TAG`), wherever `--target-dir`, `CARGO_TARGET_DIR` or `cargo install` put it.
fn target_dir() -> Result<PathBuf, String> {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("no cargo target directory above {}", out_dir.display()))
}
