//! The built component itself: what it asks of any host that loads it.

use provider_host::{HostEngine, Limits, compile_cache};

use tests::component_path;

/// The WASI interfaces the provider may import: the clocks it reads and `wasi:io/poll`, which
/// its sleeps (a back-off between watch reconnects) wait on. Every import is linked into every
/// call's fresh instance, so each one the provider never calls costs every call.
const WASI_IMPORTS: [&str; 3] = ["wasi:clocks/monotonic-clock", "wasi:clocks/wall-clock", "wasi:io/poll"];

#[test]
fn the_provider_imports_the_contract_and_only_the_wasi_it_calls() {
    let wasm = std::fs::read(component_path()).expect("read the provider component");
    let engine = HostEngine::new(&Limits::default()).expect("the host's engine");
    let (component, _) = compile_cache::load(engine.engine(), &wasm, None).expect("compile the provider");
    let imports: Vec<String> =
        component.component_type().imports(engine.engine()).map(|(name, _)| name.to_string()).collect();
    // An import name is `package/interface@version`; the version is whatever the bindings pin.
    let unversioned = |name: &str| name.split_once('@').map_or(name, |(n, _)| n).to_string();
    let wasi: Vec<String> = imports.iter().filter(|n| n.starts_with("wasi:")).map(|n| unversioned(n)).collect();
    let unneeded: Vec<&String> = wasi.iter().filter(|n| !WASI_IMPORTS.contains(&n.as_str())).collect();
    assert!(unneeded.is_empty(), "the provider imports WASI it never calls: {unneeded:?} (all imports: {imports:?})");
    for contract in
        ["paperclip:sandbox-provider/kube", "paperclip:sandbox-provider/log", "paperclip:sandbox-provider/deadline"]
    {
        assert!(
            imports.iter().any(|n| unversioned(n) == contract),
            "the provider does not import {contract}: {imports:?}"
        );
    }
    assert!(wasi.iter().any(|n| n == "wasi:clocks/monotonic-clock"), "no monotonic clock among {imports:?}");
}
