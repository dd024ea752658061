//! Where a call's time goes: running the provider's WebAssembly, or in the host's imports.
//!
//! Terms:
//! - **guest time**: wall time while the component's own code runs (its exports, and the
//!   allocator the host calls into to hand it a result). A guest that yields to the runtime at
//!   an epoch tick keeps counting while it waits to be resumed.
//! - **import time**: wall time inside a host function the guest called: a Kubernetes request,
//!   a watch's next event, an exec, a log line, WASI's clocks (lifting the guest's arguments
//!   and lowering the answer included).
//! - **whole time**: wall time from the moment a call has its slot to the moment its result is
//!   ready. What it holds beyond guest and import time ([`CallTimes::own`]) is the host's
//!   per-call work around the export: the store and instance, binding the export, passing the
//!   request in and the result out. What a caller measures beyond the whole time is outside the
//!   call: waiting for a slot, the input checks, its runtime's scheduling.
//! - **instance time**: the part of the whole time before the export is called: taking an
//!   instance made ahead of the call, or making one when none was ready ([`crate::runner`]).
//! - **teardown time**: wall time dropping a call's store (the instance's memory reset for the
//!   pool, anything the call left open closed), which the host does after the result has gone
//!   back, so no caller waits for it ([`crate::runner`]).
//!
//! wasmtime reports every switch between WebAssembly and host code to a store's call hook
//! ([`wasmtime::CallHook`]); each call's clock charges the time since the previous switch to the
//! side that was running. So an operator (through [`crate::metrics`]) and `make bench` can
//! tell a slow call's cluster from its provider without a profiler.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wasmtime::CallHook;

/// The guest, import and whole time of calls, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTimes {
    /// Wall time running the component's code.
    pub guest: Duration,
    /// Wall time inside the host's imports.
    pub imports: Duration,
    /// Wall time of the calls, slot to result: guest and imports included.
    pub whole: Duration,
    /// Wall time from each call's slot to its instance ready: one made ahead taken, or one
    /// made in the call ([`crate::runner`]); part of the whole time.
    pub instance: Duration,
    /// Wall time dropping the calls' stores, after their results went back; a call's teardown
    /// is added when it is done, so a difference taken right after a call may not hold it yet.
    pub teardown: Duration,
}

impl CallTimes {
    /// What these times add beyond `earlier` (the totals of a host before some calls).
    pub fn since(&self, earlier: &CallTimes) -> CallTimes {
        CallTimes {
            guest: self.guest.saturating_sub(earlier.guest),
            imports: self.imports.saturating_sub(earlier.imports),
            whole: self.whole.saturating_sub(earlier.whole),
            instance: self.instance.saturating_sub(earlier.instance),
            teardown: self.teardown.saturating_sub(earlier.teardown),
        }
    }

    /// The host's own per-call work: the whole time less the guest's and the imports'.
    pub fn own(&self) -> Duration {
        self.whole.saturating_sub(self.guest + self.imports)
    }
}

/// Which code was running since the last switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The host, outside any import: the call's set-up, or its result on the way out.
    Host,
    /// The component's code.
    Guest,
    /// The host, inside an import the guest called.
    Import,
}

/// One call's clock, kept in its store and driven by the store's call hook.
#[derive(Debug)]
pub(crate) struct CallClock {
    side: Side,
    /// Imports entered and not yet returned from (an import may call back into the guest's
    /// allocator, so switches nest).
    imports_open: u32,
    since: Instant,
    times: CallTimes,
}

impl CallClock {
    /// A clock that starts on the host's side, outside any import.
    pub(crate) fn new() -> Self {
        Self { side: Side::Host, imports_open: 0, since: Instant::now(), times: CallTimes::default() }
    }

    /// Charges the time since the last switch to the side that ran, and switches.
    pub(crate) fn switch(&mut self, hook: CallHook) {
        self.switch_at(hook, Instant::now());
    }

    fn switch_at(&mut self, hook: CallHook, now: Instant) {
        let spent = now.saturating_duration_since(self.since);
        match self.side {
            Side::Guest => self.times.guest += spent,
            Side::Import => self.times.imports += spent,
            Side::Host => {}
        }
        self.since = now;
        match hook {
            CallHook::CallingHost => self.imports_open += 1,
            CallHook::ReturningFromHost => self.imports_open = self.imports_open.saturating_sub(1),
            CallHook::CallingWasm | CallHook::ReturningFromWasm => {}
        }
        self.side = if hook.exiting_host() {
            Side::Guest
        } else if self.imports_open > 0 {
            Side::Import
        } else {
            Side::Host
        };
    }

    /// The call's guest and import times so far, the stretch since the last switch included (a
    /// call the host ended inside an import never returns from it); its whole time is the
    /// caller's to add.
    pub(crate) fn times(&self) -> CallTimes {
        self.times_at(Instant::now())
    }

    fn times_at(&self, now: Instant) -> CallTimes {
        let open = now.saturating_duration_since(self.since);
        let mut times = self.times;
        match self.side {
            Side::Guest => times.guest += open,
            Side::Import => times.imports += open,
            Side::Host => {}
        }
        times
    }
}

/// Totals over a host's calls, for [`crate::runner::ProviderHost::call_times`].
#[derive(Debug, Default)]
pub(crate) struct CallTotals {
    guest_nanos: AtomicU64,
    import_nanos: AtomicU64,
    whole_nanos: AtomicU64,
    instance_nanos: AtomicU64,
    teardown_nanos: AtomicU64,
}

impl CallTotals {
    /// Adds one call's times.
    pub(crate) fn add(&self, times: CallTimes) {
        self.guest_nanos.fetch_add(nanos(times.guest), Ordering::Relaxed);
        self.import_nanos.fetch_add(nanos(times.imports), Ordering::Relaxed);
        self.whole_nanos.fetch_add(nanos(times.whole), Ordering::Relaxed);
        self.instance_nanos.fetch_add(nanos(times.instance), Ordering::Relaxed);
        self.teardown_nanos.fetch_add(nanos(times.teardown), Ordering::Relaxed);
    }

    /// The sums so far.
    pub(crate) fn get(&self) -> CallTimes {
        CallTimes {
            guest: Duration::from_nanos(self.guest_nanos.load(Ordering::Relaxed)),
            imports: Duration::from_nanos(self.import_nanos.load(Ordering::Relaxed)),
            whole: Duration::from_nanos(self.whole_nanos.load(Ordering::Relaxed)),
            instance: Duration::from_nanos(self.instance_nanos.load(Ordering::Relaxed)),
            teardown: Duration::from_nanos(self.teardown_nanos.load(Ordering::Relaxed)),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn each_stretch_is_charged_to_the_side_that_ran() {
        let start = Instant::now();
        let mut clock = CallClock { side: Side::Host, imports_open: 0, since: start, times: CallTimes::default() };
        let at = |n: u64| start + ms(n);
        clock.switch_at(CallHook::CallingWasm, at(5)); // 5 ms of set-up: neither
        clock.switch_at(CallHook::CallingHost, at(7)); // 2 ms of guest, then an import
        clock.switch_at(CallHook::CallingWasm, at(20)); // 13 ms in it, then the guest's allocator
        clock.switch_at(CallHook::ReturningFromWasm, at(21)); // 1 ms of guest
        clock.switch_at(CallHook::ReturningFromHost, at(22)); // 1 ms more in the import
        clock.switch_at(CallHook::ReturningFromWasm, at(30)); // 8 ms of guest: the export returns
        clock.switch_at(CallHook::CallingWasm, at(33)); // 3 ms lifting its result: neither
        clock.switch_at(CallHook::ReturningFromWasm, at(34)); // 1 ms of guest (post-return)
        assert_eq!(clock.times_at(at(50)), CallTimes { guest: ms(12), imports: ms(14), ..CallTimes::default() });
    }

    #[test]
    fn a_call_ended_inside_an_import_counts_it_up_to_the_end() {
        let start = Instant::now();
        let mut clock = CallClock { side: Side::Host, imports_open: 0, since: start, times: CallTimes::default() };
        clock.switch_at(CallHook::CallingWasm, start + ms(1));
        clock.switch_at(CallHook::CallingHost, start + ms(3));
        assert_eq!(clock.times_at(start + ms(10)), CallTimes { guest: ms(2), imports: ms(7), ..CallTimes::default() });
    }

    #[test]
    fn totals_add_up_and_differences_never_go_negative() {
        let totals = CallTotals::default();
        totals.add(CallTimes { guest: ms(3), imports: ms(10), whole: ms(15), instance: ms(1), teardown: ms(1) });
        let before = totals.get();
        totals.add(CallTimes { guest: ms(2), imports: ms(1), whole: ms(4), instance: ms(1), teardown: ms(2) });
        let added = totals.get().since(&before);
        assert_eq!(added, CallTimes { guest: ms(2), imports: ms(1), whole: ms(4), instance: ms(1), teardown: ms(2) });
        assert_eq!(added.own(), ms(1));
        assert_eq!(before.since(&totals.get()), CallTimes::default());
    }

    #[test]
    fn own_time_never_goes_negative() {
        // Totals read while another call is adding its parts can hold its guest time before its
        // whole time.
        assert_eq!(
            CallTimes { guest: ms(3), imports: ms(2), whole: ms(4), instance: ms(1), teardown: ms(9) }.own(),
            Duration::ZERO
        );
    }
}
