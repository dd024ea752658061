//! Kubernetes' own rules for names, label values and quantities, written once for every side
//! that must agree on them: the provider checks a config with them before it sends anything,
//! the host checks what a guest asks for, and the embedded cluster validates objects with them,
//! so `validate-config` never passes what the API server then refuses.
//!
//! They follow `k8s.io/apimachinery` (`pkg/util/validation`, `pkg/api/resource`) word for word,
//! and need only `std`, so the wasm32 provider links them too.

pub mod names;
pub mod quantity;
