//! Destroy of a claim lease: delete the lease's Secret and its SandboxClaim, and prove that the
//! claim's Sandbox goes with it.
//!
//! From the lease id alone, total and idempotent like every destroy (see `destroy`). The claim
//! is read first. Gone (404) means everything of the lease is gone or going: garbage collection
//! follows the claim's deletion to its Sandbox and the Secret (whose deletes are sent all the
//! same). Another claim under the name (another uid, or one the host says is not this
//! installation's) keeps what is its own. While the claim exists (so the host can prove its
//! Sandbox is the installation's, through the Sandbox's controller reference), its Sandbox is
//! found: by `status.sandbox.name`, the adoption annotation, the lease metadata's record, the
//! claim-uid label, or the claim's own name (a cold start's); only one whose controller is the
//! claim counts. Then the Secret and the claim are deleted (the claim with its uid as
//! precondition and background propagation), and the Sandbox is read again: gone, being
//! deleted, or still owned by the deleted claim (garbage collection removes it) all report it
//! deleted with the claim. A Sandbox is never deleted by name: the claim controller would
//! replace it, and a name from metadata could be another's. Every outcome is in the report.

use contract::k8s::agent_sandbox::CLAIM_UID_LABEL;
use serde_json::Value;

use crate::api_versions::{self, ClaimVersion};
use crate::backend::claim::state::assigned_sandbox;
use crate::destroy::{self, Attempt, DestroyReport};
use crate::errors::ProviderError;
use crate::kube_api::{Kube, KubeError, ListOptions, ResourceType};
use crate::lease::{Lease, LeaseMetadata};
use crate::log::Log;
use crate::naming::{LeaseId, secret_name};
use crate::object;

/// What holds the lease's claim name.
enum Holder {
    /// The lease's claim, in the version it was read in.
    Claim(ClaimVersion, Value),
    /// Nothing: the claim is gone.
    Gone,
    /// Another claim (a newer one of this acquisition, or someone else's).
    Another,
}

/// The claim versions to try: the served ones, or when discovery fails, the recorded one first.
fn versions<K: Kube>(kube: &K, recorded_api_version: &str) -> Vec<ClaimVersion> {
    match api_versions::served_claim_versions(kube) {
        Ok(served) => served,
        Err(_) => {
            let recorded = ClaimVersion::from_api_version(recorded_api_version);
            let others = ClaimVersion::PREFERENCE.into_iter().filter(|v| Some(*v) != recorded);
            recorded.into_iter().chain(others).collect()
        }
    }
}

/// Reads the claim in each version until one answers (an unserved version answers 404 too).
fn holder<K: Kube>(kube: &K, id: &LeaseId, lease: &Lease, versions: &[ClaimVersion]) -> Result<Holder, KubeError> {
    let mut first_error = None;
    for &version in versions {
        match kube.get(&version.resource(), Some(&id.namespace), &id.name) {
            Ok(claim) if lease.workload_uid.is_empty() || object::uid(&claim) == Some(&lease.workload_uid) => {
                return Ok(Holder::Claim(version, claim));
            }
            Ok(_) | Err(KubeError::NotOwned(_)) => return Ok(Holder::Another),
            Err(KubeError::NotFound(_)) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(Holder::Gone), Err)
}

/// The claim's Sandbox as found before the claim's delete.
enum Found {
    /// This Sandbox (its resource in the served version, its name) has the claim as controller.
    Sandbox(ResourceType, String),
    /// None of the names is a Sandbox of the claim's (the first name, for the report).
    None(String),
    /// It could not be told (the first failure).
    Unknown(String, KubeError),
}

/// Names of Sandboxes labelled with the claim's uid (a hint only: a failed list is no answer).
fn labelled<K: Kube>(kube: &K, id: &LeaseId, claim: &Value, sandboxes: &ResourceType) -> Vec<String> {
    let Some(uid) = object::uid(claim) else {
        return Vec::new();
    };
    let options = ListOptions { label_selector: Some(format!("{CLAIM_UID_LABEL}={uid}")), ..Default::default() };
    let mut list = kube.list(sandboxes, Some(&id.namespace), &options).unwrap_or_default();
    object::list_items(&mut list).iter().filter_map(|item| object::name(item).map(str::to_string)).collect()
}

/// The Sandbox resource in the preferred served version; `None` when none is served.
fn served_sandbox<K: Kube>(kube: &K) -> Result<Option<ResourceType>, KubeError> {
    match api_versions::served_sandbox_versions(kube) {
        Ok(served) => Ok(served.first().map(|v| v.resource())),
        Err(e) => Err(KubeError::Unavailable { message: e.message().to_string(), retry_after_seconds: None }),
    }
}

/// Finds the claim's Sandbox among its candidate names, in `sandboxes` (the served version, if
/// any: a cluster that serves none has no Sandbox).
fn find_sandbox<K: Kube>(
    kube: &K,
    id: &LeaseId,
    lease: &Lease,
    claim: &Value,
    sandboxes: &Result<Option<ResourceType>, KubeError>,
) -> Found {
    let assigned = assigned_sandbox(claim).map(str::to_string);
    let recorded = LeaseMetadata::parse_lenient(&lease.metadata).sandbox.map(|s| s.name);
    // The name the report shows when none is found.
    let first = assigned.clone().or_else(|| recorded.clone()).unwrap_or_else(|| id.name.clone());
    let resource = match sandboxes {
        Ok(Some(resource)) => resource,
        Ok(None) => return Found::None(first),
        Err(e) => return Found::Unknown(first, e.clone()),
    };
    let claim_uid = object::uid(claim);
    let mut tried: Vec<String> = Vec::new();
    let mut failure = None;
    // Most telling first; the label is listed only when the names at hand are not it.
    for stage in 0..3 {
        let names: Vec<String> = match stage {
            0 => assigned.iter().chain(&recorded).cloned().collect(),
            1 => labelled(kube, id, claim, resource),
            _ => vec![id.name.clone()],
        };
        for name in names {
            if tried.contains(&name) {
                continue;
            }
            tried.push(name.clone());
            match kube.get(resource, Some(&id.namespace), &name) {
                Ok(sandbox) if claim_uid.is_some() && object::controller_uid(&sandbox) == claim_uid => {
                    return Found::Sandbox(resource.clone(), name);
                }
                Ok(_) | Err(KubeError::NotFound(_) | KubeError::NotOwned(_)) => {}
                Err(e) => {
                    failure.get_or_insert((name, e));
                }
            }
        }
    }
    match failure {
        Some((name, e)) => Found::Unknown(name, e),
        None => Found::None(first),
    }
}

/// After the claim's delete: whether its Sandbox `name` is gone or going with it.
fn sandbox_goes<K: Kube>(
    kube: &K,
    log: &dyn Log,
    id: &LeaseId,
    sandboxes: &ResourceType,
    name: &str,
    claim_uid: &str,
) -> Result<bool, KubeError> {
    match kube.get(sandboxes, Some(&id.namespace), name) {
        Err(KubeError::NotFound(_)) => Ok(true),
        // Its controller, the claim, is gone, so the host can no longer prove it: garbage
        // collection removes it.
        Err(KubeError::NotOwned(_)) => Ok(true),
        Err(e) => Err(e),
        Ok(sandbox) if object::is_terminating(&sandbox) || object::controller_uid(&sandbox) == Some(claim_uid) => {
            Ok(true)
        }
        Ok(_) => {
            log.warn(
                "the claim's Sandbox has another controller now; it is not the lease's and is left alone",
                &[("sandbox", &format!("{}/{name}", id.namespace))],
            );
            Ok(false)
        }
    }
}

/// Destroys a claim lease (see the module docs).
pub(crate) fn destroy<K: Kube>(
    kube: &K,
    log: &dyn Log,
    id: &LeaseId,
    lease: &Lease,
) -> Result<DestroyReport, ProviderError> {
    let secret = secret_name(&id.name);
    let recorded = LeaseMetadata::parse_lenient(&lease.metadata).sandbox.map(|s| s.name);
    let sandbox_name = recorded.unwrap_or_else(|| id.name.clone());
    let mut attempts: Vec<Attempt<'_>> = Vec::new();
    let versions = versions(kube, &lease.api_version);
    match holder(kube, id, lease, &versions) {
        Err(e) => {
            attempts.push(("Secret", secret, Err(e.clone())));
            attempts.push(("SandboxClaim", id.name.clone(), Err(e.clone())));
            attempts.push(("Sandbox", sandbox_name, Err(e)));
        }
        Ok(Holder::Another) => {
            log.info(
                "the lease's claim is gone and another object holds its name; it is left alone",
                &[("claim", &format!("SandboxClaim {}", id.qualified()))],
            );
            attempts.push(("Secret", secret, Ok(false)));
            attempts.push(("SandboxClaim", id.name.clone(), Ok(false)));
            attempts.push(("Sandbox", sandbox_name, Ok(false)));
        }
        Ok(Holder::Gone) => {
            // What is left of the lease is garbage collection's, its owner being gone; the claim's
            // delete is still sent (a read's 404 is the one answer it rests on), and its Sandbox
            // goes with it.
            let secret_deleted = destroy::delete(kube, &api_versions::secrets(), &id.namespace, &secret, None);
            let uid = Some(lease.workload_uid.as_str()).filter(|u| !u.is_empty());
            let deleted = match versions.first() {
                Some(version) => destroy::delete(kube, &version.resource(), &id.namespace, &id.name, uid),
                None => Ok(false),
            };
            attempts.push(("Secret", secret, secret_deleted));
            attempts.push(("SandboxClaim", id.name.clone(), deleted.clone()));
            attempts.push(("Sandbox", sandbox_name, deleted));
        }
        Ok(Holder::Claim(version, claim)) => {
            let found = find_sandbox(kube, id, lease, &claim, &served_sandbox(kube));
            let deleted = destroy::delete(kube, &api_versions::secrets(), &id.namespace, &secret, None);
            attempts.push(("Secret", secret, deleted));
            let uid = object::uid(&claim).unwrap_or(&lease.workload_uid).to_string();
            let precondition = Some(uid.as_str()).filter(|u| !u.is_empty());
            let deleted = destroy::delete(kube, &version.resource(), &id.namespace, &id.name, precondition);
            let claim_failed = deleted.as_ref().err().cloned();
            attempts.push(("SandboxClaim", id.name.clone(), deleted));
            let (name, outcome) = match (found, claim_failed) {
                // It goes only with its claim.
                (Found::Sandbox(_, name) | Found::None(name) | Found::Unknown(name, _), Some(e)) => (name, Err(e)),
                (Found::Sandbox(resource, name), None) => {
                    let goes = sandbox_goes(kube, log, id, &resource, &name, &uid);
                    (name, goes)
                }
                (Found::None(name), None) => (name, Ok(false)),
                (Found::Unknown(name, e), None) => (name, Err(e)),
            };
            attempts.push(("Sandbox", name, outcome));
        }
    }
    destroy::report(log, id, attempts)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Backend;
    use crate::destroy::DeleteOutcome;
    use crate::fake_kube::Verb;
    use crate::testkit::{Env, NS, POOL, bare_lease, claim_config, request, stored};

    fn outcomes(report: &DestroyReport) -> Vec<(String, DeleteOutcome)> {
        report.objects.iter().map(|o| (format!("{}/{}", o.kind, o.name), o.outcome.clone())).collect()
    }

    #[test]
    fn destroy_works_from_the_lease_id_alone_and_twice() {
        for replicas in [2, 0] {
            let env = Env::new();
            env.with_pool(replicas);
            let provider = env.provider();
            let lease = provider.acquire(request(&claim_config(json!({})), "d-1")).unwrap();
            let sandbox = LeaseMetadata::parse_lenient(&lease.metadata).sandbox.unwrap().name;
            let report = provider.destroy(bare_lease(Backend::Claim, &lease.provider_lease_id)).unwrap();
            assert_eq!(
                outcomes(&report),
                vec![
                    ("Secret/pc-d-1-env".into(), DeleteOutcome::Deleted),
                    ("SandboxClaim/pc-d-1".into(), DeleteOutcome::Deleted),
                    (format!("Sandbox/{sandbox}"), DeleteOutcome::Deleted),
                ],
                "{replicas} members: the Sandbox found by the claim's status, not by the lost metadata"
            );
            assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
            assert_eq!(env.kube.pool_members(NS, POOL).len(), replicas as usize, "the pool's own are left alone");
            let again = provider.destroy(bare_lease(Backend::Claim, &lease.provider_lease_id)).unwrap();
            assert!(again.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{again:?}");
            assert_eq!(again.objects.len(), 3);
        }
    }

    #[test]
    fn a_claim_that_no_longer_names_its_sandbox_still_has_it_found_by_its_uid_label() {
        let env = Env::new();
        env.with_pool(2);
        let provider = env.provider();
        let lease = provider.acquire(request(&claim_config(json!({})), "d-6")).unwrap();
        let sandbox = LeaseMetadata::parse_lenient(&lease.metadata).sandbox.unwrap().name;
        env.kube.modify("sandboxclaims", NS, "pc-d-6", |c| {
            c["status"] = json!({});
            c["metadata"]["annotations"] = json!({});
        });
        let report = provider.destroy(bare_lease(Backend::Claim, &lease.provider_lease_id)).unwrap();
        assert_eq!(report.objects[2].name, sandbox, "a warm Sandbox is not named like its claim");
        assert_eq!(report.objects[2].outcome, DeleteOutcome::Deleted);
        assert_eq!(env.kube.count(Verb::List, "sandboxes"), 1);
    }

    #[test]
    fn the_claim_is_deleted_by_its_uid_and_a_newer_claim_is_left_alone() {
        let env = Env::new();
        env.with_pool(2);
        let provider = env.provider();
        let config = claim_config(json!({}));
        let stale = provider.acquire(request(&config, "d-2")).unwrap();
        provider.destroy(stored(&stale, &config)).unwrap();
        let newer = provider.acquire(request(&config, "d-2")).unwrap();
        assert_ne!(newer.workload_uid, stale.workload_uid);
        let report = provider.destroy(stored(&stale, &config)).unwrap();
        assert!(report.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{report:?}");
        assert!(env.kube.object("sandboxclaims", NS, "pc-d-2").is_some(), "the newer claim stays");
        assert!(env.kube.object("secrets", NS, "pc-d-2-env").is_some(), "with its Secret");
        let newer_sandbox = LeaseMetadata::parse_lenient(&newer.metadata).sandbox.unwrap().name;
        assert!(env.kube.object("sandboxes", NS, &newer_sandbox).is_some(), "and its Sandbox");
        let gone = provider.destroy(stored(&newer, &config)).unwrap();
        assert!(gone.objects.iter().all(|o| o.outcome == DeleteOutcome::Deleted), "{gone:?}");
    }

    #[test]
    fn a_failed_claim_delete_keeps_the_sandbox_reported_and_a_retry_finishes() {
        let env = Env::new();
        env.with_pool(2);
        let provider = env.provider();
        let config = claim_config(json!({}));
        let lease = provider.acquire(request(&config, "d-3")).unwrap();
        let busy = KubeError::Unavailable { message: "etcd".into(), retry_after_seconds: None };
        env.kube.fail(Verb::Delete, "sandboxclaims", 1, busy);
        let err = provider.destroy(stored(&lease, &config)).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{err}");
        assert!(err.message().contains("SandboxClaim sandboxes/pc-d-3 failed"), "{err}");
        assert!(err.message().contains("Sandbox sandboxes/python-"), "the Sandbox is named: {err}");
        assert!(err.message().contains("Secret sandboxes/pc-d-3-env deleted"), "{err}");
        let report = provider.destroy(stored(&lease, &config)).unwrap();
        assert_eq!(report.objects[0].outcome, DeleteOutcome::AlreadyGone, "the Secret went the first time");
        assert_eq!(report.objects[1].outcome, DeleteOutcome::Deleted);
        assert_eq!(report.objects[2].outcome, DeleteOutcome::Deleted);
        assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    }

    #[test]
    fn a_sandbox_the_host_no_longer_proves_once_its_claim_is_deleted_is_going() {
        // After the claim's delete its Sandbox's controller is gone, so a host refuses to read it:
        // garbage collection removes it, and the report says so instead of failing.
        let env = Env::new();
        env.with_pool(2);
        let provider = env.provider();
        let config = claim_config(json!({}));
        let lease = provider.acquire(request(&config, "d-4")).unwrap();
        env.kube.fail(Verb::Get, "sandboxes", 2, KubeError::NotOwned("its controller is gone".into()));
        let report = provider.destroy(stored(&lease, &config)).unwrap();
        assert_eq!(report.objects[2].outcome, DeleteOutcome::Deleted, "{report:?}");
        assert_eq!(env.kube.count(Verb::Delete, "sandboxes"), 0, "a Sandbox is never deleted by name");
    }

    #[test]
    fn a_release_of_a_claim_lease_destroys_it() {
        let env = Env::new();
        env.with_pool(1);
        let provider = env.provider();
        let config = claim_config(json!({}));
        let lease = provider.acquire(request(&config, "d-5")).unwrap();
        provider.release(stored(&lease, &config)).unwrap();
        assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
        provider.release(stored(&lease, &config)).unwrap();
    }
}
