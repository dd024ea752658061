//! Helpers shared by the scenarios (controllers; ServiceAccounts and RBAC in `rbac`).

use std::time::Duration;

use embedded_cluster::{ClusterConfig, EmbeddedCluster, SandboxVersions};
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{Condition, await_condition};

pub mod exec;
pub mod rbac;

/// A full cluster (API server and every controller).
pub async fn full_cluster(versions: SandboxVersions) -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig { sandbox_versions: versions, ..Default::default() })
        .await
        .expect("start the embedded cluster")
}

/// The Sandbox resource of one version.
pub fn sandbox_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("agents.x-k8s.io", version, "Sandbox"), "sandboxes")
}

/// How long a test waits for the cluster where the wait is not what it tests: controllers
/// that finish in a second on an idle machine, with a wide margin for a loaded one.
pub const WAIT: Duration = Duration::from_secs(120);

/// Waits (by watching) until `cond` holds for the named object, or fails the test.
pub async fn wait_for<K, C>(api: &Api<K>, name: &str, cond: C, what: &str) -> Option<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    C: Condition<K>,
{
    tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|e| panic!("watch failed waiting for {what}: {e}"))
}

/// The status of a condition of a dynamic object (`True`, `False`, `Unknown`), with its reason.
pub fn condition(obj: Option<&DynamicObject>, kind: &str) -> Option<(String, String)> {
    let cs = obj?.data["status"]["conditions"].as_array()?;
    let c = cs.iter().find(|c| c["type"] == kind)?;
    Some((c["status"].as_str()?.to_string(), c["reason"].as_str().unwrap_or_default().to_string()))
}

/// A condition that holds when the dynamic object's condition has this status and reason.
pub fn has_condition(
    kind: &'static str,
    status: &'static str,
    reason: Option<&'static str>,
) -> impl Condition<DynamicObject> {
    move |obj: Option<&DynamicObject>| {
        condition(obj, kind).is_some_and(|(s, r)| s == status && reason.is_none_or(|want| r == want))
    }
}

/// Polls `f` until true (for states that no single watch shows, such as "A gone and B present").
pub async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for: {what}");
}
