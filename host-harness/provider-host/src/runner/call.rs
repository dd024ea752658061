//! One call: a fresh store and instance for the export, under the memory cap and the
//! deadline, its guest instructions and its times ([`crate::call_time`]) added to the host's
//! totals, a failure classified (instantiation, trap, out of memory, deadline), and the store
//! dropped once the result has gone back ([`ProviderHost::retire`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::made_ahead::Ready;
use super::{InstantiateTimes, ProviderHost, millis};
use crate::call_time::CallTimes;
use crate::error::HostError;
use crate::lease_scope::LeaseScope;
use crate::limits::Limits;
use crate::state::CallState;
use crate::versions::{Bound, BoundPre, on_each_version};

/// The fuel each call's store starts with when instructions are counted: far more than any
/// call runs (a call runs for seconds at most, a guest a few billion instructions a second),
/// so it never runs out, and what is left after the call says what was used.
const COUNTED_FUEL: u64 = 1 << 62;

/// A boxed export call borrowing the bound instance and the store.
pub(super) type CallFuture<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// Where a call failed: creating the instance or running the export.
enum Stage {
    Instantiate(wasmtime::Error),
    Call(wasmtime::Error),
}

impl ProviderHost {
    /// Runs one export on a fresh instance in a fresh store, under the memory cap and the
    /// deadline: epoch ticks yield to the runtime every tick and interrupt the guest at the
    /// deadline; the `tokio` timeout covers time spent awaiting host calls.
    pub(super) async fn call<R, F>(&self, call: &'static str, run: F) -> Result<R, HostError>
    where
        R: Send,
        F: for<'a> FnOnce(&'a Bound, &'a mut Store<CallState>) -> CallFuture<'a, R> + Send,
    {
        self.call_within(call, self.limits.call_timeout(), None, run).await
    }

    /// [`Self::call`] on a stored lease: its `kube` access is limited to the lease's workload
    /// ([`crate::lease_scope`]).
    pub(super) async fn call_scoped<R, F>(
        &self,
        call: &'static str,
        scope: Option<LeaseScope>,
        run: F,
    ) -> Result<R, HostError>
    where
        R: Send,
        F: for<'a> FnOnce(&'a Bound, &'a mut Store<CallState>) -> CallFuture<'a, R> + Send,
    {
        self.call_within(call, self.limits.call_timeout(), scope, run).await
    }

    /// [`Self::call`] with its own deadline (`execute`'s is longer) and lease scope.
    pub(super) async fn call_within<R, F>(
        &self,
        call: &'static str,
        limit: Duration,
        scope: Option<LeaseScope>,
        run: F,
    ) -> Result<R, HostError>
    where
        R: Send,
        F: for<'a> FnOnce(&'a Bound, &'a mut Store<CallState>) -> CallFuture<'a, R> + Send,
    {
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| HostError::Instantiate { call, message: e.to_string() })?;
        let started = Instant::now();
        let deadline = started + limit;
        let kube = self.kube.clone().scoped(scope);
        let (mut store, made_ahead) = match self.made_ahead.take() {
            Some(Ready { mut store, bound }) => {
                // Made with a deadline of its own: the call's from here. Its fuel is left as it
                // is, so a call's count holds its instantiation, wherever it was made.
                store.data_mut().begin(call, kube, deadline);
                store.set_epoch_deadline(1);
                (store, Some(bound))
            }
            None => (new_store(&self.pre, &self.limits, CallState::new(call, kube, &self.limits, deadline)), None),
        };
        let taken = made_ahead.is_some();
        self.calls.fetch_add(1, Ordering::Relaxed);
        let pre = &self.pre;
        let store_ref = &mut store;
        let mut instance_ready = None;
        let ready_ref = &mut instance_ready;
        let outcome = tokio::time::timeout(limit, async move {
            let bound = match made_ahead {
                Some(bound) => bound,
                None => pre.instantiate(&mut *store_ref).await.map_err(Stage::Instantiate)?,
            };
            *ready_ref = Some(started.elapsed());
            run(&bound, store_ref).await.map_err(Stage::Call)
        })
        .await;
        // Asked only when counting: uncounted, the answer is an error, made for nothing.
        if self.limits.count_guest_instructions
            && let Ok(left) = store.get_fuel()
        {
            self.guest_instructions.fetch_add(COUNTED_FUEL.saturating_sub(left), Ordering::Relaxed);
        }
        let mut times = store.data().clock.times();
        let result = match outcome {
            Err(_) => Err(HostError::Timeout { call, limit_ms: millis(limit) }),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(Stage::Instantiate(e))) => Err(self.classify(call, &store, e, true, limit)),
            Ok(Err(Stage::Call(e))) => Err(self.classify(call, &store, e, false, limit)),
        };
        times.whole = started.elapsed();
        times.instance = instance_ready.unwrap_or(times.whole);
        self.call_times.add(times);
        if let Some(metrics) = &self.kube.metrics {
            metrics.call_times(call, times);
            metrics.instance(taken);
        }
        let millis = times.whole.as_millis() as u64;
        match &result {
            Ok(_) => tracing::debug!(target: "provider_host", call, millis, "provider call finished"),
            Err(e) => tracing::debug!(target: "provider_host", call, millis, error = %e, "provider call failed"),
        }
        self.retire(store, slot);
        result
    }

    /// Drops a finished call's store after its result has gone back, then makes the next
    /// call's instance ([`made_ahead`](super::made_ahead)): the teardown (the instance's memory
    /// reset for the pool, any watch or stream the call left open closed) and the making take
    /// tens of microseconds no caller needs to wait for. Both run as a task of the runtime, with
    /// the call's slot, so a call waiting for a slot waits for them too and the pool never holds
    /// more instances than slots and those made ahead; the teardown's time goes to the totals'
    /// teardown. A call runs on a Tokio runtime already (its deadline is a Tokio timer).
    fn retire(&self, store: Store<CallState>, slot: OwnedSemaphorePermit) {
        let totals = self.call_times.clone();
        let made_ahead = self.made_ahead.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            drop(store);
            totals.add(CallTimes { teardown: started.elapsed(), ..CallTimes::default() });
            made_ahead.refill().await;
            drop(slot);
        });
    }

    /// Makes a fresh store and instance exactly as the host makes one for a call (ahead of it,
    /// or in it when none was ready), binds the export an acquire runs (type-checks it, as the
    /// call would), runs nothing and drops both: what the per-call isolation costs, for `make
    /// bench`, in its two phases.
    pub async fn instantiate_only(&self) -> Result<InstantiateTimes, HostError> {
        let call = "instantiate";
        let _slot = self.slots.acquire().await.map_err(|e| HostError::Instantiate { call, message: e.to_string() })?;
        let started = Instant::now();
        let mut store = self.fresh_store(call, started + self.limits.call_timeout());
        // A call type-checks the export it runs when it runs it; acquire's types are the largest.
        let bound = self.pre.instantiate(&mut store).await;
        if let Err(e) = bound.and_then(|bound| on_each_version!(&bound, guest => guest.acquire(&mut store).map(drop))) {
            return Err(self.classify(call, &store, e, true, self.limits.call_timeout()));
        }
        let instantiated = Instant::now();
        drop(store);
        Ok(InstantiateTimes { instantiate: instantiated - started, teardown: instantiated.elapsed() })
    }

    /// Type-checks the component's exports once ([`BoundPre::check`]): a component whose exports
    /// do not have its contract version's types does not load.
    pub(super) async fn check_exports(&self) -> Result<(), HostError> {
        let call = "load";
        let mut store = self.fresh_store(call, Instant::now() + self.limits.call_timeout());
        match self.pre.check(&mut store).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(mismatch)) => Err(HostError::Link(mismatch)),
            Err(e) => Err(self.classify(call, &store, e, true, self.limits.call_timeout())),
        }
    }

    /// A store made for `call` with the host's unscoped access.
    fn fresh_store(&self, call: &'static str, deadline: Instant) -> Store<CallState> {
        new_store(&self.pre, &self.limits, CallState::new(call, self.kube.clone(), &self.limits, deadline))
    }

    fn classify(
        &self,
        call: &'static str,
        store: &Store<CallState>,
        err: wasmtime::Error,
        instantiating: bool,
        limit: Duration,
    ) -> HostError {
        if let Some(requested) = store.data().limiter.refused_memory() {
            return HostError::MemoryLimit {
                call,
                limit_bytes: self.limits.memory_bytes,
                requested_bytes: u64::try_from(requested).unwrap_or(u64::MAX),
            };
        }
        if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            return HostError::Timeout { call, limit_ms: millis(limit) };
        }
        if instantiating {
            return HostError::Instantiate { call, message: format!("{err:?}") };
        }
        HostError::Trap { call, message: format!("{err:?}") }
    }
}

/// A store holding `state`, for a call or made ahead of one: the memory cap, the call clock's
/// hook, and an epoch callback that yields to the runtime every tick and interrupts the guest
/// at the deadline its state holds at that moment ([`CallState::begin`] moves it), and its fuel
/// filled when instructions are counted, so that what is left after its call says what ran in
/// it, its instantiation included.
pub(super) fn new_store(pre: &BoundPre, limits: &Limits, state: CallState) -> Store<CallState> {
    let call = state.call;
    let mut store = Store::new(pre.engine(), state);
    store.limiter(|state| &mut state.limiter);
    if limits.count_guest_instructions
        && let Err(e) = store.set_fuel(COUNTED_FUEL)
    {
        tracing::warn!(target: "provider_host", call, error = %e, "cannot count the guest's instructions");
    }
    store.call_hook(|mut store, hook| {
        store.data_mut().clock.switch(hook);
        Ok(())
    });
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|store| {
        Ok(if Instant::now() >= store.data().deadline() { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
    store
}
