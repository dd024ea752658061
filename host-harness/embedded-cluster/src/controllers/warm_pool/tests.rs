//! The warm pool's decisions, without a cluster.

use contract::k8s::agent_sandbox::{
    LAUNCH_TYPE_LABEL, TEMPLATE_REF_ANNOTATION, TEMPLATE_REF_HASH_LABEL, WARM_POOL_LABEL,
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

use super::model::{Pool, PoolStatus};
use super::plan::{MAX_BATCH, Observed, Why, desired_member, plan};
use crate::clock::parse_time;
use crate::controllers::extensions::blueprint::Template;
use crate::controllers::extensions::discovery::{Apis, ExtensionsVersion};
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::extensions::{TEMPLATE_HASH_LABEL, controller_reference, name_hash};
use crate::controllers::sandbox::model::{Condition, SandboxStatus, SandboxVersion};

pub(crate) fn apis() -> Apis {
    let ext = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("extensions.agents.x-k8s.io", "v1beta1", kind), plural)
    };
    Apis {
        version: ExtensionsVersion::V1beta1,
        claims: ext("SandboxClaim", "sandboxclaims"),
        templates: ext("SandboxTemplate", "sandboxtemplates"),
        pools: ext("SandboxWarmPool", "sandboxwarmpools"),
        sandbox_version: SandboxVersion::V1beta1,
        sandboxes: ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox"),
            "sandboxes",
        ),
    }
}

pub(crate) fn template(image: &str) -> Template {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
        "metadata": {"name": "tmpl", "namespace": "ns", "uid": "tu"},
        "spec": {"podTemplate": {"metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "main", "image": image}]}}}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Template::from_dynamic(&obj).unwrap_or_else(|e| panic!("{e}"))
}

fn pool(replicas: usize) -> Pool {
    Pool {
        name: "pool".into(),
        namespace: "ns".into(),
        uid: "pu".into(),
        generation: 2,
        replicas,
        template: "tmpl".into(),
        ..Pool::default()
    }
}

/// A pool member created at second `age_rank` (higher: newer), Ready or not.
pub(crate) fn member(name: &str, pool_uid: &str, second: u32, ready: bool, blueprint: &str) -> SandboxView {
    let condition = Condition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        reason: if ready { "DependenciesReady" } else { "DependenciesNotReady" }.into(),
        ..Condition::default()
    };
    SandboxView {
        name: name.into(),
        namespace: "ns".into(),
        uid: format!("{name}-uid"),
        resource_version: "5".into(),
        created: parse_time(&format!("2026-01-01T00:00:{second:02}Z")),
        labels: [
            (WARM_POOL_LABEL.to_string(), name_hash("pool")),
            (TEMPLATE_REF_HASH_LABEL.to_string(), name_hash("tmpl")),
            (TEMPLATE_HASH_LABEL.to_string(), blueprint.to_string()),
        ]
        .into(),
        controller: Some(controller_reference(
            "extensions.agents.x-k8s.io/v1beta1",
            "SandboxWarmPool",
            "pool",
            pool_uid,
        )),
        status: SandboxStatus {
            conditions: vec![condition],
            pod_ips: ready.then(|| vec!["10.244.0.9".to_string()]),
            ..SandboxStatus::default()
        },
        ..SandboxView::default()
    }
}

fn observed(pool: Pool, template: Option<Template>, sandboxes: Vec<SandboxView>) -> Observed {
    Observed { pool, template, sandboxes }
}

#[test]
fn an_empty_pool_creates_its_replicas_and_reports_the_selector() {
    let decided = plan(&observed(pool(3), Some(template("busybox")), Vec::new()));
    assert_eq!(decided.create, 3);
    assert!(decided.delete.is_empty());
    let status = decided.status.unwrap_or_else(|| panic!("status"));
    assert_eq!(
        status,
        PoolStatus {
            replicas: Some(0),
            ready_replicas: Some(0),
            selector: Some(format!("{WARM_POOL_LABEL}={}", name_hash("pool"))),
            observed_generation: Some(2),
        }
    );
}

#[test]
fn only_members_the_pool_controls_count_and_terminating_ones_still_take_room() {
    let t = template("busybox");
    let hash = t.blueprint_hash();
    let mut terminating = member("gone", "pu", 1, false, &hash);
    terminating.deleting = true;
    let sandboxes = vec![
        member("a", "pu", 1, true, &hash),
        member("b", "pu", 2, false, &hash),
        member("impostor", "another-pool-uid", 3, true, &hash),
        terminating,
    ];
    let decided = plan(&observed(pool(4), Some(t), sandboxes));
    assert_eq!(decided.create, 1, "4 wanted, 2 members and 1 terminating");
    let status = decided.status.unwrap_or_else(|| panic!("status"));
    assert_eq!((status.replicas, status.ready_replicas), (Some(2), Some(1)));
}

#[test]
fn a_missing_template_creates_nothing_but_still_reports() {
    let decided = plan(&observed(pool(2), None, Vec::new()));
    assert_eq!(decided.create, 0);
    assert!(!decided.acts());
    assert!(decided.status.is_some());
}

#[test]
fn scaling_down_deletes_not_ready_members_first_then_the_newest() {
    let t = template("busybox");
    let hash = t.blueprint_hash();
    let sandboxes = vec![
        member("old-ready", "pu", 1, true, &hash),
        member("new-ready", "pu", 5, true, &hash),
        member("mid-ready", "pu", 3, true, &hash),
        member("old-starting", "pu", 2, false, &hash),
    ];
    let decided = plan(&observed(pool(1), Some(t), sandboxes));
    let names: Vec<&str> = decided.delete.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["old-starting", "new-ready", "mid-ready"]);
    assert!(decided.delete.iter().all(|d| d.why == Why::Excess && d.uid.ends_with("-uid")));
    assert_eq!(decided.create, 0);
}

#[test]
fn deletes_are_locked_on_the_members_planned_resource_version() {
    // A claim adopting a member between the pool's list and its delete moves the member's
    // resourceVersion: the delete must then be refused (409), not take the claim's Sandbox.
    let t = template("busybox");
    let hash = t.blueprint_hash();
    let mut excess = member("excess", "pu", 5, true, &hash);
    excess.resource_version = "41".into();
    let mut stale = member("stale", "pu", 1, true, "oldhash");
    stale.resource_version = "42".into();
    let mut recreate = pool(0);
    recreate.recreate = true;
    let decided = plan(&observed(recreate, Some(t), vec![excess, stale]));
    let locks: Vec<_> = decided
        .delete
        .iter()
        .map(|d| {
            let p = d.preconditions();
            (d.name.as_str(), p.uid, p.resource_version)
        })
        .collect();
    assert_eq!(
        locks,
        [
            ("stale", Some("stale-uid".to_string()), Some("42".to_string())),
            ("excess", Some("excess-uid".to_string()), Some("41".to_string())),
        ]
    );
}

#[test]
fn recreate_replaces_members_of_an_older_template_and_on_replenish_keeps_them() {
    let old = template("busybox:old");
    let new = template("busybox:new");
    let sandboxes = vec![
        member("stale", "pu", 1, true, &old.blueprint_hash()),
        member("fresh", "pu", 2, true, &new.blueprint_hash()),
    ];
    let mut recreate = pool(2);
    recreate.recreate = true;
    let decided = plan(&observed(recreate, Some(new.clone()), sandboxes.clone()));
    assert_eq!(decided.delete.iter().map(|d| (d.name.as_str(), d.why)).collect::<Vec<_>>(), [("stale", Why::Stale)]);
    assert_eq!(decided.create, 0, "the replacement follows once the stale member is gone");
    assert_eq!(decided.status.and_then(|s| s.replicas), Some(1));

    let decided = plan(&observed(pool(2), Some(new), sandboxes));
    assert!(!decided.acts(), "OnReplenish leaves older members alone");
}

#[test]
fn a_pool_being_deleted_does_nothing() {
    let mut deleting = pool(3);
    deleting.deleting = true;
    assert_eq!(plan(&observed(deleting, Some(template("busybox")), Vec::new())), Default::default());
}

#[test]
fn one_pass_creates_at_most_a_batch() {
    assert_eq!(plan(&observed(pool(MAX_BATCH + 50), Some(template("busybox")), Vec::new())).create, MAX_BATCH);
}

#[test]
fn members_are_generated_controlled_and_labelled_from_the_template() {
    let t = template("busybox");
    let member = desired_member(&pool(1), &t, &apis());
    assert_eq!(member["apiVersion"], "agents.x-k8s.io/v1beta1");
    assert_eq!(member["kind"], "Sandbox");
    let meta = &member["metadata"];
    assert_eq!(meta["generateName"], "pool-");
    assert!(meta.get("name").is_none());
    assert_eq!(meta["labels"][WARM_POOL_LABEL], name_hash("pool"));
    assert_eq!(meta["labels"][TEMPLATE_REF_HASH_LABEL], name_hash("tmpl"));
    assert_eq!(meta["labels"][LAUNCH_TYPE_LABEL], "warm");
    assert_eq!(meta["labels"][TEMPLATE_HASH_LABEL], t.blueprint_hash());
    assert_eq!(meta["annotations"][TEMPLATE_REF_ANNOTATION], "tmpl");
    assert_eq!(
        meta["ownerReferences"],
        json!([{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool", "name": "pool",
            "uid": "pu", "controller": true, "blockOwnerDeletion": true}])
    );
    let pod_labels = &member["spec"]["podTemplate"]["metadata"]["labels"];
    assert_eq!(pod_labels["app"], "agent", "the template's own labels stay");
    assert_eq!(pod_labels[WARM_POOL_LABEL], name_hash("pool"));
    assert_eq!(pod_labels[TEMPLATE_REF_HASH_LABEL], name_hash("tmpl"));
    assert_eq!(member["spec"]["podTemplate"]["spec"]["containers"][0]["image"], "busybox");
    assert_eq!(member["spec"]["podTemplate"]["spec"]["automountServiceAccountToken"], false);
}
