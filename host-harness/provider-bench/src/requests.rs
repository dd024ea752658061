//! API requests per operation, per backend, from the embedded cluster's request log: reads,
//! writes and watches apart, discovery (and `/version`, OpenAPI) apart from those. Measured on a
//! host that has served a lifecycle already (steady state), and for the first acquire of a
//! freshly loaded host. For the Sandbox backend, an independent watcher times how long after its
//! pod the controller marks each Sandbox Ready: the lag that decides whether an acquire's read of
//! the Sandbox finds it Ready or must watch it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use embedded_cluster::PROVIDER_USER;
use embedded_cluster::request_log::{Entry, RequestKind, RequestLog};
use kube::api::{Api, DynamicObject};
use provider_host::Limits;
use provider_host::records::Lease;
use tokio::runtime::Runtime;

use crate::readiness::{self, Seen};
use crate::stats::{Samples, fmt_duration};
use crate::table::Table;
use crate::world::{self, BACKENDS, NAMESPACE};

/// The most writes and watches an acquire should need.
const ACQUIRE_WRITES: usize = 2;
const ACQUIRE_WATCHES: usize = 1;
/// Further acquires per backend whose watches are counted: whether a Sandbox acquire needs a
/// second watch depends on who is first, the provider reading the Sandbox after its pod is
/// Ready or the controller marking the Sandbox Ready, so one acquire is not a figure.
const REPEATS: usize = 20;
/// How long the independent watcher may take to report a Ready the acquire already saw.
const WATCHER_DEADLINE: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Counts {
    reads: usize,
    writes: usize,
    watches: usize,
    discovery: usize,
}

fn count(entries: &[Entry]) -> Counts {
    let mut c = Counts::default();
    for e in entries.iter().filter(|e| e.user == PROVIDER_USER) {
        match (e.kind, e.verb.as_str()) {
            (RequestKind::Resource, "watch") => c.watches += 1,
            (RequestKind::Resource, _) if e.is_write() => c.writes += 1,
            (RequestKind::Resource, _) => c.reads += 1,
            _ => c.discovery += 1,
        }
    }
    c
}

fn detail(entries: &[Entry]) -> String {
    let counts: BTreeMap<String, usize> = RequestLog::counts(entries, Some(PROVIDER_USER));
    counts
        .iter()
        .map(|(what, n)| if *n == 1 { what.clone() } else { format!("{what} x{n}") })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Requests of acquire, an adopting retry, resume-check, renew, release and destroy.
pub fn measure(runtime: &Runtime) -> anyhow::Result<Table> {
    let mut table = Table::new(
        "API requests per operation",
        &["backend", "operation", "reads", "writes", "watches", "discovery", "total", "requests"],
    );
    let mut over = Vec::new();
    let mut repeats = Vec::new();
    let mut lag: Option<Samples> = None;
    for backend in BACKENDS {
        runtime.block_on(async {
            let cluster = world::cluster(1, std::time::Duration::from_millis(20)).await?;
            let host = world::load(&cluster, &world::provider_component()?, Limits::default()).await?;
            let log = cluster.requests();
            let config = world::config(backend);
            let mut row = |op: &str, mark: u64| {
                let entries = log.since(mark);
                let c = count(&entries);
                if op == "acquire" && (c.writes > ACQUIRE_WRITES || c.watches > ACQUIRE_WATCHES) {
                    over.push(format!("{backend} acquire: {} writes, {} watches", c.writes, c.watches));
                }
                let total = c.reads + c.writes + c.watches + c.discovery;
                table.row([
                    backend.to_string(),
                    op.to_string(),
                    c.reads.to_string(),
                    c.writes.to_string(),
                    c.watches.to_string(),
                    c.discovery.to_string(),
                    total.to_string(),
                    detail(&entries),
                ]);
            };
            let mark = log.mark();
            let first = host.acquire(world::request(&config, "requests-first")).await?;
            row("acquire (first call of a new host)", mark);
            host.destroy(world::lease_ref(&first, &config)).await?;

            let mark = log.mark();
            let lease = host.acquire(world::request(&config, "requests-1")).await?;
            row("acquire", mark);
            let mark = log.mark();
            host.acquire(world::request(&config, "requests-1")).await?;
            row("acquire (retried: adopts)", mark);
            let lease_ref = world::lease_ref(&lease, &config);
            let mark = log.mark();
            host.resume_check(lease_ref.clone()).await?;
            row("resume-check", mark);
            let mark = log.mark();
            host.renew(lease_ref.clone(), jiff::Timestamp::now().as_millisecond() + 1_800_000).await?;
            row("renew", mark);
            let mark = log.mark();
            host.release(lease_ref).await?;
            row("release (ephemeral: destroys)", mark);
            let other = host.acquire(world::request(&config, "requests-2")).await?;
            let mark = log.mark();
            host.destroy(world::lease_ref(&other, &config)).await?;
            row("destroy", mark);

            // The pods' and Sandboxes' Ready as an independent watcher sees them (Sandbox backend).
            let seen = (backend == "sandbox").then(|| (Seen::default(), Seen::default()));
            let mut watchers = Vec::new();
            if let Some((pods, sandboxes)) = &seen {
                let admin = cluster.client().await?;
                // What turns Ready for a Job is its pod: `ready_resource("job")` is the pods.
                for (ready_of, seen) in [("job", pods), ("sandbox", sandboxes)] {
                    let api = Api::<DynamicObject>::namespaced_with(
                        admin.clone(),
                        NAMESPACE,
                        &readiness::ready_resource(ready_of),
                    );
                    watchers.push(readiness::watch(api, seen.clone()));
                }
            }
            let mut watches = BTreeMap::<usize, usize>::new();
            let mut most_writes = 0;
            let mut acquired = Vec::new();
            for i in 0..REPEATS {
                let mark = log.mark();
                let lease = host.acquire(world::request(&config, &format!("requests-repeat-{i}"))).await?;
                let c = count(&log.since(mark));
                *watches.entry(c.watches).or_default() += 1;
                most_writes = most_writes.max(c.writes);
                host.destroy(world::lease_ref(&lease, &config)).await?;
                acquired.push(lease);
            }
            let spread = watches.iter().map(|(w, n)| format!("{n} with {w}")).collect::<Vec<_>>().join(", ");
            repeats.push(format!("{backend}: {spread} (at most {most_writes} writes)"));
            if let Some((pods, sandboxes)) = &seen {
                let lags = controller_lags(&acquired, pods, sandboxes).await?;
                watchers.iter().for_each(tokio::task::JoinHandle::abort);
                lag = Some(lags);
            }
            if most_writes > ACQUIRE_WRITES || watches.keys().any(|w| *w > ACQUIRE_WATCHES) {
                over.push(format!("{backend}: {spread} of {REPEATS} acquires"));
            }
            anyhow::Ok(())
        })?;
    }
    table.note(format!(
        "Watches of {REPEATS} more acquires per backend: {}. A Sandbox acquire watches its pods until one is Ready, \
         then reads the Sandbox; a second watch, on the Sandbox, is opened only when the controller has not marked \
         it Ready yet.",
        repeats.join("; ")
    ));
    if let Some(lag) = lag {
        table.note(format!(
            "Why a Sandbox acquire watches twice: an independent watcher saw the controller mark each of those \
             Sandboxes Ready {} p50 ({} min, {} max) after its pod turned Ready. The acquire sees the pod's Ready \
             through its own watch about when the controller does, and reads the Sandbox at once, so the read comes \
             first unless the controller's reconcile is quicker than the read. One watch would mean watching only the \
             Sandbox, whose Ready condition gives a pod whose image cannot be pulled the same reason as one still \
             starting (`DependenciesNotReady`), so such a pod would be found at the deadline instead of at once; or \
             waiting out the controller with polls.",
            fmt_duration(lag.p50()),
            fmt_duration(lag.min()),
            fmt_duration(lag.max()),
        ));
    }
    table.note(format!(
        "Target: at most {ACQUIRE_WRITES} writes and {ACQUIRE_WATCHES} watch per acquire, discovery cached by the host: {}.",
        if over.is_empty() { "met".to_string() } else { format!("missed ({})", over.join("; ")) }
    ));
    Ok(table)
}

/// For each Sandbox lease, how long after its pod the independent watcher saw the Sandbox Ready.
async fn controller_lags(leases: &[Lease], pods: &Seen, sandboxes: &Seen) -> anyhow::Result<Samples> {
    let started = Instant::now();
    let mut lags = Vec::with_capacity(leases.len());
    for lease in leases {
        let pod = lease.pod_name.clone().unwrap_or_default();
        let sandbox = readiness::ready_object_name("sandbox", lease);
        loop {
            let times = |seen: &Seen, name: &str| seen.lock().ok().and_then(|s| s.get(name).copied());
            if let (Some(pod_ready), Some(sandbox_ready)) = (times(pods, &pod), times(sandboxes, &sandbox)) {
                lags.push(sandbox_ready.saturating_duration_since(pod_ready));
                break;
            }
            anyhow::ensure!(
                started.elapsed() < WATCHER_DEADLINE,
                "the independent watcher did not see pod {pod} and Sandbox {sandbox} Ready within {WATCHER_DEADLINE:?} \
                 of the last acquire, which saw both"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    Ok(Samples::new(lags))
}
