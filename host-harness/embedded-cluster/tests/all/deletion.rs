//! Deletion semantics with the garbage collector running: Background, Foreground and Orphan
//! propagation, finalizers, preconditions, graceful pod deletion and namespace teardown.

use crate::common::eventually;
use embedded_cluster::{ClusterConfig, ControllerKind, EmbeddedCluster};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use kube::{Client, ResourceExt};
use serde_json::json;

async fn cluster() -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig { controllers: vec![ControllerKind::Gc], ..Default::default() })
        .await
        .expect("start")
}

async fn owner_and_dependent(client: &Client, blocking: bool) -> (ConfigMap, Secret) {
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let owner = owners
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"))
        .await
        .expect("owner");
    let dep = secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "dep", "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.uid().expect("uid"),
                "controller": true, "blockOwnerDeletion": blocking}]}, "stringData": {"k": "v"}}))
            .expect("secret"),
        )
        .await
        .expect("dependent");
    (owner, dep)
}

#[tokio::test]
async fn background_deletes_owner_now_and_dependents_after() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    owner_and_dependent(&client, false).await;
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let res = owners.delete("owner", &DeleteParams::background()).await.expect("delete");
    assert!(res.is_right(), "background deletion removes the owner at once");
    assert!(owners.get_opt("owner").await.expect("get").is_none());
    eventually("the dependent to be collected", || async { secrets.get_opt("dep").await.expect("get").is_none() })
        .await;
}

#[tokio::test]
async fn foreground_keeps_owner_until_blocking_dependents_are_gone() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    owner_and_dependent(&client, true).await;
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let res = owners.delete("owner", &DeleteParams::foreground()).await.expect("delete");
    let terminating = res.left().expect("the owner stays while dependents exist");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert!(terminating.finalizers().iter().any(|f| f == "foregroundDeletion"));
    eventually("dependent and then owner gone", || async {
        secrets.get_opt("dep").await.expect("get").is_none() && owners.get_opt("owner").await.expect("get").is_none()
    })
    .await;
}

#[tokio::test]
async fn the_first_deletion_timestamp_bumps_a_custom_resources_generation() {
    let c = cluster().await;
    let sandboxes: Api<DynamicObject> =
        Api::namespaced_with(c.client().await.expect("client"), "default", &crate::common::sandbox_resource("v1beta1"));
    let body = json!({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "a", "image": "busybox"}]}}}});
    let created = sandboxes
        .create(&PostParams::default(), &serde_json::from_value(body).expect("sandbox"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    let res = sandboxes.delete("held", &DeleteParams::foreground()).await.expect("delete");
    let terminating = res.left().expect("the finalizer holds it");
    // kube-apiserver sets deletionTimestamp and the finalizer as a spec-level change.
    assert_eq!(terminating.metadata.generation, Some(2));
    let again = sandboxes.delete("held", &DeleteParams::foreground()).await.expect("delete again");
    assert_eq!(again.left().and_then(|o| o.metadata.generation), Some(2), "only the first deletion bumps it");
    sandboxes
        .patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .expect("release");
}

#[tokio::test]
async fn orphan_strips_owner_references() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    owner_and_dependent(&client, true).await;
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    owners.delete("owner", &DeleteParams::orphan()).await.expect("delete");
    eventually("the owner gone and the dependent orphaned", || async {
        owners.get_opt("owner").await.expect("get").is_none()
            && secrets.get_opt("dep").await.expect("get").is_some_and(|s| s.owner_references().is_empty())
    })
    .await;
}

#[tokio::test]
async fn finalizers_hold_objects_until_removed() {
    let c = cluster().await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}})).expect("cm"),
    )
    .await
    .expect("create");
    cms.delete("f", &DeleteParams::default()).await.expect("delete");
    let held = cms.get("f").await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    let err = cms
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}})),
        )
        .await
        .expect_err("no new finalizers while deleting");
    assert!(matches!(err, kube::Error::Api(s) if s.code == 422));
    cms.patch("f", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .expect("release");
    assert!(cms.get_opt("f").await.expect("get").is_none());
}

#[tokio::test]
async fn preconditions_guard_deletes() {
    let c = cluster().await;
    let cms: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let created = cms
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "p"}})).expect("cm"))
        .await
        .expect("create");
    let wrong = DeleteParams {
        preconditions: Some(Preconditions { uid: Some("other".into()), resource_version: None }),
        ..Default::default()
    };
    let err = cms.delete("p", &wrong).await.expect_err("uid mismatch");
    let uid = created.uid().unwrap_or_default();
    let kube::Error::Api(status) = err else { panic!("not an API error: {err}") };
    assert_eq!(status.code, 409);
    // kube-apiserver's early check in `rest.BeforeDelete` words it so, with the Kind in `details`.
    assert_eq!(
        status.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"p\": the UID in the precondition (other) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    let stale = DeleteParams {
        preconditions: Some(Preconditions { uid: None, resource_version: Some("1".into()) }),
        ..Default::default()
    };
    let err = cms.delete("p", &stale).await.expect_err("stale resourceVersion");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.message.contains("the ResourceVersion in the precondition (1) does not match")),
        "{err}"
    );
    let right = DeleteParams {
        preconditions: Some(Preconditions { uid: created.uid(), resource_version: created.resource_version() }),
        ..Default::default()
    };
    cms.delete("p", &right).await.expect("matching preconditions");
}

#[tokio::test]
async fn bound_pods_delete_gracefully() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "g"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .expect("pod"),
    )
    .await
    .expect("create");
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        "g",
        &PostParams::default(),
        &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "g"}, "target": {"kind": "Node", "name": "n1"}}),
    )
    .await
    .expect("bind");
    let bound = pods.get("g").await.expect("get");
    assert_eq!(bound.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("n1"));
    let res = pods.delete("g", &DeleteParams::default()).await.expect("delete");
    let terminating = res.left().expect("a bound pod terminates gracefully");
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    let res = pods
        .delete(
            "g",
            &DeleteParams {
                grace_period_seconds: Some(0),
                propagation_policy: Some(PropagationPolicy::Background),
                ..Default::default()
            },
        )
        .await
        .expect("force");
    assert!(res.is_right(), "grace period 0 removes it");
}

#[tokio::test]
async fn namespace_deletion_removes_contents() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "tmp"}})).expect("ns"))
        .await
        .expect("ns");
    let cms: Api<ConfigMap> = Api::namespaced(client, "tmp");
    cms.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("cm"))
        .await
        .expect("cm");
    namespaces.delete("tmp", &DeleteParams::default()).await.expect("delete");
    assert!(namespaces.get_opt("tmp").await.expect("get").is_none());
    assert!(cms.get_opt("x").await.expect("get").is_none());
}

#[tokio::test]
async fn the_collector_acts_on_the_owners_deletion_event_not_on_a_timer() {
    let c =
        EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() }).await.expect("start");
    let client = c.client().await.expect("client");
    // The collector alone, with its periodic resync out of reach: only events can drive it.
    let gc =
        tokio::spawn(embedded_cluster::controllers::gc::run_with(client.clone(), std::time::Duration::from_secs(3600)));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for round in 0..3 {
        let (owner, dep) = owner_and_dependent(&client, false).await;
        assert_eq!(dep.owner_references()[0].uid, owner.uid().unwrap_or_default(), "round {round}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        owners.delete("owner", &DeleteParams::background()).await.expect("delete the owner");
        eventually("the dependent to be collected on the owner's DELETED event", || async {
            secrets.get_opt("dep").await.expect("get").is_none()
        })
        .await;
    }
    gc.abort();
}
