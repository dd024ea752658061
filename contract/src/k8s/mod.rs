//! Kubernetes' own rules for names, label values, quantities, selectors, image registries,
//! pod security, the container a pod request addresses and reading objects, written once for every side that must agree on them: the provider checks a
//! config with them before it sends anything, the host checks what a guest asks for, and the
//! embedded cluster validates objects with them, so `validate-config` never passes what the API
//! server then refuses.
//!
//! They follow `k8s.io/apimachinery` (`pkg/util/validation`, `pkg/api/resource`) word for word,
//! and need only `std`, so the wasm32 provider links them too.

pub mod agent_sandbox;
pub mod image;
pub mod names;
pub mod object;
pub mod pod_container;
pub mod pod_security;
pub mod quantity;
pub mod selectors;

/// Go's `utilerrors.Aggregate` text, as apimachinery joins several errors: one error
/// verbatim, several (deduplicated) in brackets.
pub fn aggregate(errors: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    if unique.len() == 1 { unique.concat() } else { format!("[{}]", unique.join(", ")) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn aggregates_read_like_go() {
        assert_eq!(super::aggregate(vec!["a".into()]), "a");
        assert_eq!(super::aggregate(vec!["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
