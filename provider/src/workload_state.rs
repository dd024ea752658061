//! Reading a Sandbox, a Job or a pod into what the provider must do next: it is ready, still
//! starting (and why), or failed for a reason that waiting will not fix (and, of a ready pod,
//! which container commands go to). (A SandboxClaim is read in `claim::state`, into the same
//! causes.)
//!
//! Readiness (acquire) and resume-check share these readings; they differ only in what a
//! failure becomes: an error for acquire, `expired` for resume when the sandbox is gone for good.

use contract::k8s::pod_container::ContainerNames;
use serde_json::Value;

use crate::errors::ProviderError;
use crate::naming::CONTAINER_NAME;
use crate::object::{self, condition};

pub use contract::k8s::agent_sandbox::{POD_NAME_ANNOTATION, SANDBOX_NAME_HASH_LABEL};
/// The label the Job controller puts on a Job's pods.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// The object whose pods a readiness wait watches: a Sandbox (a claim lease's too) or a Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    Sandbox,
    Job,
}

impl WorkloadKind {
    /// `Sandbox` or `Job`, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sandbox => "Sandbox",
            Self::Job => "Job",
        }
    }
}

/// How a kubelet words a container config error that is only its cache catching up (its
/// `failed to sync secret cache: timed out waiting for the condition`): it clears by itself.
const KUBELET_CACHE_SYNC: [&str; 2] = ["failed to sync secret cache", "failed to sync configmap cache"];

/// Why a sandbox cannot become (or stay) ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The pod failed (error exit, eviction).
    PodFailed,
    /// The container's command exited successfully: a sandbox must keep running.
    PodSucceeded,
    /// The Sandbox passed its `shutdownTime`.
    SandboxExpired,
    /// Several pods claim the workload; the controller refuses to choose.
    MultiplePods,
    /// The image cannot be pulled.
    ImagePull,
    /// The kubelet cannot create the container from its config.
    ContainerConfig,
    /// The container keeps exiting.
    CrashLoop,
    /// No node can run the pod.
    Unschedulable,
    /// The workload object is gone.
    Deleted,
    /// A different object now carries the workload's name.
    Replaced,
    /// The workload is being deleted.
    Terminating,
    /// The Job completed or failed (its deadline passed, or its pod ended).
    JobFinished,
    /// The Sandbox was suspended by someone else.
    Suspended,
    /// The claim controller refused the claim for good (its template or warm pool is missing,
    /// or the template's policy refuses it); the message says what to fix.
    ClaimRefused,
    /// The claim passed its `lifecycle.shutdownTime`.
    ClaimExpired,
    /// The claim stays but its Sandbox is gone, being deleted or replaced: the claim controller
    /// gives it another, empty one.
    SandboxLost,
}

/// A cause and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub cause: Cause,
    pub message: String,
}

impl Failure {
    /// A failure of `cause`.
    pub fn new(cause: Cause, message: impl Into<String>) -> Self {
        Self { cause, message: message.into() }
    }

    /// Whether the sandbox is gone for good (resume-check answers `expired`), rather than
    /// unable to start right now (an error: "could not tell", or "cannot start").
    pub fn ends_sandbox(&self) -> bool {
        matches!(
            self.cause,
            Cause::PodFailed
                | Cause::PodSucceeded
                | Cause::SandboxExpired
                | Cause::Deleted
                | Cause::Replaced
                | Cause::Terminating
                | Cause::JobFinished
                | Cause::Suspended
                | Cause::ClaimExpired
                | Cause::SandboxLost
        )
    }

    /// Whether the cause may clear by itself (a volume claim binds, a terminating pod frees its
    /// node, an autoscaler adds one): a wait keeps waiting and reports it only if its deadline
    /// passes first, never tearing the sandbox down on the first sighting.
    pub fn clears_by_itself(&self) -> bool {
        matches!(self.cause, Cause::Unschedulable)
    }

    /// The classified error for a caller that needed the sandbox ready.
    pub fn into_error(self) -> ProviderError {
        match self.cause {
            Cause::ImagePull => ProviderError::image_pull(self.message),
            Cause::Unschedulable => ProviderError::capacity(self.message),
            Cause::Replaced => ProviderError::conflict(self.message, false),
            // A retried acquire adopts the claim, with the Sandbox it gets next.
            Cause::SandboxLost => ProviderError::conflict(self.message, true),
            Cause::PodFailed
            | Cause::PodSucceeded
            | Cause::SandboxExpired
            | Cause::MultiplePods
            | Cause::ContainerConfig
            | Cause::CrashLoop
            | Cause::Deleted
            | Cause::Terminating
            | Cause::JobFinished
            | Cause::Suspended
            | Cause::ClaimRefused
            | Cause::ClaimExpired => ProviderError::rejected(self.message),
        }
    }
}

/// The pod a lease points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub name: String,
    pub uid: String,
    pub ip: Option<String>,
    /// The container commands go to, when the pod names one ([`command_container`]): what a
    /// claim lease records, whose pod is its pool's template.
    pub command_container: Option<String>,
}

/// The pod annotation that names the container `kubectl exec` and `kubectl logs` use.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

/// The container of `pod` that commands go to when none is named (the API server picks none
/// in a pod with several): the one the annotation [`DEFAULT_CONTAINER_ANNOTATION`] names when
/// it is one of the pod's, else the one named [`CONTAINER_NAME`], else the only one; else the
/// names there are to choose from (none, or several without a hint).
pub fn command_container(pod: &Value) -> Result<&str, Vec<&str>> {
    let names = ContainerNames::of(pod).containers;
    let annotated = object::annotation(pod, DEFAULT_CONTAINER_ANNOTATION).filter(|a| names.contains(a));
    match annotated.or_else(|| names.iter().copied().find(|n| *n == CONTAINER_NAME)) {
        Some(name) => Ok(name),
        None if names.len() == 1 => Ok(names[0]),
        None => Err(names),
    }
}

/// What a pod says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodState {
    /// Running, Ready, with an IP, not terminating.
    Ready(PodInfo),
    /// Not ready yet; the text says why.
    Starting(String),
    /// Being deleted: never handed back.
    Terminating,
    /// Will not become ready.
    Failed(Failure),
}

fn container_statuses(pod: &Value) -> impl Iterator<Item = &Value> {
    let list = |key: &str| pod.get("status").and_then(|s| s.get(key)).and_then(Value::as_array).into_iter().flatten();
    list("initContainerStatuses").chain(list("containerStatuses"))
}

fn pod_ip(pod: &Value) -> Option<String> {
    object::str_at(pod, "/status/podIP")
        .or_else(|| object::at(pod, "/status/podIPs/0/ip").and_then(Value::as_str).filter(|s| !s.is_empty()))
        .map(str::to_string)
}

/// The last exit of the first container that has one, for messages (`exit code 1 (Error)`).
fn last_exit(pod: &Value) -> Option<String> {
    container_statuses(pod).find_map(|s| {
        let terminated = object::at(s, "/state/terminated").or_else(|| object::at(s, "/lastState/terminated"))?;
        let code = terminated.get("exitCode").and_then(Value::as_i64)?;
        let reason = terminated.get("reason").and_then(Value::as_str).unwrap_or("");
        Some(if reason.is_empty() { format!("exit code {code}") } else { format!("exit code {code} ({reason})") })
    })
}

/// Reads a pod. `own_secret` names the lease's Secret when the caller is about to create it
/// (acquire writes it right after the workload): the kubelet reports it missing with
/// `CreateContainerConfigError` until then and starts the container once it exists, so a pod
/// waiting for it is starting. Any other config error fails fast.
pub fn pod_state(pod: &Value, own_secret: Option<&str>) -> PodState {
    let name = object::name(pod).unwrap_or("?");
    if object::is_terminating(pod) {
        return PodState::Terminating;
    }
    let phase = object::str_at(pod, "/status/phase").unwrap_or("Pending");
    let exit = last_exit(pod).map(|e| format!(" (last container {e})")).unwrap_or_default();
    let pod_reason = object::str_at(pod, "/status/reason").unwrap_or("");
    let pod_message = object::str_at(pod, "/status/message").unwrap_or("");
    match phase {
        "Failed" => {
            let why =
                [pod_reason, pod_message].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join(": ");
            let why = if why.is_empty() { String::new() } else { format!(": {why}") };
            return PodState::Failed(Failure::new(
                Cause::PodFailed,
                format!(
                    "pod {name} failed{why}{exit}. Its processes are gone; check the image's command and the \
                     pod's events, then acquire again."
                ),
            ));
        }
        "Succeeded" => {
            return PodState::Failed(Failure::new(
                Cause::PodSucceeded,
                format!(
                    "pod {name} exited{exit}: the container's command finished, and a sandbox must keep running. \
                     Use a long-running command (the default is [\"sleep\", \"infinity\"])."
                ),
            ));
        }
        _ => {}
    }
    for status in container_statuses(pod) {
        let Some(waiting) = object::at(status, "/state/waiting") else {
            continue;
        };
        let reason = waiting.get("reason").and_then(Value::as_str).unwrap_or("");
        let message = waiting.get("message").and_then(Value::as_str).unwrap_or("");
        let detail = if message.is_empty() { String::new() } else { format!(": {message}") };
        let image = status.get("image").and_then(Value::as_str).unwrap_or("the image");
        match reason {
            "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
                return PodState::Failed(Failure::new(
                    Cause::ImagePull,
                    format!(
                        "pod {name} cannot pull {image} ({reason}{detail}). Check the image name and tag, and \
                         imagePullSecrets for a private registry."
                    ),
                ));
            }
            "CreateContainerConfigError"
                if own_secret.is_some_and(|s| message.contains(&format!("secret \"{s}\" not found"))) =>
            {
                return PodState::Starting(format!(
                    "pod {name} waits for its Secret {}, created right after the workload ({reason}{detail})",
                    own_secret.unwrap_or_default()
                ));
            }
            "CreateContainerConfigError" if KUBELET_CACHE_SYNC.iter().any(|m| message.contains(m)) => {
                return PodState::Starting(format!(
                    "pod {name} waits for its kubelet to sync its Secret and ConfigMap cache ({reason}{detail})"
                ));
            }
            "CreateContainerConfigError" => {
                return PodState::Failed(Failure::new(
                    Cause::ContainerConfig,
                    format!(
                        "pod {name}: the kubelet cannot create the container ({reason}{detail}). If it says the \
                         image runs as root, use a non-root image or set security.runAsUser; if a Secret or \
                         ConfigMap is missing, create it."
                    ),
                ));
            }
            "CrashLoopBackOff" => {
                let restarts = status.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
                return PodState::Failed(Failure::new(
                    Cause::CrashLoop,
                    format!(
                        "pod {name}: the container keeps exiting ({reason}, {restarts} restarts{exit}). Make the \
                         command long-running and check that the image starts under a read-only root filesystem \
                         as a non-root user."
                    ),
                ));
            }
            _ => {}
        }
    }
    if let Some(scheduled) = condition(pod, "PodScheduled")
        && scheduled.status == "False"
        && scheduled.reason == "Unschedulable"
    {
        return PodState::Failed(Failure::new(
            Cause::Unschedulable,
            format!(
                "no node can run pod {name}: {}. Free capacity or relax resources, nodeSelector or tolerations; \
                 retry later.",
                scheduled.message
            ),
        ));
    }
    let ready = condition(pod, "Ready").is_some_and(|c| c.is_true());
    let ip = pod_ip(pod);
    match (phase, ready, &ip) {
        ("Running", true, Some(_)) => PodState::Ready(PodInfo {
            name: name.to_string(),
            uid: object::uid(pod).unwrap_or("").to_string(),
            ip,
            command_container: command_container(pod).ok().map(str::to_string),
        }),
        ("Running", true, None) => PodState::Starting(format!("pod {name} is Ready but has no IP yet")),
        ("Running", false, _) => PodState::Starting(format!("pod {name} is Running but not Ready")),
        _ => {
            let waiting = container_statuses(pod)
                .find_map(|s| object::at(s, "/state/waiting/reason").and_then(Value::as_str))
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            PodState::Starting(format!("pod {name} is {phase}{waiting}"))
        }
    }
}

/// What a Sandbox says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxState {
    /// Ready True, observed at the current generation.
    Ready,
    /// Not ready yet; the text says why.
    Starting(String),
    /// Suspended (operatingMode Suspended, or replicas 0).
    Suspended,
    /// Being deleted.
    Deleting,
    /// Will not become ready.
    Failed(Failure),
}

/// Whether the Sandbox's spec asks for suspension, in either API version.
pub fn sandbox_spec_suspended(sandbox: &Value) -> bool {
    object::str_at(sandbox, "/spec/operatingMode") == Some("Suspended")
        || object::at(sandbox, "/spec/replicas").and_then(Value::as_i64) == Some(0)
}

/// Reads a Sandbox.
pub fn sandbox_state(sandbox: &Value) -> SandboxState {
    let name = object::name(sandbox).unwrap_or("?");
    if object::is_terminating(sandbox) {
        return SandboxState::Deleting;
    }
    let ready = condition(sandbox, "Ready");
    if ready.as_ref().is_some_and(|c| c.reason == "SandboxExpired") {
        return SandboxState::Failed(Failure::new(
            Cause::SandboxExpired,
            format!("Sandbox {name} passed its shutdownTime and is being removed; acquire a new sandbox."),
        ));
    }
    if sandbox_spec_suspended(sandbox) {
        return SandboxState::Suspended;
    }
    let Some(ready) = ready else {
        return SandboxState::Starting(format!(
            "Sandbox {name} has no status yet (the controller has not reconciled it)"
        ));
    };
    if let (Some(observed), Some(generation)) = (ready.observed_generation, object::generation(sandbox))
        && observed < generation
    {
        return SandboxState::Starting(format!(
            "the controller has not observed generation {generation} of Sandbox {name} yet"
        ));
    }
    if ready.is_true() {
        return SandboxState::Ready;
    }
    let finished = condition(sandbox, "Finished").filter(|c| c.is_true());
    let terminal_reason = finished.as_ref().map(|c| c.reason).unwrap_or(ready.reason);
    match terminal_reason {
        "PodFailed" => {
            return SandboxState::Failed(Failure::new(
                Cause::PodFailed,
                format!("the pod of Sandbox {name} failed and is never recreated; acquire a new sandbox."),
            ));
        }
        "PodSucceeded" => {
            return SandboxState::Failed(Failure::new(
                Cause::PodSucceeded,
                format!(
                    "the pod of Sandbox {name} exited (its command finished) and is never recreated; a sandbox must \
                     keep running, so use a long-running command."
                ),
            ));
        }
        _ => {}
    }
    match ready.reason {
        "MultiplePods" => SandboxState::Failed(Failure::new(
            Cause::MultiplePods,
            format!(
                "Sandbox {name}: {}. Delete the extra pods or destroy the lease.",
                if ready.message.is_empty() { "several pods claim it" } else { ready.message }
            ),
        )),
        "SandboxSuspended" => SandboxState::Suspended,
        _ => {
            if let Some(scheduled) = condition(sandbox, "PodScheduled")
                && scheduled.status == "False"
                && scheduled.reason == "Unschedulable"
            {
                return SandboxState::Failed(Failure::new(
                    Cause::Unschedulable,
                    format!(
                        "no node can run the pod of Sandbox {name}: {}. Free capacity or relax resources, \
                         nodeSelector or tolerations; retry later.",
                        scheduled.message
                    ),
                ));
            }
            SandboxState::Starting(format!("Sandbox {name} is not ready ({}: {})", ready.reason, ready.message))
        }
    }
}

/// What a Job says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Neither finished nor being deleted.
    Active,
    /// Being deleted.
    Deleting,
    /// Completed or failed.
    Failed(Failure),
}

/// Reads a Job.
pub fn job_state(job: &Value) -> JobState {
    let name = object::name(job).unwrap_or("?");
    if object::is_terminating(job) {
        return JobState::Deleting;
    }
    let failed = condition(job, "Failed").or_else(|| condition(job, "FailureTarget")).filter(|c| c.is_true());
    if let Some(c) = failed {
        let why = if c.reason == "DeadlineExceeded" {
            "its activeDeadlineSeconds passed: the lease's expiry was reached".to_string()
        } else {
            format!("{}: {}", c.reason, c.message)
        };
        return JobState::Failed(Failure::new(
            Cause::JobFinished,
            format!("Job {name} failed ({why}); its pod is gone. Acquire a new sandbox."),
        ));
    }
    if condition(job, "Complete").or_else(|| condition(job, "SuccessCriteriaMet")).is_some_and(|c| c.is_true()) {
        return JobState::Failed(Failure::new(
            Cause::JobFinished,
            format!("Job {name} completed: its command finished, so the sandbox is gone. Acquire a new sandbox."),
        ));
    }
    JobState::Active
}

/// When the cluster removes a workload by itself (its leak guard), written once in the contract.
pub use contract::k8s::object::expiry_of;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: Value) -> Value {
        json!({"metadata": {"name": "p", "uid": "u1"}, "status": status})
    }

    fn waiting(reason: &str) -> Value {
        pod(json!({"phase": "Pending", "containerStatuses": [{"name": "sandbox", "image": "img:1",
            "state": {"waiting": {"reason": reason, "message": "details"}}}]}))
    }

    fn cause(state: PodState) -> Cause {
        match state {
            PodState::Failed(f) => f.cause,
            other => panic!("not failed: {other:?}"),
        }
    }

    #[test]
    fn fail_fast_pod_causes() {
        assert_eq!(cause(pod_state(&waiting("ErrImagePull"), None)), Cause::ImagePull);
        assert_eq!(cause(pod_state(&waiting("ImagePullBackOff"), None)), Cause::ImagePull);
        assert_eq!(cause(pod_state(&waiting("InvalidImageName"), None)), Cause::ImagePull);
        assert_eq!(cause(pod_state(&waiting("CreateContainerConfigError"), None)), Cause::ContainerConfig);
        assert_eq!(cause(pod_state(&waiting("CrashLoopBackOff"), None)), Cause::CrashLoop);
        assert_eq!(cause(pod_state(&pod(json!({"phase": "Failed", "reason": "Evicted"})), None)), Cause::PodFailed);
        assert_eq!(cause(pod_state(&pod(json!({"phase": "Succeeded"})), None)), Cause::PodSucceeded);
        let unschedulable = pod(json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}]}));
        assert_eq!(cause(pod_state(&unschedulable, None)), Cause::Unschedulable);
    }

    #[test]
    fn only_the_leases_own_missing_secret_is_still_starting() {
        let missing = |name: &str| {
            pod(json!({"phase": "Pending", "containerStatuses": [{"name": "sandbox", "state": {"waiting": {
                "reason": "CreateContainerConfigError", "message": format!("secret \"{name}\" not found")}}}]}))
        };
        assert!(
            matches!(pod_state(&missing("pc-1-env"), Some("pc-1-env")), PodState::Starting(why) if why.contains("pc-1-env"))
        );
        assert_eq!(cause(pod_state(&missing("other"), Some("pc-1-env"))), Cause::ContainerConfig);
        assert_eq!(cause(pod_state(&missing("pc-1-env"), None)), Cause::ContainerConfig, "nobody creates it");
        assert_eq!(cause(pod_state(&waiting("CreateContainerConfigError"), Some("pc-1-env"))), Cause::ContainerConfig);
    }

    /// A real kubelet reports its own cache catching up as a config error; it clears by itself.
    #[test]
    fn a_kubelet_cache_still_syncing_is_starting() {
        for what in ["secret", "configmap"] {
            let syncing =
                pod(json!({"phase": "Pending", "containerStatuses": [{"name": "sandbox", "state": {"waiting": {
                "reason": "CreateContainerConfigError",
                "message": format!("failed to sync {what} cache: timed out waiting for the condition")}}}]}));
            let state = pod_state(&syncing, None);
            assert!(
                matches!(&state, PodState::Starting(why) if why.contains("timed out waiting")),
                "{what}: {state:?}"
            );
        }
    }

    #[test]
    fn failure_kinds() {
        assert_eq!(Failure::new(Cause::ImagePull, "x").into_error().kind(), "image-pull");
        let capacity = Failure::new(Cause::Unschedulable, "x").into_error();
        assert_eq!((capacity.kind(), capacity.retryable()), ("capacity", true));
        assert_eq!(Failure::new(Cause::CrashLoop, "x").into_error().kind(), "rejected");
        assert_eq!(Failure::new(Cause::ContainerConfig, "x").into_error().kind(), "rejected");
        assert!(Failure::new(Cause::SandboxExpired, "x").ends_sandbox());
        assert!(!Failure::new(Cause::ImagePull, "x").ends_sandbox());
    }

    #[test]
    fn ready_needs_running_ready_and_an_ip() {
        let ready = pod(json!({"phase": "Running", "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}]}));
        assert_eq!(
            pod_state(&ready, None),
            PodState::Ready(PodInfo {
                name: "p".into(),
                uid: "u1".into(),
                ip: Some("10.0.0.1".into()),
                command_container: None
            })
        );
        let no_ip = pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}));
        assert!(matches!(pod_state(&no_ip, None), PodState::Starting(_)));
        let mut terminating = ready.clone();
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(pod_state(&terminating, None), PodState::Terminating);
        assert!(matches!(pod_state(&pod(json!({})), None), PodState::Starting(_)));
    }

    fn sandbox(generation: i64, conditions: Value) -> Value {
        json!({"metadata": {"name": "s", "generation": generation}, "spec": {}, "status": {"conditions": conditions}})
    }

    #[test]
    fn sandbox_ready_needs_the_current_generation() {
        let ready = sandbox(2, json!([{"type": "Ready", "status": "True", "observedGeneration": 2}]));
        assert_eq!(sandbox_state(&ready), SandboxState::Ready);
        let stale = sandbox(3, json!([{"type": "Ready", "status": "True", "observedGeneration": 2}]));
        assert!(matches!(sandbox_state(&stale), SandboxState::Starting(_)));
        let empty = json!({"metadata": {"name": "s", "generation": 1}});
        assert!(matches!(sandbox_state(&empty), SandboxState::Starting(_)));
    }

    #[test]
    fn sandbox_terminal_reasons() {
        let with_reason = |reason: &str| {
            sandbox(1, json!([{"type": "Ready", "status": "False", "reason": reason, "observedGeneration": 1}]))
        };
        let failed = |s: SandboxState| match s {
            SandboxState::Failed(f) => f.cause,
            other => panic!("{other:?}"),
        };
        assert_eq!(failed(sandbox_state(&with_reason("SandboxExpired"))), Cause::SandboxExpired);
        assert_eq!(failed(sandbox_state(&with_reason("PodFailed"))), Cause::PodFailed);
        assert_eq!(failed(sandbox_state(&with_reason("PodSucceeded"))), Cause::PodSucceeded);
        assert_eq!(failed(sandbox_state(&with_reason("MultiplePods"))), Cause::MultiplePods);
        assert_eq!(sandbox_state(&with_reason("SandboxSuspended")), SandboxState::Suspended);
        assert!(matches!(sandbox_state(&with_reason("DependenciesNotReady")), SandboxState::Starting(_)));
        let mut suspended = with_reason("DependenciesNotReady");
        suspended["spec"]["replicas"] = json!(0);
        assert_eq!(sandbox_state(&suspended), SandboxState::Suspended);
    }

    #[test]
    fn expiry_is_read_from_the_workload() {
        let sandbox = json!({"spec": {"shutdownTime": "2026-11-30T10:01:56Z"}});
        assert_eq!(expiry_of(&sandbox), Some(1_796_032_916_000));
        let claim =
            json!({"spec": {"lifecycle": {"shutdownTime": "2026-11-30T10:01:56Z", "shutdownPolicy": "Delete"}}});
        assert_eq!(expiry_of(&claim), Some(1_796_032_916_000));
        let job = json!({"spec": {"activeDeadlineSeconds": 60}, "status": {"startTime": "2026-11-30T10:01:56Z"}});
        assert_eq!(expiry_of(&job), Some(1_796_032_976_000));
        assert_eq!(expiry_of(&json!({"spec": {"activeDeadlineSeconds": 60}})), None);
    }

    #[test]
    fn job_states() {
        let job = |conditions: Value| json!({"metadata": {"name": "j"}, "status": {"conditions": conditions}});
        assert_eq!(job_state(&job(json!([]))), JobState::Active);
        match job_state(&job(json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]))) {
            JobState::Failed(f) => assert!(f.message.contains("activeDeadlineSeconds passed"), "{}", f.message),
            other => panic!("{other:?}"),
        }
        assert!(matches!(job_state(&job(json!([{"type": "Complete", "status": "True"}]))), JobState::Failed(_)));
    }
}

/// What a wait that found its workload gone, going or replaced reports; `what` is the workload
/// as messages name it (`Sandbox ns/name`, `SandboxClaim ns/name`). Acquire turns these into
/// its own errors (another attempt's clean-up, a retry converges), resume-check into `expired`.
pub(crate) mod wait_failure {
    use super::{Cause, Failure};

    /// Deleted while waited for.
    pub(crate) fn deleted(what: &str) -> Failure {
        Failure::new(
            Cause::Deleted,
            format!(
                "{what} was deleted while waiting for it (its expiry passed, or someone deleted it); acquire a new sandbox."
            ),
        )
    }

    /// Being deleted.
    pub(crate) fn terminating(what: &str) -> Failure {
        Failure::new(Cause::Terminating, format!("{what} is being deleted; acquire a new sandbox."))
    }

    /// Replaced by an object the host does not let this installation see.
    pub(crate) fn taken(what: &str) -> Failure {
        Failure::new(
            Cause::Replaced,
            format!(
                "{what} was replaced by an object this installation did not create, so the lease's sandbox is gone; \
                 destroy this lease and acquire a new sandbox."
            ),
        )
    }

    /// Replaced by another object under the name: `object` names it (`the object`, `the claim`),
    /// `lost` says what the lease lost with it.
    pub(crate) fn replaced(what: &str, object: &str, found: &str, had: &str, lost: &str) -> Failure {
        Failure::new(
            Cause::Replaced,
            format!(
                "{what} was replaced: {object} under that name now has uid {found}, the lease's has uid {had}. {lost}; \
                 destroy this lease and acquire a new sandbox."
            ),
        )
    }
}
