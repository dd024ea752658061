//! `pods/log`: the simulated kubelet runs no container processes (only `pods/exec` commands,
//! whose output goes to the exec's client), so a started container's log is empty, but the
//! request is answered and refused as kube-apiserver (through the kubelet) does: the container
//! must be named when the pod has several, must exist ([`ContainerNames::addressed`]), and must
//! have started.

use contract::k8s::pod_container::ContainerNames;
use serde_json::Value;

use crate::apiserver::{ApiServer, Ctx};
use crate::status::ApiError;

impl ApiServer {
    /// GET `pods/{name}/log`: the container's log as text (empty: nothing ran).
    pub fn pod_log(&self, ctx: &Ctx<'_>) -> Result<String, ApiError> {
        let name = ctx.name.ok_or_else(|| ApiError::method_not_allowed("a resource name is required"))?;
        let pod = self
            .store
            .get("pods", ctx.namespace.unwrap_or_default(), name)
            .ok_or_else(|| ApiError::not_found(ctx.subject(name)))?;
        let container =
            ContainerNames::of(&pod).addressed(name, ctx.query.get("container")).map_err(ApiError::bad_request)?;
        let status = ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"]
            .iter()
            .filter_map(|list| pod.pointer(&format!("/status/{list}")).and_then(Value::as_array))
            .flatten()
            .find(|s| s["name"] == container);
        let waiting = match status {
            None => Some("ContainerCreating".to_string()),
            Some(s) if s["state"]["waiting"].is_object() => {
                Some(s["state"]["waiting"]["reason"].as_str().unwrap_or("ContainerCreating").to_string())
            }
            Some(_) => None,
        };
        if let Some(reason) = waiting {
            return Err(ApiError::bad_request(format!(
                "container \"{container}\" in pod \"{name}\" is waiting to start: {reason}"
            )));
        }
        Ok(String::new())
    }
}
