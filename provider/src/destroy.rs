//! Destroy: delete everything a lease can own, from the lease id alone.
//!
//! Total and idempotent: the per-lease Secret, for a lease with a persistent workspace its claim,
//! and the workload (with Background propagation, so its pods go too). A lease that records its
//! workload's uid destroys only that workload (the uid is the delete's precondition), and leaves
//! alone a newer object that took the name and the Secret and claim that are that object's. Only 404 is success
//! (already gone): a 410 outside a watch says nothing about the object, so it is a failure like
//! any other. An object under the lease's name that the host refuses as not this
//! installation's means the lease's own object is gone: already gone, and the other one is left
//! alone. Every delete is attempted even when one fails; the report says what happened to
//! each object, and the call fails only if something could not be deleted. Lease metadata is
//! never read for a Sandbox or Job lease, so missing or garbage metadata changes nothing; a
//! claim lease (`backend::claim::destroy`) reads it only as a hint to its Sandbox's name, which it never
//! deletes by name.

pub use contract::{DeleteOutcome, DestroyReport, ObjectReport};

use crate::api_versions;
use crate::backend::{self, Existing, Steps};
use crate::errors::{FromKube, ProviderError};
use crate::kube_api::{DeleteOptions, Kube, KubeError, Propagation, ResourceType};
use crate::lease::{Lease, LeaseRef};
use crate::log::Log;
use crate::naming::{LeaseId, secret_name, workspace_pvc_name};
use crate::object;

/// Deletes one object: `Ok(true)` deleted, `Ok(false)` already gone. An object under the name
/// that the host says this installation did not create is not the lease's: the lease's object
/// is gone, and the foreign one is left alone. With `uid`, only that object is deleted: another
/// under the name (the precondition fails, 409) means the lease's is gone.
pub(crate) fn delete<K: Kube>(
    kube: &K,
    resource: &ResourceType,
    namespace: &str,
    name: &str,
    uid: Option<&str>,
) -> Result<bool, KubeError> {
    let options = DeleteOptions {
        propagation: Some(Propagation::Background),
        precondition_uid: uid.map(str::to_string),
        ..Default::default()
    };
    match kube.delete(resource, Some(namespace), name, &options) {
        Ok(()) => Ok(true),
        Err(KubeError::NotFound(_) | KubeError::NotOwned(_)) => Ok(false),
        Err(KubeError::Conflict(_)) if uid.is_some() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Who holds the lease's workload name now, when the lease knows its workload's uid.
enum Holder {
    /// The lease's own workload, or no workload at all: its dependents are the lease's.
    Lease,
    /// Another object (a newer sandbox of this acquisition, or someone else's): its Secret
    /// and claim are its own, and nothing of the lease's is left.
    Another,
}

/// Reads who holds the name; the lease's uid is then the precondition of the workload's delete.
fn holder<K: Kube>(kube: &K, id: &LeaseId, steps: &dyn Steps<K>, lease: &Lease) -> Result<Holder, KubeError> {
    let resource = match steps.existing(kube, lease) {
        Ok(Existing::Served(resource)) => resource,
        Ok(Existing::NotServed(_)) => return Ok(Holder::Lease),
        Err(e) => {
            return Err(KubeError::Unavailable { message: e.message().to_string(), retry_after_seconds: None });
        }
    };
    match kube.get(&resource, Some(&id.namespace), &id.name) {
        Ok(found) if object::uid(&found) == Some(lease.workload_uid.as_str()) => Ok(Holder::Lease),
        Ok(_) | Err(KubeError::NotOwned(_)) => Ok(Holder::Another),
        Err(KubeError::NotFound(_)) => Ok(Holder::Lease),
        Err(e) => Err(e),
    }
}

/// Deletes everything the lease can own (see the module docs), through its backend.
pub fn destroy<K: Kube>(kube: &K, log: &dyn Log, lease_ref: &LeaseRef) -> Result<DestroyReport, ProviderError> {
    let id = LeaseId::parse(&lease_ref.lease.provider_lease_id).map_err(|e| ProviderError::rejected(e.to_string()))?;
    backend::steps::<K>(id.backend).destroy(kube, log, &id, &lease_ref.lease)
}

/// Destroys a Sandbox or Job lease: its Secret, its workspace claim, and its workload, which
/// `delete_workload` deletes (with the lease's workload uid as precondition when it has one).
pub(crate) fn pod_workload<K: Kube>(
    kube: &K,
    log: &dyn Log,
    steps: &dyn Steps<K>,
    id: &LeaseId,
    lease: &Lease,
    delete_workload: impl FnOnce(Option<&str>) -> Result<bool, KubeError>,
) -> Result<DestroyReport, ProviderError> {
    let secret = secret_name(&id.name);
    let pvc = id.workspace_pvc.then(|| workspace_pvc_name(&id.name));
    let workload_kind = steps.kind();
    // A lease that knows its workload's uid deletes only that workload, and its Secret and claim
    // only while the name is still its own: a newer sandbox under the name keeps what is its.
    let uid = Some(lease.workload_uid.as_str()).filter(|u| !u.is_empty());
    let holder = match uid {
        Some(_) => holder(kube, id, steps, lease),
        None => Ok(Holder::Lease),
    };
    let mut attempts: Vec<Attempt<'_>> = Vec::new();
    match holder {
        Err(e) => {
            attempts.push(("Secret", secret, Err(e.clone())));
            if let Some(pvc) = pvc {
                attempts.push(("PersistentVolumeClaim", pvc, Err(e.clone())));
            }
            attempts.push((workload_kind, id.name.clone(), Err(e)));
        }
        Ok(Holder::Another) => {
            log.info(
                "the lease's workload is gone and another object holds its name; it is left alone",
                &[("workload", &format!("{workload_kind} {}", id.qualified()))],
            );
            attempts.push(("Secret", secret, Ok(false)));
            if let Some(pvc) = pvc {
                attempts.push(("PersistentVolumeClaim", pvc, Ok(false)));
            }
            attempts.push((workload_kind, id.name.clone(), Ok(false)));
        }
        Ok(Holder::Lease) => {
            // The Secret first: it is owned by the workload, so deleting the workload first would
            // let garbage collection race the explicit delete and make the report vary.
            let deleted = delete(kube, &api_versions::secrets(), &id.namespace, &secret, None);
            attempts.push(("Secret", secret.clone(), deleted));
            // The workspace claim before its Sandbox: agent-sandbox made it, so the host proves it
            // is this installation's through its controller, the Sandbox, which must still exist.
            if let Some(pvc) = pvc {
                let deleted = delete(kube, &api_versions::pvcs(), &id.namespace, &pvc, None);
                attempts.push(("PersistentVolumeClaim", pvc, deleted));
            }
            attempts.push((workload_kind, id.name.clone(), delete_workload(uid)));
        }
    }
    report(log, id, attempts)
}

/// One object's delete: `Ok(true)` deleted, `Ok(false)` already gone, or why it failed.
pub(crate) type Attempt<'a> = (&'a str, String, Result<bool, KubeError>);

/// The report of every attempt, logged one by one; an error that names every outcome when one
/// failed (the first failure classifies it).
pub(crate) fn report(log: &dyn Log, id: &LeaseId, attempts: Vec<Attempt<'_>>) -> Result<DestroyReport, ProviderError> {
    let mut objects = Vec::new();
    let mut failure: Option<KubeError> = None;
    let mut summary = Vec::new();
    for (kind, name, result) in attempts {
        let outcome = match result {
            Ok(true) => DeleteOutcome::Deleted,
            Ok(false) => DeleteOutcome::AlreadyGone,
            Err(e) => {
                let text = e.to_string();
                failure.get_or_insert(e);
                DeleteOutcome::Failed(text)
            }
        };
        let shown = match &outcome {
            DeleteOutcome::Deleted => "deleted".to_string(),
            DeleteOutcome::AlreadyGone => "already gone".to_string(),
            DeleteOutcome::Failed(why) => format!("failed: {why}"),
        };
        log.info("destroy", &[("object", &format!("{kind} {}/{name}", id.namespace)), ("outcome", &shown)]);
        summary.push(format!("{kind} {}/{name} {shown}", id.namespace));
        objects.push(ObjectReport { kind: kind.to_string(), name, outcome });
    }
    match failure {
        None => Ok(DestroyReport { objects }),
        Some(first) => Err(ProviderError::from_kube(&first, "destroy").map_message(|_| {
            format!(
                "destroy of lease {id} could not delete everything: {}. Retry destroy (it is idempotent); until then \
                 the cluster deletes the workload at the lease's expiry.",
                summary.join("; ")
            )
        })),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Backend;
    use crate::fake_kube::Verb;
    use crate::testkit::{Env, NS, bare_lease, config, request, stored};

    fn outcomes(report: &DestroyReport) -> Vec<(String, DeleteOutcome)> {
        report.objects.iter().map(|o| (format!("{}/{}", o.kind, o.name), o.outcome.clone())).collect()
    }

    #[test]
    fn destroy_works_from_the_lease_id_alone_and_twice() {
        for (backend, kind) in [("sandbox", "Sandbox"), ("job", "Job")] {
            let env = Env::new();
            let provider = env.provider();
            let lease = provider.acquire(request(&config(backend), "d-1")).unwrap();
            let report = provider.destroy(bare_lease(Backend::Job, &lease.provider_lease_id)).unwrap();
            assert_eq!(
                outcomes(&report),
                vec![
                    ("Secret/pc-d-1-env".into(), DeleteOutcome::Deleted),
                    (format!("{kind}/pc-d-1"), DeleteOutcome::Deleted)
                ]
            );
            assert!(env.kube.names_in(NS).is_empty(), "{backend}: {:?}", env.kube.names_in(NS));
            let again = provider.destroy(bare_lease(Backend::Job, &lease.provider_lease_id)).unwrap();
            assert!(again.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{again:?}");
        }
    }

    #[test]
    fn deletes_use_background_propagation() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config("job"), "d-2")).unwrap();
        provider.destroy(bare_lease(Backend::Job, &lease.provider_lease_id)).unwrap();
        assert!(env.kube.object("pods", NS, lease.pod_name.as_deref().unwrap()).is_none(), "pods collected");
    }

    #[test]
    fn every_delete_is_attempted_and_failures_are_reported_together() {
        let env = Env::new();
        let provider = env.provider();
        let config = config("sandbox");
        let lease = provider.acquire(request(&config, "d-3")).unwrap();
        env.kube.fail_always(
            Verb::Delete,
            "sandboxes",
            KubeError::Unavailable { message: "etcd".into(), retry_after_seconds: None },
        );
        let err = provider.destroy(stored(&lease, &config)).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true));
        assert!(err.message().contains("Sandbox sandboxes/pc-d-3 failed"), "{err}");
        assert!(err.message().contains("Secret sandboxes/pc-d-3-env deleted"), "{err}");
        assert!(env.kube.object("secrets", NS, "pc-d-3-env").is_none(), "the Secret was still deleted");
        env.kube.clear_faults();
        let report = provider.destroy(stored(&lease, &config)).unwrap();
        assert_eq!(report.objects[0].outcome, DeleteOutcome::AlreadyGone, "the Secret went the first time");
        assert_eq!(report.objects[1].outcome, DeleteOutcome::Deleted);
    }

    #[test]
    fn a_410_on_delete_is_a_failure_never_already_gone() {
        for backend in ["sandbox", "job"] {
            let env = Env::new();
            let provider = env.provider();
            let config = config(backend);
            let lease = provider.acquire(request(&config, "d-7")).unwrap();
            env.kube.fail(Verb::Delete, "secrets", 1, KubeError::Gone("the resource version is too old".into()));
            let err = provider.destroy(stored(&lease, &config)).unwrap_err();
            assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{backend}: {err}");
            assert!(err.message().contains("Secret sandboxes/pc-d-7-env failed"), "{backend}: {err}");
            let report = provider.destroy(stored(&lease, &config)).unwrap();
            assert!(report.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{backend}: {report:?}");
        }
    }

    #[test]
    fn destroy_finds_the_sandbox_in_whatever_version_is_served() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config("sandbox"), "d-4")).unwrap();
        env.kube.serve_sandbox_versions(&["v1alpha1"]);
        let report = provider.destroy(bare_lease(Backend::Job, &lease.provider_lease_id)).unwrap();
        assert_eq!(report.objects[1].outcome, DeleteOutcome::Deleted);

        let lease = provider.acquire(request(&config("sandbox"), "d-5")).unwrap();
        env.kube.fail(Verb::ServedVersions, "agents.x-k8s.io", 1, KubeError::Transport("reset".into()));
        let report = provider.destroy(bare_lease(Backend::Job, &lease.provider_lease_id)).unwrap();
        assert_eq!(report.objects[1].outcome, DeleteOutcome::Deleted, "tried the known versions");
        assert!(env.kube.names_in(NS).is_empty());
    }

    #[test]
    fn destroy_cleans_up_a_half_finished_acquire_and_the_workspace_claim() {
        let env = Env::new();
        let pvcs = crate::api_versions::pvcs();
        env.kube.put(&crate::api_versions::secrets(), NS, json!({"metadata": {"name": "pc-d-6-env"}}));
        env.kube.put(&pvcs, NS, json!({"metadata": {"name": "workspace-pc-d-6"}}));
        let report = env.provider().destroy(bare_lease(Backend::Job, "k8s:sandbox:sandboxes:pc-d-6:pvc")).unwrap();
        assert_eq!(
            outcomes(&report),
            vec![
                ("Secret/pc-d-6-env".into(), DeleteOutcome::Deleted),
                ("PersistentVolumeClaim/workspace-pc-d-6".into(), DeleteOutcome::Deleted),
                ("Sandbox/pc-d-6".into(), DeleteOutcome::AlreadyGone),
            ]
        );
        assert!(env.kube.names_in(NS).is_empty());
    }

    #[test]
    fn a_stale_lease_leaves_the_newer_sandbox_under_its_name_alone() {
        for backend in ["sandbox", "job"] {
            let env = Env::new();
            let provider = env.provider();
            let config = config(backend);
            let stale = provider.acquire(request(&config, "d-7")).unwrap();
            provider.destroy(stored(&stale, &config)).unwrap();
            let newer = provider.acquire(request(&config, "d-7")).unwrap();
            assert_ne!(newer.workload_uid, stale.workload_uid);
            let report = provider.destroy(stored(&stale, &config)).unwrap();
            assert!(report.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{backend}: {report:?}");
            let plural = if backend == "job" { "jobs" } else { "sandboxes" };
            let kept = env.kube.object(plural, NS, "pc-d-7").expect("the newer workload stays");
            assert_eq!(kept["metadata"]["uid"], json!(newer.workload_uid), "{backend}");
            assert!(env.kube.object("secrets", NS, "pc-d-7-env").is_some(), "{backend}: its Secret stays");
            let gone = provider.destroy(stored(&newer, &config)).unwrap();
            assert!(gone.objects.iter().all(|o| o.outcome == DeleteOutcome::Deleted), "{backend}: {gone:?}");
        }
    }

    #[test]
    fn a_foreign_lease_id_is_refused() {
        let env = Env::new();
        let err = env.provider().destroy(bare_lease(Backend::Job, "docker:123")).unwrap_err();
        assert_eq!(err.kind(), "rejected");
        assert!(err.message().contains("not made by the Kubernetes provider"), "{err}");
    }

    #[test]
    fn report_serializes_like_the_wit_records() {
        let report = DestroyReport {
            objects: vec![
                ObjectReport { kind: "Job".into(), name: "a".into(), outcome: DeleteOutcome::AlreadyGone },
                ObjectReport { kind: "Secret".into(), name: "b".into(), outcome: DeleteOutcome::Failed("x".into()) },
            ],
        };
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            json!({"objects": [
                {"kind": "Job", "name": "a", "outcome": "already-gone"},
                {"kind": "Secret", "name": "b", "outcome": {"failed": "x"}}
            ]})
        );
    }
}
