//! The container a claim lease's commands run in. A claim's pod comes from its warm pool's
//! template, whose containers this provider does not name, and the API server picks none for an
//! exec into a pod with several: the one the pod's `kubectl.kubernetes.io/default-container`
//! annotation names (as `kubectl exec` reads it), else `sandbox`, else the only one. A pod with
//! several and no hint runs nothing.
//!
//! The pick is made when the lease gets its pod (its Ready pod, read by acquire and
//! resume-check) and recorded in the lease's metadata ([`record`]); execute reads the pod to
//! pick ([`claim_container`]) only for a pod the metadata does not name, or when the pod refuses
//! the command (a 400, as for a container it does not have). A pod's containers cannot change;
//! its annotation can, and a new hint is taken at the next resume-check.

use contract::quote;
use serde_json::Value;

use crate::api_versions;
use crate::errors::{FromKube, ProviderError};
use crate::kube_api::{Kube, KubeError};
use crate::lease::{LeaseMetadata, PodContainer};
use crate::naming::CONTAINER_NAME;
use crate::workload_state::{DEFAULT_CONTAINER_ANNOTATION, PodInfo, command_container};

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

/// What a claim lease records of its ready `pod`: the container its commands go to, so that
/// execute need not read the pod again while the lease names that pod.
pub(crate) fn record(pod: &PodInfo) -> Option<PodContainer> {
    pod.command_container.clone().map(|name| PodContainer { pod: pod.name.clone(), name })
}

/// The container `metadata` records for `pod`, if it records one for that pod.
pub(crate) fn recorded_for(metadata: &LeaseMetadata, pod: &str) -> Option<String> {
    metadata.container.as_ref().filter(|c| c.pod == pod).map(|c| c.name.clone())
}

/// The container of `pod` (`what` names it) that commands go to, see [`command_container`]; a
/// pod with none, or several without a hint, is refused.
fn pick_container(pod: &Value, what: &str) -> Result<String, ProviderError> {
    match command_container(pod) {
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
