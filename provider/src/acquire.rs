//! Acquire: provision a sandbox and wait until it is ready, idempotently on the acquisition id.
//!
//! Everything that can be refused is checked before the first create (config, ids, env,
//! expiry, served API version), so a refusal leaves nothing behind. A create that meets an
//! object of the same name (409) adopts it only when its labels prove it is this acquisition's
//! and its spec fingerprint matches. Any failure after the first create deletes what this call
//! created or adopted, with its own short budget, and returns the original error.

use std::collections::BTreeMap;
use std::time::Duration;

pub use sandbox_contract::{AcquireRequest, EnvVar};
use serde_json::{Value, json};

use crate::api_versions;
use crate::clock::{Clock, Deadline, rfc3339_seconds};
use crate::config::{self, Backend, Config};
use crate::errors::{FromKube, ProviderError};
use crate::job_manifest::{self, JobParams};
use crate::kube_api::{DeleteOptions, Kube, KubeError, PatchType, Propagation, ResourceType};
use crate::lease::{Lease, LeaseMetadata};
use crate::log::Log;
use crate::naming::{self, ANNOTATION_ACQUISITION_ID, ANNOTATION_SPEC_HASH, Identity, LABEL_ACQUISITION_ID, LeaseId};
use crate::object;
use crate::pod_spec::{self, PodInputs};
use crate::readiness::{self, Start, Target, WaitError};
use crate::redact::{RedactingLog, Redactor};
use crate::sandbox_manifest::{self, SandboxParams};
use crate::secret;
use crate::workload_state::expiry_of;

/// How long clean-up after a failed acquire may take, on top of the acquire's own deadline.
pub const COMPENSATION_BUDGET: Duration = Duration::from_secs(5);

/// Everything decided before the first create.
struct Plan {
    config: Config,
    identity: Identity,
    name: String,
    lease_id: LeaseId,
    resource: ResourceType,
    kind: &'static str,
    workload: Value,
    secret: Option<(String, Value, BTreeMap<String, String>)>,
    spec_hash: String,
    expiry_ms: i64,
    reusable: bool,
}

impl Plan {
    fn describe(&self) -> String {
        format!("{} {}/{}", self.kind, self.config.namespace, self.name)
    }
}

/// An object this call created or adopted, to delete if the acquire fails.
struct Touched {
    kind: &'static str,
    resource: ResourceType,
    name: String,
    /// `None` when a create's answer was lost: the object may or may not exist.
    uid: Option<String>,
    /// Made by an earlier attempt of this acquisition. Until the workload is adopted too, it
    /// may serve that attempt's live sandbox, so it is neither changed nor cleaned up.
    adopted: bool,
}

/// Whether a create failure leaves open that the object was created (the answer was lost).
fn maybe_created(error: &KubeError) -> bool {
    match error {
        KubeError::Transport(_) | KubeError::Timeout(_) | KubeError::Unavailable { .. } => true,
        KubeError::Other { code, .. } => *code >= 500,
        _ => false,
    }
}

/// Whether an object's labels prove it belongs to this acquisition. Only keys under the
/// provider's own prefix count: a host may restamp `app.kubernetes.io/managed-by` with its own
/// value on every create.
fn proves_acquisition(object: &Value, identity: &Identity) -> bool {
    object::label(object, LABEL_ACQUISITION_ID) == Some(naming::label_value(&identity.acquisition_id).as_str())
        && object::annotation(object, ANNOTATION_ACQUISITION_ID).is_none_or(|raw| raw == identity.acquisition_id)
}

fn not_ours(kind: &str, namespace: &str, name: &str, found: &Value) -> ProviderError {
    let show = |v: Option<&str>| v.map_or_else(|| "absent".to_string(), |s| format!("{s:?}"));
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
    Ok(Plan { config, identity, name, lease_id, resource, kind, workload, secret, spec_hash, expiry_ms, reusable })
}

/// Creates the Secret, or finds the one an earlier attempt of this acquisition made. It is
/// pushed to `touched` before the create, so a lost answer is still cleaned up.
fn create_secret<K: Kube>(
    kube: &K,
    plan: &Plan,
    name: &str,
    manifest: &Value,
    touched: &mut Vec<Touched>,
) -> Result<(), ProviderError> {
    let ns = plan.config.namespace.as_str();
    let resource = api_versions::secrets();
    touched.push(Touched {
        kind: "Secret",
        resource: resource.clone(),
        name: name.to_string(),
        uid: None,
        adopted: false,
    });
    let (uid, adopted) = match kube.create(&resource, Some(ns), manifest) {
        Ok(created) => (object::uid(&created).map(str::to_string), false),
        Err(KubeError::AlreadyExists(_)) => {
            let existing = kube
                .get(&resource, Some(ns), name)
                .map_err(|e| ProviderError::from_kube(&e, &format!("get Secret {ns}/{name}")))?;
            if !proves_acquisition(&existing, &plan.identity) {
                touched.pop();
                return Err(not_ours("Secret", ns, name, &existing));
            }
            (object::uid(&existing).map(str::to_string), true)
        }
        Err(e) => {
            if !maybe_created(&e) {
                touched.pop();
            }
            return Err(ProviderError::from_kube(&e, &format!("create Secret {ns}/{name}")));
        }
    };
    if let Some(last) = touched.last_mut() {
        last.uid = uid;
        last.adopted = adopted;
    }
    Ok(())
}

/// Forgets adopted objects: the workload was refused, so they may belong to a live sandbox of
/// an earlier attempt and must not be cleaned up by this one.
fn refuse(touched: &mut Vec<Touched>, error: ProviderError) -> ProviderError {
    touched.retain(|t| !t.adopted);
    error
}

/// Creates the workload, or adopts the one an earlier attempt made. Returns the object and
/// whether it was created by this call.
fn create_workload<K: Kube>(kube: &K, plan: &Plan, touched: &mut Vec<Touched>) -> Result<(Value, bool), ProviderError> {
    let ns = plan.config.namespace.as_str();
    touched.push(Touched {
        kind: plan.kind,
        resource: plan.resource.clone(),
        name: plan.name.clone(),
        uid: None,
        adopted: false,
    });
    let (workload, created) = match kube.create(&plan.resource, Some(ns), &plan.workload) {
        Ok(created) => (created, true),
        Err(KubeError::AlreadyExists(_)) => {
            // Not made by this call: never cleaned up unless adopted below.
            touched.pop();
            let existing = match kube.get(&plan.resource, Some(ns), &plan.name) {
                Ok(existing) => existing,
                Err(e) => {
                    return Err(refuse(touched, ProviderError::from_kube(&e, &format!("get {}", plan.describe()))));
                }
            };
            if !proves_acquisition(&existing, &plan.identity) {
                return Err(refuse(touched, not_ours(plan.kind, ns, &plan.name, &existing)));
            }
            if object::annotation(&existing, ANNOTATION_SPEC_HASH) != Some(plan.spec_hash.as_str()) {
                let error = ProviderError::conflict(
                    format!(
                        "{} was made by an earlier attempt of acquisition {:?} with a different spec (the config or the \
                         env changed between attempts). Destroy lease {} and acquire with a new acquisition id.",
                        plan.describe(),
                        plan.identity.acquisition_id,
                        plan.lease_id
                    ),
                    false,
                );
                return Err(refuse(touched, error));
            }
            if object::is_terminating(&existing) {
                let error = ProviderError::conflict(
                    format!(
                        "{} from an earlier attempt of this acquisition is being deleted; retry in a few seconds.",
                        plan.describe()
                    ),
                    true,
                );
                return Err(refuse(touched, error));
            }
            touched.push(Touched {
                kind: plan.kind,
                resource: plan.resource.clone(),
                name: plan.name.clone(),
                uid: None,
                adopted: true,
            });
            (existing, false)
        }
        Err(e) => {
            if !maybe_created(&e) {
                touched.pop();
            }
            return Err(ProviderError::from_kube(&e, &format!("create {}", plan.describe())));
        }
    };
    if let Some(last) = touched.last_mut() {
        last.uid = object::uid(&workload).map(str::to_string);
    }
    Ok((workload, created))
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
    if let Some((name, manifest, _)) = &plan.secret {
        create_secret(kube, plan, name, manifest, touched)?;
    }
    let (workload, created) = create_workload(kube, plan, touched)?;
    let uid = object::uid(&workload)
        .ok_or_else(|| ProviderError::internal(format!("the API server returned {} without a uid", plan.describe())))?
        .to_string();
    if let Some((name, _, data)) = &plan.secret {
        // The workload is this acquisition's now: own the Secret, and if an earlier attempt made
        // it, bring its values up to date (the host may have rotated one since).
        let adopted = touched.iter().any(|t| t.kind == "Secret" && t.adopted);
        let mut patch = secret::owner_patch(&plan.resource.api_version(), plan.kind, &plan.name, &uid);
        if adopted {
            patch["stringData"] = json!(data);
        }
        kube.patch(&api_versions::secrets(), Some(ns), name, PatchType::Merge, &patch, None)
            .map_err(|e| ProviderError::from_kube(&e, &format!("set the owner of Secret {ns}/{name}")))?;
    }
    log.info(
        if created { "workload created; waiting for readiness" } else { "adopted the workload of an earlier attempt" },
        &[("kind", plan.kind), ("namespace", ns), ("name", &plan.name), ("uid", &uid)],
    );

    let start = match (created, object::resource_version(&workload)) {
        (true, Some(rv)) => Start::After(rv.to_string()),
        _ => Start::List,
    };
    let target = Target {
        backend: plan.config.backend,
        namespace: ns,
        name: &plan.name,
        resource: &plan.resource,
        uid: &uid,
        job_retries: plan.config.job.backoff_limit > 0,
    };
    let pod = readiness::wait_ready(kube, clock, log, &target, start, deadline).map_err(|e| match e {
        WaitError::Failed(f) => f.into_error(),
        WaitError::Api(e) => e,
        WaitError::Timeout(why) => ProviderError::timeout(format!(
            "{} was not ready within {} s: {why}. The image may still be pulling or the cluster may be slow; retry, \
             or raise readinessTimeoutSeconds (keeping it inside the host's call budget).",
            target.describe(),
            plan.config.readiness_timeout_seconds
        )),
    })?;

    let expires_at = if created { plan.expiry_ms } else { expiry_of(&workload).unwrap_or(plan.expiry_ms) };
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
        workload_uid: uid,
        pod_name: Some(pod.name),
        pod_uid: Some(pod.uid).filter(|u| !u.is_empty()),
        pod_ip: pod.ip,
        expires_at: Some(expires_at),
        reusable: plan.reusable,
        metadata: metadata.to_json(),
    })
}

/// Deletes what a failed acquire created or adopted, newest first, within its own budget.
/// Returns what could not be deleted.
fn compensate<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    namespace: &str,
    identity: &Identity,
    touched: &[Touched],
) -> Vec<String> {
    let budget = Deadline::after(clock, COMPENSATION_BUDGET);
    let mut left = Vec::new();
    for t in touched.iter().rev() {
        let what = format!("{} {namespace}/{}", t.kind, t.name);
        if budget.passed(clock) {
            left.push(format!("{what} (clean-up budget spent)"));
            continue;
        }
        let uid = match &t.uid {
            Some(uid) => uid.clone(),
            None => match kube.get(&t.resource, Some(namespace), &t.name) {
                Ok(found) if proves_acquisition(&found, identity) => match object::uid(&found) {
                    Some(uid) => uid.to_string(),
                    None => continue,
                },
                Ok(_) | Err(KubeError::NotFound(_)) => continue,
                Err(e) => {
                    left.push(format!("{what} ({e})"));
                    continue;
                }
            },
        };
        let options = DeleteOptions {
            propagation: Some(Propagation::Background),
            precondition_uid: Some(uid),
            ..Default::default()
        };
        match kube.delete(&t.resource, Some(namespace), &t.name, &options) {
            Ok(()) | Err(KubeError::NotFound(_)) => {
                log.info("clean-up after a failed acquire deleted an object", &[("object", &what)]);
            }
            // The precondition failed: another object holds the name now, and it is not ours.
            Err(KubeError::Conflict(_)) => {}
            Err(e) => left.push(format!("{what} ({e})")),
        }
    }
    left
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

fn acquire_unredacted<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    request: &AcquireRequest,
) -> Result<Lease, ProviderError> {
    let started = clock.monotonic();
    let plan = plan(kube, clock, log, request)?;
    let budget = Duration::from_secs(u64::from(plan.config.readiness_timeout_seconds));
    let deadline = Deadline::after(clock, budget.saturating_sub(clock.monotonic().saturating_sub(started)));
    let mut touched = Vec::new();
    match provision(kube, clock, log, &plan, deadline, &mut touched) {
        Ok(lease) => Ok(lease),
        Err(error) if touched.is_empty() => Err(error),
        Err(error) => {
            let left = compensate(kube, clock, log, &plan.config.namespace, &plan.identity, &touched);
            if left.is_empty() {
                Err(error.map_message(|m| format!("{m} Everything this acquire created was deleted.")))
            } else {
                log.warn("clean-up after a failed acquire left objects behind", &[("objects", &left.join("; "))]);
                Err(error.map_message(|m| {
                    format!(
                        "{m} Clean-up could not delete: {}; the cluster deletes them at the lease's expiry ({}), or \
                         destroy lease {} to remove them now.",
                        left.join("; "),
                        rfc3339_seconds(plan.expiry_ms),
                        plan.lease_id
                    )
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::api_versions::SandboxVersion;
    use crate::fake_kube::{PodBehaviour, Verb};
    use crate::testkit::{Env, NOW, NS, SECRET_VALUE, config, config_with, request};

    fn assert_nothing_left(env: &Env) {
        assert!(env.kube.names_in(NS).is_empty(), "left behind: {:?}", env.kube.names_in(NS));
    }

    fn assert_no_secret(env: &Env, text: &str) {
        assert!(!text.contains(SECRET_VALUE), "secret leaked into: {text}");
        assert!(!env.log_text().contains(SECRET_VALUE), "secret leaked into the log: {}", env.log_text());
    }

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
    fn a_retry_after_a_crash_between_creates_adopts_the_secret_and_refreshes_it() {
        let env = Env::new();
        let identity = Identity { run_id: "run-1".into(), acquisition_id: "acq-6b".into(), agent_id: None };
        env.kube.put(
            &api_versions::secrets(),
            NS,
            json!({"metadata": {"name": "pc-acq-6b-env", "labels": identity.labels()}, "data": {"API_KEY": "b2xk"}}),
        );
        let lease = env.provider().acquire(request(&config("sandbox"), "acq-6b")).unwrap();
        let secret = env.kube.object("secrets", NS, "pc-acq-6b-env").unwrap();
        assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], json!(lease.workload_uid));
        assert_ne!(secret["data"]["API_KEY"], "b2xk", "the rotated value replaced the stale one");
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
        assert_eq!(env.kube.names_in(NS), vec!["sandboxes/pc-acq-8"], "our Secret was cleaned up, theirs kept");
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
    fn a_failure_after_the_first_create_cleans_up_and_returns_the_original_error() {
        let env = Env::new();
        env.kube.fail(Verb::Patch, "secrets", 1, KubeError::Invalid("ownerReferences: bad".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-10")).unwrap_err();
        assert_eq!(err.kind(), "rejected");
        assert!(err.message().starts_with("set the owner of Secret sandboxes/pc-acq-10-env was rejected"), "{err}");
        assert!(err.message().contains("Everything this acquire created was deleted"), "{err}");
        assert_nothing_left(&env);
    }

    #[test]
    fn a_refused_workload_create_removes_the_secret() {
        let env = Env::new();
        env.kube.fail(Verb::Create, "jobs", 1, KubeError::Forbidden("jobs is not allowed by policy".into()));
        let err = env.provider().acquire(request(&config("job"), "acq-11")).unwrap_err();
        assert_eq!(err.kind(), "forbidden");
        assert_nothing_left(&env);
    }

    #[test]
    fn a_lost_create_answer_is_still_cleaned_up() {
        let env = Env::new();
        // The Sandbox is created, but its answer is lost: clean-up must still find and delete it
        // (after checking its labels), and the Secret made before it.
        env.kube.lose_create_answer("sandboxes", 1, KubeError::Timeout("no answer".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-12")).unwrap_err();
        assert_eq!(err.kind(), "timeout");
        assert!(err.message().contains("Everything this acquire created was deleted"), "{err}");
        assert_nothing_left(&env);

        let env = Env::new();
        env.kube.fail(Verb::Create, "secrets", 1, KubeError::Timeout("no answer".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-12")).unwrap_err();
        assert_eq!(err.kind(), "timeout");
        assert!(env.kube.calls().iter().any(|c| c.verb == Verb::Get && c.name.as_deref() == Some("pc-acq-12-env")));
        assert_nothing_left(&env);
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
    fn a_410_on_a_clean_up_delete_is_not_a_deleted_object() {
        let env = Env::new();
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        env.kube.fail_always(Verb::Delete, "sandboxes", KubeError::Gone("the resource version is too old".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-25")).unwrap_err();
        assert!(!err.message().contains("Everything this acquire created was deleted"), "{err}");
        assert!(err.message().contains("Clean-up could not delete: Sandbox sandboxes/pc-acq-25"), "{err}");
        assert!(env.kube.object("sandboxes", NS, "pc-acq-25").is_some());
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
