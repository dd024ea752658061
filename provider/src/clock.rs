//! Time, behind a trait so tests can run hours of lease life in microseconds.
//!
//! Wall-clock time stamps expiries (`shutdownTime`, lease `expires-at`); the monotonic clock
//! measures deadlines, so a wall-clock jump never stretches or cuts a wait.

use std::time::Duration;

/// Where the provider reads time from.
pub trait Clock {
    /// Milliseconds since the Unix epoch (UTC).
    fn now_millis(&self) -> i64;
    /// Time since an arbitrary fixed origin; only differences mean something.
    fn monotonic(&self) -> Duration;
    /// Blocks for `duration` (used only for capped back-off between watch reconnects).
    fn sleep(&self, duration: Duration);
    /// Time left before the host ends the current call; `None` where no host sets a deadline
    /// (native use). Waits and clean-up are planned inside it.
    fn call_remaining(&self) -> Option<Duration> {
        None
    }
    /// The deadline the host gives every call, so a config whose waits cannot fit is refused.
    fn call_timeout(&self) -> Option<Duration> {
        None
    }
}

/// One point in monotonic time that a whole call must finish by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    at: Duration,
}

impl Deadline {
    /// The deadline `budget` from now.
    pub fn after(clock: &dyn Clock, budget: Duration) -> Self {
        Self { at: clock.monotonic() + budget }
    }

    /// Time left; zero once passed.
    pub fn remaining(&self, clock: &dyn Clock) -> Duration {
        self.at.saturating_sub(clock.monotonic())
    }

    /// Whether no time is left.
    pub fn passed(&self, clock: &dyn Clock) -> bool {
        self.remaining(clock).is_zero()
    }
}
