//! The fault matrix: every API request an operation makes, failed once in every way a cluster
//! fails, and the component held to the contract in each cell.
//!
//! For each operation the suite first records, on a clean run, every request it makes (the
//! embedded cluster's request log, discovery included). Then it runs the operation again once
//! per (request index x fault): the fault fires on exactly that request (`faults`). In every
//! cell (`judge`): nothing traps and the call answers within its deadline; the answer is a
//! success or a classified provider error, retryable unless the fault would stay (404, 409,
//! 422); nothing is answered resumable or acquired that the cluster says is not usable, nor
//! expired that it says is usable (unless the fault itself said the object was not found); the
//! fault fired (a request made on some runs only is tried again, and its cell skipped, saying
//! so, if it never is); and after one follow-up destroy the leak audit is clean.
//!
//! Cells run one at a time per embedded cluster (a cell's fault rule must meet only that
//! cell's requests), on several clusters at once.

mod embedded;
mod faults;
mod judge;
mod table;

use embedded_cluster::request_log::Entry;
use embedded_cluster::{ClusterConfig, EmbeddedCluster, PROVIDER_USER};
use provider_host::Limits;

pub use embedded::Embedded;
pub use faults::{Fault, Operation, PREFIX};
pub use table::Matrix;

use contract_suite::report::{Record, Report, Verdict};
use contract_suite::{Cluster, SuiteOptions, World};
use faults::{describe, rule_for};
use judge::{judge, look, operate};

/// The host limits of matrix cells: a per-request deadline short enough that a late answer
/// costs a cell seconds, not half a minute, and a call deadline that fits a readiness wait of
/// [`READINESS_SECONDS`] with its clean-up.
pub fn cell_limits() -> Limits {
    Limits { call_timeout_ms: 30_000, kube_request_timeout_ms: 2_000, ..Limits::default() }
}

/// The readiness timeout of the matrix's default configs: the embedded cluster's pods are
/// ready in milliseconds on an idle machine and in seconds on a loaded one, and every cell
/// first acquires a lease that must be ready (only a few cells, whose fault leaves the
/// provider waiting to its deadline, pay the whole wait).
pub const READINESS_SECONDS: u32 = 20;

/// The configs to run the matrix with when none are given: the suite's, with a readiness wait
/// that fits [`cell_limits`] (a config that does not fit fails its clean cell, saying so).
pub fn default_configs(driver: &str, namespace: &str) -> Vec<String> {
    contract_suite::default_configs(driver, namespace)
        .into_iter()
        .map(|text| match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(mut config)) if driver == "kubernetes" => {
                config.insert("readinessTimeoutSeconds".into(), READINESS_SECONDS.into());
                serde_json::Value::Object(config).to_string()
            }
            _ => text,
        })
        .collect()
}

/// One cell's outcome, the requests its operation made, and whether its fault fired.
struct CellRun {
    record: Record,
    requests: Vec<Entry>,
    fired: bool,
}

/// How often a cell runs when its fault does not fire: some requests are made on some runs
/// only (a watch a provider opens when its object was not ready yet), so the clean run may
/// have made one a repeat does not.
const TRIES: usize = 3;

/// Where cells run: a world on one embedded cluster, one cell at a time (a cell's fault rule
/// must meet only that cell's requests).
struct Lane<'a> {
    world: World<'a>,
    cluster: &'a EmbeddedCluster,
}

/// The fault of a cell: the clean run's requests, the index of the one that fails, and how.
type Aim<'r> = (&'r [Entry], usize, Fault);

/// Runs one cell (with no fault: the clean run), then its follow-up destroy and audit.
async fn cell(lane: &Lane<'_>, config: &str, operation: Operation, aim: Option<Aim<'_>>) -> anyhow::Result<CellRun> {
    let ctx = lane.world.context(config).await?;
    let name = match aim {
        None => format!("{PREFIX}{} clean", operation.as_str()),
        Some((clean, index, fault)) => {
            let target = clean.get(index).map(describe).unwrap_or_default();
            format!("{PREFIX}{} #{index} {target} {}", operation.as_str(), fault.label())
        }
    };
    let id = ctx.acquisition_id();
    let lease = match operation {
        Operation::Acquire => None,
        _ => match ctx.acquire(ctx.request(&id)).await {
            Ok(l) => Some(l),
            Err(e) => {
                let why = format!("the un-faulted acquire before the cell failed: {e}");
                let _ = contract_suite::follow_up(&ctx).await;
                return Ok(CellRun {
                    record: lane.world.record(&name, &ctx, Verdict::Fail, why),
                    requests: Vec::new(),
                    fired: true,
                });
            }
        },
    };
    let mark = lane.cluster.requests().mark();
    let rule = aim.and_then(|(clean, index, fault)| rule_for(clean, index, fault));
    let rule_id = rule.map(|r| lane.cluster.faults().add(r));
    let answer = operate(&ctx, operation, lease.as_ref(), &id).await;
    let fired = rule_id.is_none_or(|id| lane.cluster.faults().list().iter().all(|(i, _)| *i != id));
    lane.cluster.faults().clear();
    let requests: Vec<Entry> =
        lane.cluster.requests().since(mark).into_iter().filter(|e| e.user == PROVIDER_USER).collect();
    let judged = look(&ctx, &answer, lease.as_ref()).await.and_then(|seen| judge(&answer, seen, aim.map(|a| a.2)));
    let audit = contract_suite::follow_up(&ctx).await;
    let (verdict, why) = match (judged, audit) {
        (Err(why), _) => (Verdict::Fail, why),
        (Ok(_), Err(left)) => (Verdict::Fail, format!("leak audit: {left}")),
        (Ok(answered), Ok(())) if fired => (Verdict::Pass, answered),
        (Ok(answered), Ok(())) => (
            Verdict::Skip,
            format!(
                "the request is made on some runs only (it depends on timing): its fault did not fire in {TRIES} \
                 runs, which answered {answered}"
            ),
        ),
    };
    Ok(CellRun { record: lane.world.record(&name, &ctx, verdict, why), requests, fired })
}

/// Runs the matrix for every config, on `clusters` embedded clusters at once (`main` and
/// clusters started like it for the run).
pub async fn run(
    main: &EmbeddedCluster,
    options: &SuiteOptions,
    operations: &[Operation],
    clusters: usize,
    progress: &mut (dyn FnMut(&Record) + Send),
) -> anyhow::Result<(Report, Vec<Matrix>)> {
    let options = SuiteOptions { limits: cell_limits(), ..options.clone() };
    let main_bed = Embedded(main);
    let first = World::new(Cluster::Simulated(&main_bed), &options).await?;
    if !first.uses_cluster() {
        let why = "Kubernetes-only: the component declares no kube access, so no request can fail";
        return Ok((skipped(operations, why, progress), Vec::new()));
    }
    let like_main = ClusterConfig { port: 0, ..main.config().clone() };
    let extra: Vec<EmbeddedCluster> =
        futures::future::try_join_all((1..clusters.max(1)).map(|_| EmbeddedCluster::start(like_main.clone()))).await?;
    let extra_beds: Vec<Embedded<'_>> = extra.iter().map(Embedded).collect();
    let mut lanes = vec![Lane { world: first, cluster: main }];
    for bed in &extra_beds {
        lanes.push(Lane { world: World::new(Cluster::Simulated(bed), &options).await?, cluster: bed.0 });
    }
    let mut report = Report::default();
    let progress = std::sync::Mutex::new(progress);
    let tell = |record: &Record| {
        if let Ok(mut p) = progress.lock() {
            p(record);
        }
    };
    let mut matrices = Vec::new();
    for config in &options.configs {
        let mut matrix = Matrix::default();
        for operation in operations {
            let clean = cell(&lanes[0], config, *operation, None).await?;
            tell(&clean.record);
            matrix.backend.clone_from(&clean.record.backend);
            report.records.push(clean.record.clone());
            let requests = clean.requests;
            let row_base = matrix.rows.len();
            let mut jobs = Vec::new();
            for (index, entry) in requests.iter().enumerate() {
                matrix.rows.push((format!("{} #{index} {}", operation.as_str(), describe(entry)), Vec::new()));
                jobs.extend(Fault::ALL.iter().filter(|f| f.applies(entry)).map(|f| (index, *f)));
            }
            let per_lane = |lane: usize| jobs.iter().skip(lane).step_by(lanes.len()).copied().collect::<Vec<_>>();
            let runs = futures::future::try_join_all(lanes.iter().enumerate().map(|(n, lane)| {
                let mine = per_lane(n);
                let (requests, tell) = (&requests, &tell);
                async move {
                    let mut out = Vec::new();
                    for (index, fault) in mine {
                        let mut run = cell(lane, config, *operation, Some((requests, index, fault))).await?;
                        for _ in 1..TRIES {
                            if run.fired {
                                break;
                            }
                            run = cell(lane, config, *operation, Some((requests, index, fault))).await?;
                        }
                        tell(&run.record);
                        out.push((index, fault, run.record));
                    }
                    anyhow::Ok(out)
                }
            }))
            .await?;
            let mut cells: Vec<(usize, Fault, Record)> = runs.into_iter().flatten().collect();
            cells.sort_by_key(|(index, fault, _)| (*index, Fault::ALL.iter().position(|f| f == fault)));
            for (index, fault, mut record) in cells {
                if record.backend == "-" {
                    // The cell's acquire failed before the provider named its backend.
                    record.backend.clone_from(&matrix.backend);
                }
                matrix.rows[row_base + index].1.push((fault.label(), record.verdict));
                report.records.push(record);
            }
        }
        matrices.push(matrix);
    }
    Ok((report, matrices))
}

/// One skipped record per operation, saying why no cell ran (such as a real cluster, which takes
/// no injected fault).
pub fn skipped(operations: &[Operation], why: &str, progress: &mut (dyn FnMut(&Record) + Send)) -> Report {
    let mut report = Report::default();
    for operation in operations {
        let record = Record {
            scenario: format!("{PREFIX}{}", operation.as_str()),
            backend: "-".to_string(),
            verdict: Verdict::Skip,
            why: why.to_string(),
        };
        progress(&record);
        report.records.push(record);
    }
    report
}
