//! Proven pods: what the host proved about a pod before an exec, kept for that pod's next execs.
//!
//! Before an exec the host reads the pod and proves it the installation's
//! ([`crate::ownership`]): a pod is a dependent, so the proof follows its controller chain,
//! which costs a read of the controller whenever the call has not read it already (an execute
//! that goes straight to its pod has not). What the proof established is about one pod object,
//! and a **uid** names one object for its whole life and is never reused; the only part of a
//! pod the proof relied on that can change under the same uid is its owner references. So the
//! host keeps, per namespace and pod name, the uid it proved and the pod's owner references,
//! and a later exec whose read shows both unchanged skips the chain. Any difference (a pod
//! replaced under its name, an owner reference rewritten) drops the entry and the pod is
//! proved again. The lease's scope ([`crate::lease_scope`]) is still checked on every exec: it
//! belongs to the call, not to the pod.
//!
//! ## Current proofs: no read before the exec
//! A proof is **current** while the host's watch of the namespace's pods ([`crate::pod_watch`])
//! is in step with the API server (a **session**: from a complete list to the watch's next
//! failure) and has not seen the proven pod deleted or replaced since the proof was made. A
//! pod that held its name when the host read it, and whose deletion no watch event has shown
//! since, still holds it, up to the watch's delay; so an exec into a pod with a current proof
//! opens its stream without reading the pod first. The read that binds the exec to the pod once
//! its stream is open ([`crate::kube_exec`]) is always made, and it is what guards the
//! command's input: nothing but the provider's argv can reach a pod that replaced the proven
//! one within the watch's delay, as with a pod replaced while a stream opens.
//!
//! The session is taken before the read a proof comes from, and the proof is current only if
//! that session is still the namespace's when it is kept and the watch has not seen the pod's
//! uid deleted in the meantime (deleted uids are remembered for this); a proof made while the
//! watch was out of step becomes current at its pod's next exec, or when the watch's next
//! complete list shows the pod under its name.
//!
//! At most [`CAPACITY`] pods are kept; when full, the oldest entry goes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use serde_json::Value;

use crate::ownership::uid;

/// Pods kept per host: a host running this many sandboxes at once still proves each pod once.
pub const CAPACITY: usize = 4096;

/// Deleted pods' uids remembered per namespace: more than a watch delivers between a read and
/// the keep that follows it.
const GONE_CAPACITY: usize = 1024;

/// What the host proved about one pod: its uid and its owner references.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Proof {
    uid: String,
    owners: Value,
}

impl Proof {
    fn of(pod: &Value) -> Option<Self> {
        let owners = owner_references(pod.pointer("/metadata/ownerReferences").unwrap_or(&Value::Null));
        Some(Self { uid: uid(pod)?.to_string(), owners })
    }
}

/// A pod's `ownerReferences` reduced to what ownership and the lease's scope read of them, so
/// that a reference read as JSON and one decoded by a watch compare equal.
fn owner_references(refs: &Value) -> Value {
    let reduced = refs.as_array().into_iter().flatten().map(|r| {
        let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
        serde_json::json!({
            "apiVersion": text("apiVersion"),
            "kind": text("kind"),
            "name": text("name"),
            "uid": text("uid"),
            "controller": r.get("controller").and_then(Value::as_bool).unwrap_or(false),
        })
    });
    Value::Array(reduced.collect())
}

/// A kept proof, and the watch session under which it is current (`None`: not current).
#[derive(Debug)]
struct Entry {
    proof: Proof,
    session: Option<u64>,
}

type Key = (String, String);

/// Where a pod is kept (its namespace and name) and what would be kept of it; `None` for a pod
/// without a name or uid, which cannot be bound to.
fn entry(namespace: &str, pod: &Value) -> Option<(Key, Proof)> {
    let name = pod.pointer("/metadata/name").and_then(Value::as_str)?;
    Some(((namespace.to_string(), name.to_string()), Proof::of(pod)?))
}

/// The watch of one namespace's pods, as the proofs see it.
#[derive(Debug, Default)]
struct Watch {
    /// The session while the watch is in step; `None` while it lists or after it failed.
    session: Option<u64>,
    /// Uids the watch saw deleted, newest last, for proofs kept after the deletion was seen.
    gone: HashSet<String>,
    gone_order: VecDeque<String>,
    /// The watch's task, ended with the host.
    task: Option<tokio::task::AbortHandle>,
    /// Whether the task runs (it ends when refused, or with the runtime it ran on).
    running: bool,
    /// The API server refused the host the watch: it is not started again.
    refused: bool,
}

#[derive(Debug, Default)]
struct Kept {
    proofs: HashMap<Key, Entry>,
    /// Keys in the order they were kept, for dropping the oldest.
    order: VecDeque<Key>,
    watches: HashMap<String, Watch>,
    sessions: u64,
}

impl Kept {
    fn remove(&mut self, key: &Key) {
        if self.proofs.remove(key).is_some() {
            self.order.retain(|k| k != key);
        }
    }

    fn entries_in<'a>(&'a mut self, namespace: &'a str) -> impl Iterator<Item = (&'a Key, &'a mut Entry)> + 'a {
        self.proofs.iter_mut().filter(move |(key, _)| key.0 == namespace)
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        for watch in self.watches.values() {
            if let Some(task) = &watch.task {
                task.abort();
            }
        }
    }
}

/// The proofs kept by one host, shared by all its calls; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ProvenPods {
    inner: Arc<Mutex<Kept>>,
}

impl ProvenPods {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `pod`, as just read, is the pod object the host proved under its name.
    pub fn holds(&self, namespace: &str, pod: &Value) -> bool {
        let Some((key, now)) = entry(namespace, pod) else {
            return false;
        };
        self.lock().proofs.get(&key).is_some_and(|e| e.proof == now)
    }

    /// The metadata the host proved of pod `name` (its name, uid and owner references, enough
    /// for the lease's scope), when that proof is current: the exec may open without a read.
    pub fn current(&self, namespace: &str, name: &str) -> Option<Value> {
        let kept = self.lock();
        let entry = kept.proofs.get(&(namespace.to_string(), name.to_string()))?;
        let live = kept.watches.get(namespace)?.session?;
        (entry.session == Some(live)).then(|| {
            serde_json::json!({"metadata": {"name": name, "uid": entry.proof.uid, "ownerReferences": entry.proof.owners}})
        })
    }

    /// The namespace's watch session now, taken before a read whose proof will be kept.
    pub fn session(&self, namespace: &str) -> Option<u64> {
        self.lock().watches.get(namespace)?.session
    }

    /// Keeps the proof of `pod`, which the host has just proved the installation's from a read
    /// made in `session` ([`ProvenPods::session`] before the read).
    pub fn keep(&self, namespace: &str, pod: &Value, session: Option<u64>) {
        let Some((key, proof)) = entry(namespace, pod) else {
            return;
        };
        let mut kept = self.lock();
        let current = kept
            .watches
            .get(namespace)
            .filter(|w| session.is_some() && w.session == session && !w.gone.contains(&proof.uid))
            .and(session);
        if kept.proofs.insert(key.clone(), Entry { proof, session: current }).is_none() {
            kept.order.push_back(key);
        }
        while kept.proofs.len() > CAPACITY {
            let Some(oldest) = kept.order.pop_front() else { break };
            kept.proofs.remove(&oldest);
        }
    }

    /// Forgets the pod under `name`: the host found it is no longer the one it proved.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.lock().remove(&(namespace.to_string(), name.to_string()));
    }

    /// Starts the watch of `namespace`'s pods with `start` unless one runs or the API server
    /// refused it; `start` gets the feed its events go to and returns the task to end with the
    /// host.
    pub fn watch(&self, namespace: &str, start: impl FnOnce(WatchFeed) -> Option<tokio::task::AbortHandle>) {
        {
            let mut kept = self.lock();
            let watch = kept.watches.entry(namespace.to_string()).or_default();
            if watch.running || watch.refused {
                return;
            }
            watch.running = true;
        }
        let feed = WatchFeed { kept: Arc::downgrade(&self.inner), namespace: namespace.to_string() };
        let task = start(feed);
        let mut kept = self.lock();
        let watch = kept.watches.entry(namespace.to_string()).or_default();
        // A task that already ended said so itself ([`WatchFeed::ended`]).
        if task.is_none() {
            watch.running = false;
        }
        watch.task = task;
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().proofs.len()
    }
}

/// Where the watch of one namespace's pods reports what it sees; every method returns `false`
/// once the host is gone, which ends the watch.
#[derive(Debug, Clone)]
pub struct WatchFeed {
    kept: Weak<Mutex<Kept>>,
    namespace: String,
}

impl WatchFeed {
    /// The namespace watched.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn with(&self, f: impl FnOnce(&mut Kept, &str)) -> bool {
        let Some(kept) = self.kept.upgrade() else {
            return false;
        };
        f(&mut kept.lock().unwrap_or_else(PoisonError::into_inner), &self.namespace);
        true
    }

    /// A complete list (name -> uid) starts a session: the proofs of pods it shows under their
    /// names become current, those of pods it shows replaced go.
    pub fn listed(&self, pods: &HashMap<String, String>) -> bool {
        self.with(|kept, namespace| {
            kept.sessions += 1;
            let session = kept.sessions;
            let mut replaced = Vec::new();
            for (key, entry) in kept.entries_in(namespace) {
                match pods.get(&key.1) {
                    Some(uid) if *uid == entry.proof.uid => entry.session = Some(session),
                    Some(_) => replaced.push(key.clone()),
                    None => entry.session = None,
                }
            }
            for key in &replaced {
                kept.remove(key);
            }
            let watch = kept.watches.entry(namespace.to_string()).or_default();
            watch.session = Some(session);
            watch.gone.clear();
            watch.gone_order.clear();
        })
    }

    /// A pod added or changed (`owners`: its `ownerReferences` as JSON): a kept proof of
    /// another uid under its name, or of other owner references, goes.
    pub fn applied(&self, name: &str, uid: &str, owners: &Value) -> bool {
        let owners = owner_references(owners);
        self.with(|kept, namespace| {
            let key = (namespace.to_string(), name.to_string());
            let stale = kept.proofs.get(&key).is_some_and(|e| e.proof.uid != uid || e.proof.owners != owners);
            if stale {
                kept.remove(&key);
            }
        })
    }

    /// A pod deleted: its proof goes, and its uid is remembered.
    pub fn deleted(&self, name: &str, uid: &str) -> bool {
        self.with(|kept, namespace| {
            let key = (namespace.to_string(), name.to_string());
            if kept.proofs.get(&key).is_some_and(|e| e.proof.uid == uid) {
                kept.remove(&key);
            }
            let watch = kept.watches.entry(namespace.to_string()).or_default();
            if watch.gone.insert(uid.to_string()) {
                watch.gone_order.push_back(uid.to_string());
            }
            while watch.gone_order.len() > GONE_CAPACITY {
                if let Some(oldest) = watch.gone_order.pop_front() {
                    watch.gone.remove(&oldest);
                }
            }
        })
    }

    /// The watch's task ended (`refused`: the API server refused the host the watch, so it is
    /// not started again): no proof of the namespace is current until another one lists.
    pub fn ended(&self, refused: bool) {
        self.with(|kept, namespace| {
            let watch = kept.watches.entry(namespace.to_string()).or_default();
            watch.running = false;
            watch.refused |= refused;
            watch.task = None;
        });
        self.lost();
    }

    /// The watch fell out of step (it failed, or lists again): no proof of the namespace is
    /// current until its next complete list.
    pub fn lost(&self) -> bool {
        self.with(|kept, namespace| {
            kept.watches.entry(namespace.to_string()).or_default().session = None;
            for (_, entry) in kept.entries_in(namespace) {
                entry.session = None;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, uid: &str, controller: &str) -> Value {
        json!({"metadata": {"name": name, "uid": uid, "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": controller, "controller": true}
        ]}})
    }

    fn owners(pod: &Value) -> Value {
        pod["metadata"]["ownerReferences"].clone()
    }

    /// A task that runs until aborted, standing for a watch's.
    fn task() -> Option<tokio::task::AbortHandle> {
        static RUNTIME: std::sync::LazyLock<tokio::runtime::Runtime> =
            std::sync::LazyLock::new(|| tokio::runtime::Builder::new_current_thread().build().expect("a runtime"));
        Some(RUNTIME.spawn(std::future::pending::<()>()).abort_handle())
    }

    /// A host with a watch of `ns` that has listed `pods` (name, uid).
    fn watched(ns: &str, pods: &[(&str, &str)]) -> (ProvenPods, WatchFeed) {
        let kept = ProvenPods::default();
        let mut feed = None;
        kept.watch(ns, |f| {
            feed = Some(f);
            task()
        });
        let feed = feed.expect("the watch was started");
        feed.listed(&pods.iter().map(|(n, u)| (n.to_string(), u.to_string())).collect());
        (kept, feed)
    }

    #[test]
    fn a_proof_holds_for_the_same_pod_object_only() {
        let kept = ProvenPods::default();
        assert!(!kept.holds("ns", &pod("p", "u1", "c1")), "nothing proved yet");
        kept.keep("ns", &pod("p", "u1", "c1"), None);
        assert!(kept.holds("ns", &pod("p", "u1", "c1")));
        assert!(!kept.holds("other", &pod("p", "u1", "c1")), "another namespace's pod of that name");
        assert!(!kept.holds("ns", &pod("p", "u2", "c1")), "a pod replaced under the name");
        assert!(!kept.holds("ns", &pod("p", "u1", "c2")), "a controller reference rewritten");
        assert!(!kept.holds("ns", &json!({"metadata": {"name": "p"}})), "a pod without a uid");
        assert_eq!(kept.current("ns", "p"), None, "no watch: never current");
        kept.forget("ns", "p");
        assert!(!kept.holds("ns", &pod("p", "u1", "c1")));
        assert_eq!(kept.len(), 0);
    }

    #[test]
    fn the_oldest_proof_goes_when_full() {
        let kept = ProvenPods::default();
        for i in 0..=CAPACITY {
            kept.keep("ns", &pod(&format!("p{i}"), &format!("u{i}"), "c"), None);
        }
        assert_eq!(kept.len(), CAPACITY);
        assert!(!kept.holds("ns", &pod("p0", "u0", "c")), "the oldest went");
        assert!(kept.holds("ns", &pod(&format!("p{CAPACITY}"), &format!("u{CAPACITY}"), "c")));
    }

    #[test]
    fn a_proof_made_in_the_watch_s_session_is_current_until_the_pod_goes() {
        let (kept, feed) = watched("ns", &[]);
        let session = kept.session("ns");
        assert!(session.is_some(), "a listed watch is in step");
        let p = pod("p", "u1", "c1");
        kept.keep("ns", &p, session);
        let current = kept.current("ns", "p").expect("current");
        assert_eq!((&current["metadata"]["uid"], &current["metadata"]["ownerReferences"]), (&json!("u1"), &owners(&p)));
        assert_eq!(kept.current("other", "p"), None);
        feed.applied("p", "u1", &owners(&p));
        assert!(kept.current("ns", "p").is_some(), "a change that keeps the uid and owners keeps the proof");
        feed.applied("p", "u1", &owners(&pod("p", "u1", "c2")));
        assert_eq!(kept.current("ns", "p"), None, "an owner reference rewritten");
        assert!(!kept.holds("ns", &p));

        kept.keep("ns", &p, session);
        feed.deleted("p", "u1");
        assert_eq!(kept.current("ns", "p"), None, "deleted");
        kept.keep("ns", &p, session);
        assert_eq!(kept.current("ns", "p"), None, "a read from before the deletion was seen is not current");
        assert!(kept.holds("ns", &p), "it still spares the chain: the pre-read and binding read check the uid");

        let q = pod("q", "u2", "c1");
        kept.keep("ns", &q, session);
        feed.applied("q", "u3", &owners(&q));
        assert_eq!(kept.current("ns", "q"), None, "another pod under the name");
    }

    #[test]
    fn a_watch_out_of_step_makes_no_proof_current_until_it_lists_again() {
        let (kept, feed) = watched("ns", &[]);
        let before = kept.session("ns");
        kept.keep("ns", &pod("p", "u1", "c1"), before);
        kept.keep("ns", &pod("q", "u2", "c1"), before);
        kept.keep("ns", &pod("r", "u3", "c1"), before);
        feed.lost();
        assert_eq!(kept.session("ns"), None);
        assert_eq!(kept.current("ns", "p"), None, "out of step");
        kept.keep("ns", &pod("s", "u4", "c1"), before);
        assert_eq!(kept.current("ns", "s"), None, "a session that ended");

        let listed = [("p", "u1"), ("q", "u9")].iter().map(|(n, u)| (n.to_string(), u.to_string())).collect();
        feed.listed(&listed);
        assert!(kept.session("ns").is_some_and(|s| Some(s) != before), "a new session");
        assert!(kept.current("ns", "p").is_some(), "listed under its name with its uid");
        assert!(!kept.holds("ns", &pod("q", "u2", "c1")), "listed with another uid: replaced, dropped");
        assert_eq!(kept.current("ns", "r"), None, "not listed: kept, not current");
        assert!(kept.holds("ns", &pod("r", "u3", "c1")));
        kept.keep("ns", &pod("r", "u3", "c1"), kept.session("ns"));
        assert!(kept.current("ns", "r").is_some(), "proved again in the new session");
    }

    #[test]
    fn a_watch_that_ended_is_started_again_unless_it_was_refused() {
        let starts = std::cell::Cell::new(0);
        let counted = |_: WatchFeed| {
            starts.set(starts.get() + 1);
            task()
        };
        let (kept, feed) = watched("ns", &[]);
        kept.keep("ns", &pod("p", "u1", "c1"), kept.session("ns"));
        kept.watch("ns", counted);
        assert_eq!(starts.get(), 0, "one runs");
        feed.ended(false);
        assert_eq!(kept.current("ns", "p"), None, "no watch, no current proof");
        kept.watch("ns", counted);
        assert_eq!(starts.get(), 1, "started again");
        // A task that ends before its start has returned, as one dropped with its runtime.
        let (kept, feed) = watched("ns", &[]);
        feed.ended(false);
        kept.watch("ns", |f| {
            f.ended(false);
            task()
        });
        kept.watch("ns", counted);
        assert_eq!(starts.get(), 2, "an ended task is not taken for a running one");
        let (kept, feed) = watched("ns", &[]);
        feed.ended(true);
        kept.watch("ns", counted);
        assert_eq!(starts.get(), 2, "refused: not started again");
    }

    #[test]
    fn the_feed_ends_with_the_host() {
        let (kept, feed) = watched("ns", &[]);
        assert!(feed.deleted("p", "u1"));
        drop(kept);
        assert!(!feed.deleted("p", "u1") && !feed.lost(), "the host is gone: the watch ends");
    }
}
