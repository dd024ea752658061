//! Job conditions, kept the way the real controller keeps them (`ensureJobConditionStatus`), so
//! clients that wait on `kubectl wait --for=condition=...` see the same transitions.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The Job reached its completions; terminal.
pub const COMPLETE: &str = "Complete";
/// The Job failed; terminal.
pub const FAILED: &str = "Failed";
/// Interim condition written before `Failed` while the Job's pods are still terminating.
pub const FAILURE_TARGET: &str = "FailureTarget";
/// Interim condition written before `Complete`.
pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
/// Tracks `spec.suspend`; only ever added once a Job has been suspended.
pub const SUSPENDED: &str = "Suspended";

/// Reason on `SuccessCriteriaMet` and `Complete` when the completion count is reached.
pub const REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";
/// Message that goes with [`REASON_COMPLETIONS_REACHED`].
pub const MESSAGE_COMPLETIONS_REACHED: &str = "Reached expected number of succeeded pods";
/// Reason for failing a Job whose failed pods exceed `spec.backoffLimit`.
pub const REASON_BACKOFF_LIMIT: &str = "BackoffLimitExceeded";
/// Message that goes with [`REASON_BACKOFF_LIMIT`].
pub const MESSAGE_BACKOFF_LIMIT: &str = "Job has reached the specified backoff limit";
/// Reason for failing a Job that ran past `spec.activeDeadlineSeconds`.
pub const REASON_DEADLINE: &str = "DeadlineExceeded";
/// Message that goes with [`REASON_DEADLINE`].
pub const MESSAGE_DEADLINE: &str = "Job was active longer than specified deadline";

/// The status as the Job controller of a server of minor version `minor` writes it: before
/// 1.29 there is no `terminating` count (JobPodReplacementPolicy was alpha, its field dropped),
/// and before 1.31 no interim conditions, the terminal one being written at once
/// (`SuccessCriteriaMet` becomes `Complete` with its completion time, `FailureTarget`
/// becomes `Failed`).
pub fn fit_to_server(mut status: JobStatus, minor: u32) -> JobStatus {
    if minor < 29 {
        status.terminating = None;
    }
    if minor < 31
        && let Some(conditions) = status.conditions.as_mut()
    {
        let terminal = |c: &JobCondition| c.type_ == COMPLETE || c.type_ == FAILED;
        let has_terminal = conditions.iter().any(terminal);
        let mut completed_at = None;
        conditions.retain_mut(|c| match c.type_.as_str() {
            SUCCESS_CRITERIA_MET | FAILURE_TARGET if has_terminal => false,
            SUCCESS_CRITERIA_MET => {
                c.type_ = COMPLETE.to_string();
                completed_at = c.last_transition_time.clone();
                true
            }
            FAILURE_TARGET => {
                c.type_ = FAILED.to_string();
                true
            }
            _ => true,
        });
        if status.completion_time.is_none() && completed_at.is_some() {
            status.completion_time = completed_at;
        }
    }
    status
}

/// The condition of that type, if present.
pub fn find<'a>(conditions: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether a condition of that type is present with status `True`.
pub fn is_true(conditions: &[JobCondition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Whether the Job has reached a terminal condition (`Complete` or `Failed` is `True`).
/// Finished Jobs are never touched again by the Job controller, only by the TTL controller.
pub fn is_finished(status: Option<&JobStatus>) -> bool {
    let conditions = status.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    is_true(conditions, COMPLETE) || is_true(conditions, FAILED)
}

/// When the Job finished: the transition time of its terminal condition, falling back to
/// `completionTime`. `None` when not finished or when no time was recorded.
pub fn finish_time(status: Option<&JobStatus>) -> Option<Timestamp> {
    let status = status?;
    let conditions = status.conditions.as_deref().unwrap_or_default();
    [COMPLETE, FAILED]
        .iter()
        .filter_map(|t| find(conditions, t))
        .find(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref().map(|t| t.0))
        .or_else(|| status.completion_time.as_ref().map(|t| t.0))
}

/// A fresh condition whose probe and transition times are both `now`.
pub fn new_condition(type_: &str, status: bool, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: non_empty(reason),
        message: non_empty(message),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Sets a condition to the given status, reason and message. A differing condition is replaced
/// (with fresh timestamps); a missing one is only added when `status` is true, so a Job that was
/// never suspended never shows `Suspended=False`. Returns whether anything changed.
pub fn ensure(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let wanted = new_condition(type_, status, reason, message, now);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let same = existing.status == wanted.status
                && existing.reason == wanted.reason
                && existing.message == wanted.message;
            if !same {
                *existing = wanted;
            }
            !same
        }
        None if status => {
            conditions.push(wanted);
            true
        }
        None => false,
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_older_server_gets_the_terminal_condition_at_once_and_no_terminating_count() {
        let at = Some(Time(Timestamp::UNIX_EPOCH));
        let condition = |t: &str| JobCondition {
            type_: t.to_string(),
            status: "True".to_string(),
            last_transition_time: at.clone(),
            ..Default::default()
        };
        let status = JobStatus {
            terminating: Some(1),
            conditions: Some(vec![condition(SUCCESS_CRITERIA_MET)]),
            ..Default::default()
        };
        let old = fit_to_server(status.clone(), 28);
        assert_eq!(old.terminating, None);
        let types: Vec<String> = old.conditions.iter().flatten().map(|c| c.type_.clone()).collect();
        assert_eq!(types, [COMPLETE]);
        assert_eq!(old.completion_time, at);
        assert_eq!(fit_to_server(status.clone(), 33), status, "a current server gets it unchanged");
        let both = JobStatus {
            conditions: Some(vec![condition(SUCCESS_CRITERIA_MET), condition(COMPLETE)]),
            ..Default::default()
        };
        let types: Vec<String> = fit_to_server(both, 30).conditions.iter().flatten().map(|c| c.type_.clone()).collect();
        assert_eq!(types, [COMPLETE]);
    }
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn ensure_does_not_add_false_conditions() {
        let mut conds = Vec::new();
        assert!(!ensure(&mut conds, SUSPENDED, false, "JobResumed", "Job resumed", t(0)));
        assert!(conds.is_empty());
    }

    #[test]
    fn ensure_adds_true_conditions_and_is_idempotent() {
        let mut conds = Vec::new();
        assert!(ensure(&mut conds, SUSPENDED, true, "JobSuspended", "Job suspended", t(0)));
        assert!(!ensure(&mut conds, SUSPENDED, true, "JobSuspended", "Job suspended", t(5)));
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].last_transition_time, Some(Time(t(0))));
    }

    #[test]
    fn ensure_flips_existing_conditions_with_fresh_times() {
        let mut conds = vec![new_condition(SUSPENDED, true, "JobSuspended", "Job suspended", t(0))];
        assert!(ensure(&mut conds, SUSPENDED, false, "JobResumed", "Job resumed", t(9)));
        assert_eq!(conds[0].status, "False");
        assert_eq!(conds[0].reason.as_deref(), Some("JobResumed"));
        assert_eq!(conds[0].last_transition_time, Some(Time(t(9))));
        assert_eq!(conds[0].last_probe_time, Some(Time(t(9))));
    }

    #[test]
    fn finished_means_complete_or_failed_true() {
        let mut status = JobStatus::default();
        assert!(!is_finished(Some(&status)));
        status.conditions = Some(vec![new_condition(SUCCESS_CRITERIA_MET, true, "", "", t(0))]);
        assert!(!is_finished(Some(&status)));
        status.conditions = Some(vec![new_condition(FAILED, true, "", "", t(0))]);
        assert!(is_finished(Some(&status)));
        status.conditions = Some(vec![new_condition(COMPLETE, false, "", "", t(0))]);
        assert!(!is_finished(Some(&status)));
        assert!(!is_finished(None));
    }

    #[test]
    fn finish_time_prefers_the_terminal_condition() {
        let status = JobStatus {
            completion_time: Some(Time(t(100))),
            conditions: Some(vec![new_condition(COMPLETE, true, "", "", t(42))]),
            ..JobStatus::default()
        };
        assert_eq!(finish_time(Some(&status)), Some(t(42)));
        let no_conditions = JobStatus { completion_time: Some(Time(t(100))), ..JobStatus::default() };
        assert_eq!(finish_time(Some(&no_conditions)), Some(t(100)));
        assert_eq!(finish_time(Some(&JobStatus::default())), None);
    }

    #[test]
    fn empty_reason_and_message_are_omitted() {
        let c = new_condition(COMPLETE, true, "", "", t(0));
        assert_eq!(c.reason, None);
        assert_eq!(c.message, None);
    }
}
