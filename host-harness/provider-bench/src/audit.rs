//! The leak audit after a load run: once garbage collection settles, nothing the provider made
//! may remain in the benchmark's namespace (workloads, pods, Secrets, claims). With a warm
//! pool in the namespace its members are the pool's: [`claim_leftovers`] counts only what a
//! SandboxClaim made or adopted.

use std::time::{Duration, Instant};

use embedded_cluster::EmbeddedCluster;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::ResourceExt;
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

/// What is left of the claim backend's leases, as `Kind name`, after waiting up to `settle`:
/// SandboxClaims, the provider's Secrets, and the Sandboxes (and their pods) a claim owns.
pub async fn claim_leftovers(cluster: &EmbeddedCluster, settle: Duration) -> anyhow::Result<Vec<String>> {
    let admin = cluster.client().await?;
    let deadline = Instant::now() + settle;
    loop {
        let left = list_claimed(&admin).await?;
        if left.is_empty() || Instant::now() >= deadline {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn list_claimed(admin: &kube::Client) -> anyhow::Result<Vec<String>> {
    use contract::k8s::agent_sandbox::{CLAIM_KIND, CLAIM_UID_LABEL, CLAIMS, EXTENSIONS_GROUP};
    let params = ListParams::default();
    let mut left = Vec::new();
    let gvk = GroupVersionKind::gvk(EXTENSIONS_GROUP, "v1beta1", CLAIM_KIND);
    let claims: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), NAMESPACE, &ApiResource::from_gvk_with_plural(&gvk, CLAIMS));
    left.extend(claims.list(&params).await?.items.into_iter().map(|o| named(CLAIM_KIND, o.metadata.name)));
    let gvk = GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox");
    let sandboxes: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), NAMESPACE, &ApiResource::from_gvk_with_plural(&gvk, "sandboxes"));
    let mut claimed = Vec::new();
    for sandbox in sandboxes.list(&params).await?.items {
        let owners = sandbox.metadata.owner_references.iter().flatten();
        if owners.clone().any(|r| r.kind == CLAIM_KIND) || sandbox.labels().contains_key(CLAIM_UID_LABEL) {
            claimed.extend(sandbox.metadata.uid.clone());
            left.push(named("Sandbox", sandbox.metadata.name));
        }
    }
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    for pod in pods.list(&params).await?.items {
        if pod.metadata.owner_references.iter().flatten().any(|r| claimed.contains(&r.uid)) {
            left.push(named("Pod", pod.metadata.name));
        }
    }
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let owned = ListParams::default().labels(provider_host::policy::MANAGED_BY_LABEL);
    left.extend(secrets.list(&owned).await?.items.into_iter().map(|o| named("Secret", o.metadata.name)));
    Ok(left)
}
