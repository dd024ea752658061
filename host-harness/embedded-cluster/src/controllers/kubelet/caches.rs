//! Watch caches of everything the scheduler and kubelet look at, filled through the API
//! server's list+watch like any client's informers.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, PersistentVolumeClaim, Pod, Secret};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::config_refs::{ConfigLookup, Found};

/// How long to wait for the first list of each kind before carrying on without it.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// One kind's cache and whether its first list has arrived.
#[derive(Clone)]
pub(crate) struct Cache<K: Resource<DynamicType = ()> + Clone + 'static> {
    pub(crate) store: Store<K>,
    synced: Arc<AtomicBool>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Cache<K> {
    /// True once the first list has been applied.
    pub(crate) fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }
}

/// The caches, the signal that any of them changed, and the tasks that feed them (aborted
/// when this is dropped, which is how `run` stops its watches).
pub(crate) struct Caches {
    pub(crate) pods: Cache<Pod>,
    pub(crate) nodes: Cache<Node>,
    pub(crate) namespaces: Cache<Namespace>,
    pub(crate) secrets: Cache<Secret>,
    pub(crate) config_maps: Cache<ConfigMap>,
    pub(crate) claims: Cache<PersistentVolumeClaim>,
    /// Notified on every watch event, so the loop reconciles promptly.
    pub(crate) changed: Arc<Notify>,
    _tasks: JoinSet<()>,
}

impl Caches {
    /// Starts every watch and waits for the first lists. Pods and Nodes are required; the
    /// other kinds only refine behaviour, so a server that does not serve them (or is slow to)
    /// is tolerated with a warning.
    pub(crate) async fn start(client: &Client) -> anyhow::Result<Self> {
        let changed = Arc::new(Notify::new());
        let mut tasks = JoinSet::new();
        let caches = Self {
            pods: watch(&mut tasks, Api::all(client.clone()), &changed),
            nodes: watch(&mut tasks, Api::all(client.clone()), &changed),
            namespaces: watch(&mut tasks, Api::all(client.clone()), &changed),
            secrets: watch(&mut tasks, Api::all(client.clone()), &changed),
            config_maps: watch(&mut tasks, Api::all(client.clone()), &changed),
            claims: watch(&mut tasks, Api::all(client.clone()), &changed),
            changed,
            _tasks: tasks,
        };
        let (pods, nodes, namespaces, secrets, config_maps, claims) = futures::join!(
            wait_synced(&caches.pods, "pods"),
            wait_synced(&caches.nodes, "nodes"),
            wait_synced(&caches.namespaces, "namespaces"),
            wait_synced(&caches.secrets, "secrets"),
            wait_synced(&caches.config_maps, "configmaps"),
            wait_synced(&caches.claims, "persistentvolumeclaims"),
        );
        pods?;
        nodes?;
        for result in [namespaces, secrets, config_maps, claims] {
            if let Err(error) = result {
                tracing::warn!(error = %format!("{error:#}"), "carrying on without this cache until it syncs");
            }
        }
        Ok(caches)
    }

    /// The annotations of a namespace, where the namespace-wide knobs live.
    pub(crate) fn namespace(&self, name: &str) -> Option<Arc<Namespace>> {
        self.namespaces.store.get(&ObjectRef::new(name))
    }
}

impl ConfigLookup for Caches {
    fn secret(&self, namespace: &str, name: &str) -> Found {
        lookup(&self.secrets, namespace, name, |s| {
            let data = s.data.iter().flatten().map(|(k, _)| k.clone());
            data.chain(s.string_data.iter().flatten().map(|(k, _)| k.clone())).collect()
        })
    }

    fn config_map(&self, namespace: &str, name: &str) -> Found {
        lookup(&self.config_maps, namespace, name, |c| {
            let data = c.data.iter().flatten().map(|(k, _)| k.clone());
            data.chain(c.binary_data.iter().flatten().map(|(k, _)| k.clone())).collect()
        })
    }
}

fn lookup<K: Resource<DynamicType = ()> + Clone + 'static>(
    cache: &Cache<K>,
    namespace: &str,
    name: &str,
    keys: impl Fn(&K) -> BTreeSet<String>,
) -> Found {
    if !cache.synced() {
        return Found::Unknown;
    }
    match cache.store.get(&ObjectRef::new(name).within(namespace)) {
        Some(object) => Found::Present(keys(&object)),
        None => Found::Absent,
    }
}

/// Spawns a reflector for one kind that pings `changed` on every event.
fn watch<K>(tasks: &mut JoinSet<()>, api: Api<K>, changed: &Arc<Notify>) -> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let synced = Arc::new(AtomicBool::new(false));
    let kind = K::plural(&()).into_owned();
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
    let (flag, changed) = (synced.clone(), changed.clone());
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    flag.store(true, Ordering::Relaxed);
                    changed.notify_one();
                }
                Ok(_) => changed.notify_one(),
                Err(error) => tracing::warn!(kind, %error, "watch failed; retrying with back-off"),
            }
        }
        tracing::error!(kind, "watch stream ended");
    });
    Cache { store, synced }
}

async fn wait_synced<K: Resource<DynamicType = ()> + Clone + 'static>(
    cache: &Cache<K>,
    kind: &str,
) -> anyhow::Result<()> {
    tokio::time::timeout(SYNC_TIMEOUT, cache.store.wait_until_ready())
        .await
        .with_context(|| format!("no initial list of {kind} within {SYNC_TIMEOUT:?}"))?
        .with_context(|| format!("the {kind} watch stopped before its first list"))
}
