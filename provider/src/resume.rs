//! Resume-check: can a stored lease be used again?
//!
//! Three answers: `resumable` (with the lease refreshed), `expired` with a reason a person can
//! act on, or an error meaning "could not tell". An API failure is never `expired`; only a
//! workload that is gone (404), terminating, finished, expired or replaced by a new object under
//! the same name is. A 410 outside a watch proves nothing, so it is "could not tell" too. A pod
//! replaced under the same Sandbox is reported in the lease (new pod uid, the old one in the
//! metadata). A suspended Sandbox of a reusable lease is resumed once its old pod is gone
//! (`old_pod`) and waited for, within the config's readiness timeout. A claim lease is checked
//! through its claim (`backend::claim::resume`). What differs by backend is the backend's
//! (`backend`); reading and waiting for a Sandbox or Job is here.

use std::time::Duration;

pub use contract::ResumeOutcome;
use serde_json::Value;

use crate::backend;
use crate::clock::{Clock, Deadline};
use crate::config::{self, DEFAULT_READINESS_TIMEOUT_SECONDS};
use crate::errors::ProviderError;
use crate::host_fit;
use crate::kube_api::{Kube, KubeError, ResourceType};
use crate::lease::{Lease, LeaseMetadata, LeaseRef};
use crate::log::Log;
use crate::naming::LeaseId;
use crate::object;
use crate::readiness::{self, Start, Target, WaitError};
use crate::retry::{GaveUp, retry};
use crate::workload_state::{PodInfo, WorkloadKind, expiry_of};

/// What bounds a resume-check's wait, from the lease's recorded config.
pub(crate) struct ResumeWait {
    pub(crate) deadline: Deadline,
    /// The config's readiness timeout, for messages.
    pub(crate) seconds: u32,
    /// Whether the Job may retry its pod (`job.backoffLimit` above 0).
    pub(crate) job_retries: bool,
}

/// Checks a stored lease (see the module docs), through its backend.
pub fn resume_check<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
) -> Result<ResumeOutcome, ProviderError> {
    let id = LeaseId::parse(&lease_ref.lease.provider_lease_id).map_err(|e| ProviderError::rejected(e.to_string()))?;
    // The recorded config only tunes the wait; a lease must stay checkable even if it no
    // longer parses (it may come from an older provider version).
    let (seconds, backoff_limit) = config::parse(&lease_ref.config)
        .map(|c| (c.readiness_timeout_seconds, c.job.backoff_limit))
        .unwrap_or((DEFAULT_READINESS_TIMEOUT_SECONDS, 0));
    let deadline = host_fit::wait_deadline(clock, Duration::from_secs(u64::from(seconds)), Duration::ZERO);
    let wait = ResumeWait { deadline, seconds, job_retries: backoff_limit > 0 };
    backend::steps::<K>(id.backend).resume_check(kube, clock, log, lease_ref, &id, wait)
}

/// A Sandbox or Job as resume-check found it: still the lease's.
pub(crate) struct Found {
    pub(crate) workload: Value,
    pub(crate) uid: String,
    pub(crate) kind: WorkloadKind,
    /// `Sandbox ns/name`, for messages.
    pub(crate) what: String,
}

/// Reads a Sandbox's or Job's workload: `Ok(Err(expired))` when it is gone or another object
/// holds its name, an error when the read failed.
pub(crate) fn read_pod_workload<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    lease_ref: &LeaseRef,
    id: &LeaseId,
    kind: WorkloadKind,
    resource: &ResourceType,
    wait: &ResumeWait,
) -> Result<Result<Found, ResumeOutcome>, ProviderError> {
    let lease = &lease_ref.lease;
    let what = format!("{} {}", kind.as_str(), id.qualified());
    let workload = match retry(clock, wait.deadline, || kube.get(resource, Some(&id.namespace), &id.name)) {
        Ok(w) => w,
        Err(GaveUp::Final(KubeError::NotFound(_))) => {
            return Ok(Err(ResumeOutcome::Expired(format!(
                "{what} no longer exists: its expiry passed or it was deleted. Acquire a new sandbox."
            ))));
        }
        Err(GaveUp::Final(KubeError::NotOwned(_))) => {
            return Ok(Err(ResumeOutcome::Expired(format!(
                "{what} is not this installation's object (it was replaced, or the lease never named one of \
                 ours): the lease's sandbox is gone and another object holds its name. Acquire a new sandbox."
            ))));
        }
        Err(g) => return Err(g.into_error(&format!("get {what}"))),
    };
    let uid = object::uid(&workload).unwrap_or("").to_string();
    if !lease.workload_uid.is_empty() && uid != lease.workload_uid {
        return Ok(Err(ResumeOutcome::Expired(format!(
            "{what} was replaced: the object under that name now has uid {uid}, the lease's had uid {}. Its disk \
             and processes are not this lease's; destroy this lease and acquire a new sandbox.",
            lease.workload_uid
        ))));
    }
    Ok(Ok(Found { workload, uid, kind, what }))
}

/// Waits until a found Sandbox's or Job's pod is ready, from where its backend's `start` says
/// (which reads the workload's state first: `Ok(Err(expired))` ends the check there), and
/// returns the refreshed lease.
#[allow(clippy::too_many_arguments)]
pub(crate) fn wait_pod_workload<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
    id: &LeaseId,
    resource: &ResourceType,
    found: &Found,
    wait: &ResumeWait,
    start: impl FnOnce(&Target<'_>) -> Result<Result<Start, ResumeOutcome>, ProviderError>,
) -> Result<ResumeOutcome, ProviderError> {
    let lease = &lease_ref.lease;
    let what = &found.what;
    let target = Target {
        kind: found.kind,
        namespace: &id.namespace,
        name: &id.name,
        resource,
        uid: &found.uid,
        // The lease's Secret was made at acquire: if it is missing now, nobody will create it.
        secret: None,
        job_retries: wait.job_retries,
    };
    let start = match start(&target)? {
        Ok(start) => start,
        Err(outcome) => return Ok(outcome),
    };
    let pod = match readiness::wait_ready(kube, clock, log, &target, start, wait.deadline) {
        Ok(pod) => pod,
        Err(WaitError::Failed(f)) if f.ends_sandbox() => return Ok(ResumeOutcome::Expired(f.message)),
        Err(WaitError::Failed(f)) => return Err(f.into_error()),
        Err(WaitError::Api(e)) => return Err(e),
        Err(WaitError::Timeout(why)) => {
            return Err(ProviderError::timeout(format!(
                "could not tell whether {what} can be resumed: it was not ready within {} s ({why}). \
                 Retry resume-check, or destroy the lease and acquire a new sandbox.",
                wait.seconds
            )));
        }
    };

    let mut metadata = LeaseMetadata::parse_lenient(&lease.metadata);
    note_replaced_pod(log, what, lease, &pod, &mut metadata);
    Ok(ResumeOutcome::Resumable(Lease {
        api_version: resource.api_version(),
        workload_uid: found.uid.clone(),
        pod_name: Some(pod.name),
        pod_uid: Some(pod.uid).filter(|u| !u.is_empty()),
        pod_ip: pod.ip,
        expires_at: expiry_of(&found.workload).or(lease.expires_at),
        metadata: metadata.to_json(),
        ..lease.clone()
    }))
}

/// Reports a pod replaced since the lease last saw it (same name, new uid: its processes and
/// emptyDir files are gone) in the log and, as `previous-pod-uid`, in the metadata.
pub(crate) fn note_replaced_pod(log: &dyn Log, what: &str, lease: &Lease, pod: &PodInfo, metadata: &mut LeaseMetadata) {
    if let Some(old) = lease.pod_uid.as_deref().filter(|old| !pod.uid.is_empty() && *old != pod.uid) {
        log.warn(
            "the sandbox's pod was replaced: processes and emptyDir files of the old pod are gone",
            &[("sandbox", what), ("old_pod_uid", old), ("new_pod_uid", &pod.uid)],
        );
        metadata.previous_pod_uid = Some(old.to_string());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::Provider;
    use crate::acquire::AcquireRequest;
    use crate::fake_kube::{FakeClock, FakeKube, MemoryLog, PodBehaviour, Verb};
    use crate::testkit::{Env, NS, config, config_with, request, stored};

    fn acquired(env: &Env, config: &str, id: &str) -> (Provider<FakeKube, FakeClock, MemoryLog>, LeaseRef) {
        let provider = env.provider();
        let lease = provider.acquire(request(config, id)).unwrap();
        (provider, stored(&lease, config))
    }

    fn expired_reason(outcome: ResumeOutcome) -> String {
        match outcome {
            ResumeOutcome::Expired(reason) => reason,
            ResumeOutcome::Resumable(lease) => panic!("resumable: {lease:?}"),
        }
    }

    #[test]
    fn a_live_sandbox_is_resumable_with_the_same_pod() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-1");
        match provider.resume_check(lease.clone()).unwrap() {
            ResumeOutcome::Resumable(fresh) => {
                assert_eq!(fresh.pod_uid, lease.lease.pod_uid);
                assert_eq!(fresh.expires_at, lease.lease.expires_at);
                assert_eq!(LeaseMetadata::parse_lenient(&fresh.metadata).previous_pod_uid, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_ready_sandbox_is_read_once_and_its_pods_listed_once() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-reads");
        let (gets, lists) = (env.kube.count(Verb::Get, "sandboxes"), env.kube.count(Verb::List, "pods"));
        assert!(matches!(provider.resume_check(lease).unwrap(), ResumeOutcome::Resumable(_)));
        assert_eq!(env.kube.count(Verb::Get, "sandboxes") - gets, 1, "the Sandbox read Ready is not read again");
        assert_eq!(env.kube.count(Verb::List, "pods") - lists, 1);
        assert_eq!(env.kube.count(Verb::Watch, "sandboxes") + env.kube.count(Verb::Watch, "pods"), 1, "acquire's only");
    }

    #[test]
    fn a_live_job_is_resumable() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("job"), "r-2");
        assert!(matches!(provider.resume_check(lease).unwrap(), ResumeOutcome::Resumable(_)));
    }

    #[test]
    fn gone_is_expired() {
        for backend in ["sandbox", "job"] {
            let env = Env::new();
            let (provider, lease) = acquired(&env, &config(backend), "r-3");
            env.kube.remove(if backend == "job" { "jobs" } else { "sandboxes" }, NS, "pc-r-3");
            let reason = expired_reason(provider.resume_check(lease).unwrap());
            assert!(reason.contains("no longer exists") && reason.contains("Acquire a new sandbox"), "{reason}");
        }
    }

    #[test]
    fn an_api_failure_is_an_error_never_expired() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-4");
        env.kube.fail_always(
            Verb::Get,
            "sandboxes",
            KubeError::Unavailable { message: "etcd".into(), retry_after_seconds: Some(2) },
        );
        let err = provider.resume_check(lease.clone()).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true));
        env.kube.clear_faults();
        env.kube.fail(Verb::ServedVersions, "agents.x-k8s.io", 1, KubeError::Transport("reset".into()));
        assert_eq!(provider.resume_check(lease).unwrap_err().kind(), "unavailable");
    }

    #[test]
    fn a_transient_read_failure_is_asked_again_not_answered() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-4d");
        env.kube.fail(Verb::Get, "sandboxes", 1, KubeError::Other { code: 500, message: "etcd".into() });
        env.kube.fail(Verb::List, "pods", 1, KubeError::Timeout("slow".into()));
        assert!(matches!(provider.resume_check(lease).unwrap(), ResumeOutcome::Resumable(_)));
    }

    #[test]
    fn an_object_this_installation_did_not_create_is_expired_for_every_lease_call() {
        let env = Env::new();
        let config = config("sandbox");
        let (provider, lease) = acquired(&env, &config, "r-4d");
        let not_owned = || KubeError::NotOwned("not created by this installation".into());
        env.kube.fail_always(Verb::Get, "sandboxes", not_owned());
        env.kube.fail_always(Verb::Delete, "sandboxes", not_owned());
        let reason = expired_reason(provider.resume_check(lease.clone()).unwrap());
        assert!(reason.contains("not this installation's object"), "{reason}");
        let renewed = provider.renew(lease.clone(), crate::testkit::NOW + 600_000).unwrap();
        assert!(expired_reason(renewed).contains("not this installation's object"));
        let report = provider.destroy(lease).unwrap();
        let sandbox = report.objects.iter().find(|o| o.kind == "Sandbox").unwrap();
        assert_eq!(sandbox.outcome, crate::DeleteOutcome::AlreadyGone, "the lease's own object is gone");
        assert!(env.kube.object("sandboxes", NS, "pc-r-4d").is_some(), "the object under the name is left alone");
    }

    #[test]
    fn a_410_is_an_error_never_expired() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-4b");
        env.kube.fail_always(Verb::Get, "sandboxes", KubeError::Gone("the resource version is too old".into()));
        let err = provider.resume_check(lease.clone()).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{err}");
        env.kube.clear_faults();

        let config = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
        let reusable = provider.acquire(AcquireRequest { reusable: true, ..request(&config, "r-4c") }).unwrap();
        let reusable = stored(&reusable, &config);
        provider.release(reusable.clone()).unwrap();
        env.kube.fail(Verb::Patch, "sandboxes", 1, KubeError::Gone("the resource version is too old".into()));
        let err = provider.resume_check(reusable).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{err}");
    }

    #[test]
    fn a_terminating_workload_is_expired() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-5");
        env.kube
            .modify("sandboxes", NS, "pc-r-5", |s| s["metadata"]["deletionTimestamp"] = json!("2026-11-30T10:00:00Z"));
        assert!(expired_reason(provider.resume_check(lease).unwrap()).contains("being deleted"));
    }

    #[test]
    fn a_terminal_pod_is_expired() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-6");
        env.kube.modify("pods", NS, "pc-r-6", |p| p["status"]["phase"] = json!("Failed"));
        let reason = expired_reason(provider.resume_check(lease).unwrap());
        assert!(reason.contains("failed and is never recreated"), "{reason}");
    }

    #[test]
    fn an_expired_sandbox_is_expired() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-7");
        env.kube.modify("sandboxes", NS, "pc-r-7", |s| {
            s["status"]["conditions"] = json!([{"type": "Ready", "status": "False", "reason": "SandboxExpired"}]);
        });
        assert!(expired_reason(provider.resume_check(lease).unwrap()).contains("passed its shutdownTime"));
    }

    #[test]
    fn a_sandbox_past_its_shutdown_time_is_gone() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-7b");
        env.clock.advance(Duration::from_secs(3601));
        env.kube.settle();
        assert!(env.kube.object("sandboxes", NS, "pc-r-7b").is_none(), "shutdownPolicy Delete removed it");
        assert!(expired_reason(provider.resume_check(lease).unwrap()).contains("no longer exists"));
    }

    #[test]
    fn a_new_sandbox_under_the_same_name_is_a_replacement() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-8");
        let old = env.kube.object("sandboxes", NS, "pc-r-8").unwrap();
        env.kube.remove("sandboxes", NS, "pc-r-8");
        env.kube.put(&crate::api_versions::SandboxVersion::V1beta1.resource(), NS, old);
        let reason = expired_reason(provider.resume_check(lease).unwrap());
        assert!(reason.contains("was replaced") && reason.contains("Its disk"), "{reason}");
    }

    #[test]
    fn a_replaced_pod_is_reported_not_hidden() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-9");
        let old_uid = lease.lease.pod_uid.clone().unwrap();
        env.kube.remove("pods", NS, "pc-r-9");
        match provider.resume_check(lease).unwrap() {
            ResumeOutcome::Resumable(fresh) => {
                let new_uid = fresh.pod_uid.clone().unwrap();
                assert_ne!(new_uid, old_uid);
                assert_eq!(LeaseMetadata::parse_lenient(&fresh.metadata).previous_pod_uid, Some(old_uid));
                assert!(env.log_text().contains("the sandbox's pod was replaced"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_finished_job_is_expired() {
        for (condition, text) in [("Complete", "completed"), ("Failed", "failed")] {
            let env = Env::new();
            let (provider, lease) = acquired(&env, &config("job"), "r-10");
            env.kube.modify("jobs", NS, "pc-r-10", |j| {
                j["status"]["conditions"] =
                    json!([{"type": condition, "status": "True", "reason": "DeadlineExceeded"}]);
            });
            let reason = expired_reason(provider.resume_check(lease).unwrap());
            assert!(reason.contains(text), "{reason}");
        }
    }

    #[test]
    fn a_suspended_reusable_sandbox_is_resumed_and_waited_for() {
        for version in ["v1beta1", "v1alpha1"] {
            let env = Env::new();
            env.kube.serve_sandbox_versions(&[version]);
            let config = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
            let provider = env.provider();
            let lease = provider.acquire(AcquireRequest { reusable: true, ..request(&config, "r-11") }).unwrap();
            let lease = stored(&lease, &config);
            provider.release(lease.clone()).unwrap();
            let suspended = env.kube.object("sandboxes", NS, "pc-r-11").unwrap();
            assert!(crate::workload_state::sandbox_spec_suspended(&suspended), "{version}");
            assert!(env.kube.object("pods", NS, "pc-r-11").is_none(), "{version}: suspending deletes the pod");
            match provider.resume_check(lease.clone()).unwrap() {
                ResumeOutcome::Resumable(fresh) => {
                    assert_ne!(fresh.pod_uid, lease.lease.pod_uid, "{version}: a new pod");
                    assert!(fresh.pod_ip.is_some());
                }
                other => panic!("{version}: {other:?}"),
            }
            let running = env.kube.object("sandboxes", NS, "pc-r-11").unwrap();
            assert!(!crate::workload_state::sandbox_spec_suspended(&running), "{version}");
        }
    }

    /// Released, with its old pod still terminating.
    fn released_with_its_old_pod_stopping(env: &Env, id: &str) -> (Provider<FakeKube, FakeClock, MemoryLog>, LeaseRef) {
        let config = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
        let provider = env.provider();
        let lease = provider.acquire(AcquireRequest { reusable: true, ..request(&config, id) }).unwrap();
        let lease = stored(&lease, &config);
        provider.release(lease.clone()).unwrap();
        env.old_pod_still_stopping(&format!("pc-{id}"));
        (provider, lease)
    }

    #[test]
    fn a_sandbox_is_resumed_only_once_its_old_pod_is_gone() {
        let env = Env::new();
        let (provider, lease) = released_with_its_old_pod_stopping(&env, "r-15");
        let started = env.clock.monotonic();
        env.kube.schedule_remove(Duration::from_secs(3), "pods", NS, "pc-r-15");
        assert!(matches!(provider.resume_check(lease).unwrap(), ResumeOutcome::Resumable(_)));
        assert!(env.clock.monotonic() - started >= Duration::from_secs(3), "resumed before the old pod was gone");
        assert!(!crate::workload_state::sandbox_spec_suspended(&env.kube.object("sandboxes", NS, "pc-r-15").unwrap()));
    }

    #[test]
    fn an_old_pod_that_outlives_the_wait_leaves_the_sandbox_suspended() {
        let env = Env::new();
        let (provider, lease) = released_with_its_old_pod_stopping(&env, "r-16");
        let patches = env.kube.count(Verb::Patch, "sandboxes");
        let err = provider.resume_check(lease).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("timeout", true));
        assert!(err.message().contains("cannot be resumed yet: its old pod pc-r-16 was still stopping"), "{err}");
        assert_eq!(env.kube.count(Verb::Patch, "sandboxes"), patches, "nothing changed");
        assert!(crate::workload_state::sandbox_spec_suspended(&env.kube.object("sandboxes", NS, "pc-r-16").unwrap()));
    }

    #[test]
    fn a_suspended_ephemeral_sandbox_is_expired() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-12");
        env.kube.modify("sandboxes", NS, "pc-r-12", |s| s["spec"]["operatingMode"] = json!("Suspended"));
        assert!(expired_reason(provider.resume_check(lease).unwrap()).contains("not reusable"));
    }

    #[test]
    fn a_resume_that_cannot_finish_in_time_is_an_error() {
        let env = Env::new();
        let (provider, lease) = acquired(&env, &config("sandbox"), "r-13");
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        env.kube.remove("pods", NS, "pc-r-13");
        let err = provider.resume_check(lease).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("timeout", true));
        assert!(err.message().starts_with("could not tell whether Sandbox sandboxes/pc-r-13 can be resumed"), "{err}");
    }

    #[test]
    fn a_foreign_lease_id_is_refused_and_garbage_config_is_tolerated() {
        let env = Env::new();
        let (provider, mut lease) = acquired(&env, &config("sandbox"), "r-14");
        lease.config = "not json".into();
        lease.lease.metadata = "garbage".into();
        assert!(matches!(provider.resume_check(lease.clone()).unwrap(), ResumeOutcome::Resumable(_)));
        lease.lease.provider_lease_id = "docker:abc".into();
        assert_eq!(provider.resume_check(lease).unwrap_err().kind(), "rejected");
    }
}
