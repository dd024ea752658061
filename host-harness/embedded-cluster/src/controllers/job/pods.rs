//! How the Job controller reads pods: which Job controls them, whether they are active,
//! terminating or finished, and which to delete first when there are too many.

use std::cmp::Reverse;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

/// Where a pod stands from the Job's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Not finished and not being deleted: counts toward `status.active`.
    Active,
    /// Being deleted (`deletionTimestamp` set) before it finished: counts toward `terminating`.
    Terminating,
    /// Phase `Succeeded`.
    Succeeded,
    /// Phase `Failed`.
    Failed,
}

/// Classifies a pod by phase first, so a finished pod that is being deleted still counts.
pub fn state(pod: &Pod) -> PodState {
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => PodState::Succeeded,
        Some("Failed") => PodState::Failed,
        _ if pod.metadata.deletion_timestamp.is_some() => PodState::Terminating,
        _ => PodState::Active,
    }
}

/// Whether the pod's `Ready` condition is `True` (what `status.ready` counts).
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The UID of the Job that controls this pod, from its controller ownerReference.
pub fn controlling_job_uid(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == "Job" && r.api_version == "batch/v1")
        .map(|r| r.uid.as_str())
}

/// The namespace and name of the Job that controls this pod, for routing watch events.
pub fn controlling_job_name(pod: &Pod) -> Option<(&str, &str)> {
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == "Job" && r.api_version == "batch/v1")?;
    Some((pod.metadata.namespace.as_deref()?, owner.name.as_str()))
}

/// A stable identity for counting a finished pod once: its UID, or its name if it has none.
pub fn identity(pod: &Pod) -> String {
    pod.metadata.uid.clone().or_else(|| pod.metadata.name.clone()).unwrap_or_default()
}

/// When a finished pod finished, as the real controller reads it: the latest container
/// `finishedAt`, else the time `Ready` turned `False`, else the deletion timestamp, else `now`.
pub fn finish_time(pod: &Pod, now: Timestamp) -> Timestamp {
    let status = pod.status.as_ref();
    let containers = status
        .into_iter()
        .flat_map(|s| s.init_container_statuses.iter().flatten().chain(s.container_statuses.iter().flatten()))
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max();
    let ready_false = || {
        status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "Ready" && c.status == "False")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0)
    };
    let deleted = || pod.metadata.deletion_timestamp.as_ref().map(|t| t.0);
    containers.or_else(ready_false).or_else(deleted).unwrap_or(now)
}

/// Total container restarts, which `restartPolicy: OnFailure` Jobs count against the backoff limit.
pub fn restart_count(pod: &Pod) -> i64 {
    pod.status
        .as_ref()
        .into_iter()
        .flat_map(|s| s.init_container_statuses.iter().flatten().chain(s.container_statuses.iter().flatten()))
        .map(|c| i64::from(c.restart_count))
        .sum()
}

/// Orders active pods so the cheapest to lose come first, like the real controller: unscheduled
/// before scheduled, pending before running, not ready before ready, more restarts first, newer
/// first.
pub fn sort_for_removal(pods: &mut [&Pod]) {
    pods.sort_by_key(|p| {
        let scheduled = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
        let phase_rank = match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Pending") | None => 0,
            Some("Unknown") => 1,
            _ => 2,
        };
        let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (scheduled, phase_rank, is_ready(p), Reverse(restart_count(p)), Reverse(created), p.metadata.name.clone())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::test_support::*;
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn classifies_by_phase_then_deletion() {
        assert_eq!(state(&pod("a", "Running")), PodState::Active);
        assert_eq!(state(&pod("a", "Pending")), PodState::Active);
        assert_eq!(state(&pod("a", "Succeeded")), PodState::Succeeded);
        assert_eq!(state(&pod("a", "Failed")), PodState::Failed);
        assert_eq!(state(&deleting(pod("a", "Running"), t(1))), PodState::Terminating);
        assert_eq!(state(&deleting(pod("a", "Failed"), t(1))), PodState::Failed);
    }

    #[test]
    fn readiness_follows_the_ready_condition() {
        assert!(!is_ready(&pod("a", "Running")));
        assert!(is_ready(&ready(pod("a", "Running"))));
    }

    #[test]
    fn finds_the_controlling_job() {
        let p = pod("a", "Running");
        assert_eq!(controlling_job_uid(&p), Some(JOB_UID));
        assert_eq!(controlling_job_name(&p), Some((NAMESPACE, JOB_NAME)));
        let mut orphan = p.clone();
        orphan.metadata.owner_references = None;
        assert_eq!(controlling_job_uid(&orphan), None);
        let mut not_controller = p;
        if let Some(refs) = not_controller.metadata.owner_references.as_mut() {
            refs[0].controller = Some(false);
        }
        assert_eq!(controlling_job_uid(&not_controller), None);
    }

    #[test]
    fn finish_time_prefers_container_termination() {
        let mut p = pod("a", "Failed");
        assert_eq!(finish_time(&p, t(99)), t(99));
        p.metadata.deletion_timestamp = Some(Time(t(50)));
        assert_eq!(finish_time(&p, t(99)), t(50));
        if let Some(status) = p.status.as_mut() {
            status.container_statuses = Some(vec![ContainerStatus {
                name: "main".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        finished_at: Some(Time(t(7))),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]);
        }
        assert_eq!(finish_time(&p, t(99)), t(7));
    }

    #[test]
    fn removal_prefers_cheap_pods() {
        let running_ready = ready(scheduled(pod("ready", "Running")));
        let running = scheduled(pod("running", "Running"));
        let pending = pod("pending", "Pending");
        let mut pods = vec![&running_ready, &running, &pending];
        sort_for_removal(&mut pods);
        let names: Vec<_> = pods.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
        assert_eq!(names, ["pending", "running", "ready"]);
    }

    #[test]
    fn removal_prefers_newer_pods_among_equals() {
        let mut old = scheduled(pod("old", "Running"));
        old.metadata.creation_timestamp = Some(Time(t(1)));
        let mut new = scheduled(pod("new", "Running"));
        new.metadata.creation_timestamp = Some(Time(t(2)));
        let mut pods = vec![&old, &new];
        sort_for_removal(&mut pods);
        assert_eq!(pods[0].metadata.name.as_deref(), Some("new"));
    }
}
