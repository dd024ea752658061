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
//!
//! The workload is a Sandbox, a Job, or (backend `claim`) a SandboxClaim; what differs for a
//! claim (its plan and its wait) is in `claim::acquire`, the writes and the clean-up are shared.

use std::collections::BTreeMap;
use std::time::Duration;

pub use contract::{AcquireRequest, EnvVar};
use serde_json::{Value, json};

use crate::adoption::{self, Origin, Workload};
use crate::api_versions::{self, SandboxVersion};
use crate::claim;
use crate::clock::{Clock, Deadline};
use crate::compensation::{self, Scope, Touched};
use crate::config::{self, Backend, Config};
use crate::errors::{FromKube, ProviderError};
use crate::expiry;
use crate::host_fit;
use crate::input_limits;
use crate::job_manifest::{self, JobParams};
use crate::kube_api::{Kube, KubeError, PatchType, ResourceType};
use crate::lease::{Lease, LeaseMetadata};
use crate::log::Log;
use crate::naming::{self, ANNOTATION_SPEC_HASH, Identity, LeaseId};
use crate::object;
use crate::old_pod;
use crate::pod_spec::{self, PodInputs};
use crate::readiness::{self, Start, Target, WaitError};
use crate::redact::{RedactingLog, Redactor};
use crate::rfc3339;
use crate::sandbox_manifest::{self, SandboxParams};
use crate::secret;
use crate::workload_state::{Cause, Failure, PodInfo, WorkloadKind, expiry_of};

/// Everything decided before the first write.
pub(crate) struct Plan {
    pub(crate) config: Config,
    pub(crate) identity: Identity,
    pub(crate) name: String,
    pub(crate) lease_id: LeaseId,
    pub(crate) resource: ResourceType,
    /// The Sandbox version in use; `None` for a Job or a claim.
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

/// What a plan starts from: the config and what the request's ids and expiry decide.
pub(crate) struct Basics {
    pub(crate) config: Config,
    pub(crate) identity: Identity,
    pub(crate) name: String,
    pub(crate) expiry_ms: i64,
}

/// A fingerprint of `material`: everything an adopted workload must share with this request.
pub(crate) fn fingerprint(material: &Value) -> String {
    naming::fnv1a64_hex(canonical_json(material).as_bytes())
}

/// The fingerprint of a Sandbox or Job: the pod template and the workload settings, excluding
/// the expiry, which differs per attempt.
fn spec_hash(backend: Backend, template: &Value, config: &Config) -> String {
    fingerprint(&json!({
        "backend": backend.as_str(),
        "template": template,
        "workspaceVolume": config.sandbox.workspace_volume,
        "job": config.job,
    }))
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
pub(crate) fn plan<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    request: &AcquireRequest,
) -> Result<Plan, ProviderError> {
    let config = config::parse(&request.config)?;
    if let Some(problem) = host_fit::problems(&config.namespace, config.readiness_timeout_seconds, kube, clock).pop() {
        return Err(ProviderError::invalid_config(problem.path, problem.message));
    }
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
    let expiry_ms =
        expiry::lease_expiry(now, config.lease_ttl_seconds, request.requested_expires_at).ok_or_else(|| {
            ProviderError::rejected(format!(
                "requested-expires-at ({}) is not at least a second in the future; ask for a later expiry.",
                rfc3339::format_seconds(request.requested_expires_at.unwrap_or(now))
            ))
        })?;
    let kind = match config.backend {
        Backend::Claim => {
            return claim::acquire::plan(kube, log, request, Basics { config, identity, name, expiry_ms });
        }
        Backend::Sandbox => WorkloadKind::Sandbox,
        Backend::Job => WorkloadKind::Job,
    };

    let secret_name = naming::secret_name(&name);
    let env = secret::plan_env(&config.env, &request.env, &secret_name)?;
    let version = match kind {
        WorkloadKind::Sandbox => Some(api_versions::resolve(kube, config.sandbox_api_version)?),
        WorkloadKind::Job => None,
    };
    let workspace = match kind {
        WorkloadKind::Sandbox => config.sandbox.workspace_volume.as_ref(),
        WorkloadKind::Job => None,
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
            restart_never: kind == WorkloadKind::Job,
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
            kind.as_str(),
            sandbox_manifest::sandbox(&SandboxParams {
                name: &name,
                namespace: &config.namespace,
                version,
                labels: &labels,
                annotations: &workload_annotations,
                template: &template,
                shutdown_time: &rfc3339::format_seconds(expiry_ms),
                workspace,
            })?,
        ),
        None => (
            api_versions::jobs(),
            kind.as_str(),
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
    input_limits::check_object(&format!("{kind} {}/{name}", config.namespace), &workload)?;
    let secret = if env.secret_data.is_empty() {
        None
    } else {
        let manifest =
            secret::secret_manifest(&secret_name, &config.namespace, &labels, &annotations, &env.secret_data)?;
        input_limits::check_object(&format!("Secret {}/{secret_name}", config.namespace), &manifest)?;
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
    started: Duration,
    deadline: Deadline,
    touched: &mut Vec<Touched>,
) -> Result<Lease, ProviderError> {
    let ns = plan.config.namespace.as_str();
    let workload = adoption::put_workload(kube, clock, plan, deadline, touched)?;
    adoption::put_secret(kube, clock, plan, &workload, deadline, touched)?;
    let uid = workload.uid.as_str();
    let done = match workload.origin {
        Origin::Created => "workload created; waiting for readiness",
        Origin::Adopted => "adopted the workload of an earlier attempt",
        Origin::AdoptedSuspended => "adopted the suspended Sandbox of an earlier attempt; resuming it",
    };
    log.info(done, &[("kind", plan.kind), ("namespace", ns), ("name", &plan.name), ("uid", uid)]);
    let kind = match plan.config.backend {
        Backend::Claim => return claim::acquire::finish(kube, clock, log, plan, &workload, started, deadline),
        Backend::Sandbox => WorkloadKind::Sandbox,
        Backend::Job => WorkloadKind::Job,
    };

    let target = Target {
        kind,
        namespace: ns,
        name: &plan.name,
        resource: &plan.resource,
        uid,
        secret: plan.secret.as_ref().map(|(name, _, _)| name.as_str()),
        job_retries: plan.config.job.backoff_limit > 0,
    };
    let start = match workload.origin {
        Origin::Created => object::resource_version(&workload.object).map(|rv| Start::After(rv.to_string())),
        Origin::Adopted => Some(Start::List(Some(workload.object.clone()))),
        Origin::AdoptedSuspended => resume_adopted(kube, clock, log, plan, &target, deadline)?,
    };
    let start = start.unwrap_or(Start::List(None));
    let expires_at = lease_expiry(plan, &workload);
    let pod = readiness::wait_ready(kube, clock, log, &target, start, deadline).map_err(|e| match e {
        WaitError::Failed(f) => wait_failure(clock, &target.describe(), expires_at, f),
        WaitError::Api(e) => e,
        WaitError::Timeout(why) => ProviderError::timeout(format!(
            "{} was not ready within {} s: {why}. The image may still be pulling or the cluster may be slow; retry, \
             or raise readinessTimeoutSeconds (keeping it inside the host's call deadline).",
            target.describe(),
            elapsed_seconds(clock, started)
        )),
    })?;
    Ok(lease(plan, &workload, pod, expires_at, metadata(clock, plan, &workload)))
}

/// Whole seconds since `started`, rounded, for messages.
pub(crate) fn elapsed_seconds(clock: &dyn Clock, started: Duration) -> u128 {
    (clock.monotonic().saturating_sub(started).as_millis() + 500) / 1000
}

/// When the lease ends: this call's expiry for a workload it created, the adopted one's own.
pub(crate) fn lease_expiry(plan: &Plan, workload: &Workload) -> i64 {
    match workload.origin {
        Origin::Created => plan.expiry_ms,
        Origin::Adopted | Origin::AdoptedSuspended => expiry_of(&workload.object).unwrap_or(plan.expiry_ms),
    }
}

/// The lease's metadata as acquire records it.
pub(crate) fn metadata(clock: &dyn Clock, plan: &Plan, workload: &Workload) -> LeaseMetadata {
    LeaseMetadata {
        run_id: Some(plan.identity.run_id.clone()),
        acquisition_id: Some(plan.identity.acquisition_id.clone()),
        agent_id: plan.identity.agent_id.clone(),
        name: Some(plan.name.clone()),
        secret_name: plan.secret.as_ref().map(|(n, _, _)| n.clone()),
        workspace_pvc: plan.lease_id.workspace_pvc.then(|| naming::workspace_pvc_name(&plan.name)),
        acquired_at: Some(clock.now_millis()),
        adopted: workload.origin != Origin::Created,
        previous_pod_uid: None,
        renewed_at: None,
        sandbox: None,
    }
}

/// The lease of a ready sandbox.
pub(crate) fn lease(plan: &Plan, workload: &Workload, pod: PodInfo, expires_at: i64, metadata: LeaseMetadata) -> Lease {
    Lease {
        provider_lease_id: plan.lease_id.to_string(),
        backend: plan.config.backend,
        namespace: plan.config.namespace.clone(),
        api_version: plan.resource.api_version(),
        workload_uid: workload.uid.clone(),
        pod_name: Some(pod.name),
        pod_uid: Some(pod.uid).filter(|u| !u.is_empty()),
        pod_ip: pod.ip,
        claimed_sandbox: metadata.sandbox.clone(),
        expires_at: Some(expires_at),
        reusable: plan.reusable,
        metadata: metadata.to_json(),
    }
}

/// Resumes the adopted suspended Sandbox once its old pod is gone (`old_pod`; its Secret is
/// already up to date, so the new pod reads the current values); the wait starts after the patch.
fn resume_adopted<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    plan: &Plan,
    target: &Target<'_>,
    deadline: Deadline,
) -> Result<Option<Start>, ProviderError> {
    let Some(version) = plan.version else {
        return Err(ProviderError::internal("a suspended Sandbox adopted without a Sandbox version"));
    };
    old_pod::wait_until_gone(kube, clock, log, target, deadline, "retry acquire, which resumes it")?;
    let ns = Some(plan.config.namespace.as_str());
    let patch = sandbox_manifest::resume_patch(version);
    match kube.patch(&plan.resource, ns, &plan.name, PatchType::Merge, &patch, None) {
        Ok(patched) => Ok(object::resource_version(&patched).map(|rv| Start::After(rv.to_string()))),
        Err(KubeError::NotFound(_) | KubeError::NotOwned(_)) => Err(ProviderError::conflict(
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
pub(crate) fn wait_failure(clock: &dyn Clock, what: &str, expires_at: i64, failure: Failure) -> ProviderError {
    let expired = clock.now_millis() >= expires_at;
    let gone = "another attempt of this acquisition gave up on it and cleaned up, or someone deleted it";
    match failure.cause {
        Cause::Deleted if expired => ProviderError::rejected(format!(
            "{what} was deleted while waiting for it: the lease's expiry ({}) passed before it was ready. Ask for \
             a later requested-expires-at (or raise leaseTtlSeconds).",
            rfc3339::format_seconds(expires_at)
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
/// from the call's start, cut short where the host's call deadline would leave no room for the
/// clean-up after a failure ([`compensation::COMPENSATION_BUDGET`]) and a margin.
fn acquire_deadline(clock: &dyn Clock, started: Duration, config: &Config) -> Deadline {
    let wanted = Duration::from_secs(u64::from(config.readiness_timeout_seconds));
    host_fit::wait_deadline(
        clock,
        wanted.saturating_sub(clock.monotonic().saturating_sub(started)),
        compensation::COMPENSATION_BUDGET,
    )
}

/// Refuses to start writing when the host's deadline leaves no time to wait and then clean up:
/// nothing would be ready, and a failure could not be undone in time.
fn check_time_left(clock: &dyn Clock, deadline: Deadline) -> Result<(), ProviderError> {
    match clock.call_remaining() {
        Some(left) if deadline.remaining(clock) < MIN_WAIT => Err(ProviderError::timeout(format!(
            "the host leaves {} ms of this call, too little to wait for a sandbox and still clean up after a \
             failure ({} s); nothing was created. Retry with a fresh call, or raise the host's call-timeout-ms.",
            left.as_millis(),
            compensation::COMPENSATION_BUDGET.as_secs()
        ))),
        _ => Ok(()),
    }
}

/// The shortest readiness wait worth starting an acquire for.
const MIN_WAIT: Duration = Duration::from_secs(1);

fn acquire_unredacted<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    request: &AcquireRequest,
) -> Result<Lease, ProviderError> {
    let started = clock.monotonic();
    let plan = plan(kube, clock, log, request)?;
    let deadline = acquire_deadline(clock, started, &plan.config);
    check_time_left(clock, deadline)?;
    let mut touched = Vec::new();
    match provision(kube, clock, log, &plan, started, deadline, &mut touched) {
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
mod tests;
