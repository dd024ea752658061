//! Behaviour knobs: how the simulated kubelet and scheduler treat one pod.
//!
//! A test asks for a slow start, an image that cannot be pulled, an unschedulable pod, a crash
//! loop, an exit code, an eviction, a deletion or a lost node by putting annotations on the pod
//! (usually through the pod template of a Sandbox or Job) or on its Namespace; a pod's own
//! annotation wins over its namespace's. Because the knobs live in the API objects, they reach
//! controllers that run in another process (`sandbox-dev simulate`) unchanged.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::clock::parse_duration;

/// Cluster time from binding to the container running (Go duration, e.g. `2s`).
pub const START_DELAY: &str = "sim.embedded-cluster.dev/start-delay";
/// Cluster time from running to Ready.
pub const READY_DELAY: &str = "sim.embedded-cluster.dev/ready-delay";
/// `fail`: the image cannot be pulled (`ErrImagePull`, then `ImagePullBackOff`), forever.
pub const IMAGE_PULL: &str = "sim.embedded-cluster.dev/image-pull";
/// `true`: the scheduler finds no node (`PodScheduled=False`, reason `Unschedulable`).
pub const UNSCHEDULABLE: &str = "sim.embedded-cluster.dev/unschedulable";
/// The main container exits with this code after `run-duration` (restartPolicy applies).
pub const EXIT_CODE: &str = "sim.embedded-cluster.dev/exit-code";
/// How long the container runs before it exits (with `exit-code`, default 0).
pub const RUN_DURATION: &str = "sim.embedded-cluster.dev/run-duration";
/// `true`: the container exits 1 at once, every time (CrashLoopBackOff under restartPolicy Always).
pub const CRASH_LOOP: &str = "sim.embedded-cluster.dev/crash-loop";
/// The pod is evicted (phase Failed, reason `Evicted`) this long after it starts running.
pub const EVICT_AFTER: &str = "sim.embedded-cluster.dev/evict-after";
/// The pod is deleted (as by a person or an eviction API call) this long after it starts running.
pub const DELETE_AFTER: &str = "sim.embedded-cluster.dev/delete-after";
/// The pod's node is lost this long after the pod starts running: the pod's Ready turns False
/// and the node's Ready turns Unknown.
pub const NODE_LOST_AFTER: &str = "sim.embedded-cluster.dev/node-lost-after";
/// How long a terminating pod takes to stop (capped by its grace period); without it, what the
/// main process does with SIGTERM (see `stop_delay` in the kubelet).
pub const TERMINATION_DELAY: &str = "sim.embedded-cluster.dev/termination-delay";
/// For this long after the kubelet first sees the pod, its Secret and ConfigMap caches are not
/// synced: a container with a required reference waits with `CreateContainerConfigError`
/// `failed to sync secret cache: timed out waiting for the condition`, as a real kubelet's
/// does when its watch-based cache lags a new pod.
pub const CONFIG_SYNC_DELAY: &str = "sim.embedded-cluster.dev/config-sync-delay";

/// The knobs in force for one pod, after merging namespace and pod annotations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Behaviour {
    pub start_delay: Option<Duration>,
    pub ready_delay: Option<Duration>,
    pub image_pull_fails: bool,
    pub unschedulable: bool,
    pub exit_code: Option<i32>,
    pub run_duration: Option<Duration>,
    pub crash_loop: bool,
    pub evict_after: Option<Duration>,
    pub delete_after: Option<Duration>,
    pub node_lost_after: Option<Duration>,
    pub termination_delay: Option<Duration>,
    pub config_sync_delay: Option<Duration>,
}

impl Behaviour {
    /// Reads the knobs from a namespace's and a pod's annotations (the pod's win). Malformed
    /// values are ignored, as a kubelet ignores annotations it does not understand.
    pub fn from_annotations(
        namespace: Option<&BTreeMap<String, String>>,
        pod: Option<&BTreeMap<String, String>>,
    ) -> Self {
        let get = |key: &str| -> Option<&str> {
            pod.and_then(|m| m.get(key)).or_else(|| namespace.and_then(|m| m.get(key))).map(String::as_str)
        };
        let dur = |key: &str| get(key).and_then(parse_duration);
        let flag = |key: &str| get(key).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Self {
            start_delay: dur(START_DELAY),
            ready_delay: dur(READY_DELAY),
            image_pull_fails: get(IMAGE_PULL).is_some_and(|v| v.eq_ignore_ascii_case("fail")),
            unschedulable: flag(UNSCHEDULABLE),
            exit_code: get(EXIT_CODE).and_then(|v| v.trim().parse().ok()),
            run_duration: dur(RUN_DURATION),
            crash_loop: flag(CRASH_LOOP),
            evict_after: dur(EVICT_AFTER),
            delete_after: dur(DELETE_AFTER),
            node_lost_after: dur(NODE_LOST_AFTER),
            termination_delay: dur(TERMINATION_DELAY),
            config_sync_delay: dur(CONFIG_SYNC_DELAY),
        }
    }

    /// The annotations that ask for this behaviour, for a test to put on a pod template or namespace.
    pub fn to_annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let fmt = |d: &Duration| format!("{}ms", d.as_millis());
        let mut put_dur = |key: &str, d: &Option<Duration>| {
            if let Some(d) = d {
                out.insert(key.to_string(), fmt(d));
            }
        };
        put_dur(START_DELAY, &self.start_delay);
        put_dur(READY_DELAY, &self.ready_delay);
        put_dur(RUN_DURATION, &self.run_duration);
        put_dur(EVICT_AFTER, &self.evict_after);
        put_dur(DELETE_AFTER, &self.delete_after);
        put_dur(NODE_LOST_AFTER, &self.node_lost_after);
        put_dur(TERMINATION_DELAY, &self.termination_delay);
        put_dur(CONFIG_SYNC_DELAY, &self.config_sync_delay);
        if self.image_pull_fails {
            out.insert(IMAGE_PULL.to_string(), "fail".to_string());
        }
        if self.unschedulable {
            out.insert(UNSCHEDULABLE.to_string(), "true".to_string());
        }
        if self.crash_loop {
            out.insert(CRASH_LOOP.to_string(), "true".to_string());
        }
        if let Some(code) = self.exit_code {
            out.insert(EXIT_CODE.to_string(), code.to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_annotations_override_namespace_ones() {
        let ns = BTreeMap::from([
            (START_DELAY.to_string(), "5s".to_string()),
            (UNSCHEDULABLE.to_string(), "true".to_string()),
        ]);
        let pod = BTreeMap::from([(START_DELAY.to_string(), "200ms".to_string())]);
        let b = Behaviour::from_annotations(Some(&ns), Some(&pod));
        assert_eq!(b.start_delay, Some(Duration::from_millis(200)));
        assert!(b.unschedulable);
    }

    #[test]
    fn round_trips_through_annotations() {
        let b = Behaviour {
            ready_delay: Some(Duration::from_millis(1500)),
            image_pull_fails: true,
            exit_code: Some(3),
            ..Default::default()
        };
        assert_eq!(Behaviour::from_annotations(None, Some(&b.to_annotations())), b);
    }
}
