//! The clock of a native process (`std::time`): the provider run as a library, in tests and
//! benchmarks. The component has none: its target's (`wasm32-unknown-unknown`) `std::time` has no
//! clock, so it reads WASI's clocks (`component.rs`) and this module is not built for it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::clock::Clock;

/// The real clock of a native process.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Deadline;

    #[test]
    fn system_clock_moves_forward() {
        let clock = SystemClock::new();
        let deadline = Deadline::after(&clock, Duration::from_secs(60));
        assert!(!deadline.passed(&clock));
        assert!(clock.now_millis() > 1_700_000_000_000);
    }
}
