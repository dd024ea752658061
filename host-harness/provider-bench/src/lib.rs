//! `make bench`: one run measures execute against a plain exec, the components (size, compile,
//! cached load, the provider's bytes by crate), per-call costs (instantiate, WASM / native per
//! operation and per lifecycle, the guest's instructions per operation), readiness detection
//! (watch against polls), API requests per operation, warm-pool claims against cold starts, load
//! at several concurrencies with a leak audit, the host's own cost with the cluster in another
//! process, faults under load, a CLI call's cold start, and agent runs in the real Paperclip
//! server (the lane); prints one table per section and writes them all to `BENCHMARKS.md` with
//! the command, the machine's core count and the date. Figures from one run are compared with
//! each other (ratios), never with another machine's.
//!
//! Everything runs in this process against the embedded cluster, apart from the host-cost section,
//! whose cluster is a release `sandbox-dev cluster` process, the CLI cold start, which starts
//! the release `sandbox-host`, and the Paperclip lane, which runs under Node with its own cluster.

pub mod audit;
pub mod charts;
pub mod cold_start;
pub mod component_contents;
pub mod component_size;
pub mod execute;
pub mod guest_work;
pub mod host_cost;
pub mod load;
pub mod load_tables;
pub mod memory;
pub mod micro;
pub mod native;
pub mod paperclip_lane;
pub mod per_call;
pub mod readiness;
pub mod requests;
pub mod stats;
pub mod table;
pub mod warm_pool;
pub mod world;

use std::path::PathBuf;
use std::time::Instant;

use table::Table;

/// The sections, in the order they run and print. Execute runs first: the embedded cluster's
/// kubelet forks this process for every command it runs, a fork costs with the process's
/// resident memory, and every other section leaves more of it (the allocator keeps what they
/// freed). After the components section (86 MiB resident) the floor's `true` took 9.9 ms against
/// 5.8 ms before it, after the per-call section (222 MiB) 15.9 ms against 6.9 ms: a measure of
/// this process, not of the cluster's exec path.
pub const SECTIONS: [&str; 11] = [
    "execute",
    "components",
    "per-call",
    "readiness",
    "requests",
    "warm-pool",
    "load",
    "host-cost",
    "faults",
    "cold-start",
    "paperclip",
];

/// What a run measures and where it writes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Lifecycles per load level (`BENCH_LIFECYCLES`, default 1000).
    pub lifecycles: usize,
    /// Concurrency levels of the load section (`BENCH_CONCURRENCY=1,16,128,512`).
    pub concurrency: Vec<usize>,
    /// Fewer rounds everywhere (`BENCH_QUICK=1`): a smoke run, not figures to commit.
    pub quick: bool,
    /// Sections to run (`BENCH_ONLY=load,faults`), all by default.
    pub only: Option<Vec<String>>,
    /// The report file (`BENCH_OUT`, default `BENCHMARKS.md` at the workspace root).
    pub out: PathBuf,
}

impl Options {
    /// Options from the environment, as `make bench` passes them.
    pub fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let quick = var("BENCH_QUICK").is_some_and(|v| v != "0");
        let lifecycles = match var("BENCH_LIFECYCLES") {
            Some(v) => v.parse().map_err(|_| anyhow::anyhow!("BENCH_LIFECYCLES must be a number, not {v:?}"))?,
            None if quick => 100,
            None => 1000,
        };
        let concurrency = match var("BENCH_CONCURRENCY") {
            Some(v) => v
                .split(',')
                .map(|c| c.trim().parse::<usize>().ok().filter(|c| *c > 0))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    anyhow::anyhow!("BENCH_CONCURRENCY must be positive numbers separated by commas, not {v:?}")
                })?,
            None => vec![1, 16, 128, 512],
        };
        let only = var("BENCH_ONLY").map(|v| v.split(',').map(|s| s.trim().to_string()).collect::<Vec<_>>());
        if let Some(unknown) = only.iter().flatten().find(|s| !SECTIONS.contains(&s.as_str())) {
            anyhow::bail!("BENCH_ONLY names no section {unknown:?}; the sections are {}", SECTIONS.join(", "));
        }
        let out = var("BENCH_OUT").map(PathBuf::from).unwrap_or_else(|| world::workspace_root().join("BENCHMARKS.md"));
        Ok(Self { lifecycles, concurrency, quick, only, out })
    }

    fn wants(&self, section: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.iter().any(|s| s == section))
    }
}

/// What a run produced: its tables, in order, and the data of its charts.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub tables: Vec<Table>,
    pub charts: charts::ChartData,
}

/// Runs the sections asked for, printing each table as it is done.
pub fn run(options: &Options) -> anyhow::Result<Report> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut tables = Vec::new();
    let mut charts = charts::ChartData::default();
    let mut done = |mut new: Vec<Table>, started: Instant| {
        for t in &mut new {
            t.note(format!("(section took {:.1} s)", started.elapsed().as_secs_f64()));
            println!("\n{}", t.markdown());
        }
        tables.extend(new);
    };
    let rounds = if options.quick { 5 } else { 20 };
    if options.wants("execute") {
        let started = Instant::now();
        done(vec![execute::measure(&runtime, if options.quick { 5 } else { 30 })?], started);
    }
    if options.wants("components") {
        let started = Instant::now();
        done(vec![component_size::measure(rounds)?, component_contents::measure()?], started);
    }
    if options.wants("per-call") {
        let started = Instant::now();
        let mut micro = micro::Micro::new(options.quick);
        done(per_call::measure(&runtime, &mut micro, if options.quick { 5 } else { 200 })?, started);
    }
    if options.wants("readiness") {
        let started = Instant::now();
        let table = runtime.block_on(readiness::measure(if options.quick { 8 } else { 40 }, &mut charts))?;
        done(vec![table], started);
    }
    if options.wants("requests") {
        let started = Instant::now();
        done(vec![requests::measure(&runtime)?], started);
    }
    if options.wants("warm-pool") {
        let started = Instant::now();
        done(vec![runtime.block_on(warm_pool::measure(warm_pool::Sizes::new(options.quick)))?], started);
    }
    let load_options =
        load_tables::LoadOptions { lifecycles: options.lifecycles, concurrency: options.concurrency.clone() };
    if options.wants("load") {
        let started = Instant::now();
        let tables = runtime.block_on(load_tables::load(&load_options, &mut charts))?;
        done(tables, started);
    }
    if options.wants("host-cost") {
        let started = Instant::now();
        done(vec![runtime.block_on(host_cost::measure(options.lifecycles))?], started);
    }
    if options.wants("faults") {
        let started = Instant::now();
        done(vec![runtime.block_on(load_tables::faults(&load_options))?], started);
    }
    if options.wants("cold-start") {
        let started = Instant::now();
        done(vec![runtime.block_on(load_tables::cold_start(rounds))?], started);
    }
    if options.wants("paperclip") {
        let started = Instant::now();
        done(vec![paperclip_lane::measure()?], started);
    }
    Ok(Report { tables, charts })
}

/// The report as `BENCHMARKS.md`: how it was made, then every table.
pub fn markdown(options: &Options, tables: &[Table], command: &str) -> String {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let date = jiff::Zoned::now().strftime("%Y-%m-%d %H:%M %Z").to_string();
    let mut out = String::from("# Benchmarks\n\n");
    out.push_str(&format!(
        "Measured by `{command}` on {date}, on a machine with {cores} cores, in one run (release build). \
         Machines here are shared and noisy: compare figures within this run (ratios), not across runs.\n\n"
    ));
    if options.quick {
        out.push_str("**Quick run** (`BENCH_QUICK=1`): fewer rounds; not figures to rely on.\n\n");
    }
    for t in tables {
        out.push_str(&t.markdown());
        out.push('\n');
    }
    out
}
