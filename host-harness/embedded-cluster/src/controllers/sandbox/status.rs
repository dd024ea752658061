//! Sandbox conditions and the status write.
//!
//! Conditions follow `meta.SetStatusCondition`: an existing condition keeps its place and its
//! `lastTransitionTime` unless its status flips, so recomputing an unchanged state yields a
//! byte-identical status and no write.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value, json};

use super::model::{Condition, SandboxStatus, SandboxVersion};

/// Condition: the Sandbox can take traffic.
pub const READY: &str = "Ready";
/// Condition: the Sandbox is (being) suspended.
pub const SUSPENDED: &str = "Suspended";
/// Condition: the pod ran to completion or failed.
pub const FINISHED: &str = "Finished";
/// Condition: mirror of the pod's own PodScheduled.
pub const POD_SCHEDULED: &str = "PodScheduled";

/// Ready=True: pod running, ready, with an IP, and the Service present when required.
pub const REASON_DEPENDENCIES_READY: &str = "DependenciesReady";
/// Ready=False: pod missing, pending, not ready or without an IP, or Service missing.
pub const REASON_DEPENDENCIES_NOT_READY: &str = "DependenciesNotReady";
/// Ready=False: a reconcile step failed.
pub const REASON_RECONCILER_ERROR: &str = "ReconcilerError";
/// Ready=False: more than one pod is controlled by the Sandbox.
pub const REASON_MULTIPLE_PODS: &str = "MultiplePods";
/// Ready=False: the Sandbox is suspended.
pub const REASON_SANDBOX_SUSPENDED: &str = "SandboxSuspended";
/// Ready=False and Finished=True: the pod succeeded.
pub const REASON_POD_SUCCEEDED: &str = "PodSucceeded";
/// Ready=False and Finished=True: the pod failed.
pub const REASON_POD_FAILED: &str = "PodFailed";
/// Ready=False: `shutdownTime` has passed.
pub const REASON_SANDBOX_EXPIRED: &str = "SandboxExpired";
/// Suspended=False: running normally.
pub const REASON_NOT_SUSPENDED: &str = "NotSuspended";
/// Suspended=False: the pod is being deleted for a suspend.
pub const REASON_POD_TERMINATING: &str = "PodTerminating";
/// Suspended=True: the pod is gone.
pub const REASON_POD_TERMINATED: &str = "PodTerminated";
/// Suspended=False: the pod is not the Sandbox's to delete.
pub const REASON_POD_NOT_OWNED: &str = "PodNotOwned";
/// Suspended=Unknown: the pod could not be observed.
pub const REASON_POD_STATE_UNKNOWN: &str = "PodStateUnknown";
/// PodScheduled=True without a reason from the scheduler.
pub const REASON_POD_SCHEDULED: &str = "PodScheduled";
/// PodScheduled=Unknown: no scheduling information (yet).
pub const REASON_POD_SCHEDULING_UNKNOWN: &str = "PodSchedulingUnknown";

/// A condition to set: everything but the transition time, which [`set_condition`] decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCondition {
    /// Condition type.
    pub type_: &'static str,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// Machine-readable reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

impl NewCondition {
    /// Builds a condition.
    pub fn new(type_: &'static str, status: &'static str, reason: &str, message: impl Into<String>) -> Self {
        Self { type_, status, reason: reason.to_string(), message: message.into() }
    }
}

/// Sets a condition like `meta.SetStatusCondition`: the transition time moves to `now` only
/// when the status flips (or the condition is new).
pub fn set_condition(conditions: &mut Vec<Condition>, new: NewCondition, generation: i64, now: &str) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            if existing.status != new.status || existing.last_transition_time.is_empty() {
                existing.status = new.status.to_string();
                existing.last_transition_time = now.to_string();
            }
            existing.reason = new.reason;
            existing.message = new.message;
            existing.observed_generation = Some(generation);
        }
        None => conditions.push(Condition {
            type_: new.type_.to_string(),
            status: new.status.to_string(),
            observed_generation: Some(generation),
            last_transition_time: now.to_string(),
            reason: new.reason,
            message: new.message,
        }),
    }
}

/// Removes a condition that no longer applies.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// Whether Ready already says the Sandbox expired (the first step of expiry is done).
pub fn marked_expired(status: &SandboxStatus) -> bool {
    status.condition(READY).is_some_and(|c| c.reason == REASON_SANDBOX_EXPIRED)
}

/// Marks the Sandbox expired: Ready=False/SandboxExpired; PodScheduled goes with the pod.
pub fn mark_expired(conditions: &mut Vec<Condition>, generation: i64, now: &str) {
    set_condition(
        conditions,
        NewCondition::new(READY, "False", REASON_SANDBOX_EXPIRED, "Sandbox has expired"),
        generation,
        now,
    );
    remove_condition(conditions, POD_SCHEDULED);
}

/// Something that went wrong in this reconcile and must show in Ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Issue {
    /// Several pods are controlled by the Sandbox; it will not choose one.
    MultiplePods(usize),
    /// Any other failure, with its message.
    Error(String),
}

/// What the conditions are computed from.
#[derive(Clone, Debug)]
pub struct ConditionInputs<'a> {
    /// `metadata.generation`.
    pub generation: i64,
    /// Spec asks for suspension.
    pub suspended: bool,
    /// The pod the Sandbox tracks after this reconcile (possibly one just created).
    pub pod: Option<&'a Pod>,
    /// That pod is controlled by this Sandbox.
    pub pod_owned: bool,
    /// The pod could not be observed or changed, so its absence proves nothing.
    pub pod_unknown: bool,
    /// Failures of this reconcile.
    pub issues: &'a [Issue],
    /// A Service is required for readiness.
    pub service_required: bool,
    /// The Service exists (or was just created).
    pub service_present: bool,
}

/// Recomputes Suspended, Finished, PodScheduled and Ready in place (in that order, like the
/// real controller); Finished and PodScheduled are removed when they do not apply.
pub fn apply_conditions(conditions: &mut Vec<Condition>, inputs: &ConditionInputs<'_>, now: &str) {
    let generation = inputs.generation;
    set_condition(conditions, suspended_condition(inputs), generation, now);
    match finished_condition(inputs) {
        Some(c) => set_condition(conditions, c, generation, now),
        None => remove_condition(conditions, FINISHED),
    }
    match pod_scheduled_condition(inputs) {
        Some(c) => set_condition(conditions, c, generation, now),
        None => remove_condition(conditions, POD_SCHEDULED),
    }
    set_condition(conditions, ready_condition(inputs), generation, now);
}

fn suspended_condition(inputs: &ConditionInputs<'_>) -> NewCondition {
    if !inputs.suspended {
        return NewCondition::new(SUSPENDED, "False", REASON_NOT_SUSPENDED, "Sandbox is not suspended");
    }
    match inputs.pod {
        None if inputs.pod_unknown => NewCondition::new(
            SUSPENDED,
            "Unknown",
            REASON_POD_STATE_UNKNOWN,
            "Pod state is unknown. Sandbox suspension cannot be confirmed",
        ),
        None => {
            NewCondition::new(SUSPENDED, "True", REASON_POD_TERMINATED, "Pod has been terminated. Sandbox is suspended")
        }
        Some(_) if !inputs.pod_owned => NewCondition::new(
            SUSPENDED,
            "False",
            REASON_POD_NOT_OWNED,
            "Refused to delete pod because it is not owned by this sandbox",
        ),
        Some(_) => {
            NewCondition::new(SUSPENDED, "False", REASON_POD_TERMINATING, "Pod is terminating. Sandbox is suspending")
        }
    }
}

/// The terminal outcome of a pod, as (reason, message).
fn terminal_outcome(pod: &Pod) -> Option<(&'static str, &'static str)> {
    match pod_phase(pod) {
        "Succeeded" => Some((REASON_POD_SUCCEEDED, "Pod completed successfully")),
        "Failed" => Some((REASON_POD_FAILED, "Pod failed")),
        _ => None,
    }
}

fn finished_condition(inputs: &ConditionInputs<'_>) -> Option<NewCondition> {
    let pod = inputs.pod.filter(|_| inputs.pod_owned)?;
    let (reason, message) = terminal_outcome(pod)?;
    Some(NewCondition::new(FINISHED, "True", reason, message))
}

fn pod_scheduled_condition(inputs: &ConditionInputs<'_>) -> Option<NewCondition> {
    let unknown = |message: &str| NewCondition::new(POD_SCHEDULED, "Unknown", REASON_POD_SCHEDULING_UNKNOWN, message);
    if inputs.pod.is_none() && inputs.pod_unknown {
        return Some(unknown("Pod state is unknown. Pod scheduling cannot be determined"));
    }
    let pod = inputs.pod.filter(|_| inputs.pod_owned)?;
    let scheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled");
    let Some(scheduled) = scheduled else {
        return Some(unknown("Pod has not reported a PodScheduled condition yet"));
    };
    let status = match scheduled.status.as_str() {
        "True" => "True",
        "False" => "False",
        _ => "Unknown",
    };
    let reason = match scheduled.reason.as_deref().filter(|r| !r.is_empty()) {
        Some(r) => r.to_string(),
        None if status == "True" => REASON_POD_SCHEDULED.to_string(),
        None => REASON_POD_SCHEDULING_UNKNOWN.to_string(),
    };
    Some(NewCondition { type_: POD_SCHEDULED, status, reason, message: scheduled.message.clone().unwrap_or_default() })
}

fn ready_condition(inputs: &ConditionInputs<'_>) -> NewCondition {
    let not_ready = |reason: &str, message: String| NewCondition::new(READY, "False", reason, message);
    if let Some(Issue::MultiplePods(count)) = inputs.issues.iter().find(|i| matches!(i, Issue::MultiplePods(_))) {
        return not_ready(
            REASON_MULTIPLE_PODS,
            format!("multiple Pods ({count}) are controlled by this Sandbox; refusing to choose or create a Pod"),
        );
    }
    if !inputs.issues.is_empty() {
        let errors: Vec<&str> = inputs
            .issues
            .iter()
            .filter_map(|i| match i {
                Issue::Error(e) => Some(e.as_str()),
                Issue::MultiplePods(_) => None,
            })
            .collect();
        return not_ready(REASON_RECONCILER_ERROR, format!("Error seen: {}", errors.join("; ")));
    }
    if inputs.suspended {
        let message = if inputs.pod.is_some() { "Sandbox is suspending" } else { "Sandbox is suspended" };
        return not_ready(REASON_SANDBOX_SUSPENDED, message.to_string());
    }
    if let Some((reason, message)) = inputs.pod.and_then(terminal_outcome) {
        return not_ready(reason, message.to_string());
    }

    let (mut message, pod_ready) = match inputs.pod {
        None => ("Pod does not exist".to_string(), false),
        Some(pod) => pod_readiness(pod),
    };
    let service_ready = if inputs.service_required {
        message.push_str(if inputs.service_present { "; Service Exists" } else { "; Service does not exist" });
        inputs.service_present
    } else {
        true
    };
    if pod_ready && service_ready {
        NewCondition::new(READY, "True", REASON_DEPENDENCIES_READY, message)
    } else {
        not_ready(REASON_DEPENDENCIES_NOT_READY, message)
    }
}

/// Whether a pod is ready for traffic, with the message explaining why (not).
fn pod_readiness(pod: &Pod) -> (String, bool) {
    if pod.metadata.deletion_timestamp.is_some() {
        return ("Pod is terminating".to_string(), false);
    }
    let phase = pod_phase(pod);
    if phase != "Running" {
        return (format!("Pod exists with phase: {phase}"), false);
    }
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .is_some_and(|c| c.status == "True");
    if !ready {
        ("Pod is Running but not Ready".to_string(), false)
    } else if pod_ips(pod).is_empty() {
        ("Pod is Ready but has no podIPs yet".to_string(), false)
    } else {
        ("Pod is Ready".to_string(), true)
    }
}

/// The pod phase; a pod the kubelet has not reported on yet counts as Pending.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).filter(|p| !p.is_empty()).unwrap_or("Pending")
}

/// The pod's IPs: `status.podIPs`, else `status.podIP`.
pub fn pod_ips(pod: &Pod) -> Vec<String> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let ips: Vec<String> = status.pod_ips.iter().flatten().map(|p| p.ip.clone()).filter(|ip| !ip.is_empty()).collect();
    if !ips.is_empty() {
        return ips;
    }
    status.pod_ip.iter().filter(|ip| !ip.is_empty()).cloned().collect()
}

/// The JSON merge patch (`{"status": {...}}`) turning `observed` into `desired`, or `None`
/// when nothing changed. Every managed field is sent, cleared ones as `null`, and only the
/// fields the version's schema has.
pub fn status_merge_patch(version: SandboxVersion, observed: &SandboxStatus, desired: &SandboxStatus) -> Option<Value> {
    if observed == desired {
        return None;
    }
    fn opt<T: serde::Serialize>(v: &Option<T>) -> Value {
        v.as_ref().map_or(Value::Null, |v| json!(v))
    }
    let mut status = Map::new();
    let conditions = if desired.conditions.is_empty() { Value::Null } else { json!(desired.conditions) };
    status.insert("conditions".into(), conditions);
    status.insert("selector".into(), opt(&desired.selector));
    status.insert("podIPs".into(), opt(&desired.pod_ips));
    status.insert("service".into(), opt(&desired.service));
    status.insert("serviceFQDN".into(), opt(&desired.service_fqdn));
    match version {
        SandboxVersion::V1beta1 => {
            status.insert("nodeName".into(), opt(&desired.node_name));
        }
        SandboxVersion::V1alpha1 => {
            status.insert("replicas".into(), opt(&desired.replicas));
        }
    }
    Some(json!({ "status": status }))
}
