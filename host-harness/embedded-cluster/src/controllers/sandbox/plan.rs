//! The controller's decisions as pure functions: observed Sandbox, pods, Service, PVCs and
//! the time → actions to take, the status to write and when to look again.
//!
//! Nothing here touches the cluster, so every rule is unit-tested without one.

use std::collections::BTreeMap;
use std::time::Duration;

use contract::k8s::agent_sandbox;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use serde_json::Value;

use super::model::{Sandbox, SandboxStatus, SandboxVersion, ShutdownPolicy, Spec};
use super::name_hash;
use super::resources::{
    Ownership, adopt_patch, adopt_service_patch, describe_owner, desired_pod, desired_pvc, desired_service,
    has_hash_label, hash_label_patch, ownership, selector, service_fqdn, service_in_shape, service_is_headless,
    service_selector_patch,
};
use super::status::{
    ConditionInputs, Issue, NewCondition, READY, REASON_RECONCILER_ERROR, apply_conditions, mark_expired,
    marked_expired, pod_ips, set_condition,
};
use crate::clock::format_time;

/// The shortest wait before re-checking `shutdownTime`: the real controller requeues at
/// `max(remaining, 2s)`, so deadlines closer than that fire up to ~2 s late.
pub const MIN_EXPIRY_RECHECK: Duration = Duration::from_secs(2);

/// Everything one reconcile knows about a Sandbox and its dependents.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The Sandbox, freshly read.
    pub sandbox: Sandbox,
    /// The pod named by the `pod-name` annotation, else the pod named like the Sandbox.
    pub pod: Option<Pod>,
    /// Pods in the namespace carrying the Sandbox's hash label (to spot several owned pods).
    pub labelled_pods: Vec<Pod>,
    /// The Service named like the Sandbox.
    pub service: Option<Service>,
    /// Existing PVCs named after the claim templates, by name.
    pub pvcs: BTreeMap<String, PersistentVolumeClaim>,
    /// Cluster time of the observation.
    pub now: Timestamp,
}

/// One change to make in the cluster, in the order given by the plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create a PVC from a claim template.
    CreatePvc(Box<PersistentVolumeClaim>),
    /// Merge-patch a PVC (adoption).
    PatchPvc {
        /// PVC name.
        name: String,
        /// JSON merge patch.
        patch: Value,
    },
    /// Create the Sandbox's pod.
    CreatePod(Box<Pod>),
    /// Merge-patch the pod's metadata (adoption or hash label).
    PatchPod {
        /// Pod name.
        name: String,
        /// JSON merge patch.
        patch: Value,
    },
    /// Delete the pod (suspend or expiry); a 404 counts as done.
    DeletePod {
        /// Pod name.
        name: String,
    },
    /// Set (`Some`) or remove (`None`) the `agents.x-k8s.io/pod-name` annotation on the Sandbox.
    SetPodNameAnnotation(Option<String>),
    /// Create the headless Service.
    CreateService(Box<Service>),
    /// Merge-patch the Service (adoption or selector drift).
    PatchService {
        /// Service name.
        name: String,
        /// JSON merge patch.
        patch: Value,
    },
    /// Delete the Service; a 404 counts as done.
    DeleteService {
        /// Service name.
        name: String,
    },
    /// Delete the Sandbox itself (expiry with `shutdownPolicy: Delete`).
    DeleteSandbox,
}

impl Action {
    /// Whether the pod's existence or ownership depends on this action succeeding; if it does
    /// not run, the pod's state is unknown for the status.
    pub fn settles_pod(&self) -> bool {
        matches!(self, Action::CreatePod(_) | Action::PatchPod { .. })
    }
}

/// What one reconcile should do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Changes to make, in order.
    pub actions: Vec<Action>,
    /// The status to end up with (`None`: leave it, e.g. the Sandbox is being deleted).
    pub status: Option<SandboxStatus>,
    /// Look again after this much cluster time even if nothing changes.
    pub requeue_after: Option<Duration>,
}

/// A failed action, to be reflected in the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The failed action (or one not run after it) would have created or adopted the pod.
    pub pod_unknown: bool,
    /// What went wrong.
    pub message: String,
}

/// Decides what to do for one observation.
pub fn plan(observed: &Observed) -> Plan {
    compute(observed, None)
}

/// The status to write after an action of `plan(observed)` failed: Ready says
/// `ReconcilerError`, and a pod that could not be created or adopted is unknown.
pub fn status_after_failure(observed: &Observed, failure: &Failure) -> Option<SandboxStatus> {
    compute(observed, Some(failure)).status
}

fn compute(observed: &Observed, failure: Option<&Failure>) -> Plan {
    let sandbox = &observed.sandbox;
    if sandbox.deleting {
        return Plan::default();
    }
    let now = format_time(observed.now);
    let spec = match &sandbox.spec {
        Ok(spec) => spec,
        Err(message) => {
            let mut status = sandbox.status.clone();
            set_condition(
                &mut status.conditions,
                NewCondition::new(READY, "False", REASON_RECONCILER_ERROR, format!("Error seen: {message}")),
                sandbox.generation,
                &now,
            );
            return Plan { actions: Vec::new(), status: Some(status), requeue_after: None };
        }
    };
    match spec.shutdown_at {
        Some(at) if observed.now >= at => plan_expired(observed, spec, failure, &now),
        Some(at) => {
            let remaining = Duration::try_from(at.duration_since(observed.now)).unwrap_or(Duration::ZERO);
            let mut plan = plan_live(observed, spec, failure, &now);
            plan.requeue_after = Some(remaining.max(MIN_EXPIRY_RECHECK));
            plan
        }
        None => plan_live(observed, spec, failure, &now),
    }
}

/// Expiry in two steps, like the real controller: first Ready=False/SandboxExpired is
/// written (and nothing else happens), then the pod and Service are deleted and the Sandbox
/// is deleted (`Delete`) or its status wiped down to its conditions (`Retain`).
fn plan_expired(observed: &Observed, spec: &Spec, failure: Option<&Failure>, now: &str) -> Plan {
    let sandbox = &observed.sandbox;
    if !marked_expired(&sandbox.status) {
        let mut status = sandbox.status.clone();
        mark_expired(&mut status.conditions, sandbox.generation, now);
        return Plan { actions: Vec::new(), status: Some(status), requeue_after: Some(Duration::ZERO) };
    }

    let mut actions = Vec::new();
    if let Some(pod) = &observed.pod
        && ownership(&pod.metadata, &sandbox.uid) == Ownership::Ours
        && pod.metadata.deletion_timestamp.is_none()
    {
        actions.push(Action::DeletePod { name: pod.metadata.name.clone().unwrap_or_default() });
    }
    if let Some(service) = &observed.service
        && ownership(&service.metadata, &sandbox.uid) == Ownership::Ours
    {
        actions.push(Action::DeleteService { name: service.metadata.name.clone().unwrap_or_default() });
    }
    if spec.shutdown_policy == ShutdownPolicy::Delete {
        actions.push(Action::DeleteSandbox);
        return Plan { actions, status: None, requeue_after: None };
    }
    let status = failure.is_none().then(|| {
        let mut wiped = SandboxStatus { conditions: sandbox.status.conditions.clone(), ..SandboxStatus::default() };
        mark_expired(&mut wiped.conditions, sandbox.generation, now);
        wiped
    });
    Plan { actions, status, requeue_after: None }
}

/// What the pod step decided.
struct PodOutcome {
    /// The pod the status describes (possibly the one about to be created).
    pod: Option<Pod>,
    /// Whether that pod is (or will be) controlled by this Sandbox.
    owned: bool,
    /// The `pod-name` annotation the Sandbox should carry.
    annotation: Option<String>,
    issue: Option<Issue>,
}

/// A live (not expired) Sandbox: PVCs, pod, pod-name annotation, Service, then status.
fn plan_live(observed: &Observed, spec: &Spec, failure: Option<&Failure>, now: &str) -> Plan {
    let sandbox = &observed.sandbox;
    let hash = name_hash(&sandbox.name);
    let mut actions = Vec::new();
    let mut issues = Vec::new();

    plan_pvcs(observed, spec, &hash, &mut actions, &mut issues);

    let mut outcome = plan_pod(observed, spec, &hash, &mut actions);
    let pod_unknown = failure.is_some_and(|f| f.pod_unknown);
    if pod_unknown {
        outcome.pod = None;
        outcome.owned = false;
    }
    let multiple_pods = matches!(outcome.issue, Some(Issue::MultiplePods(_)));
    let pod_issue = outcome.issue.is_some();
    issues.extend(outcome.issue.take());
    if sandbox.pod_name_annotation() != outcome.annotation.as_deref() {
        actions.push(Action::SetPodNameAnnotation(outcome.annotation.clone()));
    }

    let mut status = sandbox.status.clone();
    match &outcome.pod {
        None => {
            status.pod_ips = None;
            status.node_name = None;
        }
        Some(pod) => {
            status.selector = Some(selector(&hash));
            if outcome.owned {
                status.pod_ips = Some(pod_ips(pod)).filter(|ips| !ips.is_empty());
                status.node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
            } else {
                status.pod_ips = None;
                status.node_name = None;
            }
        }
    }
    match sandbox.version {
        SandboxVersion::V1beta1 => status.replicas = None,
        SandboxVersion::V1alpha1 => {
            status.node_name = None;
            status.replicas = Some(i32::from(outcome.pod.is_some() && outcome.owned));
        }
    }

    // With several owned pods the routing target is ambiguous: leave any Service alone.
    let service_present = if multiple_pods {
        status.service.is_some()
    } else {
        plan_service(observed, spec, &hash, &mut actions, &mut issues, &mut status)
    };

    if let Some(failure) = failure {
        issues.push(Issue::Error(failure.message.clone()));
    }
    let inputs = ConditionInputs {
        generation: sandbox.generation,
        suspended: spec.suspended,
        pod: outcome.pod.as_ref(),
        pod_owned: outcome.owned,
        pod_unknown: pod_unknown || (outcome.pod.is_none() && pod_issue),
        issues: &issues,
        service_required: spec.service.unwrap_or(service_present),
        service_present,
    };
    apply_conditions(&mut status.conditions, &inputs, now);

    Plan { actions, status: Some(status), requeue_after: None }
}

/// Creates missing PVCs and adopts unowned ones carrying the hash label. PVCs are never
/// deleted here: only garbage collection removes them with the Sandbox.
fn plan_pvcs(observed: &Observed, spec: &Spec, hash: &str, actions: &mut Vec<Action>, issues: &mut Vec<Issue>) {
    let sandbox = &observed.sandbox;
    for template in &spec.volume_claim_templates {
        let name = agent_sandbox::volume_claim_name(&template.metadata.name, &sandbox.name);
        let Some(pvc) = observed.pvcs.get(&name) else {
            actions.push(Action::CreatePvc(Box::new(desired_pvc(sandbox, template, hash))));
            continue;
        };
        match ownership(&pvc.metadata, &sandbox.uid) {
            Ownership::Ours => {}
            Ownership::Other(owner) => issues.push(Issue::Error(format!(
                "PVC {name:?} is owned by {}, not by sandbox {:?}",
                describe_owner(owner),
                sandbox.name
            ))),
            Ownership::Unowned if has_hash_label(&pvc.metadata, hash) => {
                actions.push(Action::PatchPvc { name, patch: adopt_patch(&pvc.metadata, sandbox, hash) })
            }
            Ownership::Unowned => {
                issues.push(Issue::Error(format!("cannot adopt unowned PVC {name:?}: missing sandbox tracking label")))
            }
        }
    }
}

/// The pod step: refuse when several pods are owned, delete for suspend, adopt or create
/// when running; a terminal pod is never replaced.
fn plan_pod(observed: &Observed, spec: &Spec, hash: &str, actions: &mut Vec<Action>) -> PodOutcome {
    let sandbox = &observed.sandbox;
    let current_annotation = sandbox.pod_name_annotation().map(str::to_string);
    let pod_name = |pod: &Pod| pod.metadata.name.clone().unwrap_or_default();

    let mut owned: Vec<&Pod> =
        observed.labelled_pods.iter().filter(|p| ownership(&p.metadata, &sandbox.uid) == Ownership::Ours).collect();
    if let Some(pod) = &observed.pod
        && ownership(&pod.metadata, &sandbox.uid) == Ownership::Ours
        && !owned.iter().any(|p| p.metadata.name == pod.metadata.name)
    {
        owned.push(pod);
    }
    if owned.len() > 1 {
        return PodOutcome {
            pod: None,
            owned: false,
            annotation: current_annotation,
            issue: Some(Issue::MultiplePods(owned.len())),
        };
    }
    // The owner UID is authoritative over the annotation: follow the pod we own.
    let pod = match (owned.first(), &observed.pod) {
        (Some(ours), Some(named)) if ours.metadata.name == named.metadata.name => Some(named.clone()),
        (Some(ours), _) => Some((*ours).clone()),
        (None, named) => named.clone(),
    };

    if spec.suspended {
        if let Some(pod) = &pod
            && ownership(&pod.metadata, &sandbox.uid) == Ownership::Ours
            && pod.metadata.deletion_timestamp.is_none()
        {
            actions.push(Action::DeletePod { name: pod_name(pod) });
        }
        let owned = pod.as_ref().is_some_and(|p| ownership(&p.metadata, &sandbox.uid) == Ownership::Ours);
        return PodOutcome { pod, owned, annotation: None, issue: None };
    }

    // No pod and not suspended: create one, whatever an earlier pod's Finished said (upstream
    // keeps Finished only while its terminal pod exists; a terminal pod itself is never replaced).
    let Some(pod) = pod else {
        let new_pod = desired_pod(sandbox, spec, hash);
        actions.push(Action::CreatePod(Box::new(new_pod.clone())));
        return PodOutcome { pod: Some(new_pod), owned: true, annotation: Some(sandbox.name.clone()), issue: None };
    };

    let name = pod_name(&pod);
    match ownership(&pod.metadata, &sandbox.uid) {
        Ownership::Other(owner) => {
            let issue = Issue::Error(format!(
                "pod {name:?} is owned by {}, not by sandbox {:?}",
                describe_owner(owner),
                sandbox.name
            ));
            PodOutcome { pod: None, owned: false, annotation: None, issue: Some(issue) }
        }
        Ownership::Unowned if !has_hash_label(&pod.metadata, hash) => PodOutcome {
            pod: None,
            owned: false,
            annotation: current_annotation,
            issue: Some(Issue::Error(format!("cannot adopt unowned pod {name:?}: missing sandbox tracking label"))),
        },
        Ownership::Unowned => {
            actions.push(Action::PatchPod { name: name.clone(), patch: adopt_patch(&pod.metadata, sandbox, hash) });
            PodOutcome { pod: Some(pod), owned: true, annotation: Some(name), issue: None }
        }
        Ownership::Ours => {
            if !has_hash_label(&pod.metadata, hash) {
                actions.push(Action::PatchPod { name: name.clone(), patch: hash_label_patch(hash) });
            }
            PodOutcome { pod: Some(pod), owned: true, annotation: Some(name), issue: None }
        }
    }
}

/// The Service step; returns whether the Service exists afterwards. `spec.service: true`
/// creates or adopts it, `false` deletes an owned one, unset leaves things as they are.
fn plan_service(
    observed: &Observed,
    spec: &Spec,
    hash: &str,
    actions: &mut Vec<Action>,
    issues: &mut Vec<Issue>,
    status: &mut SandboxStatus,
) -> bool {
    let sandbox = &observed.sandbox;
    let set_status = |status: &mut SandboxStatus| {
        status.service = Some(sandbox.name.clone());
        status.service_fqdn = Some(service_fqdn(&sandbox.name, &sandbox.namespace));
    };
    let clear_status = |status: &mut SandboxStatus| {
        status.service = None;
        status.service_fqdn = None;
    };
    let desired = spec.service;

    let Some(service) = &observed.service else {
        if desired == Some(true) {
            actions.push(Action::CreateService(Box::new(desired_service(sandbox, hash))));
            set_status(status);
            return true;
        }
        clear_status(status);
        return false;
    };

    let owner = ownership(&service.metadata, &sandbox.uid);
    if desired == Some(false) {
        if owner == Ownership::Ours {
            actions.push(Action::DeleteService { name: sandbox.name.clone() });
        }
        clear_status(status);
        return false;
    }
    match owner {
        Ownership::Other(owner) => {
            issues.push(Issue::Error(format!(
                "service {:?} is owned by {}, not by sandbox {:?}",
                sandbox.name,
                describe_owner(owner),
                sandbox.name
            )));
            false
        }
        Ownership::Unowned if desired.is_none() => {
            clear_status(status);
            false
        }
        Ownership::Unowned => {
            if !has_hash_label(&service.metadata, hash) {
                issues.push(Issue::Error(format!(
                    "cannot adopt unowned service {:?}: missing sandbox tracking label",
                    sandbox.name
                )));
                return false;
            }
            if !service_is_headless(service) {
                issues.push(Issue::Error(format!(
                    "cannot adopt service {:?}: ClusterIP is not None (the field is immutable)",
                    sandbox.name
                )));
                return false;
            }
            actions.push(Action::PatchService {
                name: sandbox.name.clone(),
                patch: adopt_service_patch(service, sandbox, hash),
            });
            set_status(status);
            true
        }
        Ownership::Ours => {
            if !service_in_shape(service, hash) {
                actions.push(Action::PatchService {
                    name: sandbox.name.clone(),
                    patch: service_selector_patch(service, hash),
                });
            }
            set_status(status);
            true
        }
    }
}
