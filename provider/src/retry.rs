//! One retry policy for the API calls made inside a wait: the reads of a readiness wait (and of
//! the resume-check around it) and the deletes of the clean-up after a failed acquire.
//!
//! A transient failure is tried again with capped exponential back-off until the wait's
//! deadline; any other failure ends the call at once, as it came. Transient are 5xx, 429 and
//! 503 (after their Retry-After; when that lands past the deadline, waiting cannot help and the
//! call stops at once), timeouts, failed connections, and 410, which outside a watch says
//! nothing definite about the object. No attempt starts after the deadline.
//!
//! Failed connections are the exception to "until the deadline": when they keep failing, with no
//! answer of any kind in between, for [`LOST_CLUSTER_AFTER`], the cluster stopped answering (a
//! refused connection means nothing listens any more), and that is reported as such at once
//! instead of waiting out the deadline as if the sandbox were slow.

use std::time::Duration;

use crate::clock::{Clock, Deadline};
use crate::errors::{FromKube, ProviderError};
use crate::kube_api::KubeError;

/// First pause after a transient failure; doubles up to [`BACKOFF_CAP`].
const BACKOFF_START: Duration = Duration::from_millis(50);
/// Longest pause between attempts, unless the server's Retry-After asks for more.
const BACKOFF_CAP: Duration = Duration::from_secs(1);
/// How long connections may keep failing before the cluster counts as lost.
pub const LOST_CLUSTER_AFTER: Duration = Duration::from_secs(2);

/// Why a retried call stopped without an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GaveUp {
    /// The failure is not transient: the error as it came.
    Final(KubeError),
    /// The failure was transient, but the deadline came first: the last error.
    Deadline(KubeError),
    /// Connections failed for this long without any answer: the cluster stopped answering.
    Lost { error: KubeError, after: Duration },
}

impl GaveUp {
    /// The classified error for the caller; `action` names the call (`get Sandbox ns/pc-1`).
    pub fn into_error(self, action: &str) -> ProviderError {
        match self {
            Self::Final(e) => ProviderError::from_kube(&e, action),
            Self::Deadline(e) => ProviderError::from_kube(&e, action)
                .map_message(|m| format!("{m} (It was asked again until the call's deadline.)")),
            Self::Lost { error, after } => ProviderError::unavailable(format!(
                "{action} failed: the cluster stopped answering (connections to the API server failed for {:.1} s: \
                 {error}). Check that the API server is up and reachable from the host, then retry.",
                after.as_secs_f64()
            )),
        }
    }

    /// The last failure.
    pub fn error(&self) -> &KubeError {
        match self {
            Self::Final(e) | Self::Deadline(e) | Self::Lost { error: e, .. } => e,
        }
    }
}

/// Whether a failure may go away by itself, and the pause the server asked for.
enum Transience {
    Final,
    Transient { retry_after: Option<Duration> },
}

fn transience(error: &KubeError) -> Transience {
    match error {
        KubeError::Unavailable { retry_after_seconds, .. } => {
            Transience::Transient { retry_after: retry_after_seconds.map(|s| Duration::from_secs(u64::from(s))) }
        }
        KubeError::Transport(_) | KubeError::Timeout(_) | KubeError::Gone(_) => {
            Transience::Transient { retry_after: None }
        }
        KubeError::Other { code, .. } if *code == 429 || *code >= 500 => Transience::Transient { retry_after: None },
        _ => Transience::Final,
    }
}

/// The back-off state of one call, or of a stream of calls to one place (a watch that is
/// reopened, the deletes of one clean-up): consecutive failures lengthen the pause, and
/// connections failing since a point in time tell a lost cluster.
#[derive(Debug, Default)]
pub struct Retrier {
    failures: u32,
    /// When connections started failing, with no answer since.
    unreachable_since: Option<Duration>,
}

impl Retrier {
    /// A retrier that has seen no failure.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets past failures after a call that worked.
    pub fn succeeded(&mut self) {
        self.failures = 0;
        self.unreachable_since = None;
    }

    /// Notes that the server answered (a watch opened), without the progress that would reset
    /// the back-off.
    pub fn answered(&mut self) {
        self.unreachable_since = None;
    }

    /// After a failed call: pauses and returns `Ok` when the call should be made again, or says
    /// why not.
    pub fn failed(&mut self, clock: &dyn Clock, deadline: Deadline, error: KubeError) -> Result<(), GaveUp> {
        let retry_after = match transience(&error) {
            Transience::Final => return Err(GaveUp::Final(error)),
            Transience::Transient { retry_after } => retry_after,
        };
        let now = clock.monotonic();
        let mut backoff = BACKOFF_START.saturating_mul(1 << self.failures.min(5)).min(BACKOFF_CAP);
        if let KubeError::Transport(_) = error {
            let since = *self.unreachable_since.get_or_insert(now);
            let failing = now.saturating_sub(since);
            if failing >= LOST_CLUSTER_AFTER {
                return Err(GaveUp::Lost { error, after: failing });
            }
            // The last attempt lands when the cluster would count as lost.
            backoff = backoff.min(LOST_CLUSTER_AFTER.saturating_sub(failing));
        } else {
            self.unreachable_since = None;
        }
        let pause = retry_after.map_or(backoff, |asked| asked.max(backoff));
        if pause >= deadline.remaining(clock) {
            return Err(GaveUp::Deadline(error));
        }
        self.failures = self.failures.saturating_add(1);
        clock.sleep(pause);
        Ok(())
    }

    /// Makes `call` until it answers or the policy gives up.
    pub fn call<T>(
        &mut self,
        clock: &dyn Clock,
        deadline: Deadline,
        mut call: impl FnMut() -> Result<T, KubeError>,
    ) -> Result<T, GaveUp> {
        loop {
            match call() {
                Ok(answer) => {
                    self.succeeded();
                    return Ok(answer);
                }
                Err(e) => self.failed(clock, deadline, e)?,
            }
        }
    }
}

/// Makes one call under the policy (see the module docs).
pub fn retry<T>(
    clock: &dyn Clock,
    deadline: Deadline,
    call: impl FnMut() -> Result<T, KubeError>,
) -> Result<T, GaveUp> {
    Retrier::new().call(clock, deadline, call)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kube::FakeClock;

    fn failing(errors: Vec<KubeError>) -> impl FnMut() -> Result<&'static str, KubeError> {
        let mut errors = errors.into_iter();
        move || errors.next().map_or(Ok("answer"), Err)
    }

    #[test]
    fn transient_failures_back_off_with_a_cap_until_an_answer() {
        let clock = FakeClock::new(0);
        let deadline = Deadline::after(&clock, Duration::from_secs(10));
        let errors = vec![KubeError::Other { code: 500, message: "x".into() }; 7];
        assert_eq!(retry(&clock, deadline, failing(errors)), Ok("answer"));
        // 50 + 100 + 200 + 400 + 800 + 1000 + 1000 ms.
        assert_eq!(clock.monotonic(), Duration::from_millis(3550));
    }

    #[test]
    fn final_failures_end_the_call_at_once() {
        let clock = FakeClock::new(0);
        let deadline = Deadline::after(&clock, Duration::from_secs(10));
        for error in [KubeError::NotFound("x".into()), KubeError::Forbidden("x".into()), KubeError::Invalid("x".into())]
        {
            assert_eq!(retry(&clock, deadline, failing(vec![error.clone()])), Err(GaveUp::Final(error)));
        }
        assert_eq!(clock.monotonic(), Duration::ZERO);
    }

    #[test]
    fn connections_failing_for_a_while_are_a_lost_cluster_well_before_the_deadline() {
        let clock = FakeClock::new(0);
        let deadline = Deadline::after(&clock, Duration::from_secs(20));
        let refused = KubeError::Transport("connect: connection refused".into());
        match retry(&clock, deadline, failing(vec![refused.clone(); 100])) {
            Err(GaveUp::Lost { error, after }) => assert_eq!((error, after), (refused.clone(), LOST_CLUSTER_AFTER)),
            other => panic!("{other:?}"),
        }
        assert_eq!(clock.monotonic(), LOST_CLUSTER_AFTER);
        let message = GaveUp::Lost { error: refused.clone(), after: LOST_CLUSTER_AFTER }.into_error("watch pods in ns");
        assert_eq!((message.kind(), message.retryable()), ("unavailable", true));
        assert!(message.message().contains("the cluster stopped answering"), "{message}");

        // Any answer in between (here a 500) means the cluster is there: back to the deadline.
        let clock = FakeClock::new(0);
        let deadline = Deadline::after(&clock, Duration::from_secs(20));
        let server_error = KubeError::Other { code: 500, message: "x".into() };
        let mut errors = Vec::new();
        for _ in 0..4 {
            errors.extend([refused.clone(), refused.clone(), server_error.clone()]);
        }
        assert_eq!(retry(&clock, deadline, failing(errors)), Ok("answer"));
    }

    #[test]
    fn no_attempt_starts_after_the_deadline() {
        let clock = FakeClock::new(0);
        let deadline = Deadline::after(&clock, Duration::from_millis(120));
        let errors = vec![KubeError::Timeout("slow".into()); 10];
        assert_eq!(retry(&clock, deadline, failing(errors)), Err(GaveUp::Deadline(KubeError::Timeout("slow".into()))));
        assert_eq!(clock.monotonic(), Duration::from_millis(50), "the next pause (100 ms) would pass the deadline");
        let message = GaveUp::Deadline(KubeError::Timeout("slow".into())).into_error("get Job ns/pc-1").to_string();
        assert!(message.contains("asked again until the call's deadline"), "{message}");
    }
}
