//! The WASI a provider gets: clocks and random, nothing else.
//!
//! Rust's `wasm32-wasip2` std imports WASI 0.2 interfaces (cli, io, clocks, random, filesystem),
//! so they must be linked for such a component to instantiate (the Kubernetes provider, built
//! for `wasm32-unknown-unknown`, imports only the clocks and `wasi:io/poll`, which a sleep
//! waits on); the context behind them is empty:
//! no preopened directories, no environment, no arguments, closed stdin, discarded stdout and
//! stderr, and every socket use and name lookup refused. A provider reaches the cluster only
//! through the policy-checked `kube` import and speaks only through `log`.

use wasmtime::component::Linker;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

use crate::state::CallState;

/// A WASI context with no capabilities beyond clocks and random.
pub(crate) fn empty_context() -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(|_, _| Box::pin(async { false }));
    builder.build()
}

/// Links the WASI 0.2 interfaces (async, so a guest waiting on a clock yields its fiber).
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)
}
