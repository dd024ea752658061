//! Instances made ahead: the next call's store and instance, made between calls.
//!
//! Terms:
//! - **made ahead**: a store and an instance of the component made after a call's teardown,
//!   on the runtime, before any call asks for them; at most [`AHEAD`] wait at a time.
//! - **idle**: what a store made ahead holds until a call takes it: no access to the cluster
//!   (a `KubeHost` without a client), no call's name, a deadline one call's length after it
//!   was made. What the component runs while it is instantiated (a start function, if it has
//!   one) runs with that.
//! - **taken**: a call found an instance made ahead and gave its store the call's own state
//!   ([`CallState::begin`]: its name, its access, limited to its lease, its deadline) before
//!   running its export; a call that finds none makes its own on its way to the export.
//!
//! Why: making a store and an instance costs tens of microseconds inside a busy host (the
//! store, the instance's memory and tables from the pool, the component's functions linked),
//! which a call would pay on its way to its export. Made ahead, a call pays taking it. Each
//! instance still serves exactly one call and is dropped after it, so nothing of one call
//! reaches the next; an instance made ahead has run none of the provider's exports.
//!
//! The pool holds the instances made ahead beside the calls' (the engine sizes it for both,
//! [`crate::engine`]), so waiting ones never keep a call from its instance. A refill holds the
//! slot of the call whose teardown it follows: [`super::ProviderHost::settled`] waits for it.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use wasmtime::Store;

use crate::kube_host::KubeHost;
use crate::limits::Limits;
use crate::policy::Policy;
use crate::state::CallState;
use crate::versions::{Bound, BoundPre};

/// Instances made ahead that wait at a time: one serves a caller's next call, which is what a
/// plugin's sequence of calls on a lease makes; calls at once beyond it make their own.
pub(crate) const AHEAD: u32 = 1;

/// The name an idle store's log lines and errors give as its call's.
const IDLE: &str = "made ahead";

/// How many calls took an instance made ahead, and how many made their own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstanceCounts {
    /// Calls that found an instance made ahead.
    pub taken: u64,
    /// Calls that made their own store and instance on their way to the export.
    pub made_in_call: u64,
}

/// A store and an instance, made ahead, waiting for a call.
pub(super) struct Ready {
    pub(super) store: Store<CallState>,
    pub(super) bound: Bound,
}

/// The waiting instances and what makes them.
pub(super) struct MadeAhead {
    pre: Arc<BoundPre>,
    limits: Limits,
    /// Access of an idle store: none.
    idle: KubeHost,
    waiting: Mutex<Waiting>,
    taken: AtomicU64,
    made_in_call: AtomicU64,
}

/// Instances that wait, and how many are being made (reserved, so two refills never make more
/// than [`AHEAD`]).
#[derive(Default)]
struct Waiting {
    ready: Vec<Ready>,
    making: u32,
}

impl MadeAhead {
    pub(super) fn new(pre: Arc<BoundPre>, limits: Limits) -> Self {
        let idle = KubeHost::with_client(None, Arc::new(Policy::default()), limits.kube_request_timeout());
        Self { pre, limits, idle, waiting: Mutex::default(), taken: AtomicU64::new(0), made_in_call: AtomicU64::new(0) }
    }

    /// An instance made ahead, for a call to begin on; `None` when none waits (the call makes
    /// its own: counted as made in the call).
    pub(super) fn take(&self) -> Option<Ready> {
        let ready = self.lock().ready.pop();
        let counter = if ready.is_some() { &self.taken } else { &self.made_in_call };
        counter.fetch_add(1, Ordering::Relaxed);
        ready
    }

    /// Makes instances until [`AHEAD`] wait (or are being made by another refill). An instance
    /// that cannot be made is left to the next call, which makes its own and reports why.
    pub(super) async fn refill(&self) {
        while let Some(reserved) = self.reserve() {
            let mut store = super::call::new_store(&self.pre, &self.limits, self.idle_state());
            match self.pre.instantiate(&mut store).await {
                Ok(bound) => reserved.fill(Ready { store, bound }),
                Err(e) => {
                    tracing::debug!(target: "provider_host", error = %e, "an instance made ahead failed");
                    return;
                }
            }
        }
    }

    /// How many calls took an instance made ahead, and how many made their own.
    pub(super) fn counts(&self) -> InstanceCounts {
        InstanceCounts {
            taken: self.taken.load(Ordering::Relaxed),
            made_in_call: self.made_in_call.load(Ordering::Relaxed),
        }
    }

    /// Reserves the making of one instance, if fewer than [`AHEAD`] wait or are being made.
    fn reserve(&self) -> Option<Reserved<'_>> {
        let mut waiting = self.lock();
        let ahead = u32::try_from(waiting.ready.len()).unwrap_or(u32::MAX).saturating_add(waiting.making);
        if ahead >= AHEAD {
            return None;
        }
        waiting.making += 1;
        Some(Reserved(self))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn idle_state(&self) -> CallState {
        CallState::new(IDLE, self.idle.clone(), &self.limits, Instant::now() + self.limits.call_timeout())
    }
}

/// One instance being made; released when it is put to wait or its making failed or was
/// dropped (a runtime shutting down), so a reservation never outlives its refill.
struct Reserved<'a>(&'a MadeAhead);

impl Reserved<'_> {
    fn fill(self, ready: Ready) {
        self.0.lock().ready.push(ready);
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        let mut waiting = self.0.lock();
        waiting.making = waiting.making.saturating_sub(1);
    }
}
