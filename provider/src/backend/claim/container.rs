//! The container a claim lease's commands run in. A claim's pod comes from its warm pool's
//! template, whose containers this provider does not name, and the API server picks none for an
//! exec into a pod with several: the one the pod's `kubectl.kubernetes.io/default-container`
//! annotation names (as `kubectl exec` reads it), else `sandbox`, else the only one. A pod with
//! several and no hint runs nothing.

use contract::quote;
use serde_json::Value;

use crate::api_versions;
use crate::errors::{FromKube, ProviderError};
use crate::kube_api::{Kube, KubeError};
use crate::naming::CONTAINER_NAME;
use crate::object;

/// The pod annotation that names the container `kubectl exec` and `kubectl logs` use.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

/// The container of a claim lease's pod `namespace/pod` to run commands in (the API server has
/// no default): read from the pod, see [`pick_container`].
pub(crate) fn claim_container<K: Kube>(kube: &K, namespace: &str, pod: &str) -> Result<String, ProviderError> {
    match kube.get(&api_versions::pods(), Some(namespace), pod) {
        Ok(found) => pick_container(&found, &format!("pod {namespace}/{pod}")),
        Err(KubeError::NotFound(_)) => Err(ProviderError::unavailable(format!(
            "pod {namespace}/{pod} went away before the command started (its workload replaces it); retry the command"
        ))),
        Err(e) => Err(ProviderError::from_kube(&e, &format!("get pod {namespace}/{pod} (to pick its container)"))),
    }
}

/// The container of `pod` (`what` names it) that the annotation [`DEFAULT_CONTAINER_ANNOTATION`]
/// names when it is one of the pod's, else the one named [`CONTAINER_NAME`], else the only one;
/// several without a hint are refused.
fn pick_container(pod: &Value, what: &str) -> Result<String, ProviderError> {
    let names: Vec<&str> = object::at(pod, "/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    let annotated = object::annotation(pod, DEFAULT_CONTAINER_ANNOTATION).filter(|a| names.contains(a));
    let chosen = annotated.or_else(|| names.iter().copied().find(|n| *n == CONTAINER_NAME));
    match (chosen, names.as_slice()) {
        (Some(name), _) | (None, &[name]) => Ok(name.to_string()),
        (None, []) => Err(ProviderError::rejected(format!("{what} has no containers to run the command in."))),
        (None, several) => Err(ProviderError::rejected(format!(
            "{what} has several containers ({}) and none is marked for commands, so nothing was run. Name one in \
             the template's pod annotation {DEFAULT_CONTAINER_ANNOTATION} (or name it {CONTAINER_NAME}).",
            several.iter().map(|n| quote(n).to_string()).collect::<Vec<_>>().join(", ")
        ))),
    }
}
