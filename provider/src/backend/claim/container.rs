//! The container a claim lease's commands run in. A claim's pod comes from its warm pool's
//! template, whose containers this provider does not name, and the API server picks none for an
//! exec into a pod with several: the one the pod's `kubectl.kubernetes.io/default-container`
//! annotation names (as `kubectl exec` reads it), else `sandbox`, else the only one. A pod with
//! several and no hint runs nothing.
//!
//! The pick is made when the lease gets its pod (its Ready pod, read by acquire and
//! resume-check) and recorded in the lease's metadata ([`recorded`]); execute reads the pod to
//! pick ([`claim_container`]) only for a pod the metadata does not name, or whose recorded
//! container the API server refuses. A pod's containers cannot change; its annotation can, and
//! a new hint is taken at the next resume-check.

use contract::quote;
use serde_json::Value;

use crate::api_versions;
use crate::errors::{FromKube, ProviderError};
use crate::kube_api::{Kube, KubeError};
use crate::lease::PodContainer;
use crate::naming::CONTAINER_NAME;
use crate::object;
use crate::workload_state::PodInfo;

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

/// The container of `pod` that commands go to (see [`choose`]), when the pod names one.
pub(crate) fn command_container(pod: &Value) -> Option<String> {
    choose(pod).ok().map(str::to_string)
}

/// What a claim lease records of its ready `pod`: the container its commands go to, so that
/// execute need not read the pod again while the lease names that pod.
pub(crate) fn recorded(pod: &PodInfo) -> Option<PodContainer> {
    pod.command_container.clone().map(|name| PodContainer { pod: pod.name.clone(), name })
}

/// The container of `pod` (`what` names it) that commands go to, see [`choose`]; a pod with
/// none, or several without a hint, is refused.
fn pick_container(pod: &Value, what: &str) -> Result<String, ProviderError> {
    match choose(pod) {
        Ok(name) => Ok(name.to_string()),
        Err(names) if names.is_empty() => {
            Err(ProviderError::rejected(format!("{what} has no containers to run the command in.")))
        }
        Err(several) => Err(ProviderError::rejected(format!(
            "{what} has several containers ({}) and none is marked for commands, so nothing was run. Name one in \
             the template's pod annotation {DEFAULT_CONTAINER_ANNOTATION} (or name it {CONTAINER_NAME}).",
            several.iter().map(|n| quote(n).to_string()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The container that the annotation [`DEFAULT_CONTAINER_ANNOTATION`] names when it is one of
/// the pod's, else the one named [`CONTAINER_NAME`], else the only one; else the names there
/// are to choose from (none, or several without a hint).
fn choose(pod: &Value) -> Result<&str, Vec<&str>> {
    let names: Vec<&str> = object::at(pod, "/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    let annotated = object::annotation(pod, DEFAULT_CONTAINER_ANNOTATION).filter(|a| names.contains(a));
    match annotated.or_else(|| names.iter().copied().find(|n| *n == CONTAINER_NAME)) {
        Some(name) => Ok(name),
        None if names.len() == 1 => Ok(names[0]),
        None => Err(names),
    }
}
