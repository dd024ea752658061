//! The warm pool's decisions as pure functions: observed pool, template and labelled Sandboxes
//! → which members to delete, how many to create, and the status to report.

use std::cmp::Reverse;

use contract::k8s::agent_sandbox::{
    LAUNCH_TYPE_LABEL, LAUNCH_WARM, TEMPLATE_REF_ANNOTATION, TEMPLATE_REF_HASH_LABEL, WARM_POOL_KIND, WARM_POOL_LABEL,
};
use kube::api::Preconditions;
use serde_json::{Value, json};

use super::model::{Pool, PoolStatus};
use crate::controllers::extensions::blueprint::{Template, pod_template_labels};
use crate::controllers::extensions::discovery::Apis;
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::extensions::{TEMPLATE_HASH_LABEL, controller_reference, name_hash};

/// The most Sandboxes one pass creates or deletes (upstream's `sandboxCreateDeleteMaxBatchSize`).
pub const MAX_BATCH: usize = 300;

/// Everything one reconcile knows about a pool.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The pool.
    pub pool: Pool,
    /// Its template; `None` while it does not exist (or cannot be used): nothing is created.
    pub template: Option<Template>,
    /// The Sandboxes in the pool's namespace that carry its label (members or not).
    pub sandboxes: Vec<SandboxView>,
}

/// Why a member goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Made from an older template, under `Recreate`.
    Stale,
    /// More members than `spec.replicas`.
    Excess,
}

/// A member to delete (with its uid and resourceVersion as preconditions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doomed {
    /// Sandbox name.
    pub name: String,
    /// Sandbox uid.
    pub uid: String,
    /// The resourceVersion it was planned on: a claim adopting it in the meantime moves it, and
    /// the delete is then refused instead of taking the claim's Sandbox.
    pub resource_version: String,
    /// Why.
    pub why: Why,
}

/// What one reconcile should do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Members to delete, first.
    pub delete: Vec<Doomed>,
    /// Members to create, then.
    pub create: usize,
    /// The status to report (`None` while the pool is being deleted).
    pub status: Option<PoolStatus>,
}

impl Plan {
    /// Whether the plan writes anything but status (so it must rest on a fresh observation).
    pub fn acts(&self) -> bool {
        self.create > 0 || !self.delete.is_empty()
    }
}

/// `status.selector` (and the list selector) of a pool's members.
pub fn member_selector(pool: &str) -> String {
    format!("{WARM_POOL_LABEL}={}", name_hash(pool))
}

/// Decides what to do for one observation.
pub fn plan(observed: &Observed) -> Plan {
    let pool = &observed.pool;
    if pool.deleting {
        return Plan::default();
    }
    let hash = name_hash(&pool.name);
    let owned: Vec<&SandboxView> = observed
        .sandboxes
        .iter()
        .filter(|s| s.has_label(WARM_POOL_LABEL, &hash) && s.controlled_by(&pool.uid))
        .collect();
    let terminating = owned.iter().filter(|s| s.deleting).count();
    let mut active: Vec<&SandboxView> = owned.into_iter().filter(|s| !s.deleting).collect();

    let mut delete = Vec::new();
    if pool.recreate
        && let Some(template) = &observed.template
    {
        let current = template.blueprint_hash();
        let (fresh, stale): (Vec<_>, Vec<_>) =
            active.into_iter().partition(|s| s.labels.get(TEMPLATE_HASH_LABEL) == Some(&current));
        delete.extend(stale.iter().map(|s| doomed(s, Why::Stale)));
        active = fresh;
    }
    let ready = active.iter().filter(|s| s.is_ready()).count();
    let status = PoolStatus {
        replicas: Some(count(active.len())),
        ready_replicas: Some(count(ready)),
        selector: Some(member_selector(&pool.name)),
        observed_generation: Some(pool.generation),
    };

    let population = active.len() + terminating + delete.len();
    let mut create = 0;
    if active.len() > pool.replicas {
        // Not-ready members go first, then the newest: the oldest ready ones are the warmest.
        active.sort_by_key(|s| (s.is_ready(), Reverse(s.created), Reverse(s.name.clone())));
        let excess = (active.len() - pool.replicas).min(MAX_BATCH);
        delete.extend(active.iter().take(excess).map(|s| doomed(s, Why::Excess)));
    } else if observed.template.is_some() && population < pool.replicas {
        create = (pool.replicas - population).min(MAX_BATCH);
    }
    Plan { delete, create, status: Some(status) }
}

fn doomed(sandbox: &SandboxView, why: Why) -> Doomed {
    Doomed {
        name: sandbox.name.clone(),
        uid: sandbox.uid.clone(),
        resource_version: sandbox.resource_version.clone(),
        why,
    }
}

impl Doomed {
    /// The delete's preconditions: exactly the object planned on, at the version planned on
    /// (a 409 leaves it alone; the next pass plans again).
    pub fn preconditions(&self) -> Preconditions {
        Preconditions {
            uid: Some(self.uid.clone()),
            resource_version: Some(self.resource_version.clone()).filter(|v| !v.is_empty()),
        }
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The Sandbox a pool creates: named `<pool>-<random>` by the server, controlled by the pool,
/// labelled as its member (on the object and on the pod template) with the template's hashes.
pub fn desired_member(pool: &Pool, template: &Template, apis: &Apis) -> Value {
    let template_ref_hash = name_hash(&template.name);
    let blueprint_hash = template.blueprint_hash();
    let labels = json!({
        WARM_POOL_LABEL: name_hash(&pool.name),
        TEMPLATE_REF_HASH_LABEL: template_ref_hash,
        LAUNCH_TYPE_LABEL: LAUNCH_WARM,
        TEMPLATE_HASH_LABEL: blueprint_hash,
    });
    let mut spec = template.sandbox_spec();
    let pod_labels = pod_template_labels(&mut spec);
    pod_labels.insert(WARM_POOL_LABEL.into(), json!(name_hash(&pool.name)));
    pod_labels.insert(TEMPLATE_REF_HASH_LABEL.into(), json!(template_ref_hash));
    pod_labels.insert(TEMPLATE_HASH_LABEL.into(), json!(blueprint_hash));
    let owner = controller_reference(&apis.version.api_version(), WARM_POOL_KIND, &pool.name, &pool.uid);
    json!({
        "apiVersion": apis.sandboxes.api_version,
        "kind": apis.sandboxes.kind,
        "metadata": {
            "generateName": format!("{}-", pool.name),
            "namespace": pool.namespace,
            "labels": labels,
            "annotations": {TEMPLATE_REF_ANNOTATION: template.name},
            "ownerReferences": [owner],
        },
        "spec": spec,
    })
}
