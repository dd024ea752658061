//! Fault injection and the request log, from Rust and over the admin endpoint.

use std::time::{Duration, Instant};

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::request_log::{RequestKind, RequestLog};
use embedded_cluster::{ADMIN_USER, ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Discovery;
use serde_json::json;

async fn cluster() -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() }).await.expect("start")
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).expect("cm")
}

/// A rule that fails the next match with a 500.
fn fail_once(matches: Match) -> Rule {
    Rule { matches, action: internal_error(), after: 0, times: Some(1), probability: None }
}

fn on(verb: &str, name: Option<&str>) -> Match {
    Match {
        verb: Some(verb.into()),
        resource: Some("configmaps".into()),
        name: name.map(String::from),
        ..Default::default()
    }
}

#[tokio::test]
async fn errors_fire_for_the_next_k_matches() {
    let c = cluster().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    c.faults().add(Rule {
        matches: on("create", Some("flaky-*")),
        action: Action::Error { code: 500, reason: "InternalError".into(), message: None, retry_after_seconds: None },
        after: 0,
        times: Some(2),
        probability: None,
    });
    for _ in 0..2 {
        match api.create(&PostParams::default(), &cm("flaky-1")).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (500, "InternalError"));
            }
            other => panic!("expected the injected 500, got {other:?}"),
        }
    }
    api.create(&PostParams::default(), &cm("flaky-1")).await.expect("third try goes through");
    api.create(&PostParams::default(), &cm("steady")).await.expect("other names were never affected");
}

#[tokio::test]
async fn the_nth_match_fires_on_that_request_alone() {
    let c = cluster().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    api.create(&PostParams::default(), &cm("twice")).await.expect("create");
    c.faults().add(Rule { after: 1, ..fail_once(on("get", Some("twice"))) });
    api.get("twice").await.expect("the first GET is let through");
    match api.get("twice").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 500),
        other => panic!("expected the injected 500 on the second GET, got {other:?}"),
    }
    api.get("twice").await.expect("the third GET is past the rule");
}

/// One run of a small operation: what each of its requests answered (`Err` holds the code).
async fn operation(c: &EmbeddedCluster) -> Vec<Result<(), u16>> {
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let code = |e: kube::Error| match e {
        kube::Error::Api(s) => s.code,
        _ => 0,
    };
    vec![
        api.create(&PostParams::default(), &cm("op")).await.map(drop).map_err(code),
        api.get("op").await.map(drop).map_err(code),
        api.get_opt("other").await.map(drop).map_err(code),
        api.get("op").await.map(drop).map_err(code),
        api.delete("op", &Default::default()).await.map(drop).map_err(code),
    ]
}

#[tokio::test]
async fn each_request_of_a_recorded_run_can_be_failed_alone() {
    let recorded = cluster().await;
    let mark = recorded.requests().mark();
    assert!(operation(&recorded).await.iter().all(Result::is_ok));
    let run: Vec<_> = recorded.requests().since(mark).into_iter().filter(|e| e.user == ADMIN_USER).collect();
    assert_eq!(run.len(), 5);
    for index in 0..run.len() {
        let c = cluster().await;
        let rule = c.faults().add(Rule::targeting(&run, index, internal_error()).expect("a request of the run"));
        let mark = c.requests().mark();
        let answers = operation(&c).await;
        assert_eq!(answers[index], Err(500), "request {index} gets the fault: {answers:?}");
        let hit: Vec<u64> =
            c.requests().since(mark).into_iter().filter(|e| e.faults == [rule]).map(|e| e.seq).collect();
        assert_eq!(hit.len(), 1, "request {index}: the rule acted once");
        let others = answers.iter().enumerate().filter(|(i, a)| *i != index && **a == Err(500)).count();
        assert_eq!(others, 0, "request {index}: no other request failed: {answers:?}");
    }
}

#[tokio::test]
async fn delays_and_dropped_connections() {
    let c = cluster().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    c.faults().add(Rule {
        matches: on("get", Some("slow")),
        action: Action::Delay { millis: 300 },
        after: 0,
        times: Some(1),
        probability: None,
    });
    api.create(&PostParams::default(), &cm("slow")).await.expect("create");
    let t = Instant::now();
    api.get("slow").await.expect("delayed get");
    assert!(t.elapsed() >= Duration::from_millis(300));

    c.faults().add(Rule {
        matches: on("get", Some("slow")),
        action: Action::DropBeforeApply,
        after: 0,
        times: Some(1),
        probability: None,
    });
    let err = api.get("slow").await.expect_err("dropped");
    assert!(!matches!(err, kube::Error::Api(_)), "a dropped connection is a transport error: {err:?}");
    api.get("slow").await.expect("next call is fine");
}

/// A rule that applies the next match and loses its response.
fn lose_response(matches: Match) -> Rule {
    Rule { matches, action: Action::DropAfterApply, after: 0, times: Some(1), probability: None }
}

fn transport_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::Error {
    let err = result.expect_err("the response was lost");
    assert!(!matches!(err, kube::Error::Api(_)), "a lost response is a transport error: {err:?}");
    err
}

#[tokio::test]
async fn lost_responses_leave_the_change_made() {
    let c = cluster().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let mark = c.requests().mark();

    c.faults().add(lose_response(on("create", Some("lost"))));
    transport_error(api.create(&PostParams::default(), &cm("lost")).await);
    let created = api.get("lost").await.expect("the create was applied");

    c.faults().add(lose_response(on("patch", Some("lost"))));
    let patch = kube::api::Patch::Merge(json!({"metadata": {"labels": {"patched": "yes"}}}));
    transport_error(api.patch("lost", &kube::api::PatchParams::default(), &patch).await);
    let patched = api.get("lost").await.expect("get after the patch");
    assert_eq!(patched.metadata.labels.unwrap_or_default().get("patched").map(String::as_str), Some("yes"));
    assert_ne!(patched.metadata.resource_version, created.metadata.resource_version);

    c.faults().add(lose_response(on("delete", Some("lost"))));
    transport_error(api.delete("lost", &Default::default()).await);
    assert!(api.get_opt("lost").await.expect("get after the delete").is_none(), "the delete was applied");

    let writes: Vec<(String, u16)> =
        c.requests().since(mark).into_iter().filter(|e| e.is_write()).map(|e| (e.verb, e.code)).collect();
    let unanswered = |verb: &str| (verb.to_string(), 0);
    assert_eq!(
        writes,
        [unanswered("create"), unanswered("patch"), unanswered("delete")],
        "each sent once, none answered"
    );
}

#[tokio::test]
async fn a_drop_before_apply_changes_nothing() {
    let c = cluster().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    c.faults().add(Rule { action: Action::DropBeforeApply, ..fail_once(on("create", Some("never"))) });
    transport_error(api.create(&PostParams::default(), &cm("never")).await);
    assert!(api.get_opt("never").await.expect("get").is_none(), "the create was not applied");
}

#[tokio::test]
async fn request_log_counts_calls_and_proves_no_writes() {
    let c = cluster().await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let mark = c.requests().mark();
    api.create(&PostParams::default(), &cm("a")).await.expect("create");
    api.get("a").await.expect("get");
    api.get_opt("b").await.expect("get missing");
    let entries = c.requests().since(mark);
    let counts = RequestLog::counts(&entries, Some(ADMIN_USER));
    assert_eq!(counts.get("create configmaps"), Some(&1));
    assert_eq!(counts.get("get configmaps"), Some(&2));
    assert!(entries.iter().any(|e| e.code == 404 && e.name == "b"));

    let mark = c.requests().mark();
    api.get("a").await.expect("read only");
    assert!(c.requests().since(mark).iter().all(|e| !e.is_write()), "a read wrote nothing");
}

fn sandboxes(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("agents.x-k8s.io", version, "Sandbox");
    Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&gvk, "sandboxes"))
}

async fn get_path(client: &kube::Client, path: &str) -> Result<String, kube::Error> {
    client.request_text(http::Request::get(path).body(Vec::new()).expect("request")).await
}

#[tokio::test]
async fn the_request_log_names_every_request_in_order() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let mark = c.requests().mark();
    get_path(&client, "/apis/agents.x-k8s.io").await.expect("group discovery");
    get_path(&client, "/apis/agents.x-k8s.io/v1beta1").await.expect("version discovery");
    sandboxes(&client, "v1alpha1").get_opt("s").await.expect("v1alpha1 get");
    sandboxes(&client, "v1beta1").get_opt("s").await.expect("v1beta1 get");
    get_path(&client, "/apis/agents.x-k8s.io/v9/namespaces/default/sandboxes/s").await.expect_err("unserved");
    get_path(&client, "/version").await.expect("version");

    let seen: Vec<_> = c
        .requests()
        .since(mark)
        .into_iter()
        .map(|e| (e.kind, e.verb, e.group, e.version, e.resource, e.namespace, e.name, e.path, e.code))
        .collect();
    let s = String::from;
    let group = "agents.x-k8s.io";
    let object = |version: &str| format!("/apis/{group}/{version}/namespaces/default/sandboxes/s");
    let discovery = RequestKind::Discovery;
    let resource = RequestKind::Resource;
    let expected = vec![
        (discovery, s("get"), s(group), s(""), s(""), s(""), s(""), format!("/apis/{group}"), 200),
        (discovery, s("get"), s(group), s("v1beta1"), s(""), s(""), s(""), format!("/apis/{group}/v1beta1"), 200),
        (resource, s("get"), s(group), s("v1alpha1"), s("sandboxes"), s("default"), s("s"), object("v1alpha1"), 404),
        (resource, s("get"), s(group), s("v1beta1"), s("sandboxes"), s("default"), s("s"), object("v1beta1"), 404),
        (resource, s("get"), s(group), s("v9"), s("sandboxes"), s("default"), s("s"), object("v9"), 404),
        (RequestKind::Version, s("get"), s(""), s(""), s(""), s(""), s(""), s("/version"), 200),
    ];
    assert_eq!(seen, expected);
}

/// An error kube's client does not retry (it retries 429, 503 and 504), so each request sees it.
fn internal_error() -> Action {
    Action::Error { code: 500, reason: "InternalError".into(), message: None, retry_after_seconds: None }
}

#[tokio::test]
async fn discovery_of_a_group_answers_the_injected_error() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let rule = c.faults().add(Rule {
        matches: Match {
            kind: Some(RequestKind::Discovery),
            group: Some("agents.x-k8s.io".into()),
            ..Default::default()
        },
        action: internal_error(),
        after: 0,
        times: None,
        probability: None,
    });
    let mark = c.requests().mark();
    match get_path(&client, "/apis/agents.x-k8s.io").await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (500, "InternalError")),
        other => panic!("expected the injected 500, got {other:?}"),
    }
    match Discovery::new(client.clone()).filter(&["agents.x-k8s.io"]).run().await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 500),
        Err(other) => panic!("expected the injected 500, got {other:?}"),
        Ok(_) => panic!("discovery of the group succeeded despite the fault"),
    }
    let batch = Discovery::new(client.clone()).filter(&["batch"]).run().await.expect("another group's discovery");
    assert!(batch.has_group("batch"));
    sandboxes(&client, "v1beta1").get_opt("s").await.expect("the group's resources are not discovery");

    let faulted: Vec<String> =
        c.requests().since(mark).into_iter().filter(|e| e.faults == [rule]).map(|e| e.path).collect();
    assert_eq!(faulted, ["/apis/agents.x-k8s.io", "/apis/agents.x-k8s.io/v1beta1"], "kube stops at the first error");
}

#[tokio::test]
async fn faults_reach_version_openapi_and_unserved_paths_but_not_admin() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    c.faults().add(Rule {
        matches: Match { path: Some("*".into()), ..Default::default() },
        action: internal_error(),
        after: 0,
        times: None,
        probability: None,
    });
    for path in ["/version", "/openapi/v3", "/apis/nope/v1", "/api/v1/namespaces/default/configmaps"] {
        let answer = get_path(&client, path).await;
        assert!(matches!(&answer, Err(kube::Error::Api(s)) if s.code == 500), "{path}: {answer:?}");
    }
    get_path(&client, "/embedded-cluster/faults").await.expect("admin endpoints are never faulted");
}

#[tokio::test]
async fn admin_endpoint_adds_rules_from_outside() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let rule = json!({"match": {"verb": "create", "resource": "configmaps"}, "action": {"type": "error", "code": 409, "reason": "Conflict"}, "times": 1});
    let req = http::Request::post("/embedded-cluster/faults")
        .header("content-type", "application/json")
        .body(rule.to_string().into_bytes())
        .expect("request");
    let answer = client.request_text(req).await.expect("admin call");
    assert!(answer.contains("\"id\""));
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let err = api.create(&PostParams::default(), &cm("x")).await.expect_err("injected");
    assert!(matches!(err, kube::Error::Api(s) if s.code == 409));

    let viewer = c.client_as(embedded_cluster::VIEWER_USER).await.expect("viewer");
    let req = http::Request::get("/embedded-cluster/requests").body(Vec::new()).expect("request");
    let err = viewer.request_text(req).await.expect_err("only the admin may steer the cluster");
    assert!(matches!(err, kube::Error::Api(s) if s.code == 403));
}
