//! An in-memory fake of the Kubernetes API for the operations the provider uses, with
//! simulated agent-sandbox, Job and kubelet controllers, a fake clock, a memory log and fault
//! injection. It behaves like an API server where the provider can tell: resourceVersions
//! (cluster-wide), uids, generations, 404/409/410, label and field selectors, pagination,
//! merge patches, delete preconditions, finalizers, background garbage collection, and watches
//! from a resourceVersion. Like a kubelet, it holds a pod whose env needs a missing Secret in
//! `CreateContainerConfigError` and starts it once the Secret exists. Time only moves when the
//! provider waits (a watch or a back-off), so tests of a 20 s deadline run in microseconds.
//!
//! The pieces: [`FakeClock`] and [`MemoryLog`] (`clock`, `log`), the object store with its
//! resourceVersions, events and faults (`store`), the API calls the provider makes and its
//! watches (`api`), the Sandbox, Job and kubelet controllers (`controllers`) and the claim and
//! warm pool controllers (`claims`). Tests drive it through [`FakeKube`]'s controls below.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use contract::k8s::agent_sandbox::{
    CLAIMS, EXTENSIONS_GROUP, GROUP as SANDBOX_GROUP, SANDBOXES, TEMPLATES, WARM_POOLS,
};
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::kube_api::{ExecOptions, KubeError, ResourceType};

mod api;
mod claims;
mod clock;
mod controllers;
mod log;
mod store;

pub use api::FakeWatch;
pub use clock::FakeClock;
use controllers::condition;
pub use log::MemoryLog;
use store::{key, scheduled_key};

/// An API verb, for fault injection and the call log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Create,
    Patch,
    Delete,
    List,
    Watch,
    /// `next` on an open watch.
    WatchNext,
    ServedVersions,
    /// `pods/exec`.
    Exec,
}

/// One call the provider made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub verb: Verb,
    pub plural: String,
    pub name: Option<String>,
}

/// How the simulated kubelet treats the pods the controllers create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodBehaviour {
    /// Running and Ready (with an IP) this long after creation.
    Ready { after: Duration },
    /// Stays Pending (ContainerCreating) forever.
    NeverReady,
    /// The controllers never create a pod.
    NoPod,
    /// `ErrImagePull`.
    ImagePull,
    /// `CreateContainerConfigError`.
    ConfigError,
    /// `CrashLoopBackOff`.
    CrashLoop,
    /// `PodScheduled=False`, reason `Unschedulable`; scheduled and Ready `until` this long after
    /// creation when set (a volume claim binds, a node frees up), never when `None`.
    Unschedulable { until: Option<Duration> },
    /// The container exits 0 (phase Succeeded).
    Succeeds,
    /// The container exits 1 (phase Failed).
    Fails,
}

type Key = (String, String, String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventKind {
    Added,
    Modified,
    Deleted,
}

struct Event {
    rv: u64,
    group: String,
    plural: String,
    namespace: String,
    kind: EventKind,
    object: Value,
}

struct Fault {
    verb: Verb,
    plural: String,
    skip: usize,
    times: usize,
    error: KubeError,
    /// The call takes effect, then the error is returned (a lost answer).
    after: bool,
}

#[derive(Debug, Clone, Copy)]
enum PodStep {
    Ready,
    ImagePull,
    ConfigError,
    CrashLoop,
    Succeeded,
    Failed,
}

/// A scripted change to an object.
type Change = Box<dyn FnOnce(&mut Value)>;

enum Action {
    StartPod(Key),
    Pod(Key, PodStep),
    Expire(Key),
    Modify(Key, Change),
    Remove(Key),
    /// A pass of the claim controller over one claim.
    Claim(Key),
}

struct Timer {
    at: Duration,
    seq: u64,
    action: Action,
}

struct State {
    clock: FakeClock,
    objects: BTreeMap<Key, Value>,
    rv: u64,
    seq: u64,
    history: Vec<Event>,
    compacted: u64,
    served: BTreeMap<String, Vec<String>>,
    faults: Vec<Fault>,
    calls: Vec<Call>,
    /// Every exec's options, in order.
    execs: Vec<ExecOptions>,
    behaviour: PodBehaviour,
    controllers: bool,
    timers: Vec<Timer>,
    /// The host policy's namespaces; `None` allows every namespace.
    allowed_namespaces: Option<Vec<String>>,
    /// From this monotonic time on, the API server is gone: every call fails to connect.
    lost_at: Option<Duration>,
}

/// The fake API server. Clones share one state.
#[derive(Clone)]
pub struct FakeKube {
    state: Rc<RefCell<State>>,
}

impl FakeKube {
    /// Lets the provider work only in these namespaces, as a host policy would.
    pub fn allow_namespaces(&self, namespaces: &[&str]) {
        self.state.borrow_mut().allowed_namespaces = Some(namespaces.iter().map(|n| n.to_string()).collect());
    }

    /// A cluster serving core v1, batch/v1, Sandbox v1beta1 + v1alpha1 and the extensions
    /// (SandboxClaim, SandboxTemplate, SandboxWarmPool) v1beta1 + v1alpha1, with controllers that
    /// make pods Ready 1 s after creation (see `claims` for the claim and pool controllers).
    pub fn new(clock: FakeClock) -> Self {
        let served = BTreeMap::from([
            (String::new(), vec!["v1".to_string()]),
            ("batch".to_string(), vec!["v1".to_string()]),
            (SANDBOX_GROUP.to_string(), vec!["v1beta1".to_string(), "v1alpha1".to_string()]),
            (EXTENSIONS_GROUP.to_string(), vec!["v1beta1".to_string(), "v1alpha1".to_string()]),
        ]);
        Self {
            state: Rc::new(RefCell::new(State {
                clock,
                objects: BTreeMap::new(),
                rv: 100,
                seq: 0,
                history: Vec::new(),
                compacted: 0,
                served,
                faults: Vec::new(),
                calls: Vec::new(),
                execs: Vec::new(),
                behaviour: PodBehaviour::Ready { after: Duration::from_secs(1) },
                controllers: true,
                allowed_namespaces: None,
                timers: Vec::new(),
                lost_at: None,
            })),
        }
    }

    /// Adds a namespace.
    pub fn add_namespace(&self, name: &str) {
        let mut s = self.state.borrow_mut();
        s.insert_new(
            &key("", "namespaces", None, name),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {}}),
        );
    }

    /// Which Sandbox versions the cluster serves (preferred first).
    pub fn serve_sandbox_versions(&self, versions: &[&str]) {
        let versions = versions.iter().map(|v| v.to_string()).collect();
        self.state.borrow_mut().served.insert(SANDBOX_GROUP.to_string(), versions);
    }

    /// How the kubelet treats pods created from now on.
    pub fn set_behaviour(&self, behaviour: PodBehaviour) {
        self.state.borrow_mut().behaviour = behaviour;
    }

    /// Turns the simulated controllers off (objects then never get pods or status).
    pub fn set_controllers(&self, on: bool) {
        self.state.borrow_mut().controllers = on;
    }

    /// Fails the `nth` (1-based) next call of `verb` on `plural` with `error`.
    pub fn fail(&self, verb: Verb, plural: &str, nth: usize, error: KubeError) {
        self.fail_times(verb, plural, nth.saturating_sub(1), 1, error);
    }

    /// Fails every next call of `verb` on `plural` with `error`.
    pub fn fail_always(&self, verb: Verb, plural: &str, error: KubeError) {
        self.fail_times(verb, plural, 0, usize::MAX, error);
    }

    /// Lets `skip` calls through, then fails `times` calls.
    pub fn fail_times(&self, verb: Verb, plural: &str, skip: usize, times: usize, error: KubeError) {
        self.state.borrow_mut().faults.push(Fault {
            verb,
            plural: plural.to_string(),
            skip,
            times,
            error,
            after: false,
        });
    }

    /// Lets the `nth` (1-based) next create of `plural` take effect, then answers `error`: the
    /// answer of a successful create was lost.
    pub fn lose_create_answer(&self, plural: &str, nth: usize, error: KubeError) {
        let fault = Fault {
            verb: Verb::Create,
            plural: plural.to_string(),
            skip: nth.saturating_sub(1),
            times: 1,
            error,
            after: true,
        };
        self.state.borrow_mut().faults.push(fault);
    }

    /// Changes an object `after` from now (a MODIFIED event then), as a controller would.
    pub fn schedule_modify(
        &self,
        after: Duration,
        plural: &str,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Value) + 'static,
    ) {
        self.state
            .borrow_mut()
            .schedule(after, Action::Modify(scheduled_key(plural, namespace, name), Box::new(change)));
    }

    /// Deletes an object `after` from now (a DELETED event, dependents garbage-collected), as a
    /// person or a concurrent client would.
    pub fn schedule_remove(&self, after: Duration, plural: &str, namespace: &str, name: &str) {
        self.state.borrow_mut().schedule(after, Action::Remove(scheduled_key(plural, namespace, name)));
    }

    /// Stops the API server `after` from now: every later call, and every open watch, fails as
    /// a refused or reset connection.
    pub fn disconnect_after(&self, after: Duration) {
        let mut s = self.state.borrow_mut();
        let at = s.clock.monotonic() + after;
        s.lost_at = Some(at);
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.state.borrow_mut().faults.clear();
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.borrow().calls.clone()
    }

    /// How many calls of `verb` on `plural` were made.
    /// The options of every exec so far (command, stdin, timeout), in order.
    pub fn execs(&self) -> Vec<ExecOptions> {
        self.state.borrow().execs.clone()
    }

    pub fn count(&self, verb: Verb, plural: &str) -> usize {
        self.state.borrow().calls.iter().filter(|c| c.verb == verb && c.plural == plural).count()
    }

    /// One stored object, found by plural, namespace and name.
    pub fn object(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let s = self.state.borrow();
        s.objects.iter().find(|(k, _)| k.1 == plural && k.2 == namespace && k.3 == name).map(|(_, o)| o.clone())
    }

    /// `plural/name` of every object in `namespace`, sorted.
    pub fn names_in(&self, namespace: &str) -> Vec<String> {
        let s = self.state.borrow();
        let mut names: Vec<String> =
            s.objects.keys().filter(|k| k.2 == namespace).map(|k| format!("{}/{}", k.1, k.3)).collect();
        names.sort();
        names
    }

    /// Stores a ready-made object (a foreign one, say) without controller reactions.
    pub fn put(&self, resource: &ResourceType, namespace: &str, object: Value) -> Value {
        let mut s = self.state.borrow_mut();
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        let controllers = std::mem::replace(&mut s.controllers, false);
        let stored = s.insert_new(&key(&resource.group, &resource.plural, Some(namespace), &name), object);
        s.controllers = controllers;
        stored
    }

    /// Changes an object in place (a MODIFIED event), then lets the controllers react.
    pub fn modify(&self, plural: &str, namespace: &str, name: &str, change: impl FnOnce(&mut Value)) {
        let mut s = self.state.borrow_mut();
        let Some(k) = s.objects.keys().find(|k| k.1 == plural && k.2 == namespace && k.3 == name).cloned() else {
            return;
        };
        let mut object = s.objects[&k].clone();
        change(&mut object);
        let object = s.update(&k, object);
        if plural == "pods" {
            s.sync_owner(&object);
        }
        if plural == SANDBOXES {
            s.sync_claim_of(&k);
        }
    }

    /// Deletes an object now (a DELETED event, dependents garbage-collected).
    pub fn remove(&self, plural: &str, namespace: &str, name: &str) {
        let mut s = self.state.borrow_mut();
        if let Some(k) = s.objects.keys().find(|k| k.1 == plural && k.2 == namespace && k.3 == name).cloned() {
            s.remove(&k, true);
        }
    }

    /// Forgets watch history: a watch from any version seen so far gets 410 Gone.
    pub fn compact(&self) {
        let mut s = self.state.borrow_mut();
        s.compacted = s.rv + 1;
        s.history.clear();
    }

    /// Runs the controllers' timers that are due (after moving the clock by hand).
    pub fn settle(&self) {
        self.state.borrow_mut().run_due();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_api::{DeleteOptions, Kube, Watch, WatchEvent, WatchOptions};

    #[test]
    fn watch_from_a_version_sees_later_changes_and_time_moves_only_while_waiting() {
        let clock = FakeClock::new(1_000_000);
        let kube = FakeKube::new(clock.clone());
        kube.add_namespace("ns");
        let cm = ResourceType::new("", "v1", "configmaps");
        let first = kube.create(&cm, Some("ns"), &json!({"metadata": {"name": "a"}})).unwrap();
        let rv = first["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        kube.create(&cm, Some("ns"), &json!({"metadata": {"name": "b"}})).unwrap();
        let mut w =
            kube.watch(&cm, Some("ns"), &WatchOptions { resource_version: Some(rv), ..Default::default() }).unwrap();
        match w.next(Duration::from_secs(1)).unwrap() {
            Some(WatchEvent::Added(o)) => assert_eq!(o["metadata"]["name"], "b"),
            other => panic!("{other:?}"),
        }
        assert_eq!(clock.monotonic(), Duration::ZERO);
        assert_eq!(w.next(Duration::from_secs(3)).unwrap(), None);
        assert_eq!(clock.monotonic(), Duration::from_secs(3));
        kube.compact();
        let err =
            kube.watch(&cm, Some("ns"), &WatchOptions { resource_version: Some("101".into()), ..Default::default() });
        assert!(matches!(err, Err(KubeError::Gone(_))));
    }

    #[test]
    fn faults_hit_the_nth_call() {
        let kube = FakeKube::new(FakeClock::new(0));
        kube.add_namespace("ns");
        let cm = ResourceType::new("", "v1", "configmaps");
        kube.fail(Verb::Get, "configmaps", 2, KubeError::Timeout("slow".into()));
        assert!(matches!(kube.get(&cm, Some("ns"), "x"), Err(KubeError::NotFound(_))));
        assert!(matches!(kube.get(&cm, Some("ns"), "x"), Err(KubeError::Timeout(_))));
        assert!(matches!(kube.get(&cm, Some("ns"), "x"), Err(KubeError::NotFound(_))));
    }

    #[test]
    fn delete_collects_dependents_and_honours_preconditions() {
        let kube = FakeKube::new(FakeClock::new(0));
        kube.add_namespace("ns");
        let cm = ResourceType::new("", "v1", "configmaps");
        let owner = kube.create(&cm, Some("ns"), &json!({"metadata": {"name": "owner"}})).unwrap();
        let uid = owner["metadata"]["uid"].clone();
        kube.create(&cm, Some("ns"), &json!({"metadata": {"name": "child", "ownerReferences": [{"uid": uid}]}}))
            .unwrap();
        let wrong = DeleteOptions { precondition_uid: Some("other".into()), ..Default::default() };
        assert!(matches!(kube.delete(&cm, Some("ns"), "owner", &wrong), Err(KubeError::Conflict(_))));
        kube.delete(&cm, Some("ns"), "owner", &DeleteOptions::default()).unwrap();
        assert!(kube.names_in("ns").is_empty());
    }
}
