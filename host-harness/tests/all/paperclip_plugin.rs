//! The Paperclip plugin (`paperclip-plugin/`) passes its own tests, which drive it with
//! Paperclip's plugin SDK (the environment test harness, and the worker's JSON-RPC on stdio)
//! against `sandbox-host cluster` and `sandbox-host serve` built here. Its dependencies come
//! from the committed lockfile (`npm ci`); node and npm must be on the machine.

use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-host");

fn npm(dir: &PathBuf, args: &[&str]) -> std::process::Output {
    Command::new("npm")
        .args(args)
        .current_dir(dir)
        .env("SANDBOX_HOST_BIN", BIN)
        .env(
            "SANDBOX_HOST_COMPONENT",
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../target/wasm32-wasip2/component/kubernetes_provider.wasm"),
        )
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run npm {} ({e}): install Node 20 and npm", args.join(" ")))
}

#[test]
fn the_paperclip_plugin_passes_its_sdk_tests() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../paperclip-plugin");
    let install = npm(&dir, &["ci", "--no-audit", "--no-fund"]);
    assert!(install.status.success(), "npm ci: {}", String::from_utf8_lossy(&install.stderr));
    let test = npm(&dir, &["test"]);
    let output = format!("{}{}", String::from_utf8_lossy(&test.stdout), String::from_utf8_lossy(&test.stderr));
    assert!(test.status.success(), "npm test failed:\n{output}");
    assert!(output.contains("# fail 0") && !output.contains("# pass 0"), "{output}");
}
