//! Every knob and restart policy, driven through `step` without a cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::*;
use crate::behaviour::Behaviour;
use crate::controllers::kubelet::pod_status::status_patch;

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("valid time")
}

fn ms(n: u64) -> Timestamp {
    after(t0(), Duration::from_millis(n))
}

fn secs(n: u64) -> Timestamp {
    after(t0(), Duration::from_secs(n))
}

fn pod_with(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "uid-1"},
        "spec": spec,
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    }))
    .expect("test pod")
}

fn pod(restart_policy: &str) -> Pod {
    pod_with(
        json!({"nodeName": "n1", "restartPolicy": restart_policy, "containers": [{"name": "main", "image": "busybox"}]}),
    )
}

/// One pod on one simulated node, with the API server reduced to "the status we wrote".
struct Sim {
    pod: Pod,
    behaviour: Behaviour,
    errors: BTreeMap<String, String>,
    book: PodBook,
}

impl Sim {
    fn new(pod: Pod, behaviour: Behaviour) -> Self {
        let mut book = PodBook::new(&pod, t0());
        book.pod_ip = Some("10.244.0.2".to_string());
        Self { pod, behaviour, errors: BTreeMap::new(), book }
    }

    fn step(&mut self, now: Timestamp) -> Step {
        let defaults = Defaults { start_delay: Duration::from_millis(50), ready_delay: Duration::from_millis(50) };
        let facts = PodFacts { behaviour: &self.behaviour, defaults, config_errors: &self.errors, host_ip: "10.0.0.1" };
        let out = step(&self.pod, &facts, &mut self.book, now);
        if let Some(status) = &out.status {
            self.pod.status = Some(status.clone());
        }
        out
    }

    fn status(&self) -> &PodStatus {
        self.pod.status.as_ref().expect("a status")
    }

    fn phase(&self) -> &str {
        self.status().phase.as_deref().unwrap_or_default()
    }

    fn container(&self) -> &ContainerStatus {
        self.status().container_statuses.as_ref().and_then(|c| c.first()).expect("a container status")
    }

    fn waiting_reason(&self) -> Option<&str> {
        self.container().state.as_ref()?.waiting.as_ref()?.reason.as_deref()
    }

    fn waiting_message(&self) -> Option<&str> {
        self.container().state.as_ref()?.waiting.as_ref()?.message.as_deref()
    }

    fn terminated(&self) -> Option<(i32, &str)> {
        let t = self.container().state.as_ref()?.terminated.as_ref()?;
        Some((t.exit_code, t.reason.as_deref().unwrap_or_default()))
    }

    fn running(&self) -> bool {
        self.container().state.as_ref().is_some_and(|s| s.running.is_some())
    }

    fn condition(&self, kind: &str) -> &PodCondition {
        let conditions = self.status().conditions.as_deref().unwrap_or_default();
        conditions.iter().find(|c| c.type_ == kind).unwrap_or_else(|| panic!("no {kind} condition"))
    }

    fn is(&self, kind: &str) -> bool {
        self.condition(kind).status == "True"
    }

    fn mark_deleted(&mut self, grace: i64) {
        self.pod.metadata.deletion_timestamp = Some(Time(t0()));
        self.pod.metadata.deletion_grace_period_seconds = Some(grace);
    }
}

fn knobs(annotations: &[(&str, &str)]) -> Behaviour {
    let map = annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Behaviour::from_annotations(None, Some(&map))
}

#[test]
fn a_plain_pod_is_created_then_runs_then_becomes_ready() {
    let mut sim = Sim::new(pod("Always"), Behaviour::default());
    let out = sim.step(t0());
    assert_eq!(sim.phase(), "Pending");
    assert_eq!(sim.waiting_reason(), Some("ContainerCreating"));
    assert_eq!(sim.status().host_ip.as_deref(), Some("10.0.0.1"));
    assert_eq!(sim.status().start_time, Some(Time(t0())));
    assert_eq!(sim.status().pod_ip, None);
    assert!(!sim.is("PodReadyToStartContainers"));
    assert!(sim.is("Initialized"));
    assert!(sim.is("PodScheduled"), "the API server's condition is kept");
    assert_eq!(out.wake, Some(ms(50)));
    assert!(out.actions.is_empty());

    let out = sim.step(ms(50));
    assert_eq!(sim.phase(), "Running");
    assert!(sim.running());
    assert_eq!(sim.status().pod_ip.as_deref(), Some("10.244.0.2"));
    assert_eq!(sim.status().pod_ips.as_ref().map(|ips| ips[0].ip.clone()).as_deref(), Some("10.244.0.2"));
    assert!(sim.is("PodReadyToStartContainers"));
    assert!(!sim.is("Ready"));
    assert_eq!(sim.condition("Ready").reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(sim.condition("Ready").message.as_deref(), Some("containers with unready status: [main]"));
    let c = sim.container();
    assert_eq!((c.started, c.ready, c.restart_count), (Some(true), false, 0));
    assert!(c.container_id.as_deref().is_some_and(|id| id.starts_with("containerd://")));
    assert!(c.image_id.starts_with("docker.io/library/busybox@sha256:"));
    assert_eq!(out.wake, Some(ms(100)));

    let out = sim.step(ms(100));
    assert!(sim.is("Ready") && sim.is("ContainersReady"));
    assert!(sim.container().ready);
    assert_eq!(out.wake, None, "a healthy pod never changes by itself");
}

#[test]
fn start_and_ready_delay_knobs_override_the_defaults() {
    let b = knobs(&[(crate::behaviour::START_DELAY, "2s"), (crate::behaviour::READY_DELAY, "3s")]);
    let mut sim = Sim::new(pod("Always"), b);
    assert_eq!(sim.step(secs(1)).wake, Some(secs(2)));
    assert_eq!(sim.phase(), "Pending");
    assert_eq!(sim.step(secs(2)).wake, Some(secs(5)));
    assert_eq!(sim.phase(), "Running");
    sim.step(ms(4999));
    assert!(!sim.is("Ready"));
    sim.step(secs(5));
    assert!(sim.is("Ready"));
}

#[test]
fn a_jump_in_time_goes_straight_to_ready() {
    let mut sim = Sim::new(pod("Always"), Behaviour::default());
    sim.step(secs(3600));
    assert!(sim.is("Ready"));
    assert_eq!(
        sim.container().state.as_ref().and_then(|s| s.running.clone()).and_then(|r| r.started_at),
        Some(Time(ms(50)))
    );
}

#[test]
fn without_a_pod_ip_the_sandbox_never_comes_up() {
    let mut sim = Sim::new(pod("Always"), Behaviour::default());
    sim.book.pod_ip = None;
    let out = sim.step(secs(10));
    assert_eq!(sim.waiting_reason(), Some("ContainerCreating"));
    assert_eq!(out.wake, None);
    sim.book.pod_ip = Some("10.244.0.9".to_string());
    sim.step(secs(11));
    assert_eq!(sim.phase(), "Running");
    assert_eq!(sim.status().pod_ip.as_deref(), Some("10.244.0.9"));
}

#[test]
fn image_pull_failure_backs_off_forever() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::IMAGE_PULL, "fail")]));
    let out = sim.step(ms(50));
    assert_eq!(sim.phase(), "Pending");
    assert_eq!(sim.waiting_reason(), Some("ErrImagePull"));
    assert!(sim.waiting_message().is_some_and(|m| m.starts_with("failed to pull image \"busybox\": ")));
    assert_eq!(sim.status().pod_ip.as_deref(), Some("10.244.0.2"), "the sandbox exists");
    assert_eq!(out.wake, Some(after(ms(50), IMAGE_PULL_BACKOFF)));

    let out = sim.step(after(ms(50), IMAGE_PULL_BACKOFF));
    assert_eq!(sim.waiting_reason(), Some("ImagePullBackOff"));
    assert!(sim.waiting_message().is_some_and(|m| m.starts_with("Back-off pulling image \"busybox\"")));
    assert_eq!(out.wake, None);
    sim.step(secs(86_400));
    assert_eq!(sim.waiting_reason(), Some("ImagePullBackOff"));
    assert_eq!(sim.phase(), "Pending");
    assert!(!sim.container().started.unwrap_or(true));
}

#[test]
fn image_pull_recovers_when_the_knob_is_removed() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::IMAGE_PULL, "fail")]));
    sim.step(secs(5));
    sim.behaviour = Behaviour::default();
    sim.step(secs(6));
    assert!(sim.running());
    assert_eq!(
        sim.container().state.as_ref().and_then(|s| s.running.clone()).and_then(|r| r.started_at),
        Some(Time(secs(6)))
    );
}

#[test]
fn missing_secret_blocks_until_it_appears() {
    let mut sim = Sim::new(pod("Always"), Behaviour::default());
    sim.errors.insert("main".to_string(), "secret \"creds\" not found".to_string());
    let out = sim.step(secs(1));
    assert_eq!(sim.phase(), "Pending");
    assert_eq!(sim.waiting_reason(), Some("CreateContainerConfigError"));
    assert_eq!(sim.waiting_message(), Some("secret \"creds\" not found"));
    assert_eq!(out.wake, None, "only the Secret appearing unblocks it");

    sim.errors.clear();
    let out = sim.step(secs(30));
    assert_eq!(sim.phase(), "Running");
    assert!(sim.running());
    assert_eq!(out.wake, Some(after(secs(30), Duration::from_millis(50))));
}

#[test]
fn image_pull_failure_wins_over_missing_config() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::IMAGE_PULL, "fail")]));
    sim.errors.insert("main".to_string(), "secret \"creds\" not found".to_string());
    sim.step(secs(2));
    assert_eq!(sim.waiting_reason(), Some("ImagePullBackOff"));
}

#[test]
fn never_policy_exit_zero_succeeds() {
    let b = knobs(&[(crate::behaviour::RUN_DURATION, "5s")]);
    let mut sim = Sim::new(pod("Never"), b);
    assert_eq!(sim.step(secs(1)).wake, Some(ms(5050)));
    assert_eq!(sim.phase(), "Running");
    let out = sim.step(secs(6));
    assert_eq!(sim.phase(), "Succeeded");
    assert_eq!(sim.terminated(), Some((0, "Completed")));
    assert!(!sim.is("Ready"));
    assert_eq!(sim.condition("Ready").reason.as_deref(), Some("PodCompleted"));
    assert!(!sim.is("PodReadyToStartContainers"));
    assert_eq!(out.wake, None);
    assert!(sim.book.is_finished());
    let t = sim.container().state.as_ref().and_then(|s| s.terminated.clone()).expect("terminated");
    assert_eq!((t.started_at, t.finished_at), (Some(Time(ms(50))), Some(Time(ms(5050)))));
}

#[test]
fn never_policy_nonzero_exit_fails() {
    let b = knobs(&[(crate::behaviour::RUN_DURATION, "1s"), (crate::behaviour::EXIT_CODE, "3")]);
    let mut sim = Sim::new(pod("Never"), b);
    sim.step(secs(2));
    assert_eq!(sim.phase(), "Failed");
    assert_eq!(sim.terminated(), Some((3, "Error")));
    assert_eq!(sim.container().restart_count, 0);
    assert_eq!(sim.status().reason, None);
}

#[test]
fn exit_code_alone_exits_at_once() {
    let mut sim = Sim::new(pod("Never"), knobs(&[(crate::behaviour::EXIT_CODE, "7")]));
    sim.step(ms(50));
    assert_eq!(sim.terminated(), Some((7, "Error")));
}

#[test]
fn on_failure_restarts_failures_with_doubling_backoff_then_succeeds_on_zero() {
    let b = knobs(&[(crate::behaviour::RUN_DURATION, "1s"), (crate::behaviour::EXIT_CODE, "2")]);
    let mut sim = Sim::new(pod("OnFailure"), b);
    let out = sim.step(ms(1050));
    assert_eq!(sim.phase(), "Running");
    assert_eq!(sim.waiting_reason(), Some("CrashLoopBackOff"));
    assert!(
        sim.waiting_message()
            .is_some_and(|m| { m.starts_with("back-off 10s restarting failed container=main pod=web_ns(uid-1)") })
    );
    assert_eq!(sim.container().restart_count, 1);
    assert_eq!(sim.container().last_state.as_ref().and_then(|s| s.terminated.as_ref()).map(|t| t.exit_code), Some(2));
    assert!(!sim.is("Ready"));
    assert_eq!(out.wake, Some(ms(11_050)));

    sim.step(ms(11_050));
    assert!(sim.running());
    assert_eq!(sim.container().restart_count, 1);
    sim.step(ms(12_050));
    assert!(sim.waiting_message().is_some_and(|m| m.starts_with("back-off 20s ")));
    assert_eq!(sim.container().restart_count, 2);

    sim.behaviour = knobs(&[(crate::behaviour::RUN_DURATION, "1s"), (crate::behaviour::EXIT_CODE, "0")]);
    sim.step(ms(33_050));
    assert_eq!(sim.phase(), "Succeeded");
    assert_eq!(sim.terminated(), Some((0, "Completed")));
    let prior = sim.container().last_state.as_ref().and_then(|s| s.terminated.as_ref()).map(|t| t.exit_code);
    assert_eq!(prior, Some(2), "the previous failure stays visible as lastState");
}

#[test]
fn on_failure_exit_zero_succeeds_at_once() {
    let mut sim = Sim::new(pod("OnFailure"), knobs(&[(crate::behaviour::RUN_DURATION, "1s")]));
    sim.step(secs(2));
    assert_eq!(sim.phase(), "Succeeded");
    assert_eq!(sim.container().restart_count, 0);
}

#[test]
fn always_policy_restarts_even_successful_exits() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::RUN_DURATION, "1s")]));
    sim.step(ms(1050));
    assert_eq!(sim.phase(), "Running");
    assert_eq!(sim.waiting_reason(), Some("CrashLoopBackOff"));
    assert_eq!(sim.container().restart_count, 1);
    let last = sim.container().last_state.as_ref().and_then(|s| s.terminated.clone()).expect("lastState");
    assert_eq!((last.exit_code, last.reason.as_deref()), (0, Some("Completed")));
}

#[test]
fn crash_loop_backs_off_up_to_five_minutes() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::CRASH_LOOP, "true")]));
    sim.step(ms(50));
    assert_eq!(sim.phase(), "Running");
    assert_eq!(sim.waiting_reason(), Some("CrashLoopBackOff"));
    assert_eq!(sim.container().restart_count, 1);
    assert_eq!(sim.container().last_state.as_ref().and_then(|s| s.terminated.as_ref()).map(|t| t.exit_code), Some(1));
    // Restarts at 10, 30, 70, 150, 310, 610 (then every 300 s) seconds after the first crash.
    sim.step(after(ms(50), Duration::from_secs(3600)));
    let restarts = 6 + (3600 - 610) / 300 + 1;
    assert_eq!(sim.container().restart_count, restarts);
    assert!(sim.waiting_message().is_some_and(|m| m.starts_with("back-off 5m0s ")));
}

#[test]
fn small_steps_and_one_jump_agree() {
    let b = knobs(&[(crate::behaviour::CRASH_LOOP, "true")]);
    let mut stepped = Sim::new(pod("Always"), b.clone());
    for s in 0..=900 {
        stepped.step(secs(s));
    }
    let mut jumped = Sim::new(pod("Always"), b);
    jumped.step(secs(900));
    assert_eq!(stepped.book.restart_count, jumped.book.restart_count);
    assert_eq!(stepped.book.stage, jumped.book.stage);
}

#[test]
fn crash_loop_under_never_fails_once() {
    let mut sim = Sim::new(pod("Never"), knobs(&[(crate::behaviour::CRASH_LOOP, "true")]));
    sim.step(secs(100));
    assert_eq!(sim.phase(), "Failed");
    assert_eq!(sim.terminated(), Some((1, "Error")));
}

#[test]
fn crash_loop_under_on_failure_keeps_restarting() {
    let mut sim = Sim::new(pod("OnFailure"), knobs(&[(crate::behaviour::CRASH_LOOP, "true")]));
    sim.step(secs(100));
    assert_eq!(sim.waiting_reason(), Some("CrashLoopBackOff"));
    assert!(sim.container().restart_count >= 3);
}

#[test]
fn long_runs_reset_the_backoff() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::RUN_DURATION, "11m")]));
    sim.step(secs(660 * 3 + 30));
    assert!(sim.container().restart_count >= 2);
    let message = sim.waiting_message().map(str::to_string);
    if let Some(message) = message {
        assert!(message.starts_with("back-off 10s "), "{message}");
    }
    assert_eq!(sim.book.backoff_step, 1);
}

#[test]
fn eviction_fails_the_pod_for_good() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::EVICT_AFTER, "10s")]));
    let out = sim.step(secs(1));
    assert_eq!(out.wake, Some(ms(10_050)));
    sim.step(secs(11));
    assert_eq!(sim.phase(), "Failed");
    assert_eq!(sim.status().reason.as_deref(), Some("Evicted"));
    assert!(sim.status().message.as_deref().is_some_and(|m| m.starts_with("The node was low on resource: memory.")));
    assert_eq!(sim.terminated(), Some((137, "Error")));
    assert!(sim.is("DisruptionTarget"));
    assert_eq!(sim.condition("DisruptionTarget").reason.as_deref(), Some("TerminationByKubelet"));
    assert!(!sim.is("Ready"));
    let out = sim.step(secs(1000));
    assert_eq!(out.wake, None);
    assert_eq!(sim.phase(), "Failed");
}

#[test]
fn eviction_during_backoff_keeps_the_last_exit() {
    let b = knobs(&[(crate::behaviour::CRASH_LOOP, "true"), (crate::behaviour::EVICT_AFTER, "5s")]);
    let mut sim = Sim::new(pod("Always"), b);
    sim.step(secs(6));
    assert_eq!(sim.status().reason.as_deref(), Some("Evicted"));
    assert_eq!(sim.terminated(), Some((1, "Error")));
}

#[test]
fn delete_after_issues_one_ordinary_delete() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::DELETE_AFTER, "3s")]));
    let out = sim.step(secs(1));
    assert!(out.actions.is_empty());
    assert_eq!(out.wake, Some(ms(3050)));
    let out = sim.step(ms(3050));
    assert_eq!(out.actions, vec![Action::Delete]);
    assert_eq!(sim.phase(), "Running", "the kubelet itself keeps running the pod until deletion is seen");
    let out = sim.step(secs(5));
    assert!(out.actions.is_empty(), "the delete is issued once");
}

#[test]
fn node_loss_turns_ready_false_and_freezes_the_pod() {
    let b = knobs(&[(crate::behaviour::NODE_LOST_AFTER, "5s"), (crate::behaviour::RUN_DURATION, "10s")]);
    let mut sim = Sim::new(pod("Never"), b);
    sim.step(secs(1));
    assert!(sim.is("Ready"));
    let out = sim.step(ms(5050));
    assert_eq!(sim.book.lost_at, Some(ms(5050)));
    assert!(!sim.is("Ready"));
    assert!(sim.is("ContainersReady"), "only the node controller's Ready flips");
    assert_eq!(sim.phase(), "Running");
    assert_eq!(out.wake, None);

    let before = sim.status().clone();
    sim.step(secs(60));
    assert_eq!(sim.status(), &before, "a lost node reports nothing new, not even the exit");

    sim.mark_deleted(30);
    let out = sim.step(secs(61));
    assert!(out.actions.is_empty(), "a lost kubelet never finishes a graceful deletion");
    assert_eq!(sim.status(), &before);
}

#[test]
fn delete_after_still_happens_on_a_lost_node() {
    let b = knobs(&[(crate::behaviour::NODE_LOST_AFTER, "1s"), (crate::behaviour::DELETE_AFTER, "2s")]);
    let mut sim = Sim::new(pod("Always"), b);
    let out = sim.step(secs(5));
    assert_eq!(out.actions, vec![Action::Delete]);
}

/// Beside a pause process the main process is not PID 1: SIGTERM ends it at once.
#[test]
fn graceful_deletion_of_a_pod_sharing_its_process_namespace_finishes_at_once() {
    let shared = pod_with(json!({"nodeName": "n1", "restartPolicy": "Always", "shareProcessNamespace": true,
        "containers": [{"name": "main", "image": "busybox"}]}));
    let mut sim = Sim::new(shared, Behaviour::default());
    sim.step(secs(1));
    sim.mark_deleted(30);
    let out = sim.step(secs(2));
    assert_eq!(out.actions, vec![Action::FinishDeletion]);
    assert_eq!(sim.phase(), "Failed", "a container that a signal ended failed");
    assert_eq!(sim.terminated(), Some((143, "Error")), "SIGTERM");
    assert!(!sim.is("Ready"));
    let out = sim.step(secs(3));
    assert!(out.actions.is_empty(), "the final delete is issued once");
}

/// As PID 1 without a SIGTERM handler, the main process ignores the kubelet's SIGTERM: the pod
/// stops only when the grace period ends, by SIGKILL.
#[test]
fn graceful_deletion_of_a_main_process_that_is_pid_1_waits_out_the_grace_period() {
    let mut sim = Sim::new(pod("Always"), Behaviour::default());
    sim.step(secs(1));
    sim.mark_deleted(30);
    let out = sim.step(secs(2));
    assert!(out.actions.is_empty(), "SIGTERM is ignored: {:?}", out.actions);
    assert_eq!(out.wake, Some(secs(32)), "the kubelet wakes at the end of the grace period");
    assert!(sim.step(secs(31)).actions.is_empty(), "still within the grace period");
    let out = sim.step(secs(32));
    assert_eq!(out.actions, vec![Action::FinishDeletion]);
    assert_eq!(sim.terminated().map(|(code, _)| code), Some(137), "SIGKILL");
}

#[test]
fn termination_delay_is_honoured_within_the_grace_period() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::TERMINATION_DELAY, "5s")]));
    sim.step(secs(1));
    sim.mark_deleted(30);
    let out = sim.step(secs(2));
    assert!(out.actions.is_empty());
    assert!(sim.running());
    assert_eq!(out.wake, Some(secs(7)));
    let out = sim.step(secs(7));
    assert_eq!(out.actions, vec![Action::FinishDeletion]);
    assert_eq!(sim.terminated(), Some((0, "Completed")));
}

#[test]
fn termination_delay_beyond_the_grace_period_is_a_kill() {
    let mut sim = Sim::new(pod("Always"), knobs(&[(crate::behaviour::TERMINATION_DELAY, "60s")]));
    sim.step(secs(1));
    sim.mark_deleted(10);
    assert_eq!(sim.step(secs(2)).wake, Some(secs(12)));
    let out = sim.step(secs(12));
    assert_eq!(out.actions, vec![Action::FinishDeletion]);
    assert_eq!(sim.phase(), "Failed");
    assert_eq!(sim.terminated(), Some((137, "Error")));
}

#[test]
fn spec_grace_period_applies_when_the_deletion_gives_none() {
    let mut p = pod("Always");
    if let Some(spec) = p.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(3);
    }
    let mut sim = Sim::new(p, knobs(&[(crate::behaviour::TERMINATION_DELAY, "60s")]));
    sim.step(secs(1));
    sim.pod.metadata.deletion_timestamp = Some(Time(t0()));
    assert_eq!(sim.step(secs(2)).wake, Some(secs(5)));
}

#[test]
fn deleting_a_pod_that_never_started_finishes_at_once() {
    let mut sim = Sim::new(
        pod("Always"),
        knobs(&[(crate::behaviour::IMAGE_PULL, "fail"), (crate::behaviour::TERMINATION_DELAY, "9s")]),
    );
    sim.step(secs(1));
    sim.mark_deleted(30);
    let out = sim.step(secs(2));
    assert_eq!(out.actions, vec![Action::FinishDeletion]);
    assert_eq!(sim.phase(), "Failed");
    assert_eq!(sim.terminated(), Some((137, "ContainerStatusUnknown")));
}

#[test]
fn deleting_a_finished_pod_keeps_its_outcome() {
    let mut sim = Sim::new(pod("Never"), knobs(&[(crate::behaviour::RUN_DURATION, "1s")]));
    sim.step(secs(5));
    assert_eq!(sim.phase(), "Succeeded");
    sim.mark_deleted(30);
    let out = sim.step(secs(6));
    assert_eq!(out.actions, vec![Action::FinishDeletion]);
    assert_eq!(sim.phase(), "Succeeded");
}

#[test]
fn active_deadline_fails_the_pod() {
    let mut p = pod("Always");
    if let Some(spec) = p.spec.as_mut() {
        spec.active_deadline_seconds = Some(30);
    }
    let mut sim = Sim::new(p, Behaviour::default());
    assert_eq!(sim.step(secs(1)).wake, Some(secs(30)));
    sim.step(secs(30));
    assert_eq!(sim.phase(), "Failed");
    assert_eq!(sim.status().reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(sim.terminated(), Some((137, "Error")));
}

#[test]
fn transition_times_move_only_when_a_condition_flips() {
    let mut sim = Sim::new(pod("Always"), Behaviour::default());
    sim.step(t0());
    let ready_since = |sim: &Sim| sim.condition("Ready").last_transition_time.clone();
    assert_eq!(ready_since(&sim), Some(Time(t0())));
    sim.step(ms(60));
    assert_eq!(ready_since(&sim), Some(Time(t0())), "still False, time kept");
    sim.step(secs(2));
    assert_eq!(ready_since(&sim), Some(Time(secs(2))));
    assert_eq!(sim.condition("Initialized").last_transition_time, Some(Time(t0())));
}

#[test]
fn the_written_status_is_not_written_again() {
    let mut sim = Sim::new(pod("Always"), Behaviour::default());
    let out = sim.step(secs(1));
    let desired = out.status.expect("status");
    let mut observed = desired.clone();
    observed.qos_class = Some("BestEffort".to_string());
    assert_eq!(status_patch(Some(&observed), &desired).expect("patch"), None);
    let patch = status_patch(None, &desired).expect("patch").expect("a patch for an empty status");
    assert_eq!(patch["status"]["phase"], "Running");
    assert!(patch["status"]["reason"].is_null() && patch["status"].get("reason").is_some());
    observed.reason = Some("Evicted".to_string());
    assert!(status_patch(Some(&observed), &desired).expect("patch").is_some(), "a stale reason is cleared");
}

#[test]
fn a_pod_with_a_running_status_is_adopted() {
    let mut p = pod("Always");
    p.status = Some(
        serde_json::from_value(json!({
            "phase": "Running",
            "startTime": "2025-12-31T23:00:00Z",
            "podIP": "10.244.0.7",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-12-31T23:01:00Z"}],
            "containerStatuses": [{"name": "main", "image": "busybox", "imageID": "", "ready": true, "restartCount": 4,
                "state": {"running": {"startedAt": "2025-12-31T23:00:30Z"}}}]
        }))
        .expect("status"),
    );
    let book = PodBook::new(&p, t0());
    assert_eq!(book.restart_count, 4);
    assert_eq!(book.stage, Stage::Running { since: "2025-12-31T23:00:30Z".parse().expect("time") });
    assert_eq!(book.seen_at, "2025-12-31T23:00:00Z".parse::<Timestamp>().expect("time"));
    let mut sim = Sim { pod: p, behaviour: Behaviour::default(), errors: BTreeMap::new(), book };
    sim.book.pod_ip = Some("10.244.0.7".to_string());
    sim.step(t0());
    assert!(sim.is("Ready"));
    assert_eq!(sim.condition("Ready").last_transition_time, Some(Time("2025-12-31T23:01:00Z".parse().expect("time"))));
}

#[test]
fn an_already_terminal_pod_is_left_alone() {
    let mut p = pod("Never");
    p.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
    let mut sim = Sim::new(p, Behaviour::default());
    let out = sim.step(secs(1));
    assert_eq!((out.status, out.wake), (None, None));
    sim.mark_deleted(30);
    assert_eq!(sim.step(secs(2)).actions, vec![Action::FinishDeletion]);
}

#[test]
fn init_containers_complete_when_the_sandbox_is_up() {
    let p = pod_with(json!({"nodeName": "n1", "containers": [{"name": "main", "image": "app"}], "initContainers": [
        {"name": "setup", "image": "busybox"},
        {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}
    ]}));
    let mut sim = Sim::new(p, Behaviour::default());
    sim.step(t0());
    assert!(!sim.is("Initialized"));
    assert_eq!(
        sim.condition("Initialized").message.as_deref(),
        Some("containers with incomplete status: [setup proxy]")
    );
    assert_eq!(sim.waiting_reason(), Some("PodInitializing"));
    sim.step(secs(1));
    assert!(sim.is("Initialized"));
    let init = sim.status().init_container_statuses.clone().expect("init statuses");
    let setup = init[0].state.as_ref().and_then(|s| s.terminated.clone()).expect("setup terminated");
    assert_eq!((setup.exit_code, setup.reason.as_deref()), (0, Some("Completed")));
    assert!(init[1].state.as_ref().is_some_and(|s| s.running.is_some()), "sidecars keep running");
    assert!(init[1].ready);
}

#[test]
fn an_init_container_missing_config_blocks_initialisation() {
    let p = pod_with(json!({"nodeName": "n1", "containers": [{"name": "main", "image": "app"}], "initContainers": [
        {"name": "setup", "image": "busybox"}
    ]}));
    let mut sim = Sim::new(p, Behaviour::default());
    sim.errors.insert("setup".to_string(), "configmap \"cfg\" not found".to_string());
    sim.step(secs(1));
    assert!(!sim.is("Initialized"));
    assert_eq!(sim.waiting_reason(), Some("PodInitializing"));
    let init = sim.status().init_container_statuses.clone().expect("init statuses");
    let waiting = init[0].state.as_ref().and_then(|s| s.waiting.clone()).expect("waiting");
    assert_eq!(waiting.reason.as_deref(), Some("CreateContainerConfigError"));
}

#[test]
fn all_containers_share_the_pods_fate() {
    let p = pod_with(json!({"nodeName": "n1", "restartPolicy": "Never", "containers": [
        {"name": "a", "image": "x"}, {"name": "b", "image": "y"}
    ]}));
    let mut sim = Sim::new(p, knobs(&[(crate::behaviour::RUN_DURATION, "1s")]));
    sim.step(ms(60));
    assert_eq!(sim.condition("ContainersReady").message.as_deref(), Some("containers with unready status: [a b]"));
    sim.step(secs(2));
    let statuses = sim.status().container_statuses.clone().expect("statuses");
    assert_eq!(statuses.len(), 2);
    assert!(statuses.iter().all(|c| { c.state.as_ref().and_then(|s| s.terminated.as_ref()).is_some() }));
    assert_ne!(statuses[0].container_id, statuses[1].container_id);
}

#[test]
fn namespace_knobs_reach_the_pod() {
    let ns = BTreeMap::from([(crate::behaviour::CRASH_LOOP.to_string(), "true".to_string())]);
    let mut sim = Sim::new(pod("Always"), Behaviour::from_annotations(Some(&ns), None));
    sim.step(secs(1));
    assert_eq!(sim.waiting_reason(), Some("CrashLoopBackOff"));
}
