//! Exponential delay before replacing failed pods, in cluster time. Mirrors the real
//! controller's `backoffRecord`: failures since the last success, and when the last one happened.

use std::time::Duration;

use jiff::Timestamp;

/// Delay after the first failure.
pub const INITIAL_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// Upper bound of the doubling delay.
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(6 * 60);

/// What the pod-failure backoff remembers about one Job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    /// Pods that failed after the most recent success (or since the start).
    pub failures_after_last_success: u32,
    /// Finish time of the most recent of those failures.
    pub last_failure_time: Option<Timestamp>,
}

impl BackoffRecord {
    /// Folds in pods that finished since the last record, given their finish times. A success
    /// resets the count, except for failures that finished after the latest success.
    pub fn record(&self, new_succeeded: &[Timestamp], new_failed: &[Timestamp]) -> Self {
        let mut failed = new_failed.to_vec();
        failed.sort();
        let Some(last_success) = new_succeeded.iter().max() else {
            let Some(last_failure) = failed.last() else {
                return self.clone();
            };
            let added = u32::try_from(failed.len()).unwrap_or(u32::MAX);
            return Self {
                failures_after_last_success: self.failures_after_last_success.saturating_add(added),
                last_failure_time: Some(*last_failure),
            };
        };
        let after: Vec<&Timestamp> = failed.iter().filter(|t| *t > last_success).collect();
        Self {
            failures_after_last_success: u32::try_from(after.len()).unwrap_or(u32::MAX),
            last_failure_time: after.last().map(|t| **t),
        }
    }

    /// The delay the current failure count calls for: 10 s doubled per extra failure, capped.
    pub fn delay(&self) -> Duration {
        if self.failures_after_last_success == 0 {
            return Duration::ZERO;
        }
        let mut delay = INITIAL_POD_FAILURE_BACKOFF;
        for _ in 1..self.failures_after_last_success {
            delay = delay.saturating_mul(2);
            if delay >= MAX_POD_FAILURE_BACKOFF {
                return MAX_POD_FAILURE_BACKOFF;
            }
        }
        delay
    }

    /// Cluster time left before a replacement pod may be created (zero when allowed now).
    pub fn remaining(&self, now: Timestamp) -> Duration {
        let Some(last) = self.last_failure_time else {
            return Duration::ZERO;
        };
        let elapsed = Duration::try_from(now.duration_since(last)).unwrap_or(Duration::ZERO);
        self.delay().saturating_sub(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn failures(n: u32) -> BackoffRecord {
        BackoffRecord { failures_after_last_success: n, last_failure_time: Some(t(0)) }
    }

    #[test]
    fn no_failures_no_delay() {
        assert_eq!(BackoffRecord::default().remaining(t(0)), Duration::ZERO);
    }

    #[test]
    fn delay_doubles_from_ten_seconds() {
        assert_eq!(failures(1).delay(), Duration::from_secs(10));
        assert_eq!(failures(2).delay(), Duration::from_secs(20));
        assert_eq!(failures(3).delay(), Duration::from_secs(40));
        assert_eq!(failures(6).delay(), Duration::from_secs(320));
    }

    #[test]
    fn delay_is_capped_at_six_minutes() {
        assert_eq!(failures(7).delay(), MAX_POD_FAILURE_BACKOFF);
        assert_eq!(failures(1000).delay(), MAX_POD_FAILURE_BACKOFF);
    }

    #[test]
    fn remaining_counts_from_the_last_failure() {
        let record = failures(2);
        assert_eq!(record.remaining(t(5)), Duration::from_secs(15));
        assert_eq!(record.remaining(t(20)), Duration::ZERO);
        assert_eq!(record.remaining(t(500)), Duration::ZERO);
    }

    #[test]
    fn new_failures_accumulate() {
        let record = BackoffRecord::default().record(&[], &[t(3), t(1)]);
        assert_eq!(record.failures_after_last_success, 2);
        assert_eq!(record.last_failure_time, Some(t(3)));
        let record = record.record(&[], &[t(7)]);
        assert_eq!(record.failures_after_last_success, 3);
        assert_eq!(record.last_failure_time, Some(t(7)));
    }

    #[test]
    fn a_success_resets_the_count() {
        let record = failures(5).record(&[t(10)], &[]);
        assert_eq!(record, BackoffRecord::default());
    }

    #[test]
    fn failures_after_the_latest_success_still_count() {
        let record = failures(5).record(&[t(10)], &[t(5), t(11), t(12)]);
        assert_eq!(record.failures_after_last_success, 2);
        assert_eq!(record.last_failure_time, Some(t(12)));
    }

    #[test]
    fn nothing_new_keeps_the_record() {
        assert_eq!(failures(3).record(&[], &[]), failures(3));
    }
}
