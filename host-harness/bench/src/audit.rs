//! The leak audit after a load run: once garbage collection settles, nothing the provider made
//! may remain in the benchmark's namespace (workloads, pods, Secrets, claims).

use std::time::{Duration, Instant};

use embedded_cluster::EmbeddedCluster;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};

use crate::world::NAMESPACE;

/// What was left, as `Kind name`, after waiting up to `settle` for it to go.
pub async fn leftovers(cluster: &EmbeddedCluster, settle: Duration) -> anyhow::Result<Vec<String>> {
    let admin = cluster.client().await?;
    let deadline = Instant::now() + settle;
    loop {
        let left = list(&admin).await?;
        if left.is_empty() || Instant::now() >= deadline {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn list(admin: &kube::Client) -> anyhow::Result<Vec<String>> {
    let params = ListParams::default();
    let mut left = Vec::new();
    let gvk = GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox");
    let sandboxes: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), NAMESPACE, &ApiResource::from_gvk_with_plural(&gvk, "sandboxes"));
    left.extend(sandboxes.list(&params).await?.items.into_iter().map(|o| named("Sandbox", o.metadata.name)));
    let jobs: Api<Job> = Api::namespaced(admin.clone(), NAMESPACE);
    left.extend(jobs.list(&params).await?.items.into_iter().map(|o| named("Job", o.metadata.name)));
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    left.extend(pods.list(&params).await?.items.into_iter().map(|o| named("Pod", o.metadata.name)));
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NAMESPACE);
    left.extend(claims.list(&params).await?.items.into_iter().map(|o| named("PersistentVolumeClaim", o.metadata.name)));
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let owned = ListParams::default().labels(provider_host::policy::MANAGED_BY_LABEL);
    left.extend(secrets.list(&owned).await?.items.into_iter().map(|o| named("Secret", o.metadata.name)));
    Ok(left)
}

fn named(kind: &str, name: Option<String>) -> String {
    format!("{kind} {}", name.unwrap_or_default())
}
