//! The fake's clock: wall and monotonic time that move only when told, or when the provider
//! sleeps or waits on a fake watch.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::clock::Clock;

/// A clock that moves only when told (or when the provider sleeps or waits on a fake watch),
/// with an optional host call deadline.
#[derive(Clone)]
pub struct FakeClock(Rc<RefCell<(i64, Duration)>>, Rc<RefCell<Option<(Duration, Duration)>>>);

impl FakeClock {
    /// A clock at `wall_millis` (epoch millis) and monotonic zero, with no host deadline.
    pub fn new(wall_millis: i64) -> Self {
        Self(Rc::new(RefCell::new((wall_millis, Duration::ZERO))), Rc::new(RefCell::new(None)))
    }

    /// Moves both clocks forward.
    pub fn advance(&self, by: Duration) {
        let mut t = self.0.borrow_mut();
        t.0 += i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        t.1 += by;
    }

    /// Starts a host call now that the host ends after `timeout`, as the `deadline` import says.
    pub fn set_host_deadline(&self, timeout: Duration) {
        let now = self.0.borrow().1;
        *self.1.borrow_mut() = Some((now + timeout, timeout));
    }

    pub(super) fn advance_to(&self, monotonic: Duration) {
        let now = self.0.borrow().1;
        if monotonic > now {
            self.advance(monotonic - now);
        }
    }
}

impl Clock for FakeClock {
    fn now_millis(&self) -> i64 {
        self.0.borrow().0
    }

    fn monotonic(&self) -> Duration {
        self.0.borrow().1
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }

    fn call_remaining(&self) -> Option<Duration> {
        let now = self.0.borrow().1;
        self.1.borrow().map(|(at, _)| at.saturating_sub(now))
    }

    fn call_timeout(&self) -> Option<Duration> {
        self.1.borrow().map(|(_, timeout)| timeout)
    }
}
