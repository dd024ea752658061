//! Acquire: provision a sandbox and wait until it is ready, idempotently on the acquisition id.
//!
//! Everything that can be refused is checked before the first write (config, ids, env,
//! expiry, served API version), so a refusal leaves nothing behind. Then two writes, ordered so
//! that no object ever exists without an owner or an expiry: the workload, which carries the
//! leak guard, and the per-lease Secret with an ownerReference to it (see `adoption`: a 409
//! adopts only this acquisition's own objects). Any failure after the first write undoes what
//! this call created or adopted, with its own short budget, and returns the original error
//! with what clean-up did (see `compensation`).
//!
//! Concurrent attempts of one acquisition converge: they share one workload, and an attempt
//! that finds it deleted or replaced while it waits (another attempt gave up and cleaned up)
//! fails retryably, so either all of them get the one sandbox or all fail retryably and the
//! last to give up leaves nothing behind.

use std::collections::BTreeMap;
use std::time::Duration;

pub use sandbox_contract::{AcquireRequest, EnvVar};
use serde_json::{Value, json};

use crate::adoption::{self, Origin};
use crate::api_versions::{self, SandboxVersion};
use crate::clock::{Clock, Deadline, rfc3339_seconds};
use crate::compensation::{self, Scope, Touched};
use crate::config::{self, Backend, Config};
use crate::errors::{FromKube, ProviderError};
use crate::job_manifest::{self, JobParams};
use crate::kube_api::{Kube, KubeError, PatchType, ResourceType};
use crate::lease::{Lease, LeaseMetadata};
use crate::log::Log;
use crate::naming::{self, ANNOTATION_SPEC_HASH, Identity, LeaseId};
use crate::object;
use crate::pod_spec::{self, PodInputs};
use crate::readiness::{self, Start, Target, WaitError};
use crate::redact::{RedactingLog, Redactor};
use crate::sandbox_manifest::{self, SandboxParams};
use crate::secret;
use crate::workload_state::{Cause, Failure, expiry_of};

/// Everything decided before the first write.
pub(crate) struct Plan {
    pub(crate) config: Config,
    pub(crate) identity: Identity,
    pub(crate) name: String,
    pub(crate) lease_id: LeaseId,
    pub(crate) resource: ResourceType,
    /// The Sandbox version in use; `None` for a Job.
    pub(crate) version: Option<SandboxVersion>,
    pub(crate) kind: &'static str,
    pub(crate) workload: Value,
    /// The Secret's name, manifest (without its owner, known only after the workload's create)
    /// and values.
    pub(crate) secret: Option<(String, Value, BTreeMap<String, String>)>,
    pub(crate) spec_hash: String,
    pub(crate) expiry_ms: i64,
    pub(crate) reusable: bool,
}

impl Plan {
    /// `Sandbox ns/name`, for messages.
    pub(crate) fn describe(&self) -> String {
        format!("{} {}/{}", self.kind, self.config.namespace, self.name)
    }
}

/// A fingerprint of everything an adopted workload must share with this request (the pod
/// template and the workload settings), excluding the expiry, which differs per attempt.
fn spec_hash(backend: Backend, template: &Value, config: &Config) -> String {
    let material = json!({
        "backend": backend.as_str(),
        "template": template,
        "workspaceVolume": config.sandbox.workspace_volume,
        "job": config.job,
    });
    naming::fnv1a64_hex(canonical_json(&material).as_bytes())
}

/// JSON with object keys sorted, so the fingerprint does not depend on map ordering.
fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", Value::String((*k).clone()), canonical_json(&map[*k]))).collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// Decides everything and builds the manifests, without writing to the cluster.
fn plan<K: Kube>(kube: &K, clock: &dyn Clock, log: &dyn Log, request: &AcquireRequest) -> Result<Plan, ProviderError> {
    let config = config::parse(&request.config)?;
    naming::check_host_id("run id", &request.run_id).map_err(ProviderError::rejected)?;
    if let Some(agent) = &request.agent_id {
        naming::check_host_id("agent id", agent).map_err(ProviderError::rejected)?;
    }
    let name = naming::workload_name(&config.name_prefix, &request.acquisition_id)
        .map_err(|e| ProviderError::rejected(e.to_string()))?;
    let identity = Identity {
        run_id: request.run_id.clone(),
        acquisition_id: request.acquisition_id.clone(),
        agent_id: request.agent_id.clone(),
    };

    let now = clock.now_millis();
    let ttl_end = now.saturating_add(i64::from(config.lease_ttl_seconds) * 1000);
    let wanted = request.requested_expires_at.map_or(ttl_end, |r| r.min(ttl_end));
    let expiry_ms = wanted - wanted.rem_euclid(1000);
    if expiry_ms <= now {
        return Err(ProviderError::rejected(format!(
            "requested-expires-at ({}) is not at least a second in the future; ask for a later expiry.",
            rfc3339_seconds(request.requested_expires_at.unwrap_or(wanted))
        )));
    }

    let secret_name = naming::secret_name(&name);
    let env = secret::plan_env(&config.env, &request.env, &secret_name)?;
    let version = match config.backend {
        Backend::Sandbox => Some(api_versions::resolve(kube, config.sandbox_api_version)?),
        Backend::Job => None,
    };
    let workspace = match config.backend {
        Backend::Sandbox => config.sandbox.workspace_volume.as_ref(),
        Backend::Job => None,
    };
    let reusable = request.reusable && workspace.is_some();
    if request.reusable && !reusable {
        log.info(
            "reusable lease not possible: it needs backend sandbox with sandbox.workspaceVolume; the lease is ephemeral",
            &[("name", &name)],
        );
    }

    let mut labels = identity.labels();
    labels.extend(config.labels.clone());
    let mut annotations = config.annotations.clone();
    annotations.extend(identity.annotations());
    let template = pod_spec::pod_template(
        &config,
        PodInputs {
            labels: labels.clone(),
            annotations: annotations.clone(),
            env: env.pod_env,
            workspace_claim: workspace.is_some(),
            restart_never: config.backend == Backend::Job,
        },
    );
    let template_json = serde_json::to_value(&template)
        .map_err(|e| ProviderError::internal(format!("could not encode the pod template: {e}")))?;
    let spec_hash = spec_hash(config.backend, &template_json, &config);
    let mut workload_annotations = annotations.clone();
    workload_annotations.insert(ANNOTATION_SPEC_HASH.to_string(), spec_hash.clone());

    let (resource, kind, workload) = match version {
        Some(version) => (
            version.resource(),
            "Sandbox",
            sandbox_manifest::sandbox(&SandboxParams {
                name: &name,
                namespace: &config.namespace,
                version,
                labels: &labels,
                annotations: &workload_annotations,
                template: &template,
                shutdown_time: &rfc3339_seconds(expiry_ms),
                workspace,
            })?,
        ),
        None => (
            api_versions::jobs(),
            "Job",
            job_manifest::job(JobParams {
                name: &name,
                namespace: &config.namespace,
                labels: &labels,
                annotations: &workload_annotations,
                template,
                settings: &config.job,
                active_deadline_seconds: job_manifest::active_deadline_seconds(expiry_ms, now),
            })?,
        ),
    };
    let secret = if env.secret_data.is_empty() {
        None
    } else {
        let manifest =
            secret::secret_manifest(&secret_name, &config.namespace, &labels, &annotations, &env.secret_data)?;
        Some((secret_name, manifest, env.secret_data))
    };
    let lease_id = LeaseId {
        backend: config.backend,
        namespace: config.namespace.clone(),
        name: name.clone(),
        workspace_pvc: workspace.is_some(),
    };
    Ok(Plan {
        config,
        identity,
        name,
        lease_id,
        resource,
        version,
        kind,
        workload,
        secret,
        spec_hash,
        expiry_ms,
        reusable,
    })
}

/// The writes and the wait; on error, `touched` says what to clean up.
fn provision<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    plan: &Plan,
    deadline: Deadline,
    touched: &mut Vec<Touched>,
) -> Result<Lease, ProviderError> {
    let ns = plan.config.namespace.as_str();
    let workload = adoption::put_workload(kube, clock, plan, deadline, touched)?;
    adoption::put_secret(kube, clock, plan, &workload, deadline, touched)?;
    let uid = workload.uid.as_str();
    let created = workload.origin == Origin::Created;
    let done = match workload.origin {
        Origin::Created => "workload created; waiting for readiness",
        Origin::Adopted => "adopted the workload of an earlier attempt",
        Origin::AdoptedSuspended => "adopted the suspended Sandbox of an earlier attempt; resuming it",
    };
    log.info(done, &[("kind", plan.kind), ("namespace", ns), ("name", &plan.name), ("uid", uid)]);

    let start = match workload.origin {
        Origin::Created => object::resource_version(&workload.object).map(|rv| Start::After(rv.to_string())),
        Origin::Adopted => None,
        Origin::AdoptedSuspended => resume(kube, plan)?,
    };
    let start = start.unwrap_or(Start::List);
    let target = Target {
        backend: plan.config.backend,
        namespace: ns,
        name: &plan.name,
        resource: &plan.resource,
        uid,
        secret: plan.secret.as_ref().map(|(name, _, _)| name.as_str()),
        job_retries: plan.config.job.backoff_limit > 0,
    };
    let expires_at = if created { plan.expiry_ms } else { expiry_of(&workload.object).unwrap_or(plan.expiry_ms) };
    let pod = readiness::wait_ready(kube, clock, log, &target, start, deadline).map_err(|e| match e {
        WaitError::Failed(f) => wait_failure(clock, &target.describe(), expires_at, f),
        WaitError::Api(e) => e,
        WaitError::Timeout(why) => ProviderError::timeout(format!(
            "{} was not ready within {} s: {why}. The image may still be pulling or the cluster may be slow; retry, \
             or raise readinessTimeoutSeconds (keeping it inside the host's call budget).",
            target.describe(),
            plan.config.readiness_timeout_seconds
        )),
    })?;

    let metadata = LeaseMetadata {
        run_id: Some(plan.identity.run_id.clone()),
        acquisition_id: Some(plan.identity.acquisition_id.clone()),
        agent_id: plan.identity.agent_id.clone(),
        name: Some(plan.name.clone()),
        secret_name: plan.secret.as_ref().map(|(n, _, _)| n.clone()),
        workspace_pvc: plan.lease_id.workspace_pvc.then(|| naming::workspace_pvc_name(&plan.name)),
        acquired_at: Some(clock.now_millis()),
        adopted: !created,
        previous_pod_uid: None,
        renewed_at: None,
    };
    Ok(Lease {
        provider_lease_id: plan.lease_id.to_string(),
        backend: plan.config.backend,
        namespace: ns.to_string(),
        api_version: plan.resource.api_version(),
        workload_uid: workload.uid.clone(),
        pod_name: Some(pod.name),
        pod_uid: Some(pod.uid).filter(|u| !u.is_empty()),
        pod_ip: pod.ip,
        expires_at: Some(expires_at),
        reusable: plan.reusable,
        metadata: metadata.to_json(),
    })
}

/// Resumes the adopted suspended Sandbox (its Secret is already up to date, so the new pod reads
/// the current values); the wait starts after the patch.
fn resume<K: Kube>(kube: &K, plan: &Plan) -> Result<Option<Start>, ProviderError> {
    let Some(version) = plan.version else {
        return Err(ProviderError::internal("a suspended Sandbox adopted without a Sandbox version"));
    };
    let ns = Some(plan.config.namespace.as_str());
    let patch = sandbox_manifest::resume_patch(version);
    match kube.patch(&plan.resource, ns, &plan.name, PatchType::Merge, &patch, None) {
        Ok(patched) => Ok(object::resource_version(&patched).map(|rv| Start::After(rv.to_string()))),
        Err(KubeError::NotFound(_)) => Err(ProviderError::conflict(
            format!(
                "{} was deleted while this acquire resumed it (someone deleted it, or its expiry passed). Retry \
                 acquire: it creates a new one, with an empty workspace.",
                plan.describe()
            ),
            true,
        )),
        Err(e) => Err(ProviderError::from_kube(&e, &format!("resume {}", plan.describe()))),
    }
}

/// What a wait that found the workload gone, going or replaced means for an acquire. Before the
/// lease's expiry, another attempt of this acquisition gave up on it and cleaned up (or a person
/// deleted it): retrying converges, by creating a new workload or adopting the replacement.
/// After the expiry, the expiry was too short for the sandbox to start.
fn wait_failure(clock: &dyn Clock, what: &str, expires_at: i64, failure: Failure) -> ProviderError {
    let expired = clock.now_millis() >= expires_at;
    let gone = "another attempt of this acquisition gave up on it and cleaned up, or someone deleted it";
    match failure.cause {
        Cause::Deleted if expired => ProviderError::rejected(format!(
            "{what} was deleted while waiting for it: the lease's expiry ({}) passed before it was ready. Ask for \
             a later requested-expires-at (or raise leaseTtlSeconds).",
            rfc3339_seconds(expires_at)
        )),
        Cause::Deleted => ProviderError::conflict(
            format!(
                "{what} was deleted while this acquire waited for it ({gone}). Retry acquire: it creates a new one."
            ),
            true,
        ),
        Cause::Terminating if !expired => ProviderError::conflict(
            format!(
                "{what} started being deleted while this acquire waited for it ({gone}). Retry acquire in a few \
                 seconds: it creates a new one."
            ),
            true,
        ),
        Cause::Replaced if !expired => ProviderError::conflict(
            format!(
                "{what} was replaced by a new object under its name while this acquire waited for it (another \
                 attempt of this acquisition made it). Retry acquire: it adopts the new one."
            ),
            true,
        ),
        _ => failure.into_error(),
    }
}

/// Acquires a sandbox (see the module docs). Secret values of the request are scrubbed from
/// every log line and error this call produces.
pub fn acquire<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    request: &AcquireRequest,
) -> Result<Lease, ProviderError> {
    let redactor = Redactor::new(request.env.iter().filter(|e| e.secret).map(|e| e.value.as_str()));
    let log = RedactingLog::new(&log, &redactor);
    let started = clock.monotonic();
    let result = acquire_unredacted(kube, clock, &log, request);
    let elapsed = (clock.monotonic().saturating_sub(started)).as_millis().to_string();
    match &result {
        Ok(lease) => log.info("sandbox ready", &[("lease", &lease.provider_lease_id), ("elapsed_ms", &elapsed)]),
        Err(e) => log.warn("acquire failed", &[("error", &e.to_string()), ("elapsed_ms", &elapsed)]),
    }
    result.map_err(|e| redactor.scrub_error(e))
}

/// The one deadline of an acquire's writes and wait: the config's readiness timeout, counted
/// from the call's start. Clean-up after a failure gets [`compensation::COMPENSATION_BUDGET`]
/// on top.
fn acquire_deadline(clock: &dyn Clock, started: Duration, config: &Config) -> Deadline {
    let budget = Duration::from_secs(u64::from(config.readiness_timeout_seconds));
    Deadline::after(clock, budget.saturating_sub(clock.monotonic().saturating_sub(started)))
}

fn acquire_unredacted<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    request: &AcquireRequest,
) -> Result<Lease, ProviderError> {
    let started = clock.monotonic();
    let plan = plan(kube, clock, log, request)?;
    let deadline = acquire_deadline(clock, started, &plan.config);
    let mut touched = Vec::new();
    match provision(kube, clock, log, &plan, deadline, &mut touched) {
        Ok(lease) => Ok(lease),
        Err(error) if touched.is_empty() => Err(error),
        Err(error) => {
            let lease_id = plan.lease_id.to_string();
            let scope = Scope {
                namespace: &plan.config.namespace,
                identity: &plan.identity,
                job_ttl_seconds: plan.config.job.ttl_seconds_after_finished,
                lease_id: &lease_id,
            };
            let cleaned = compensation::compensate(kube, clock, log, &scope, &touched);
            if cleaned.is_empty() { Err(error) } else { Err(error.map_message(|m| format!("{m} {cleaned}"))) }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::fake_kube::{PodBehaviour, Verb};
    use crate::kube_api::KubeError;
    use crate::naming::LABEL_ACQUISITION_ID;
    use crate::testkit::{
        Env, NOW, NS, SECRET_VALUE, assert_no_secret, assert_nothing_left, config, config_with, request,
    };

    #[test]
    fn sandbox_acquire_watches_until_ready_and_returns_the_lease() {
        let env = Env::new();
        let lease = env.provider().acquire(request(&config("sandbox"), "acq-1")).unwrap();
        assert_eq!(lease.provider_lease_id, "k8s:sandbox:sandboxes:pc-acq-1");
        assert_eq!(lease.backend, Backend::Sandbox);
        assert_eq!(lease.api_version, "agents.x-k8s.io/v1beta1");
        assert_eq!(lease.pod_name.as_deref(), Some("pc-acq-1"));
        assert!(lease.pod_ip.is_some() && lease.pod_uid.is_some());
        assert_eq!(lease.expires_at, Some(NOW + 3_600_000));
        assert!(!lease.reusable);

        let sandbox = env.kube.object("sandboxes", NS, "pc-acq-1").unwrap();
        assert_eq!(lease.workload_uid, sandbox["metadata"]["uid"]);
        assert_eq!(sandbox["spec"]["shutdownTime"], rfc3339_seconds(NOW + 3_600_000));
        assert_eq!(sandbox["spec"]["shutdownPolicy"], "Delete");
        let labels = &sandbox["metadata"]["labels"];
        assert_eq!(labels[naming::LABEL_MANAGED_BY], naming::MANAGED_BY);
        assert_eq!(labels[LABEL_ACQUISITION_ID], "acq-1");
        assert_eq!(labels[naming::LABEL_RUN_ID], "run-1");
        assert_eq!(labels[naming::LABEL_AGENT_ID], "agent-7");

        let secret = env.kube.object("secrets", NS, "pc-acq-1-env").unwrap();
        assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], sandbox["metadata"]["uid"]);
        assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], "Sandbox");
        assert_eq!(secret["metadata"]["labels"][LABEL_ACQUISITION_ID], "acq-1");
        assert!(secret["data"]["API_KEY"].is_string());
        let env_list = &sandbox["spec"]["podTemplate"]["spec"]["containers"][0]["env"];
        assert!(env_list.to_string().contains("secretKeyRef"));
        assert_no_secret(&env, &sandbox.to_string());
        assert_no_secret(&env, &serde_json::to_string(&lease).unwrap());

        // Readiness came from watch events: the clock moved by the pod's start time only, and the
        // Sandbox was read once after the pod was ready (no polling).
        assert_eq!(env.clock.monotonic(), Duration::from_millis(1010));
        assert_eq!(env.kube.count(Verb::Get, "sandboxes"), 1);
        assert_eq!(env.kube.count(Verb::Watch, "pods"), 1);
    }

    #[test]
    fn job_acquire_sets_the_leak_guard_and_job_defaults() {
        let env = Env::new();
        let lease = env.provider().acquire(request(&config("job"), "acq-2")).unwrap();
        assert_eq!(lease.provider_lease_id, "k8s:job:sandboxes:pc-acq-2");
        assert_eq!(lease.api_version, "batch/v1");
        assert!(lease.pod_name.as_deref().unwrap().starts_with("pc-acq-2-"));
        let job = env.kube.object("jobs", NS, "pc-acq-2").unwrap();
        assert_eq!(job["spec"]["activeDeadlineSeconds"], 3600);
        assert_eq!(job["spec"]["backoffLimit"], 0);
        assert_eq!(job["spec"]["ttlSecondsAfterFinished"], 900);
        assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
        let secret = env.kube.object("secrets", NS, "pc-acq-2-env").unwrap();
        assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], "Job");
    }

    #[test]
    fn a_cluster_serving_only_v1alpha1_gets_a_v1alpha1_sandbox() {
        let env = Env::new();
        env.kube.serve_sandbox_versions(&["v1alpha1"]);
        let lease = env.provider().acquire(request(&config("sandbox"), "acq-3")).unwrap();
        assert_eq!(lease.api_version, "agents.x-k8s.io/v1alpha1");
        let sandbox = env.kube.object("sandboxes", NS, "pc-acq-3").unwrap();
        assert_eq!(sandbox["spec"]["replicas"], 1);
        assert!(sandbox["spec"].get("operatingMode").is_none());
    }

    #[test]
    fn the_requested_expiry_bounds_the_lease() {
        let env = Env::new();
        let mut req = request(&config("job"), "acq-4");
        req.requested_expires_at = Some(NOW + 600_500);
        let lease = env.provider().acquire(req).unwrap();
        assert_eq!(lease.expires_at, Some(NOW + 600_000), "rounded down to whole seconds");
        assert_eq!(env.kube.object("jobs", NS, "pc-acq-4").unwrap()["spec"]["activeDeadlineSeconds"], 600);
    }

    #[test]
    fn refusals_before_the_first_create_leave_nothing() {
        let env = Env::new();
        let mut past = request(&config("sandbox"), "acq-5");
        past.requested_expires_at = Some(NOW - 1);
        let unsafe_id = request(&config("sandbox"), "Acq_5");
        let bad_env = AcquireRequest {
            env: vec![EnvVar { name: "NOT-VALID".into(), value: SECRET_VALUE.into(), secret: true }],
            ..request(&config("sandbox"), "acq-5")
        };
        let bad_config = AcquireRequest { config: "{}".into(), ..request(&config("sandbox"), "acq-5") };
        let empty_run = AcquireRequest { run_id: String::new(), ..request(&config("sandbox"), "acq-5") };
        for (req, kind) in [
            (past, "rejected"),
            (unsafe_id, "rejected"),
            (bad_env, "rejected"),
            (bad_config, "invalid-config"),
            (empty_run, "rejected"),
        ] {
            let err = env.provider().acquire(req).unwrap_err();
            assert_eq!(err.kind(), kind, "{err}");
            assert!(!err.message().contains(SECRET_VALUE));
        }
        assert_eq!(env.kube.count(Verb::Create, "sandboxes") + env.kube.count(Verb::Create, "secrets"), 0);
        assert_nothing_left(&env);
    }

    #[test]
    fn an_unsafe_acquisition_id_is_refused_with_the_reason() {
        let env = Env::new();
        let err = env.provider().acquire(request(&config("sandbox"), "01J9ZQ8K3M")).unwrap_err();
        assert!(err.message().contains("refuses such ids"), "{err}");
        assert!(!err.retryable());
    }

    #[test]
    fn fail_fast_causes_are_classified_and_cleaned_up() {
        let cases = [
            (PodBehaviour::ImagePull, "image-pull", false, "cannot pull"),
            (PodBehaviour::ConfigError, "rejected", false, "CreateContainerConfigError"),
            (PodBehaviour::CrashLoop, "rejected", false, "keeps exiting"),
            (PodBehaviour::Unschedulable, "capacity", true, "no node can run"),
            (PodBehaviour::Succeeds, "rejected", false, "must keep running"),
            (PodBehaviour::Fails, "rejected", false, "failed"),
        ];
        for backend in ["sandbox", "job"] {
            for (behaviour, kind, retryable, text) in &cases {
                let env = Env::new();
                env.kube.set_behaviour(behaviour.clone());
                let err = env.provider().acquire(request(&config(backend), "acq-13")).unwrap_err();
                assert_eq!((err.kind(), err.retryable()), (*kind, *retryable), "{backend} {behaviour:?}: {err}");
                assert!(err.message().contains(text), "{backend} {behaviour:?}: {err}");
                assert!(
                    env.clock.monotonic() < Duration::from_secs(1),
                    "{backend} {behaviour:?} waited out the budget"
                );
                assert_nothing_left(&env);
                assert_no_secret(&env, &err.to_string());
            }
        }
    }

    #[test]
    fn a_sandbox_expiring_while_starting_fails_fast() {
        let env = Env::new();
        env.kube.set_behaviour(PodBehaviour::Ready { after: Duration::from_secs(10) });
        let mut req = request(&config("sandbox"), "acq-14");
        req.requested_expires_at = Some(NOW + 2_000);
        let err = env.provider().acquire(req).unwrap_err();
        assert_eq!(err.kind(), "rejected");
        assert!(err.message().contains("deleted while waiting"), "{err}");
        assert!(env.clock.monotonic() < Duration::from_secs(3));
        assert_nothing_left(&env);
    }

    #[test]
    fn one_deadline_bounds_the_whole_acquire() {
        let env = Env::new();
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        let err = env.provider().acquire(request(&config("sandbox"), "acq-15")).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("timeout", true));
        assert!(
            err.message().contains("was not ready within 20 s: pod pc-acq-15 is Pending (ContainerCreating)"),
            "{err}"
        );
        assert_eq!(env.clock.monotonic(), Duration::from_secs(20));
        assert_nothing_left(&env);
    }

    #[test]
    fn a_410_on_a_read_of_the_sandbox_is_not_a_deleted_sandbox() {
        let env = Env::new();
        env.kube.fail_always(Verb::Get, "sandboxes", KubeError::Gone("the resource version is too old".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-24")).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{err}");
        assert!(!err.message().contains("deleted while waiting"), "{err}");
    }

    #[test]
    fn transient_read_failures_in_the_wait_do_not_fail_the_acquire() {
        let env = Env::new();
        // The pod is deleted while starting: the Sandbox is read to see whether it still stands,
        // and that read fails twice; once the replacement pod is ready the Sandbox is read again.
        env.kube.schedule_remove(Duration::from_millis(500), "pods", NS, "pc-acq-26");
        env.kube.fail_times(Verb::Get, "sandboxes", 0, 2, KubeError::Other { code: 500, message: "etcd".into() });
        env.kube.fail_times(Verb::Get, "sandboxes", 1, 1, KubeError::Timeout("slow".into()));
        let lease = env.provider().acquire(request(&config("sandbox"), "acq-26")).unwrap();
        assert_eq!(env.kube.count(Verb::Get, "sandboxes"), 5, "every failed read was asked again");
        assert_eq!(lease.pod_name.as_deref(), Some("pc-acq-26"));
        assert!(env.kube.object("sandboxes", NS, "pc-acq-26").is_some());
    }

    #[test]
    fn acquire_is_two_writes_workload_first_and_the_secret_is_owned_from_its_create() {
        for (backend, plural, kind) in [("sandbox", "sandboxes", "Sandbox"), ("job", "jobs", "Job")] {
            let env = Env::new();
            let lease = env.provider().acquire(request(&config(backend), "acq-27")).unwrap();
            let writes: Vec<(Verb, String)> = env
                .kube
                .calls()
                .into_iter()
                .filter(|c| matches!(c.verb, Verb::Create | Verb::Patch | Verb::Delete))
                .map(|c| (c.verb, c.plural))
                .collect();
            assert_eq!(writes, vec![(Verb::Create, plural.to_string()), (Verb::Create, "secrets".to_string())]);
            let secret = env.kube.object("secrets", NS, "pc-acq-27-env").unwrap();
            assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], json!(lease.workload_uid), "{backend}");
            assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], kind);
        }
    }

    #[test]
    fn a_pod_waiting_for_the_leases_own_secret_is_still_starting() {
        let env = Env::new();
        let provider = env.provider();
        let first = provider.acquire(request(&config("sandbox"), "acq-30")).unwrap();
        // The Secret is gone (an attempt stopped between its two creates, say) and the pod
        // restarts: the kubelet holds it in CreateContainerConfigError until the Secret exists.
        env.kube.remove("secrets", NS, "pc-acq-30-env");
        env.kube.remove("pods", NS, "pc-acq-30");
        for _ in 0..2 {
            env.clock.advance(Duration::from_secs(2));
            env.kube.settle();
        }
        let pod = env.kube.object("pods", NS, "pc-acq-30").unwrap();
        assert_eq!(pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "CreateContainerConfigError");
        let second = provider.acquire(request(&config("sandbox"), "acq-30")).unwrap();
        assert_eq!(second.workload_uid, first.workload_uid);
        let secret = env.kube.object("secrets", NS, "pc-acq-30-env").unwrap();
        assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], json!(first.workload_uid));
    }

    #[test]
    fn a_dropped_watch_resumes_and_a_gone_watch_relists() {
        let env = Env::new();
        env.kube.fail(Verb::WatchNext, "pods", 1, KubeError::Transport("connection reset".into()));
        env.provider().acquire(request(&config("sandbox"), "acq-16")).unwrap();
        assert_eq!(env.kube.count(Verb::Watch, "pods"), 2, "reopened once");
        assert_eq!(env.kube.count(Verb::List, "pods"), 0, "resumed, not re-listed");

        let env = Env::new();
        env.kube.fail(Verb::WatchNext, "pods", 2, KubeError::Gone("too old resource version".into()));
        env.provider().acquire(request(&config("job"), "acq-17")).unwrap();
        assert_eq!(env.kube.count(Verb::List, "pods"), 1, "re-listed after 410");
    }

    #[test]
    fn a_lost_cluster_is_reported_as_lost_within_seconds() {
        for backend in ["sandbox", "job"] {
            let env = Env::new();
            env.kube.set_behaviour(PodBehaviour::NeverReady);
            env.kube.disconnect_after(Duration::from_secs(1));
            let err = env.provider().acquire(request(&config(backend), "acq-35")).unwrap_err();
            assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{backend}: {err}");
            assert!(err.message().contains("the cluster stopped answering"), "{backend}: {err}");
            assert!(err.message().contains("Clean-up could not delete"), "{backend}: {err}");
            assert!(
                env.clock.monotonic() <= Duration::from_secs(6),
                "{backend}: reported at {:?}, not at the 20 s deadline",
                env.clock.monotonic()
            );
        }
    }

    #[test]
    fn secrets_never_reach_errors_or_logs_even_when_the_server_echoes_them() {
        let env = Env::new();
        env.kube.fail(Verb::Create, "sandboxes", 1, KubeError::Invalid(format!("spec: value {SECRET_VALUE} is bad")));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-18")).unwrap_err();
        assert!(err.message().contains("[redacted]"), "{err}");
        assert_no_secret(&env, &format!("{err} {err:?}"));
        assert_no_secret(&env, &format!("{:?}", request(&config("sandbox"), "acq-18")));
    }

    #[test]
    fn reusable_leases_need_a_workspace_volume() {
        let env = Env::new();
        let mut req = request(&config("sandbox"), "acq-19");
        req.reusable = true;
        let lease = env.provider().acquire(req.clone()).unwrap();
        assert!(!lease.reusable);
        assert!(env.log_text().contains("reusable lease not possible"));

        let with_volume = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "5Gi"}}}));
        let lease = env
            .provider()
            .acquire(AcquireRequest { config: with_volume, ..request(&config("sandbox"), "acq-20") })
            .unwrap();
        assert!(!lease.reusable, "not asked for");
        let mut req =
            request(&config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "5Gi"}}})), "acq-21");
        req.reusable = true;
        let lease = env.provider().acquire(req).unwrap();
        assert!(lease.reusable);
        assert_eq!(lease.provider_lease_id, "k8s:sandbox:sandboxes:pc-acq-21:pvc");
        let sandbox = env.kube.object("sandboxes", NS, "pc-acq-21").unwrap();
        assert_eq!(sandbox["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "workspace");
        let metadata = LeaseMetadata::parse_lenient(&lease.metadata);
        assert_eq!(metadata.workspace_pvc.as_deref(), Some("workspace-pc-acq-21"));
    }

    #[test]
    fn no_secret_env_means_no_secret_object() {
        let env = Env::new();
        let req = AcquireRequest { env: Vec::new(), ..request(&config("sandbox"), "acq-22") };
        let lease = env.provider().acquire(req).unwrap();
        assert!(env.kube.object("secrets", NS, "pc-acq-22-env").is_none());
        assert_eq!(LeaseMetadata::parse_lenient(&lease.metadata).secret_name, None);
    }

    #[test]
    fn agent_sandbox_missing_is_refused_before_creating() {
        let env = Env::new();
        env.kube.serve_sandbox_versions(&[]);
        let err = env.provider().acquire(request(&config("sandbox"), "acq-23")).unwrap_err();
        assert!(err.message().contains("agent-sandbox is not installed"), "{err}");
        assert_nothing_left(&env);
    }
}
