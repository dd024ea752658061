//! The garbage collector: follows ownerReferences, as kube-controller-manager's does.
//!
//! - Background: a dependent whose owners are all gone is deleted; a dependent that lost only
//!   some owners has the dangling references removed.
//! - Foreground: an owner with the `foregroundDeletion` finalizer has its dependents deleted,
//!   and the finalizer removed once no `blockOwnerDeletion` dependent is left.
//! - Orphan: an owner with the `orphan` finalizer has its references stripped from every
//!   dependent, then the finalizer removed.
//!
//! It is a client: it watches every collectable resource through the API and acts with plain
//! DELETE and PATCH calls, so it runs against any API server.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::Notify;

use super::served_sandbox_resource;

/// The resources whose objects the collector tracks (as owners and as dependents).
async fn tracked(client: &kube::Client) -> Vec<ApiResource> {
    use k8s_openapi::api::{batch::v1::Job, core::v1};
    let mut out = vec![
        ApiResource::erase::<v1::Pod>(&()),
        ApiResource::erase::<v1::Secret>(&()),
        ApiResource::erase::<v1::ConfigMap>(&()),
        ApiResource::erase::<v1::Service>(&()),
        ApiResource::erase::<v1::PersistentVolumeClaim>(&()),
        ApiResource::erase::<Job>(&()),
    ];
    if let Some(sandbox) = served_sandbox_resource(client).await {
        out.push(sandbox);
    }
    out
}

struct Tracked {
    resource: ApiResource,
    store: Store<DynamicObject>,
}

/// Runs the garbage collector until dropped.
pub async fn run(client: kube::Client) -> anyhow::Result<()> {
    let changed = Arc::new(Notify::new());
    let mut tracked_kinds = Vec::new();
    for resource in tracked(&client).await {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let writer = reflector::store::Writer::new(resource.clone());
        let reader = writer.as_reader();
        let notify = changed.clone();
        let stream =
            reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff().applied_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                if let Err(e) = item {
                    tracing::debug!(error = %e, "garbage collector watch error");
                }
                notify.notify_one();
            }
        });
        tracked_kinds.push(Tracked { resource, store: reader });
    }
    for t in &tracked_kinds {
        t.store.wait_until_ready().await.ok();
    }
    let mut collector = Collector { client, kinds: tracked_kinds, discovered: HashMap::new() };
    loop {
        collector.sweep().await;
        // Coalesce bursts of events into one sweep; sweep periodically to catch missed edges.
        tokio::select! {
            _ = changed.notified() => tokio::time::sleep(Duration::from_millis(20)).await,
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

struct Collector {
    client: kube::Client,
    kinds: Vec<Tracked>,
    discovered: HashMap<String, Option<ApiResource>>,
}

/// A cached object together with the resource it belongs to.
struct Node {
    resource: ApiResource,
    obj: Arc<DynamicObject>,
}

impl Collector {
    fn snapshot(&self) -> Vec<Node> {
        self.kinds
            .iter()
            .flat_map(|t| t.store.state().into_iter().map(|obj| Node { resource: t.resource.clone(), obj }))
            .collect()
    }

    fn api(&self, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }

    async fn sweep(&mut self) {
        let nodes = self.snapshot();
        let by_uid: HashMap<&str, &Node> =
            nodes.iter().filter_map(|n| n.obj.metadata.uid.as_deref().map(|u| (u, n))).collect();
        let mut dependents: HashMap<&str, Vec<&Node>> = HashMap::new();
        for n in &nodes {
            for r in n.obj.metadata.owner_references.iter().flatten() {
                dependents.entry(r.uid.as_str()).or_default().push(n);
            }
        }

        for owner in nodes.iter().filter(|n| n.obj.metadata.deletion_timestamp.is_some()) {
            let finalizers = owner.obj.metadata.finalizers.clone().unwrap_or_default();
            let uid = owner.obj.metadata.uid.clone().unwrap_or_default();
            let deps = dependents.get(uid.as_str()).cloned().unwrap_or_default();
            if finalizers.iter().any(|f| f == "orphan") {
                let mut all_done = true;
                for d in &deps {
                    all_done &= self.strip_owner(d, &[uid.as_str()]).await;
                }
                if all_done {
                    self.remove_finalizer(owner, "orphan").await;
                }
            } else if finalizers.iter().any(|f| f == "foregroundDeletion") {
                for d in deps.iter().filter(|d| d.obj.metadata.deletion_timestamp.is_none()) {
                    self.delete(d, PropagationPolicy::Foreground).await;
                }
                let blocking = deps.iter().any(|d| {
                    d.obj
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.uid == uid && r.block_owner_deletion == Some(true))
                });
                if !blocking {
                    self.remove_finalizer(owner, "foregroundDeletion").await;
                }
            }
        }

        for n in &nodes {
            let refs = n.obj.metadata.owner_references.clone().unwrap_or_default();
            if refs.is_empty() || n.obj.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let mut dangling = Vec::new();
            for r in &refs {
                if by_uid.contains_key(r.uid.as_str()) {
                    continue;
                }
                if !self.owner_exists(n, r).await {
                    dangling.push(r.uid.clone());
                }
            }
            if dangling.is_empty() {
                continue;
            }
            if dangling.len() == refs.len() {
                self.delete(n, PropagationPolicy::Background).await;
            } else {
                let uids: Vec<&str> = dangling.iter().map(String::as_str).collect();
                self.strip_owner(n, &uids).await;
            }
        }
    }

    /// Confirms with a live read that an owner missing from the caches is really gone.
    async fn owner_exists(
        &mut self,
        dependent: &Node,
        r: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    ) -> bool {
        let Some(resource) = self.resource_for(&r.api_version, &r.kind).await else {
            // An owner kind the cluster does not serve cannot exist.
            return false;
        };
        let ns = dependent.obj.metadata.namespace.as_deref();
        match self.api(&resource, ns).get_opt(&r.name).await {
            Ok(Some(o)) => o.metadata.uid.as_deref() == Some(r.uid.as_str()),
            Ok(None) => false,
            // Could not tell: keep the dependent.
            Err(_) => true,
        }
    }

    async fn resource_for(&mut self, api_version: &str, kind: &str) -> Option<ApiResource> {
        if let Some(t) = self.kinds.iter().find(|t| t.resource.api_version == api_version && t.resource.kind == kind) {
            return Some(t.resource.clone());
        }
        let key = format!("{api_version}/{kind}");
        if let Some(found) = self.discovered.get(&key) {
            return found.clone();
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = kube::discovery::pinned_kind(&self.client, &gvk).await.ok().map(|(ar, _)| ar);
        self.discovered.insert(key, found.clone());
        found
    }

    async fn delete(&self, n: &Node, policy: PropagationPolicy) {
        let name = n.obj.metadata.name.clone().unwrap_or_default();
        let params = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(Preconditions { uid: n.obj.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        match self.api(&n.resource, n.obj.metadata.namespace.as_deref()).delete(&name, &params).await {
            Ok(_) => tracing::debug!(kind = %n.resource.kind, %name, "garbage collected"),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => tracing::warn!(kind = %n.resource.kind, %name, error = %e, "garbage collection delete failed"),
        }
    }

    /// Removes owner references; true when done (or nothing to do).
    async fn strip_owner(&self, n: &Node, owner_uids: &[&str]) -> bool {
        let refs = n.obj.metadata.owner_references.clone().unwrap_or_default();
        let kept: Vec<_> = refs.iter().filter(|r| !owner_uids.contains(&r.uid.as_str())).cloned().collect();
        if kept.len() == refs.len() {
            return true;
        }
        let patch = json!({"metadata": {"ownerReferences": kept, "resourceVersion": n.obj.metadata.resource_version}});
        let name = n.obj.metadata.name.clone().unwrap_or_default();
        match self
            .api(&n.resource, n.obj.metadata.namespace.as_deref())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => true,
            Err(kube::Error::Api(e)) if e.code == 404 => true,
            Err(e) => {
                tracing::debug!(%name, error = %e, "could not strip owner references yet");
                false
            }
        }
    }

    async fn remove_finalizer(&self, n: &Node, finalizer: &str) {
        let remaining: Vec<String> =
            n.obj.metadata.finalizers.iter().flatten().filter(|f| *f != finalizer).cloned().collect();
        let patch = json!({"metadata": {"finalizers": remaining, "resourceVersion": n.obj.metadata.resource_version}});
        let name = n.obj.metadata.name.clone().unwrap_or_default();
        match self
            .api(&n.resource, n.obj.metadata.namespace.as_deref())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => tracing::warn!(%name, error = %e, "could not remove the {finalizer} finalizer"),
        }
    }
}
