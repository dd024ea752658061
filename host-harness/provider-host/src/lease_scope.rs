//! Lease scope: a call on a stored lease may touch only that lease's own workload, so a lease
//! whose uids were altered points at nothing instead of at whatever holds its name now.
//!
//! A lease names its **workload** (the Job, Sandbox or SandboxClaim acquire made) twice: by
//! the top-level `workload-uid` the host stores (with `claimed-sandbox.uid` for the Sandbox a
//! claim got), and by the copy in the provider's metadata, which only the provider reads. The
//! **workload types** are Jobs (`batch`), Sandboxes (`agents.x-k8s.io`) and SandboxClaims
//! (`extensions.agents.x-k8s.io`). A call on a lease that carries a workload-uid is **scoped**
//! to it: an object of a workload type, and an object whose `ownerReference` names one, is in
//! scope only when that uid is one the lease carries for that type. Ownership
//! ([`crate::ownership`]) still decides whether the object is this installation's at all; the
//! scope narrows it to this lease's.
//!
//! An object out of scope is refused as `not-owned`, which a provider takes as "not there":
//! destroy reports it already gone and leaves it alone, resume-check and renew say expired.
//! The provider compares the metadata's uids with the objects it reads, so together every uid
//! a lease carries must be the live object's, and so agree with each other. A lease with an
//! empty workload-uid (what a host that lost its lease sends with `metadata: "{}"`) is not
//! scoped: destroy then works from the lease id alone, within ownership. Only a present uid
//! that is not the object's is a forgery.

use contract::k8s::agent_sandbox;
use serde_json::Value;

use crate::bindings::kube::ResourceType;
use crate::records::{Backend, Lease};

/// A workload type: what a lease's uids name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    Job,
    Sandbox,
    SandboxClaim,
}

impl Workload {
    /// The workload type of a resource type (`batch` `jobs`), if it is one.
    fn of_resource(rt: &ResourceType) -> Option<Self> {
        match (rt.group.as_str(), rt.plural.as_str()) {
            ("batch", "jobs") => Some(Self::Job),
            (agent_sandbox::GROUP, agent_sandbox::SANDBOXES) => Some(Self::Sandbox),
            (agent_sandbox::EXTENSIONS_GROUP, agent_sandbox::CLAIMS) => Some(Self::SandboxClaim),
            _ => None,
        }
    }

    /// The workload type an `ownerReference` names (`apiVersion` and `kind`), if it is one.
    fn of_reference(api_version: &str, kind: &str) -> Option<Self> {
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        match (group, kind) {
            ("batch", "Job") => Some(Self::Job),
            (agent_sandbox::GROUP, agent_sandbox::SANDBOX_KIND) => Some(Self::Sandbox),
            (agent_sandbox::EXTENSIONS_GROUP, agent_sandbox::CLAIM_KIND) => Some(Self::SandboxClaim),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Job => "Job",
            Self::Sandbox => "Sandbox",
            Self::SandboxClaim => "SandboxClaim",
        }
    }
}

/// The uids a call on one lease is scoped to (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseScope {
    /// The lease's `workload-uid`: its Job, Sandbox or SandboxClaim.
    workload_uid: String,
    /// A claim lease: its SandboxClaim is the workload, its Sandbox is `sandbox_uid`'s.
    claim: bool,
    /// A claim lease's Sandbox, when the lease records it.
    sandbox_uid: Option<String>,
}

impl LeaseScope {
    /// The scope of a call on `lease`; `None` when it carries no workload-uid (destroy from the
    /// lease id alone).
    pub fn of(lease: &Lease) -> Option<Self> {
        if lease.workload_uid.is_empty() {
            return None;
        }
        Some(Self {
            workload_uid: lease.workload_uid.clone(),
            claim: lease.backend == Backend::Claim,
            sandbox_uid: lease.claimed_sandbox.as_ref().map(|s| s.uid.clone()).filter(|u| !u.is_empty()),
        })
    }

    /// Whether `uid` is the one the lease carries for `workload`. A claim lease that lost its
    /// Sandbox's uid names no Sandbox by uid (so nothing a Sandbox owns is in its scope); the
    /// Sandbox its claim controls is still its own ([`LeaseScope::outside`]).
    fn names(&self, workload: Workload, uid: &str) -> bool {
        match (workload, self.claim) {
            (Workload::Sandbox, true) => self.sandbox_uid.as_deref() == Some(uid),
            (Workload::Job | Workload::SandboxClaim, _) | (Workload::Sandbox, false) => uid == self.workload_uid,
        }
    }

    /// Why `object` (of type `rt`) is not the lease's, for the operator's log; `None` when it
    /// may be (it is no workload and names none, or the one the lease carries).
    pub fn outside(&self, rt: &ResourceType, object: &Value) -> Option<String> {
        if let Some(workload) = Workload::of_resource(rt) {
            let uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
            let lost_sandbox = workload == Workload::Sandbox && self.claim && self.sandbox_uid.is_none();
            if lost_sandbox && !self.claims(object) {
                return Some(
                    "the Sandbox is not controlled by the lease's SandboxClaim, and the lease records no Sandbox uid"
                        .to_string(),
                );
            }
            if !lost_sandbox && !self.names(workload, uid) {
                return Some(format!(
                    "the {} has uid {uid:?}, which is not the one the lease carries: the lease points at another \
                     object (its uids were altered, or the object was replaced)",
                    workload.name()
                ));
            }
        }
        let refs = object.pointer("/metadata/ownerReferences").and_then(Value::as_array);
        for r in refs.into_iter().flatten() {
            let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
            let Some(workload) = Workload::of_reference(text("apiVersion"), text("kind")) else {
                continue;
            };
            if !self.names(workload, text("uid")) {
                return Some(format!(
                    "it belongs to a {} with uid {:?}, not the one the lease carries",
                    workload.name(),
                    text("uid")
                ));
            }
        }
        None
    }

    /// Whether the object has an `ownerReference` to the lease's SandboxClaim.
    fn claims(&self, object: &Value) -> bool {
        let refs = object.pointer("/metadata/ownerReferences").and_then(Value::as_array);
        refs.into_iter().flatten().any(|r| {
            let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
            Workload::of_reference(text("apiVersion"), text("kind")) == Some(Workload::SandboxClaim)
                && text("uid") == self.workload_uid
        })
    }
}

/// What the provider is told about an object out of the lease's scope.
pub const NOT_THE_LEASES: &str = "the object is not the one this lease was made for (its uid is not the workload-uid \
                                  the lease carries); a lease whose uids were altered points at nothing";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::records::ClaimedSandbox;

    fn rt(group: &str, plural: &str) -> ResourceType {
        ResourceType { group: group.into(), version: "v1".into(), plural: plural.into() }
    }

    fn lease(backend: Backend, uid: &str, sandbox: Option<&str>) -> Lease {
        Lease {
            provider_lease_id: "k8s:job:ns:pc-1".into(),
            backend,
            namespace: "ns".into(),
            api_version: "batch/v1".into(),
            workload_uid: uid.into(),
            pod_name: None,
            pod_uid: None,
            pod_ip: None,
            claimed_sandbox: sandbox.map(|u| ClaimedSandbox {
                api_version: "agents.x-k8s.io/v1beta1".into(),
                name: "s".into(),
                uid: u.into(),
                warm: true,
            }),
            expires_at: None,
            reusable: false,
            metadata: "{}".into(),
        }
    }

    fn object(uid: &str, owner: Option<(&str, &str, &str)>) -> Value {
        let refs: Vec<Value> = owner
            .into_iter()
            .map(|(v, k, u)| json!({"apiVersion": v, "kind": k, "name": "n", "uid": u, "controller": true}))
            .collect();
        json!({"metadata": {"uid": uid, "ownerReferences": refs}})
    }

    #[test]
    fn a_lease_without_a_workload_uid_is_not_scoped() {
        assert_eq!(LeaseScope::of(&lease(Backend::Job, "", None)), None);
    }

    #[test]
    fn only_the_leases_own_workload_and_its_dependents_are_in_scope() {
        let scope = LeaseScope::of(&lease(Backend::Job, "u-job", None)).expect("scoped");
        let jobs = rt("batch", "jobs");
        assert_eq!(scope.outside(&jobs, &object("u-job", None)), None);
        assert!(scope.outside(&jobs, &object("u-other", None)).is_some_and(|w| w.contains("u-other")));
        let secret = object("u-s", Some(("batch/v1", "Job", "u-other")));
        assert!(scope.outside(&rt("", "secrets"), &secret).is_some(), "another Job's Secret");
        let pod = object("u-p", Some(("batch/v1", "Job", "u-job")));
        assert_eq!(scope.outside(&rt("", "pods"), &pod), None);
        let unrelated = object("u-t", Some(("apps/v1", "ReplicaSet", "u-rs")));
        assert_eq!(scope.outside(&rt("", "pods"), &unrelated), None, "not a workload: ownership decides");
        // Whatever backend the lease claims, a Sandbox with another uid is not its.
        let sandboxes = rt("agents.x-k8s.io", "sandboxes");
        assert!(scope.outside(&sandboxes, &object("u-sb", None)).is_some());
    }

    #[test]
    fn a_claim_lease_scopes_its_claim_and_its_sandbox() {
        let scope = LeaseScope::of(&lease(Backend::Claim, "u-claim", Some("u-sb"))).expect("scoped");
        let sandboxes = rt("agents.x-k8s.io", "sandboxes");
        let claims = rt("extensions.agents.x-k8s.io", "sandboxclaims");
        assert_eq!(scope.outside(&claims, &object("u-claim", None)), None);
        assert!(scope.outside(&claims, &object("u-x", None)).is_some());
        let sandbox = object("u-sb", Some(("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", "u-claim")));
        assert_eq!(scope.outside(&sandboxes, &sandbox), None);
        assert!(scope.outside(&sandboxes, &object("u-sb2", None)).is_some());
        let pod = object("u-p", Some(("agents.x-k8s.io/v1beta1", "Sandbox", "u-sb")));
        assert_eq!(scope.outside(&rt("", "pods"), &pod), None);
        // Without the Sandbox's uid, only a Sandbox the claim controls is the lease's.
        let lost = LeaseScope::of(&lease(Backend::Claim, "u-claim", None)).expect("scoped");
        assert_eq!(lost.outside(&sandboxes, &sandbox), None);
        assert!(lost.outside(&sandboxes, &object("u-sb", None)).is_some(), "a standalone Sandbox");
        // Nor may it reach what any Sandbox owns: which Sandbox is its own, it cannot tell by uid.
        let other_pod = object("u-p2", Some(("agents.x-k8s.io/v1beta1", "Sandbox", "u-anyone")));
        assert!(lost.outside(&rt("", "pods"), &other_pod).is_some(), "another Sandbox's pod");
    }
}
