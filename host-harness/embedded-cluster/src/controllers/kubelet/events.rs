//! Events, as kube-scheduler and the kubelet record them, so `kubectl get events` and `kubectl
//! describe pod` show what happened to a pod: `Scheduled` and `FailedScheduling` from
//! `default-scheduler`; `Pulled`, `Created`, `Started`, `Failed`, `BackOff` and `Killing` from
//! the kubelet, with the upstream words
//! (<https://github.com/kubernetes/kubernetes/blob/master/pkg/kubelet/events/event.go>).
//!
//! Like client-go's event broadcaster, recording never blocks the loop: events go to a task
//! that writes them as `core/v1` Events named `<pod>.<hex nanoseconds>`, and a repeat of one
//! already written (same pod, container, reason and message) raises its `count` and
//! `lastTimestamp` instead of making another. A failed write is logged and dropped, as upstream
//! drops events it cannot write.

use std::collections::HashMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod, PodStatus};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;

/// Who records an event (`source.component`, `reportingComponent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Component {
    Scheduler,
    Kubelet,
}

impl Component {
    fn name(self) -> &'static str {
        match self {
            Self::Scheduler => "default-scheduler",
            Self::Kubelet => "kubelet",
        }
    }
}

/// One event about a pod (or one of its containers).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodEvent {
    /// The container it is about (`involvedObject.fieldPath`), if any.
    pub container: Option<String>,
    /// `Normal` or `Warning`.
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

impl PodEvent {
    fn normal(container: &str, reason: &'static str, message: String) -> Self {
        Self { container: Some(container.to_string()), warning: false, reason, message }
    }

    fn warning(container: &str, reason: &'static str, message: String) -> Self {
        Self { container: Some(container.to_string()), warning: true, reason, message }
    }
}

/// What the writer task needs of one event.
struct Record {
    namespace: String,
    pod: String,
    uid: String,
    event: PodEvent,
    component: Component,
    node: Option<String>,
    at: Timestamp,
}

/// Hands events to the writer task.
#[derive(Clone)]
pub(crate) struct Recorder(mpsc::UnboundedSender<Record>);

impl Recorder {
    /// Starts the writer task; it ends when every recorder is dropped.
    pub(crate) fn start(client: Client) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(write_all(client, receiver));
        Self(sender)
    }

    /// Records `event` about `pod`, from `component` (on `node`), at `at`.
    pub(crate) fn record(&self, pod: &Pod, event: PodEvent, component: Component, node: Option<&str>, at: Timestamp) {
        let record = Record {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            event,
            component,
            node: node.map(str::to_string),
            at,
        };
        // The task ends only with the cluster; an event recorded after that is moot.
        let _ = self.0.send(record);
    }
}

/// The scheduler's event for a pod it bound.
pub(crate) fn scheduled(pod: &Pod, node: &str) -> PodEvent {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    PodEvent {
        container: None,
        warning: false,
        reason: "Scheduled",
        message: format!("Successfully assigned {namespace}/{name} to {node}"),
    }
}

/// The scheduler's event for a pod it cannot place.
pub(crate) fn failed_scheduling(message: &str) -> PodEvent {
    PodEvent { container: None, warning: true, reason: "FailedScheduling", message: message.to_string() }
}

/// The kubelet's events for a status change of `pod`, from `old` to `new`: containers that
/// started, that wait for a new reason, and that were stopped for the pod's deletion.
pub(crate) fn kubelet_events(pod: &Pod, old: Option<&PodStatus>, new: &PodStatus) -> Vec<PodEvent> {
    let statuses = |s: Option<&PodStatus>| -> Vec<ContainerStatus> {
        s.map(|s| {
            s.init_container_statuses.iter().flatten().chain(s.container_statuses.iter().flatten()).cloned().collect()
        })
        .unwrap_or_default()
    };
    let before = statuses(old);
    let deleting = pod.metadata.deletion_timestamp.is_some();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let mut events = Vec::new();
    for now in statuses(Some(new)) {
        let was = before.iter().find(|c| c.name == now.name);
        let state = now.state.as_ref();
        let old_state = was.and_then(|c| c.state.as_ref());
        let c = now.name.as_str();
        let image = now.image.as_str();
        let running = state.and_then(|s| s.running.as_ref()).is_some();
        let was_running = old_state.and_then(|s| s.running.as_ref()).is_some();
        let restarted = was.is_some_and(|w| w.restart_count != now.restart_count);
        if running && (!was_running || restarted) {
            events.push(PodEvent::normal(
                c,
                "Pulled",
                format!("Container image \"{image}\" already present on machine"),
            ));
            events.push(PodEvent::normal(c, "Created", format!("Created container: {c}")));
            events.push(PodEvent::normal(c, "Started", format!("Started container {c}")));
        }
        if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
            let old_reason = old_state.and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.as_deref());
            let message = waiting.message.clone().unwrap_or_default();
            match waiting.reason.as_deref() {
                Some(reason) if Some(reason) == old_reason => {}
                Some("CreateContainerConfigError") => {
                    events.push(PodEvent::warning(c, "Failed", format!("Error: {message}")));
                }
                Some("ErrImagePull") => {
                    events.push(PodEvent::warning(c, "Failed", format!("Failed to pull image \"{image}\": {message}")));
                }
                Some("ImagePullBackOff") => {
                    events.push(PodEvent::normal(c, "BackOff", format!("Back-off pulling image \"{image}\"")));
                }
                Some("CrashLoopBackOff") => events.push(PodEvent::warning(
                    c,
                    "BackOff",
                    format!("Back-off restarting failed container {c} in pod {name}_{namespace}({uid})"),
                )),
                _ => {}
            }
        }
        if deleting && was_running && state.and_then(|s| s.terminated.as_ref()).is_some() {
            events.push(PodEvent::normal(c, "Killing", format!("Stopping container {c}")));
        }
    }
    events
}

/// Key of an event already written: repeats are counted on it.
type Key = (String, String, Option<String>, &'static str, String);

async fn write_all(client: Client, mut records: mpsc::UnboundedReceiver<Record>) {
    let mut written: HashMap<Key, (String, i32)> = HashMap::new();
    let mut sequence: i128 = 0;
    while let Some(record) = records.recv().await {
        let events: Api<Event> = Api::namespaced(client.clone(), &record.namespace);
        let at = record.at.to_string();
        let key: Key = (
            record.namespace.clone(),
            record.uid.clone(),
            record.event.container.clone(),
            record.event.reason,
            record.event.message.clone(),
        );
        if let Some((name, count)) = written.get_mut(&key) {
            *count += 1;
            let patch = json!({"count": *count, "lastTimestamp": at});
            if let Err(error) = events.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                tracing::debug!(%error, event = name.as_str(), "could not count a repeated event");
            }
            continue;
        }
        sequence += 1;
        let name = format!("{}.{:x}", record.pod, record.at.as_nanosecond() + sequence);
        let mut involved = json!({"apiVersion": "v1", "kind": "Pod", "namespace": record.namespace,
            "name": record.pod, "uid": record.uid});
        if let Some(container) = &record.event.container {
            involved["fieldPath"] = json!(format!("spec.containers{{{container}}}"));
        }
        let component = record.component.name();
        let event = json!({
            "metadata": {"name": name, "namespace": record.namespace},
            "involvedObject": involved,
            "reason": record.event.reason,
            "message": record.event.message,
            "type": if record.event.warning { "Warning" } else { "Normal" },
            "source": {"component": component, "host": record.node},
            "firstTimestamp": at,
            "lastTimestamp": at,
            "count": 1,
            "reportingComponent": component,
            "reportingInstance": record.node.as_deref().unwrap_or(component),
        });
        let event: Event = match serde_json::from_value(event) {
            Ok(event) => event,
            Err(error) => {
                tracing::debug!(%error, "an event did not build");
                continue;
            }
        };
        match events.create(&PostParams::default(), &event).await {
            Ok(_) => {
                written.insert(key, (name, 1));
            }
            Err(error) => tracing::debug!(%error, event = name.as_str(), "could not write an event"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(deleting: bool) -> Pod {
        let mut pod = json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}});
        if deleting {
            pod["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
        }
        serde_json::from_value(pod).expect("pod")
    }

    fn status(state: serde_json::Value, restarts: i32) -> PodStatus {
        serde_json::from_value(json!({"containerStatuses": [{"name": "main", "image": "busybox:1.36",
            "imageID": "", "ready": false, "restartCount": restarts, "state": state}]}))
        .expect("status")
    }

    fn reasons(events: &[PodEvent]) -> Vec<&str> {
        events.iter().map(|e| e.reason).collect()
    }

    #[test]
    fn a_container_that_starts_is_pulled_created_and_started_once() {
        let waiting = status(json!({"waiting": {"reason": "ContainerCreating"}}), 0);
        let running = status(json!({"running": {"startedAt": "2026-12-01T00:00:00Z"}}), 0);
        let events = kubelet_events(&pod(false), Some(&waiting), &running);
        assert_eq!(reasons(&events), ["Pulled", "Created", "Started"]);
        assert_eq!(events[2].message, "Started container main");
        assert!(kubelet_events(&pod(false), Some(&running), &running).is_empty(), "no change, no event");
        let restarted = status(json!({"running": {"startedAt": "2026-12-01T00:01:00Z"}}), 1);
        assert_eq!(reasons(&kubelet_events(&pod(false), Some(&running), &restarted)), ["Pulled", "Created", "Started"]);
    }

    #[test]
    fn a_waiting_reason_is_told_once_with_the_kubelets_words() {
        let blocked = status(
            json!({"waiting": {"reason": "CreateContainerConfigError", "message": "secret \"creds\" not found"}}),
            0,
        );
        let events = kubelet_events(&pod(false), None, &blocked);
        assert_eq!(events, [PodEvent::warning("main", "Failed", "Error: secret \"creds\" not found".into())]);
        assert!(kubelet_events(&pod(false), Some(&blocked), &blocked).is_empty());
        let backoff = status(json!({"waiting": {"reason": "CrashLoopBackOff"}}), 3);
        let events = kubelet_events(&pod(false), Some(&blocked), &backoff);
        assert_eq!(events[0].message, "Back-off restarting failed container main in pod p_ns(u-1)");
    }

    #[test]
    fn a_container_stopped_for_deletion_is_killing() {
        let running = status(json!({"running": {"startedAt": "2026-12-01T00:00:00Z"}}), 0);
        let ended = status(json!({"terminated": {"exitCode": 143, "reason": "Error"}}), 0);
        assert_eq!(reasons(&kubelet_events(&pod(true), Some(&running), &ended)), ["Killing"]);
        assert!(kubelet_events(&pod(false), Some(&running), &ended).is_empty(), "an exit of its own is no kill");
    }
}
