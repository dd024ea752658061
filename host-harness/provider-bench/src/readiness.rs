//! Readiness detection: how long after the cluster marks a sandbox Ready `acquire` returns.
//!
//! An independent watcher in this process timestamps the moment each object turns Ready
//! (the Sandbox's Ready condition; for a Job, its pod's). Beside it, two pollers of the same
//! objects (every 50 ms and every 1 s, as a provider that polls instead of watching would)
//! timestamp when they would have seen it, on the same run. The pollers exist only here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use provider_host::{Limits, records::Lease};
use serde_json::Value;

use crate::charts::ChartData;
use crate::stats::{Samples, fmt_duration};
use crate::table::Table;
use crate::world::{self, BACKENDS, NAMESPACE};

/// The kubelet's fixed start and ready delay in this section.
pub const KUBELET_DELAY: Duration = Duration::from_millis(100);
/// How close to the cluster's Ready `acquire` should return.
const TARGET: Duration = Duration::from_millis(5);
/// The poll intervals compared with the watch.
const POLLS: [Duration; 2] = [Duration::from_millis(50), Duration::from_secs(1)];

/// When an independent watcher first saw each object (by name) Ready.
pub(crate) type Seen = Arc<Mutex<HashMap<String, Instant>>>;

fn is_ready(object: &Value) -> bool {
    object.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Ready")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    })
}

/// What turns Ready for a backend: the Sandbox, or the Job's pod.
pub(crate) fn ready_resource(backend: &str) -> ApiResource {
    if backend == "sandbox" {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox"), "sandboxes")
    } else {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods")
    }
}

/// The name of what turns Ready for a lease: the Sandbox (the lease id's last part), or the
/// Job's pod.
pub(crate) fn ready_object_name(backend: &str, lease: &Lease) -> String {
    if backend == "sandbox" {
        lease.provider_lease_id.rsplit(':').next().unwrap_or_default().to_string()
    } else {
        lease.pod_name.clone().unwrap_or_default()
    }
}

fn record(seen: &Seen, object: &DynamicObject) {
    if let Some(name) = &object.metadata.name
        && is_ready(&object.data)
        && let Ok(mut s) = seen.lock()
    {
        s.entry(name.clone()).or_insert_with(Instant::now);
    }
}

/// Records in `seen` when each object of `api` is first seen Ready, until aborted.
pub(crate) fn watch(api: Api<DynamicObject>, seen: Seen) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            if let Ok(Event::Apply(o) | Event::InitApply(o)) = event {
                record(&seen, &o);
            }
        }
    })
}

fn poll(api: Api<DynamicObject>, seen: Seen, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if let Ok(list) = api.list(&ListParams::default()).await {
                list.items.iter().for_each(|o| record(&seen, o));
            }
        }
    })
}

/// The readiness table: both backends, the watch and each poll, on one run per backend.
pub async fn measure(acquires: usize, charts: &mut ChartData) -> anyhow::Result<Table> {
    let mut table = Table::new(
        "Readiness detection (cluster Ready -> acquire returns)",
        &["backend", "provider (watch) p50", "p99", "poll 50 ms p50", "p99", "poll 1 s p50", "p99"],
    );
    let mut worst = Duration::ZERO;
    for backend in BACKENDS {
        let cluster = world::cluster(1, KUBELET_DELAY).await?;
        let host = world::load(&cluster, &world::provider_component()?, Limits::default()).await?;
        let admin = cluster.client().await?;
        let api: Api<DynamicObject> = Api::namespaced_with(admin, NAMESPACE, &ready_resource(backend));
        let watched: Seen = Arc::default();
        let polled: Vec<Seen> = POLLS.iter().map(|_| Seen::default()).collect();
        let mut tasks = vec![watch(api.clone(), watched.clone())];
        tasks.extend(POLLS.iter().zip(&polled).map(|(every, seen)| poll(api.clone(), seen.clone(), *every)));
        let config = world::config(backend);
        let mut returned: Vec<(Instant, Lease)> = Vec::new();
        for i in 0..acquires {
            let lease = host.acquire(world::request(&config, &format!("ready-{backend}-{i}"))).await?;
            returned.push((Instant::now(), lease));
        }
        // Let the slow poller see the last ones before anything is deleted.
        tokio::time::sleep(POLLS[1] + Duration::from_millis(200)).await;
        let snapshot = |seen: &Seen| seen.lock().map(|s| s.clone()).unwrap_or_default();
        let (watched, polled): (HashMap<_, _>, Vec<HashMap<_, _>>) =
            (snapshot(&watched), polled.iter().map(snapshot).collect());
        let mut provider = Vec::new();
        let mut polls: Vec<Vec<Duration>> = POLLS.iter().map(|_| Vec::new()).collect();
        for (done, lease) in &returned {
            let name = ready_object_name(backend, lease);
            let Some(ready) = watched.get(&name) else {
                anyhow::bail!("{backend}: the independent watcher never saw {name} turn Ready");
            };
            // Zero when acquire returned before the independent watcher saw it.
            provider.push(done.saturating_duration_since(*ready));
            for (seen, out) in polled.iter().zip(polls.iter_mut()) {
                if let Some(at) = seen.get(&name) {
                    out.push(at.saturating_duration_since(*ready));
                }
            }
        }
        for (_, lease) in returned {
            host.destroy(world::lease_ref(&lease, &config)).await?;
        }
        tasks.iter().for_each(|t| t.abort());
        let provider = Samples::new(provider);
        worst = worst.max(provider.p50());
        let polls: Vec<Samples> = polls.into_iter().map(Samples::new).collect();
        charts.readiness.push((format!("{backend}: provider's watch"), provider.p50()));
        for (every, samples) in POLLS.iter().zip(&polls) {
            charts.readiness.push((format!("{backend}: poll every {} ms", every.as_millis()), samples.p50()));
        }
        table.row([
            backend.to_string(),
            fmt_duration(provider.p50()),
            fmt_duration(provider.p99()),
            fmt_duration(polls[0].p50()),
            fmt_duration(polls[0].p99()),
            fmt_duration(polls[1].p50()),
            fmt_duration(polls[1].p99()),
        ]);
    }
    table.note(format!(
        "{acquires} acquires per backend, one at a time, kubelet start and ready delay {} ms each; zero when acquire \
         returned before the independent watcher saw Ready. Target: within {} ms p50 of the cluster: {}.",
        KUBELET_DELAY.as_millis(),
        TARGET.as_millis(),
        if worst < TARGET { "met" } else { "missed" }
    ));
    Ok(table)
}
