//! `pods/log`: the simulated kubelet runs no container processes (only `pods/exec` commands,
//! whose output goes to the exec's client), so a started container's log is empty, but the
//! request is answered and refused as kube-apiserver (through the kubelet) does: the container
//! must be named when the pod has several, must exist, and must have started.

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
        let containers: Vec<&str> = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        let container = match ctx.query.get("container") {
            Some(c) => c.to_string(),
            None if containers.len() == 1 => containers[0].to_string(),
            None => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    containers.join(" ")
                )));
            }
        };
        if !containers.contains(&container.as_str()) {
            let shown: String = container.chars().take(63).collect();
            return Err(ApiError::bad_request(format!("container {shown} is not valid for pod {name}")));
        }
        let status = pod
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .and_then(|s| s.iter().find(|s| s["name"] == container.as_str()));
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
