//! An in-memory fake of the Kubernetes API for the operations the provider uses, with
//! simulated agent-sandbox, Job and kubelet controllers, a fake clock, a memory log and fault
//! injection. It behaves like an API server where the provider can tell: resourceVersions
//! (cluster-wide), uids, generations, 404/409/410, label and field selectors, pagination,
//! merge patches, delete preconditions, finalizers, background garbage collection, and watches
//! from a resourceVersion. Like a kubelet, it holds a pod whose env needs a missing Secret in
//! `CreateContainerConfigError` and starts it once the Secret exists. Time only moves when the
//! provider waits (a watch or a back-off), so tests of a 20 s deadline run in microseconds.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use contract::k8s::selectors::{FieldSelector, LabelSelector};
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::kube_api::{
    DeleteOptions, ExecOptions, ExecOutput, Kube, KubeError, ListOptions, PatchType, Propagation, ResourceType, Watch,
    WatchEvent, WatchOptions,
};
use crate::log::{Level, Log};
use crate::rfc3339;
use contract::k8s::agent_sandbox::{CLAIMS, EXTENSIONS_GROUP, TEMPLATES, WARM_POOLS, name_hash};

mod claims;

/// A clock that moves only when told (or when the provider sleeps or waits on a fake watch),
/// with an optional host call deadline.
#[derive(Clone)]
pub struct FakeClock(Rc<RefCell<(i64, Duration)>>, Rc<RefCell<Option<(Duration, Duration)>>>);

impl FakeClock {
    /// A clock at `wall_millis` (epoch millis) and monotonic zero, with no host deadline.
    pub fn new(wall_millis: i64) -> Self {
        Self(Rc::new(RefCell::new((wall_millis, Duration::ZERO))), Rc::new(RefCell::new(None)))
    }

    /// Moves both clocks forward.
    pub fn advance(&self, by: Duration) {
        let mut t = self.0.borrow_mut();
        t.0 += i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        t.1 += by;
    }

    /// Starts a host call now that the host ends after `timeout`, as the `deadline` import says.
    pub fn set_host_deadline(&self, timeout: Duration) {
        let now = self.0.borrow().1;
        *self.1.borrow_mut() = Some((now + timeout, timeout));
    }

    fn advance_to(&self, monotonic: Duration) {
        let now = self.0.borrow().1;
        if monotonic > now {
            self.advance(monotonic - now);
        }
    }
}

impl Clock for FakeClock {
    fn now_millis(&self) -> i64 {
        self.0.borrow().0
    }

    fn monotonic(&self) -> Duration {
        self.0.borrow().1
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }

    fn call_remaining(&self) -> Option<Duration> {
        let now = self.0.borrow().1;
        self.1.borrow().map(|(at, _)| at.saturating_sub(now))
    }

    fn call_timeout(&self) -> Option<Duration> {
        self.1.borrow().map(|(_, timeout)| timeout)
    }
}

/// A log that keeps every line as text (`Info message key=value ...`).
#[derive(Clone, Default)]
pub struct MemoryLog(Rc<RefCell<Vec<String>>>);

impl MemoryLog {
    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.borrow().clone()
    }
}

impl Log for MemoryLog {
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.0.borrow_mut().push(format!("{level:?} {message} {}", fields.join(" ")));
    }
}

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

const SANDBOXES: &str = "sandboxes";
/// How often the simulated kubelet looks again at a pod that waits for its Secret.
const KUBELET_SYNC: Duration = Duration::from_secs(1);
const SANDBOX_GROUP: &str = "agents.x-k8s.io";

fn key(group: &str, plural: &str, namespace: Option<&str>, name: &str) -> Key {
    (group.to_string(), plural.to_string(), namespace.unwrap_or("").to_string(), name.to_string())
}

/// The key of an object the tests name by plural (the group follows from it).
fn scheduled_key(plural: &str, namespace: &str, name: &str) -> Key {
    let group = match plural {
        SANDBOXES => SANDBOX_GROUP,
        "jobs" => "batch",
        CLAIMS | TEMPLATES | WARM_POOLS => EXTENSIONS_GROUP,
        _ => "",
    };
    key(group, plural, Some(namespace), name)
}

fn not_found(plural: &str, name: &str) -> KubeError {
    KubeError::NotFound(format!("{plural} \"{name}\" not found"))
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// RFC 7386 merge patch, as the API server applies `application/merge-patch+json`.
fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// `?labelSelector=` with the API server's grammar (`in`, `notin`, `!`, ...); a selector it
/// refuses matches nothing.
fn labels_match(object: &Value, selector: Option<&str>) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    LabelSelector::parse(selector).is_ok_and(|s| s.matches_json(object.pointer("/metadata/labels")))
}

/// `?fieldSelector=` on the fields every kind supports (`metadata.name`, `metadata.namespace`).
fn fields_match(object: &Value, selector: Option<&str>) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    FieldSelector::parse(selector).is_ok_and(|s| {
        s.matches(|field| match field {
            "metadata.name" | "metadata.namespace" => {
                object.pointer(&format!("/{}", field.replace('.', "/"))).and_then(Value::as_str).map(String::from)
            }
            _ => None,
        })
    })
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, generation: Option<i64>) -> Value {
    let mut c = json!({"type": type_, "status": status, "reason": reason, "message": message});
    if let Some(g) = generation {
        c["observedGeneration"] = json!(g);
    }
    c
}

impl State {
    fn now_rfc3339(&self) -> String {
        rfc3339::format_seconds(self.clock.now_millis())
    }

    fn record(&mut self, verb: Verb, plural: &str, name: Option<&str>) -> Result<(), KubeError> {
        self.run_due();
        self.calls.push(Call { verb, plural: plural.to_string(), name: name.map(str::to_string) });
        if self.lost() {
            return Err(KubeError::Transport("connect: connection refused".to_string()));
        }
        self.fault(verb, plural, false)
    }

    fn lost(&self) -> bool {
        self.lost_at.is_some_and(|at| self.clock.monotonic() >= at)
    }

    /// The error of a fault due now, before (`after` false) or after the call takes effect.
    fn fault(&mut self, verb: Verb, plural: &str, after: bool) -> Result<(), KubeError> {
        for fault in &mut self.faults {
            if fault.verb == verb && fault.plural == plural && fault.after == after && fault.times > 0 {
                if fault.skip > 0 {
                    fault.skip -= 1;
                } else {
                    fault.times -= 1;
                    return Err(fault.error.clone());
                }
            }
        }
        Ok(())
    }

    fn check_served(&self, resource: &ResourceType) -> Result<(), KubeError> {
        let served = self.served.get(&resource.group).is_some_and(|v| v.contains(&resource.version));
        if served {
            Ok(())
        } else {
            Err(KubeError::NotFound("the server could not find the requested resource".to_string()))
        }
    }

    fn present(resource: &ResourceType, object: &Value) -> Value {
        let mut o = object.clone();
        o["apiVersion"] = json!(resource.api_version());
        o
    }

    fn emit(&mut self, key: &Key, kind: EventKind, object: &Value) {
        self.history.push(Event {
            rv: self.rv,
            group: key.0.clone(),
            plural: key.1.clone(),
            namespace: key.2.clone(),
            kind,
            object: object.clone(),
        });
    }

    fn store(&mut self, key: &Key, mut object: Value, kind: EventKind) -> Value {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.emit(key, kind, &object);
        self.objects.insert(key.clone(), object.clone());
        object
    }

    fn insert_new(&mut self, key: &Key, mut object: Value) -> Value {
        self.seq += 1;
        let meta = &mut object["metadata"];
        meta["uid"] = json!(format!("uid-{}", self.seq));
        meta["generation"] = json!(1);
        meta["creationTimestamp"] = json!(rfc3339::format_seconds(self.clock.now_millis()));
        meta["name"] = json!(key.3);
        if !key.2.is_empty() {
            meta["namespace"] = json!(key.2);
        }
        if let Some(data) = object.get("stringData").and_then(Value::as_object).cloned() {
            for (k, v) in data {
                object["data"][k] = json!(base64(v.as_str().unwrap_or("").as_bytes()));
            }
            if let Some(o) = object.as_object_mut() {
                o.remove("stringData");
            }
        }
        let stored = self.store(key, object, EventKind::Added);
        self.react_created(key);
        stored
    }

    fn update(&mut self, key: &Key, object: Value) -> Value {
        self.store(key, object, EventKind::Modified)
    }

    fn remove(&mut self, key: &Key, propagate: bool) {
        let Some(mut object) = self.objects.remove(key) else {
            return;
        };
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.emit(key, EventKind::Deleted, &object);
        let uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
        if propagate {
            let dependents: Vec<Key> = self
                .objects
                .iter()
                .filter(|(_, o)| {
                    o.pointer("/metadata/ownerReferences")
                        .and_then(Value::as_array)
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == json!(uid)))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for dependent in dependents {
                self.remove(&dependent, true);
            }
        }
        if key.1 == "pods" {
            self.sync_owner(&object);
            self.replace_pod(&object);
        }
        if key.1 == SANDBOXES {
            self.claim_lost_sandbox(&object);
        }
    }

    /// A running Sandbox whose pod was deleted gets a new pod with the same name (new uid).
    fn replace_pod(&mut self, pod: &Value) {
        let Some(owner) = self.owner_key_of(pod).filter(|k| k.1 == SANDBOXES) else {
            return;
        };
        let Some(sandbox) = self.objects.get(&owner) else {
            return;
        };
        let expired = sandbox.pointer("/status/conditions/0/reason").and_then(Value::as_str) == Some("SandboxExpired");
        if self.controllers && !expired && !Self::suspended(sandbox) && self.behaviour != PodBehaviour::NoPod {
            self.schedule(Duration::from_millis(10), Action::StartPod(owner));
        }
    }

    fn schedule(&mut self, after: Duration, action: Action) {
        self.seq += 1;
        let at = self.clock.monotonic() + after;
        self.timers.push(Timer { at, seq: self.seq, action });
    }

    fn next_timer_at(&self) -> Option<Duration> {
        self.timers.iter().map(|t| t.at).min()
    }

    fn run_due(&mut self) {
        loop {
            let now = self.clock.monotonic();
            let due = self
                .timers
                .iter()
                .enumerate()
                .filter(|(_, t)| t.at <= now)
                .min_by_key(|(_, t)| (t.at, t.seq))
                .map(|(i, _)| i);
            let Some(index) = due else {
                return;
            };
            let timer = self.timers.remove(index);
            match timer.action {
                Action::StartPod(owner) => self.start_pod(&owner),
                Action::Pod(pod, step) => self.pod_step(&pod, step),
                Action::Expire(sandbox) => self.expire(&sandbox),
                Action::Remove(k) => self.remove(&k, true),
                Action::Claim(k) => self.reconcile_claim(&k),
                Action::Modify(k, change) => {
                    if let Some(mut object) = self.objects.get(&k).cloned() {
                        change(&mut object);
                        let object = self.update(&k, object);
                        if k.1 == "pods" {
                            self.sync_owner(&object);
                        }
                    }
                }
            }
        }
    }

    fn suspended(sandbox: &Value) -> bool {
        sandbox.pointer("/spec/operatingMode").and_then(Value::as_str) == Some("Suspended")
            || sandbox.pointer("/spec/replicas").and_then(Value::as_i64) == Some(0)
    }

    fn react_created(&mut self, key: &Key) {
        if !self.controllers {
            return;
        }
        let Some(object) = self.objects.get(key).cloned() else {
            return;
        };
        match key.1.as_str() {
            SANDBOXES => {
                if !Self::suspended(&object) && self.behaviour != PodBehaviour::NoPod {
                    self.schedule(Duration::from_millis(10), Action::StartPod(key.clone()));
                }
                self.schedule_expiry(key, &object);
            }
            "jobs" => {
                let mut job = object;
                job["status"] = json!({"startTime": self.now_rfc3339(), "active": 0});
                self.update(key, job);
                if self.behaviour != PodBehaviour::NoPod {
                    self.schedule(Duration::from_millis(10), Action::StartPod(key.clone()));
                }
            }
            CLAIMS | WARM_POOLS => self.react_created_extension(key),
            _ => {}
        }
    }

    fn react_patched(&mut self, key: &Key, before: &Value) {
        if self.controllers && key.1 == CLAIMS {
            self.react_patched_claim(key);
        }
        if !self.controllers || key.1 != SANDBOXES {
            return;
        }
        let Some(after) = self.objects.get(key).cloned() else {
            return;
        };
        match (Self::suspended(before), Self::suspended(&after)) {
            (false, true) => {
                if let Some(pod) = self.sandbox_pod_key(&after) {
                    self.remove(&pod, true);
                }
                self.sync_sandbox(key);
            }
            (true, false) => {
                self.sync_sandbox(key);
                if self.behaviour != PodBehaviour::NoPod {
                    self.schedule(Duration::from_millis(10), Action::StartPod(key.clone()));
                }
            }
            _ => {}
        }
        if before.pointer("/spec/shutdownTime") != after.pointer("/spec/shutdownTime") {
            self.schedule_expiry(key, &after);
        }
    }

    fn schedule_expiry(&mut self, key: &Key, sandbox: &Value) {
        let Some(at) = sandbox.pointer("/spec/shutdownTime").and_then(Value::as_str).and_then(rfc3339::parse) else {
            return;
        };
        let wait = u64::try_from(at.saturating_sub(self.clock.now_millis())).unwrap_or(0);
        self.schedule(Duration::from_millis(wait), Action::Expire(key.clone()));
    }

    fn sandbox_pod_key(&self, sandbox: &Value) -> Option<Key> {
        let name = sandbox
            .pointer("/metadata/annotations/agents.x-k8s.io~1pod-name")
            .and_then(Value::as_str)
            .or_else(|| sandbox.pointer("/metadata/name").and_then(Value::as_str))?;
        let ns = sandbox.pointer("/metadata/namespace").and_then(Value::as_str);
        let k = key("", "pods", ns, name);
        self.objects.contains_key(&k).then_some(k)
    }

    fn start_pod(&mut self, owner_key: &Key) {
        let Some(owner) = self.objects.get(owner_key).cloned() else {
            return;
        };
        let sandbox = owner_key.1 == SANDBOXES;
        if sandbox && Self::suspended(&owner) {
            return;
        }
        let template_path = if sandbox { "/spec/podTemplate" } else { "/spec/template" };
        let template = owner.pointer(template_path).cloned().unwrap_or(json!({}));
        let name = if sandbox { owner_key.3.clone() } else { format!("{}-{:05}", owner_key.3, self.seq) };
        let mut labels = template.pointer("/metadata/labels").cloned().unwrap_or(json!({}));
        if sandbox {
            labels["agents.x-k8s.io/sandbox-name-hash"] = json!(name_hash(&owner_key.3));
        } else {
            labels["batch.kubernetes.io/job-name"] = json!(owner_key.3);
            labels["job-name"] = json!(owner_key.3);
        }
        let scheduled = if matches!(self.behaviour, PodBehaviour::Unschedulable { .. }) {
            condition("PodScheduled", "False", "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.", None)
        } else {
            json!({"type": "PodScheduled", "status": "True"})
        };
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": template.pointer("/metadata/annotations").cloned().unwrap_or(json!({})),
                "ownerReferences": [{
                    "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner_key.3,
                    "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true
                }]
            },
            "spec": template.get("spec").cloned().unwrap_or(json!({})),
            "status": {"phase": "Pending", "conditions": [scheduled], "containerStatuses": [
                {"name": "sandbox", "image": template.pointer("/spec/containers/0/image").cloned().unwrap_or(json!("")),
                 "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
            ]}
        });
        let pod_key = key("", "pods", Some(&owner_key.2), &name);
        if self.objects.contains_key(&pod_key) {
            return;
        }
        self.insert_new(&pod_key, pod);
        if sandbox {
            let mut owner = owner;
            owner["metadata"]["annotations"]["agents.x-k8s.io/pod-name"] = json!(name);
            self.update(owner_key, owner);
            self.sync_sandbox(owner_key);
        } else {
            let mut job = owner;
            job["status"]["active"] = json!(1);
            self.update(owner_key, job);
        }
        let step = match &self.behaviour {
            PodBehaviour::Ready { after } => Some((*after, PodStep::Ready)),
            PodBehaviour::ImagePull => Some((Duration::from_millis(5), PodStep::ImagePull)),
            PodBehaviour::ConfigError => Some((Duration::from_millis(5), PodStep::ConfigError)),
            PodBehaviour::CrashLoop => Some((Duration::from_millis(5), PodStep::CrashLoop)),
            PodBehaviour::Succeeds => Some((Duration::from_millis(5), PodStep::Succeeded)),
            PodBehaviour::Fails => Some((Duration::from_millis(5), PodStep::Failed)),
            PodBehaviour::Unschedulable { until } => until.map(|after| (after, PodStep::Ready)),
            PodBehaviour::NeverReady | PodBehaviour::NoPod => None,
        };
        if let Some((after, step)) = step {
            self.schedule(after, Action::Pod(pod_key, step));
        }
    }

    fn pod_step(&mut self, pod_key: &Key, step: PodStep) {
        let Some(mut pod) = self.objects.get(pod_key).cloned() else {
            return;
        };
        let waiting = |reason: &str| {
            json!([{"name": "sandbox", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": format!("simulated {reason}")}}}])
        };
        let terminated = |code: i64, reason: &str| {
            json!([{"name": "sandbox", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "reason": reason}}}])
        };
        match step {
            PodStep::Ready => match self.missing_secret(&pod, &pod_key.2) {
                Some(missing) => {
                    pod["status"]["containerStatuses"] = json!([{"name": "sandbox", "ready": false, "restartCount": 0,
                        "state": {"waiting": {"reason": "CreateContainerConfigError",
                                              "message": format!("secret \"{missing}\" not found")}}}]);
                    // Like a kubelet, look again at the next sync: the Secret may appear.
                    self.schedule(KUBELET_SYNC, Action::Pod(pod_key.clone(), PodStep::Ready));
                }
                None => {
                    self.seq += 1;
                    pod["status"]["phase"] = json!("Running");
                    pod["status"]["podIP"] = json!(format!("10.0.0.{}", self.seq % 250 + 1));
                    pod["status"]["conditions"] =
                        json!([{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]);
                    pod["status"]["containerStatuses"] =
                        json!([{"name": "sandbox", "ready": true, "restartCount": 0, "state": {"running": {}}}]);
                }
            },
            PodStep::ImagePull => pod["status"]["containerStatuses"] = waiting("ErrImagePull"),
            PodStep::ConfigError => pod["status"]["containerStatuses"] = waiting("CreateContainerConfigError"),
            PodStep::CrashLoop => {
                pod["status"]["phase"] = json!("Running");
                pod["status"]["containerStatuses"] = json!([{"name": "sandbox", "ready": false, "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]);
            }
            PodStep::Succeeded => {
                pod["status"]["phase"] = json!("Succeeded");
                pod["status"]["containerStatuses"] = terminated(0, "Completed");
            }
            PodStep::Failed => {
                pod["status"]["phase"] = json!("Failed");
                pod["status"]["containerStatuses"] = terminated(1, "Error");
            }
        }
        let pod = self.update(pod_key, pod);
        self.sync_owner(&pod);
    }

    /// The first Secret the pod's env needs that does not exist.
    fn missing_secret(&self, pod: &Value, namespace: &str) -> Option<String> {
        let containers = pod.pointer("/spec/containers").and_then(Value::as_array)?;
        containers
            .iter()
            .filter_map(|c| c.get("env").and_then(Value::as_array))
            .flatten()
            .filter_map(|e| e.pointer("/valueFrom/secretKeyRef"))
            .filter(|r| r.get("optional") != Some(&json!(true)))
            .filter_map(|r| r.get("name").and_then(Value::as_str))
            .find(|name| !self.objects.contains_key(&key("", "secrets", Some(namespace), name)))
            .map(str::to_string)
    }

    fn owner_key_of(&self, pod: &Value) -> Option<Key> {
        let owner = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)?
            .iter()
            .find(|r| r["controller"] == json!(true))?;
        let ns = pod.pointer("/metadata/namespace").and_then(Value::as_str);
        let name = owner["name"].as_str()?;
        let found = match owner["kind"].as_str()? {
            "Sandbox" => key(SANDBOX_GROUP, SANDBOXES, ns, name),
            "Job" => key("batch", "jobs", ns, name),
            _ => return None,
        };
        let matches = self.objects.get(&found).is_some_and(|o| o["metadata"]["uid"] == owner["uid"]);
        matches.then_some(found)
    }

    fn sync_owner(&mut self, pod: &Value) {
        if !self.controllers {
            return;
        }
        let Some(owner) = self.owner_key_of(pod) else {
            return;
        };
        if owner.1 == SANDBOXES {
            self.sync_sandbox(&owner);
            return;
        }
        let Some(mut job) = self.objects.get(&owner).cloned() else {
            return;
        };
        let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        let done = match phase {
            "Failed" => Some(condition(
                "Failed",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                None,
            )),
            "Succeeded" => Some(condition("Complete", "True", "", "", None)),
            _ => None,
        };
        if let Some(c) = done
            && job.pointer("/status/conditions").is_none()
        {
            job["status"]["conditions"] = json!([c]);
            job["status"]["active"] = json!(0);
            self.update(&owner, job);
        }
    }

    /// Recomputes a Sandbox's conditions from its pod, like the agent-sandbox controller, and
    /// lets its claim (if a claim has it) forward them.
    fn sync_sandbox(&mut self, key: &Key) {
        self.sync_sandbox_status(key);
        self.sync_claim_of(key);
    }

    fn sync_sandbox_status(&mut self, key: &Key) {
        let Some(mut sandbox) = self.objects.get(key).cloned() else {
            return;
        };
        if sandbox.pointer("/status/conditions/0/reason").and_then(Value::as_str) == Some("SandboxExpired") {
            return;
        }
        let generation = sandbox.pointer("/metadata/generation").and_then(Value::as_i64);
        let pod = self.sandbox_pod_key(&sandbox).and_then(|k| self.objects.get(&k).cloned());
        let uid = sandbox["metadata"]["uid"].clone();
        let pod = pod.filter(|p| p.pointer("/metadata/ownerReferences/0/uid") == Some(&uid));
        let mut conditions = Vec::new();
        let ready = if Self::suspended(&sandbox) {
            conditions.push(condition("Suspended", "True", "PodTerminated", "Sandbox is suspended", generation));
            condition("Ready", "False", "SandboxSuspended", "Sandbox is suspended", generation)
        } else {
            match &pod {
                None => condition("Ready", "False", "DependenciesNotReady", "Pod does not exist", generation),
                Some(p) => {
                    if let Some(scheduled) = p.pointer("/status/conditions/0").filter(|c| c["type"] == "PodScheduled") {
                        let mut c = scheduled.clone();
                        if let Some(g) = generation {
                            c["observedGeneration"] = json!(g);
                        }
                        conditions.push(c);
                    }
                    let phase = p.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Pending");
                    let pod_ready = p
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
                    let has_ip = p.pointer("/status/podIP").is_some();
                    match phase {
                        "Failed" => {
                            conditions.push(condition("Finished", "True", "PodFailed", "Pod failed", generation));
                            condition("Ready", "False", "PodFailed", "Pod failed", generation)
                        }
                        "Succeeded" => {
                            conditions.push(condition("Finished", "True", "PodSucceeded", "Pod completed", generation));
                            condition("Ready", "False", "PodSucceeded", "Pod completed successfully", generation)
                        }
                        "Running" if pod_ready && has_ip => {
                            condition("Ready", "True", "DependenciesReady", "Pod is Ready", generation)
                        }
                        _ => condition(
                            "Ready",
                            "False",
                            "DependenciesNotReady",
                            &format!("Pod exists with phase: {phase}"),
                            generation,
                        ),
                    }
                }
            }
        };
        conditions.insert(0, ready);
        let status = json!({"conditions": conditions});
        if sandbox.get("status") != Some(&status) {
            sandbox["status"] = status;
            self.update(key, sandbox);
        }
    }

    fn expire(&mut self, key: &Key) {
        let Some(mut sandbox) = self.objects.get(key).cloned() else {
            return;
        };
        let due = sandbox
            .pointer("/spec/shutdownTime")
            .and_then(Value::as_str)
            .and_then(rfc3339::parse)
            .is_some_and(|at| at <= self.clock.now_millis());
        if !due {
            return;
        }
        let generation = sandbox.pointer("/metadata/generation").and_then(Value::as_i64);
        sandbox["status"] =
            json!({"conditions": [condition("Ready", "False", "SandboxExpired", "Sandbox has expired", generation)]});
        let sandbox = self.update(key, sandbox);
        if let Some(pod) = self.sandbox_pod_key(&sandbox) {
            self.remove(&pod, true);
        }
        if sandbox.pointer("/spec/shutdownPolicy").and_then(Value::as_str) == Some("Delete") {
            self.remove(key, true);
        }
    }
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

impl Kube for FakeKube {
    type Watch = FakeWatch;

    fn get(&self, resource: &ResourceType, namespace: Option<&str>, name: &str) -> Result<Value, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::Get, &resource.plural, Some(name))?;
        s.check_served(resource)?;
        let k = key(&resource.group, &resource.plural, namespace, name);
        s.objects.get(&k).map(|o| State::present(resource, o)).ok_or_else(|| not_found(&resource.plural, name))
    }

    fn create(&self, resource: &ResourceType, namespace: Option<&str>, body: &Value) -> Result<Value, KubeError> {
        let mut s = self.state.borrow_mut();
        let name = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        s.record(Verb::Create, &resource.plural, Some(&name))?;
        s.check_served(resource)?;
        if name.is_empty() {
            return Err(KubeError::Invalid("metadata.name: Required value".to_string()));
        }
        if let Some(ns) = namespace
            && !s.objects.contains_key(&key("", "namespaces", None, ns))
        {
            return Err(KubeError::NotFound(format!("namespaces \"{ns}\" not found")));
        }
        let k = key(&resource.group, &resource.plural, namespace, &name);
        if s.objects.contains_key(&k) {
            return Err(KubeError::AlreadyExists(format!("{} \"{name}\" already exists", resource.plural)));
        }
        let stored = s.insert_new(&k, body.clone());
        s.fault(Verb::Create, &resource.plural, true)?;
        Ok(State::present(resource, &stored))
    }

    fn patch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &Value,
        subresource: Option<&str>,
    ) -> Result<Value, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::Patch, &resource.plural, Some(name))?;
        s.check_served(resource)?;
        if patch_type != PatchType::Merge {
            return Err(KubeError::Invalid("the fake API server supports merge patches only".to_string()));
        }
        let k = key(&resource.group, &resource.plural, namespace, name);
        let before = s.objects.get(&k).cloned().ok_or_else(|| not_found(&resource.plural, name))?;
        if let Some(rv) = body.pointer("/metadata/resourceVersion")
            && Some(rv) != before.pointer("/metadata/resourceVersion")
        {
            return Err(KubeError::Conflict("the object has been modified".to_string()));
        }
        let mut after = before.clone();
        if subresource == Some("status") {
            merge(&mut after["status"], body.get("status").unwrap_or(&Value::Null));
        } else {
            let mut body = body.clone();
            if let Some(o) = body.as_object_mut() {
                o.remove("status");
            }
            merge(&mut after, &body);
            after["metadata"] = before["metadata"].clone();
            if let Some(meta) = body.get("metadata") {
                for field in ["labels", "annotations", "ownerReferences", "finalizers"] {
                    if let Some(v) = meta.get(field) {
                        merge(&mut after["metadata"][field], v);
                    }
                }
            }
            if let Some(data) = after.get("stringData").and_then(Value::as_object).cloned() {
                for (key, v) in data {
                    after["data"][key] = json!(base64(v.as_str().unwrap_or("").as_bytes()));
                }
                if let Some(o) = after.as_object_mut() {
                    o.remove("stringData");
                }
            }
            if after.get("spec") != before.get("spec") {
                let generation = before.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                after["metadata"]["generation"] = json!(generation + 1);
            }
        }
        let stored = s.update(&k, after);
        s.react_patched(&k, &before);
        Ok(State::present(resource, &stored))
    }

    fn delete(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::Delete, &resource.plural, Some(name))?;
        s.check_served(resource)?;
        let k = key(&resource.group, &resource.plural, namespace, name);
        let current = s.objects.get(&k).cloned().ok_or_else(|| not_found(&resource.plural, name))?;
        if let Some(uid) = &options.precondition_uid
            && current.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str())
        {
            return Err(KubeError::Conflict(format!("Precondition failed: UID in precondition: {uid}")));
        }
        if let Some(rv) = &options.precondition_resource_version
            && current.pointer("/metadata/resourceVersion").and_then(Value::as_str) != Some(rv.as_str())
        {
            return Err(KubeError::Conflict("Precondition failed: resourceVersion".to_string()));
        }
        let has_finalizers =
            current.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if current.pointer("/metadata/deletionTimestamp").is_none() {
                let mut marked = current;
                marked["metadata"]["deletionTimestamp"] = json!(s.now_rfc3339());
                s.update(&k, marked);
            }
            return Ok(());
        }
        s.remove(&k, options.propagation != Some(Propagation::Orphan));
        Ok(())
    }

    fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<Value, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::List, &resource.plural, None)?;
        s.check_served(resource)?;
        let matching: Vec<Value> = s
            .objects
            .iter()
            .filter(|(k, _)| k.0 == resource.group && k.1 == resource.plural && namespace.is_none_or(|ns| k.2 == ns))
            .map(|(_, o)| o)
            .filter(|o| labels_match(o, options.label_selector.as_deref()))
            .filter(|o| fields_match(o, options.field_selector.as_deref()))
            .map(|o| State::present(resource, o))
            .collect();
        let start: usize = options.continue_token.as_deref().and_then(|t| t.parse().ok()).unwrap_or(0);
        let limit = options.limit.map_or(usize::MAX, |l| l as usize);
        let page: Vec<Value> = matching.iter().skip(start).take(limit).cloned().collect();
        let mut metadata = json!({"resourceVersion": s.rv.to_string()});
        if start + page.len() < matching.len() {
            metadata["continue"] = json!((start + page.len()).to_string());
        }
        Ok(json!({"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": page}))
    }

    fn watch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<FakeWatch, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::Watch, &resource.plural, None)?;
        s.check_served(resource)?;
        let mut initial = VecDeque::new();
        let cursor = match options.resource_version.as_deref() {
            Some(rv) => {
                let rv: u64 = rv.parse().map_err(|_| KubeError::Invalid(format!("resourceVersion {rv:?}")))?;
                if rv < s.compacted {
                    return Err(KubeError::Gone("too old resource version".to_string()));
                }
                rv
            }
            None => {
                for (k, o) in &s.objects {
                    if k.0 == resource.group
                        && k.1 == resource.plural
                        && namespace.is_none_or(|ns| k.2 == ns)
                        && labels_match(o, options.label_selector.as_deref())
                        && fields_match(o, options.field_selector.as_deref())
                    {
                        initial.push_back(State::present(resource, o));
                    }
                }
                s.rv
            }
        };
        Ok(FakeWatch {
            state: Rc::clone(&self.state),
            resource: resource.clone(),
            namespace: namespace.map(str::to_string),
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            cursor,
            initial,
        })
    }

    fn served_versions(&self, group: &str) -> Result<Vec<String>, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::ServedVersions, group, None)?;
        Ok(s.served.get(group).cloned().unwrap_or_default())
    }

    fn exec(&self, namespace: &str, pod: &str, options: &ExecOptions) -> Result<ExecOutput, KubeError> {
        let clock = {
            let mut s = self.state.borrow_mut();
            s.record(Verb::Exec, "pods", Some(pod))?;
            s.execs.push(options.clone());
            if !s.objects.contains_key(&key("", "pods", Some(namespace), pod)) {
                return Err(not_found("pods", pod));
            }
            s.clock.clone()
        };
        // The fake clock moves by the time the process really ran, as a cluster's would.
        let started = std::time::Instant::now();
        let output = crate::fake_exec::run(options);
        clock.advance(started.elapsed());
        output
    }

    fn check_namespace(&self, namespace: &str) -> Result<(), String> {
        match &self.state.borrow().allowed_namespaces {
            Some(allowed) if !allowed.iter().any(|n| n == namespace) => {
                Err(format!("the host's policy does not allow namespace {namespace:?} (allowed: {allowed:?})"))
            }
            _ => Ok(()),
        }
    }
}

/// An open watch on the fake.
pub struct FakeWatch {
    state: Rc<RefCell<State>>,
    resource: ResourceType,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    cursor: u64,
    initial: VecDeque<Value>,
}

impl Watch for FakeWatch {
    fn next(&mut self, timeout: Duration) -> Result<Option<WatchEvent>, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::WatchNext, &self.resource.plural, None)?;
        let until = s.clock.monotonic() + timeout;
        loop {
            s.run_due();
            if s.lost() {
                return Err(KubeError::Transport("connection reset by peer".to_string()));
            }
            if let Some(object) = self.initial.pop_front() {
                return Ok(Some(WatchEvent::Added(object)));
            }
            let found = s.history.iter().find(|e| {
                e.rv > self.cursor
                    && e.group == self.resource.group
                    && e.plural == self.resource.plural
                    && self.namespace.as_deref().is_none_or(|ns| e.namespace == ns)
                    && labels_match(&e.object, self.label_selector.as_deref())
                    && fields_match(&e.object, self.field_selector.as_deref())
            });
            if let Some(event) = found {
                self.cursor = event.rv;
                let object = State::present(&self.resource, &event.object);
                return Ok(Some(match event.kind {
                    EventKind::Added => WatchEvent::Added(object),
                    EventKind::Modified => WatchEvent::Modified(object),
                    EventKind::Deleted => WatchEvent::Deleted(object),
                }));
            }
            match s.next_timer_at().into_iter().chain(s.lost_at).min() {
                Some(at) if at <= until => s.clock.advance_to(at),
                _ => {
                    s.clock.advance_to(until);
                    return Ok(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn selectors() {
        let o = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}});
        assert!(labels_match(&o, Some("x=1,y==2")));
        assert!(labels_match(&o, Some("x,!z,y!=3")));
        assert!(!labels_match(&o, Some("x=2")));
        assert!(fields_match(&o, Some("metadata.name=a")));
        assert!(!fields_match(&o, Some("metadata.name=b")));
    }

    #[test]
    fn set_based_selectors_match_as_on_the_api_server() {
        // The equality-only matcher read "x in (1,3)" as a label named "x in (1" and matched nothing.
        let o = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"x": "1", "y": "2"}}});
        assert!(labels_match(&o, Some("x in (1,3)")));
        assert!(labels_match(&o, Some("y notin (3),x")));
        assert!(!labels_match(&o, Some("x in (2,3)")));
        assert!(!labels_match(&o, Some("x=(")), "a selector the server refuses matches nothing");
        assert!(fields_match(&o, Some("metadata.namespace=ns,metadata.name!=b")));
    }

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
