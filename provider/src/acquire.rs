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
//! The workload is a Sandbox, a Job, or (backend `claim`) a SandboxClaim: its plan and its wait
//! are the backend's (`backend`), the checks, the writes and the clean-up are here, for all.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::k8s_types::PodTemplateSpec;
pub use contract::{AcquireRequest, EnvVar};
use serde_json::{Value, json};

use crate::adoption::{self, Origin, Workload};
use crate::api_versions::SandboxVersion;
use crate::backend;
use crate::clock::{Clock, Deadline};
use crate::compensation::{self, Scope, Touched};
use crate::config::{self, Config};
use crate::errors::ProviderError;
use crate::expiry;
use crate::host_fit;
use crate::input_limits;
use crate::kube_api::{Kube, ResourceType};
use crate::lease::{Lease, LeaseMetadata};
use crate::log::Log;
use crate::naming::{self, ANNOTATION_SPEC_HASH, Identity, LeaseId};
use crate::object;
use crate::pod_spec::{self, PodInputs};
use crate::readiness::{self, Start, Target, WaitError};
use crate::redact::{RedactingLog, Redactor};
use crate::rfc3339;
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
    /// The time of the call (epoch millis).
    pub(crate) now: i64,
}

impl Basics {
    /// The labels of every object of the lease: the identity's and the config's.
    pub(crate) fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.identity.labels();
        labels.extend(self.config.labels.clone());
        labels
    }

    /// The annotations of every object of the lease: the config's and the identity's.
    pub(crate) fn annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = self.config.annotations.clone();
        annotations.extend(self.identity.annotations());
        annotations
    }
}

/// The workload a backend planned, with what its lease records.
pub(crate) struct Planned {
    pub(crate) resource: ResourceType,
    pub(crate) version: Option<SandboxVersion>,
    pub(crate) kind: &'static str,
    pub(crate) workload: Value,
    pub(crate) spec_hash: String,
    /// The lease's env for its Secret (none when empty).
    pub(crate) secret_data: BTreeMap<String, String>,
    pub(crate) workspace_pvc: bool,
    pub(crate) reusable: bool,
}

/// The plan of a planned workload: its size checked, the lease's Secret and id made.
pub(crate) fn assemble(basics: Basics, planned: Planned) -> Result<Plan, ProviderError> {
    let (labels, annotations) = (basics.labels(), basics.annotations());
    let Basics { config, identity, name, expiry_ms, .. } = basics;
    input_limits::check_object(&format!("{} {}/{name}", planned.kind, config.namespace), &planned.workload)?;
    let secret = if planned.secret_data.is_empty() {
        None
    } else {
        let secret_name = naming::secret_name(&name);
        let manifest =
            secret::secret_manifest(&secret_name, &config.namespace, &labels, &annotations, &planned.secret_data)?;
        input_limits::check_object(&format!("Secret {}/{secret_name}", config.namespace), &manifest)?;
        Some((secret_name, manifest, planned.secret_data))
    };
    let lease_id = LeaseId {
        backend: config.backend,
        namespace: config.namespace.clone(),
        name: name.clone(),
        workspace_pvc: planned.workspace_pvc,
    };
    Ok(Plan {
        config,
        identity,
        name,
        lease_id,
        resource: planned.resource,
        version: planned.version,
        kind: planned.kind,
        workload: planned.workload,
        secret,
        spec_hash: planned.spec_hash,
        expiry_ms,
        reusable: planned.reusable,
    })
}

/// A fingerprint of `material`: everything an adopted workload must share with this request.
pub(crate) fn fingerprint(material: &Value) -> String {
    naming::fnv1a64_hex(&canonical_json(material))
}

/// JSON with object keys sorted, so the fingerprint does not depend on map ordering; written
/// into one buffer (a string per field made it a twentieth of an acquire's WebAssembly time).
fn canonical_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut fields: Vec<(&String, &Value)> = map.iter().collect();
            fields.sort_by_key(|(key, _)| *key);
            out.push(b'{');
            for (i, (key, value)) in fields.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(key.as_str(), out);
                out.push(b':');
                write_canonical(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

/// A string, number, bool or null as serde_json writes it (writing to a `Vec` cannot fail).
fn write_scalar<T: serde::Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, value);
}

/// The pod of a Sandbox or Job, as its backend plans it.
pub(crate) struct PodPlan {
    pub(crate) template: PodTemplateSpec,
    pub(crate) labels: BTreeMap<String, String>,
    /// The workload's annotations: the pod's and the spec fingerprint.
    pub(crate) annotations: BTreeMap<String, String>,
    pub(crate) spec_hash: String,
    /// The env's secret values, for the lease's Secret.
    pub(crate) secret_data: BTreeMap<String, String>,
}

/// The env of a Sandbox's or Job's pod: plain values in the pod, secret ones as references to
/// the lease's Secret. Checked first, so a bad env is the first refusal.
pub(crate) fn pod_env(basics: &Basics, request: &AcquireRequest) -> Result<secret::EnvPlan, ProviderError> {
    secret::plan_env(&basics.config.env, &request.env, &naming::secret_name(&basics.name))
}

/// Whether a Sandbox or Job lease can be reusable (it needs a persistent workspace); says so
/// in the log when it was asked for and cannot be.
pub(crate) fn reusable(log: &dyn Log, request: &AcquireRequest, name: &str, workspace: bool) -> bool {
    let reusable = request.reusable && workspace;
    if request.reusable && !reusable {
        log.warn(
            "reusable lease not possible: it needs backend sandbox with sandbox.workspaceVolume; the lease is ephemeral",
            &[("name", name)],
        );
    }
    reusable
}

/// The pod template of a Sandbox or Job and its fingerprint (everything an adopted workload
/// must share with this request, but the expiry, which differs per attempt).
pub(crate) fn plan_pod(
    basics: &Basics,
    env: secret::EnvPlan,
    kind: WorkloadKind,
    workspace: bool,
) -> Result<PodPlan, ProviderError> {
    let config = &basics.config;
    let labels = basics.labels();
    let annotations = basics.annotations();
    let template = pod_spec::pod_template(
        config,
        PodInputs {
            labels: labels.clone(),
            annotations: annotations.clone(),
            env: env.pod_env,
            workspace_claim: workspace,
            restart_never: kind == WorkloadKind::Job,
        },
    );
    let template_json = serde_json::to_value(&template)
        .map_err(|e| ProviderError::internal(format!("could not encode the pod template: {e}")))?;
    let spec_hash = fingerprint(&json!({
        "backend": config.backend.as_str(),
        "template": template_json,
        "workspaceVolume": config.sandbox.workspace_volume,
        "job": config.job,
    }));
    let mut workload_annotations = annotations;
    workload_annotations.insert(ANNOTATION_SPEC_HASH.to_string(), spec_hash.clone());
    Ok(PodPlan { template, labels, annotations: workload_annotations, spec_hash, secret_data: env.secret_data })
}

/// Decides everything and builds the manifests, without writing to the cluster: what every
/// backend checks here, the rest in its own `plan`.
pub(crate) fn plan<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    request: &AcquireRequest,
) -> Result<Plan, ProviderError> {
    let (config, warnings) = config::parse_with_warnings(&request.config)?;
    // What validate-config would warn of: a misspelt key is otherwise silently a default.
    for warning in &warnings {
        log.warn(
            "the config has a problem acquire goes on without",
            &[("path", &warning.path), ("problem", &warning.message)],
        );
    }
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
    let steps = backend::steps::<K>(config.backend);
    steps.plan(kube, log, request, Basics { config, identity, name, expiry_ms, now })
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
    backend::steps::<K>(plan.config.backend).wait(kube, clock, log, plan, &workload, started, deadline)
}

/// What a Sandbox's or Job's readiness wait watches.
pub(crate) fn pod_target<'a>(plan: &'a Plan, workload: &'a Workload, kind: WorkloadKind) -> Target<'a> {
    Target {
        kind,
        namespace: &plan.config.namespace,
        name: &plan.name,
        resource: &plan.resource,
        uid: &workload.uid,
        secret: plan.secret.as_ref().map(|(name, _, _)| name.as_str()),
        job_retries: plan.config.job.backoff_limit > 0,
    }
}

/// Where the readiness wait starts: after the create, or from the adopted object.
pub(crate) fn wait_start(workload: &Workload) -> Option<Start> {
    match workload.origin {
        Origin::Created => object::resource_version(&workload.object).map(|rv| Start::After(rv.to_string())),
        Origin::Adopted | Origin::AdoptedSuspended => Some(Start::List(Some(workload.object.clone()))),
    }
}

/// Waits until a Sandbox's or Job's pod is ready, from `start`: the lease.
#[allow(clippy::too_many_arguments)]
pub(crate) fn wait_pod<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    plan: &Plan,
    workload: &Workload,
    target: &Target<'_>,
    start: Option<Start>,
    started: Duration,
    deadline: Deadline,
) -> Result<Lease, ProviderError> {
    let start = start.unwrap_or(Start::List(None));
    let expires_at = lease_expiry(plan, workload);
    let pod = readiness::wait_ready(kube, clock, log, target, start, deadline).map_err(|e| match e {
        WaitError::Failed(f) => wait_failure(clock, &target.describe(), expires_at, f),
        WaitError::Api(e) => e,
        WaitError::Timeout(why) => ProviderError::timeout(format!(
            "{} was not ready within {} s: {why}. The image may still be pulling or the cluster may be slow; retry, \
             or raise readinessTimeoutSeconds (keeping it inside the host's call deadline).",
            target.describe(),
            elapsed_seconds(clock, started)
        )),
    })?;
    Ok(lease(plan, workload, pod, expires_at, metadata(clock, plan, workload)))
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
        container: None,
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
        // The caller gets the error and reports it (serve logs failed calls): a warning here
        // would say it twice.
        Err(e) => log.info("acquire failed", &[("error", &e.to_string()), ("elapsed_ms", &elapsed)]),
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
            let steps = backend::steps::<K>(plan.config.backend);
            let leak_guard = |what: &str, expires_at: i64| steps.leak_guard(what, expires_at, &plan.config);
            let scope = Scope {
                namespace: &plan.config.namespace,
                identity: &plan.identity,
                leak_guard: &leak_guard,
                lease_id: &lease_id,
            };
            let cleaned = compensation::compensate(kube, clock, log, &scope, &touched);
            if cleaned.is_empty() { Err(error) } else { Err(error.map_message(|m| format!("{m} {cleaned}"))) }
        }
    }
}

#[cfg(test)]
mod tests;
