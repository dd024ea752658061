//! The I/O loop: watches Jobs and the pods they control, re-reads a Job and its pods on every
//! trigger, applies the plan from [`plan_sync`] or [`ttl_decision`], and schedules the next look
//! in cluster time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{self, Action, Config};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::conditions;
use super::ledger::Memory;
use super::pods;
use super::sync::{PodToDelete, SyncInput, SyncPlan, plan_sync};
use super::template::pod_for_job;
use super::ttl::{TtlDecision, ttl_decision};
use crate::clock::Clock;

/// The `spec.managedBy` value (or absence) that means this controller owns the Job.
const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";
/// Jobs reconciled at once.
const CONCURRENCY: u16 = 8;
/// Real-time retry delay after an optimistic-concurrency conflict.
const CONFLICT_RETRY: Duration = Duration::from_millis(200);
/// Real-time retry delay after any other error.
const ERROR_RETRY: Duration = Duration::from_secs(1);
/// Shortest real-time requeue, so a tiny remaining span never spins.
const MIN_REQUEUE: Duration = Duration::from_millis(5);

/// Shared by all reconciles.
struct Context {
    client: Client,
    clock: Arc<Clock>,
    memory: Arc<Mutex<Memory>>,
    /// The API server's minor version: the status fields and conditions written follow it.
    server_minor: u32,
}

impl Context {
    fn memory(&self) -> MutexGuard<'_, Memory> {
        lock(&self.memory)
    }

    /// Requeue after a span of cluster time, converted to real time at the clock's scale.
    fn requeue_after(&self, cluster: Duration) -> Action {
        Action::requeue(self.clock.real_duration(cluster).max(MIN_REQUEUE))
    }
}

/// A reconcile failure, wrapped because the runtime needs a `std::error::Error`.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] anyhow::Error);

/// Runs the Job and TTL-after-finished controllers until dropped or a fatal error.
///
/// Fails fast if Jobs or Pods cannot be listed; afterwards API errors are logged and retried.
pub async fn run(client: Client, clock: Arc<Clock>) -> anyhow::Result<()> {
    let jobs: Api<Job> = Api::all(client.clone());
    let all_pods: Api<Pod> = Api::all(client.clone());
    jobs.list(&ListParams::default().limit(1)).await.context("listing batch/v1 Jobs to start the Job controller")?;
    all_pods.list(&ListParams::default().limit(1)).await.context("listing Pods to start the Job controller")?;

    let server = client.apiserver_version().await.context("reading the API server's version")?;
    let server_minor: u32 = server.minor.trim_end_matches('+').parse().unwrap_or(u32::MAX);
    let memory = Arc::new(Mutex::new(Memory::default()));
    let ctx = Arc::new(Context { client, clock: clock.clone(), memory: memory.clone(), server_minor });

    let controller = Controller::new(jobs, watcher::Config::default());
    let store = controller.store();
    let observe = {
        let memory = memory.clone();
        let clock = clock.clone();
        move |pod: Pod| {
            lock(&memory).observe_pod(&pod, clock.now());
            pods::controlling_job_name(&pod).map(|(ns, name)| ObjectRef::<Job>::new(name).within(ns))
        }
    };

    info!("job controller started");
    controller
        .watches(all_pods, watcher::Config::default(), observe)
        .reconcile_all_on(clock_advances(clock.advances()))
        .with_config(Config::default().concurrency(CONCURRENCY))
        .run(reconcile, error_policy, ctx)
        .for_each(|result| {
            match result {
                Ok((job, action)) => debug!(job = %job, ?action, "job reconciled"),
                Err(controller::Error::ObjectNotFound(job)) => {
                    debug!(job = %job, "job gone; dropping what was remembered about deleted jobs");
                    let live: HashSet<String> = store.state().iter().filter_map(|j| j.uid()).collect();
                    lock(&memory).retain_jobs(|uid| live.contains(uid));
                }
                Err(controller::Error::ReconcilerFailed(err, job)) => {
                    warn!(job = %job, error = %format!("{:#}", err.0), "job reconcile failed; will retry");
                }
                Err(err) => warn!(error = %err, "job controller watch error; retrying"),
            }
            std::future::ready(())
        })
        .await;
    info!("job controller stopped");
    Ok(())
}

/// Locks the memory, recovering it if a reconcile panicked while holding it.
fn lock(memory: &Mutex<Memory>) -> MutexGuard<'_, Memory> {
    memory.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One item per manual clock jump, so deadlines and TTLs are re-checked at once.
fn clock_advances(rx: watch::Receiver<u64>) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.changed().await.ok().map(|()| ((), rx)) })
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let namespace = job.namespace().unwrap_or_default();
    let name = job.name_any();
    reconcile_job(&namespace, &name, &ctx)
        .await
        .with_context(|| format!("syncing Job {namespace}/{name}"))
        .map_err(ReconcileError)
}

fn error_policy(_job: Arc<Job>, err: &ReconcileError, _ctx: Arc<Context>) -> Action {
    Action::requeue(retry_delay(&err.0))
}

/// Conflicts (someone wrote the Job between our read and write) are retried almost at once.
fn retry_delay(err: &anyhow::Error) -> Duration {
    let conflict = err
        .chain()
        .filter_map(|e| e.downcast_ref::<kube::Error>())
        .any(|e| matches!(e, kube::Error::Api(s) if s.is_conflict()));
    if conflict { CONFLICT_RETRY } else { ERROR_RETRY }
}

/// Reads the Job fresh (the watch cache may lag behind our own writes), then either runs the
/// TTL check for finished Jobs or syncs pods and status for the others.
async fn reconcile_job(namespace: &str, name: &str, ctx: &Context) -> anyhow::Result<Action> {
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(job) = jobs.get_opt(name).await.context("reading the Job")? else {
        return Ok(Action::await_change());
    };
    let Some(uid) = job.uid() else {
        anyhow::bail!("the Job has no uid");
    };
    let now = ctx.clock.now();

    if conditions::is_finished(job.status.as_ref()) {
        ctx.memory().forget(&uid);
        return expire(&jobs, &job, &uid, now, ctx).await;
    }
    let spec = job.spec.as_ref();
    if let Some(manager) = spec.and_then(|s| s.managed_by.as_deref())
        && manager != JOB_CONTROLLER_NAME
    {
        debug!(manager, "Job is managed by another controller; skipping");
        return Ok(Action::await_change());
    }
    match spec.and_then(|s| s.completion_mode.as_deref()) {
        None | Some("NonIndexed") => {}
        Some("Indexed") => debug!("Indexed completion mode is simulated as NonIndexed"),
        Some(other) => {
            warn!(mode = other, "unknown completion mode; skipping Job");
            return Ok(Action::await_change());
        }
    }

    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    // The Job's own pods only, as kube-controller-manager's selector finds them: listing the
    // whole namespace on every sync made each sync cost as much as all Jobs' pods together.
    let selector = format!("{}={uid}", super::template::CONTROLLER_UID_LABELS[0]);
    let pods: Vec<Pod> = pods_api
        .list(&ListParams::default().labels(&selector))
        .await
        .context("listing the Job's pods")?
        .items
        .into_iter()
        .filter(|p| pods::controlling_job_uid(p) == Some(uid.as_str()))
        .collect();
    let (ledger, seen_finished) = {
        let memory = ctx.memory();
        (memory.ledger(&uid).cloned(), memory.seen_finished(&uid))
    };
    let plan =
        plan_sync(&SyncInput { job: &job, pods: &pods, seen_finished: &seen_finished, ledger: ledger.as_ref(), now });
    apply(&jobs, &pods_api, job, &uid, plan, ctx).await
}

/// Carries out a sync plan: pod deletions, pod creations, then status writes, and remembers the
/// ledger only once all of them went through (so a failed write is recounted next time).
async fn apply(
    jobs: &Api<Job>,
    pods_api: &Api<Pod>,
    job: Job,
    uid: &str,
    plan: SyncPlan,
    ctx: &Context,
) -> anyhow::Result<Action> {
    for victim in &plan.delete {
        delete_pod(pods_api, victim).await?;
    }
    if plan.create > 0 {
        let pod = pod_for_job(&job).context("building a pod from the Job's template")?;
        for _ in 0..plan.create {
            let created = pods_api.create(&PostParams::default(), &pod).await.context("creating a pod for the Job")?;
            info!(pod = %created.name_any(), "created pod");
        }
    }
    let mut current = job;
    for status in plan.status_updates {
        current = write_status(jobs, &current, conditions::fit_to_server(status, ctx.server_minor)).await?;
    }
    ctx.memory().commit(uid, plan.ledger);
    Ok(match plan.wake_after {
        Some(cluster) => ctx.requeue_after(cluster),
        None => Action::await_change(),
    })
}

/// Deletes a pod; already gone (404) or replaced by a namesake (UID precondition, 409) is fine.
async fn delete_pod(pods_api: &Api<Pod>, victim: &PodToDelete) -> anyhow::Result<()> {
    let mut params = DeleteParams::default();
    if let Some(uid) = &victim.uid {
        params = params.preconditions(Preconditions { uid: Some(uid.clone()), resource_version: None });
    }
    match pods_api.delete(&victim.name, &params).await {
        Ok(_) => {
            info!(pod = %victim.name, "deleted pod");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {
            debug!(pod = %victim.name, "pod already gone");
            Ok(())
        }
        Err(err) => Err(err).with_context(|| format!("deleting pod {}", victim.name)),
    }
}

/// Writes the Job's status through the `status` subresource, guarded by the resourceVersion we
/// computed it from, and returns the updated Job for the next write.
async fn write_status(jobs: &Api<Job>, job: &Job, status: JobStatus) -> anyhow::Result<Job> {
    let name = job.name_any();
    let summary = condition_summary(&status);
    let patch = status_patch(job, &status);
    let updated = jobs
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("writing the Job's status")?;
    info!(
        active = status.active,
        ready = status.ready,
        terminating = status.terminating,
        succeeded = status.succeeded,
        failed = status.failed,
        conditions = %summary,
        "updated Job status"
    );
    Ok(updated)
}

/// The TTL-after-finished controller's half: delete an expired Job (background propagation,
/// only if it is still the same Job), or look again when it will expire.
async fn expire(jobs: &Api<Job>, job: &Job, uid: &str, now: jiff::Timestamp, ctx: &Context) -> anyhow::Result<Action> {
    match ttl_decision(job, now) {
        TtlDecision::NotApplicable => Ok(Action::await_change()),
        TtlDecision::ExpiresIn(left) => Ok(ctx.requeue_after(left)),
        TtlDecision::Expired => {
            let params = DeleteParams::background()
                .preconditions(Preconditions { uid: Some(uid.to_string()), resource_version: None });
            match jobs.delete(&job.name_any(), &params).await {
                Ok(_) => info!("deleted finished Job after its ttlSecondsAfterFinished"),
                Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {
                    debug!("finished Job already gone");
                }
                Err(err) => return Err(err).context("deleting the expired Job"),
            }
            Ok(Action::await_change())
        }
    }
}

/// A merge patch replacing the whole status (counters are always present, so zeroes overwrite)
/// and carrying the resourceVersion it was computed from as an optimistic-concurrency guard.
fn status_patch(job: &Job, status: &JobStatus) -> serde_json::Value {
    serde_json::json!({
        "metadata": { "resourceVersion": job.resource_version() },
        "status": status,
    })
}

/// `Type=Status` pairs for logs.
fn condition_summary(status: &JobStatus) -> String {
    status.conditions.iter().flatten().map(|c| format!("{}={}", c.type_, c.status)).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::sync::{SyncInput, plan_sync};
    use crate::controllers::job::test_support::*;
    use kube::core::Status;

    #[test]
    fn status_patches_carry_the_resource_version_and_explicit_zeroes() {
        let j = job(1, Some(1));
        let plan = plan_sync(&SyncInput { job: &j, pods: &[], seen_finished: &[], ledger: None, now: t(0) });
        let status = plan.status_updates.first().expect("a first status");
        let patch = status_patch(&j, status);
        assert_eq!(patch["metadata"]["resourceVersion"], "1");
        assert_eq!(patch["status"]["active"], 1);
        assert_eq!(patch["status"]["ready"], 0);
        assert_eq!(patch["status"]["failed"], 0);
        assert_eq!(patch["status"]["terminating"], 0);
        assert_eq!(patch["status"]["startTime"], "2027-01-15T08:00:00Z");
        assert_eq!(condition_summary(status), "");
    }

    #[test]
    fn conflicts_are_retried_sooner() {
        let conflict = kube::Error::Api(Status::failure("stale", "Conflict").with_code(409).boxed());
        let err = anyhow::Error::new(conflict).context("writing the Job's status");
        assert_eq!(retry_delay(&err), CONFLICT_RETRY);
        let other = anyhow::anyhow!("connection refused");
        assert_eq!(retry_delay(&other), ERROR_RETRY);
    }

    #[tokio::test]
    async fn clock_jumps_trigger_a_resync() {
        let clock = Clock::real();
        let mut jumps = Box::pin(clock_advances(clock.advances()));
        clock.advance(Duration::from_secs(60));
        let next = tokio::time::timeout(Duration::from_secs(5), jumps.next()).await;
        assert_eq!(next.ok().flatten(), Some(()));
    }
}
