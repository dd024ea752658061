//! Shared scenario helpers for the unit tests: a fake cluster with a namespace (and, for the
//! claim backend, a template and a warm pool), a provider over it, configs, requests with a
//! secret env value, and stored-lease round trips.

use std::time::Duration;

use contract::k8s::agent_sandbox::TEMPLATES;
use serde_json::{Value, json};

use crate::Provider;
use crate::acquire::{AcquireRequest, EnvVar};
use crate::fake_kube::{FakeClock, FakeKube, MemoryLog};
use crate::lease::{Lease, LeaseRef};

/// The namespace every scenario uses.
pub const NS: &str = "sandboxes";
/// The fake wall clock's start (a whole second).
pub const NOW: i64 = 1_796_032_916_000;
/// A secret env value that must never show anywhere but the Secret.
pub const SECRET_VALUE: &str = "sk-live-7f3a9c1e5b2d";
/// The warm pool of the claim scenarios.
pub const POOL: &str = "python";
/// The template of the claim scenarios' pool.
pub const TEMPLATE: &str = "python-tpl";

/// A fake cluster, its clock, and the provider's log.
pub struct Env {
    pub kube: FakeKube,
    pub clock: FakeClock,
    pub log: MemoryLog,
}

impl Env {
    /// A cluster with the namespace [`NS`] and default controllers.
    pub fn new() -> Self {
        let clock = FakeClock::new(NOW);
        let kube = FakeKube::new(clock.clone());
        kube.add_namespace(NS);
        Self { kube, clock, log: MemoryLog::default() }
    }

    /// A provider over this environment.
    pub fn provider(&self) -> Provider<FakeKube, FakeClock, MemoryLog> {
        Provider::new(self.kube.clone(), self.clock.clone(), self.log.clone())
    }

    /// Puts back the pod of the suspended Sandbox `name` as still terminating, the way a kubelet
    /// keeps it until its main process stops (up to the grace period); the fake controllers
    /// delete a suspended Sandbox's pod at once.
    pub fn old_pod_still_stopping(&self, name: &str) {
        let sandbox = self.kube.object("sandboxes", NS, name).expect("the Sandbox");
        self.kube.put(
            &crate::api_versions::pods(),
            NS,
            json!({"metadata": {"name": name,
                                "labels": {crate::workload_state::SANDBOX_NAME_HASH_LABEL:
                                           contract::k8s::agent_sandbox::name_hash(name)},
                                "deletionTimestamp": "2026-11-30T10:00:00Z",
                                "ownerReferences": [{"uid": sandbox["metadata"]["uid"], "controller": true}]},
                   "status": {"phase": "Running"}}),
        );
    }

    /// Every log line, joined.
    pub fn log_text(&self) -> String {
        self.log.lines().join("\n")
    }

    /// Adds [`TEMPLATE`] and the warm pool [`POOL`] of `replicas` members, and lets the members
    /// become Ready (the clock moves 2 s).
    pub fn with_pool(&self, replicas: u32) {
        self.with_pool_of(replicas, |_| {});
    }

    /// [`Env::with_pool`] from a template whose pod template `shape` changes (its containers,
    /// its annotations) before any member is made.
    pub fn with_pool_of(&self, replicas: u32, shape: impl FnOnce(&mut Value)) {
        self.kube.add_template(NS, TEMPLATE);
        self.kube.modify(TEMPLATES, NS, TEMPLATE, |t| shape(&mut t["spec"]["podTemplate"]));
        self.kube.add_warm_pool(NS, POOL, TEMPLATE, replicas);
        // In steps: a timer due in the past schedules its next step from now.
        for _ in 0..20 {
            self.clock.advance(Duration::from_millis(100));
            self.kube.settle();
        }
    }

    /// What is left in the namespace besides the pool, its template and its current members.
    pub fn leftovers(&self) -> Vec<String> {
        let members = self.kube.pool_members(NS, POOL);
        let member = |name: &str| members.iter().any(|m| m == name);
        self.kube
            .names_in(NS)
            .into_iter()
            .filter(|n| !n.starts_with("sandboxtemplates/") && !n.starts_with("sandboxwarmpools/"))
            .filter(|n| !n.strip_prefix("sandboxes/").or_else(|| n.strip_prefix("pods/")).is_some_and(member))
            .collect()
    }
}

/// A normalized config for `backend` with extra top-level fields merged in.
pub fn config_with(backend: &str, extra: Value) -> String {
    let mut config = json!({"namespace": NS, "image": "ghcr.io/acme/agent:1", "backend": backend});
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            c.insert(k.clone(), v.clone());
        }
    }
    let validation = crate::config::validate(&config.to_string());
    validation.normalized_config.expect("test config must be valid")
}

/// A normalized config for `backend`.
pub fn config(backend: &str) -> String {
    config_with(backend, json!({}))
}

/// A normalized config for backend claim on [`POOL`] (and [`TEMPLATE`], which v1alpha1 needs),
/// with extra top-level fields merged in.
pub fn claim_config(extra: Value) -> String {
    let mut config = json!({"namespace": NS, "backend": "claim", "claim": {"warmPool": POOL, "template": TEMPLATE}});
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            c.insert(k.clone(), v.clone());
        }
    }
    let validation = crate::config::validate(&config.to_string());
    validation.normalized_config.expect("test config must be valid")
}

/// A request for `acquisition_id` with one plain and one secret env var.
pub fn request(config: &str, acquisition_id: &str) -> AcquireRequest {
    AcquireRequest {
        config: config.to_string(),
        run_id: "run-1".to_string(),
        acquisition_id: acquisition_id.to_string(),
        agent_id: Some("agent-7".to_string()),
        requested_expires_at: None,
        env: vec![
            EnvVar { name: "MODE".into(), value: "fast".into(), secret: false },
            EnvVar { name: "API_KEY".into(), value: SECRET_VALUE.into(), secret: true },
        ],
        reusable: false,
    }
}

/// What a host hands back after storing a lease.
pub fn stored(lease: &Lease, config: &str) -> LeaseRef {
    LeaseRef { lease: lease.clone(), config: config.to_string() }
}

/// Asserts that `message` shows `value` by a short prefix and its length, never whole.
pub fn assert_quotes_a_prefix(message: &str, value: &str) {
    let head: String = message.chars().take(300).collect();
    assert!(message.len() < 1_000, "a {} byte message: {head}…", message.len());
    assert!(message.contains(&format!("({} bytes)", value.len())), "no length of the value in: {head}");
}

/// Fails when anything is left in the namespace.
pub fn assert_nothing_left(env: &Env) {
    assert!(env.kube.names_in(NS).is_empty(), "left behind: {:?}", env.kube.names_in(NS));
}

/// Fails when the secret value shows in `text` or in the log.
pub fn assert_no_secret(env: &Env, text: &str) {
    assert!(!text.contains(SECRET_VALUE), "secret leaked into: {text}");
    assert!(!env.log_text().contains(SECRET_VALUE), "secret leaked into the log: {}", env.log_text());
}

/// A lease a host might hand back after losing everything but the id (`backend` as it says,
/// garbage or nothing elsewhere, and a config that does not parse).
pub fn bare_lease(backend: crate::config::Backend, id: &str) -> LeaseRef {
    LeaseRef {
        lease: Lease {
            provider_lease_id: id.to_string(),
            backend,
            namespace: String::new(),
            api_version: "garbage".into(),
            workload_uid: String::new(),
            pod_name: None,
            pod_uid: None,
            pod_ip: None,
            claimed_sandbox: None,
            expires_at: None,
            reusable: false,
            metadata: "{{{ not json".into(),
        },
        config: "also garbage".into(),
    }
}
