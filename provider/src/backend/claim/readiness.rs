//! Waiting for a SandboxClaim's sandbox by watching, not polling.
//!
//! Three steps under one deadline. The claim is watched (from the version the caller read or
//! created it at) until it names its Sandbox (`status.sandbox.name`): a warm adoption names it at
//! once, a cold start as soon as the Sandbox is made. A terminal reason fails at once (see
//! `claim::state`), as does the claim's deletion. Then the Sandbox is read (the host allows it:
//! its controller ownerReference is the claim, which the host created; one that is not the
//! claim's is refused as replaced) and waited for like a Sandbox lease's ([`readiness`]: its
//! pod watched for fail-fast causes, the Sandbox's Ready at its generation). Last, the claim
//! must say Ready for that Sandbox: read once, watched only when the controller has not caught
//! up yet.

use contract::k8s::agent_sandbox::{LAUNCH_TYPE_LABEL, LAUNCH_WARM};
use serde_json::Value;

use crate::api_versions;
use crate::backend::claim::state::{ClaimState, claim_state, sandbox_name};
use crate::clock::{Clock, Deadline};
use crate::errors::ProviderError;
use crate::event_stream::{Change, EventStream};
use crate::kube_api::{Kube, KubeError, ResourceType};
use crate::lease::ClaimedSandbox;
use crate::log::Log;
use crate::object;
use crate::readiness::{self, Start, Target, WaitError};
use crate::retry::{GaveUp, retry};
use crate::workload_state::{Cause, Failure, PodInfo, WorkloadKind, wait_failure};

/// The claim being waited for.
pub struct ClaimTarget<'a> {
    /// The claim's namespace (the lease id's).
    pub namespace: &'a str,
    /// The claim's name (the lease id's).
    pub name: &'a str,
    /// The claim version in use.
    pub resource: &'a ResourceType,
    /// The claim's uid: a claim replaced under the name is not this lease's.
    pub uid: &'a str,
    /// The Sandbox uid the lease recorded, when it did: another Sandbox is a replacement (its
    /// disk is empty), not this lease's sandbox.
    pub sandbox_uid: Option<&'a str>,
}

impl ClaimTarget<'_> {
    /// `SandboxClaim ns/name`, for messages.
    pub fn describe(&self) -> String {
        format!("SandboxClaim {}/{}", self.namespace, self.name)
    }

    fn deleted(&self) -> Failure {
        wait_failure::deleted(&self.describe())
    }

    fn terminating(&self) -> Failure {
        wait_failure::terminating(&self.describe())
    }

    fn taken(&self) -> Failure {
        wait_failure::taken(&self.describe())
    }

    fn replaced(&self, found: &str) -> Failure {
        wait_failure::replaced(&self.describe(), "the claim", found, self.uid, "Its sandbox is not this lease's")
    }
}

/// A claim whose Sandbox is ready.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The claim, as last seen (Ready).
    pub claim: Value,
    /// The Sandbox the claim got.
    pub sandbox: ClaimedSandbox,
    /// The Sandbox's ready pod.
    pub pod: PodInfo,
}

/// What the claim watch waits for.
#[derive(Clone, Copy)]
enum Until<'a> {
    /// The claim names a Sandbox (ready or not).
    Named,
    /// The claim is Ready for this Sandbox.
    Ready(&'a str),
}

/// Watches the claim from `known` (as last read) until `until` holds; a failure, the claim's
/// deletion or replacement end the wait.
fn watch_claim<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    target: &ClaimTarget<'_>,
    mut claim: Value,
    until: Until<'_>,
    deadline: Deadline,
) -> Result<Value, WaitError> {
    let field = Some(format!("metadata.name={}", target.name));
    let mut stream = EventStream::new(kube, target.resource.clone(), target.namespace, None, field);
    if let Some(rv) = object::resource_version(&claim) {
        stream.resume_from(rv);
    }
    loop {
        if let Some(found) = object::uid(&claim).filter(|u| !target.uid.is_empty() && *u != target.uid) {
            return Err(WaitError::Failed(target.replaced(found)));
        }
        let waiting = match (claim_state(&claim), until) {
            (ClaimState::Deleting, _) => return Err(WaitError::Failed(target.terminating())),
            (ClaimState::Failed(f), _) => return Err(WaitError::Failed(f)),
            (ClaimState::Ready { sandbox }, Until::Ready(want)) if sandbox == want => return Ok(claim),
            (ClaimState::Ready { sandbox }, Until::Ready(want)) => {
                return Err(WaitError::Failed(Failure::new(
                    Cause::SandboxLost,
                    format!(
                        "{} now names Sandbox {sandbox} instead of {want}: its sandbox was replaced. Destroy the lease \
                         and acquire a new sandbox.",
                        target.describe()
                    ),
                )));
            }
            (ClaimState::Ready { .. }, Until::Named) => return Ok(claim),
            // A cold start's Sandbox is named before it is ready: its pod is watched from now.
            (ClaimState::Starting(_), Until::Named) if sandbox_name(&claim).is_some() => return Ok(claim),
            (ClaimState::Starting(why), _) => why,
        };
        match stream.next(clock, log, deadline).map_err(WaitError::Api)? {
            None => return Err(WaitError::Timeout(waiting)),
            Some(Change::Upsert(c)) => claim = c,
            Some(Change::Deleted(_)) => return Err(WaitError::Failed(target.deleted())),
            Some(Change::Relisted(items)) => match items.into_iter().find(|c| object::name(c) == Some(target.name)) {
                Some(c) => claim = c,
                None => return Err(WaitError::Failed(target.deleted())),
            },
        }
    }
}

/// Reads the claim (retrying transient failures); 404 is `deleted`.
fn read_claim<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    target: &ClaimTarget<'_>,
    deadline: Deadline,
) -> Result<Value, WaitError> {
    match retry(clock, deadline, || kube.get(target.resource, Some(target.namespace), target.name)) {
        Ok(claim) => Ok(claim),
        Err(GaveUp::Final(KubeError::NotFound(_))) => Err(WaitError::Failed(target.deleted())),
        Err(GaveUp::Final(KubeError::NotOwned(_))) => Err(WaitError::Failed(target.taken())),
        Err(g) => Err(WaitError::Api(g.into_error(&format!("get {}", target.describe())))),
    }
}

/// The claim's Sandbox, read in the preferred served version: it must be the claim's (its
/// controller), and the lease's when the lease recorded one.
fn read_sandbox<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    target: &ClaimTarget<'_>,
    claim: &Value,
    name: &str,
    deadline: Deadline,
) -> Result<(ResourceType, Value), WaitError> {
    let Some(version) = api_versions::served_sandbox_versions(kube).map_err(WaitError::Api)?.first().copied() else {
        return Err(WaitError::Api(ProviderError::rejected(format!(
            "the cluster serves SandboxClaims but no Sandbox version (agents.x-k8s.io), so the Sandbox {name} of {} \
             cannot be read. Install agent-sandbox's core (v0.5 or later) beside its extensions.",
            target.describe()
        ))));
    };
    let resource = version.resource();
    let what = format!("Sandbox {}/{name} of {}", target.namespace, target.describe());
    let gone = |why: &str| {
        WaitError::Failed(Failure::new(
            Cause::SandboxLost,
            format!("the {what} {why}; the claim controller replaces it with an empty one. Acquire a new sandbox."),
        ))
    };
    let sandbox = match retry(clock, deadline, || kube.get(&resource, Some(target.namespace), name)) {
        Ok(s) => s,
        Err(GaveUp::Final(KubeError::NotFound(_))) => return Err(gone("is gone")),
        Err(GaveUp::Final(KubeError::NotOwned(_))) => return Err(gone("is no longer the claim's")),
        Err(g) => return Err(WaitError::Api(g.into_error(&format!("get {what}")))),
    };
    let claim_uid = object::uid(claim).unwrap_or(target.uid);
    if object::controller_uid(&sandbox) != Some(claim_uid) {
        return Err(gone("is not controlled by the claim (its ownerReference names another owner)"));
    }
    if let (Some(recorded), Some(found)) = (target.sandbox_uid, object::uid(&sandbox))
        && recorded != found
    {
        return Err(WaitError::Failed(Failure::new(
            Cause::SandboxLost,
            format!(
                "the {what} was replaced: it now has uid {found}, the lease's had uid {recorded}. Its disk and \
                 processes are not this lease's; destroy this lease and acquire a new sandbox."
            ),
        )));
    }
    Ok((resource, sandbox))
}

/// A failure of the Sandbox wait, told from the claim's side when the claim is what went (its
/// deletion takes the Sandbox with it); a Sandbox that went while its claim stays is lost.
fn explain<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    target: &ClaimTarget<'_>,
    failure: Failure,
    deadline: Deadline,
) -> WaitError {
    if !matches!(failure.cause, Cause::Deleted | Cause::Terminating | Cause::Replaced) {
        return WaitError::Failed(failure);
    }
    match read_claim(kube, clock, target, deadline) {
        Ok(claim) if object::is_terminating(&claim) => WaitError::Failed(target.terminating()),
        Ok(claim) => match claim_state(&claim) {
            ClaimState::Failed(f) => WaitError::Failed(f),
            _ => WaitError::Failed(Failure::new(Cause::SandboxLost, failure.message)),
        },
        Err(e) => e,
    }
}

/// Waits until the claim `known` (as created or last read) has a ready Sandbox (see the module
/// docs).
pub fn wait_claimed<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    target: &ClaimTarget<'_>,
    known: Value,
    deadline: Deadline,
) -> Result<Claimed, WaitError> {
    let claim = watch_claim(kube, clock, log, target, known, Until::Named, deadline)?;
    let name = sandbox_name(&claim).unwrap_or(target.name).to_string();
    let (resource, sandbox) = read_sandbox(kube, clock, target, &claim, &name, deadline)?;
    let uid = object::uid(&sandbox).unwrap_or("").to_string();
    let warm = match object::label(&sandbox, LAUNCH_TYPE_LABEL) {
        Some(launch) => launch == LAUNCH_WARM,
        // Older controllers do not label: a cold start is named like the claim, a pool member not.
        None => name != target.name,
    };
    let sandbox_target = Target {
        kind: WorkloadKind::Sandbox,
        namespace: target.namespace,
        name: &name,
        resource: &resource,
        uid: &uid,
        secret: None,
        job_retries: false,
    };
    let pod = match readiness::wait_ready(kube, clock, log, &sandbox_target, Start::List(Some(sandbox)), deadline) {
        Ok(pod) => pod,
        Err(WaitError::Failed(f)) => return Err(explain(kube, clock, target, f, deadline)),
        Err(e) => return Err(e),
    };
    let claim = match claim_state(&claim) {
        ClaimState::Ready { sandbox } if sandbox == name => claim,
        _ => {
            let fresh = read_claim(kube, clock, target, deadline)?;
            watch_claim(kube, clock, log, target, fresh, Until::Ready(&name), deadline)?
        }
    };
    let api_version = resource.api_version();
    Ok(Claimed { claim, sandbox: ClaimedSandbox { api_version, name, uid, warm }, pod })
}
