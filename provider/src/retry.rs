//! One retry policy for the API calls made inside a wait: the reads of a readiness wait (and of
//! the resume-check around it) and the deletes of the clean-up after a failed acquire.
//!
//! A transient failure is tried again with capped exponential back-off until the wait's
//! deadline; any other failure ends the call at once, as it came. Transient are 5xx, 429 and
//! 503 (after their Retry-After; when that lands past the deadline, waiting cannot help and the
//! call stops at once), timeouts, failed connections, and 410, which outside a watch says
//! nothing definite about the object. No attempt starts after the deadline.

use std::time::Duration;

use crate::clock::{Clock, Deadline};
use crate::errors::{FromKube, ProviderError};
use crate::kube_api::KubeError;

/// First pause after a transient failure; doubles up to [`BACKOFF_CAP`].
const BACKOFF_START: Duration = Duration::from_millis(50);
/// Longest pause between attempts, unless the server's Retry-After asks for more.
const BACKOFF_CAP: Duration = Duration::from_secs(1);

/// Why a retried call stopped without an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GaveUp {
    /// The failure is not transient: the error as it came.
    Final(KubeError),
    /// The failure was transient, but the deadline came first: the last error.
    Deadline(KubeError),
}

impl GaveUp {
    /// The classified error for the caller; `action` names the call (`get Sandbox ns/pc-1`).
    pub fn into_error(self, action: &str) -> ProviderError {
        match self {
            Self::Final(e) => ProviderError::from_kube(&e, action),
            Self::Deadline(e) => ProviderError::from_kube(&e, action)
                .map_message(|m| format!("{m} (It was asked again until the call's deadline.)")),
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
/// reopened, the deletes of one clean-up): consecutive failures lengthen the pause.
#[derive(Debug, Default)]
pub struct Retrier {
    failures: u32,
}

impl Retrier {
    /// A retrier that has seen no failure.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets past failures after a call that worked.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// After a failed call: pauses and returns `Ok` when the call should be made again, or says
    /// why not.
    pub fn failed(&mut self, clock: &dyn Clock, deadline: Deadline, error: KubeError) -> Result<(), GaveUp> {
        let retry_after = match transience(&error) {
            Transience::Final => return Err(GaveUp::Final(error)),
            Transience::Transient { retry_after } => retry_after,
        };
        let backoff = BACKOFF_START.saturating_mul(1 << self.failures.min(5)).min(BACKOFF_CAP);
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
