//! API requests per operation, per backend, from the embedded cluster's request log: reads,
//! writes and watches apart, discovery (and `/version`, OpenAPI) apart from those. Measured on a
//! host that has served a lifecycle already (steady state), and for the first acquire of a
//! freshly loaded host.

use std::collections::BTreeMap;

use embedded_cluster::PROVIDER_USER;
use embedded_cluster::request_log::{Entry, RequestKind, RequestLog};
use provider_host::Limits;
use tokio::runtime::Runtime;

use crate::table::Table;
use crate::world::{self, BACKENDS};

/// The most writes and watches an acquire should need.
const ACQUIRE_WRITES: usize = 2;
const ACQUIRE_WATCHES: usize = 1;
/// Further acquires per backend whose watches are counted: whether a Sandbox acquire needs a
/// second watch depends on who is first, the provider reading the Sandbox after its pod is
/// Ready or the controller marking the Sandbox Ready, so one acquire is not a figure.
const REPEATS: usize = 20;

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

            let mut watches = BTreeMap::<usize, usize>::new();
            let mut most_writes = 0;
            for i in 0..REPEATS {
                let mark = log.mark();
                let lease = host.acquire(world::request(&config, &format!("requests-repeat-{i}"))).await?;
                let c = count(&log.since(mark));
                *watches.entry(c.watches).or_default() += 1;
                most_writes = most_writes.max(c.writes);
                host.destroy(world::lease_ref(&lease, &config)).await?;
            }
            let spread = watches.iter().map(|(w, n)| format!("{n} with {w}")).collect::<Vec<_>>().join(", ");
            repeats.push(format!("{backend}: {spread} (at most {most_writes} writes)"));
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
    table.note(format!(
        "Target: at most {ACQUIRE_WRITES} writes and {ACQUIRE_WATCHES} watch per acquire, discovery cached by the host: {}.",
        if over.is_empty() { "met".to_string() } else { format!("missed ({})", over.join("; ")) }
    ));
    Ok(table)
}
