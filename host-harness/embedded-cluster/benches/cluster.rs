//! Embedded-cluster benchmark: how many Sandboxes the cluster takes from create to Ready to
//! deleted per second, and its memory with many live Sandboxes. Prints a table; run with
//! `make bench` (release build). `BENCH_SANDBOXES` sets the live count (default 1000).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use embedded_cluster::controllers::kubelet::KubeletConfig;
use embedded_cluster::request_log::RequestLog;
use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::Notify;

const NAMESPACE: &str = "default";
const IN_FLIGHT: usize = 32;

/// Names of Ready Sandboxes, kept current by one watch.
#[derive(Default)]
struct ReadySet {
    ready: Mutex<HashSet<String>>,
    changed: Notify,
}

impl ReadySet {
    fn count(&self) -> usize {
        self.ready.lock().map(|s| s.len()).unwrap_or(0)
    }

    fn contains(&self, name: &str) -> bool {
        self.ready.lock().is_ok_and(|s| s.contains(name))
    }

    async fn wait(&self, cond: impl Fn(&Self) -> bool) {
        loop {
            let notified = self.changed.notified();
            if cond(self) {
                return;
            }
            notified.await;
        }
    }
}

fn is_ready(obj: &DynamicObject) -> bool {
    obj.data["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

fn track_ready(api: Api<DynamicObject>, set: Arc<ReadySet>) {
    tokio::spawn(async move {
        // A watch that falls too far behind gets 410 Gone and re-lists; keep following.
        let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(ev) = events.next().await {
            let Ok(ev) = ev else { continue };
            if let Ok(mut ready) = set.ready.lock() {
                match ev {
                    Event::Apply(o) | Event::InitApply(o) => {
                        let name = o.metadata.name.clone().unwrap_or_default();
                        if is_ready(&o) {
                            ready.insert(name);
                        } else {
                            ready.remove(&name);
                        }
                    }
                    Event::Delete(o) => {
                        ready.remove(&o.metadata.name.clone().unwrap_or_default());
                    }
                    Event::Init => ready.clear(),
                    Event::InitDone => {}
                }
            }
            set.changed.notify_waiters();
        }
    });
}

fn sandbox(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": name},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "agent", "image": "busybox:1.36"}]}}}
    }))
    .unwrap_or_else(|_| DynamicObject::new(name, &resource()))
}

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox"), "sandboxes")
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

async fn wait_gone(cluster: &EmbeddedCluster, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    while cluster.object_count("sandboxes.agents.x-k8s.io") > 0 || cluster.object_count("pods") > 0 {
        anyhow::ensure!(Instant::now() < deadline, "{what}: objects left after 300 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

const GC_ROUNDS: usize = 20;

/// Deletes Jobs in the background one at a time, each with a running pod, and times how long
/// the orphaned pod waits for the garbage collector (until its deletionTimestamp is set).
async fn orphan_collection(cluster: &EmbeddedCluster) -> anyhow::Result<Vec<Duration>> {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;
    let client = cluster.client().await?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
    let mut out = Vec::new();
    for i in 0..GC_ROUNDS {
        let name = format!("gc-{i}");
        let job: Job = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}))?;
        jobs.create(&PostParams::default(), &job).await.context("create job")?;
        let selector = kube::api::ListParams::default().labels(&format!("job-name={name}"));
        let deadline = Instant::now() + Duration::from_secs(60);
        let pod = loop {
            let running = pods
                .list(&selector)
                .await?
                .items
                .into_iter()
                .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
            if let Some(p) = running {
                break p;
            }
            anyhow::ensure!(Instant::now() < deadline, "the pod of {name} never ran");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let t = Instant::now();
        jobs.delete(&name, &DeleteParams::background()).await.context("delete job")?;
        loop {
            let current = pods.get_opt(&pod_name).await?;
            if current.is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
                break;
            }
            anyhow::ensure!(t.elapsed() < Duration::from_secs(60), "the pod of {name} was never collected");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        out.push(t.elapsed());
    }
    out.sort();
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let live: usize = std::env::var("BENCH_SANDBOXES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let cycles = (live / 5).max(50);
    // A node takes 110 pods, as a default kubelet does: enough nodes for every live Sandbox.
    let nodes = live.div_ceil(100).max(1);
    let kubelet =
        KubeletConfig { node_names: (1..=nodes).map(|i| format!("embedded-node-{i}")).collect(), ..Default::default() };
    let cluster = EmbeddedCluster::start(ClusterConfig { kubelet, ..Default::default() }).await?;
    let client = cluster.client().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client, NAMESPACE, &resource());
    let set = Arc::new(ReadySet::default());
    track_ready(api.clone(), set.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_idle = rss_kib();
    if std::env::var_os("BENCH_PROGRESS").is_some() {
        let set = set.clone();
        let cluster_counts = cluster.object_count("pods");
        eprintln!("progress reporting on ({cluster_counts} pods at start)");
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                eprintln!("ready sandboxes: {}", set.count());
            }
        });
    }

    // 1. Pipeline: each Sandbox goes create -> Ready -> delete -> gone, IN_FLIGHT at a time.
    let mark = cluster.requests().mark();
    let started = Instant::now();
    let latencies: Vec<Duration> = futures::stream::iter(0..cycles)
        .map(|i| {
            let api = api.clone();
            let set = set.clone();
            async move {
                let name = format!("cycle-{i}");
                let t = Instant::now();
                api.create(&PostParams::default(), &sandbox(&name)).await.context("create")?;
                set.wait(|s| s.contains(&name)).await;
                let ready = t.elapsed();
                api.delete(&name, &DeleteParams::background()).await.context("delete")?;
                anyhow::Ok(ready)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;
    wait_gone(&cluster, "pipeline").await?;
    let pipeline = started.elapsed();
    let entries = cluster.requests().since(mark);
    let per_sandbox = entries.len() as f64 / cycles as f64;
    let controller_calls =
        entries.iter().filter(|e| e.user != embedded_cluster::ADMIN_USER).count() as f64 / cycles as f64;
    let mut sorted = latencies;
    sorted.sort();

    // 2. Batch: `live` Sandboxes to Ready, memory with all of them live, then delete all.
    let started = Instant::now();
    futures::stream::iter(0..live)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &sandbox(&format!("live-{i}"))).await.context("create") }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
    set.wait(|s| s.count() >= live).await;
    let to_ready = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_live = rss_kib();
    let pods = cluster.object_count("pods");
    let started = Instant::now();
    futures::stream::iter(0..live)
        .map(|i| {
            let api = api.clone();
            async move { api.delete(&format!("live-{i}"), &DeleteParams::background()).await.context("delete") }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
    wait_gone(&cluster, "batch").await?;
    let deleted = started.elapsed();

    // 3. Garbage collection: a Job deleted in the background leaves its running pod to the
    // collector; the time until the pod is being deleted.
    let gc_latencies = orphan_collection(&cluster).await?;

    let counts = RequestLog::counts(&entries, None);
    println!(
        "embedded cluster benchmark ({} cores; API server, 4 controllers with {nodes} simulated nodes, and this client in one process)",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| lifecycle create -> Ready -> deleted ({cycles} Sandboxes, {IN_FLIGHT} in flight) | {:.1} Sandboxes/s |",
        cycles as f64 / pipeline.as_secs_f64()
    );
    println!(
        "| create -> Ready latency p50 / p99 | {:.1} ms / {:.1} ms |",
        percentile(&sorted, 0.5).as_secs_f64() * 1e3,
        percentile(&sorted, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "| API requests per lifecycle (all clients / controllers only) | {per_sandbox:.1} / {controller_calls:.1} |"
    );
    println!(
        "| {live} Sandboxes created -> all Ready | {:.2} s ({:.1}/s) |",
        to_ready.as_secs_f64(),
        live as f64 / to_ready.as_secs_f64()
    );
    println!(
        "| {live} Sandboxes deleted -> Sandboxes and pods gone | {:.2} s ({:.1}/s) |",
        deleted.as_secs_f64(),
        live as f64 / deleted.as_secs_f64()
    );
    println!(
        "| running pod of a Job deleted in the background -> pod deleting, p50 / p99 ({} Jobs) | {:.1} ms / {:.1} ms |",
        gc_latencies.len(),
        percentile(&gc_latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&gc_latencies, 0.99).as_secs_f64() * 1e3
    );
    println!("| RSS idle | {:.1} MiB |", rss_idle as f64 / 1024.0);
    println!(
        "| RSS with {live} live Sandboxes ({pods} pods) | {:.1} MiB ({:.1} KiB per Sandbox) |",
        rss_live as f64 / 1024.0,
        (rss_live.saturating_sub(rss_idle)) as f64 / live as f64
    );
    println!();
    println!("requests per lifecycle by verb and resource (pipeline phase, all clients):");
    for (k, v) in counts {
        println!("  {k:<40} {:.2}", v as f64 / cycles as f64);
    }
    Ok(())
}
