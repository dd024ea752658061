//! The fake's Sandbox, Job and kubelet controllers: timers the clock runs when due, pods started
//! for a Sandbox or Job as [`PodBehaviour`] says, a pod whose Secret is missing held in
//! `CreateContainerConfigError` until it exists, status written back to the owner, suspend and
//! resume, and a Sandbox's expiry at its `shutdownTime`.

use contract::k8s::agent_sandbox::{POD_NAME_ANNOTATION, SANDBOX_NAME_HASH_LABEL, name_hash};
use serde_json::json;

use super::*;
use crate::clock::Clock;
use crate::rfc3339;

/// How often the simulated kubelet looks again at a pod that waits for its Secret.
const KUBELET_SYNC: Duration = Duration::from_secs(1);

pub(super) fn condition(type_: &str, status: &str, reason: &str, message: &str, generation: Option<i64>) -> Value {
    let mut c = json!({"type": type_, "status": status, "reason": reason, "message": message});
    if let Some(g) = generation {
        c["observedGeneration"] = json!(g);
    }
    c
}

impl State {
    /// A running Sandbox whose pod was deleted gets a new pod with the same name (new uid).
    pub(super) fn replace_pod(&mut self, pod: &Value) {
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

    pub(super) fn schedule(&mut self, after: Duration, action: Action) {
        self.seq += 1;
        let at = self.clock.monotonic() + after;
        self.timers.push(Timer { at, seq: self.seq, action });
    }

    pub(super) fn next_timer_at(&self) -> Option<Duration> {
        self.timers.iter().map(|t| t.at).min()
    }

    pub(super) fn run_due(&mut self) {
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

    pub(super) fn suspended(sandbox: &Value) -> bool {
        sandbox.pointer("/spec/operatingMode").and_then(Value::as_str) == Some("Suspended")
            || sandbox.pointer("/spec/replicas").and_then(Value::as_i64) == Some(0)
    }

    pub(super) fn react_created(&mut self, key: &Key) {
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

    pub(super) fn react_patched(&mut self, key: &Key, before: &Value) {
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

    pub(super) fn schedule_expiry(&mut self, key: &Key, sandbox: &Value) {
        let Some(at) = sandbox.pointer("/spec/shutdownTime").and_then(Value::as_str).and_then(rfc3339::parse) else {
            return;
        };
        let wait = u64::try_from(at.saturating_sub(self.clock.now_millis())).unwrap_or(0);
        self.schedule(Duration::from_millis(wait), Action::Expire(key.clone()));
    }

    pub(super) fn sandbox_pod_key(&self, sandbox: &Value) -> Option<Key> {
        let name = sandbox
            .pointer("/metadata/annotations/agents.x-k8s.io~1pod-name")
            .and_then(Value::as_str)
            .or_else(|| sandbox.pointer("/metadata/name").and_then(Value::as_str))?;
        let ns = sandbox.pointer("/metadata/namespace").and_then(Value::as_str);
        let k = key("", "pods", ns, name);
        self.objects.contains_key(&k).then_some(k)
    }

    pub(super) fn start_pod(&mut self, owner_key: &Key) {
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
            labels[SANDBOX_NAME_HASH_LABEL] = json!(name_hash(&owner_key.3));
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
            owner["metadata"]["annotations"][POD_NAME_ANNOTATION] = json!(name);
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

    pub(super) fn pod_step(&mut self, pod_key: &Key, step: PodStep) {
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
    pub(super) fn missing_secret(&self, pod: &Value, namespace: &str) -> Option<String> {
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

    pub(super) fn owner_key_of(&self, pod: &Value) -> Option<Key> {
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

    pub(super) fn sync_owner(&mut self, pod: &Value) {
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
    pub(super) fn sync_sandbox(&mut self, key: &Key) {
        self.sync_sandbox_status(key);
        self.sync_claim_of(key);
    }

    pub(super) fn sync_sandbox_status(&mut self, key: &Key) {
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

    pub(super) fn expire(&mut self, key: &Key) {
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
