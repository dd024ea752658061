//! Rust types and traits generated from each released version of the WIT contract (`wit/`),
//! world `kubernetes-provider`. A component is bound to the version it was built against; the
//! glue in `versions/` adapts each to the one host implementation.
//!
//! Imports and exports are async so a host call (a Kubernetes request, a watch wait) suspends
//! the guest's fiber instead of blocking a runtime thread; imports are trappable so a host
//! failure that is not the guest's business (a broken resource table) ends the call.

/// Contract 0.1.0 (frozen): no `deadline` import, no `denied` cases, no declared access.
pub mod since_v0_1_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.1.0",
        world: "kubernetes-provider",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "paperclip:sandbox-provider/kube.watch": crate::kube_watch::WatchStream,
        },
    });
}

/// Contract 0.2.0 (frozen): no `execute`, no `kube.exec`; Kubernetes fields in the `lease`.
pub mod since_v0_2_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.2.0",
        world: "kubernetes-provider",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "paperclip:sandbox-provider/kube.watch": crate::kube_watch::WatchStream,
        },
    });
}

/// Contract 0.3.0 (frozen): no `claim` backend, no `claimed-sandbox` in the placement.
pub mod since_v0_3_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.3.0",
        world: "kubernetes-provider",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "paperclip:sandbox-provider/kube.watch": crate::kube_watch::WatchStream,
        },
    });
}

/// Contract 0.4.0, the newest: the host's own types (`kube-error`, options) come from here.
pub mod since_v0_4_0 {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.4.0",
        world: "kubernetes-provider",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "paperclip:sandbox-provider/kube.watch": crate::kube_watch::WatchStream,
        },
    });
}

pub use since_v0_4_0::paperclip::sandbox_provider::{deadline, kube, log, types};
