//! Proven pods: what the host proved about a pod before an exec, kept for that pod's next execs.
//!
//! Before an exec the host reads the pod and proves it the installation's
//! ([`crate::ownership`]): a pod is a dependent, so the proof follows its controller chain,
//! which costs a read of the controller whenever the call has not read it already (an execute
//! that goes straight to its pod has not). What the proof established is about one pod object,
//! and a **uid** names one object for its whole life and is never reused; the only part of a
//! pod the proof relied on that can change under the same uid is its controller reference. So
//! the host keeps, per namespace and pod name, the uid it proved and the controller's uid, and
//! a later exec whose read shows both unchanged skips the chain. Any difference (a pod
//! replaced under its name, a controller reference rewritten) drops the entry and the pod is
//! proved again. The lease's scope ([`crate::lease_scope`]) is still checked on every read:
//! it belongs to the call, not to the pod.
//!
//! The read before the exec and the read that binds the exec to the pod once its stream is
//! open ([`crate::kube_exec`]) are both still made: this spares the chain, never the pod.
//! At most [`CAPACITY`] pods are kept; when full, the oldest entry goes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::ownership::{controller_ref, uid};

/// Pods kept per host: a host running this many sandboxes at once still proves each pod once.
pub const CAPACITY: usize = 4096;

/// What the host proved about one pod: its uid and its controller's.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Proof {
    uid: String,
    controller: Option<String>,
}

type Key = (String, String);

/// Where a pod is kept (its namespace and name) and what would be kept of it; `None` for a pod
/// without a name or uid, which cannot be bound to.
fn entry(namespace: &str, pod: &Value) -> Option<(Key, Proof)> {
    let name = pod.pointer("/metadata/name").and_then(Value::as_str)?;
    let proof = Proof { uid: uid(pod)?.to_string(), controller: controller_ref(pod).map(|c| c.uid) };
    Some(((namespace.to_string(), name.to_string()), proof))
}

#[derive(Debug, Default)]
struct Kept {
    proofs: HashMap<Key, Proof>,
    /// Keys in the order they were kept, for dropping the oldest.
    order: VecDeque<Key>,
}

/// The proofs kept by one host, shared by all its calls; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ProvenPods {
    inner: Arc<Mutex<Kept>>,
}

impl ProvenPods {
    /// Whether `pod`, as just read, is the pod object the host proved under its name.
    pub fn holds(&self, namespace: &str, pod: &Value) -> bool {
        let Some((key, now)) = entry(namespace, pod) else {
            return false;
        };
        let kept = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        kept.proofs.get(&key) == Some(&now)
    }

    /// Keeps the proof of `pod`, which the host has just proved the installation's.
    pub fn keep(&self, namespace: &str, pod: &Value) {
        let Some((key, proof)) = entry(namespace, pod) else {
            return;
        };
        let mut kept = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.proofs.insert(key.clone(), proof).is_none() {
            kept.order.push_back(key);
        }
        while kept.proofs.len() > CAPACITY {
            let Some(oldest) = kept.order.pop_front() else { break };
            kept.proofs.remove(&oldest);
        }
    }

    /// Forgets the pod under `name`: the host found it is no longer the one it proved.
    pub fn forget(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        let mut kept = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.proofs.remove(&key).is_some() {
            kept.order.retain(|k| *k != key);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).proofs.len()
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

    #[test]
    fn a_proof_holds_for_the_same_pod_object_only() {
        let kept = ProvenPods::default();
        assert!(!kept.holds("ns", &pod("p", "u1", "c1")), "nothing proved yet");
        kept.keep("ns", &pod("p", "u1", "c1"));
        assert!(kept.holds("ns", &pod("p", "u1", "c1")));
        assert!(!kept.holds("other", &pod("p", "u1", "c1")), "another namespace's pod of that name");
        assert!(!kept.holds("ns", &pod("p", "u2", "c1")), "a pod replaced under the name");
        assert!(!kept.holds("ns", &pod("p", "u1", "c2")), "a controller reference rewritten");
        assert!(!kept.holds("ns", &json!({"metadata": {"name": "p"}})), "a pod without a uid");
        kept.forget("ns", "p");
        assert!(!kept.holds("ns", &pod("p", "u1", "c1")));
        assert_eq!(kept.len(), 0);
    }

    #[test]
    fn the_oldest_proof_goes_when_full() {
        let kept = ProvenPods::default();
        for i in 0..=CAPACITY {
            kept.keep("ns", &pod(&format!("p{i}"), &format!("u{i}"), "c"));
        }
        assert_eq!(kept.len(), CAPACITY);
        assert!(!kept.holds("ns", &pod("p0", "u0", "c")), "the oldest went");
        assert!(kept.holds("ns", &pod(&format!("p{CAPACITY}"), &format!("u{CAPACITY}"), "c")));
    }
}
