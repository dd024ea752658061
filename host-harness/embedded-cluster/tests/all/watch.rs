//! Watches through kube-rs: events from a resourceVersion, selectors turning into ADDED and
//! DELETED, bookmarks, 410 Gone for compacted history, and `kube::runtime::watcher` recovery.

use std::time::Duration;

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

async fn cluster(history: usize) -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), watch_history: history, ..Default::default() })
        .await
        .expect("start")
}

fn cm(name: &str, color: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"color": color}}, "data": {"k": "v"}}))
        .expect("cm")
}

async fn next_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
) -> WatchEvent<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("an event in time")
        .expect("stream open")
        .expect("event")
}

fn describe(ev: &WatchEvent<ConfigMap>) -> String {
    match ev {
        WatchEvent::Added(o) => format!("ADDED {}", o.name_any()),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.name_any()),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.name_any()),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

#[tokio::test]
async fn watch_from_resource_version_replays_and_follows() {
    let c = cluster(1000).await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let a = api.create(&PostParams::default(), &cm("a", "red")).await.expect("a");
    api.create(&PostParams::default(), &cm("b", "red")).await.expect("b");
    let rv = a.resource_version().expect("rv");
    let mut stream = api.watch(&WatchParams::default().disable_bookmarks(), &rv).await.expect("watch").boxed();
    assert_eq!(describe(&next_event(&mut stream).await), "ADDED b", "replay starts after the given version");
    api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "w"}}))).await.expect("patch");
    assert_eq!(describe(&next_event(&mut stream).await), "MODIFIED a");
    api.delete("b", &DeleteParams::default()).await.expect("delete");
    assert_eq!(describe(&next_event(&mut stream).await), "DELETED b");
}

#[tokio::test]
async fn selectors_turn_changes_into_added_and_deleted() {
    let c = cluster(1000).await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let list = api.list(&ListParams::default()).await.expect("list");
    let rv = list.metadata.resource_version.expect("rv");
    let mut stream =
        api.watch(&WatchParams::default().labels("color=blue").disable_bookmarks(), &rv).await.expect("watch").boxed();
    api.create(&PostParams::default(), &cm("x", "red")).await.expect("x");
    api.patch("x", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"color": "blue"}}})))
        .await
        .expect("to blue");
    assert_eq!(describe(&next_event(&mut stream).await), "ADDED x", "entering the selection is ADDED");
    api.patch("x", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"color": "green"}}})))
        .await
        .expect("to green");
    assert_eq!(describe(&next_event(&mut stream).await), "DELETED x", "leaving the selection is DELETED");
}

#[tokio::test]
async fn bookmarks_carry_progress() {
    let c = EmbeddedCluster::start(ClusterConfig {
        controllers: Vec::new(),
        bookmark_interval: Duration::from_millis(50),
        ..Default::default()
    })
    .await
    .expect("start");
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let created = api.create(&PostParams::default(), &cm("a", "red")).await.expect("a");
    let rv = created.resource_version().expect("rv");
    let mut stream = api.watch(&WatchParams::default(), &rv).await.expect("watch").boxed();
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(b) => {
            assert!(b.metadata.resource_version.parse::<u64>().expect("numeric") >= rv.parse::<u64>().expect("numeric"))
        }
        other => panic!("expected a bookmark, got {}", describe(&other)),
    }
}

#[tokio::test]
async fn compacted_history_is_410_gone() {
    let c = cluster(5).await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let first = api.create(&PostParams::default(), &cm("first", "red")).await.expect("first");
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("n{i}"), "red")).await.expect("create");
    }
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &first.resource_version().expect("rv"))
        .await
        .expect("watch")
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {}", describe(&other)),
    }
}

#[tokio::test]
async fn a_version_from_before_the_watch_cache_started_is_410_expired() {
    let c = cluster(1000).await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let created = api.create(&PostParams::default(), &cm("after-start", "red")).await.expect("create");
    let mut stream = api.watch(&WatchParams::default().disable_bookmarks(), "1").await.expect("watch").boxed();
    // kube-apiserver answers 200 with one ERROR event, not the bootstrap history.
    match next_event(&mut stream).await {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(e.message.starts_with("too old resource version: 1 ("), "{}", e.message);
        }
        other => panic!("expected 410, got {}", describe(&other)),
    }
    let before: u64 = created.resource_version().and_then(|rv| rv.parse().ok()).expect("rv");
    let mut stream =
        api.watch(&WatchParams::default().disable_bookmarks(), &(before - 1).to_string()).await.expect("watch").boxed();
    match next_event(&mut stream).await {
        WatchEvent::Added(o) => assert_eq!(o.name_any(), "after-start"),
        other => panic!("a version after the start replays, got {}", describe(&other)),
    }
}

#[tokio::test]
async fn timeout_ends_the_watch() {
    let c = cluster(100).await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    let stream = api.watch(&WatchParams::default().disable_bookmarks().timeout(1), "0").await.expect("watch");
    let all: Vec<_> = tokio::time::timeout(Duration::from_secs(5), stream.try_collect::<Vec<_>>())
        .await
        .expect("ends in time")
        .expect("events");
    assert!(all.is_empty());
}

#[tokio::test]
async fn runtime_watcher_recovers_from_gone() {
    let c = cluster(3).await;
    let api: Api<ConfigMap> = Api::namespaced(c.client().await.expect("client"), "default");
    c.faults().add(embedded_cluster::faults::Rule {
        matches: embedded_cluster::faults::Match {
            verb: Some("watch".into()),
            resource: Some("configmaps".into()),
            ..Default::default()
        },
        action: embedded_cluster::faults::Action::EndWatch { code: Some(410), after_events: 0 },
        after: 0,
        times: Some(1),
        probability: None,
    });
    let mut objects = watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects().boxed();
    api.create(&PostParams::default(), &cm("late", "red")).await.expect("create");
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(obj) = objects.next().await {
            if let Ok(o) = obj
                && o.name_any() == "late"
            {
                return true;
            }
        }
        false
    })
    .await
    .expect("the watcher re-lists after the injected 410");
    assert!(seen);
}
