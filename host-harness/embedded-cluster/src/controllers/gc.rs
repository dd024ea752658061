//! The garbage collector: follows ownerReferences, as kube-controller-manager's does.
//!
//! - Background: a dependent whose owners are all gone is deleted; a dependent that lost only
//!   some owners has the dangling references removed.
//! - Foreground: an owner with the `foregroundDeletion` finalizer has its dependents deleted,
//!   and the finalizer removed once no `blockOwnerDeletion` dependent is left.
//! - Orphan: an owner with the `orphan` finalizer has its references stripped from every
//!   dependent, then the finalizer removed.
//!
//! Like upstream's `GraphBuilder`, it keeps a graph of the objects it watches with their
//! dependents indexed by owner uid, and acts on events: an owner's DELETED event sends its
//! dependents to be checked, a dependent's change sends itself and its owners, so one change
//! costs work in proportion to the objects it touches, not a sweep of every cached object. A
//! slow periodic resync catches what an event could not settle (a failed write).
//!
//! It is a client: it watches every collectable resource through the API and acts with plain
//! DELETE and PATCH calls, so it runs against any API server.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::mpsc;

use super::served_sandbox_resource;

/// How often everything is checked again, for what no event will bring back (a write that
/// failed, an owner whose read could not tell).
const RESYNC: Duration = Duration::from_secs(10);

/// The resources whose objects the collector tracks (as owners and as dependents): agent-sandbox's
/// kinds among them, so deleting a claim or a pool takes its Sandboxes at once (an owner kind
/// left out would be found gone only by the periodic resync) and a template its NetworkPolicy.
async fn tracked(client: &kube::Client) -> Vec<ApiResource> {
    use k8s_openapi::api::{batch::v1::Job, core::v1, networking::v1::NetworkPolicy};
    let mut out = vec![
        ApiResource::erase::<v1::Pod>(&()),
        ApiResource::erase::<v1::Secret>(&()),
        ApiResource::erase::<v1::ConfigMap>(&()),
        ApiResource::erase::<v1::Service>(&()),
        ApiResource::erase::<v1::PersistentVolumeClaim>(&()),
        ApiResource::erase::<Job>(&()),
        ApiResource::erase::<NetworkPolicy>(&()),
    ];
    if let Some(sandbox) = served_sandbox_resource(client).await {
        out.push(sandbox);
    }
    if let Ok((_, extensions)) = super::extensions::discovery::served_extensions(client).await {
        out.extend(extensions);
    }
    out
}

/// Runs the garbage collector until dropped.
pub async fn run(client: kube::Client) -> anyhow::Result<()> {
    run_with(client, RESYNC).await
}

/// Runs the garbage collector with a given resync period until dropped.
pub async fn run_with(client: kube::Client, resync: Duration) -> anyhow::Result<()> {
    let resources = tracked(&client).await;
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, watcher::Event<DynamicObject>)>();
    for (kind, resource) in resources.iter().enumerate() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            while let Some(event) = stream.next().await {
                match event {
                    Ok(event) => {
                        if tx.send((kind, event)).is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "garbage collector watch error"),
                }
            }
        });
    }
    drop(tx);
    let mut graph = Graph::new(resources.len());
    let mut collector = Collector { client, resources, discovered: HashMap::new() };
    let mut due = BTreeSet::new();
    let mut ticker = tokio::time::interval(resync);
    ticker.tick().await;
    loop {
        tokio::select! {
            event = rx.recv() => {
                let Some((kind, event)) = event else {
                    anyhow::bail!("every watch of the garbage collector ended");
                };
                graph.apply(kind, event, &mut due);
            }
            _ = ticker.tick() => due.extend(graph.objects.keys().cloned()),
        }
        while let Ok((kind, event)) = rx.try_recv() {
            graph.apply(kind, event, &mut due);
        }
        if !graph.ready() {
            continue;
        }
        for uid in std::mem::take(&mut due) {
            collector.process(&graph, &uid).await;
        }
    }
}

/// One watched object.
struct Entry {
    kind: usize,
    obj: Arc<DynamicObject>,
}

/// Every watched object by uid, and who depends on whom.
struct Graph {
    objects: HashMap<String, Entry>,
    /// Owner uid -> uids of the objects whose ownerReferences name it.
    dependents: HashMap<String, HashSet<String>>,
    /// Per kind: the uids seen since the watch (re)listed, until the list is complete.
    relisting: Vec<Option<HashSet<String>>>,
    listed: Vec<bool>,
}

fn uid_of(obj: &DynamicObject) -> Option<String> {
    obj.metadata.uid.clone().filter(|u| !u.is_empty())
}

fn owner_uids(obj: &DynamicObject) -> impl Iterator<Item = &str> {
    obj.metadata.owner_references.iter().flatten().map(|r| r.uid.as_str())
}

impl Graph {
    fn new(kinds: usize) -> Self {
        Self {
            objects: HashMap::new(),
            dependents: HashMap::new(),
            relisting: vec![None; kinds],
            listed: vec![false; kinds],
        }
    }

    /// Whether every watch has listed once, so that a missing owner is really missing.
    fn ready(&self) -> bool {
        self.listed.iter().all(|l| *l)
    }

    /// Folds one watch event into the graph and marks what it may have unsettled.
    fn apply(&mut self, kind: usize, event: watcher::Event<DynamicObject>, due: &mut BTreeSet<String>) {
        match event {
            watcher::Event::Init => self.relisting[kind] = Some(HashSet::new()),
            watcher::Event::InitApply(obj) => {
                if let (Some(seen), Some(uid)) = (self.relisting[kind].as_mut(), uid_of(&obj)) {
                    seen.insert(uid);
                }
                self.upsert(kind, obj, due);
            }
            watcher::Event::InitDone => {
                let seen = self.relisting[kind].take().unwrap_or_default();
                let gone: Vec<String> = self
                    .objects
                    .iter()
                    .filter(|(u, e)| e.kind == kind && !seen.contains(*u))
                    .map(|(u, _)| u.clone())
                    .collect();
                for uid in gone {
                    self.remove(&uid, due);
                }
                self.listed[kind] = true;
            }
            watcher::Event::Apply(obj) => self.upsert(kind, obj, due),
            watcher::Event::Delete(obj) => {
                if let Some(uid) = uid_of(&obj) {
                    self.remove(&uid, due);
                }
            }
        }
    }

    fn unindex(&mut self, uid: &str, obj: &DynamicObject) {
        for owner in owner_uids(obj) {
            if let Some(deps) = self.dependents.get_mut(owner) {
                deps.remove(uid);
                if deps.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
    }

    fn upsert(&mut self, kind: usize, obj: DynamicObject, due: &mut BTreeSet<String>) {
        let Some(uid) = uid_of(&obj) else {
            return;
        };
        if let Some(old) = self.objects.remove(&uid) {
            self.unindex(&uid, &old.obj);
            // An owner waiting (foreground) on this object may be free when its references change.
            due.extend(owner_uids(&old.obj).map(String::from));
        }
        for owner in owner_uids(&obj) {
            self.dependents.entry(owner.to_string()).or_default().insert(uid.clone());
            due.insert(owner.to_string());
        }
        due.insert(uid.clone());
        self.objects.insert(uid, Entry { kind, obj: Arc::new(obj) });
    }

    fn remove(&mut self, uid: &str, due: &mut BTreeSet<String>) {
        if let Some(old) = self.objects.remove(uid) {
            self.unindex(uid, &old.obj);
            due.extend(owner_uids(&old.obj).map(String::from));
        }
        if let Some(deps) = self.dependents.get(uid) {
            due.extend(deps.iter().cloned());
        }
    }

    fn dependents_of(&self, uid: &str) -> Vec<&Entry> {
        self.dependents.get(uid).into_iter().flatten().filter_map(|d| self.objects.get(d)).collect()
    }
}

struct Collector {
    client: kube::Client,
    resources: Vec<ApiResource>,
    discovered: HashMap<String, Option<ApiResource>>,
}

impl Collector {
    fn api(&self, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }

    /// Settles one object: as an owner being deleted, and as a dependent whose owners may be gone.
    async fn process(&mut self, graph: &Graph, uid: &str) {
        let Some(entry) = graph.objects.get(uid) else {
            return;
        };
        if entry.obj.metadata.deletion_timestamp.is_some() {
            self.settle_owner(graph, entry, uid).await;
        } else {
            self.settle_dependent(graph, entry).await;
        }
    }

    async fn settle_owner(&mut self, graph: &Graph, owner: &Entry, uid: &str) {
        let finalizers = owner.obj.metadata.finalizers.clone().unwrap_or_default();
        let deps = graph.dependents_of(uid);
        if finalizers.iter().any(|f| f == "orphan") {
            let mut all_done = true;
            for d in &deps {
                all_done &= self.strip_owner(d, &[uid]).await;
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

    async fn settle_dependent(&mut self, graph: &Graph, dependent: &Entry) {
        let refs = dependent.obj.metadata.owner_references.clone().unwrap_or_default();
        let mut dangling = Vec::new();
        for r in &refs {
            if graph.objects.contains_key(&r.uid) {
                continue;
            }
            if !self.owner_exists(dependent, r).await {
                dangling.push(r.uid.clone());
            }
        }
        if dangling.is_empty() {
            return;
        }
        if dangling.len() == refs.len() {
            self.delete(dependent, PropagationPolicy::Background).await;
        } else {
            let uids: Vec<&str> = dangling.iter().map(String::as_str).collect();
            self.strip_owner(dependent, &uids).await;
        }
    }

    /// Confirms with a live read that an owner missing from the graph is really gone.
    async fn owner_exists(&mut self, dependent: &Entry, r: &OwnerReference) -> bool {
        let Some(resource) = self.resource_for(&r.api_version, &r.kind).await else {
            // An owner kind the cluster does not serve cannot exist.
            return false;
        };
        let ns = dependent.obj.metadata.namespace.as_deref();
        match self.api(&resource, ns).get_opt(&r.name).await {
            Ok(Some(o)) => o.metadata.uid.as_deref() == Some(r.uid.as_str()),
            Ok(None) => false,
            // Could not tell: keep the dependent (the resync asks again).
            Err(_) => true,
        }
    }

    async fn resource_for(&mut self, api_version: &str, kind: &str) -> Option<ApiResource> {
        if let Some(r) = self.resources.iter().find(|r| r.api_version == api_version && r.kind == kind) {
            return Some(r.clone());
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

    fn resource(&self, e: &Entry) -> ApiResource {
        self.resources[e.kind].clone()
    }

    async fn delete(&self, e: &Entry, policy: PropagationPolicy) {
        let name = e.obj.metadata.name.clone().unwrap_or_default();
        let params = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(Preconditions { uid: e.obj.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        let resource = self.resource(e);
        match self.api(&resource, e.obj.metadata.namespace.as_deref()).delete(&name, &params).await {
            Ok(_) => tracing::debug!(kind = %resource.kind, %name, "garbage collected"),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(err) => tracing::warn!(kind = %resource.kind, %name, error = %err, "garbage collection delete failed"),
        }
    }

    /// Removes owner references; true when done (or nothing to do).
    async fn strip_owner(&self, e: &Entry, owner_uids: &[&str]) -> bool {
        let refs = e.obj.metadata.owner_references.clone().unwrap_or_default();
        let kept: Vec<_> = refs.iter().filter(|r| !owner_uids.contains(&r.uid.as_str())).cloned().collect();
        if kept.len() == refs.len() {
            return true;
        }
        let patch = json!({"metadata": {"ownerReferences": kept, "resourceVersion": e.obj.metadata.resource_version}});
        let name = e.obj.metadata.name.clone().unwrap_or_default();
        match self
            .api(&self.resource(e), e.obj.metadata.namespace.as_deref())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.code == 404 => true,
            Err(err) => {
                tracing::debug!(%name, error = %err, "could not strip owner references yet");
                false
            }
        }
    }

    async fn remove_finalizer(&self, e: &Entry, finalizer: &str) {
        let remaining: Vec<String> =
            e.obj.metadata.finalizers.iter().flatten().filter(|f| *f != finalizer).cloned().collect();
        let patch = json!({"metadata": {"finalizers": remaining, "resourceVersion": e.obj.metadata.resource_version}});
        let name = e.obj.metadata.name.clone().unwrap_or_default();
        match self
            .api(&self.resource(e), e.obj.metadata.namespace.as_deref())
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(err) => tracing::warn!(%name, error = %err, "could not remove the {finalizer} finalizer"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(uid: &str, owners: &[&str]) -> DynamicObject {
        let refs: Vec<_> =
            owners.iter().map(|o| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": o, "uid": o})).collect();
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": uid, "namespace": "default", "uid": uid, "ownerReferences": refs}}))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_owners_deletion_marks_only_its_dependents() {
        let mut g = Graph::new(1);
        let mut due = BTreeSet::new();
        g.apply(0, watcher::Event::Init, &mut due);
        for o in [obj("owner", &[]), obj("dep", &["owner"]), obj("other", &[]), obj("other-dep", &["other"])] {
            g.apply(0, watcher::Event::InitApply(o), &mut due);
        }
        g.apply(0, watcher::Event::InitDone, &mut due);
        assert!(g.ready());
        due.clear();
        g.apply(0, watcher::Event::Delete(obj("owner", &[])), &mut due);
        assert_eq!(due.into_iter().collect::<Vec<_>>(), ["dep"], "one owner's deletion touches its dependents alone");
    }

    #[test]
    fn a_relist_drops_what_disappeared_and_changed_references_reindex() {
        let mut g = Graph::new(1);
        let mut due = BTreeSet::new();
        g.apply(0, watcher::Event::Apply(obj("dep", &["a"])), &mut due);
        g.apply(0, watcher::Event::Apply(obj("dep", &["b"])), &mut due);
        assert!(!g.dependents.contains_key("a"), "the old owner's index entry goes");
        assert_eq!(g.dependents_of("b").len(), 1);
        g.apply(0, watcher::Event::Init, &mut due);
        g.apply(0, watcher::Event::InitDone, &mut due);
        assert!(g.objects.is_empty() && g.dependents.is_empty(), "a relist without it removes it");
    }
}
