//! The API server through kube-rs: object semantics, errors, selectors, pagination, patches,
//! discovery and authentication, with no controllers running (so nothing else writes).

use std::collections::BTreeMap;

use embedded_cluster::{ClusterConfig, EmbeddedCluster, VIEWER_USER};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Discovery, ResourceExt};
use serde_json::json;

async fn cluster() -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() })
        .await
        .expect("start the embedded cluster")
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "demo", "tier": name}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "env": [{"name": "A", "value": "1"}]}]}
    }))
    .expect("pod")
}

fn api_error(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn create_get_and_server_fields() {
    let c = cluster().await;
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    let created = pods.create(&PostParams::default(), &pod("a")).await.expect("create");
    assert!(created.uid().is_some_and(|u| u.len() == 36));
    assert!(created.creation_timestamp().is_some());
    let rv: u64 = created.resource_version().and_then(|r| r.parse().ok()).expect("numeric rv");
    assert!(rv > 0);
    let got = pods.get("a").await.expect("get");
    assert_eq!(got.uid(), created.uid());
    assert_eq!(got.status.and_then(|s| s.phase).as_deref(), Some("Pending"));

    let dup = api_error(pods.create(&PostParams::default(), &pod("a")).await.expect_err("duplicate"));
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    let missing = api_error(pods.get("nope").await.expect_err("missing"));
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "pods \"nope\" not found");
}

#[tokio::test]
async fn generate_name_and_unknown_namespace() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("x");
    p.metadata.name = None;
    p.metadata.generate_name = Some("worker-".into());
    let created = pods.create(&PostParams::default(), &p).await.expect("create");
    let name = created.name_any();
    assert!(name.starts_with("worker-") && name.len() == "worker-".len() + 5, "{name}");

    let elsewhere: Api<Pod> = Api::namespaced(client, "nowhere");
    let err = api_error(elsewhere.create(&PostParams::default(), &pod("a")).await.expect_err("no namespace"));
    assert_eq!(err.code, 404);
    assert_eq!(err.message, "namespaces \"nowhere\" not found");
}

#[tokio::test]
async fn stale_updates_conflict_and_generation_tracks_spec() {
    let c = cluster().await;
    let jobs: Api<Job> = Api::namespaced(c.client().await.expect("client"), "default");
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .expect("job");
    let created = jobs.create(&PostParams::default(), &job).await.expect("create");
    assert_eq!(created.metadata.generation, Some(1));

    let mut changed = created.clone();
    changed.spec.as_mut().expect("spec").parallelism = Some(2);
    let updated = jobs.replace("j", &PostParams::default(), &changed).await.expect("replace");
    assert_eq!(updated.metadata.generation, Some(2));

    let err = api_error(jobs.replace("j", &PostParams::default(), &changed).await.expect_err("stale"));
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));

    let labelled = jobs
        .patch("j", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})))
        .await
        .expect("label patch");
    assert_eq!(labelled.metadata.generation, Some(2), "metadata changes keep the generation");

    let status = jobs
        .patch_status(
            "j",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"active": 1}, "spec": {"parallelism": 9}})),
        )
        .await
        .expect("status patch");
    assert_eq!(status.status.and_then(|s| s.active), Some(1));
    assert_eq!(status.spec.and_then(|s| s.parallelism), Some(2), "a status write cannot change spec");
    let main = jobs
        .patch("j", &PatchParams::default(), &Patch::Merge(json!({"status": {"active": 5}})))
        .await
        .expect("main patch");
    assert_eq!(main.status.and_then(|s| s.active), Some(1), "a main write cannot change status");
}

#[tokio::test]
async fn selectors_and_pagination() {
    let c = cluster().await;
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    for name in ["a", "b", "c", "d", "e"] {
        pods.create(&PostParams::default(), &pod(name)).await.expect("create");
    }
    let names = |l: kube::core::ObjectList<Pod>| l.items.iter().map(|p| p.name_any()).collect::<Vec<_>>();
    assert_eq!(names(pods.list(&ListParams::default().labels("tier in (a,c)")).await.expect("in")), ["a", "c"]);
    assert_eq!(
        names(pods.list(&ListParams::default().labels("tier notin (a,c),app=demo")).await.expect("notin")),
        ["b", "d", "e"]
    );
    assert_eq!(names(pods.list(&ListParams::default().labels("!tier")).await.expect("!exists")).len(), 0);
    assert_eq!(names(pods.list(&ListParams::default().labels("tier!=a")).await.expect("!=")).len(), 4);
    assert_eq!(names(pods.list(&ListParams::default().fields("metadata.name=d")).await.expect("field")), ["d"]);
    assert_eq!(
        names(pods.list(&ListParams::default().fields("status.phase=Pending,metadata.name!=a")).await.expect("phase"))
            .len(),
        4
    );
    let bad = api_error(pods.list(&ListParams::default().fields("spec.bogus=x")).await.expect_err("unsupported field"));
    assert_eq!(bad.code, 400);

    let first = pods.list(&ListParams::default().limit(2)).await.expect("page 1");
    assert_eq!(names(first.clone()), ["a", "b"]);
    let token = first.metadata.continue_.clone().expect("continue token");
    let second = pods.list(&ListParams::default().limit(2).continue_token(&token)).await.expect("page 2");
    assert_eq!(names(second.clone()), ["c", "d"]);
    let third = pods
        .list(&ListParams::default().limit(2).continue_token(second.metadata.continue_.as_deref().expect("token")))
        .await
        .expect("page 3");
    assert_eq!(names(third.clone()), ["e"]);
    assert!(third.metadata.continue_.as_deref().unwrap_or_default().is_empty());
}

#[tokio::test]
async fn strategic_merge_merges_containers_by_name() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "a", "image": "one", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "two"}]}}}
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &job).await.expect("create");
    let patched = jobs
        .patch("j", &PatchParams::default(), &Patch::Strategic(json!({"metadata": {"labels": {"k": "v"}}})))
        .await
        .expect("strategic");
    assert_eq!(patched.labels().get("k").map(String::as_str), Some("v"));
    let containers = patched.spec.and_then(|s| s.template.spec).map(|s| s.containers).unwrap_or_default();
    assert_eq!(containers.len(), 2);

    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}})).expect("secret");
    secrets.create(&PostParams::default(), &s).await.expect("secret");
    let read = secrets.get("s").await.expect("get secret");
    assert_eq!(read.data.and_then(|d| d.get("k").map(|b| b.0.clone())), Some(b"v".to_vec()));
    assert_eq!(read.type_.as_deref(), Some("Opaque"));
}

#[tokio::test]
async fn discovery_finds_every_resource() {
    let c = cluster().await;
    let discovery = Discovery::new(c.client().await.expect("client")).run().await.expect("discovery");
    let mut found = BTreeMap::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            found.insert(
                format!("{}/{}", ar.api_version, ar.plural),
                caps.subresources.iter().map(|(s, _)| s.plural.clone()).collect::<Vec<_>>(),
            );
        }
    }
    for key in ["v1/pods", "v1/secrets", "v1/namespaces", "batch/v1/jobs", "agents.x-k8s.io/v1beta1/sandboxes"] {
        assert!(found.contains_key(key), "{key} missing from {found:?}");
    }
    assert!(found["v1/pods"].iter().any(|s| s == "status"));
}

#[tokio::test]
async fn authentication_and_authorization() {
    let c = cluster().await;
    let http = reqwest_like_get(&c, None).await;
    assert_eq!(http, 401);
    let viewer = c.client_as(VIEWER_USER).await.expect("viewer");
    let ns: Api<Namespace> = Api::all(viewer);
    assert!(ns.list(&ListParams::default()).await.expect("viewer can list").items.len() >= 3);
    let err = api_error(
        ns.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("ns"))
            .await
            .expect_err("viewer cannot write"),
    );
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        err.message,
        "namespaces is forbidden: User \"viewer\" cannot create resource \"namespaces\" in API group \"\" at the cluster scope"
    );

    let viewer = c.client_as(VIEWER_USER).await.expect("viewer");
    let pods: Api<Pod> = Api::namespaced(viewer.clone(), "default");
    let err = api_error(pods.delete("a", &DeleteParams::default()).await.expect_err("viewer cannot delete"));
    assert_eq!(
        err.message,
        "pods \"a\" is forbidden: User \"viewer\" cannot delete resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    let details = err.details.expect("details");
    assert_eq!((details.name.as_str(), details.group.as_str(), details.kind.as_str()), ("a", "", "pods"));

    let req = http::Request::get("/embedded-cluster/requests").body(Vec::new()).expect("request");
    let err = api_error(viewer.request_text(req).await.expect_err("admin endpoints are for the admin"));
    assert_eq!((err.code, err.message.as_str()), (403, "the embedded cluster's admin endpoints need the admin token"));
}

/// A request with no token, through a client built on the cluster's CA only.
async fn reqwest_like_get(c: &EmbeddedCluster, token: Option<&str>) -> u16 {
    let mut yaml = c.kubeconfig(embedded_cluster::ADMIN_USER).expect("kubeconfig");
    let admin_token = c.token(embedded_cluster::ADMIN_USER).expect("token").to_string();
    yaml = yaml.replace(&admin_token, token.unwrap_or("not-a-token"));
    let client = embedded_cluster::tls::client_from_kubeconfig(&yaml).await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    match pods.list(&ListParams::default()).await {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("unexpected {e:?}"),
    }
}

#[tokio::test]
async fn sandbox_versions_share_one_object() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let beta =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox"), "sandboxes");
    let alpha = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("agents.x-k8s.io", "v1alpha1", "Sandbox"),
        "sandboxes",
    );
    let betas: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &beta);
    let alphas: Api<DynamicObject> = Api::namespaced_with(client, "default", &alpha);
    let sb: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1alpha1", "kind": "Sandbox", "metadata": {"name": "s"},
        "spec": {"replicas": 0, "podTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .expect("sandbox");
    alphas.create(&PostParams::default(), &sb).await.expect("create v1alpha1");
    let as_beta = betas.get("s").await.expect("read as v1beta1");
    assert_eq!(as_beta.data["spec"]["operatingMode"], "Suspended");
    assert!(as_beta.data["spec"].get("replicas").is_none());

    let err = api_error(
        betas
            .patch("s", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"operatingMode": "Running"}})))
            .await
            .expect_err("415"),
    );
    assert_eq!(err.code, 415);
    betas
        .patch("s", &PatchParams::default(), &Patch::Merge(json!({"spec": {"operatingMode": "Running"}})))
        .await
        .expect("merge patch");
    assert_eq!(alphas.get("s").await.expect("read as v1alpha1").data["spec"]["replicas"], 1);
}

#[tokio::test]
async fn a_patch_naming_another_uid_changes_nothing() {
    let c = cluster().await;
    let secrets: Api<Secret> = Api::namespaced(c.client().await.expect("client"), "default");
    let created = secrets
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "s"}})).expect("secret"))
        .await
        .expect("create");
    let uid = created.uid().expect("uid");
    let stale = json!({"metadata": {"uid": "4b8f1a52-0000-4000-8000-000000000000", "labels": {"a": "b"}}});
    let err = api_error(secrets.patch("s", &PatchParams::default(), &Patch::Merge(stale)).await.expect_err("422"));
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(err.message.contains("metadata.uid: Invalid value: \"4b8f1a52"), "{}", err.message);
    assert!(err.message.ends_with("field is immutable"), "{}", err.message);
    assert!(secrets.get("s").await.expect("get").labels().get("a").is_none(), "the patch changed nothing");
    let same = json!({"metadata": {"uid": uid, "labels": {"a": "b"}}});
    let patched = secrets.patch("s", &PatchParams::default(), &Patch::Merge(same)).await.expect("the same uid patches");
    assert_eq!(patched.labels().get("a").map(String::as_str), Some("b"));
}

#[tokio::test]
async fn delete_returns_status_and_then_404() {
    let c = cluster().await;
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    pods.create(&PostParams::default(), &pod("a")).await.expect("create");
    let res = pods.delete("a", &DeleteParams::default()).await.expect("delete");
    assert!(res.is_right(), "an unbound pod is removed at once");
    assert_eq!(api_error(pods.get("a").await.expect_err("gone")).code, 404);
    assert_eq!(api_error(pods.delete("a", &DeleteParams::default()).await.expect_err("gone")).code, 404);
}

#[tokio::test]
async fn validation_and_request_errors_match_the_real_server() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    let mut bad = pod("Bad_Name");
    bad.spec.as_mut().expect("spec").containers[0].image = None;
    let err = api_error(pods.create(&PostParams::default(), &bad).await.expect_err("invalid"));
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    let causes = err.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
    assert!(causes.iter().any(|c| c.field == "metadata.name" && c.reason == "FieldValueInvalid"), "{causes:?}");
    assert!(
        causes.iter().any(|c| c.field == "spec.containers[0].image" && c.reason == "FieldValueRequired"),
        "{causes:?}"
    );

    pods.create(&PostParams::default(), &pod("a")).await.expect("create");
    let err = api_error(
        pods.patch("a", &PatchParams::default(), &Patch::Merge(json!({"spec": {"restartPolicy": "Never"}})))
            .await
            .expect_err("pod spec is immutable"),
    );
    assert_eq!(err.code, 422);
    assert!(err.message.contains("pod updates may not change fields"), "{}", err.message);

    let long_label = "x".repeat(64);
    let err = api_error(
        pods.patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"k": long_label}}})))
            .await
            .expect_err("label values are at most 63 characters"),
    );
    assert_eq!(err.code, 422);

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let err = api_error(
        namespaces.delete_collection(&DeleteParams::default(), &ListParams::default()).await.expect_err("405"),
    );
    assert_eq!((err.code, err.reason.as_str()), (405, "MethodNotAllowed"));

    let req = http::Request::post("/api/v1/namespaces/default/pods")
        .header("content-type", "application/json")
        .body(b"{not json".to_vec())
        .expect("request");
    let err = api_error(client.request_text(req).await.expect_err("400"));
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));
}

#[tokio::test]
async fn a_sandbox_without_a_pod_template_fails_as_on_kube_apiserver() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let no_template = |version: &str| {
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": format!("agents.x-k8s.io/{version}"), "kind": "Sandbox",
            "metadata": {"name": "bare"}, "spec": {}
        }))
        .expect("sandbox")
    };
    let sandboxes = |version: &str| -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk("agents.x-k8s.io", version, "Sandbox");
        Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&gvk, "sandboxes"))
    };
    // v1beta1 carries a CEL rule, so the server also says the rules were not checked.
    let err =
        api_error(sandboxes("v1beta1").create(&PostParams::default(), &no_template("v1beta1")).await.expect_err("422"));
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "Sandbox.agents.x-k8s.io \"bare\" is invalid: [spec.podTemplate: Required value, <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
    let causes = err.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
    let fields: Vec<(&str, &str)> = causes.iter().map(|c| (c.field.as_str(), c.reason.as_str())).collect();
    assert_eq!(fields, [("spec.podTemplate", "FieldValueRequired"), ("<nil>", "FieldValueInvalid")]);
    // v1alpha1 has no rule: one cause, no brackets.
    let err = api_error(
        sandboxes("v1alpha1").create(&PostParams::default(), &no_template("v1alpha1")).await.expect_err("422"),
    );
    assert_eq!(err.message, "Sandbox.agents.x-k8s.io \"bare\" is invalid: spec.podTemplate: Required value");
}

#[tokio::test]
async fn bodies_in_an_unknown_media_type_are_415_as_on_kube_apiserver() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let post = |path: &str, content_type: &str, body: &[u8]| {
        http::Request::post(path).header("content-type", content_type).body(body.to_vec()).expect("request")
    };
    let req = post("/api/v1/namespaces/default/configmaps", "text/plain", b"name: x");
    let err = api_error(client.request_text(req).await.expect_err("415"));
    assert_eq!((err.code, err.reason.as_str()), (415, "UnsupportedMediaType"));
    assert!(
        err.message.ends_with(
            "accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        ),
        "{}",
        err.message
    );
    // Custom resources take no protobuf.
    let req = post(
        "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes",
        "application/vnd.kubernetes.protobuf",
        b"k8s\0",
    );
    let err = api_error(client.request_text(req).await.expect_err("415"));
    assert_eq!(err.code, 415);
    assert!(
        err.message.ends_with("accepted media types include: application/json, application/yaml"),
        "{}",
        err.message
    );
    // YAML is a body type the server takes.
    let req = post(
        "/api/v1/namespaces/default/configmaps",
        "application/yaml",
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n",
    );
    client.request_text(req).await.expect("a YAML body is accepted");
}

#[tokio::test]
async fn include_object_is_read_only_for_a_table() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let get = |accept: &'static str| {
        http::Request::get("/api/v1/namespaces/default?includeObject=Sometimes")
            .header("accept", accept)
            .body(Vec::new())
            .expect("request")
    };
    let plain = client.request_text(get("application/json")).await.expect("plain JSON ignores Table options");
    assert!(plain.contains("\"kind\":\"Namespace\""), "{plain}");
    let err = api_error(
        client.request_text(get("application/json;as=Table;v=v1;g=meta.k8s.io")).await.expect_err("bad option"),
    );
    assert_eq!(err.code, 400);
    let table = client
        .request_text(
            http::Request::get("/api/v1/namespaces/default?includeObject=None")
                .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("table");
    let table: serde_json::Value = serde_json::from_str(&table).expect("json");
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"][0]["cells"][0], "default");
    assert!(table["rows"][0].get("object").is_none(), "includeObject=None leaves the object out");
}

/// A pod within its grace period stays until its kubelet deletes it with grace period 0, an
/// update in between (the kubelet's status) included: upstream removes an object on update
/// only once no finalizer and no grace period is left. A finalizer outlasts even that delete.
#[tokio::test]
async fn a_pod_in_its_grace_period_outlives_updates_until_its_kubelet_deletes_it() {
    let c = cluster().await;
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    let mut bound = pod("graceful");
    bound.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    bound.spec.as_mut().expect("spec").node_name = Some("node-1".into());
    pods.create(&PostParams::default(), &bound).await.expect("create");
    let running = json!({"status": {"phase": "Running"}});
    pods.patch_status("graceful", &PatchParams::default(), &Patch::Merge(&running)).await.expect("running");

    pods.delete("graceful", &DeleteParams::default()).await.expect("delete");
    let terminating = pods.get("graceful").await.expect("still there");
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    pods.patch_status("graceful", &PatchParams::default(), &Patch::Merge(&ready)).await.expect("status");
    let unhold = json!({"metadata": {"finalizers": null}});
    pods.patch("graceful", &PatchParams::default(), &Patch::Merge(&unhold)).await.expect("finalizer removed");
    assert!(pods.get_opt("graceful").await.expect("get").is_some(), "within its grace period, updates keep it");

    let mut held = pod("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    held.spec.as_mut().expect("spec").node_name = Some("node-1".into());
    pods.create(&PostParams::default(), &held).await.expect("create");
    pods.patch_status("held", &PatchParams::default(), &Patch::Merge(&running)).await.expect("running");
    pods.delete("held", &DeleteParams::default()).await.expect("graceful delete");
    let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    pods.delete("held", &now).await.expect("the kubelet's delete");
    let kept = pods.get("held").await.expect("the finalizer holds it");
    assert_eq!(kept.metadata.deletion_grace_period_seconds, Some(0), "the grace period is cut to nothing");
    pods.patch("held", &PatchParams::default(), &Patch::Merge(&unhold)).await.expect("finalizer removed");
    assert!(pods.get_opt("held").await.expect("get").is_none(), "no finalizer and no grace left: gone");

    pods.delete("graceful", &now).await.expect("the kubelet's delete");
    assert!(pods.get_opt("graceful").await.expect("get").is_none());
}
