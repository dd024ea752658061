//! Resume-check of a claim lease: is its SandboxClaim still there, with the Sandbox the lease
//! got, and is that Sandbox's pod ready?
//!
//! From the lease id alone (the claim's namespace and name), with the claim's uid and the
//! Sandbox's when the lease recorded them. The answers follow resume-check's rule (an API
//! failure is never `expired`): the claim gone (404), replaced (another uid), being deleted, or
//! Ready False with `ClaimExpired`, `SandboxExpired` or `SandboxMissing` is `expired`, as is a
//! Sandbox that is gone, not the claim's, or replaced by another (the claim controller makes a
//! new, empty one when its Sandbox is deleted; a claim naming another Sandbox than the lease
//! recorded is one), and a pod that failed or exited. Renew reads the claim the same way
//! (`sandbox_lost`). Otherwise the Sandbox and its pod are resolved as acquire does
//! (`claim::readiness`), within the config's readiness timeout; a pod replaced under the same
//! Sandbox is reported as for a Sandbox lease.

use contract::k8s::agent_sandbox::{READY, claim_reason};
use serde_json::Value;

use crate::api_versions;
use crate::backend::claim::container;
use crate::backend::claim::readiness::{ClaimTarget, wait_claimed};
use crate::backend::claim::state::{ClaimState, claim_state, sandbox_name};
use crate::clock::Clock;
use crate::errors::ProviderError;
use crate::kube_api::{Kube, KubeError};
use crate::lease::{Lease, LeaseMetadata, LeaseRef};
use crate::log::Log;
use crate::naming::LeaseId;
use crate::object::{self, condition};
use crate::readiness::WaitError;
use crate::resume::{ResumeOutcome, ResumeWait, note_replaced_pod};
use crate::retry::{GaveUp, retry};
use crate::workload_state::expiry_of;

/// The name of the Sandbox a claim lease got, as the lease recorded it (its typed field, else
/// its metadata); none for a lease that lost both.
pub(crate) fn recorded_sandbox_name(lease: &Lease) -> Option<String> {
    lease
        .claimed_sandbox
        .as_ref()
        .map(|s| s.name.clone())
        .or_else(|| LeaseMetadata::parse_lenient(&lease.metadata).sandbox.map(|s| s.name))
        .filter(|n| !n.is_empty())
}

/// Why the claim `what` no longer holds the lease's Sandbox, when it does not: it says Ready
/// False `SandboxMissing` (the Sandbox was deleted; the controller would make a new, empty
/// one), or it names another Sandbox than `recorded` (the lease's, when known). Shared by
/// resume-check and renew, which must agree.
pub(crate) fn sandbox_lost(claim: &Value, what: &str, recorded: Option<&str>) -> Option<String> {
    if condition(claim, READY).is_some_and(|c| c.reason == claim_reason::SANDBOX_MISSING && !c.is_true()) {
        return Some(format!(
            "{what} says its Sandbox is missing (SandboxMissing): the lease's sandbox was lost (its Sandbox was \
             deleted, and a new one would start empty). Destroy this lease and acquire a new sandbox."
        ));
    }
    match (sandbox_name(claim), recorded) {
        (Some(found), Some(recorded)) if found != recorded => Some(format!(
            "{what} now names Sandbox {found} instead of the lease's {recorded}: the lease's sandbox was lost (it \
             was replaced). Its disk is gone with it; destroy this lease and acquire a new sandbox."
        )),
        _ => None,
    }
}

/// Checks a claim lease (see the module docs), within `wait`.
pub(crate) fn resume_check<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
    id: &LeaseId,
    wait: ResumeWait,
) -> Result<ResumeOutcome, ProviderError> {
    let (deadline, wait_seconds) = (wait.deadline, wait.seconds);
    let lease = &lease_ref.lease;
    let what = format!("SandboxClaim {}", id.qualified());
    let Some(version) = api_versions::claim_for_existing(kube, &lease.api_version)? else {
        return Ok(ResumeOutcome::Expired(format!(
            "the cluster no longer serves SandboxClaims (extensions.agents.x-k8s.io), so {what} cannot exist; acquire \
             a new sandbox."
        )));
    };
    let resource = version.resource();
    let claim = match retry(clock, deadline, || kube.get(&resource, Some(&id.namespace), &id.name)) {
        Ok(claim) => claim,
        Err(GaveUp::Final(KubeError::NotFound(_))) => {
            return Ok(ResumeOutcome::Expired(format!(
                "{what} no longer exists: its expiry passed (the claim controller deletes it then, and its Sandbox \
                 with it) or it was deleted. Acquire a new sandbox."
            )));
        }
        Err(GaveUp::Final(KubeError::NotOwned(_))) => {
            return Ok(ResumeOutcome::Expired(format!(
                "{what} is not this installation's object (it was replaced, or the lease never named one of ours): \
                 the lease's sandbox is gone and another object holds its name. Acquire a new sandbox."
            )));
        }
        Err(g) => return Err(g.into_error(&format!("get {what}"))),
    };
    let uid = object::uid(&claim).unwrap_or("").to_string();
    if !lease.workload_uid.is_empty() && uid != lease.workload_uid {
        return Ok(ResumeOutcome::Expired(format!(
            "{what} was replaced: the claim under that name now has uid {uid}, the lease's had uid {}. Its Sandbox is \
             not this lease's; destroy this lease and acquire a new sandbox.",
            lease.workload_uid
        )));
    }
    match claim_state(&claim) {
        ClaimState::Deleting => {
            return Ok(ResumeOutcome::Expired(format!("{what} is being deleted; acquire a new sandbox.")));
        }
        ClaimState::Failed(f) if f.ends_sandbox() => return Ok(ResumeOutcome::Expired(f.message)),
        ClaimState::Failed(f) => return Err(f.into_error()),
        ClaimState::Ready { .. } | ClaimState::Starting(_) => {}
    }
    if let Some(why) = sandbox_lost(&claim, &what, recorded_sandbox_name(lease).as_deref()) {
        return Ok(ResumeOutcome::Expired(why));
    }

    let mut metadata = LeaseMetadata::parse_lenient(&lease.metadata);
    let recorded = metadata.sandbox.as_ref().map(|s| s.uid.clone());
    let target = ClaimTarget {
        namespace: &id.namespace,
        name: &id.name,
        resource: &resource,
        uid: &uid,
        sandbox_uid: recorded.as_deref(),
    };
    let claimed = match wait_claimed(kube, clock, log, &target, claim, deadline) {
        Ok(claimed) => claimed,
        Err(WaitError::Failed(f)) if f.ends_sandbox() => return Ok(ResumeOutcome::Expired(f.message)),
        Err(WaitError::Failed(f)) => return Err(f.into_error()),
        Err(WaitError::Api(e)) => return Err(e),
        Err(WaitError::Timeout(why)) => {
            return Err(ProviderError::timeout(format!(
                "could not tell whether {what} can be resumed: its sandbox was not ready within {wait_seconds} s \
                 ({why}). Retry resume-check, or destroy the lease and acquire a new sandbox."
            )));
        }
    };
    note_replaced_pod(log, &what, lease, &claimed.pod, &mut metadata);
    let expires_at = expiry_of(&claimed.claim).or(lease.expires_at);
    metadata.sandbox = Some(claimed.sandbox.clone());
    metadata.container = container::record(&claimed.pod);
    Ok(ResumeOutcome::Resumable(Lease {
        claimed_sandbox: Some(claimed.sandbox),
        api_version: resource.api_version(),
        workload_uid: uid,
        pod_name: Some(claimed.pod.name),
        pod_uid: Some(claimed.pod.uid).filter(|u| !u.is_empty()),
        pod_ip: claimed.pod.ip,
        expires_at,
        metadata: metadata.to_json(),
        ..lease.clone()
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::Provider;
    use crate::fake_kube::{FakeClock, FakeKube, MemoryLog, Verb};
    use crate::testkit::{Env, NS, claim_config, request, stored};

    fn acquired(env: &Env, id: &str) -> (Provider<FakeKube, FakeClock, MemoryLog>, LeaseRef) {
        env.with_pool(2);
        let provider = env.provider();
        let config = claim_config(json!({}));
        let lease = provider.acquire(request(&config, id)).unwrap();
        (provider, stored(&lease, &config))
    }

    fn expired_reason(outcome: ResumeOutcome) -> String {
        match outcome {
            ResumeOutcome::Expired(reason) => reason,
            ResumeOutcome::Resumable(lease) => panic!("resumable: {lease:?}"),
        }
    }

    fn resumable(outcome: ResumeOutcome) -> Lease {
        match outcome {
            ResumeOutcome::Resumable(lease) => lease,
            ResumeOutcome::Expired(reason) => panic!("expired: {reason}"),
        }
    }

    fn sandbox_of(lease: &Lease) -> String {
        LeaseMetadata::parse_lenient(&lease.metadata).sandbox.expect("recorded").name
    }

    #[test]
    fn a_live_claim_is_resumable_with_the_same_sandbox_and_pod() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, "r-1");
        let fresh = resumable(provider.resume_check(lease.clone()).unwrap());
        assert_eq!(
            (fresh.pod_uid.clone(), fresh.workload_uid.clone()),
            (lease.lease.pod_uid.clone(), lease.lease.workload_uid.clone())
        );
        assert_eq!(fresh.expires_at, lease.lease.expires_at);
        let (before, after) =
            (LeaseMetadata::parse_lenient(&lease.lease.metadata), LeaseMetadata::parse_lenient(&fresh.metadata));
        assert_eq!(after.sandbox, before.sandbox);
        assert_eq!(after.previous_pod_uid, None);
        assert_eq!(env.kube.count(Verb::Watch, "sandboxclaims"), 1, "a Ready claim is read, not watched again");
    }

    #[test]
    fn resume_check_records_the_container_commands_go_to() {
        let env = Env::new();
        let (provider, mut lease) = acquired(&env, "r-c");
        // A lease from before the container was recorded.
        let mut metadata = LeaseMetadata::parse_lenient(&lease.lease.metadata);
        assert!(metadata.container.take().is_some(), "acquire records it");
        lease.lease.metadata = metadata.to_json();
        let fresh = resumable(provider.resume_check(lease.clone()).unwrap());
        let recorded = LeaseMetadata::parse_lenient(&fresh.metadata).container.expect("recorded");
        assert_eq!((Some(recorded.pod), recorded.name.as_str()), (fresh.pod_name, "main"), "the template's only one");
    }

    #[test]
    fn a_deleted_or_replaced_claim_is_expired() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, "r-2");
        let claim = env.kube.object("sandboxclaims", NS, "pc-r-2").unwrap();
        env.kube.remove("sandboxclaims", NS, "pc-r-2");
        assert!(env.kube.object("sandboxes", NS, &sandbox_of(&lease.lease)).is_none(), "collected with its claim");
        let reason = expired_reason(provider.resume_check(lease.clone()).unwrap());
        assert!(reason.contains("no longer exists") && reason.contains("Acquire a new sandbox"), "{reason}");

        env.kube.put(&crate::api_versions::ClaimVersion::V1beta1.resource(), NS, claim);
        let reason = expired_reason(provider.resume_check(lease).unwrap());
        assert!(reason.contains("was replaced"), "{reason}");
    }

    #[test]
    fn a_deleted_sandbox_is_gone_and_its_replacement_is_not_the_lease_s() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, "r-3");
        env.kube.remove("sandboxes", NS, &sandbox_of(&lease.lease));
        let reason = expired_reason(provider.resume_check(lease.clone()).unwrap());
        assert!(reason.contains("is gone") && reason.contains("Acquire a new sandbox"), "{reason}");
        // The claim controller gave the claim another Sandbox: it starts empty.
        env.clock.advance(Duration::from_secs(2));
        env.kube.settle();
        let reason = expired_reason(provider.resume_check(lease).unwrap());
        assert!(reason.contains("was replaced") && reason.contains("Its disk"), "{reason}");
    }

    #[test]
    fn a_replaced_pod_is_reported_not_hidden() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, "r-4");
        let old = lease.lease.pod_uid.clone().unwrap();
        env.kube.remove("pods", NS, lease.lease.pod_name.as_deref().unwrap());
        let fresh = resumable(provider.resume_check(lease).unwrap());
        assert_ne!(fresh.pod_uid.as_deref(), Some(old.as_str()));
        assert_eq!(LeaseMetadata::parse_lenient(&fresh.metadata).previous_pod_uid, Some(old));
        assert!(env.log_text().contains("the sandbox's pod was replaced"));
    }

    #[test]
    fn the_claim_s_end_reasons_are_expired() {
        for reason in ["ClaimExpired", "SandboxExpired", "SandboxMissing"] {
            let env = Env::new();
            let (provider, lease) = acquired(&env, "r-5");
            env.kube.modify("sandboxclaims", NS, "pc-r-5", |c| {
                c["status"]["conditions"] =
                    json!([{"type": "Ready", "status": "False", "reason": reason, "observedGeneration": 1}]);
            });
            let why = expired_reason(provider.resume_check(lease).unwrap());
            assert!(why.contains("SandboxClaim sandboxes/pc-r-5") || why.contains(reason), "{reason}: {why}");
        }
    }

    #[test]
    fn an_api_failure_is_an_error_and_a_foreign_object_expired() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, "r-6");
        let busy = KubeError::Unavailable { message: "etcd".into(), retry_after_seconds: Some(2) };
        env.kube.fail_always(Verb::Get, "sandboxclaims", busy);
        let err = provider.resume_check(lease.clone()).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{err}");
        env.kube.clear_faults();
        env.kube.fail_always(Verb::Get, "sandboxclaims", KubeError::NotOwned("not created here".into()));
        assert!(expired_reason(provider.resume_check(lease.clone()).unwrap()).contains("not this installation's"));
        env.kube.clear_faults();
        env.kube.serve_claim_versions(&[]);
        assert!(expired_reason(provider.resume_check(lease).unwrap()).contains("no longer serves SandboxClaims"));
    }

    #[test]
    fn the_claim_controller_deletes_an_expired_claim_and_its_sandbox() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, "r-8");
        let sandbox = sandbox_of(&lease.lease);
        env.clock.advance(Duration::from_secs(3601));
        env.kube.settle();
        assert!(env.kube.object("sandboxclaims", NS, "pc-r-8").is_none(), "shutdownPolicy Delete");
        assert!(env.kube.object("sandboxes", NS, &sandbox).is_none(), "garbage collection took the Sandbox");
        assert!(env.kube.object("secrets", NS, "pc-r-8-env").is_none(), "and the Secret");
        assert!(expired_reason(provider.resume_check(lease.clone()).unwrap()).contains("no longer exists"));
        assert!(
            expired_reason(provider.renew(lease, env.clock.now_millis() + 60_000).unwrap())
                .contains("the lease expired")
        );
    }

    #[test]
    fn a_renewed_claim_is_resumable_once_the_controller_saw_its_new_generation() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, "r-7");
        env.clock.advance(Duration::from_secs(1800));
        env.kube.settle();
        let later = env.clock.now_millis() + 3_000_000;
        let renewed = resumable(provider.renew(lease.clone(), later).unwrap());
        let claim = env.kube.object("sandboxclaims", NS, "pc-r-7").unwrap();
        assert_eq!(claim["metadata"]["generation"], 2);
        assert_eq!(claim["spec"]["lifecycle"]["shutdownTime"], crate::rfc3339::format_seconds(later / 1000 * 1000));
        assert_eq!(claim["spec"]["lifecycle"]["shutdownPolicy"], "Delete", "the merge patch kept the policy");
        let fresh = resumable(provider.resume_check(LeaseRef { lease: renewed, ..lease }).unwrap());
        assert_eq!(fresh.expires_at, Some(later / 1000 * 1000));
        env.clock.advance(Duration::from_secs(1900));
        env.kube.settle();
        assert!(env.kube.object("sandboxclaims", NS, "pc-r-7").is_some(), "the old expiry passed, the new one not");
    }
}
