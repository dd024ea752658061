//! The leak audit: every object a scenario's provider created is watched from before the
//! scenario starts, so the suite knows each one and how it was created; after the scenario and
//! a follow-up destroy, once garbage collection settles, none may remain, and none may ever
//! have existed without an owner or an expiry.
//!
//! Objects are found by the host's owner label: each scenario runs under an owner id of its
//! own, so whatever carries it was created in that scenario. Dependents (pods, claims) carry
//! no label; they are found by their `ownerReferences` to what was seen.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ApiResource;
use kube::runtime::watcher::{self, Event};
use provider_host::policy::MANAGED_BY_LABEL;
use serde_json::Value;
use tokio::task::JoinHandle;

/// What the audit knows of one created object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `Kind namespace/name`.
    pub what: String,
    pub uid: String,
    /// Whether, when first seen, it had an owner or an expiry the cluster enforces.
    pub guarded: bool,
}

/// The expiry the cluster enforces on an object of a kind the suite knows: a Sandbox deleted at
/// its `shutdownTime`, a Job ended at its `activeDeadlineSeconds`, a SandboxClaim deleted at its
/// lifecycle's `shutdownTime` (with `Retain`, the default, the claim would outlive it).
pub fn has_expiry(kind: &str, object: &Value) -> bool {
    let set = |pointer: &str| object.pointer(pointer).is_some_and(|v| !v.is_null() && v != "");
    match kind {
        "Sandbox" => set("/spec/shutdownTime") && object.pointer("/spec/shutdownPolicy") == Some(&"Delete".into()),
        "Job" => object.pointer("/spec/activeDeadlineSeconds").and_then(Value::as_i64).is_some_and(|s| s > 0),
        "SandboxClaim" => {
            let policy = object.pointer("/spec/lifecycle/shutdownPolicy").and_then(Value::as_str);
            set("/spec/lifecycle/shutdownTime") && matches!(policy, Some("Delete" | "DeleteForeground"))
        }
        _ => false,
    }
}

fn guarded(kind: &str, object: &Value) -> bool {
    let owned = object.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(|o| !o.is_empty());
    owned || has_expiry(kind, object)
}

/// Watches every type a provider may create, from before a scenario, for objects with its
/// owner label.
pub struct Observer {
    seen: Arc<Mutex<BTreeMap<String, Seen>>>,
    tasks: Vec<JoinHandle<()>>,
    admin: kube::Client,
    namespace: String,
    selector: String,
    types: Vec<ApiResource>,
    /// Terminating pods the audit found left, by uid: when first seen so, and their grace period.
    terminating: Mutex<BTreeMap<String, (tokio::time::Instant, Duration)>>,
}

impl Observer {
    /// Starts one watch per type and waits until each has listed what exists (so nothing the
    /// scenario creates is missed).
    pub async fn start(admin: kube::Client, namespace: &str, owner_id: &str, types: Vec<ApiResource>) -> Self {
        let seen: Arc<Mutex<BTreeMap<String, Seen>>> = Arc::default();
        let selector = format!("{MANAGED_BY_LABEL}={owner_id}");
        let mut tasks = Vec::new();
        let mut ready = Vec::new();
        for resource in &types {
            let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), namespace, resource);
            let config = watcher::Config::default().labels(&selector);
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            ready.push(rx);
            let seen = seen.clone();
            let kind = resource.kind.clone();
            tasks.push(tokio::spawn(async move {
                let mut tx = Some(tx);
                let mut events = watcher::watcher(api, config).boxed();
                while let Some(event) = events.next().await {
                    let object = match event {
                        Ok(Event::Apply(o) | Event::InitApply(o)) => o,
                        Ok(Event::InitDone) => {
                            if let Some(tx) = tx.take() {
                                let _ = tx.send(());
                            }
                            continue;
                        }
                        Ok(Event::Delete(_) | Event::Init) | Err(_) => continue,
                    };
                    let value = serde_json::to_value(&object).unwrap_or(Value::Null);
                    let uid = object.metadata.uid.clone().unwrap_or_default();
                    let what = format!(
                        "{kind} {}/{}",
                        object.metadata.namespace.as_deref().unwrap_or_default(),
                        object.metadata.name.as_deref().unwrap_or_default()
                    );
                    if let Ok(mut seen) = seen.lock() {
                        seen.entry(uid.clone()).or_insert(Seen { what, uid, guarded: guarded(&kind, &value) });
                    }
                }
            }));
        }
        for rx in ready {
            let _ = tokio::time::timeout(Duration::from_secs(10), rx).await;
        }
        Self { seen, tasks, admin, namespace: namespace.to_string(), selector, types, terminating: Mutex::default() }
    }

    /// The types watched: those the provider may create.
    pub fn types(&self) -> &[ApiResource] {
        &self.types
    }

    /// Every object seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.values().cloned().collect()).unwrap_or_default()
    }

    /// Objects that existed, however briefly, with neither an owner nor an expiry: a crash at
    /// that moment would have leaked them for good.
    pub fn unguarded(&self) -> Vec<String> {
        self.seen().into_iter().filter(|s| !s.guarded).map(|s| s.what).collect()
    }

    /// What is left of the scenario: objects with its owner label, Sandboxes owned by anything
    /// it created (a claim's Sandbox, adopted from a warm pool, carries no owner label), and pods
    /// or volume claims owned by either.
    pub async fn leftovers(&self) -> Result<Vec<String>, String> {
        let mut left = Vec::new();
        for resource in &self.types {
            let api: Api<DynamicObject> = Api::namespaced_with(self.admin.clone(), &self.namespace, resource);
            let listed = api.list(&ListParams::default().labels(&self.selector)).await.map_err(|e| e.to_string())?;
            left.extend(
                listed.items.iter().map(|o| format!("{} {}", resource.kind, o.metadata.name.as_deref().unwrap_or("?"))),
            );
        }
        let mut uids: BTreeSet<String> = self.seen().into_iter().map(|s| s.uid).collect();
        if let Some(sandboxes) = self.types.iter().find(|t| t.plural == "sandboxes") {
            let api: Api<DynamicObject> = Api::namespaced_with(self.admin.clone(), &self.namespace, sandboxes);
            let mut claimed = Vec::new();
            for sandbox in api.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items {
                let refs = sandbox.metadata.owner_references.iter().flatten();
                if refs.clone().any(|r| r.kind == "SandboxClaim" && uids.contains(&r.uid)) {
                    left.push(format!("Sandbox {} (of a claim)", sandbox.metadata.name.as_deref().unwrap_or("?")));
                    claimed.extend(sandbox.metadata.uid.clone());
                }
            }
            uids.extend(claimed);
        }
        let owned_by_seen = |refs: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>| {
            refs.into_iter().flatten().any(|r| uids.contains(&r.uid))
        };
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        for pod in pods.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items {
            if owned_by_seen(pod.metadata.owner_references.as_ref()) {
                let name = pod.metadata.name.as_deref().unwrap_or("?");
                let grace = pod.metadata.deletion_timestamp.as_ref().and(pod.metadata.deletion_grace_period_seconds);
                left.push(match grace {
                    Some(grace) => format!("Pod {name} (terminating, grace period {grace} s)"),
                    None => format!("Pod {name}"),
                });
                if let (Some(uid), Some(grace)) = (&pod.metadata.uid, grace) {
                    self.note_terminating(uid, grace);
                }
            }
        }
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.admin.clone(), &self.namespace);
        for claim in claims.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items {
            if owned_by_seen(claim.metadata.owner_references.as_ref()) {
                left.push(format!("PersistentVolumeClaim {}", claim.metadata.name.as_deref().unwrap_or("?")));
            }
        }
        Ok(left)
    }

    /// Remembers a terminating pod's grace period, from the first time the audit saw it so.
    fn note_terminating(&self, uid: &str, grace_seconds: i64) {
        if let Ok(mut terminating) = self.terminating.lock() {
            let grace = Duration::from_secs(u64::try_from(grace_seconds).unwrap_or(0));
            terminating.entry(uid.to_string()).or_insert((tokio::time::Instant::now(), grace));
        }
    }

    /// Waits up to `settle` for nothing to be left, and longer for a pod the audit found
    /// terminating: its grace period from when it was first seen so, plus `settle` (a real
    /// kubelet waits the whole period for a main process that ignores SIGTERM, then syncs).
    /// Durations, not the pod's `deletionTimestamp`: the cluster's clock may not be this one's.
    /// The leftovers otherwise.
    pub async fn settled(&self, settle: Duration) -> Result<(), String> {
        let started = tokio::time::Instant::now();
        loop {
            let left = self.leftovers().await?;
            if left.is_empty() {
                return Ok(());
            }
            let graced =
                self.terminating.lock().ok().and_then(|t| t.values().map(|(seen, grace)| *seen + *grace).max());
            let deadline = graced.map_or(started + settle, |until| (started + settle).max(until + settle));
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("left behind after {} s: {}", started.elapsed().as_secs(), left.join(", ")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn expiries_the_cluster_enforces() {
        let sandbox = json!({"spec": {"shutdownTime": "2030-01-01T00:00:00Z", "shutdownPolicy": "Delete"}});
        assert!(has_expiry("Sandbox", &sandbox));
        let retained = json!({"spec": {"shutdownTime": "2030-01-01T00:00:00Z", "shutdownPolicy": "Retain"}});
        assert!(!has_expiry("Sandbox", &retained), "a retained Sandbox is not deleted at its expiry");
        assert!(has_expiry("Job", &json!({"spec": {"activeDeadlineSeconds": 60}})));
        assert!(!has_expiry("Job", &json!({"spec": {}})));
        assert!(!has_expiry("Secret", &json!({})));
        let claim = |policy: &str| json!({"spec": {"lifecycle": {"shutdownTime": "2030-01-01T00:00:00Z", "shutdownPolicy": policy}}});
        assert!(has_expiry("SandboxClaim", &claim("Delete")));
        assert!(has_expiry("SandboxClaim", &claim("DeleteForeground")));
        assert!(!has_expiry("SandboxClaim", &claim("Retain")), "a retained claim outlives its expiry");
        assert!(guarded("Secret", &json!({"metadata": {"ownerReferences": [{"uid": "u"}]}})));
        assert!(!guarded("Secret", &json!({"metadata": {"ownerReferences": []}})));
    }
}
