//! Time, behind a trait so tests can run hours of lease life in microseconds.
//!
//! Wall-clock time stamps expiries (`shutdownTime`, lease `expires-at`); the monotonic clock
//! measures deadlines, so a wall-clock jump never stretches or cuts a wait.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// The real clock: `std::time`, which wasm32-wasip2 maps to WASI clocks.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose monotonic origin is now.
    pub fn new() -> Self {
        Self { origin: Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            // A clock set before 1970 is broken; negative millis keep the arithmetic honest.
            Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
        }
    }

    fn monotonic(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_moves_forward() {
        let clock = SystemClock::new();
        let deadline = Deadline::after(&clock, Duration::from_secs(60));
        assert!(!deadline.passed(&clock));
        assert!(clock.now_millis() > 1_700_000_000_000);
    }
}
