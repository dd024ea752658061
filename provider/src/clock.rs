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

/// Formats epoch millis as RFC 3339 in UTC with whole seconds (`2026-11-29T09:41:56Z`),
/// rounding down so a deadline is never later than asked. Out of jiff's range (beyond the year
/// 9999 either way) it clamps to the nearest representable time, so a time far in the past
/// never reads as one far in the future.
pub fn rfc3339_seconds(epoch_millis: i64) -> String {
    match jiff::Timestamp::from_second(epoch_millis.div_euclid(1000)) {
        Ok(ts) => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Err(_) if epoch_millis < 0 => jiff::Timestamp::MIN.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Err(_) => "9999-12-31T23:59:59Z".to_string(),
    }
}

/// Parses an RFC 3339 time stamp (as Kubernetes writes them) into epoch millis.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    text.parse::<jiff::Timestamp>().ok().map(|ts| ts.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_rounds_down_to_whole_seconds() {
        assert_eq!(rfc3339_seconds(1_796_032_916_999), "2026-11-30T10:01:56Z");
        assert_eq!(parse_rfc3339("2026-11-30T10:01:56Z"), Some(1_796_032_916_000));
        assert_eq!(parse_rfc3339("not a time"), None);
    }

    #[test]
    fn rfc3339_clamps_to_the_nearest_end_of_its_range() {
        assert_eq!(rfc3339_seconds(i64::MAX), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339_seconds(i64::MIN), "-9999-01-02T01:59:59Z", "the earliest, not the latest");
    }

    #[test]
    fn system_clock_moves_forward() {
        let clock = SystemClock::new();
        let deadline = Deadline::after(&clock, Duration::from_secs(60));
        assert!(!deadline.passed(&clock));
        assert!(clock.now_millis() > 1_700_000_000_000);
    }
}
