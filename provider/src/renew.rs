//! Renew: move a lease's leak guard with a merge patch (Sandbox `shutdownTime`, SandboxClaim
//! `lifecycle.shutdownTime`, Job `activeDeadlineSeconds`, which counts from the Job's
//! `status.startTime`). The new expiry is
//! capped at now + lease TTL like at acquire. A workload that is gone (404), finished or replaced
//! is an answer (`expired`, with the reason), not an error, as for resume-check (for a claim,
//! also one whose Sandbox is missing or is not the one the lease recorded); any other
//! failure, 410 included, means "could not renew".

use serde_json::Value;

use crate::backend::{self, Ended, Existing, Steps};
use crate::clock::Clock;
use crate::config;
use crate::errors::{FromKube, ProviderError};
use crate::expiry;
use crate::kube_api::{Kube, KubeError, PatchType, ResourceType};
use crate::lease::{Lease, LeaseMetadata, LeaseRef};
use crate::log::Log;
use crate::naming::LeaseId;
use crate::object;
use crate::resume::ResumeOutcome;
use crate::rfc3339;

/// Why a renewal stopped: the lease turned out to be expired (an answer) or a call failed.
enum Stop {
    Expired(String),
    Failed(ProviderError),
}

impl From<ProviderError> for Stop {
    fn from(e: ProviderError) -> Self {
        Stop::Failed(e)
    }
}

/// Why a lease whose name another object holds is expired.
const NOT_THIS_INSTALLATIONS: &str = "is not this installation's object (it was replaced, or the lease never named one of ours): the lease's \
     sandbox is gone and another object holds its name";

fn expired(what: &str, why: &str) -> Stop {
    Stop::Expired(format!("cannot renew: {what} {why}; the lease expired. Acquire a new sandbox."))
}

/// Reads the workload and refuses one that is not this lease's live sandbox.
fn live_workload<K: Kube>(
    kube: &K,
    steps: &dyn Steps<K>,
    resource: &ResourceType,
    id: &LeaseId,
    lease: &Lease,
    what: &str,
) -> Result<Value, Stop> {
    let workload = match kube.get(resource, Some(&id.namespace), &id.name) {
        Ok(w) => w,
        Err(KubeError::NotFound(_)) => {
            return Err(expired(what, "no longer exists (its expiry passed or it was deleted)"));
        }
        Err(KubeError::NotOwned(_)) => return Err(expired(what, NOT_THIS_INSTALLATIONS)),
        Err(e) => return Err(ProviderError::from_kube(&e, &format!("get {what}")).into()),
    };
    let uid = object::uid(&workload).unwrap_or("");
    if !lease.workload_uid.is_empty() && uid != lease.workload_uid {
        return Err(expired(
            what,
            &format!("was replaced by a new object (uid {uid}, the lease's is {})", lease.workload_uid),
        ));
    }
    match steps.ended(&workload, lease, what) {
        Some(Ended::Because(why)) => Err(expired(what, &why)),
        Some(Ended::Reason(why)) => Err(Stop::Expired(format!("cannot renew: {why}"))),
        None => Ok(workload),
    }
}

/// Moves the lease's expiry to `requested` (capped at now + TTL): the refreshed lease, or
/// `expired` when the workload is gone, finished or replaced. An error means "could not renew".
pub fn renew<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
    requested: i64,
) -> Result<ResumeOutcome, ProviderError> {
    match try_renew(kube, clock, log, lease_ref, requested) {
        Ok(lease) => Ok(ResumeOutcome::Resumable(lease)),
        Err(Stop::Expired(reason)) => Ok(ResumeOutcome::Expired(reason)),
        Err(Stop::Failed(e)) => Err(e),
    }
}

fn try_renew<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
    requested: i64,
) -> Result<Lease, Stop> {
    let lease = &lease_ref.lease;
    let id = LeaseId::parse(&lease.provider_lease_id).map_err(|e| ProviderError::rejected(e.to_string()))?;
    let config = config::parse(&lease_ref.config)?;
    let now = clock.now_millis();
    let Some(expiry) = expiry::lease_expiry(now, config.lease_ttl_seconds, Some(requested)) else {
        return Err(ProviderError::rejected(format!(
            "the new expiry ({}) is not at least a second in the future; to end the lease, release or destroy it.",
            rfc3339::format_seconds(requested)
        ))
        .into());
    };

    let steps = backend::steps::<K>(id.backend);
    let what = format!("{} {}", steps.kind(), id.qualified());
    let resource = match steps.existing(kube, lease)? {
        Existing::Served(resource) => resource,
        Existing::NotServed(api) => return Err(expired(&what, &format!("cannot exist: {api} is no longer served"))),
    };
    let workload = live_workload(kube, steps, &resource, &id, lease, &what)?;
    let (patch, new_expiry) = steps.renew_patch(&workload, expiry, now);
    let patched = match kube.patch(&resource, Some(&id.namespace), &id.name, PatchType::Merge, &patch, None) {
        Ok(p) => p,
        Err(KubeError::NotFound(_)) => {
            return Err(expired(&what, "was deleted while renewing it"));
        }
        Err(KubeError::NotOwned(_)) => return Err(expired(&what, NOT_THIS_INSTALLATIONS)),
        Err(e) => return Err(ProviderError::from_kube(&e, &format!("renew {what}")).into()),
    };
    if !lease.workload_uid.is_empty() && object::uid(&patched) != Some(lease.workload_uid.as_str()) {
        return Err(expired(&what, "was replaced by a new object while renewing it"));
    }
    log.info("lease renewed", &[("workload", &what), ("expires_at", &rfc3339::format_seconds(new_expiry))]);
    let mut metadata = LeaseMetadata::parse_lenient(&lease.metadata);
    metadata.renewed_at = Some(now);
    Ok(Lease { expires_at: Some(new_expiry), metadata: metadata.to_json(), ..lease.clone() })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::backend::claim::state::{ClaimState, claim_state};
    use crate::fake_kube::{FakeClock, FakeKube, MemoryLog, Verb};
    use crate::testkit::{Env, NOW, NS, config, request, stored};

    fn resumable(outcome: ResumeOutcome) -> Lease {
        match outcome {
            ResumeOutcome::Resumable(lease) => lease,
            ResumeOutcome::Expired(why) => panic!("expected a renewed lease, got expired: {why}"),
        }
    }

    fn expired_reason(outcome: ResumeOutcome) -> String {
        match outcome {
            ResumeOutcome::Expired(why) => why,
            ResumeOutcome::Resumable(lease) => panic!("expected expired, got {lease:?}"),
        }
    }

    #[test]
    fn renewing_a_sandbox_moves_shutdown_time_capped_by_the_ttl() {
        let env = Env::new();
        let provider = env.provider();
        let config = config("sandbox");
        let lease = stored(&provider.acquire(request(&config, "n-1")).unwrap(), &config);
        env.clock.advance(Duration::from_secs(600));
        let now = NOW + 601_010;
        let renewed = resumable(provider.renew(lease.clone(), now + 1_800_000).unwrap());
        let expected = (now + 1_800_000) / 1000 * 1000;
        assert_eq!(renewed.expires_at, Some(expected));
        let sandbox = env.kube.object("sandboxes", NS, "pc-n-1").unwrap();
        assert_eq!(sandbox["spec"]["shutdownTime"], rfc3339::format_seconds(expected));
        assert!(LeaseMetadata::parse_lenient(&renewed.metadata).renewed_at.is_some());

        let capped = resumable(provider.renew(lease, now + 10 * 3_600_000).unwrap());
        assert_eq!(capped.expires_at, Some((now + 3_600_000) / 1000 * 1000), "at most now + leaseTtlSeconds");
    }

    #[test]
    fn renewing_a_job_counts_from_its_start_time() {
        let env = Env::new();
        let provider = env.provider();
        let config = config("job");
        let lease = stored(&provider.acquire(request(&config, "n-2")).unwrap(), &config);
        let start =
            rfc3339::parse(env.kube.object("jobs", NS, "pc-n-2").unwrap()["status"]["startTime"].as_str().unwrap())
                .unwrap();
        env.clock.advance(Duration::from_secs(1200));
        let renewed = resumable(provider.renew(lease, NOW + 2_000_000).unwrap());
        let job = env.kube.object("jobs", NS, "pc-n-2").unwrap();
        let seconds = (NOW + 2_000_000 - start) / 1000;
        assert_eq!(job["spec"]["activeDeadlineSeconds"], seconds);
        assert_eq!(renewed.expires_at, Some(start + seconds * 1000));
        assert!(renewed.expires_at.unwrap() <= NOW + 2_000_000, "never later than asked");
    }

    #[test]
    fn a_gone_or_finished_workload_cannot_be_renewed() {
        let env = Env::new();
        let provider = env.provider();
        let config = config("sandbox");
        let lease = stored(&provider.acquire(request(&config, "n-3")).unwrap(), &config);
        env.kube.remove("sandboxes", NS, "pc-n-3");
        let why = expired_reason(provider.renew(lease, NOW + 100_000).unwrap());
        assert!(why.contains("the lease expired"), "{why}");

        let config = crate::testkit::config("job");
        let lease = stored(&provider.acquire(request(&config, "n-4")).unwrap(), &config);
        env.kube.modify("jobs", NS, "pc-n-4", |j| {
            j["status"]["conditions"] = json!([{"type": "Complete", "status": "True"}])
        });
        let why = expired_reason(provider.renew(lease, NOW + 100_000).unwrap());
        assert!(why.contains("has ended") && why.contains("the lease expired"), "{why}");
    }

    /// A claim lease on a warm pool, and the name of the Sandbox it recorded.
    fn claimed(env: &Env, id: &str) -> (crate::Provider<FakeKube, FakeClock, MemoryLog>, LeaseRef, String) {
        env.with_pool(2);
        let provider = env.provider();
        let config = crate::testkit::claim_config(json!({}));
        let lease = stored(&provider.acquire(request(&config, id)).unwrap(), &config);
        let sandbox = lease.lease.claimed_sandbox.clone().expect("a claim lease records its Sandbox").name;
        (provider, lease, sandbox)
    }

    fn shutdown_time(env: &Env, claim: &str) -> Value {
        env.kube.object("sandboxclaims", NS, claim).unwrap()["spec"]["lifecycle"]["shutdownTime"].clone()
    }

    #[test]
    fn a_claim_whose_sandbox_was_deleted_is_expired_not_renewed() {
        let env = Env::new();
        let (provider, lease, sandbox) = claimed(&env, "n-7");
        env.kube.remove("sandboxes", NS, &sandbox);
        // What the claim controller says until it makes another, empty Sandbox.
        env.kube.modify("sandboxclaims", NS, "pc-n-7", |c| {
            c["status"]["conditions"] = json!([{"type": "Ready", "status": "False", "reason": "SandboxMissing",
                                                "message": "sandbox not found", "observedGeneration": 1}]);
        });
        let before = shutdown_time(&env, "pc-n-7");
        let why = expired_reason(provider.renew(lease.clone(), NOW + 100_000).unwrap());
        assert!(why.contains("sandbox was lost") && why.contains("acquire a new sandbox"), "{why}");
        assert_eq!(shutdown_time(&env, "pc-n-7"), before, "nothing patched");
        assert_eq!(env.kube.count(Verb::Patch, "sandboxclaims"), 0);
        assert!(matches!(provider.resume_check(lease).unwrap(), ResumeOutcome::Expired(_)), "resume-check agrees");
    }

    #[test]
    fn a_claim_that_names_another_sandbox_is_expired_not_renewed() {
        let env = Env::new();
        let (provider, lease, sandbox) = claimed(&env, "n-8");
        env.kube.remove("sandboxes", NS, &sandbox);
        // The claim controller gives the claim another Sandbox, which becomes Ready.
        env.clock.advance(Duration::from_secs(2));
        env.kube.settle();
        let claim = env.kube.object("sandboxclaims", NS, "pc-n-8").unwrap();
        let now_named = claim["status"]["sandbox"]["name"].as_str().unwrap().to_string();
        assert_ne!(now_named, sandbox);
        assert_eq!(claim_state(&claim), ClaimState::Ready { sandbox: now_named.clone() });
        let before = shutdown_time(&env, "pc-n-8");
        let why = expired_reason(provider.renew(lease.clone(), env.clock.now_millis() + 100_000).unwrap());
        assert!(why.contains("sandbox was lost") && why.contains("acquire a new sandbox"), "{why}");
        assert!(why.contains(&now_named) && why.contains(&sandbox), "{why}");
        assert_eq!(shutdown_time(&env, "pc-n-8"), before, "nothing patched");
        assert!(matches!(provider.resume_check(lease).unwrap(), ResumeOutcome::Expired(_)), "resume-check agrees");
    }

    #[test]
    fn a_past_expiry_is_refused_and_api_failures_are_errors() {
        let env = Env::new();
        let provider = env.provider();
        let config = config("sandbox");
        let lease = stored(&provider.acquire(request(&config, "n-5")).unwrap(), &config);
        let err = provider.renew(lease.clone(), NOW).unwrap_err();
        assert!(err.message().contains("release or destroy"), "{err}");
        env.kube.fail(crate::fake_kube::Verb::Patch, "sandboxes", 1, KubeError::Timeout("slow".into()));
        assert_eq!(provider.renew(lease, NOW + 100_000).unwrap_err().kind(), "timeout");
    }

    #[test]
    fn a_410_is_an_error_never_expired() {
        for verb in [Verb::Get, Verb::Patch] {
            let env = Env::new();
            let provider = env.provider();
            let config = config("sandbox");
            let lease = stored(&provider.acquire(request(&config, "n-6")).unwrap(), &config);
            env.kube.fail(verb, "sandboxes", 1, KubeError::Gone("the resource version is too old".into()));
            let err = provider.renew(lease.clone(), NOW + 100_000).unwrap_err();
            assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{verb:?}: {err}");
            resumable(provider.renew(lease, NOW + 100_000).unwrap());
        }
    }
}
