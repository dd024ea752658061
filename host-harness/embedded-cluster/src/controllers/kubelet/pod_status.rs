//! What a pod's status says at each stage, worded as a real kubelet words it, and whether
//! the API server already shows it.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use anyhow::Context as _;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Map, Value, json};

use super::merge_patch::covers;
use super::pod_state::{Exit, Finish, IMAGE_PULL_BACKOFF, KILLED_EXIT_CODE, PodBook, PodFacts, Stage, after};

/// Pod-level reason of an evicted pod.
const EVICTED_REASON: &str = "Evicted";
/// Pod-level message of an evicted pod (memory pressure, the commonest eviction).
pub(crate) const EVICTED_MESSAGE: &str = "The node was low on resource: memory.";
/// Pod-level reason when `activeDeadlineSeconds` ran out.
const DEADLINE_REASON: &str = "DeadlineExceeded";
/// Pod-level message when `activeDeadlineSeconds` ran out.
const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";
/// The condition types the kubelet owns; any other condition is copied through untouched.
const OWNED_CONDITIONS: [&str; 5] =
    ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "DisruptionTarget"];

/// The status the pod should show at `now`, conditions still without transition times, or
/// `None` for pods whose status this kubelet leaves alone (adopted terminal pods, pods
/// without a spec).
pub(crate) fn render(pod: &Pod, facts: &PodFacts<'_>, book: &PodBook, now: Timestamp) -> Option<PodStatus> {
    if book.stage == Stage::Finished(Finish::Adopted) {
        return None;
    }
    let spec = pod.spec.as_ref()?;
    // A lost node reports nothing new: the pod stays as it was when the node went away.
    let at = book.lost_at.unwrap_or(now);
    let ready = is_ready(facts, book, at);
    let finished = book.is_finished();
    let init_containers = spec.init_containers.as_deref().unwrap_or_default();
    let init_blocked =
        book.stage == Stage::ConfigBlocked && init_containers.iter().any(|c| facts.config_errors.contains_key(&c.name));

    let (phase, reason, message) = phase(book);
    let main: Vec<ContainerStatus> =
        spec.containers.iter().map(|c| main_status(pod, facts, book, c, at, ready, init_blocked)).collect();
    let init: Vec<ContainerStatus> = init_containers.iter().map(|c| init_status(pod, facts, book, c)).collect();

    let initialized = init_containers.is_empty() || (book.sandbox_at.is_some() && !init_blocked);
    let mut conditions = vec![
        condition("PodReadyToStartContainers", book.sandbox_at.is_some() && !finished, None, None),
        if initialized {
            condition("Initialized", true, None, None)
        } else {
            let names = init_containers.iter().map(|c| c.name.as_str());
            let message = format!("containers with incomplete status: [{}]", names.collect::<Vec<_>>().join(" "));
            condition("Initialized", false, Some("ContainersNotInitialized"), Some(message))
        },
    ];
    let unready_message = || {
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        format!("containers with unready status: [{}]", names.join(" "))
    };
    let readiness = |kind: &str| match (ready, finished) {
        (true, _) => condition(kind, true, None, None),
        (false, true) => condition(kind, false, Some("PodCompleted"), None),
        (false, false) => condition(kind, false, Some("ContainersNotReady"), Some(unready_message())),
    };
    conditions.push(if book.lost_at.is_some() { condition("Ready", false, None, None) } else { readiness("Ready") });
    conditions.push(readiness("ContainersReady"));
    if book.stage == Stage::Finished(Finish::Evicted) {
        let message = Some(EVICTED_MESSAGE.to_string());
        conditions.push(condition("DisruptionTarget", true, Some("TerminationByKubelet"), message));
    }

    let pod_ip = book.sandbox_at.and(book.pod_ip.clone());
    Some(PodStatus {
        phase: Some(phase.to_string()),
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        host_ip: Some(facts.host_ip.to_string()),
        host_ips: Some(vec![HostIP { ip: facts.host_ip.to_string() }]),
        pod_ips: pod_ip.clone().map(|ip| vec![PodIP { ip }]),
        pod_ip,
        start_time: Some(Time(book.seen_at)),
        conditions: Some(conditions),
        container_statuses: Some(main),
        init_container_statuses: (!init.is_empty()).then_some(init),
        ..Default::default()
    })
}

/// The next instant the rendered status changes without any event (Ready after the ready
/// delay, `ErrImagePull` turning into `ImagePullBackOff`).
pub(crate) fn next_change(facts: &PodFacts<'_>, book: &PodBook, now: Timestamp) -> Option<Timestamp> {
    if book.lost_at.is_some() {
        return None;
    }
    let at = match book.stage {
        Stage::Running { since } => after(since, facts.ready_delay()),
        Stage::PullFailing { since } => after(since, IMAGE_PULL_BACKOFF),
        _ => return None,
    };
    (at > now).then_some(at)
}

/// Gives the kubelet's conditions their transition times (kept while a condition's status
/// holds, `now` when it flips) and appends the conditions other components own, copied from
/// the observed status, since a merge patch replaces the whole array.
pub(crate) fn stamp_conditions(
    status: &mut PodStatus,
    observed: Option<&PodStatus>,
    transitions: &mut BTreeMap<String, (String, Timestamp)>,
    now: Timestamp,
) {
    let mut conditions = status.conditions.take().unwrap_or_default();
    for c in &mut conditions {
        let since = match transitions.get(&c.type_) {
            Some((status, since)) if *status == c.status => *since,
            _ => {
                transitions.insert(c.type_.clone(), (c.status.clone(), now));
                now
            }
        };
        c.last_transition_time = Some(Time(since));
    }
    let foreign = observed
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| !OWNED_CONDITIONS.contains(&c.type_.as_str()));
    conditions.extend(foreign.cloned());
    status.conditions = Some(conditions);
}

/// The pods/status merge patch that turns `observed` into `desired`, or `None` when every
/// field the kubelet sets already matches (fields other writers add are ignored, so an API
/// server that fills in extras does not cause endless rewrites). Pod-level `reason` and
/// `message` are sent as `null` when unset, to clear stale ones.
pub(crate) fn status_patch(observed: Option<&PodStatus>, desired: &PodStatus) -> anyhow::Result<Option<Value>> {
    let mut want = serde_json::to_value(desired).context("serialising the desired pod status")?;
    if let Some(fields) = want.as_object_mut() {
        fields.entry("reason").or_insert(Value::Null);
        fields.entry("message").or_insert(Value::Null);
    }
    let have = match observed {
        Some(status) => serde_json::to_value(status).context("serialising the observed pod status")?,
        None => Value::Object(Map::new()),
    };
    Ok((!covers(&have, &want)).then(|| json!({ "status": want })))
}

/// Whether the containers are ready (the node controller, not the kubelet, marks a lost
/// node's pods unready, so that is handled separately).
fn is_ready(facts: &PodFacts<'_>, book: &PodBook, at: Timestamp) -> bool {
    matches!(book.stage, Stage::Running { since } if at >= after(since, facts.ready_delay()))
}

/// Phase, reason and message of the pod as a whole.
fn phase(book: &PodBook) -> (&'static str, Option<&'static str>, Option<&'static str>) {
    let exited_zero = book.last_exit.as_ref().is_some_and(|e| e.code == 0);
    match &book.stage {
        Stage::Creating | Stage::PullFailing { .. } | Stage::ConfigBlocked => ("Pending", None, None),
        Stage::Running { .. } | Stage::BackOff { .. } => ("Running", None, None),
        Stage::Finished(Finish::Evicted) => ("Failed", Some(EVICTED_REASON), Some(EVICTED_MESSAGE)),
        Stage::Finished(Finish::DeadlineExceeded) => ("Failed", Some(DEADLINE_REASON), Some(DEADLINE_MESSAGE)),
        Stage::Finished(_) if exited_zero => ("Succeeded", None, None),
        Stage::Finished(_) => ("Failed", None, None),
    }
}

/// One regular container's status.
fn main_status(
    pod: &Pod,
    facts: &PodFacts<'_>,
    book: &PodBook,
    container: &Container,
    at: Timestamp,
    ready: bool,
    init_blocked: bool,
) -> ContainerStatus {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let image = container.image.clone().unwrap_or_default();
    let has_init = pod.spec.as_ref().and_then(|s| s.init_containers.as_ref()).is_some_and(|i| !i.is_empty());
    let creating = if has_init { "PodInitializing" } else { "ContainerCreating" };
    let mut status = ContainerStatus {
        name: container.name.clone(),
        image: image.clone(),
        image_id: String::new(),
        restart_count: book.restart_count,
        started: Some(false),
        ..Default::default()
    };
    let ran = |s: &mut ContainerStatus, exit: Option<&Exit>| {
        s.image_id = image_id(&image);
        s.container_id = exit.map(|e| container_id(uid, &container.name, e.run));
    };
    match &book.stage {
        Stage::Creating => status.state = Some(waiting(creating, None)),
        Stage::PullFailing { since } => {
            let pull_error = format!(
                "failed to pull image \"{image}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": not found (simulated)"
            );
            status.state = Some(if at < after(*since, IMAGE_PULL_BACKOFF) {
                waiting("ErrImagePull", Some(pull_error))
            } else {
                waiting(
                    "ImagePullBackOff",
                    Some(format!("Back-off pulling image \"{image}\": ErrImagePull: {pull_error}")),
                )
            });
        }
        Stage::ConfigBlocked => {
            status.state = Some(match facts.config_errors.get(&container.name) {
                Some(message) => waiting("CreateContainerConfigError", Some(message.clone())),
                None if init_blocked => waiting("PodInitializing", None),
                None => waiting("ContainerCreating", None),
            });
        }
        Stage::Running { since } => {
            status.state = Some(ContainerState {
                running: Some(ContainerStateRunning { started_at: Some(Time(*since)) }),
                ..Default::default()
            });
            status.last_state = book.last_exit.as_ref().map(|e| terminated(uid, &container.name, e));
            status.ready = ready;
            status.started = Some(true);
            status.image_id = image_id(&image);
            status.container_id = Some(container_id(uid, &container.name, book.restart_count));
        }
        Stage::BackOff { until } => {
            let last = book.last_exit.as_ref();
            let delay = last.map(|e| go_duration(until.duration_since(e.finished_at))).unwrap_or_default();
            let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let message = format!(
                "back-off {delay} restarting failed container={} pod={pod_name}_{namespace}({uid})",
                container.name
            );
            status.state = Some(waiting("CrashLoopBackOff", Some(message)));
            status.last_state = last.map(|e| terminated(uid, &container.name, e));
            ran(&mut status, last);
        }
        Stage::Finished(_) => {
            let last = book.last_exit.as_ref();
            status.state = Some(match last {
                Some(exit) => terminated(uid, &container.name, exit),
                None => unknown_terminated(),
            });
            status.last_state = book.prior_exit.as_ref().map(|e| terminated(uid, &container.name, e));
            if last.is_some() {
                ran(&mut status, last);
            }
        }
    }
    status
}

/// One init container's status. Init containers complete at once when the sandbox is up
/// (sidecars, `restartPolicy: Always`, keep running); the behaviour knobs act on the regular
/// containers only.
fn init_status(pod: &Pod, facts: &PodFacts<'_>, book: &PodBook, container: &Container) -> ContainerStatus {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let image = container.image.clone().unwrap_or_default();
    let name = format!("init:{}", container.name);
    let mut status = ContainerStatus {
        name: container.name.clone(),
        image: image.clone(),
        image_id: String::new(),
        started: Some(false),
        ..Default::default()
    };
    let sidecar = container.restart_policy.as_deref() == Some("Always");
    let blocked = book.stage == Stage::ConfigBlocked && facts.config_errors.contains_key(&container.name);
    let finished_at = book.last_exit.as_ref().map(|e| e.finished_at);
    status.state = Some(match (book.sandbox_at, &book.stage) {
        (None, Stage::Finished(_)) => unknown_terminated(),
        (None, _) => waiting("PodInitializing", None),
        (Some(_), Stage::ConfigBlocked) if blocked => match facts.config_errors.get(&container.name) {
            Some(message) => waiting("CreateContainerConfigError", Some(message.clone())),
            None => waiting("PodInitializing", None),
        },
        (Some(sandbox_at), stage) => {
            status.image_id = image_id(&image);
            let exit = Exit {
                code: 0,
                started_at: sandbox_at,
                finished_at: if sidecar { finished_at.unwrap_or(sandbox_at) } else { sandbox_at },
                run: 0,
            };
            if sidecar && !matches!(stage, Stage::Finished(_)) {
                status.ready = true;
                status.started = Some(true);
                status.container_id = Some(container_id(uid, &name, 0));
                ContainerState {
                    running: Some(ContainerStateRunning { started_at: Some(Time(sandbox_at)) }),
                    ..Default::default()
                }
            } else {
                status.container_id = Some(container_id(uid, &name, 0));
                terminated(uid, &name, &exit)
            }
        }
    });
    status
}

fn condition(kind: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: kind.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting { reason: Some(reason.to_string()), message }),
        ..Default::default()
    }
}

fn terminated(uid: &str, container: &str, exit: &Exit) -> ContainerState {
    let reason = if exit.code == 0 { "Completed" } else { "Error" };
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: exit.code,
            reason: Some(reason.to_string()),
            started_at: Some(Time(exit.started_at)),
            finished_at: Some(Time(exit.finished_at)),
            container_id: Some(container_id(uid, container, exit.run)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// What the kubelet reports for a container of a terminal pod that never ran.
fn unknown_terminated() -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: KILLED_EXIT_CODE,
            reason: Some("ContainerStatusUnknown".to_string()),
            message: Some("The container could not be located when the pod was terminated".to_string()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A stable containerd-style ID for one run of one container of one pod.
fn container_id(pod_uid: &str, container: &str, run: i32) -> String {
    format!("containerd://{}", hex64(&[pod_uid, container, &run.to_string()]))
}

/// A digest reference for an image, the way the runtime reports `imageID`.
fn image_id(image: &str) -> String {
    if image.contains('@') {
        return canonical_repository(image);
    }
    format!("{}@sha256:{}", canonical_repository(image), hex64(&[image]))
}

/// `nginx:1.27` → `docker.io/library/nginx`, `ghcr.io/a/b:v1` → `ghcr.io/a/b`.
fn canonical_repository(image: &str) -> String {
    let name = match image.split_once('@') {
        Some((name, digest)) => return format!("{}@{digest}", canonical_repository(name)),
        None => image,
    };
    let name = match name.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => name,
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_registry = name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_registry {
        name.to_string()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    }
}

/// 64 hex digits derived from `parts`, stable across runs.
fn hex64(parts: &[&str]) -> String {
    (0u8..4)
        .map(|salt| {
            let mut hasher = DefaultHasher::new();
            salt.hash(&mut hasher);
            parts.hash(&mut hasher);
            format!("{:016x}", hasher.finish())
        })
        .collect()
}

/// Whole seconds formatted like Go's `time.Duration` (`10s`, `2m40s`, `5m0s`).
fn go_duration(d: jiff::SignedDuration) -> String {
    let secs = d.as_secs().max(0);
    if secs >= 60 { format!("{}m{}s", secs / 60, secs % 60) } else { format!("{secs}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_ids_look_like_runtime_digests() {
        assert!(image_id("nginx").starts_with("docker.io/library/nginx@sha256:"));
        assert!(image_id("nginx:1.27").starts_with("docker.io/library/nginx@sha256:"));
        assert!(image_id("me/app:v1").starts_with("docker.io/me/app@sha256:"));
        assert!(image_id("ghcr.io/a/b:v1").starts_with("ghcr.io/a/b@sha256:"));
        assert!(image_id("localhost:5000/app").starts_with("localhost:5000/app@sha256:"));
        assert_eq!(image_id("busybox@sha256:abc"), "docker.io/library/busybox@sha256:abc");
        assert_eq!(image_id("nginx").len(), "docker.io/library/nginx@sha256:".len() + 64);
        assert_eq!(image_id("nginx"), image_id("nginx"));
    }

    #[test]
    fn container_ids_differ_per_run() {
        assert_ne!(container_id("u", "c", 0), container_id("u", "c", 1));
        assert!(container_id("u", "c", 0).starts_with("containerd://"));
    }

    #[test]
    fn durations_format_like_go() {
        assert_eq!(go_duration(jiff::SignedDuration::from_secs(10)), "10s");
        assert_eq!(go_duration(jiff::SignedDuration::from_secs(160)), "2m40s");
        assert_eq!(go_duration(jiff::SignedDuration::from_secs(300)), "5m0s");
    }
}
