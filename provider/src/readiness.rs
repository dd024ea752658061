//! Waiting for a sandbox to be ready by watching, not polling.
//!
//! The pods of the workload are watched from the create's resourceVersion (resourceVersions
//! are cluster-wide, so the pods created after the workload all arrive as events), or from a
//! fresh list when the workload already existed, through an [`EventStream`] that survives
//! disconnects. On a plain read 410 proves nothing: only 404 means the workload is gone. Every
//! pod event is read for fail-fast causes; one that may clear by itself (Unschedulable while a
//! volume claim binds or a node frees up) is waited out and answered only at the deadline. For a Sandbox, once its pod is ready, the Sandbox
//! itself is watched until its Ready condition is True at the current generation. One deadline
//! bounds the whole wait; transient failures of its reads and watches are retried until then
//! (see `retry`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api_versions;
use crate::clock::{Clock, Deadline};
use crate::errors::ProviderError;
use crate::event_stream::{Change, EventStream};
use crate::kube_api::{Kube, KubeError, ResourceType};
use crate::log::Log;
use crate::object;
use crate::retry::{GaveUp, retry};
use crate::workload_state::{
    Cause, Failure, JOB_NAME_LABEL, JobState, POD_NAME_ANNOTATION, PodInfo, PodState, SANDBOX_NAME_HASH_LABEL,
    SandboxState, WorkloadKind, job_state, pod_state, sandbox_state, wait_failure,
};
use contract::k8s::agent_sandbox::name_hash;

/// The workload being waited for.
pub struct Target<'a> {
    /// A Sandbox (of a Sandbox lease, or the one a claim got) or a Job.
    pub kind: WorkloadKind,
    pub namespace: &'a str,
    pub name: &'a str,
    /// The workload's resource type (the Sandbox version in use, or Jobs).
    pub resource: &'a ResourceType,
    /// The workload's uid: pods of another object and a replaced workload are not this lease's.
    pub uid: &'a str,
    /// The lease's own Secret when the caller creates it right after the workload (acquire): a
    /// pod that waits for it is starting, not failed. `None` when nobody is about to create it.
    pub secret: Option<&'a str>,
    /// The Job retries a failed pod (backoffLimit > 0), so a failed pod is not final.
    pub job_retries: bool,
}

impl Target<'_> {
    /// `Sandbox ns/name`, for messages.
    pub fn describe(&self) -> String {
        format!("{} {}/{}", self.kind.as_str(), self.namespace, self.name)
    }

    /// The label selector of the workload's pods (the controller's label, so a watch sees only them).
    pub fn pod_selector(&self) -> String {
        match self.kind {
            WorkloadKind::Sandbox => format!("{SANDBOX_NAME_HASH_LABEL}={}", name_hash(self.name)),
            WorkloadKind::Job => format!("{JOB_NAME_LABEL}={}", self.name),
        }
    }

    fn deleted(&self) -> Failure {
        wait_failure::deleted(&self.describe())
    }

    fn terminating(&self) -> Failure {
        wait_failure::terminating(&self.describe())
    }

    fn taken(&self) -> Failure {
        wait_failure::taken(&self.describe())
    }

    fn replaced(&self, found: &str) -> Failure {
        wait_failure::replaced(
            &self.describe(),
            "the object",
            found,
            self.uid,
            "Its disk and processes are not this lease's",
        )
    }
}

/// Where a watch starts.
pub enum Start {
    /// After this resourceVersion (the create's): every later change arrives as an event.
    After(String),
    /// From a list of the current state (the workload existed before this call), with the
    /// workload as the caller just read it, if it did: a Sandbox read Ready needs no second read
    /// once its pod is found ready.
    List(Option<Value>),
}

/// Why a wait ended without a ready sandbox.
#[derive(Debug)]
pub enum WaitError {
    /// The sandbox will not become ready (or is gone); see the cause.
    Failed(Failure),
    /// An API call failed in a way retries inside the wait cannot fix.
    Api(ProviderError),
    /// The deadline passed; the text says what was still missing.
    Timeout(String),
}

/// What the pods of a workload say together.
enum Verdict {
    Ready(PodInfo),
    Failed(Failure),
    Waiting(String),
    /// Not ready for a cause that may clear by itself ([`Failure::clears_by_itself`]): waited
    /// out, and the answer if the deadline passes first.
    Held(Failure),
}

/// Whether `pod` is the workload's (its controller is the workload, when the uid is known).
fn owned_by(pod: &Value, uid: &str) -> bool {
    uid.is_empty() || object::controller_uid(pod) == Some(uid)
}

/// Applies one change of the pods' watch to `owned` (the workload's pods, by name); true when
/// one of the workload's pods was deleted.
pub(crate) fn track(target: &Target<'_>, owned: &mut BTreeMap<String, Value>, change: Change) -> bool {
    match change {
        Change::Upsert(pod) => {
            if owned_by(&pod, target.uid)
                && let Some(name) = object::name(&pod)
            {
                owned.insert(name.to_string(), pod);
            }
            false
        }
        Change::Deleted(pod) => {
            if let Some(name) = object::name(&pod) {
                owned.remove(name);
            }
            owned_by(&pod, target.uid)
        }
        Change::Relisted(items) => {
            *owned = own(target, items);
            false
        }
    }
}

/// The workload's pods among `pods`, by name.
pub(crate) fn own(target: &Target<'_>, pods: Vec<Value>) -> BTreeMap<String, Value> {
    pods.into_iter()
        .filter(|p| owned_by(p, target.uid))
        .filter_map(|p| object::name(&p).map(str::to_string).map(|n| (n, p)))
        .collect()
}

fn judge(pods: &BTreeMap<String, Value>, target: &Target<'_>) -> Verdict {
    let states: Vec<(&str, PodState)> = pods.iter().map(|(n, p)| (n.as_str(), pod_state(p, target.secret))).collect();
    let ended =
        |s: &PodState| matches!(s, PodState::Failed(f) if matches!(f.cause, Cause::PodFailed | Cause::PodSucceeded));
    let retried = |s: &PodState| target.kind == WorkloadKind::Job && target.job_retries && ended(s);
    let live: Vec<&(&str, PodState)> =
        states.iter().filter(|(_, s)| !matches!(s, PodState::Terminating) && !retried(s)).collect();
    if live.len() > 1 {
        let names: Vec<&str> = live.iter().map(|(n, _)| *n).collect();
        return Verdict::Failed(Failure::new(
            Cause::MultiplePods,
            format!(
                "{} pods claim {} ({}); it must have one. Delete the extra pods, or destroy the lease.",
                live.len(),
                target.describe(),
                names.join(", ")
            ),
        ));
    }
    match live.first() {
        Some((_, PodState::Ready(info))) => Verdict::Ready(info.clone()),
        Some((_, PodState::Failed(f))) if f.clears_by_itself() => Verdict::Held(f.clone()),
        Some((_, PodState::Failed(f))) => Verdict::Failed(f.clone()),
        Some((_, PodState::Starting(why))) => Verdict::Waiting(why.clone()),
        Some((name, PodState::Terminating)) => Verdict::Waiting(format!("pod {name} is terminating")),
        None if states.iter().any(|(_, s)| retried(s)) => {
            Verdict::Waiting("the pod ended and the Job has not started another yet (backoffLimit > 0)".to_string())
        }
        None => match states.iter().find(|(_, s)| matches!(s, PodState::Terminating)) {
            Some((name, _)) => Verdict::Waiting(format!("pod {name} is terminating; waiting for its replacement")),
            None => Verdict::Waiting(format!("{} has no pod yet", target.describe())),
        },
    }
}

/// Reads the workload, retrying transient failures until the deadline; 404 is `deleted`.
fn read_workload<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    target: &Target<'_>,
    deadline: Deadline,
) -> Result<Value, WaitError> {
    match retry(clock, deadline, || kube.get(target.resource, Some(target.namespace), target.name)) {
        Ok(w) => Ok(w),
        Err(GaveUp::Final(KubeError::NotFound(_))) => Err(WaitError::Failed(target.deleted())),
        Err(GaveUp::Final(KubeError::NotOwned(_))) => Err(WaitError::Failed(target.taken())),
        Err(g) => Err(WaitError::Api(g.into_error(&format!("get {}", target.describe())))),
    }
}

/// After a pod of the workload disappeared: is the workload itself still there and alive?
fn check_workload<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    target: &Target<'_>,
    deadline: Deadline,
) -> Result<(), WaitError> {
    let workload = read_workload(kube, clock, target, deadline)?;
    match object::uid(&workload) {
        Some(found) if !target.uid.is_empty() && found != target.uid => {
            return Err(WaitError::Failed(target.replaced(found)));
        }
        _ => {}
    }
    match target.kind {
        WorkloadKind::Sandbox => match sandbox_state(&workload) {
            SandboxState::Deleting => Err(WaitError::Failed(target.terminating())),
            SandboxState::Failed(f) if f.ends_sandbox() => Err(WaitError::Failed(f)),
            SandboxState::Suspended => Err(WaitError::Failed(Failure::new(
                Cause::Suspended,
                format!(
                    "{} was suspended while waiting for it; resume it or acquire a new sandbox.",
                    target.describe()
                ),
            ))),
            _ => Ok(()),
        },
        WorkloadKind::Job => match job_state(&workload) {
            JobState::Deleting => Err(WaitError::Failed(target.terminating())),
            JobState::Failed(f) => Err(WaitError::Failed(f)),
            JobState::Active => Ok(()),
        },
    }
}

fn wait_for_pod<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    target: &Target<'_>,
    pods: &mut EventStream<'_, K>,
    owned: &mut BTreeMap<String, Value>,
    deadline: Deadline,
) -> Result<PodInfo, WaitError> {
    loop {
        let waiting = match judge(owned, target) {
            Verdict::Ready(info) => return Ok(info),
            Verdict::Failed(f) => return Err(WaitError::Failed(f)),
            Verdict::Waiting(why) => WaitError::Timeout(why),
            Verdict::Held(f) => WaitError::Failed(f),
        };
        match pods.next(clock, log, deadline).map_err(WaitError::Api)? {
            None => return Err(waiting),
            Some(change) => {
                if track(target, owned, change) {
                    check_workload(kube, clock, target, deadline)?;
                }
            }
        }
    }
}

/// Watches the Sandbox until Ready (at its current generation). `Ok(None)` when the Sandbox
/// tracks a pod other than `pod`, so the pods must be looked at again.
fn wait_for_sandbox<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    target: &Target<'_>,
    pod: PodInfo,
    known: Option<Value>,
    deadline: Deadline,
) -> Result<Option<PodInfo>, WaitError> {
    let mut sandbox = match known {
        Some(ready) if matches!(sandbox_state(&ready), SandboxState::Ready) => ready,
        _ => read_workload(kube, clock, target, deadline)?,
    };
    let mut stream = EventStream::new(
        kube,
        target.resource.clone(),
        target.namespace,
        None,
        Some(format!("metadata.name={}", target.name)),
    );
    if let Some(rv) = object::resource_version(&sandbox) {
        stream.resume_from(rv);
    }
    loop {
        match object::uid(&sandbox) {
            Some(found) if !target.uid.is_empty() && found != target.uid => {
                return Err(WaitError::Failed(target.replaced(found)));
            }
            _ => {}
        }
        let waiting = match sandbox_state(&sandbox) {
            SandboxState::Ready => {
                let tracked = object::annotation(&sandbox, POD_NAME_ANNOTATION).filter(|n| !n.is_empty());
                return Ok((tracked.unwrap_or(target.name) == pod.name).then_some(pod));
            }
            SandboxState::Starting(why) => WaitError::Timeout(format!("pod {} is ready but {why}", pod.name)),
            SandboxState::Failed(f) if f.clears_by_itself() => WaitError::Failed(f),
            SandboxState::Suspended => {
                return Err(WaitError::Failed(Failure::new(
                    Cause::Suspended,
                    format!("{} was suspended while waiting for it.", target.describe()),
                )));
            }
            SandboxState::Deleting => return Err(WaitError::Failed(target.terminating())),
            SandboxState::Failed(f) => return Err(WaitError::Failed(f)),
        };
        match stream.next(clock, log, deadline).map_err(WaitError::Api)? {
            None => return Err(waiting),
            Some(Change::Upsert(s)) => sandbox = s,
            Some(Change::Deleted(_)) => return Err(WaitError::Failed(target.deleted())),
            Some(Change::Relisted(items)) => match items.into_iter().find(|s| object::name(s) == Some(target.name)) {
                Some(s) => sandbox = s,
                None => return Err(WaitError::Failed(target.deleted())),
            },
        }
    }
}

/// Waits until the workload's pod is ready (and, for a Sandbox, the Sandbox says Ready), or a
/// fail-fast cause shows, or the deadline passes.
pub fn wait_ready<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    target: &Target<'_>,
    start: Start,
    deadline: Deadline,
) -> Result<PodInfo, WaitError> {
    let mut pods = EventStream::new(kube, api_versions::pods(), target.namespace, Some(target.pod_selector()), None);
    let mut owned = BTreeMap::new();
    let mut known = None;
    match start {
        Start::After(rv) => pods.resume_from(&rv),
        Start::List(workload) => {
            known = workload;
            owned = own(target, pods.relist(clock, deadline).map_err(WaitError::Api)?);
        }
    }
    loop {
        let pod = wait_for_pod(kube, clock, log, target, &mut pods, &mut owned, deadline)?;
        match target.kind {
            WorkloadKind::Job => return Ok(pod),
            WorkloadKind::Sandbox => {
                if let Some(pod) = wait_for_sandbox(kube, clock, log, target, pod, known.take(), deadline)? {
                    return Ok(pod);
                }
                owned = own(target, pods.relist(clock, deadline).map_err(WaitError::Api)?);
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
    use crate::fake_kube::{FakeClock, FakeKube, MemoryLog, Verb};
    use crate::testkit::{NOW, NS};

    /// A cluster without controllers, holding a Sandbox (uid returned) and a ready pod of it;
    /// the Sandbox's own status is scripted by each test.
    fn scripted() -> (FakeKube, FakeClock, String) {
        let clock = FakeClock::new(NOW);
        let kube = FakeKube::new(clock.clone());
        kube.set_controllers(false);
        kube.add_namespace(NS);
        let sandbox = kube.put(
            &SandboxVersion::V1beta1.resource(),
            NS,
            json!({"metadata": {"name": "sb"}, "spec": {}, "status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": "DependenciesNotReady", "observedGeneration": 1}]}}),
        );
        let uid = sandbox["metadata"]["uid"].as_str().unwrap().to_string();
        kube.put(&api_versions::pods(), NS, ready_pod("sb", &uid));
        (kube, clock, uid)
    }

    fn ready_pod(name: &str, owner: &str) -> Value {
        json!({
            "metadata": {"name": name, "labels": {SANDBOX_NAME_HASH_LABEL: name_hash("sb")},
                         "ownerReferences": [{"uid": owner, "controller": true}]},
            "status": {"phase": "Running", "podIP": "10.0.0.9", "conditions": [{"type": "Ready", "status": "True"}]}
        })
    }

    fn wait(kube: &FakeKube, clock: &FakeClock, uid: &str, seconds: u64) -> Result<PodInfo, WaitError> {
        let resource = SandboxVersion::V1beta1.resource();
        let target = Target {
            kind: WorkloadKind::Sandbox,
            namespace: NS,
            name: "sb",
            resource: &resource,
            uid,
            secret: None,
            job_retries: false,
        };
        let deadline = Deadline::after(clock, Duration::from_secs(seconds));
        wait_ready(kube, clock, &MemoryLog::default(), &target, Start::List(None), deadline)
    }

    #[test]
    fn a_ready_pod_waits_for_the_sandbox_to_say_ready_at_its_generation() {
        let (kube, clock, uid) = scripted();
        kube.schedule_modify(Duration::from_secs(2), "sandboxes", NS, "sb", |s| {
            s["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
        });
        let pod = wait(&kube, &clock, &uid, 10).unwrap();
        assert_eq!((pod.name.as_str(), pod.ip.as_deref()), ("sb", Some("10.0.0.9")));
        assert_eq!(clock.monotonic(), Duration::from_secs(2), "seen when the event came, not at a poll tick");
        assert_eq!(kube.count(Verb::Watch, "sandboxes"), 1);
    }

    #[test]
    fn a_ready_condition_for_an_older_generation_is_not_ready() {
        let (kube, clock, uid) = scripted();
        kube.modify("sandboxes", NS, "sb", |s| s["metadata"]["generation"] = json!(2));
        kube.schedule_modify(Duration::from_secs(1), "sandboxes", NS, "sb", |s| {
            s["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
        });
        match wait(&kube, &clock, &uid, 5) {
            Err(WaitError::Timeout(why)) => assert!(why.contains("has not observed generation 2"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(clock.monotonic(), Duration::from_secs(5));
    }

    #[test]
    fn a_terminal_sandbox_reason_fails_fast() {
        let (kube, clock, uid) = scripted();
        kube.schedule_modify(Duration::from_millis(300), "sandboxes", NS, "sb", |s| {
            s["status"]["conditions"] =
                json!([{"type": "Ready", "status": "False", "reason": "MultiplePods", "observedGeneration": 1}]);
        });
        match wait(&kube, &clock, &uid, 10) {
            Err(WaitError::Failed(f)) => assert_eq!(f.cause, Cause::MultiplePods),
            other => panic!("{other:?}"),
        }
        assert_eq!(clock.monotonic(), Duration::from_millis(300));
    }

    #[test]
    fn a_sandbox_expiring_during_the_wait_fails_fast() {
        let (kube, clock, uid) = scripted();
        kube.schedule_modify(Duration::from_millis(700), "sandboxes", NS, "sb", |s| {
            s["status"]["conditions"] = json!([{"type": "Ready", "status": "False", "reason": "SandboxExpired"}]);
        });
        match wait(&kube, &clock, &uid, 10) {
            Err(WaitError::Failed(f)) => assert_eq!(f.cause, Cause::SandboxExpired),
            other => panic!("{other:?}"),
        }
        assert_eq!(clock.monotonic(), Duration::from_millis(700));
    }

    #[test]
    fn two_pods_of_one_sandbox_fail_fast_and_foreign_pods_are_ignored() {
        let (kube, clock, uid) = scripted();
        kube.put(&api_versions::pods(), NS, ready_pod("stale-from-an-old-sandbox", "uid-old"));
        kube.schedule_modify(Duration::from_secs(1), "sandboxes", NS, "sb", |s| {
            s["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
        });
        assert_eq!(wait(&kube, &clock, &uid, 10).unwrap().name, "sb", "the foreign pod was ignored");

        let (kube, clock, uid) = scripted();
        kube.put(&api_versions::pods(), NS, ready_pod("sb-extra", &uid));
        match wait(&kube, &clock, &uid, 10) {
            Err(WaitError::Failed(f)) => {
                assert_eq!(f.cause, Cause::MultiplePods);
                assert!(f.message.contains("sb, sb-extra"), "{}", f.message);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_terminating_pod_is_never_handed_back() {
        let (kube, clock, uid) = scripted();
        kube.modify("pods", NS, "sb", |p| p["metadata"]["deletionTimestamp"] = json!("2026-11-30T10:00:00Z"));
        kube.modify("sandboxes", NS, "sb", |s| {
            s["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
        });
        match wait(&kube, &clock, &uid, 3) {
            Err(WaitError::Timeout(why)) => assert!(why.contains("terminating"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_watch_that_cannot_open_backs_off_then_resumes() {
        let (kube, clock, uid) = scripted();
        kube.fail_times(
            Verb::Watch,
            "sandboxes",
            0,
            2,
            KubeError::Unavailable { message: "busy".into(), retry_after_seconds: None },
        );
        kube.schedule_modify(Duration::from_secs(1), "sandboxes", NS, "sb", |s| {
            s["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
        });
        wait(&kube, &clock, &uid, 10).unwrap();
        assert_eq!(kube.count(Verb::Watch, "sandboxes"), 3);
        assert_eq!(clock.monotonic(), Duration::from_secs(1), "back-off (50 + 100 ms) stayed inside the wait");
    }

    #[test]
    fn transient_failures_of_reads_inside_the_wait_are_retried() {
        let errors = [
            KubeError::Other { code: 500, message: "etcdserver: leader changed".into() },
            KubeError::Unavailable { message: "busy".into(), retry_after_seconds: None },
            KubeError::Timeout("slow".into()),
            KubeError::Transport("connection reset".into()),
            KubeError::Gone("the resource version is too old".into()),
        ];
        for error in errors {
            let (kube, clock, uid) = scripted();
            kube.schedule_modify(Duration::from_secs(1), "sandboxes", NS, "sb", |s| {
                s["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
            });
            kube.fail_times(Verb::List, "pods", 0, 2, error.clone());
            kube.fail_times(Verb::Get, "sandboxes", 0, 2, error.clone());
            let pod = wait(&kube, &clock, &uid, 10).unwrap_or_else(|e| panic!("{error:?}: {e:?}"));
            assert_eq!(pod.name, "sb");
            assert_eq!(kube.count(Verb::List, "pods"), 3, "{error:?}");
            assert_eq!(kube.count(Verb::Get, "sandboxes"), 3, "{error:?}");
        }
    }

    #[test]
    fn retry_after_is_honoured_inside_the_deadline_and_ends_the_wait_beyond_it() {
        let ready = |s: &mut Value| {
            s["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
        };
        let (kube, clock, uid) = scripted();
        kube.modify("sandboxes", NS, "sb", ready);
        kube.fail(
            Verb::Get,
            "sandboxes",
            1,
            KubeError::Unavailable { message: "busy".into(), retry_after_seconds: Some(3) },
        );
        wait(&kube, &clock, &uid, 10).unwrap();
        assert_eq!(clock.monotonic(), Duration::from_secs(3), "asked again only after Retry-After");

        let (kube, clock, uid) = scripted();
        kube.modify("sandboxes", NS, "sb", ready);
        kube.fail(
            Verb::Get,
            "sandboxes",
            1,
            KubeError::Unavailable { message: "busy".into(), retry_after_seconds: Some(30) },
        );
        match wait(&kube, &clock, &uid, 10) {
            Err(WaitError::Api(e)) => {
                assert_eq!((e.kind(), e.retryable()), ("unavailable", true));
                assert!(e.message().contains("Retry in 30 s"), "{}", e.message());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(clock.monotonic(), Duration::ZERO, "no wait for an answer that cannot come in time");
    }

    #[test]
    fn a_forbidden_watch_is_an_error_not_a_timeout() {
        let (kube, clock, uid) = scripted();
        kube.fail_always(Verb::Watch, "sandboxes", KubeError::Forbidden("policy".into()));
        match wait(&kube, &clock, &uid, 10) {
            Err(WaitError::Api(e)) => assert_eq!(e.kind(), "forbidden"),
            other => panic!("{other:?}"),
        }
        assert_eq!(clock.monotonic(), Duration::ZERO);
    }
}
