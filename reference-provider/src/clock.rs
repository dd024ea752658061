//! Time and the host's deadline, behind a trait so tests can run a lease's whole life, and
//! every stall, in microseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the provider reads time from and how it waits.
pub trait Clock {
    /// Milliseconds since the Unix epoch (UTC): leases expire by it.
    fn now_millis(&self) -> i64;
    /// Blocks for `duration`: the configured delays and stalls.
    fn sleep(&self, duration: Duration);
    /// Time left before the host ends the current call; `None` where no host sets a deadline
    /// (native use).
    fn call_remaining(&self) -> Option<Duration> {
        None
    }
    /// The deadline the host gives every call, so `validate-config` can refuse a delay that
    /// cannot fit.
    fn call_timeout(&self) -> Option<Duration> {
        None
    }
}

/// The real clock: `std::time`, which wasm32-wasip2 maps to WASI clocks (a sleep there
/// suspends the guest until the host's timer fires).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            // A clock set before 1970 is broken; negative millis keep the arithmetic honest.
            Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
        }
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// Epoch millis as RFC 3339 in UTC (`2026-11-30T10:01:56.5Z`), for messages; a time outside
/// the representable years shows as its millis.
pub fn show_time(epoch_millis: i64) -> String {
    match jiff::Timestamp::from_millisecond(epoch_millis) {
        Ok(at) => at.to_string(),
        Err(_) => format!("{epoch_millis} ms after the Unix epoch"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_reads_the_present_and_sleeps() {
        let before = SystemClock.now_millis();
        assert!(before > 1_700_000_000_000, "{before}");
        SystemClock.sleep(Duration::from_millis(5));
        assert!(SystemClock.now_millis() >= before + 5);
        assert_eq!(SystemClock.call_remaining(), None, "no host, no deadline");
    }

    #[test]
    fn times_show_as_rfc3339_and_never_panic() {
        assert_eq!(show_time(1_796_032_916_500), "2026-11-30T10:01:56.5Z");
        assert_eq!(show_time(i64::MAX), format!("{} ms after the Unix epoch", i64::MAX));
        assert_eq!(show_time(i64::MIN), format!("{} ms after the Unix epoch", i64::MIN));
    }
}
