//! The TTL-after-finished controller's decision: when a finished Job with
//! `ttlSecondsAfterFinished` is due for deletion.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;

use super::conditions;

/// What to do about a Job's time to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlDecision {
    /// No TTL applies: not finished, no `ttlSecondsAfterFinished`, or already being deleted.
    NotApplicable,
    /// The TTL has run out: delete the Job now.
    Expired,
    /// Look again after this much cluster time.
    ExpiresIn(Duration),
}

/// Decides whether `job` should be deleted at cluster time `now`. The clock starts at the
/// transition time of the Job's `Complete`/`Failed` condition.
pub fn ttl_decision(job: &Job, now: Timestamp) -> TtlDecision {
    if job.metadata.deletion_timestamp.is_some() || !conditions::is_finished(job.status.as_ref()) {
        return TtlDecision::NotApplicable;
    }
    let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
        return TtlDecision::NotApplicable;
    };
    let Some(finished) = conditions::finish_time(job.status.as_ref()) else {
        return TtlDecision::NotApplicable;
    };
    let expires = finished.saturating_add(SignedDuration::from_secs(i64::from(ttl.max(0)))).unwrap_or(Timestamp::MAX);
    if now >= expires {
        return TtlDecision::Expired;
    }
    let left = Duration::try_from(expires.duration_since(now)).unwrap_or(Duration::ZERO);
    TtlDecision::ExpiresIn(left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::conditions::{COMPLETE, FAILED, SUCCESS_CRITERIA_MET, new_condition};
    use crate::controllers::job::test_support::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn finished_job(ttl: Option<i32>, condition: &str, at: Timestamp) -> k8s_openapi::api::batch::v1::Job {
        let j = with_spec(job(1, Some(1)), |s| s.ttl_seconds_after_finished = ttl);
        with_status(j, |s| s.conditions = Some(vec![new_condition(condition, true, "", "", at)]))
    }

    #[test]
    fn unfinished_jobs_are_kept() {
        let j = with_spec(job(1, Some(1)), |s| s.ttl_seconds_after_finished = Some(0));
        assert_eq!(ttl_decision(&j, t(100)), TtlDecision::NotApplicable);
        let interim = finished_job(Some(0), SUCCESS_CRITERIA_MET, t(0));
        assert_eq!(ttl_decision(&interim, t(100)), TtlDecision::NotApplicable);
    }

    #[test]
    fn jobs_without_ttl_are_kept() {
        assert_eq!(ttl_decision(&finished_job(None, COMPLETE, t(0)), t(1_000_000)), TtlDecision::NotApplicable);
    }

    #[test]
    fn waits_until_finish_plus_ttl() {
        let j = finished_job(Some(60), COMPLETE, t(0));
        assert_eq!(ttl_decision(&j, t(15)), TtlDecision::ExpiresIn(Duration::from_secs(45)));
        assert_eq!(ttl_decision(&j, t(60)), TtlDecision::Expired);
        assert_eq!(ttl_decision(&j, t(61)), TtlDecision::Expired);
    }

    #[test]
    fn failed_jobs_expire_too() {
        let j = finished_job(Some(10), FAILED, t(0));
        assert_eq!(ttl_decision(&j, t(10)), TtlDecision::Expired);
    }

    #[test]
    fn zero_ttl_expires_at_once() {
        let j = finished_job(Some(0), COMPLETE, t(5));
        assert_eq!(ttl_decision(&j, t(5)), TtlDecision::Expired);
    }

    #[test]
    fn jobs_being_deleted_are_left_alone() {
        let mut j = finished_job(Some(0), COMPLETE, t(0));
        j.metadata.deletion_timestamp = Some(Time(t(1)));
        assert_eq!(ttl_decision(&j, t(10)), TtlDecision::NotApplicable);
    }
}
