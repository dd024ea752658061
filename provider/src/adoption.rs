//! The two writes of an acquire, each idempotent on the acquisition id: create the workload (or
//! adopt the one an earlier or concurrent attempt made), then create its Secret with an
//! ownerReference to it (or adopt, or replace, the one such an attempt made).
//!
//! The workload goes first because it carries the leak guard; the Secret then never exists
//! without an owner, so garbage collection removes it whatever happens to this call. A 409
//! adopts only what the labels prove is this acquisition's and, for the workload, what the spec
//! fingerprint matches; anything else is a named conflict and is left alone. A suspended
//! Sandbox (a released reusable lease) is adopted to be resumed: the acquisition asked for its
//! sandbox again. Each object is recorded for clean-up before its create, so a lost answer is
//! still cleaned up.

use contract::quote::quote;
use serde_json::{Value, json};

use crate::acquire::Plan;
use crate::api_versions;
use crate::clock::{Clock, Deadline};
use crate::compensation::{Role, Touched, Undo};
use crate::errors::{FromKube, ProviderError};
use crate::kube_api::{DeleteOptions, Kube, KubeError, PatchType, ResourceType};
use crate::naming::{self, ANNOTATION_ACQUISITION_ID, ANNOTATION_SPEC_HASH, Identity, LABEL_ACQUISITION_ID};
use crate::object;
use crate::retry::{GaveUp, retry};
use crate::secret;
use crate::workload_state::{expiry_of, sandbox_spec_suspended};

/// How many times the Secret's create is tried when a stale Secret of this acquisition is in
/// the way or vanishes between the 409 and the read.
const SECRET_ATTEMPTS: usize = 3;

/// Where the workload came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This call created it.
    Created,
    /// An earlier or concurrent attempt of this acquisition made it.
    Adopted,
    /// An earlier attempt made it and a release suspended it: this call resumes it.
    AdoptedSuspended,
}

/// The workload this acquire works on.
pub struct Workload {
    /// As the create or the read after a 409 returned it.
    pub object: Value,
    /// Its uid: the Secret's owner, and what the wait tells a replacement by.
    pub uid: String,
    /// Created or adopted, which decides where the wait starts and what clean-up does.
    pub origin: Origin,
}

/// Whether an object's labels prove it belongs to this acquisition. Only keys under the
/// provider's own prefix count: a host may restamp `app.kubernetes.io/managed-by` with its own
/// value on every create.
pub fn proves_acquisition(object: &Value, identity: &Identity) -> bool {
    object::label(object, LABEL_ACQUISITION_ID) == Some(naming::label_value(&identity.acquisition_id).as_str())
        && object::annotation(object, ANNOTATION_ACQUISITION_ID).is_none_or(|raw| raw == identity.acquisition_id)
}

fn not_ours(kind: &str, namespace: &str, name: &str, found: &Value) -> ProviderError {
    let show = |v: Option<&str>| v.map_or_else(|| "absent".to_string(), |s| quote(s).to_string());
    ProviderError::conflict(
        format!(
            "{kind} {namespace}/{name} already exists and is not this acquisition's (its label \
             {LABEL_ACQUISITION_ID} is {}, annotation {ANNOTATION_ACQUISITION_ID} is {}). Object names come from \
             the acquisition id, so another acquisition or a person made it: delete that object, or acquire with \
             another acquisition id.",
            show(object::label(found, LABEL_ACQUISITION_ID)),
            show(object::annotation(found, ANNOTATION_ACQUISITION_ID)),
        ),
        false,
    )
}

/// The object under the name is one the host will not let this installation touch: someone
/// else made it (the host refused to read it as not owned).
fn not_installations(kind: &str, namespace: &str, name: &str) -> ProviderError {
    ProviderError::conflict(
        format!(
            "{kind} {namespace}/{name} already exists and this installation did not create it, so the host will not \
             read or change it. Object names come from the acquisition id, so another installation or a person \
             made it: delete that object, or acquire with another acquisition id."
        ),
        false,
    )
}

/// Whether a create failure leaves open that the object was created (the answer was lost); a
/// request the host says it never sent made nothing.
fn maybe_created(error: &KubeError) -> bool {
    match error {
        KubeError::Transport(_) if error.was_not_sent() => false,
        KubeError::Transport(_) | KubeError::Timeout(_) | KubeError::Unavailable { .. } => true,
        KubeError::Other { code, .. } => *code >= 500,
        _ => false,
    }
}

/// A concurrent attempt removed an object between two calls of this one: retrying converges.
fn vanished(what: &str) -> ProviderError {
    ProviderError::conflict(
        format!(
            "{what} was deleted while this acquire was adopting it (a concurrent attempt of this acquisition \
             gave up and cleaned up, or someone deleted it). Retry acquire: it creates a new one."
        ),
        true,
    )
}

/// Creates an object, asking again after a transient failure until the deadline (as client-go
/// does after a 503 or 429 with Retry-After): a create is safe to repeat here, since a second
/// attempt after a lost answer meets the first one's object (409) and adopts it. `maybe` turns
/// true when an attempt may have created the object without saying so.
fn create<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    deadline: Deadline,
    resource: &ResourceType,
    namespace: &str,
    body: &Value,
    maybe: &mut bool,
) -> Result<Value, GaveUp> {
    retry(clock, deadline, || {
        let answer = kube.create(resource, Some(namespace), body);
        if let Err(e) = &answer {
            *maybe |= maybe_created(e);
        }
        answer
    })
}

/// Creates the workload, or adopts the one an earlier or concurrent attempt made.
pub fn put_workload<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    plan: &Plan,
    deadline: Deadline,
    touched: &mut Vec<Touched>,
) -> Result<Workload, ProviderError> {
    let ns = plan.config.namespace.as_str();
    let record = |uid: Option<String>, expires_at: i64, undo: Undo| Touched {
        role: Role::Workload { kind: plan.kind, expires_at },
        resource: plan.resource.clone(),
        name: plan.name.clone(),
        uid,
        undo,
    };
    touched.push(record(None, plan.expiry_ms, Undo::Delete));
    let mut maybe = false;
    let existing = match create(kube, clock, deadline, &plan.resource, ns, &plan.workload, &mut maybe) {
        Ok(created) => {
            let uid = object::uid(&created).ok_or_else(|| {
                ProviderError::internal(format!("the API server returned {} without a uid", plan.describe()))
            })?;
            if let Some(last) = touched.last_mut() {
                last.uid = Some(uid.to_string());
            }
            return Ok(Workload { uid: uid.to_string(), object: created, origin: Origin::Created });
        }
        Err(GaveUp::Final(KubeError::AlreadyExists(_))) => {
            // Not made by this call (or by an attempt of it whose answer was lost): never cleaned
            // up unless adopted below.
            touched.pop();
            match retry(clock, deadline, || kube.get(&plan.resource, Some(ns), &plan.name)) {
                Ok(existing) => existing,
                Err(GaveUp::Final(KubeError::NotFound(_))) => return Err(vanished(&plan.describe())),
                Err(GaveUp::Final(KubeError::NotOwned(_))) => {
                    return Err(not_installations(plan.kind, ns, &plan.name));
                }
                Err(g) => return Err(g.into_error(&format!("get {}", plan.describe()))),
            }
        }
        Err(g) => {
            if !maybe {
                touched.pop();
            }
            return Err(g.into_error(&format!("create {}", plan.describe())));
        }
    };
    if !proves_acquisition(&existing, &plan.identity) {
        return Err(not_ours(plan.kind, ns, &plan.name, &existing));
    }
    if object::annotation(&existing, ANNOTATION_SPEC_HASH) != Some(plan.spec_hash.as_str()) {
        return Err(ProviderError::conflict(
            format!(
                "{} was made by an earlier attempt of acquisition {:?} with a different spec (the config or the env \
                 changed between attempts). Destroy lease {} and acquire with a new acquisition id.",
                plan.describe(),
                plan.identity.acquisition_id,
                plan.lease_id
            ),
            false,
        ));
    }
    if object::is_terminating(&existing) {
        return Err(ProviderError::conflict(
            format!(
                "{} from an earlier attempt of this acquisition is being deleted; retry in a few seconds.",
                plan.describe()
            ),
            true,
        ));
    }
    let uid = object::uid(&existing)
        .ok_or_else(|| ProviderError::internal(format!("the API server returned {} without a uid", plan.describe())))?
        .to_string();
    let suspended = match plan.version {
        // Only a Sandbox plan has a version, and only a Sandbox is suspended.
        Some(version) if sandbox_spec_suspended(&existing) => Some(version),
        _ => None,
    };
    // A suspended Sandbox holds the user's workspace: clean-up suspends it again, never deletes it.
    let (undo, origin) = match suspended {
        Some(version) => (Undo::Suspend(version), Origin::AdoptedSuspended),
        None => (Undo::Delete, Origin::Adopted),
    };
    touched.push(record(Some(uid.clone()), expiry_of(&existing).unwrap_or(plan.expiry_ms), undo));
    Ok(Workload { object: existing, uid, origin })
}

/// Whether any ownerReference of `object` names `uid`.
fn owned_by(object: &Value, uid: &str) -> bool {
    object::at(object, "/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r.get("uid").and_then(Value::as_str) == Some(uid)))
}

/// The kind and uid of an object's first owner, if it has one.
fn first_owner(object: &Value) -> Option<(&str, &str)> {
    let owner = object::at(object, "/metadata/ownerReferences/0")?;
    Some((owner.get("kind")?.as_str()?, owner.get("uid")?.as_str()?))
}

/// Creates the per-lease Secret owned by `workload`, or adopts the one an earlier or concurrent
/// attempt made for it (bringing its values up to date: the host may have rotated one). A
/// Secret of this acquisition made for an earlier workload under this name that is gone
/// (garbage collection is about to delete it), or left without an owner, is replaced; one made
/// for a newer workload under the name means `workload` was replaced, and a retry adopts it.
pub fn put_secret<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    plan: &Plan,
    workload: &Workload,
    deadline: Deadline,
    touched: &mut Vec<Touched>,
) -> Result<(), ProviderError> {
    let Some((name, manifest, data)) = &plan.secret else {
        return Ok(());
    };
    let ns = plan.config.namespace.as_str();
    let what = format!("Secret {ns}/{name}");
    let resource = api_versions::secrets();
    let owner = secret::owner_patch(&plan.resource.api_version(), plan.kind, &plan.name, &workload.uid);
    let mut owned = manifest.clone();
    owned["metadata"]["ownerReferences"] = owner["metadata"]["ownerReferences"].clone();
    // A workload that clean-up keeps keeps its Secret too.
    let record = workload.origin != Origin::AdoptedSuspended;
    let touch = |touched: &mut Vec<Touched>, uid: Option<String>| {
        if record {
            let (resource, name) = (resource.clone(), name.clone());
            touched.push(Touched { role: Role::Secret, resource, name, uid, undo: Undo::Delete });
        }
    };
    for _ in 0..SECRET_ATTEMPTS {
        touch(touched, None);
        let mut maybe = false;
        let existing = match create(kube, clock, deadline, &resource, ns, &owned, &mut maybe) {
            Ok(created) => {
                if let (true, Some(last)) = (record, touched.last_mut()) {
                    last.uid = object::uid(&created).map(str::to_string);
                }
                return Ok(());
            }
            Err(GaveUp::Final(KubeError::AlreadyExists(_))) => {
                if record {
                    touched.pop();
                }
                match retry(clock, deadline, || kube.get(&resource, Some(ns), name)) {
                    Ok(existing) => existing,
                    Err(GaveUp::Final(KubeError::NotFound(_))) => continue,
                    Err(GaveUp::Final(KubeError::NotOwned(_))) => return Err(not_installations("Secret", ns, name)),
                    Err(g) => return Err(g.into_error(&format!("get {what}"))),
                }
            }
            Err(g) => {
                if record && !maybe {
                    touched.pop();
                }
                return Err(g.into_error(&format!("create {what}")));
            }
        };
        if !proves_acquisition(&existing, &plan.identity) {
            return Err(not_ours("Secret", ns, name, &existing));
        }
        if owned_by(&existing, &workload.uid) {
            match kube.patch(&resource, Some(ns), name, PatchType::Merge, &json!({"stringData": data}), None) {
                Ok(_) => {
                    touch(touched, object::uid(&existing).map(str::to_string));
                    return Ok(());
                }
                Err(KubeError::NotFound(_) | KubeError::NotOwned(_)) => continue,
                Err(e) => return Err(ProviderError::from_kube(&e, &format!("update the values of {what}"))),
            }
        }
        if let Some((kind, owner_uid)) = first_owner(&existing) {
            if kind != plan.kind {
                return Err(ProviderError::conflict(
                    format!(
                        "{what} belongs to a {kind} of acquisition {:?} (an attempt with another backend). Destroy \
                         that lease, or acquire with another acquisition id.",
                        plan.identity.acquisition_id
                    ),
                    false,
                ));
            }
            match retry(clock, deadline, || kube.get(&plan.resource, Some(ns), &plan.name)) {
                Ok(current) if object::uid(&current) == Some(owner_uid) => {
                    return Err(ProviderError::conflict(
                        format!(
                            "{} was replaced while this acquire adopted it: {what} belongs to the new one (another \
                             attempt of this acquisition made it). Retry acquire: it adopts the new one.",
                            plan.describe()
                        ),
                        true,
                    ));
                }
                Ok(_) | Err(GaveUp::Final(KubeError::NotFound(_) | KubeError::NotOwned(_))) => {}
                Err(g) => return Err(g.into_error(&format!("get {}", plan.describe()))),
            }
        }
        let stale =
            DeleteOptions { precondition_uid: object::uid(&existing).map(str::to_string), ..Default::default() };
        match kube.delete(&resource, Some(ns), name, &stale) {
            Ok(()) | Err(KubeError::NotFound(_) | KubeError::NotOwned(_) | KubeError::Conflict(_)) => {}
            Err(e) => return Err(ProviderError::from_kube(&e, &format!("replace the stale {what}"))),
        }
    }
    Err(ProviderError::conflict(
        format!("{what} kept changing while this acquire wrote it (concurrent attempts of this acquisition); retry."),
        true,
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::acquire::AcquireRequest;
    use crate::api_versions::SandboxVersion;
    use crate::fake_kube::{PodBehaviour, Verb};
    use crate::lease::LeaseMetadata;
    use crate::testkit::{Env, NS, assert_nothing_left, config, config_with, request, stored};
    use crate::workload_state::sandbox_spec_suspended;

    #[test]
    fn a_retried_acquire_adopts_its_own_sandbox() {
        let env = Env::new();
        let provider = env.provider();
        let first = provider.acquire(request(&config("sandbox"), "acq-6")).unwrap();
        let second = provider.acquire(request(&config("sandbox"), "acq-6")).unwrap();
        assert_eq!(second.provider_lease_id, first.provider_lease_id);
        assert_eq!(second.workload_uid, first.workload_uid);
        assert_eq!(second.pod_uid, first.pod_uid);
        assert_eq!(second.expires_at, first.expires_at, "the adopted object's own expiry");
        assert!(LeaseMetadata::parse_lenient(&second.metadata).adopted);
        assert_eq!(env.kube.names_in(NS), vec!["pods/pc-acq-6", "sandboxes/pc-acq-6", "secrets/pc-acq-6-env"]);
    }

    #[test]
    fn adoption_does_not_depend_on_the_managed_by_label_a_host_may_restamp() {
        let env = Env::new();
        let provider = env.provider();
        let first = provider.acquire(request(&config("sandbox"), "acq-6c")).unwrap();
        for (plural, name) in [("sandboxes", "pc-acq-6c"), ("secrets", "pc-acq-6c-env")] {
            env.kube.modify(plural, NS, name, |o| {
                o["metadata"]["labels"][naming::LABEL_MANAGED_BY] = json!("paperclip-sandbox-host");
            });
        }
        let second = provider.acquire(request(&config("sandbox"), "acq-6c")).unwrap();
        assert_eq!(second.workload_uid, first.workload_uid);
    }

    #[test]
    fn a_retried_job_acquire_adopts_its_own_job() {
        let env = Env::new();
        let provider = env.provider();
        let first = provider.acquire(request(&config("job"), "acq-7")).unwrap();
        let second = provider.acquire(request(&config("job"), "acq-7")).unwrap();
        assert_eq!(second.workload_uid, first.workload_uid);
        assert_eq!(second.pod_name, first.pod_name);
    }

    #[test]
    fn a_stale_secret_of_this_acquisition_is_replaced_by_one_owned_by_the_workload() {
        let identity = Identity { run_id: "run-1".into(), acquisition_id: "acq-6b".into(), agent_id: None };
        // Left without an owner (by an older provider), and owned by an earlier workload that is
        // gone (garbage collection is about to delete it): both are replaced.
        let owners = [
            json!(null),
            json!([{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "name": "pc-acq-6b", "uid": "uid-gone"}]),
        ];
        for owner in owners {
            let env = Env::new();
            let stale = env.kube.put(
                &api_versions::secrets(),
                NS,
                json!({"metadata": {"name": "pc-acq-6b-env", "labels": identity.labels(), "ownerReferences": owner},
                       "data": {"API_KEY": "b2xk"}}),
            );
            let lease = env.provider().acquire(request(&config("sandbox"), "acq-6b")).unwrap();
            let secret = env.kube.object("secrets", NS, "pc-acq-6b-env").unwrap();
            assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], json!(lease.workload_uid));
            assert_ne!(secret["metadata"]["uid"], stale["metadata"]["uid"], "a new Secret");
            assert_ne!(secret["data"]["API_KEY"], "b2xk", "the current value replaced the stale one");
        }
    }

    #[test]
    fn an_attempt_whose_adopted_workload_a_concurrent_attempt_deletes_fails_retryably() {
        let env = Env::new();
        let provider = env.provider();
        // Another attempt made the Sandbox; its pod restarts and is slow. While this attempt waits,
        // the other one gives up and cleans up: the Secret first, then the Sandbox.
        provider.acquire(request(&config("sandbox"), "acq-31")).unwrap();
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        env.kube.remove("pods", NS, "pc-acq-31");
        env.kube.schedule_remove(Duration::from_secs(1), "secrets", NS, "pc-acq-31-env");
        env.kube.schedule_remove(Duration::from_secs(2), "sandboxes", NS, "pc-acq-31");
        let err = provider.acquire(request(&config("sandbox"), "acq-31")).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("conflict", true), "{err}");
        assert!(err.message().contains("Retry acquire"), "{err}");
        assert!(env.clock.monotonic() < Duration::from_secs(5), "noticed at once, not at the deadline");
        assert_nothing_left(&env);
    }

    #[test]
    fn an_attempt_whose_adopted_workload_was_replaced_fails_retryably_and_leaves_the_new_one() {
        let env = Env::new();
        let provider = env.provider();
        provider.acquire(request(&config("sandbox"), "acq-32")).unwrap();
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        env.kube.remove("pods", NS, "pc-acq-32");
        // A third attempt deleted it and made a new one under the name (a new uid).
        env.kube.schedule_modify(Duration::from_secs(1), "sandboxes", NS, "pc-acq-32", |s| {
            s["metadata"]["uid"] = json!("uid-of-the-new-one");
        });
        env.kube.schedule_remove(Duration::from_millis(1500), "pods", NS, "pc-acq-32");
        let err = provider.acquire(request(&config("sandbox"), "acq-32")).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("conflict", true), "{err}");
        let kept = env.kube.object("sandboxes", NS, "pc-acq-32").expect("the new Sandbox is not ours to delete");
        assert_eq!(kept["metadata"]["uid"], "uid-of-the-new-one");
    }

    #[test]
    fn acquiring_a_released_reusable_lease_again_resumes_its_sandbox() {
        for version in ["v1beta1", "v1alpha1"] {
            let env = Env::new();
            env.kube.serve_sandbox_versions(&[version]);
            let provider = env.provider();
            let config = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
            let req = AcquireRequest { reusable: true, ..request(&config, "acq-33") };
            let first = provider.acquire(req.clone()).unwrap();
            provider.release(stored(&first, &config)).unwrap();
            let started = env.clock.monotonic();
            let again = provider.acquire(req).unwrap();
            assert!(env.clock.monotonic() - started < Duration::from_secs(5), "{version}: resumed, not waited out");
            assert_eq!(again.workload_uid, first.workload_uid, "{version}: the same Sandbox, with its workspace");
            assert_ne!(again.pod_uid, first.pod_uid, "{version}: a new pod");
            assert!(again.reusable && LeaseMetadata::parse_lenient(&again.metadata).adopted);
            assert!(!sandbox_spec_suspended(&env.kube.object("sandboxes", NS, "pc-acq-33").unwrap()), "{version}");
        }
    }

    #[test]
    fn acquiring_again_resumes_the_sandbox_only_once_its_old_pod_is_gone() {
        let env = Env::new();
        let provider = env.provider();
        let config = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
        let req = AcquireRequest { reusable: true, ..request(&config, "acq-35") };
        let first = provider.acquire(req.clone()).unwrap();
        provider.release(stored(&first, &config)).unwrap();
        env.old_pod_still_stopping("pc-acq-35");
        env.kube.schedule_remove(Duration::from_secs(3), "pods", NS, "pc-acq-35");
        let started = env.clock.monotonic();
        let again = provider.acquire(req).unwrap();
        assert!(env.clock.monotonic() - started >= Duration::from_secs(3), "resumed before the old pod was gone");
        assert_eq!(again.workload_uid, first.workload_uid, "the same Sandbox, with its workspace");
        assert!(!sandbox_spec_suspended(&env.kube.object("sandboxes", NS, "pc-acq-35").unwrap()));
    }

    #[test]
    fn a_failure_after_adopting_a_suspended_sandbox_suspends_it_again_and_never_deletes_it() {
        let env = Env::new();
        let provider = env.provider();
        let config = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
        let req = AcquireRequest { reusable: true, ..request(&config, "acq-34") };
        let first = provider.acquire(req.clone()).unwrap();
        provider.release(stored(&first, &config)).unwrap();
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        let err = provider.acquire(req).unwrap_err();
        assert_eq!(err.kind(), "timeout", "{err}");
        assert!(err.message().contains("suspended again"), "{err}");
        let kept = env.kube.object("sandboxes", NS, "pc-acq-34").expect("never deleted: its workspace is the user's");
        assert_eq!(kept["metadata"]["uid"], json!(first.workload_uid));
        assert!(sandbox_spec_suspended(&kept));
        assert!(env.kube.object("secrets", NS, "pc-acq-34-env").is_some(), "its Secret is kept for the next resume");
        assert_eq!(env.kube.count(Verb::Delete, "sandboxes"), 0);
    }

    #[test]
    fn a_secret_of_a_newer_workload_is_left_alone_and_the_stale_attempt_retries() {
        let env = Env::new();
        let sandbox = env.kube.put(
            &SandboxVersion::V1beta1.resource(),
            NS,
            json!({"metadata": {"name": "pc-acq-36"}, "spec": {}}),
        );
        let identity = Identity { run_id: "run-1".into(), acquisition_id: "acq-36".into(), agent_id: None };
        let newer = sandbox["metadata"]["uid"].as_str().unwrap().to_string();
        let owner =
            json!([{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "name": "pc-acq-36", "uid": newer}]);
        env.kube.put(
            &api_versions::secrets(),
            NS,
            json!({"metadata": {"name": "pc-acq-36-env", "labels": identity.labels(), "ownerReferences": owner}}),
        );
        let plan =
            crate::acquire::plan(&env.kube, &env.clock, &env.log, &request(&config("sandbox"), "acq-36")).unwrap();
        let workload = Workload { object: json!({}), uid: "uid-of-the-adopted-one".into(), origin: Origin::Adopted };
        let mut touched = Vec::new();
        let deadline = Deadline::after(&env.clock, Duration::from_secs(10));
        let err = put_secret(&env.kube, &env.clock, &plan, &workload, deadline, &mut touched).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("conflict", true), "{err}");
        assert!(touched.is_empty(), "nothing of this attempt to clean up");
        assert_eq!(env.kube.count(Verb::Delete, "secrets"), 0, "the newer workload's Secret is kept");
    }

    #[test]
    fn adoption_is_refused_for_a_foreign_object_and_it_is_left_alone() {
        let env = Env::new();
        env.kube.put(
            &SandboxVersion::V1beta1.resource(),
            NS,
            json!({"metadata": {"name": "pc-acq-8", "labels": {"team": "other"}}, "spec": {}}),
        );
        let err = env.provider().acquire(request(&config("sandbox"), "acq-8")).unwrap_err();
        assert_eq!(err.kind(), "conflict");
        assert!(
            err.message().contains("Sandbox sandboxes/pc-acq-8 already exists and is not this acquisition's"),
            "{err}"
        );
        assert_eq!(env.kube.names_in(NS), vec!["sandboxes/pc-acq-8"], "theirs kept, nothing of ours written");
    }

    #[test]
    fn adoption_is_refused_when_the_spec_changed_between_attempts() {
        let env = Env::new();
        let provider = env.provider();
        provider.acquire(request(&config("sandbox"), "acq-9")).unwrap();
        let changed = config_with("sandbox", json!({"image": "ghcr.io/acme/agent:2"}));
        let err = provider.acquire(request(&changed, "acq-9")).unwrap_err();
        assert_eq!(err.kind(), "conflict");
        assert!(err.message().contains("different spec"), "{err}");
        assert!(env.kube.object("sandboxes", NS, "pc-acq-9").is_some(), "the first attempt's sandbox is kept");
        let secret = env.kube.object("secrets", NS, "pc-acq-9-env").expect("the first attempt's Secret is kept");
        assert!(secret["metadata"]["ownerReferences"].is_array());
    }

    #[test]
    fn a_refused_workload_create_writes_nothing_else() {
        for (backend, plural) in [("sandbox", "sandboxes"), ("job", "jobs")] {
            let env = Env::new();
            env.kube.fail(Verb::Create, plural, 1, KubeError::Forbidden(format!("{plural} is not allowed by policy")));
            let err = env.provider().acquire(request(&config(backend), "acq-11")).unwrap_err();
            assert_eq!(err.kind(), "forbidden");
            assert_eq!(env.kube.count(Verb::Create, "secrets"), 0, "{backend}: no Secret without its owner");
            assert_nothing_left(&env);
        }
    }
}
