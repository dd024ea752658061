//! The agent-sandbox claim and warm pool controllers of [`super::FakeKube`], as far as the
//! provider can tell them apart from the real ones.
//!
//! A `SandboxWarmPool` keeps its `spec.replicas` member Sandboxes (`<pool>-NNNNN`, owned by the
//! pool, labelled with the pool's hash), made from its template, which the fake Sandbox
//! controller and kubelet start like any Sandbox. A `SandboxClaim` is reconciled shortly after
//! it is created or patched, when its Sandbox's status changes, and when its Sandbox is deleted:
//! v1beta1 (`spec.warmPoolRef`) takes the template from the pool; v1alpha1
//! (`spec.sandboxTemplateRef`, `spec.warmpool`: a pool, `default` or `none`) names it. A missing
//! pool or template sets `WarmPoolNotFound` or `TemplateNotFound`. The claim keeps the Sandbox
//! its status names; otherwise, unless it has `spec.env` or `spec.volumeClaimTemplates` (which
//! always cold-start), it adopts a Ready member of the pool (its ownership moves to the claim,
//! `launch-type: warm`, the pool makes another member), or else cold-starts a Sandbox named like
//! the claim from the template (`launch-type: cold`); a Sandbox under that name that is not the
//! claim's sets `ReconcilerError`. `Ready` is forwarded from the Sandbox (at the claim's
//! generation), `SandboxNotReady` before it has one. At `lifecycle.shutdownTime` a claim with
//! `shutdownPolicy: Delete` is deleted (garbage collection takes its Sandbox, pod and Secret);
//! with `Retain` it says `ClaimExpired` and its Sandbox is deleted.

use std::time::Duration;

use contract::k8s::agent_sandbox::{
    ASSIGNED_SANDBOX_ANNOTATION, CLAIM_KIND, CLAIM_UID_LABEL, CLAIMS, EXTENSIONS_GROUP, LAUNCH_COLD, LAUNCH_TYPE_LABEL,
    LAUNCH_WARM, POD_NAME_ANNOTATION, TEMPLATE_REF_ANNOTATION, TEMPLATE_REF_HASH_LABEL, TEMPLATES, WARM_POOL_KIND,
    WARM_POOL_LABEL, WARM_POOLS, claim_reason, name_hash, shutdown_policy, warm_pool_policy,
};
use serde_json::{Value, json};

use super::{Action, FakeKube, Key, SANDBOX_GROUP, SANDBOXES, State, condition, key};
use crate::clock::Clock;
use crate::rfc3339;

/// How long after a change the claim controller reconciles.
const CLAIM_SYNC: Duration = Duration::from_millis(5);

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn controller_of(object: &Value) -> Option<&Value> {
    object.pointer("/metadata/ownerReferences")?.as_array()?.iter().find(|r| r["controller"] == json!(true))
}

fn controller_ref(owner: &Value, kind: &str) -> Value {
    json!([{"apiVersion": owner["apiVersion"], "kind": kind, "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}])
}

fn is_ready(sandbox: &Value) -> bool {
    sandbox
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// What a reconcile found: a Sandbox to report, or a reason the claim has none.
enum Outcome {
    Sandbox(Key),
    Refused(&'static str, String),
}

impl State {
    /// Reacts to a new claim or pool (see the module docs).
    pub(super) fn react_created_extension(&mut self, key: &Key) {
        match key.1.as_str() {
            CLAIMS => {
                self.schedule(CLAIM_SYNC, Action::Claim(key.clone()));
                self.schedule_claim_expiry(key);
            }
            WARM_POOLS => self.fill_pool(key),
            _ => {}
        }
    }

    /// Reacts to a patched claim: its expiry may have moved, its generation did.
    pub(super) fn react_patched_claim(&mut self, key: &Key) {
        self.schedule(CLAIM_SYNC, Action::Claim(key.clone()));
        self.schedule_claim_expiry(key);
    }

    fn schedule_claim_expiry(&mut self, key: &Key) {
        let at = self.objects.get(key).and_then(|c| text(c, "/spec/lifecycle/shutdownTime")).and_then(rfc3339::parse);
        if let Some(at) = at {
            let wait = u64::try_from(at.saturating_sub(self.clock.now_millis())).unwrap_or(0);
            self.schedule(Duration::from_millis(wait), Action::Claim(key.clone()));
        }
    }

    /// The claim that controls `sandbox`, if it still exists.
    fn claim_of(&self, sandbox: &Value) -> Option<Key> {
        let owner = controller_of(sandbox).filter(|r| r["kind"] == CLAIM_KIND)?;
        let k = key(EXTENSIONS_GROUP, CLAIMS, text(sandbox, "/metadata/namespace"), owner["name"].as_str()?);
        self.objects.get(&k).filter(|c| c["metadata"]["uid"] == owner["uid"]).map(|_| k)
    }

    /// After a Sandbox's status changed: its claim forwards it.
    pub(super) fn sync_claim_of(&mut self, sandbox: &Key) {
        if let Some(claim) = self.objects.get(sandbox).and_then(|s| self.claim_of(s)) {
            self.reconcile_claim(&claim);
        }
    }

    /// After a Sandbox was deleted: its claim, if it still exists, gets another.
    pub(super) fn claim_lost_sandbox(&mut self, sandbox: &Value) {
        if self.controllers
            && let Some(claim) = self.claim_of(sandbox)
        {
            self.schedule(CLAIM_SYNC, Action::Claim(claim));
        }
    }

    /// Keeps a pool at `spec.replicas` members.
    fn fill_pool(&mut self, pool_key: &Key) {
        let Some(pool) = self.objects.get(pool_key).cloned() else {
            return;
        };
        let hash = name_hash(&pool_key.3);
        let members = self
            .objects
            .iter()
            .filter(|(k, o)| {
                k.1 == SANDBOXES && k.2 == pool_key.2 && o["metadata"]["labels"][WARM_POOL_LABEL] == json!(hash)
            })
            .count();
        let wanted = usize::try_from(pool.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(0)).unwrap_or(0);
        let template_name = text(&pool, "/spec/sandboxTemplateRef/name").unwrap_or("").to_string();
        let Some(template) =
            self.objects.get(&key(EXTENSIONS_GROUP, TEMPLATES, Some(&pool_key.2), &template_name)).cloned()
        else {
            return;
        };
        for _ in members..wanted {
            self.seq += 1;
            let name = format!("{}-{:05}", pool_key.3, self.seq);
            let member = json!({
                "apiVersion": format!("{SANDBOX_GROUP}/v1beta1"), "kind": "Sandbox",
                "metadata": {
                    "labels": {WARM_POOL_LABEL: hash, TEMPLATE_REF_HASH_LABEL: name_hash(&template_name)},
                    "annotations": {TEMPLATE_REF_ANNOTATION: template_name},
                    "ownerReferences": controller_ref(&pool, WARM_POOL_KIND)
                },
                "spec": {"podTemplate": template.pointer("/spec/podTemplate").cloned().unwrap_or(json!({}))}
            });
            self.insert_new(&key(SANDBOX_GROUP, SANDBOXES, Some(&pool_key.2), &name), member);
        }
    }

    /// The pool and template a claim uses, or why it has none.
    fn claim_sources(&self, claim: &Value, ns: &str) -> Result<(Option<Key>, Key), Outcome> {
        let pool_key = |name: &str| key(EXTENSIONS_GROUP, WARM_POOLS, Some(ns), name);
        let missing_pool = |name: &str| {
            Outcome::Refused(claim_reason::WARM_POOL_NOT_FOUND, format!("SandboxWarmPool {name:?} not found"))
        };
        let (pool, template) = if let Some(pool) = text(claim, "/spec/warmPoolRef/name") {
            let found = self.objects.get(&pool_key(pool)).ok_or_else(|| missing_pool(pool))?;
            (Some(pool_key(pool)), text(found, "/spec/sandboxTemplateRef/name").unwrap_or("").to_string())
        } else {
            let template = text(claim, "/spec/sandboxTemplateRef/name").unwrap_or("").to_string();
            let pool = match text(claim, "/spec/warmpool").unwrap_or(warm_pool_policy::DEFAULT) {
                warm_pool_policy::NONE => None,
                warm_pool_policy::DEFAULT => self
                    .objects
                    .iter()
                    .find(|(k, p)| {
                        k.1 == WARM_POOLS && k.2 == ns && text(p, "/spec/sandboxTemplateRef/name") == Some(&template)
                    })
                    .map(|(k, _)| k.clone()),
                name if self.objects.contains_key(&pool_key(name)) => Some(pool_key(name)),
                name => return Err(missing_pool(name)),
            };
            (pool, template)
        };
        let template_key = key(EXTENSIONS_GROUP, TEMPLATES, Some(ns), &template);
        if !self.objects.contains_key(&template_key) {
            let message = format!("SandboxTemplate {template:?} not found");
            return Err(Outcome::Refused(claim_reason::TEMPLATE_NOT_FOUND, message));
        }
        Ok((pool, template_key))
    }

    /// The claim's Sandbox: the one it has, an adopted pool member, or a cold start.
    fn claim_sandbox(&mut self, claim_key: &Key, claim: &Value) -> Outcome {
        let ns = claim_key.2.clone();
        let uid = claim["metadata"]["uid"].clone();
        let ours = |s: &Value| controller_of(s).is_some_and(|r| r["uid"] == uid);
        let sandbox_key = |name: &str| key(SANDBOX_GROUP, SANDBOXES, Some(&ns), name);
        if let Some(name) = text(claim, "/status/sandbox/name")
            && self.objects.get(&sandbox_key(name)).is_some_and(ours)
        {
            return Outcome::Sandbox(sandbox_key(name));
        }
        let (pool, template_key) = match self.claim_sources(claim, &ns) {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        let cold_key = sandbox_key(&claim_key.3);
        if let Some(existing) = self.objects.get(&cold_key) {
            return if ours(existing) {
                Outcome::Sandbox(cold_key)
            } else {
                let message = format!("sandbox {:?} is not controlled by claim {:?}", claim_key.3, claim_key.3);
                Outcome::Refused(claim_reason::RECONCILER_ERROR, message)
            };
        }
        let custom = ["/spec/env", "/spec/volumeClaimTemplates"]
            .iter()
            .any(|p| claim.pointer(p).and_then(Value::as_array).is_some_and(|a| !a.is_empty()));
        if let Some(pool_key) = pool.filter(|_| !custom) {
            let hash = json!(name_hash(&pool_key.3));
            let member = self
                .objects
                .iter()
                .find(|(k, s)| {
                    k.1 == SANDBOXES && k.2 == ns && s["metadata"]["labels"][WARM_POOL_LABEL] == hash && is_ready(s)
                })
                .map(|(k, s)| (k.clone(), s.clone()));
            if let Some((member_key, mut member)) = member {
                if let Some(labels) = member["metadata"]["labels"].as_object_mut() {
                    labels.remove(WARM_POOL_LABEL);
                }
                member["metadata"]["labels"][LAUNCH_TYPE_LABEL] = json!(LAUNCH_WARM);
                member["metadata"]["labels"][CLAIM_UID_LABEL] = uid.clone();
                member["metadata"]["annotations"][POD_NAME_ANNOTATION] = json!(member_key.3);
                member["metadata"]["ownerReferences"] = controller_ref(claim, CLAIM_KIND);
                self.update(&member_key, member);
                self.fill_pool(&pool_key);
                return Outcome::Sandbox(member_key);
            }
        }
        let template = self.objects.get(&template_key).cloned().unwrap_or(json!({}));
        let sandbox = json!({
            "apiVersion": format!("{SANDBOX_GROUP}/v1beta1"), "kind": "Sandbox",
            "metadata": {
                "labels": {LAUNCH_TYPE_LABEL: LAUNCH_COLD, CLAIM_UID_LABEL: uid, TEMPLATE_REF_HASH_LABEL: name_hash(&template_key.3)},
                "annotations": {TEMPLATE_REF_ANNOTATION: template_key.3},
                "ownerReferences": controller_ref(claim, CLAIM_KIND)
            },
            "spec": {"podTemplate": template.pointer("/spec/podTemplate").cloned().unwrap_or(json!({}))}
        });
        self.insert_new(&cold_key, sandbox);
        Outcome::Sandbox(cold_key)
    }

    /// One pass of the claim controller (see the module docs).
    pub(super) fn reconcile_claim(&mut self, claim_key: &Key) {
        if !self.controllers {
            return;
        }
        let Some(mut claim) = self.objects.get(claim_key).cloned() else {
            return;
        };
        if claim.pointer("/metadata/deletionTimestamp").is_some() {
            return;
        }
        let generation = claim.pointer("/metadata/generation").and_then(Value::as_i64);
        let expired = text(&claim, "/spec/lifecycle/shutdownTime")
            .and_then(rfc3339::parse)
            .is_some_and(|at| at <= self.clock.now_millis());
        let (ready, sandbox) = if expired {
            let policy = text(&claim, "/spec/lifecycle/shutdownPolicy").unwrap_or(shutdown_policy::RETAIN);
            if policy != shutdown_policy::RETAIN {
                self.remove(claim_key, true);
                return;
            }
            if let Some(name) = text(&claim, "/status/sandbox/name") {
                let k = key(SANDBOX_GROUP, SANDBOXES, Some(&claim_key.2), name);
                self.remove(&k, true);
            }
            let message = "Claim expired. Sandbox cleanup initiated.";
            (condition("Ready", "False", claim_reason::CLAIM_EXPIRED, message, generation), None)
        } else {
            match self.claim_sandbox(claim_key, &claim) {
                Outcome::Refused(reason, message) => (condition("Ready", "False", reason, &message, generation), None),
                Outcome::Sandbox(k) => {
                    let sandbox = self.objects.get(&k).cloned().unwrap_or(json!({}));
                    let forwarded = sandbox
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                        .cloned();
                    let ready = match forwarded {
                        Some(mut c) => {
                            c["observedGeneration"] = json!(generation);
                            c
                        }
                        None => condition(
                            "Ready",
                            "False",
                            claim_reason::SANDBOX_NOT_READY,
                            "Sandbox is not ready",
                            generation,
                        ),
                    };
                    (ready, Some((k.3, sandbox)))
                }
            }
        };
        let mut status = json!({"conditions": [ready]});
        if let Some((name, sandbox)) = &sandbox {
            let pod = sandbox.pointer("/metadata/annotations").and_then(|a| a.get(POD_NAME_ANNOTATION));
            let pod = pod.and_then(Value::as_str).unwrap_or(name);
            let pod_ip =
                self.objects.get(&key("", "pods", Some(&claim_key.2), pod)).and_then(|p| p.pointer("/status/podIP"));
            status["sandbox"] = json!({"name": name, "podIPs": pod_ip.cloned().into_iter().collect::<Vec<_>>()});
            claim["metadata"]["annotations"][ASSIGNED_SANDBOX_ANNOTATION] = json!(name);
        }
        let before = self.objects.get(claim_key).cloned();
        claim["status"] = status;
        if before.as_ref() != Some(&claim) {
            self.update(claim_key, claim);
        }
    }
}

impl FakeKube {
    /// Which SandboxClaim versions the cluster serves (preferred first).
    pub fn serve_claim_versions(&self, versions: &[&str]) {
        let versions = versions.iter().map(|v| v.to_string()).collect();
        self.state.borrow_mut().served.insert(EXTENSIONS_GROUP.to_string(), versions);
    }

    /// Adds a SandboxTemplate whose pod runs `busybox` as container `main`.
    pub fn add_template(&self, namespace: &str, name: &str) -> Value {
        let template = json!({
            "apiVersion": format!("{EXTENSIONS_GROUP}/v1beta1"), "kind": "SandboxTemplate", "metadata": {"name": name},
            "spec": {"podTemplate": {"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}}
        });
        let mut s = self.state.borrow_mut();
        s.insert_new(&key(EXTENSIONS_GROUP, TEMPLATES, Some(namespace), name), template)
    }

    /// Adds a SandboxWarmPool of `replicas` members made from `template` (they start like any
    /// Sandbox: Ready once the kubelet makes their pods Ready).
    pub fn add_warm_pool(&self, namespace: &str, name: &str, template: &str, replicas: u32) -> Value {
        let pool = json!({
            "apiVersion": format!("{EXTENSIONS_GROUP}/v1beta1"), "kind": WARM_POOL_KIND, "metadata": {"name": name},
            "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": template}}
        });
        let mut s = self.state.borrow_mut();
        s.insert_new(&key(EXTENSIONS_GROUP, WARM_POOLS, Some(namespace), name), pool)
    }

    /// The Sandboxes of a pool that are still its members (not adopted), by name.
    pub fn pool_members(&self, namespace: &str, pool: &str) -> Vec<String> {
        let hash = json!(name_hash(pool));
        let s = self.state.borrow();
        s.objects
            .iter()
            .filter(|(k, o)| k.1 == SANDBOXES && k.2 == namespace && o["metadata"]["labels"][WARM_POOL_LABEL] == hash)
            .map(|(k, _)| k.3.clone())
            .collect()
    }
}
