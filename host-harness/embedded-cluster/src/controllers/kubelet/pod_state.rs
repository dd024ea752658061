//! The life of one pod on a simulated node, as a discrete-event state machine.
//!
//! Everything here is pure: the observed pod, its behaviour knobs, what the kubelet remembers
//! about it (`PodBook`) and the cluster time go in; the status it should show, the API calls
//! to make and the next time anything changes come out. Events are replayed in time order, so
//! a clock jumped forward by an hour yields the same history (restart counts, exit times) as an
//! hour lived through, and every branch can be tested without a cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::pid_namespace::MainProcess;
use super::pod_status;
use crate::behaviour::Behaviour;

/// How long `ErrImagePull` shows before the kubelet backs off to `ImagePullBackOff`.
pub(crate) const IMAGE_PULL_BACKOFF: Duration = Duration::from_secs(1);
/// The kubelet's first crash-loop back-off; it doubles with every restart.
const CRASH_BACKOFF_INITIAL: Duration = Duration::from_secs(10);
/// The crash-loop back-off never exceeds this.
const CRASH_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// A container that ran this long before exiting restarts with the initial back-off again.
const CRASH_BACKOFF_RESET: Duration = Duration::from_secs(600);
/// Grace period when neither the deletion nor the pod spec gives one.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// Exit code of a container killed by SIGKILL (eviction, deadline, grace period exhausted).
pub(crate) const KILLED_EXIT_CODE: i32 = 137;
/// Exit code of a main process that SIGTERM ended (it has the default disposition).
const TERMINATED_EXIT_CODE: i32 = 143;
/// Bound on the events replayed in one step, so a clock jumped by years cannot stall the loop.
const MAX_EVENTS_PER_STEP: usize = 10_000;

/// Timings used when no knob overrides them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Defaults {
    /// Binding to containers running.
    pub(crate) start_delay: Duration,
    /// Running to Ready.
    pub(crate) ready_delay: Duration,
}

/// What the kubelet knows about a pod's surroundings at this instant.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PodFacts<'a> {
    /// Knobs from the pod's and its namespace's annotations.
    pub(crate) behaviour: &'a Behaviour,
    /// Timings when knobs are silent.
    pub(crate) defaults: Defaults,
    /// Why containers cannot be created yet (missing Secrets/ConfigMaps), by container name.
    pub(crate) config_errors: &'a BTreeMap<String, String>,
    /// The node's InternalIP.
    pub(crate) host_ip: &'a str,
}

impl PodFacts<'_> {
    fn start_delay(&self) -> Duration {
        self.behaviour.start_delay.unwrap_or(self.defaults.start_delay)
    }

    pub(crate) fn ready_delay(&self) -> Duration {
        self.behaviour.ready_delay.unwrap_or(self.defaults.ready_delay)
    }

    /// How long each container run lasts and the code it exits with, if it ever exits.
    fn exit_plan(&self) -> Option<(Duration, i32)> {
        let b = self.behaviour;
        if b.crash_loop {
            Some((Duration::ZERO, 1))
        } else if b.run_duration.is_some() || b.exit_code.is_some() {
            Some((b.run_duration.unwrap_or_default(), b.exit_code.unwrap_or(0)))
        } else {
            None
        }
    }
}

/// Where the pod's containers are in their life.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Stage {
    /// Waiting for the sandbox (start delay, or no free pod IP).
    Creating,
    /// The image cannot be pulled; `ErrImagePull`, then `ImagePullBackOff`, forever.
    PullFailing { since: Timestamp },
    /// A referenced Secret or ConfigMap is missing (`CreateContainerConfigError`).
    ConfigBlocked,
    /// Containers are running since `since` (the current run).
    Running { since: Timestamp },
    /// Containers exited and wait until `until` to restart (`CrashLoopBackOff`).
    BackOff { until: Timestamp },
    /// The pod reached a terminal phase; nothing restarts.
    Finished(Finish),
}

/// Why a pod is finished.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Finish {
    /// Containers exited and the restart policy does not restart them.
    Exited,
    /// Evicted by the node (`evict-after`).
    Evicted,
    /// `activeDeadlineSeconds` ran out.
    DeadlineExceeded,
    /// Containers were stopped because the pod is being deleted.
    Deleted,
    /// The pod was already terminal when this kubelet first saw it; its status is left alone.
    Adopted,
}

/// One ended container run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Exit {
    pub(crate) code: i32,
    pub(crate) started_at: Timestamp,
    pub(crate) finished_at: Timestamp,
    /// The restart count during that run, which names its container ID.
    pub(crate) run: i32,
}

/// What the kubelet remembers about one pod between observations (keyed by pod UID).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PodBook {
    /// When the kubelet first saw the pod bound to its node; `status.startTime`.
    pub(crate) seen_at: Timestamp,
    /// The pod's IP, shown once the sandbox exists.
    pub(crate) pod_ip: Option<String>,
    /// When the sandbox came up (`PodReadyToStartContainers`).
    pub(crate) sandbox_at: Option<Timestamp>,
    pub(crate) stage: Stage,
    /// The first time containers ran; the origin of `evict-after`, `delete-after` and
    /// `node-lost-after`.
    pub(crate) first_run_at: Option<Timestamp>,
    pub(crate) restart_count: i32,
    /// Index into the doubling crash back-off.
    backoff_step: u32,
    pub(crate) last_exit: Option<Exit>,
    /// The exit before `last_exit`, shown as `lastState` of a finished container.
    pub(crate) prior_exit: Option<Exit>,
    /// When the kubelet noticed `deletionTimestamp`.
    pub(crate) deletion_seen_at: Option<Timestamp>,
    /// Containers have been stopped for deletion; the final DELETE is due.
    pub(crate) stopped: bool,
    /// The final DELETE (grace 0, UID precondition) was issued.
    pub(crate) final_delete_sent: bool,
    /// The `delete-after` DELETE was issued.
    pub(crate) delete_requested: bool,
    /// When the pod's node was lost (`node-lost-after`); the pod is frozen from then on.
    pub(crate) lost_at: Option<Timestamp>,
    /// Each condition type's status and when it last changed, so transition times stay put.
    pub(crate) transitions: BTreeMap<String, (String, Timestamp)>,
}

impl PodBook {
    /// The book of a pod seen for the first time at `now`. A pod that already carries a status
    /// (written by an earlier kubelet process) is adopted where it stands: running containers
    /// keep running, terminal pods are left alone.
    pub(crate) fn new(pod: &Pod, now: Timestamp) -> Self {
        let status = pod.status.as_ref();
        let seen_at = status.and_then(|s| s.start_time.as_ref()).map_or(now, |t| t.0);
        let transitions = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|c| Some((c.type_.clone(), (c.status.clone(), c.last_transition_time.as_ref()?.0))))
            .collect();
        let mut book = Self {
            seen_at,
            pod_ip: None,
            sandbox_at: None,
            stage: Stage::Creating,
            first_run_at: None,
            restart_count: 0,
            backoff_step: 0,
            last_exit: None,
            prior_exit: None,
            deletion_seen_at: None,
            stopped: false,
            final_delete_sent: false,
            delete_requested: false,
            lost_at: None,
            transitions,
        };
        let phase = status.and_then(|s| s.phase.as_deref());
        let running = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.first())
            .and_then(|c| Some((c.restart_count, c.state.as_ref()?.running.as_ref()?.started_at.as_ref()?.0)));
        if matches!(phase, Some("Succeeded" | "Failed")) {
            book.sandbox_at = Some(seen_at);
            book.stage = Stage::Finished(Finish::Adopted);
        } else if let Some((restarts, since)) = running {
            book.sandbox_at = Some(seen_at);
            book.first_run_at = Some(since);
            book.restart_count = restarts;
            book.stage = Stage::Running { since };
        }
        book
    }

    /// True once nothing will run again, so the pod's IP can go back to the pool.
    pub(crate) fn is_finished(&self) -> bool {
        matches!(self.stage, Stage::Finished(_))
    }
}

/// An API call the kubelet must make for a pod.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Action {
    /// An ordinary graceful DELETE, as a person or controller would issue (`delete-after`).
    Delete,
    /// The DELETE with grace period 0 and a UID precondition that completes a graceful deletion
    /// once the containers are stopped.
    FinishDeletion,
}

/// The outcome of one step.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Step {
    /// The complete status the pod should show (conditions include those other components
    /// own), or `None` when the kubelet must not write it.
    pub(crate) status: Option<PodStatus>,
    pub(crate) actions: Vec<Action>,
    /// When the pod next changes by itself; `None` if only an outside change can move it.
    pub(crate) wake: Option<Timestamp>,
}

/// Something that happens to a pod at a point in time. The order breaks ties between events
/// due at the same instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Stop,
    Lose,
    Evict,
    Deadline,
    RequestDelete,
    SandboxReady,
    Start,
    Exit,
}

/// Advances the pod to `now` and says what it should look like.
pub(crate) fn step(pod: &Pod, facts: &PodFacts<'_>, book: &mut PodBook, now: Timestamp) -> Step {
    if pod.metadata.deletion_timestamp.is_some() && book.deletion_seen_at.is_none() {
        book.deletion_seen_at = Some(now);
    }
    let mut actions = Vec::new();
    for _ in 0..MAX_EVENTS_PER_STEP {
        match next_event(pod, facts, book, now) {
            Some((at, event)) if at <= now => apply(pod, facts, book, event, at, &mut actions),
            _ => break,
        }
    }
    if book.stopped && !book.final_delete_sent && book.lost_at.is_none() {
        book.final_delete_sent = true;
        actions.push(Action::FinishDeletion);
    }
    let mut status = pod_status::render(pod, facts, book, now);
    if let Some(status) = status.as_mut() {
        pod_status::stamp_conditions(status, pod.status.as_ref(), &mut book.transitions, now);
    }
    let wake = [next_event(pod, facts, book, now).map(|(at, _)| at), pod_status::next_change(facts, book, now)]
        .into_iter()
        .flatten()
        .min();
    Step { status, actions, wake }
}

/// The earliest event the pod is waiting for, given what holds at `now`.
fn next_event(pod: &Pod, facts: &PodFacts<'_>, book: &PodBook, now: Timestamp) -> Option<(Timestamp, Event)> {
    let b = facts.behaviour;
    // A person deleting the pod is not the kubelet: it happens even once the node is lost.
    let external = match (book.first_run_at, b.delete_after, book.delete_requested) {
        (Some(first), Some(d), false) if book.deletion_seen_at.is_none() => {
            Some((after(first, d), Event::RequestDelete))
        }
        _ => None,
    };
    if book.lost_at.is_some() {
        return external;
    }
    if let Some(seen) = book.deletion_seen_at {
        if book.stopped {
            return None;
        }
        let delay = match book.stage {
            Stage::Running { .. } => stop_delay(pod, facts).0,
            _ => Duration::ZERO,
        };
        return Some((after(seen, delay), Event::Stop));
    }
    let mut due: Vec<(Timestamp, Event)> = external.into_iter().collect();
    match &book.stage {
        Stage::Creating if book.pod_ip.is_some() => {
            due.push((after(book.seen_at, facts.start_delay()), Event::SandboxReady))
        }
        Stage::Creating | Stage::Finished(_) => {}
        Stage::PullFailing { .. } if !b.image_pull_fails => due.push((now, Event::Start)),
        Stage::PullFailing { .. } => {}
        Stage::ConfigBlocked if facts.config_errors.is_empty() || b.image_pull_fails => due.push((now, Event::Start)),
        Stage::ConfigBlocked => {}
        Stage::Running { since } => {
            if let Some((run_for, _)) = facts.exit_plan() {
                due.push((after(*since, run_for), Event::Exit));
            }
        }
        Stage::BackOff { until } => due.push((*until, Event::Start)),
    }
    if !book.is_finished() {
        if let Some(first) = book.first_run_at {
            if let Some(d) = b.evict_after {
                due.push((after(first, d), Event::Evict));
            }
            if let Some(d) = b.node_lost_after {
                due.push((after(first, d), Event::Lose));
            }
        }
        let deadline = pod.spec.as_ref().and_then(|s| s.active_deadline_seconds);
        if let Some(secs) = deadline {
            let secs = Duration::from_secs(u64::try_from(secs).unwrap_or(0));
            due.push((after(book.seen_at, secs), Event::Deadline));
        }
    }
    due.into_iter().min()
}

/// Applies one event that happened at `at`.
fn apply(pod: &Pod, facts: &PodFacts<'_>, book: &mut PodBook, event: Event, at: Timestamp, actions: &mut Vec<Action>) {
    match event {
        Event::SandboxReady => {
            book.sandbox_at = Some(at);
            start(facts, book, at);
        }
        Event::Start => start(facts, book, at),
        Event::Exit => {
            let code = facts.exit_plan().map_or(0, |(_, code)| code);
            let Stage::Running { since } = book.stage else {
                return;
            };
            record_exit(book, Exit { code, started_at: since, finished_at: at, run: book.restart_count });
            let restart = match restart_policy(pod) {
                "Never" => false,
                "OnFailure" => code != 0,
                _ => true,
            };
            if restart {
                if at.duration_since(since) >= signed(CRASH_BACKOFF_RESET) {
                    book.backoff_step = 0;
                }
                let delay = crash_backoff(book.backoff_step);
                book.backoff_step = book.backoff_step.saturating_add(1);
                book.restart_count = book.restart_count.saturating_add(1);
                book.stage = Stage::BackOff { until: after(at, delay) };
            } else {
                book.stage = Stage::Finished(Finish::Exited);
            }
        }
        Event::Evict => kill(book, at, KILLED_EXIT_CODE, Finish::Evicted),
        Event::Deadline => kill(book, at, KILLED_EXIT_CODE, Finish::DeadlineExceeded),
        Event::Lose => book.lost_at = Some(at),
        Event::RequestDelete => {
            book.delete_requested = true;
            actions.push(Action::Delete);
        }
        Event::Stop => {
            let code = stop_delay(pod, facts).1;
            if !book.is_finished() {
                kill(book, at, code, Finish::Deleted);
            }
            book.stopped = true;
        }
    }
}

/// Tries to run the containers at `at`: the image and the referenced config must be there.
fn start(facts: &PodFacts<'_>, book: &mut PodBook, at: Timestamp) {
    if facts.behaviour.image_pull_fails {
        if !matches!(book.stage, Stage::PullFailing { .. }) {
            book.stage = Stage::PullFailing { since: at };
        }
    } else if !facts.config_errors.is_empty() {
        book.stage = Stage::ConfigBlocked;
    } else {
        book.first_run_at.get_or_insert(at);
        book.stage = Stage::Running { since: at };
    }
}

/// Ends the pod for good at `at`; running containers exit with `code`.
fn kill(book: &mut PodBook, at: Timestamp, code: i32, why: Finish) {
    if let Stage::Running { since } = book.stage {
        let run = book.restart_count;
        record_exit(book, Exit { code, started_at: since, finished_at: at, run });
    }
    book.stage = Stage::Finished(why);
}

fn record_exit(book: &mut PodBook, exit: Exit) {
    book.prior_exit = book.last_exit.replace(exit);
}

/// How long stopping takes for a deleted pod, and the main process's exit code. Where the
/// `termination-delay` knob is set, the process exits by itself (0) after it, unless the
/// grace period runs out first (SIGKILL, 137). Else it is what the main process does with
/// SIGTERM: as PID 1 of its own namespace (`sleep infinity`, see `pid_namespace.rs`) it has no
/// handler and ignores it, so the kubelet waits out the grace period and kills it (137);
/// beside a pause process (`shareProcessNamespace`) it is not PID 1 and SIGTERM ends it at
/// once (128 + 15).
fn stop_delay(pod: &Pod, facts: &PodFacts<'_>) -> (Duration, i32) {
    let grace = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
        .map_or(DEFAULT_GRACE, |s| Duration::from_secs(u64::try_from(s).unwrap_or(0)));
    match (facts.behaviour.termination_delay, MainProcess::of(pod)) {
        (Some(wanted), _) if wanted > grace => (grace, KILLED_EXIT_CODE),
        (Some(wanted), _) => (wanted, 0),
        (None, MainProcess::Pause) => (Duration::ZERO, TERMINATED_EXIT_CODE),
        (None, MainProcess::Sleep) => (grace, KILLED_EXIT_CODE),
    }
}

/// `spec.restartPolicy`, defaulting to `Always` as the API server does.
pub(crate) fn restart_policy(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always")
}

/// The back-off before restart number `step` (0-based): 10s, 20s, 40s … capped at 5 minutes.
fn crash_backoff(step: u32) -> Duration {
    let factor = 2u32.saturating_pow(step.min(16));
    CRASH_BACKOFF_INITIAL.saturating_mul(factor).min(CRASH_BACKOFF_MAX)
}

/// `t + d`, saturating instead of overflowing.
pub(crate) fn after(t: Timestamp, d: Duration) -> Timestamp {
    t.saturating_add(signed(d)).unwrap_or(Timestamp::MAX)
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

#[cfg(test)]
#[path = "pod_state_tests.rs"]
mod tests;
