//! The Job controller's decisions as a pure function: from the observed Job, its pods and the
//! current cluster time to the pods to create or delete, the status to write and when to look
//! again. Follows the k8s 1.33 `syncJob`/`manageJob` logic for NonIndexed Jobs.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::backoff::BackoffRecord;
use super::conditions::{self, COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED};
use super::ledger::{FinishedPod, Ledger};
use super::pods::{self, PodState};

/// Most pods created or deleted in one sync, as in the real controller.
pub const MAX_POD_CHANGES_PER_SYNC: usize = 500;
/// `spec.backoffLimit` when the API server did not default it.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// Everything one sync looks at.
#[derive(Clone, Copy, Debug)]
pub struct SyncInput<'a> {
    /// The Job, freshly read from the API server.
    pub job: &'a Job,
    /// The pods this Job controls (by controller ownerReference), freshly listed.
    pub pods: &'a [Pod],
    /// Finished pods seen on the watch that may no longer be listed.
    pub seen_finished: &'a [FinishedPod],
    /// What this controller counted so far, or `None` on first sight of the Job.
    pub ledger: Option<&'a Ledger>,
    /// Cluster time.
    pub now: Timestamp,
}

/// A pod the sync wants gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodToDelete {
    /// Pod name.
    pub name: String,
    /// Pod UID, used as a delete precondition so a namesake is never hit.
    pub uid: Option<String>,
}

/// What one sync decided.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncPlan {
    /// How many pods to create from the template.
    pub create: usize,
    /// Pods to delete.
    pub delete: Vec<PodToDelete>,
    /// Statuses to write in order, after the pod changes; empty when nothing changed. Two
    /// entries when an interim condition (`SuccessCriteriaMet`, `FailureTarget`) and its
    /// terminal one (`Complete`, `Failed`) are both reached, as the real controller writes them.
    pub status_updates: Vec<JobStatus>,
    /// The ledger to remember once all of the above succeeded.
    pub ledger: Ledger,
    /// Cluster time after which to sync again even if nothing is watched changing
    /// (deadline or failure backoff).
    pub wake_after: Option<Duration>,
}

/// How the Job is ending.
#[derive(Clone, Debug)]
struct Finish {
    success: bool,
    reason: String,
    message: String,
    /// The interim condition is already in the Job's status.
    interim_recorded: bool,
}

impl Finish {
    fn failure(reason: &str, message: &str) -> Self {
        Self { success: false, reason: reason.to_string(), message: message.to_string(), interim_recorded: false }
    }

    fn interim_type(&self) -> &'static str {
        if self.success { SUCCESS_CRITERIA_MET } else { FAILURE_TARGET }
    }

    fn terminal_type(&self) -> &'static str {
        if self.success { COMPLETE } else { FAILED }
    }
}

/// Pod changes decided by the `manageJob` step.
#[derive(Debug, Default)]
struct Manage<'p> {
    delete: Vec<&'p Pod>,
    create: usize,
    wake_after: Option<Duration>,
}

/// Decides one sync of a Job. Finished Jobs get an empty plan.
pub fn plan_sync(input: &SyncInput<'_>) -> SyncPlan {
    let job = input.job;
    let now = input.now;
    let stamp = whole_second(now);
    let mut plan = SyncPlan {
        create: 0,
        delete: Vec::new(),
        status_updates: Vec::new(),
        ledger: input.ledger.cloned().unwrap_or_default(),
        wake_after: None,
    };
    let Some(spec) = job.spec.as_ref() else {
        return plan;
    };
    if conditions::is_finished(job.status.as_ref()) {
        return plan;
    }

    let original = job.status.clone().unwrap_or_default();
    let mut status = original.clone();
    let mut conds = status.conditions.take().unwrap_or_default();
    let suspended = spec.suspend == Some(true);

    let mut active: Vec<&Pod> = Vec::new();
    let mut terminating = 0usize;
    let mut finished: BTreeMap<String, FinishedPod> =
        input.seen_finished.iter().map(|f| (f.id.clone(), f.clone())).collect();
    for pod in input.pods {
        match pods::state(pod) {
            PodState::Active => active.push(pod),
            PodState::Terminating => terminating += 1,
            PodState::Succeeded | PodState::Failed => {
                if let Some(f) = FinishedPod::from_pod(pod, now) {
                    finished.entry(f.id.clone()).or_insert(f);
                }
            }
        }
    }
    let (succeeded, failed, ledger) = count(&original, &finished, input.ledger);

    if status.start_time.is_none() && !suspended {
        status.start_time = Some(Time(stamp));
    }

    let backoff_limit = i64::from(spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT));
    let mut finish = recorded_finish(&conds);
    if finish.is_none() {
        if failed > backoff_limit || past_backoff_limit_on_failure(spec, input.pods, backoff_limit) {
            finish = Some(Finish::failure(conditions::REASON_BACKOFF_LIMIT, conditions::MESSAGE_BACKOFF_LIMIT));
        } else if let Some(left) = deadline_remaining(spec, &status, now) {
            if left.is_zero() {
                finish = Some(Finish::failure(conditions::REASON_DEADLINE, conditions::MESSAGE_DEADLINE));
            } else {
                plan.wake_after = earliest(plan.wake_after, Some(left));
            }
        }
    }

    let mut active_count = active.len();
    let mut ready_count = active.iter().filter(|p| pods::is_ready(p)).count();
    if finish.is_some() {
        terminating += active.len();
        plan.delete = active.iter().map(|p| to_delete(p)).collect();
        active_count = 0;
        ready_count = 0;
    } else {
        let managed = job.metadata.deletion_timestamp.is_none();
        if managed {
            let manage = manage(spec, &active, terminating, succeeded, &ledger.backoff, now);
            let removed_ready = manage.delete.iter().filter(|p| pods::is_ready(p)).count();
            active_count = active_count - manage.delete.len() + manage.create;
            ready_count -= removed_ready;
            terminating += manage.delete.len();
            plan.delete = manage.delete.iter().map(|p| to_delete(p)).collect();
            plan.create = manage.create;
            plan.wake_after = earliest(plan.wake_after, manage.wake_after);
        }
        let complete = active_count == 0
            && match spec.completions {
                None => succeeded > 0,
                Some(completions) => succeeded >= i64::from(completions),
            };
        if complete {
            finish = Some(Finish {
                success: true,
                reason: conditions::REASON_COMPLETIONS_REACHED.to_string(),
                message: conditions::MESSAGE_COMPLETIONS_REACHED.to_string(),
                interim_recorded: false,
            });
        } else if managed {
            if suspended {
                conditions::ensure(&mut conds, SUSPENDED, true, "JobSuspended", "Job suspended", stamp);
            } else if conditions::ensure(&mut conds, SUSPENDED, false, "JobResumed", "Job resumed", stamp) {
                // The deadline counts continuous activity, so a resumed Job starts afresh.
                status.start_time = Some(Time(stamp));
            }
        }
    }

    status.active = Some(to_i32(active_count));
    status.ready = Some(to_i32(ready_count));
    status.terminating = Some(to_i32(terminating));
    status.succeeded = Some(saturate(succeeded));
    status.failed = Some(saturate(failed));
    status.uncounted_terminated_pods.get_or_insert_with(UncountedTerminatedPods::default);

    let mut stages = Vec::new();
    match finish {
        None => stages.push(with_conditions(&status, &conds)),
        Some(finish) => {
            plan.wake_after = None;
            if !finish.interim_recorded {
                conds.push(conditions::new_condition(
                    finish.interim_type(),
                    true,
                    &finish.reason,
                    &finish.message,
                    stamp,
                ));
                stages.push(with_conditions(&status, &conds));
            }
            if terminating == 0 {
                conditions::ensure(&mut conds, finish.terminal_type(), true, &finish.reason, &finish.message, stamp);
                if finish.success {
                    status.completion_time = Some(Time(stamp));
                }
            }
            stages.push(with_conditions(&status, &conds));
        }
    }
    let mut last = normalized(&original);
    for stage in stages {
        let key = normalized(&stage);
        if key != last {
            last = key;
            plan.status_updates.push(stage);
        }
    }
    plan.ledger = ledger;
    plan
}

/// Counts finished pods into the Job's counters. With a ledger, only pods it has not counted
/// yet are added; on first sight the Job's own counters are trusted unless more finished pods
/// are visible than they account for.
fn count(status: &JobStatus, finished: &BTreeMap<String, FinishedPod>, ledger: Option<&Ledger>) -> (i64, i64, Ledger) {
    let recorded_succeeded = i64::from(status.succeeded.unwrap_or(0));
    let recorded_failed = i64::from(status.failed.unwrap_or(0));
    let (previous, fresh): (BackoffRecord, Vec<&FinishedPod>) = match ledger {
        Some(l) => (l.backoff.clone(), finished.values().filter(|f| !l.counted.contains(&f.id)).collect()),
        None => (BackoffRecord::default(), finished.values().collect()),
    };
    let succeeded_at: Vec<Timestamp> = fresh.iter().filter(|f| f.succeeded).map(|f| f.finished_at).collect();
    let failed_at: Vec<Timestamp> = fresh.iter().filter(|f| !f.succeeded).map(|f| f.finished_at).collect();
    let new_succeeded = i64::try_from(succeeded_at.len()).unwrap_or(i64::MAX);
    let new_failed = i64::try_from(failed_at.len()).unwrap_or(i64::MAX);
    let (succeeded, failed) = if ledger.is_some() {
        (recorded_succeeded + new_succeeded, recorded_failed + new_failed)
    } else {
        (recorded_succeeded.max(new_succeeded), recorded_failed.max(new_failed))
    };
    let mut counted = ledger.map(|l| l.counted.clone()).unwrap_or_default();
    counted.extend(fresh.iter().map(|f| f.id.clone()));
    let ledger = Ledger { counted, backoff: previous.record(&succeeded_at, &failed_at) };
    (succeeded, failed, ledger)
}

/// An interim condition written by an earlier sync decides the outcome.
fn recorded_finish(conds: &[JobCondition]) -> Option<Finish> {
    [SUCCESS_CRITERIA_MET, FAILURE_TARGET]
        .into_iter()
        .filter_map(|t| conditions::find(conds, t))
        .find(|c| c.status == "True")
        .map(|c| Finish {
            success: c.type_ == SUCCESS_CRITERIA_MET,
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            interim_recorded: true,
        })
}

/// The `manageJob` step: suspend deletes every active pod; otherwise keep `parallelism` pods
/// running, bounded by the completions still needed, delaying replacements during backoff.
fn manage<'p>(
    spec: &JobSpec,
    active: &[&'p Pod],
    terminating: usize,
    succeeded: i64,
    backoff: &BackoffRecord,
    now: Timestamp,
) -> Manage<'p> {
    let mut by_cost = active.to_vec();
    pods::sort_for_removal(&mut by_cost);
    if spec.suspend == Some(true) {
        return Manage { delete: by_cost, ..Manage::default() };
    }
    let parallelism = usize::try_from(spec.parallelism.unwrap_or(1)).unwrap_or(0);
    let want = match spec.completions {
        None if succeeded > 0 => active.len(),
        None => parallelism,
        Some(completions) => {
            let remaining = (i64::from(completions) - succeeded).max(0);
            usize::try_from(remaining).unwrap_or(usize::MAX).min(parallelism)
        }
    };
    if active.len() > want {
        by_cost.truncate((active.len() - want).min(MAX_POD_CHANGES_PER_SYNC));
        return Manage { delete: by_cost, ..Manage::default() };
    }
    let blocking = if only_replace_failed_pods(spec) { terminating } else { 0 };
    let missing = want.saturating_sub(active.len() + blocking);
    if missing == 0 {
        return Manage::default();
    }
    let wait = backoff.remaining(now);
    if !wait.is_zero() {
        return Manage { wake_after: Some(wait), ..Manage::default() };
    }
    Manage { create: missing.min(MAX_POD_CHANGES_PER_SYNC), ..Manage::default() }
}

/// With `podReplacementPolicy: Failed` (or a pod failure policy), terminating pods are only
/// replaced once they have fully finished.
fn only_replace_failed_pods(spec: &JobSpec) -> bool {
    spec.pod_replacement_policy.as_deref() == Some("Failed") || spec.pod_failure_policy.is_some()
}

/// For `restartPolicy: OnFailure`, container restarts of running pods count against the limit.
fn past_backoff_limit_on_failure(spec: &JobSpec, pods: &[Pod], limit: i64) -> bool {
    let restart_policy = spec.template.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
    if restart_policy != Some("OnFailure") {
        return false;
    }
    let restarts: i64 = pods
        .iter()
        .filter(|p| matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running") | Some("Pending")))
        .map(pods::restart_count)
        .sum();
    if limit == 0 { restarts > 0 } else { restarts >= limit }
}

/// Cluster time left before `activeDeadlineSeconds` runs out (zero once past), or `None` when
/// no deadline applies (none set, not started, or suspended).
fn deadline_remaining(spec: &JobSpec, status: &JobStatus, now: Timestamp) -> Option<Duration> {
    if spec.suspend == Some(true) {
        return None;
    }
    let seconds = u64::try_from(spec.active_deadline_seconds?).unwrap_or(0);
    let started = status.start_time.as_ref()?.0;
    let elapsed = Duration::try_from(now.duration_since(started)).unwrap_or(Duration::ZERO);
    Some(Duration::from_secs(seconds).saturating_sub(elapsed))
}

fn with_conditions(status: &JobStatus, conds: &[JobCondition]) -> JobStatus {
    let mut status = status.clone();
    // Conditions are only ever added or changed, never removed, so leaving out an empty list
    // (as the real API omits it) cannot leave a stale one behind in a merge patch.
    status.conditions = (!conds.is_empty()).then(|| conds.to_vec());
    status
}

/// The status as compared for "did anything change": zero counters, empty lists and absent
/// ones are the same, since the API server may drop zero values.
fn normalized(status: &JobStatus) -> JobStatus {
    let zero_none = |v: Option<i32>| v.filter(|n| *n != 0);
    let mut s = status.clone();
    s.active = zero_none(s.active);
    s.ready = zero_none(s.ready);
    s.terminating = zero_none(s.terminating);
    s.succeeded = zero_none(s.succeeded);
    s.failed = zero_none(s.failed);
    s.conditions = s.conditions.filter(|c| !c.is_empty());
    s.uncounted_terminated_pods = s
        .uncounted_terminated_pods
        .filter(|u| !u.succeeded.as_ref().is_none_or(Vec::is_empty) || !u.failed.as_ref().is_none_or(Vec::is_empty));
    s
}

fn to_delete(pod: &Pod) -> PodToDelete {
    PodToDelete { name: pod.metadata.name.clone().unwrap_or_default(), uid: pod.metadata.uid.clone() }
}

fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Kubernetes stores times at whole seconds; writing them that way keeps comparisons stable.
fn whole_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn saturate(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
