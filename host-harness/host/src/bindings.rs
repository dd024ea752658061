//! Rust types and traits generated from the WIT contract (`wit/`), world `kubernetes-provider`.
//!
//! Imports and exports are async so a host call (a Kubernetes request, a watch wait) suspends
//! the guest's fiber instead of blocking a runtime thread; imports are trappable so a host
//! failure that is not the guest's business (a broken resource table) ends the call.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "kubernetes-provider",
    imports: { default: async | trappable },
    exports: { default: async },
    with: {
        "paperclip:sandbox-provider/kube.watch": crate::kube_watch::WatchStream,
    },
});
