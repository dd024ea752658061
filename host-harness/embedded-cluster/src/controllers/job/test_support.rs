//! Builders for Jobs and pods in unit tests.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus};
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

pub const NAMESPACE: &str = "sandbox";
pub const JOB_NAME: &str = "work";
pub const JOB_UID: &str = "job-uid-1";

/// A fixed instant plus `secs` seconds.
pub fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A Job as the API server would return it right after creation.
pub fn job(parallelism: i32, completions: Option<i32>) -> Job {
    Job {
        metadata: ObjectMeta {
            name: Some(JOB_NAME.into()),
            namespace: Some(NAMESPACE.into()),
            uid: Some(JOB_UID.into()),
            resource_version: Some("1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            parallelism: Some(parallelism),
            completions,
            backoff_limit: Some(6),
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        image: Some("busybox".into()),
                        ..Container::default()
                    }],
                    restart_policy: Some("Never".into()),
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// Applies `f` to the Job's spec.
pub fn with_spec(mut job: Job, f: impl FnOnce(&mut JobSpec)) -> Job {
    if let Some(spec) = job.spec.as_mut() {
        f(spec);
    }
    job
}

/// Applies `f` to the Job's status (creating it if absent).
pub fn with_status(mut job: Job, f: impl FnOnce(&mut JobStatus)) -> Job {
    f(job.status.get_or_insert_with(JobStatus::default));
    job
}

/// A pod controlled by the test Job, in the given phase.
pub fn pod(name: &str, phase: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            uid: Some(format!("uid-{name}")),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name: JOB_NAME.into(),
                uid: JOB_UID.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec::default()),
        status: Some(PodStatus { phase: Some(phase.into()), ..PodStatus::default() }),
    }
}

/// Marks the pod `Ready=True`.
pub fn ready(mut pod: Pod) -> Pod {
    if let Some(status) = pod.status.as_mut() {
        status.conditions.get_or_insert_with(Vec::new).push(PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..PodCondition::default()
        });
    }
    pod
}

/// Binds the pod to a node.
pub fn scheduled(mut pod: Pod) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some("node-1".into());
    }
    pod
}

/// Gives the pod a deletion timestamp.
pub fn deleting(mut pod: Pod, at: Timestamp) -> Pod {
    pod.metadata.deletion_timestamp = Some(Time(at));
    pod
}

/// Marks a finished pod as having finished at `at` (via its `Ready=False` condition).
pub fn finished_at(mut pod: Pod, at: Timestamp) -> Pod {
    if let Some(status) = pod.status.as_mut() {
        status.conditions.get_or_insert_with(Vec::new).push(PodCondition {
            type_: "Ready".into(),
            status: "False".into(),
            last_transition_time: Some(Time(at)),
            ..PodCondition::default()
        });
    }
    pod
}
