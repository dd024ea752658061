//! What one call's store holds: its WASI context (empty), its resource table (open watches),
//! its limiter, and the policy-checked Kubernetes access. A store lives for exactly one export
//! call and is dropped afterwards, taking any open watch and any trapped state with it.

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::KubernetesProvider;
use crate::bindings::paperclip::sandbox_provider::types as types_wit;
use crate::kube_host::KubeHost;
use crate::limits::{CallLimiter, Limits};
use crate::wasi;

/// The data of one call's store.
pub struct CallState {
    /// The export being called, for log lines.
    pub(crate) call: &'static str,
    pub(crate) kube: KubeHost,
    pub(crate) table: ResourceTable,
    pub(crate) open_watches: usize,
    pub(crate) max_open_watches: usize,
    pub(crate) limiter: CallLimiter,
    wasi: WasiCtx,
}

impl CallState {
    /// Fresh state for one call of `call`.
    pub(crate) fn new(call: &'static str, kube: KubeHost, limits: &Limits) -> Self {
        Self {
            call,
            kube,
            table: ResourceTable::new(),
            open_watches: 0,
            max_open_watches: usize::try_from(limits.max_open_watches).unwrap_or(usize::MAX),
            limiter: CallLimiter::new(limits),
            wasi: wasi::empty_context(),
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl types_wit::Host for CallState {}

/// The linker with everything a `kubernetes-provider` component may import.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasi::add_to_linker(&mut linker)?;
    KubernetesProvider::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
    Ok(linker)
}
