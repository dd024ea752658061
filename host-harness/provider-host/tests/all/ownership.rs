//! Ownership, proved by the host before any read or write: objects someone else made (with
//! kubectl, or another installation) are neither read nor written and stay untouched;
//! another replica of the same installation may use what one created; dependents (a Job's pod)
//! are read through their controller chain; every patch and delete carries the uid the host
//! checked, so an object replaced under the same name in between is never changed.

use std::sync::Arc;
use std::time::Duration;

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{EmbeddedCluster, PROVIDER_USER};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use provider_host::KubeHost;
use provider_host::bindings::kube::{DeleteOptions, KubeError, ListOptions, PatchType, WatchEvent};
use provider_host::policy::{MANAGED_BY_LABEL, Policy};
use serde_json::{Value, json};

use crate::support::*;

/// A host as the provider's own cluster user, under `policy`.
async fn provider_host(c: &EmbeddedCluster, policy: Policy) -> KubeHost {
    KubeHost::new(client_for(c, PROVIDER_USER).await, Arc::new(policy), Duration::from_secs(10))
}

/// Someone else's client: objects it creates carry no owner label unless it writes one.
async fn someone_else(c: &EmbeddedCluster) -> kube::Client {
    client_for(c, embedded_cluster::ADMIN_USER).await
}

fn pods() -> provider_host::bindings::kube::ResourceType {
    rt("", "v1", "pods")
}

/// The provider's requests since a mark, as `verb resource name`.
fn provider_requests(c: &EmbeddedCluster, mark: u64) -> Vec<String> {
    requests_by(c, PROVIDER_USER, mark)
}

fn denied(result: Result<impl std::fmt::Debug, KubeError>, expected: &str) {
    match result {
        Err(KubeError::Denied(m)) => assert!(m.contains(expected), "{m:?} should say {expected:?}"),
        other => panic!("expected a denial saying {expected:?}, got {other:?}"),
    }
}

fn not_owned(result: Result<impl std::fmt::Debug, KubeError>, expected: &str) {
    match result {
        Err(KubeError::NotOwned(m)) => assert!(m.contains(expected), "{m:?} should say {expected:?}"),
        other => panic!("expected a not-owned refusal saying {expected:?}, got {other:?}"),
    }
}

fn pod(name: &str, owner: Option<(&str, &str)>) -> Pod {
    let owners = owner.map(
        |(name, uid)| json!([{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid, "controller": true}]),
    );
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "dep"}, "ownerReferences": owners},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .expect("pod")
}

#[tokio::test]
async fn foreign_objects_are_denied_and_left_untouched() {
    let c = cluster().await;
    let secrets_api: Api<Secret> = Api::namespaced(someone_else(&c).await, NS);
    let jobs_api: Api<Job> = Api::namespaced(someone_else(&c).await, NS);
    let unlabelled: Secret = serde_json::from_str(&secret("kubectl-made", json!({}))).expect("secret");
    secrets_api.create(&PostParams::default(), &unlabelled).await.expect("create");
    let other: Secret = serde_json::from_str(&secret("other-install", json!({MANAGED_BY_LABEL: "team-b"}))).expect("s");
    secrets_api.create(&PostParams::default(), &other).await.expect("create");
    let job_object: Job = serde_json::from_str(&job("foreign-job", json!({}))).expect("job");
    jobs_api.create(&PostParams::default(), &job_object).await.expect("create");
    let before: Vec<Option<String>> = [
        secrets_api.get("kubectl-made").await.expect("get").metadata.resource_version,
        secrets_api.get("other-install").await.expect("get").metadata.resource_version,
        jobs_api.get("foreign-job").await.expect("get").metadata.resource_version,
    ]
    .into();

    let h = provider_host(&c, test_policy()).await;
    let mark = c.requests().mark();
    not_owned(h.get(&secrets(), Some(NS), "kubectl-made").await, "not created by this installation");
    not_owned(h.get(&secrets(), Some(NS), "other-install").await, "not created by this installation");
    let told = format!("{:?}", h.get(&secrets(), Some(NS), "other-install").await);
    assert!(!told.contains("team-b"), "nothing of a foreign object reaches the provider: {told}");
    let patch = r#"{"metadata":{"labels":{"taken":"yes"}}}"#;
    not_owned(
        h.patch(&secrets(), Some(NS), "kubectl-made", PatchType::Merge, patch, None).await,
        "not created by this installation",
    );
    not_owned(
        h.delete(&secrets(), Some(NS), "kubectl-made", &no_delete_options()).await,
        "not created by this installation",
    );
    not_owned(
        h.patch(&jobs(), Some(NS), "foreign-job", PatchType::Merge, patch, None).await,
        "not created by this installation",
    );
    not_owned(
        h.delete(&jobs(), Some(NS), "foreign-job", &no_delete_options()).await,
        "not created by this installation",
    );
    not_owned(
        h.delete(&secrets(), Some(NS), "other-install", &no_delete_options()).await,
        "not created by this installation",
    );

    let sent = provider_requests(&c, mark);
    assert!(sent.iter().all(|r| r.starts_with("get ")), "only the host's own reads were sent: {sent:?}");
    let after: Vec<Option<String>> = [
        secrets_api.get("kubectl-made").await.expect("still there").metadata.resource_version,
        secrets_api.get("other-install").await.expect("still there").metadata.resource_version,
        jobs_api.get("foreign-job").await.expect("still there").metadata.resource_version,
    ]
    .into();
    assert_eq!(before, after, "nothing foreign changed");
    let missing = h.get(&secrets(), Some(NS), "no-such-secret").await;
    assert!(matches!(missing, Err(KubeError::NotFound(_))), "absence is still told: {missing:?}");
}

#[tokio::test]
async fn every_replica_of_one_installation_may_use_what_another_created() {
    let c = cluster().await;
    let first = provider_host(&c, test_policy()).await;
    let second = provider_host(&c, test_policy()).await;
    first.create(&secrets(), Some(NS), &secret("shared", json!({}))).await.expect("create");
    second.get(&secrets(), Some(NS), "shared").await.expect("read by another replica");
    second
        .patch(&secrets(), Some(NS), "shared", PatchType::Merge, r#"{"metadata":{"labels":{"by":"second"}}}"#, None)
        .await
        .expect("patched by another replica");
    second.delete(&secrets(), Some(NS), "shared", &no_delete_options()).await.expect("deleted by another replica");

    let elsewhere = provider_host(&c, Policy { owner_id: "another-install".into(), ..test_policy() }).await;
    first.create(&secrets(), Some(NS), &secret("mine", json!({}))).await.expect("create");
    not_owned(elsewhere.get(&secrets(), Some(NS), "mine").await, "not created by this installation");
}

#[tokio::test]
async fn lists_and_watches_show_only_the_installations_objects() {
    let c = cluster().await;
    let jobs_api: Api<Job> = Api::namespaced(someone_else(&c).await, NS);
    let h = provider_host(&c, test_policy()).await;
    for name in ["foreign-a", "foreign-b"] {
        let object: Job = serde_json::from_str(&job(name, json!({"app": "x"}))).expect("job");
        jobs_api.create(&PostParams::default(), &object).await.expect("create");
    }
    h.create(&jobs(), Some(NS), &job("mine-a", json!({"app": "x"}))).await.expect("create");
    let list = parse(&h.list(&jobs(), Some(NS), &list_options()).await.expect("list"));
    let names: Vec<&str> =
        list["items"].as_array().into_iter().flatten().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, vec!["mine-a"]);
    let page =
        parse(&h.list(&jobs(), Some(NS), &ListOptions { limit: Some(1), ..list_options() }).await.expect("page"));
    assert!(page["metadata"].get("remainingItemCount").is_none(), "the count of foreign objects is not told");

    let rv = list["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    let mut watch = h.watch(&jobs(), Some(NS), &watch_options(Some(rv), false)).await.expect("watch");
    let object: Job = serde_json::from_str(&job("foreign-c", json!({}))).expect("job");
    jobs_api.create(&PostParams::default(), &object).await.expect("create");
    h.create(&jobs(), Some(NS), &job("mine-b", json!({}))).await.expect("create");
    jobs_api.delete("foreign-a", &DeleteParams::background()).await.expect("delete");
    let mut seen = Vec::new();
    while let Some(event) = h.next_event(&mut watch, Duration::from_millis(500)).await.expect("event") {
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = event {
            seen.push(parse(&o)["metadata"]["name"].as_str().unwrap_or_default().to_string());
        }
    }
    assert_eq!(seen, vec!["mine-b"], "foreign events are hidden");
}

#[tokio::test]
async fn dependents_are_read_through_their_controller_and_nothing_else_is() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    let pods_api: Api<Pod> = Api::namespaced(someone_else(&c).await, NS);
    let jobs_api: Api<Job> = Api::namespaced(someone_else(&c).await, NS);
    let owned = parse(&h.create(&jobs(), Some(NS), &job("owned", json!({}))).await.expect("create"));
    let owned_uid = owned["metadata"]["uid"].as_str().expect("uid").to_string();
    let foreign: Job = serde_json::from_str(&job("theirs", json!({}))).expect("job");
    let foreign_uid =
        jobs_api.create(&PostParams::default(), &foreign).await.expect("create").metadata.uid.expect("uid");
    let list = parse(&h.list(&pods(), Some(NS), &list_options()).await.expect("list"));
    let rv = list["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    let mut watch = h.watch(&pods(), Some(NS), &watch_options(Some(rv), false)).await.expect("watch");
    // What the Job controller would create, and pods that only pretend to be ours.
    for p in [
        pod("dep", Some(("owned", &owned_uid))),
        pod("stray", Some(("theirs", &foreign_uid))),
        pod("stale", Some(("owned", "00000000-0000-4000-8000-000000000000"))),
        pod("orphan", None),
    ] {
        pods_api.create(&PostParams::default(), &p).await.expect("create pod");
    }
    // A co-tenant's pod whose controller reference no Kubernetes object could have must not
    // break anyone's reads: it proves nothing and is hidden like any foreign pod.
    for (name, api_version) in [("made-up", "batch y/v1"), ("made-up-name", "batch/v1")] {
        let mut made_up = pod(name, None);
        made_up.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({
                "apiVersion": api_version, "kind": "Job", "name": "../../x", "uid": "u", "controller": true
            }))
            .expect("reference"),
        ]);
        pods_api.create(&PostParams::default(), &made_up).await.expect("create pod");
    }

    h.get(&pods(), Some(NS), "dep").await.expect("a pod of an owned Job is readable");
    not_owned(h.get(&pods(), Some(NS), "stray").await, "not created by this installation");
    not_owned(h.get(&pods(), Some(NS), "stale").await, "not created by this installation");
    not_owned(h.get(&pods(), Some(NS), "orphan").await, "not created by this installation");
    let listed = parse(&h.list(&pods(), Some(NS), &list_options()).await.expect("list"));
    let names: Vec<&str> =
        listed["items"].as_array().into_iter().flatten().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, vec!["dep"]);
    let mut seen = Vec::new();
    while let Some(event) = h.next_event(&mut watch, Duration::from_millis(500)).await.expect("event") {
        if let WatchEvent::Added(o) = event {
            seen.push(parse(&o)["metadata"]["name"].as_str().unwrap_or_default().to_string());
        }
    }
    assert_eq!(seen, vec!["dep"]);
    denied(h.delete(&pods(), Some(NS), "dep", &no_delete_options()).await, "host policy denies delete on pods");

    // The deletion of a pod the provider saw is passed on even once its Job is gone.
    let mut watch = h.watch(&pods(), Some(NS), &watch_options(None, false)).await.expect("watch");
    assert!(matches!(h.next_event(&mut watch, Duration::from_secs(2)).await, Ok(Some(WatchEvent::Added(_)))));
    jobs_api.delete("owned", &DeleteParams::background()).await.expect("delete the Job");
    pods_api.delete("dep", &DeleteParams::default()).await.expect("delete the pod");
    let mut deleted = false;
    while let Some(event) = h.next_event(&mut watch, Duration::from_millis(500)).await.expect("event") {
        deleted |= matches!(&event, WatchEvent::Deleted(o) if parse(o)["metadata"]["name"] == "dep");
    }
    assert!(deleted, "the provider learns that the pod it saw is gone");
}

#[tokio::test]
async fn a_dependent_of_an_object_read_in_the_same_call_costs_no_read_of_that_object() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    let owned = parse(&h.create(&jobs(), Some(NS), &job("owned", json!({}))).await.expect("create"));
    let uid = owned["metadata"]["uid"].as_str().expect("uid").to_string();
    let pods_api: Api<Pod> = Api::namespaced(someone_else(&c).await, NS);
    pods_api.create(&PostParams::default(), &pod("dep", Some(("owned", &uid)))).await.expect("create pod");

    let call = h.for_call(std::time::Instant::now() + Duration::from_secs(30));
    let mark = c.requests().mark();
    call.get(&jobs(), Some(NS), "owned").await.expect("get the Job");
    let listed = parse(&call.list(&pods(), Some(NS), &list_options()).await.expect("list"));
    assert_eq!(listed["items"][0]["metadata"]["name"], "dep");
    let sent: Vec<String> = provider_requests(&c, mark).iter().map(|r| r.trim().to_string()).collect();
    assert_eq!(sent, vec!["get jobs owned", "list pods"], "the Job read Owned proves its pod");
}

#[tokio::test]
async fn patches_may_not_give_an_object_away() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    h.create(&secrets(), Some(NS), &secret("keep", json!({}))).await.expect("create");
    let mark = c.requests().mark();
    let give_away = format!(r#"{{"metadata":{{"labels":{{"{MANAGED_BY_LABEL}":"team-b"}}}}}}"#);
    denied(h.patch(&secrets(), Some(NS), "keep", PatchType::Merge, &give_away, None).await, "managed-by label");
    let strip = r#"[{"op":"remove","path":"/metadata/labels"}]"#;
    denied(h.patch(&secrets(), Some(NS), "keep", PatchType::Json, strip, None).await, "managed-by label");
    assert!(provider_requests(&c, mark).is_empty(), "refused before anything was sent");
}

/// Delays the provider's next `verb` of secret `name`, so the test can replace the object
/// between the host's ownership read and its write.
fn delay_provider(c: &EmbeddedCluster, verb: &str, name: &str) {
    c.faults().add(Rule {
        matches: Match {
            verb: Some(verb.into()),
            resource: Some("secrets".into()),
            name: Some(name.into()),
            user: Some(PROVIDER_USER.into()),
            ..Default::default()
        },
        action: Action::Delay { millis: 600 },
        after: 0,
        times: Some(1),
        probability: None,
    });
}

/// Replaces secret `name` with a new object carrying the owner label (a new uid), as a
/// concurrent destroy and acquire under the same name would.
async fn replace(c: &EmbeddedCluster, name: &str) -> String {
    tokio::time::sleep(Duration::from_millis(200)).await;
    let api: Api<Secret> = Api::namespaced(someone_else(c).await, NS);
    api.delete(name, &DeleteParams::default()).await.expect("delete the original");
    let labels = json!({MANAGED_BY_LABEL: provider_host::policy::DEFAULT_OWNER_ID});
    let new: Secret = serde_json::from_str(&secret(name, labels)).expect("secret");
    api.create(&PostParams::default(), &new).await.expect("recreate").metadata.uid.expect("uid")
}

#[tokio::test]
async fn a_replaced_object_is_never_deleted_or_patched_by_name() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    let api: Api<Secret> = Api::namespaced(someone_else(&c).await, NS);
    let (secret_type, options) = (secrets(), no_delete_options());

    h.create(&secrets(), Some(NS), &secret("swap", json!({}))).await.expect("create");
    delay_provider(&c, "delete", "swap");
    let (deleted, new_uid) = tokio::join!(h.delete(&secret_type, Some(NS), "swap", &options), replace(&c, "swap"));
    assert!(matches!(&deleted, Err(KubeError::Conflict(m)) if m.contains("UID")), "{deleted:?}");
    assert_eq!(api.get("swap").await.expect("the replacement survives").metadata.uid, Some(new_uid));

    h.create(&secrets(), Some(NS), &secret("swap-2", json!({}))).await.expect("create");
    delay_provider(&c, "patch", "swap-2");
    let patch = r#"{"metadata":{"labels":{"patched":"yes"}}}"#;
    let (patched, _) =
        tokio::join!(h.patch(&secret_type, Some(NS), "swap-2", PatchType::Merge, patch, None), replace(&c, "swap-2"));
    assert!(matches!(&patched, Err(KubeError::Invalid(m)) if m.contains("metadata.uid")), "{patched:?}");
    let survivor = api.get("swap-2").await.expect("get");
    assert!(!survivor.metadata.labels.unwrap_or_default().contains_key("patched"), "the replacement is unchanged");

    let stale = DeleteOptions { precondition_uid: Some("an-old-uid".into()), ..no_delete_options() };
    let refused = h.delete(&secrets(), Some(NS), "swap", &stale).await;
    assert!(matches!(&refused, Err(KubeError::Conflict(_))), "{refused:?}");
    let value: Value = parse(&h.get(&secrets(), Some(NS), "swap").await.expect("get"));
    assert!(value["metadata"]["uid"].is_string(), "a stale precondition deletes nothing");
}
