use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::JobCondition;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::*;
use crate::controllers::job::conditions::new_condition;
use crate::controllers::job::test_support::*;

fn sync(job: &Job, pods: &[Pod], ledger: Option<&Ledger>, now: Timestamp) -> SyncPlan {
    sync_seen(job, pods, &[], ledger, now)
}

fn sync_seen(job: &Job, pods: &[Pod], seen: &[FinishedPod], ledger: Option<&Ledger>, now: Timestamp) -> SyncPlan {
    plan_sync(&SyncInput { job, pods, seen_finished: seen, ledger, now })
}

/// The Job as the API server holds it after the plan's status writes.
fn after(job: &Job, plan: &SyncPlan) -> Job {
    let mut next = job.clone();
    if let Some(status) = plan.status_updates.last() {
        next.status = Some(status.clone());
    }
    next
}

fn last(plan: &SyncPlan) -> &JobStatus {
    plan.status_updates.last().expect("a status update")
}

fn cond<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    conditions::find(status.conditions.as_deref().unwrap_or_default(), type_)
}

fn types(status: &JobStatus) -> Vec<String> {
    status.conditions.iter().flatten().map(|c| format!("{}={}", c.type_, c.status)).collect()
}

fn names(plan: &SyncPlan) -> Vec<&str> {
    plan.delete.iter().map(|d| d.name.as_str()).collect()
}

fn failed_pod(name: &str, at: Timestamp) -> Pod {
    finished_at(pod(name, "Failed"), at)
}

fn succeeded_pod(name: &str, at: Timestamp) -> Pod {
    finished_at(pod(name, "Succeeded"), at)
}

/// A Job that has been synced once at `t(0)` and is running `running` pods.
fn started(parallelism: i32, completions: Option<i32>) -> Job {
    let j = job(parallelism, completions);
    let plan = sync(&j, &[], None, t(0));
    after(&j, &plan)
}

fn running(n: usize) -> Vec<Pod> {
    (0..n).map(|i| scheduled(pod(&format!("p{i}"), "Running"))).collect()
}

// --- creating pods -------------------------------------------------------------------------

#[test]
fn a_new_job_gets_parallelism_pods_and_a_start_time() {
    let plan = sync(&job(2, Some(5)), &[], None, t(0));
    assert_eq!(plan.create, 2);
    assert!(plan.delete.is_empty());
    assert_eq!(plan.status_updates.len(), 1);
    let status = last(&plan);
    assert_eq!(status.active, Some(2));
    assert_eq!(status.ready, Some(0));
    assert_eq!(status.terminating, Some(0));
    assert_eq!(status.succeeded, Some(0));
    assert_eq!(status.failed, Some(0));
    assert_eq!(status.start_time, Some(Time(t(0))));
    assert_eq!(status.completion_time, None);
    assert!(types(status).is_empty(), "no conditions, not even Suspended=False");
    assert_eq!(plan.wake_after, None);
}

#[test]
fn status_times_are_whole_seconds() {
    let now = t(0).checked_add(jiff::SignedDuration::from_millis(750)).expect("in range");
    let plan = sync(&job(1, Some(1)), &[], None, now);
    assert_eq!(last(&plan).start_time, Some(Time(t(0))));
}

#[test]
fn creations_are_bounded_by_the_completions_left() {
    let plan = sync(&job(5, Some(3)), &[], None, t(0));
    assert_eq!(plan.create, 3);

    let j = started(5, Some(3));
    let pods = [succeeded_pod("a", t(1)), succeeded_pod("b", t(1))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(2));
    assert_eq!(plan.create, 1);
    assert_eq!(last(&plan).succeeded, Some(2));
    assert_eq!(last(&plan).active, Some(1));
}

#[test]
fn a_steady_job_writes_nothing() {
    let j = job(2, Some(2));
    let plan = sync(&j, &[], None, t(0));
    let j = after(&j, &plan);
    let plan = sync(&j, &running(2), Some(&plan.ledger), t(5));
    assert_eq!(plan.create, 0);
    assert!(plan.delete.is_empty());
    assert!(plan.status_updates.is_empty());
}

#[test]
fn zero_counters_dropped_by_the_server_are_not_a_change() {
    let j = with_status(job(0, Some(1)), |s| {
        s.start_time = Some(Time(t(0)));
    });
    let plan = sync(&j, &[], Some(&Ledger::default()), t(1));
    assert!(plan.status_updates.is_empty(), "{:?}", plan.status_updates);
}

#[test]
fn ready_pods_are_counted() {
    let j = started(2, Some(2));
    let pods = [ready(scheduled(pod("a", "Running"))), scheduled(pod("b", "Running"))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(1));
    assert_eq!(last(&plan).ready, Some(1));
    assert_eq!(last(&plan).active, Some(2));
}

#[test]
fn scaling_down_deletes_the_cheapest_pods() {
    let j = with_spec(started(3, Some(3)), |s| s.parallelism = Some(1));
    let pods =
        [ready(scheduled(pod("ready", "Running"))), scheduled(pod("running", "Running")), pod("pending", "Pending")];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(1));
    assert_eq!(plan.create, 0);
    assert_eq!(names(&plan), ["pending", "running"]);
    let status = last(&plan);
    assert_eq!(status.active, Some(1));
    assert_eq!(status.ready, Some(1));
    assert_eq!(status.terminating, Some(2));
}

#[test]
fn a_job_being_deleted_gets_no_new_pods() {
    let mut j = started(2, Some(2));
    j.metadata.deletion_timestamp = Some(Time(t(1)));
    let plan = sync(&j, &[], Some(&Ledger::default()), t(1));
    assert_eq!(plan.create, 0);
}

// --- counting -------------------------------------------------------------------------------

#[test]
fn terminating_pods_are_not_active_and_are_replaced() {
    let j = started(1, Some(1));
    let pods = [deleting(scheduled(pod("old", "Running")), t(1))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(1));
    assert_eq!(plan.create, 1);
    let status = last(&plan);
    assert_eq!(status.terminating, Some(1));
    assert_eq!(status.active, Some(1));
    assert_eq!(status.failed, Some(0));
}

#[test]
fn replacement_policy_failed_waits_for_terminating_pods() {
    let j = with_spec(started(1, Some(1)), |s| {
        s.pod_replacement_policy = Some("Failed".into());
    });
    let pods = [deleting(scheduled(pod("old", "Running")), t(1))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(1));
    assert_eq!(plan.create, 0);
    assert_eq!(last(&plan).active, Some(0));
    assert_eq!(last(&plan).terminating, Some(1));
}

#[test]
fn vanished_unfinished_pods_are_replaced_without_counting_a_failure() {
    let j = started(1, Some(1));
    let plan = sync(&j, &running(1), Some(&Ledger::default()), t(1));
    let j = after(&j, &plan);
    let plan = sync(&j, &[], Some(&plan.ledger), t(2));
    assert_eq!(plan.create, 1);
    assert!(plan.status_updates.is_empty(), "still one active, nothing failed");
}

#[test]
fn a_failed_pod_seen_on_the_watch_counts_once_even_after_deletion() {
    let j = started(1, Some(1));
    let seen = [FinishedPod { id: "uid-gone".into(), succeeded: false, finished_at: t(1) }];
    let plan = sync_seen(&j, &[], &seen, Some(&Ledger::default()), t(2));
    assert_eq!(last(&plan).failed, Some(1));
    assert!(plan.ledger.counted.contains("uid-gone"));

    let j = after(&j, &plan);
    let again = sync_seen(&j, &[], &seen, Some(&plan.ledger), t(20));
    assert!(again.status_updates.iter().all(|s| s.failed == Some(1)));
}

#[test]
fn counted_pods_stay_counted_after_they_are_deleted() {
    let j = started(2, Some(3));
    let plan = sync(&j, &[succeeded_pod("a", t(1))], Some(&Ledger::default()), t(2));
    assert_eq!(last(&plan).succeeded, Some(1));
    let j = after(&j, &plan);
    let plan = sync(&j, &running(2), Some(&plan.ledger), t(3));
    assert!(plan.status_updates.iter().all(|s| s.succeeded == Some(1)));
}

#[test]
fn first_sight_trusts_the_recorded_counters() {
    let j = with_status(job(2, Some(4)), |s| {
        s.start_time = Some(Time(t(0)));
        s.succeeded = Some(2);
    });
    let pods = [succeeded_pod("a", t(1)), succeeded_pod("b", t(1))];
    let plan = sync(&j, &pods, None, t(2));
    assert_eq!(last(&plan).succeeded, Some(2));
    assert_eq!(plan.create, 2);
    assert_eq!(plan.ledger.counted, BTreeSet::from(["uid-a".to_string(), "uid-b".to_string()]));
}

#[test]
fn first_sight_counts_finished_pods_the_counters_miss() {
    let j = with_status(job(2, Some(4)), |s| {
        s.start_time = Some(Time(t(0)));
        s.succeeded = Some(1);
    });
    let pods = [succeeded_pod("a", t(1)), succeeded_pod("b", t(1))];
    let plan = sync(&j, &pods, None, t(2));
    assert_eq!(last(&plan).succeeded, Some(2));
}

// --- completion -----------------------------------------------------------------------------

#[test]
fn reaching_completions_writes_success_criteria_met_then_complete() {
    let j = started(1, Some(1));
    let plan = sync(&j, &[succeeded_pod("a", t(4))], Some(&Ledger::default()), t(5));
    assert_eq!(plan.create, 0);
    assert_eq!(plan.status_updates.len(), 2);

    let interim = &plan.status_updates[0];
    assert_eq!(types(interim), ["SuccessCriteriaMet=True"]);
    let met = cond(interim, SUCCESS_CRITERIA_MET).expect("interim");
    assert_eq!(met.reason.as_deref(), Some("CompletionsReached"));
    assert_eq!(met.message.as_deref(), Some("Reached expected number of succeeded pods"));
    assert_eq!(interim.completion_time, None);

    let done = &plan.status_updates[1];
    assert_eq!(types(done), ["SuccessCriteriaMet=True", "Complete=True"]);
    let complete = cond(done, COMPLETE).expect("terminal");
    assert_eq!(complete.reason.as_deref(), Some("CompletionsReached"));
    assert_eq!(complete.last_transition_time, Some(Time(t(5))));
    assert_eq!(done.completion_time, Some(Time(t(5))));
    assert_eq!(done.succeeded, Some(1));
    assert_eq!(done.active, Some(0));
    assert_eq!(plan.wake_after, None);
}

#[test]
fn a_work_queue_job_completes_once_its_pods_are_done() {
    let j = started(2, None);
    let pods = [succeeded_pod("a", t(1)), scheduled(pod("b", "Running"))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(2));
    assert_eq!(plan.create, 0, "after one success no pods are added");
    assert!(!types(last(&plan)).iter().any(|c| c.starts_with("Complete")));

    let j = after(&j, &plan);
    let pods = [succeeded_pod("a", t(1)), succeeded_pod("b", t(3))];
    let plan = sync(&j, &pods, Some(&plan.ledger), t(4));
    assert!(types(last(&plan)).contains(&"Complete=True".to_string()));
    assert_eq!(last(&plan).succeeded, Some(2));
}

#[test]
fn a_recorded_success_completes_once_terminating_pods_are_gone() {
    let j = with_status(started(1, Some(1)), |s| {
        s.succeeded = Some(1);
        s.conditions = Some(vec![new_condition(
            SUCCESS_CRITERIA_MET,
            true,
            "CompletionsReached",
            "Reached expected number of succeeded pods",
            t(1),
        )]);
    });
    let pods = [deleting(pod("extra", "Running"), t(1))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(2));
    assert!(plan.status_updates.iter().all(|s| cond(s, COMPLETE).is_none()));

    let plan = sync(&j, &[], Some(&Ledger::default()), t(3));
    assert_eq!(plan.status_updates.len(), 1);
    let done = last(&plan);
    assert_eq!(types(done), ["SuccessCriteriaMet=True", "Complete=True"]);
    assert_eq!(done.completion_time, Some(Time(t(3))));
}

#[test]
fn finished_jobs_get_an_empty_plan() {
    let j = with_status(job(2, Some(2)), |s| {
        s.conditions = Some(vec![new_condition(COMPLETE, true, "", "", t(0))]);
    });
    let plan = sync(&j, &[], Some(&Ledger::default()), t(5));
    assert_eq!(plan.create, 0);
    assert!(plan.delete.is_empty());
    assert!(plan.status_updates.is_empty());
    let failed = with_status(job(2, Some(2)), |s| {
        s.conditions = Some(vec![new_condition(FAILED, true, "", "", t(0))]);
    });
    assert_eq!(sync(&failed, &[], None, t(5)).create, 0);
}

// --- failure --------------------------------------------------------------------------------

#[test]
fn exceeding_the_backoff_limit_fails_through_failure_target() {
    let j = with_spec(started(1, Some(4)), |s| s.backoff_limit = Some(1));
    let pods = [failed_pod("f1", t(1)), failed_pod("f2", t(2)), ready(scheduled(pod("live", "Running")))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(3));
    assert_eq!(plan.create, 0);
    assert_eq!(names(&plan), ["live"]);
    assert_eq!(plan.status_updates.len(), 1, "Failed waits for the pod to go");
    let status = last(&plan);
    assert_eq!(types(status), ["FailureTarget=True"]);
    let target = cond(status, FAILURE_TARGET).expect("interim");
    assert_eq!(target.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(target.message.as_deref(), Some("Job has reached the specified backoff limit"));
    assert_eq!(status.failed, Some(2));
    assert_eq!(status.active, Some(0));
    assert_eq!(status.ready, Some(0));
    assert_eq!(status.terminating, Some(1));

    let j = after(&j, &plan);
    let pods = [failed_pod("f1", t(1)), failed_pod("f2", t(2))];
    let plan = sync(&j, &pods, Some(&plan.ledger), t(4));
    assert_eq!(plan.create, 0);
    assert_eq!(plan.status_updates.len(), 1);
    let status = last(&plan);
    assert_eq!(types(status), ["FailureTarget=True", "Failed=True"]);
    let failed = cond(status, FAILED).expect("terminal");
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(status.terminating, Some(0));
    assert_eq!(status.completion_time, None);
}

#[test]
fn exceeding_the_backoff_limit_without_active_pods_fails_at_once() {
    let j = with_spec(started(1, Some(1)), |s| s.backoff_limit = Some(0));
    let plan = sync(&j, &[failed_pod("f", t(1))], Some(&Ledger::default()), t(2));
    assert_eq!(plan.create, 0);
    assert_eq!(plan.status_updates.len(), 2);
    assert_eq!(types(&plan.status_updates[0]), ["FailureTarget=True"]);
    assert_eq!(types(&plan.status_updates[1]), ["FailureTarget=True", "Failed=True"]);
}

#[test]
fn failures_within_the_limit_do_not_fail_the_job() {
    let j = with_spec(started(1, Some(1)), |s| s.backoff_limit = Some(2));
    let pods = [failed_pod("f1", t(0)), failed_pod("f2", t(0))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(100));
    assert!(types(last(&plan)).is_empty());
    assert_eq!(last(&plan).failed, Some(2));
    assert_eq!(plan.create, 1);
}

#[test]
fn on_failure_restarts_count_against_the_backoff_limit() {
    let j = with_spec(started(1, Some(1)), |s| {
        s.backoff_limit = Some(2);
        if let Some(pod_spec) = s.template.spec.as_mut() {
            pod_spec.restart_policy = Some("OnFailure".into());
        }
    });
    let mut restarting = scheduled(pod("r", "Running"));
    if let Some(status) = restarting.status.as_mut() {
        status.container_statuses =
            Some(vec![ContainerStatus { name: "main".into(), restart_count: 2, ..ContainerStatus::default() }]);
    }
    let plan = sync(&j, &[restarting], Some(&Ledger::default()), t(1));
    let target = cond(last(&plan), FAILURE_TARGET).expect("failing");
    assert_eq!(target.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(names(&plan), ["r"]);
}

#[test]
fn a_passed_active_deadline_fails_the_job_and_deletes_its_pods() {
    let j = with_spec(started(1, Some(1)), |s| s.active_deadline_seconds = Some(30));
    let plan = sync(&j, &running(1), Some(&Ledger::default()), t(10));
    assert_eq!(plan.wake_after, Some(Duration::from_secs(20)));
    assert!(plan.status_updates.is_empty());

    let plan = sync(&j, &running(1), Some(&Ledger::default()), t(30));
    assert_eq!(names(&plan), ["p0"]);
    assert_eq!(plan.wake_after, None);
    let target = cond(last(&plan), FAILURE_TARGET).expect("failing");
    assert_eq!(target.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(target.message.as_deref(), Some("Job was active longer than specified deadline"));

    let j = after(&j, &plan);
    let plan = sync(&j, &[], Some(&plan.ledger), t(31));
    let failed = cond(last(&plan), FAILED).expect("terminal");
    assert_eq!(failed.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(plan.create, 0);
}

#[test]
fn the_deadline_does_not_run_while_suspended() {
    let j = with_spec(started(1, Some(1)), |s| {
        s.active_deadline_seconds = Some(30);
        s.suspend = Some(true);
    });
    let plan = sync(&j, &[], Some(&Ledger::default()), t(1000));
    assert!(cond(last(&plan), FAILURE_TARGET).is_none());
    assert_eq!(plan.wake_after, None);
}

// --- backoff --------------------------------------------------------------------------------

#[test]
fn a_failed_pod_is_replaced_after_ten_seconds() {
    let j = started(1, Some(1));
    let pods = [failed_pod("f", t(0))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(3));
    assert_eq!(plan.create, 0);
    assert_eq!(plan.wake_after, Some(Duration::from_secs(7)));
    assert_eq!(last(&plan).failed, Some(1));
    assert_eq!(last(&plan).active, Some(0));

    let j = after(&j, &plan);
    let plan = sync(&j, &pods, Some(&plan.ledger), t(10));
    assert_eq!(plan.create, 1);
    assert_eq!(plan.wake_after, None);
}

#[test]
fn the_backoff_doubles_with_each_failure() {
    let j = started(1, Some(1));
    let pods = [failed_pod("f1", t(0)), failed_pod("f2", t(0))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(5));
    assert_eq!(plan.wake_after, Some(Duration::from_secs(15)));
    let pods = [failed_pod("f1", t(0)), failed_pod("f2", t(0)), failed_pod("f3", t(0))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(5));
    assert_eq!(plan.wake_after, Some(Duration::from_secs(35)));
}

#[test]
fn the_backoff_is_capped_at_six_minutes() {
    let j = with_spec(started(1, Some(1)), |s| s.backoff_limit = Some(100));
    let ledger = Ledger {
        counted: BTreeSet::new(),
        backoff: BackoffRecord { failures_after_last_success: 20, last_failure_time: Some(t(0)) },
    };
    let plan = sync(&j, &[], Some(&ledger), t(0));
    assert_eq!(plan.wake_after, Some(Duration::from_secs(360)));
    let plan = sync(&j, &[], Some(&ledger), t(360));
    assert_eq!(plan.create, 1);
}

#[test]
fn a_success_clears_the_backoff() {
    let j = started(1, Some(3));
    let ledger = Ledger {
        counted: BTreeSet::new(),
        backoff: BackoffRecord { failures_after_last_success: 3, last_failure_time: Some(t(0)) },
    };
    let plan = sync(&j, &[succeeded_pod("ok", t(1))], Some(&ledger), t(2));
    assert_eq!(plan.create, 1);
    assert_eq!(plan.ledger.backoff, BackoffRecord::default());
}

// --- suspend and resume ---------------------------------------------------------------------

#[test]
fn suspending_deletes_active_pods_and_sets_suspended() {
    let j = with_spec(started(2, Some(2)), |s| s.suspend = Some(true));
    let pods = [ready(scheduled(pod("a", "Running"))), scheduled(pod("b", "Running"))];
    let plan = sync(&j, &pods, Some(&Ledger::default()), t(5));
    assert_eq!(plan.create, 0);
    assert_eq!(plan.delete.len(), 2);
    let status = last(&plan);
    assert_eq!(status.active, Some(0));
    assert_eq!(status.ready, Some(0));
    assert_eq!(status.terminating, Some(2));
    let suspended = cond(status, SUSPENDED).expect("suspended");
    assert_eq!(suspended.status, "True");
    assert_eq!(suspended.reason.as_deref(), Some("JobSuspended"));
    assert_eq!(suspended.message.as_deref(), Some("Job suspended"));
    assert_eq!(suspended.last_transition_time, Some(Time(t(5))));
    assert_eq!(status.start_time, Some(Time(t(0))), "kept while suspended");
}

#[test]
fn a_job_created_suspended_does_not_start() {
    let j = with_spec(job(2, Some(2)), |s| s.suspend = Some(true));
    let plan = sync(&j, &[], None, t(0));
    assert_eq!(plan.create, 0);
    let status = last(&plan);
    assert_eq!(status.start_time, None);
    assert_eq!(types(status), ["Suspended=True"]);

    let j = after(&j, &plan);
    let plan = sync(&j, &[], Some(&plan.ledger), t(9));
    assert!(plan.status_updates.is_empty());
}

#[test]
fn resuming_creates_pods_and_resets_the_start_time() {
    let j = with_status(job(2, Some(2)), |s| {
        s.start_time = Some(Time(t(0)));
        s.conditions = Some(vec![new_condition(SUSPENDED, true, "JobSuspended", "Job suspended", t(1))]);
    });
    let plan = sync(&j, &[], Some(&Ledger::default()), t(100));
    assert_eq!(plan.create, 2);
    let status = last(&plan);
    assert_eq!(status.start_time, Some(Time(t(100))));
    let resumed = cond(status, SUSPENDED).expect("kept, now False");
    assert_eq!(resumed.status, "False");
    assert_eq!(resumed.reason.as_deref(), Some("JobResumed"));
    assert_eq!(resumed.message.as_deref(), Some("Job resumed"));
    assert_eq!(resumed.last_transition_time, Some(Time(t(100))));
}

#[test]
fn the_deadline_counts_from_the_resume() {
    let j = with_spec(
        with_status(job(1, Some(1)), |s| {
            s.start_time = Some(Time(t(0)));
            s.conditions = Some(vec![new_condition(SUSPENDED, true, "JobSuspended", "Job suspended", t(1))]);
        }),
        |s| s.active_deadline_seconds = Some(1000),
    );
    let plan = sync(&j, &[], Some(&Ledger::default()), t(100));
    assert_eq!(plan.create, 1);
    let j = after(&j, &plan);
    let plan = sync(&j, &running(1), Some(&plan.ledger), t(1050));
    assert!(cond(last_or(&plan, &j), FAILURE_TARGET).is_none());
    assert_eq!(plan.wake_after, Some(Duration::from_secs(50)));
}

fn last_or<'a>(plan: &'a SyncPlan, job: &'a Job) -> &'a JobStatus {
    plan.status_updates.last().or(job.status.as_ref()).expect("some status")
}
