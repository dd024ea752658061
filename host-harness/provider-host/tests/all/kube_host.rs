//! The `kube` import's implementation against the embedded cluster, without any wasm: every
//! verb, the error mapping, watches (events, bookmarks, 410 on a compacted history, cuts), the
//! owner label, policy denials that never reach the cluster, and ownership: foreign objects are
//! neither read nor written, dependents are read through their controller chain, and writes
//! carry the uid the host checked.

use std::sync::Arc;
use std::time::Duration;

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ADMIN_USER, ClusterConfig, SandboxVersions, VIEWER_USER};
use provider_host::KubeHost;
use provider_host::bindings::kube::{DeleteOptions, KubeError, ListOptions, PatchType, Propagation, WatchEvent};
use provider_host::policy::{AccessRule, AccessVerb, DEFAULT_OWNER_ID, MANAGED_BY_LABEL, Policy};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn get_create_patch_list_delete_round_trip() {
    let c = cluster().await;
    let h = host(&c).await;

    let created = parse(&h.create(&secrets(), Some(NS), &secret("s1", json!({"app": "x"}))).await.expect("create"));
    assert_eq!(created["metadata"]["labels"][MANAGED_BY_LABEL], DEFAULT_OWNER_ID);
    assert_eq!(created["metadata"]["labels"]["app"], "x");
    let uid = created["metadata"]["uid"].as_str().expect("uid").to_string();

    let got = parse(&h.get(&secrets(), Some(NS), "s1").await.expect("get"));
    assert_eq!(got["metadata"]["uid"], uid.as_str());

    let merged = h
        .patch(&secrets(), Some(NS), "s1", PatchType::Merge, r#"{"metadata":{"labels":{"step":"merge"}}}"#, None)
        .await
        .expect("merge patch");
    assert_eq!(parse(&merged)["metadata"]["labels"]["step"], "merge");
    let json_patched = h
        .patch(
            &secrets(),
            Some(NS),
            "s1",
            PatchType::Json,
            r#"[{"op":"add","path":"/metadata/annotations","value":{"note":"json"}}]"#,
            None,
        )
        .await
        .expect("json patch");
    assert_eq!(parse(&json_patched)["metadata"]["annotations"]["note"], "json");
    let strategic = h
        .patch(&secrets(), Some(NS), "s1", PatchType::Strategic, r#"{"metadata":{"labels":{"step":"smp"}}}"#, None)
        .await
        .expect("strategic patch");
    assert_eq!(parse(&strategic)["metadata"]["labels"]["step"], "smp");

    h.create(&jobs(), Some(NS), &job("j1", json!({"app": "x"}))).await.expect("create j1");
    h.create(&jobs(), Some(NS), &job("j2", json!({"app": "x"}))).await.expect("create j2");
    h.create(&jobs(), Some(NS), &job("other", json!({"app": "y"}))).await.expect("create other");
    // The host pages through the cluster itself: one list, every match, no continue token.
    let all = parse(
        &h.list(
            &jobs(),
            Some(NS),
            &ListOptions { label_selector: Some("app=x".into()), limit: Some(1), ..list_options() },
        )
        .await
        .expect("list"),
    );
    assert_eq!(all["items"].as_array().map(Vec::len), Some(2));
    assert!(all["metadata"].get("continue").is_none(), "{}", all["metadata"]);
    assert!(all["metadata"]["resourceVersion"].is_string(), "a version to watch from");
    let token = ListOptions { continue_token: Some("from-somewhere".into()), ..list_options() };
    assert!(matches!(h.list(&jobs(), Some(NS), &token).await, Err(KubeError::Invalid(_))));

    let options = DeleteOptions { propagation: Some(Propagation::Background), ..no_delete_options() };
    h.delete(&secrets(), Some(NS), "s1", &options).await.expect("delete");
    assert!(matches!(h.get(&secrets(), Some(NS), "s1").await, Err(KubeError::NotFound(m)) if m.contains("s1")));
    assert!(matches!(h.delete(&secrets(), Some(NS), "s1", &options).await, Err(KubeError::NotFound(_))));
}

#[tokio::test]
async fn conflicts_are_told_apart_by_reason() {
    let c = cluster().await;
    let h = host(&c).await;
    h.create(&secrets(), Some(NS), &secret("dup", json!({}))).await.expect("create");
    let again = h.create(&secrets(), Some(NS), &secret("dup", json!({}))).await;
    assert!(matches!(&again, Err(KubeError::AlreadyExists(m)) if m.contains("dup")), "{again:?}");

    let wrong_uid = DeleteOptions { precondition_uid: Some("not-the-uid".into()), ..no_delete_options() };
    let refused = h.delete(&secrets(), Some(NS), "dup", &wrong_uid).await;
    assert!(matches!(refused, Err(KubeError::Conflict(_))), "{refused:?}");
    h.get(&secrets(), Some(NS), "dup").await.expect("a failed precondition deletes nothing");
}

#[tokio::test]
async fn invalid_objects_and_bodies_are_invalid() {
    let c = cluster().await;
    let h = host(&c).await;
    let job_without_template = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}});
    let rejected = h.create(&jobs(), Some(NS), &job_without_template.to_string()).await;
    assert!(matches!(rejected, Err(KubeError::Invalid(_))), "{rejected:?}");

    let mark = c.requests().mark();
    assert!(matches!(h.create(&secrets(), Some(NS), "{not json").await, Err(KubeError::Invalid(_))));
    assert!(matches!(h.get(&secrets(), Some(NS), "../../namespaces/x").await, Err(KubeError::Invalid(_))));
    assert!(requests_since(&c, mark).is_empty(), "nothing reached the cluster");
}

#[tokio::test]
async fn the_provider_cannot_choose_its_own_managed_by_value() {
    let c = cluster().await;
    let h = host(&c).await;
    let body = secret("mine", json!({MANAGED_BY_LABEL: "somebody-else"}));
    let created = parse(&h.create(&secrets(), Some(NS), &body).await.expect("create"));
    assert_eq!(created["metadata"]["labels"][MANAGED_BY_LABEL], DEFAULT_OWNER_ID);
}

#[tokio::test]
async fn policy_denials_are_denied_and_never_reach_the_cluster() {
    let c = cluster().await;
    let h = host(&c).await;
    let mark = c.requests().mark();
    let denied = [
        h.get(&secrets(), Some("kube-system"), "token").await,
        h.list(&secrets(), Some(NS), &list_options()).await,
        h.create(&rt("", "v1", "pods"), Some(NS), r#"{"metadata":{"name":"p"}}"#).await,
        h.get(&rt("", "v1", "configmaps"), Some(NS), "c").await,
        h.get(&rt("", "v1", "events"), Some(NS), "e").await,
        h.list(&jobs(), None, &list_options()).await,
        h.patch(&jobs(), Some(NS), "j", PatchType::Merge, "{}", Some("status")).await,
        h.get(&rt("", "v1", "namespaces"), None, "kube-system").await,
    ];
    for result in denied {
        assert!(matches!(&result, Err(KubeError::Denied(m)) if m.starts_with("host policy denies")), "{result:?}");
    }
    assert!(matches!(h.served_versions("apps").await, Err(KubeError::Denied(_))));
    assert!(matches!(h.watch(&secrets(), Some(NS), &watch_options(None, false)).await, Err(KubeError::Denied(_))));
    assert!(requests_since(&c, mark).is_empty(), "denied calls reached the cluster: {:?}", requests_since(&c, mark));

    h.get(&rt("", "v1", "namespaces"), None, NS).await.expect("the allowed namespace is visible");
}

#[tokio::test]
async fn cluster_rbac_and_credentials_map_to_forbidden_and_unauthorized() {
    let c = cluster().await;
    let viewer = KubeHost::new(
        client_for(&c, VIEWER_USER).await,
        Arc::new(Policy::kubernetes_default([NS])),
        Duration::from_secs(10),
    );
    let refused = viewer.create(&secrets(), Some(NS), &secret("v", json!({}))).await;
    assert!(matches!(&refused, Err(KubeError::Forbidden(m)) if !m.starts_with("host policy")), "{refused:?}");

    let token = c.token(ADMIN_USER).expect("admin token").to_string();
    let yaml = c.kubeconfig(ADMIN_USER).expect("kubeconfig").replace(&token, "not-a-token");
    let stranger =
        KubeHost::new(kube_client(&yaml).await, Arc::new(Policy::kubernetes_default([NS])), Duration::from_secs(10));
    let result = stranger.get(&secrets(), Some(NS), "x").await;
    assert!(matches!(result, Err(KubeError::Unauthorized(_))), "{result:?}");
}

#[tokio::test]
async fn overload_is_unavailable_with_retry_after() {
    let c = cluster().await;
    let h = host(&c).await;
    for (code, reason) in [(503, "ServiceUnavailable"), (429, "TooManyRequests")] {
        c.faults().add(Rule {
            matches: Match { verb: Some("get".into()), resource: Some("secrets".into()), ..Default::default() },
            action: Action::Error { code, reason: reason.into(), message: None, retry_after_seconds: Some(7) },
            after: 0,
            times: Some(1),
            probability: None,
        });
        let result = h.get(&secrets(), Some(NS), "any").await;
        assert!(
            matches!(&result, Err(KubeError::Unavailable(d)) if d.retry_after_seconds == Some(7)),
            "{code}: {result:?}"
        );
    }
    c.faults().add(Rule {
        matches: Match { verb: Some("get".into()), resource: Some("secrets".into()), ..Default::default() },
        action: Action::Error { code: 500, reason: "InternalError".into(), message: None, retry_after_seconds: None },
        after: 0,
        times: Some(1),
        probability: None,
    });
    assert!(matches!(h.get(&secrets(), Some(NS), "any").await, Err(KubeError::Other(d)) if d.code == 500));
}

#[tokio::test]
async fn slow_answers_time_out_and_dropped_connections_are_transport_errors() {
    let c = cluster().await;
    let h = host_with(&c, test_policy(), Duration::from_millis(300)).await;
    c.faults().add(Rule {
        matches: Match { verb: Some("get".into()), name: Some("slow".into()), ..Default::default() },
        action: Action::Delay { millis: 2_000 },
        after: 0,
        times: Some(1),
        probability: None,
    });
    let started = std::time::Instant::now();
    let slow = h.get(&secrets(), Some(NS), "slow").await;
    assert!(matches!(&slow, Err(KubeError::Timeout(m)) if m.contains("300 ms")), "{slow:?}");
    assert!(started.elapsed() < Duration::from_millis(1_500));

    c.faults().add(Rule {
        matches: Match { verb: Some("get".into()), name: Some("cut".into()), ..Default::default() },
        action: Action::DropBeforeApply,
        after: 0,
        times: Some(1),
        probability: None,
    });
    let cut = h.get(&secrets(), Some(NS), "cut").await;
    assert!(matches!(cut, Err(KubeError::Transport(_))), "{cut:?}");
}

#[tokio::test]
async fn watches_deliver_events_bookmarks_and_time_out_quietly() {
    let c = cluster_with(ClusterConfig { bookmark_interval: Duration::from_millis(100), ..Default::default() }).await;
    let h = host(&c).await;
    let list = parse(&h.list(&jobs(), Some(NS), &list_options()).await.expect("list"));
    let rv = list["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    let mut watch = h.watch(&jobs(), Some(NS), &watch_options(Some(rv), true)).await.expect("watch");

    h.create(&jobs(), Some(NS), &job("w", json!({}))).await.expect("create");
    h.patch(&jobs(), Some(NS), "w", PatchType::Merge, r#"{"metadata":{"labels":{"a":"b"}}}"#, None)
        .await
        .expect("patch");
    h.delete(
        &jobs(),
        Some(NS),
        "w",
        &DeleteOptions { propagation: Some(Propagation::Background), ..no_delete_options() },
    )
    .await
    .expect("delete");

    let mut kinds = Vec::new();
    let mut bookmark = None;
    while kinds.len() < 3 || bookmark.is_none() {
        match h.next_event(&mut watch, Duration::from_secs(5)).await.expect("event") {
            Some(WatchEvent::Added(o)) => kinds.push(("added", parse(&o)["metadata"]["name"].clone())),
            Some(WatchEvent::Modified(o)) => kinds.push(("modified", parse(&o)["metadata"]["name"].clone())),
            Some(WatchEvent::Deleted(o)) => kinds.push(("deleted", parse(&o)["metadata"]["name"].clone())),
            Some(WatchEvent::Bookmark(rv)) => bookmark = Some(rv),
            None => panic!("no event within 5 s; got {kinds:?}"),
        }
    }
    assert_eq!(kinds, vec![("added", json!("w")), ("modified", json!("w")), ("deleted", json!("w"))]);
    assert!(bookmark.is_some_and(|rv| rv.parse::<u64>().is_ok()));

    let mut quiet = h.watch(&jobs(), Some(NS), &watch_options(None, false)).await.expect("watch");
    let started = std::time::Instant::now();
    assert!(h.next_event(&mut quiet, Duration::from_millis(200)).await.expect("no error").is_none());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn watching_from_a_compacted_version_is_gone() {
    let c = cluster_with(ClusterConfig { watch_history: 4, ..Default::default() }).await;
    let h = host(&c).await;
    let list = parse(&h.list(&jobs(), Some(NS), &list_options()).await.expect("list"));
    let old = list["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    for i in 0..10 {
        h.create(&jobs(), Some(NS), &job(&format!("j{i}"), json!({}))).await.expect("create");
    }
    let mut watch = h.watch(&jobs(), Some(NS), &watch_options(Some(old), false)).await.expect("opens");
    let first = h.next_event(&mut watch, Duration::from_secs(5)).await;
    assert!(matches!(first, Err(KubeError::Gone(_))), "{first:?}");
    let again = h.next_event(&mut watch, Duration::from_millis(10)).await;
    assert!(matches!(again, Err(KubeError::Gone(_))), "the watch stays ended: {again:?}");
}

#[tokio::test]
async fn cut_watches_end_with_gone_or_transport() {
    let c = cluster().await;
    let h = host(&c).await;
    h.create(&jobs(), Some(NS), &job("a", json!({}))).await.expect("create");
    for (code, expect_gone) in [(Some(410), true), (None, false)] {
        c.faults().add(Rule {
            matches: Match { verb: Some("watch".into()), resource: Some("jobs".into()), ..Default::default() },
            action: Action::EndWatch { code, after_events: 1 },
            after: 0,
            times: Some(1),
            probability: None,
        });
        let mut watch = h.watch(&jobs(), Some(NS), &watch_options(None, false)).await.expect("watch");
        assert!(matches!(h.next_event(&mut watch, Duration::from_secs(5)).await, Ok(Some(WatchEvent::Added(_)))));
        let end = h.next_event(&mut watch, Duration::from_secs(5)).await;
        if expect_gone {
            assert!(matches!(end, Err(KubeError::Gone(_))), "{end:?}");
        } else {
            assert!(matches!(end, Err(KubeError::Transport(_))), "{end:?}");
        }
    }
}

/// Discovery requests the host sent to the cluster since a mark.
fn discovery_requests(c: &embedded_cluster::EmbeddedCluster, mark: u64) -> usize {
    c.requests().since(mark).iter().filter(|e| e.kind == embedded_cluster::request_log::RequestKind::Discovery).count()
}

#[tokio::test]
async fn discovery_is_asked_once_and_shared_by_every_call_until_a_collection_404() {
    let c = cluster().await;
    let h = host(&c).await;
    let mark = c.requests().mark();
    for _ in 0..3 {
        let call = h.for_call(std::time::Instant::now() + Duration::from_secs(30));
        assert_eq!(call.served_versions("agents.x-k8s.io").await.expect("discovery"), vec!["v1beta1", "v1alpha1"]);
    }
    assert_eq!(discovery_requests(&c, mark), 1, "three calls, one discovery request");

    // A collection of the group answering 404 (its version went away) makes the host ask again.
    c.faults().add(Rule {
        matches: Match { verb: Some("list".into()), resource: Some("sandboxes".into()), ..Match::default() },
        action: Action::Error { code: 404, reason: "NotFound".into(), message: None, retry_after_seconds: None },
        after: 0,
        times: Some(1),
        probability: None,
    });
    let listed = h.list(&rt("agents.x-k8s.io", "v1beta1", "sandboxes"), Some(NS), &list_options()).await;
    assert!(matches!(listed, Err(KubeError::NotFound(_))), "{listed:?}");
    let mark = c.requests().mark();
    h.served_versions("agents.x-k8s.io").await.expect("discovery");
    assert_eq!(discovery_requests(&c, mark), 1, "asked again after the 404");
    // An object's 404 says nothing about the group.
    let got = h.get(&rt("agents.x-k8s.io", "v1beta1", "sandboxes"), Some(NS), "nothing-here").await;
    assert!(matches!(got, Err(KubeError::NotFound(_))), "{got:?}");
    let mark = c.requests().mark();
    h.served_versions("agents.x-k8s.io").await.expect("discovery");
    assert_eq!(discovery_requests(&c, mark), 0);
}

#[tokio::test]
async fn served_versions_follow_discovery() {
    let both = cluster().await;
    let h = host(&both).await;
    assert_eq!(h.served_versions("agents.x-k8s.io").await.expect("discovery"), vec!["v1beta1", "v1alpha1"]);
    assert_eq!(h.served_versions("batch").await.expect("discovery"), vec!["v1"]);

    let alpha =
        cluster_with(ClusterConfig { sandbox_versions: SandboxVersions::V1alpha1Only, ..Default::default() }).await;
    assert_eq!(host(&alpha).await.served_versions("agents.x-k8s.io").await.expect("discovery"), vec!["v1alpha1"]);

    let mut policy = Policy::kubernetes_default([NS]);
    policy.resources.push(AccessRule::new("example.com", &["v1"], "widgets", &[AccessVerb::Discovery]));
    let h = host_with(&both, policy, Duration::from_secs(10)).await;
    assert!(h.served_versions("example.com").await.expect("an unserved group is no error").is_empty());
}

#[tokio::test]
async fn a_wildcard_lists_no_system_namespace() {
    let c = cluster().await;
    let mut policy = Policy::kubernetes_default([provider_host::policy::ANY_NAMESPACE]);
    for rule in policy.resources.iter_mut().filter(|r| r.plural == "namespaces") {
        rule.verbs.push(AccessVerb::List);
    }
    let h = host_with(&c, policy, Duration::from_secs(10)).await;
    let listed = parse(&h.list(&rt("", "v1", "namespaces"), None, &list_options()).await.expect("list"));
    let names: Vec<&str> =
        listed["items"].as_array().into_iter().flatten().filter_map(|n| n["metadata"]["name"].as_str()).collect();
    assert!(names.contains(&"default"), "{names:?}");
    for system in provider_host::policy::SYSTEM_NAMESPACES {
        assert!(!names.contains(&system), "{system} is listed: {names:?}");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_denied_before_they_are_parsed_or_sent() {
    let c = cluster().await;
    let fits = secret("fits", json!({}));
    let h = host(&c)
        .await
        .with_body_limit(&provider_host::Limits { max_body_bytes: fits.len() as u64, ..Default::default() });
    let mark = c.requests().mark();
    // One byte over (trailing whitespace keeps it valid JSON): only its size can refuse it.
    let refused = h.create(&secrets(), Some(NS), &format!("{fits} ")).await;
    assert!(matches!(&refused, Err(KubeError::Denied(m)) if m.contains("max-body-bytes")), "{refused:?}");
    h.create(&secrets(), Some(NS), &fits).await.expect("a body at the limit is sent");
    let patch = format!("{:<width$}", r#"{"metadata":{"labels":{"a":"b"}}}"#, width = fits.len() + 1);
    let refused = h.patch(&secrets(), Some(NS), "fits", PatchType::Merge, &patch, None).await;
    assert!(matches!(&refused, Err(KubeError::Denied(m)) if m.contains("max-body-bytes")), "{refused:?}");
    let sent = requests_since(&c, mark);
    assert!(sent.len() == 1 && sent[0].starts_with("create secrets"), "only the body at the limit was sent: {sent:?}");
}
