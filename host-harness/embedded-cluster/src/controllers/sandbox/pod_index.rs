//! The cached pods by their Sandbox name-hash label, kept beside the pod cache from the same watch
//! events, so a reconcile finds one Sandbox's pods without scanning every pod in the cluster. A
//! scan per reconcile made the controller's work grow with the number of live Sandboxes, per
//! Sandbox (controller-runtime gives the real controller the same through a cache index).
//!
//! The index holds names only; the reconcile reads the pods themselves from the cache and checks
//! their label again, so an index a moment behind the cache can only miss a pod, as a cache a
//! moment behind the API server can.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::watcher;

use super::NAME_HASH_LABEL;

/// (namespace, name) of a pod.
type PodKey = (String, String);

#[derive(Default)]
struct Index {
    /// Each labelled pod's hash.
    hashes: HashMap<PodKey, String>,
    /// (namespace, hash) -> the names of the pods that carry it.
    names: HashMap<(String, String), BTreeSet<String>>,
}

impl Index {
    fn remove(&mut self, key: &PodKey) {
        let Some(hash) = self.hashes.remove(key) else {
            return;
        };
        let bucket = (key.0.clone(), hash);
        if let Some(names) = self.names.get_mut(&bucket) {
            names.remove(&key.1);
            if names.is_empty() {
                self.names.remove(&bucket);
            }
        }
    }

    fn upsert(&mut self, pod: &Pod) {
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        self.remove(&key);
        if let Some(hash) = pod.labels().get(NAME_HASH_LABEL) {
            self.names.entry((key.0.clone(), hash.clone())).or_default().insert(key.1.clone());
            self.hashes.insert(key, hash.clone());
        }
    }
}

/// Shared between the pod watch (which feeds it) and the reconciles (which read it).
#[derive(Clone, Default)]
pub struct PodIndex {
    current: Arc<RwLock<Index>>,
    /// The index being rebuilt by a relist, swapped in when it completes (as the cache is).
    relisting: Arc<RwLock<Option<Index>>>,
}

impl PodIndex {
    /// Folds one event of the pod watch in.
    pub fn observe(&self, event: &watcher::Event<Pod>) {
        match event {
            watcher::Event::Init => *write(&self.relisting) = Some(Index::default()),
            watcher::Event::InitApply(pod) => {
                if let Some(index) = write(&self.relisting).as_mut() {
                    index.upsert(pod);
                }
            }
            watcher::Event::InitDone => {
                if let Some(index) = write(&self.relisting).take() {
                    *write(&self.current) = index;
                }
            }
            watcher::Event::Apply(pod) => write(&self.current).upsert(pod),
            watcher::Event::Delete(pod) => {
                write(&self.current).remove(&(pod.namespace().unwrap_or_default(), pod.name_any()));
            }
        }
    }

    /// The names of the pods in `namespace` labelled with `hash`, in name order.
    pub fn names(&self, namespace: &str, hash: &str) -> Vec<String> {
        let index = self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        index
            .names
            .get(&(namespace.to_string(), hash.to_string()))
            .map(|n| n.iter().cloned().collect())
            .unwrap_or_default()
    }
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn pod(ns: &str, name: &str, hash: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                labels: hash.map(|h| [(NAME_HASH_LABEL.to_string(), h.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn pods_are_found_by_namespace_and_hash() {
        let index = PodIndex::default();
        index.observe(&watcher::Event::Apply(pod("a", "p1", Some("h"))));
        index.observe(&watcher::Event::Apply(pod("a", "p2", Some("h"))));
        index.observe(&watcher::Event::Apply(pod("b", "p3", Some("h"))));
        index.observe(&watcher::Event::Apply(pod("a", "p4", Some("other"))));
        index.observe(&watcher::Event::Apply(pod("a", "p5", None)));
        assert_eq!(index.names("a", "h"), ["p1", "p2"]);
        assert_eq!(index.names("b", "h"), ["p3"]);
        assert!(index.names("c", "h").is_empty());
    }

    #[test]
    fn a_relabelled_or_deleted_pod_leaves_its_old_bucket() {
        let index = PodIndex::default();
        index.observe(&watcher::Event::Apply(pod("a", "p", Some("h"))));
        index.observe(&watcher::Event::Apply(pod("a", "p", Some("g"))));
        assert!(index.names("a", "h").is_empty());
        assert_eq!(index.names("a", "g"), ["p"]);
        index.observe(&watcher::Event::Apply(pod("a", "p", None)));
        assert!(index.names("a", "g").is_empty());
        index.observe(&watcher::Event::Apply(pod("a", "p", Some("g"))));
        index.observe(&watcher::Event::Delete(pod("a", "p", Some("g"))));
        assert!(index.names("a", "g").is_empty());
    }

    #[test]
    fn a_relist_replaces_the_index_only_when_it_completes() {
        let index = PodIndex::default();
        index.observe(&watcher::Event::Apply(pod("a", "gone", Some("h"))));
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(pod("a", "kept", Some("h"))));
        assert_eq!(index.names("a", "h"), ["gone"], "a relist in progress changes nothing yet");
        index.observe(&watcher::Event::InitDone);
        assert_eq!(index.names("a", "h"), ["kept"]);
    }
}
