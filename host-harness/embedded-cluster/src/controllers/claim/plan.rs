//! The claim controller's decisions as pure functions: the observed claim, its pool, template,
//! Sandboxes and the pool members → one step to take, and when to look again.
//!
//! The order follows upstream's `getOrCreateSandbox`: a Sandbox the claim already has wins
//! (recorded in its status, named by its adoption annotation, or named like it), then a warm
//! member is adopted, then a Sandbox is started cold.

use std::collections::HashSet;
use std::time::Duration;

use contract::k8s::agent_sandbox::{ASSIGNED_SANDBOX_ANNOTATION, READY, WARM_POOL_KIND, WARM_POOL_LABEL, claim_reason};
use jiff::Timestamp;
use serde_json::Value;

use super::build::{Refusal, adoption_patch, cold_sandbox, validate_pod_metadata};
use super::candidates::candidates;
use super::model::{Claim, ClaimStatus, ShutdownPolicy, Source, Spec};
use super::status::{expired, expires_at, failed, missing, tracked, until};
use crate::controllers::extensions::blueprint::Template;
use crate::controllers::extensions::discovery::Apis;
use crate::controllers::extensions::is_extension_kind;
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::warm_pool::model::Pool;

/// How long a new claim waits for a starting pool member before it starts cold (upstream's
/// `warmCandidateGracePeriod`).
pub const WARM_GRACE: Duration = Duration::from_secs(2);
/// How often it looks again meanwhile.
pub const WARM_RETRY: Duration = Duration::from_millis(500);

/// Everything one reconcile knows about a claim.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The claim.
    pub claim: Claim,
    /// The claim's pool (v1beta1), if it exists.
    pub pool: Option<Pool>,
    /// The pools in the claim's namespace (v1alpha1 adopts from any of its template's).
    pub pools: Vec<Pool>,
    /// The claim's template (the pool's, in v1beta1), if it exists and is usable.
    pub template: Option<Template>,
    /// The Sandbox named in `status.sandbox.name`.
    pub recorded: Option<SandboxView>,
    /// The Sandbox named by the adoption annotation.
    pub assigned: Option<SandboxView>,
    /// The Sandbox named like the claim.
    pub same_name: Option<SandboxView>,
    /// The namespace's Sandboxes that carry a pool label.
    pub members: Vec<SandboxView>,
    /// Members other claims are adopting right now.
    pub reserved: HashSet<String>,
    /// Cluster time of the observation.
    pub now: Timestamp,
}

/// A pool member to adopt, with the patch that moves it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The member as observed.
    pub member: SandboxView,
    /// The locked merge patch (see [`adoption_patch`]).
    pub patch: Value,
}

/// The one step a reconcile takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing (the claim is being deleted).
    Nothing,
    /// The claim expired under `Delete` or `DeleteForeground`: delete it.
    DeleteClaim {
        /// Foreground propagation: the claim stays until its Sandbox is gone.
        foreground: bool,
    },
    /// The claim expired under `Retain`: delete its Sandbox (name, uid), keep the claim.
    Expire {
        /// The Sandbox to delete, if it still exists.
        sandbox: Option<(String, String)>,
        /// `Ready` False `ClaimExpired`.
        status: Box<ClaimStatus>,
    },
    /// Write this status (the claim has its Sandbox, or cannot get one).
    Status(Box<ClaimStatus>),
    /// The adoption annotation names a Sandbox that is gone, another's, or one this claim may
    /// not adopt: remove it, look again.
    ClearAssignment,
    /// The annotation names a member this claim could adopt: finish moving exactly that one.
    Finish(Box<Candidate>),
    /// Adopt the first of these that can be moved.
    Adopt(Vec<Candidate>),
    /// Members are starting and the claim is young: look again after this (cluster time).
    Wait(Duration),
    /// Start this Sandbox cold.
    Create(Value),
}

impl Step {
    /// Whether the step rests on something being absent (so a cache behind the API server
    /// could make it wrong, and it must be confirmed by fresh reads first).
    pub fn needs_confirmation(&self) -> bool {
        match self {
            Step::ClearAssignment | Step::Create(_) => true,
            Step::Status(status) => status.condition(READY).is_some_and(|c| {
                matches!(
                    c.reason.as_str(),
                    claim_reason::SANDBOX_MISSING
                        | claim_reason::WARM_POOL_NOT_FOUND
                        | claim_reason::TEMPLATE_NOT_FOUND
                )
            }),
            _ => false,
        }
    }
}

/// What one reconcile should do.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The step.
    pub step: Step,
    /// When the claim expires, from the observation (cluster time), to look again then.
    pub expires_in: Option<Duration>,
}

fn status_step(status: ClaimStatus) -> Step {
    Step::Status(Box::new(status))
}

fn refused(claim: &Claim, refusal: &Refusal, now: Timestamp) -> Step {
    status_step(failed(claim, refusal.reason(), refusal.message(), now))
}

/// Whether a Sandbox is still a pool member a claim could finish adopting.
pub fn in_pool(sandbox: &SandboxView) -> bool {
    !sandbox.deleting
        && sandbox.labels.contains_key(WARM_POOL_LABEL)
        && sandbox.controller.as_ref().is_some_and(|r| is_extension_kind(r, WARM_POOL_KIND))
}

/// Decides what to do for one observation.
pub fn plan(observed: &Observed, apis: &Apis) -> Plan {
    let claim = &observed.claim;
    let now = observed.now;
    if claim.deleting {
        return Plan { step: Step::Nothing, expires_in: None };
    }
    let spec = match &claim.spec {
        Ok(spec) => spec,
        Err(why) => {
            let step = status_step(failed(claim, claim_reason::RECONCILER_ERROR, format!("Error seen: {why}"), now));
            return Plan { step, expires_in: None };
        }
    };
    let deadline = expires_at(&spec.lifecycle, &claim.status);
    if let Some(at) = deadline
        && now >= at
    {
        return Plan { step: expire(observed, spec), expires_in: None };
    }
    let expires_in = deadline.map(|at| until(now, at));
    Plan { step: active(observed, spec, apis), expires_in }
}

fn expire(observed: &Observed, spec: &Spec) -> Step {
    let claim = &observed.claim;
    match spec.lifecycle.shutdown_policy {
        ShutdownPolicy::Delete => Step::DeleteClaim { foreground: false },
        ShutdownPolicy::DeleteForeground => Step::DeleteClaim { foreground: true },
        ShutdownPolicy::Retain => {
            let ours = [&observed.recorded, &observed.same_name, &observed.assigned]
                .into_iter()
                .flatten()
                .find(|s| s.controlled_by(&claim.uid));
            Step::Expire {
                sandbox: ours.filter(|s| !s.deleting).map(|s| (s.name.clone(), s.uid.clone())),
                status: Box::new(expired(claim, ours, observed.now)),
            }
        }
    }
}

fn active(observed: &Observed, spec: &Spec, apis: &Apis) -> Step {
    let claim = &observed.claim;
    let now = observed.now;
    if let Err(refusal) = validate_pod_metadata(&spec.additional_pod_metadata) {
        return refused(claim, &refusal, now);
    }
    if let Some(recorded) = observed.recorded.as_ref().filter(|s| s.controlled_by(&claim.uid)) {
        return status_step(tracked(claim, recorded, now));
    }
    if claim.annotations.get(ASSIGNED_SANDBOX_ANNOTATION).is_some_and(|a| !a.is_empty()) {
        match &observed.assigned {
            Some(sandbox) if sandbox.controlled_by(&claim.uid) => return status_step(tracked(claim, sandbox, now)),
            Some(member) if in_pool(member) => {
                let Some(template) = observed.template.as_ref().filter(|_| resolvable(observed, spec)) else {
                    return not_found(observed, spec);
                };
                // The annotation is the claim's, which its clients can write: finish only with a
                // member this claim could have picked itself (its pool and template, Ready with
                // an IP, not stale, not another claim's), else drop it and pick again.
                if !adoptable(observed, spec, template, member) {
                    return Step::ClearAssignment;
                }
                return match adoption_patch(claim, spec, member, template, apis) {
                    Ok(patch) => Step::Finish(Box::new(Candidate { member: member.clone(), patch })),
                    Err(refusal) => refused(claim, &refusal, now),
                };
            }
            _ => return Step::ClearAssignment,
        }
    }
    if let Some(sandbox) = &observed.same_name {
        if sandbox.controlled_by(&claim.uid) {
            return status_step(tracked(claim, sandbox, now));
        }
        let why = format!(
            "Error seen: sandbox {:?} is not controlled by claim {:?}. Please use a different claim name or delete the sandbox manually",
            sandbox.name, claim.name
        );
        return status_step(failed(claim, claim_reason::RECONCILER_ERROR, why, now));
    }
    if !claim.status.sandbox.name.is_empty() {
        // The claim had a Sandbox and it is gone: say so first; the next pass replaces it.
        return status_step(missing(claim, now));
    }
    let Some(template) = observed.template.as_ref().filter(|_| resolvable(observed, spec)) else {
        return not_found(observed, spec);
    };
    if !spec.needs_cold_start() {
        let found = candidates(&spec.source, template, &observed.pools, &observed.members, &observed.reserved);
        if !found.ready.is_empty() {
            let mut adoptable = Vec::new();
            for member in found.ready {
                match adoption_patch(claim, spec, &member, template, apis) {
                    Ok(patch) => adoptable.push(Candidate { member, patch }),
                    Err(refusal) => return refused(claim, &refusal, now),
                }
            }
            return Step::Adopt(adoptable);
        }
        let age = claim.created.map(|c| until(c, now)).unwrap_or(WARM_GRACE);
        if found.starting > 0 && age < WARM_GRACE {
            return Step::Wait(WARM_RETRY.min(WARM_GRACE - age));
        }
    }
    match cold_sandbox(claim, spec, template, apis) {
        Ok(sandbox) => Step::Create(sandbox),
        Err(refusal) => refused(claim, &refusal, now),
    }
}

/// Whether `member` passes the rules [`candidates`] picks by, for this claim.
fn adoptable(observed: &Observed, spec: &Spec, template: &Template, member: &SandboxView) -> bool {
    !spec.needs_cold_start()
        && candidates(&spec.source, template, &observed.pools, std::slice::from_ref(member), &observed.reserved)
            .ready
            .iter()
            .any(|m| m.uid == member.uid)
}

/// Whether the claim's pool (v1beta1) exists.
fn resolvable(observed: &Observed, spec: &Spec) -> bool {
    !matches!(spec.source, Source::Pool(_)) || observed.pool.is_some()
}

/// `WarmPoolNotFound` or `TemplateNotFound`, whichever is missing first.
fn not_found(observed: &Observed, spec: &Spec) -> Step {
    let claim = &observed.claim;
    let (reason, message) = match (&spec.source, &observed.pool) {
        (Source::Pool(pool), None) => {
            (claim_reason::WARM_POOL_NOT_FOUND, format!("SandboxWarmPool {pool:?} not found"))
        }
        (Source::Pool(_), Some(pool)) => {
            (claim_reason::TEMPLATE_NOT_FOUND, format!("SandboxTemplate {:?} not found", pool.template))
        }
        (Source::Template { template, .. }, _) => {
            (claim_reason::TEMPLATE_NOT_FOUND, format!("SandboxTemplate {template:?} not found"))
        }
    };
    status_step(failed(claim, reason, message, observed.now))
}

/// The name of the template a claim uses (its pool's, in v1beta1), once the pool is known.
pub fn template_name(spec: &Spec, pool: Option<&Pool>) -> Option<String> {
    match &spec.source {
        Source::Pool(_) => pool.map(|p| p.template.clone()),
        Source::Template { template, .. } => Some(template.clone()),
    }
}
