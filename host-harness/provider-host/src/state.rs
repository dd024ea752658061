//! What one call's store holds: its WASI context (empty), its resource table (open watches),
//! its limiter, its deadline, and the policy-checked Kubernetes access. A store lives for
//! exactly one export call and is dropped afterwards, taking any open watch and any trapped
//! state with it.

use std::time::{Duration, Instant};

use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::kube::{KubeError, ResourceType, WatchEvent, WatchOptions};
use crate::bindings::{since_v0_1_0, since_v0_2_0, since_v0_3_0, since_v0_4_0};
use crate::call_time::CallClock;
use crate::kube_host::KubeHost;
use crate::kube_watch::WatchStream;
use crate::limits::{CallLimiter, Limits};
use crate::wasi;

/// The data of one call's store.
pub struct CallState {
    /// The export being called, for log lines.
    pub(crate) call: &'static str,
    pub(crate) kube: KubeHost,
    pub(crate) table: ResourceTable,
    pub(crate) open_watches: usize,
    pub(crate) max_open_watches: usize,
    pub(crate) limiter: CallLimiter,
    /// When the host ends the call.
    deadline: Instant,
    call_timeout: Duration,
    wasi: WasiCtx,
    /// Where the call's time goes, driven by the store's call hook.
    pub(crate) clock: CallClock,
}

impl CallState {
    /// Fresh state for one call of `call`, which the host ends at `deadline`.
    pub(crate) fn new(call: &'static str, kube: KubeHost, limits: &Limits, deadline: Instant) -> Self {
        Self {
            call,
            kube: kube.for_call(deadline),
            table: ResourceTable::new(),
            open_watches: 0,
            max_open_watches: usize::try_from(limits.max_open_watches).unwrap_or(usize::MAX),
            limiter: CallLimiter::new(limits),
            deadline,
            call_timeout: limits.call_timeout(),
            wasi: wasi::empty_context(),
            clock: CallClock::new(),
        }
    }

    /// Gives a store made ahead of its call ([`crate::runner`]) that call's own state: its
    /// name, its access (limited to its lease when it has one), its deadline, and a clock
    /// started now. Its limiter keeps what the instance already holds.
    pub(crate) fn begin(&mut self, call: &'static str, kube: KubeHost, deadline: Instant) {
        self.call = call;
        self.kube = kube.for_call(deadline);
        self.deadline = deadline;
        self.clock = CallClock::new();
    }

    /// When the host ends the call: the store's epoch callback interrupts the guest then.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Milliseconds left before the host ends the call.
    pub(crate) fn millis_left(&self) -> u64 {
        u64::try_from(self.deadline.saturating_duration_since(Instant::now()).as_millis()).unwrap_or(u64::MAX)
    }

    /// The deadline the host gives every call, in milliseconds.
    pub(crate) fn timeout_millis(&self) -> u64 {
        u64::try_from(self.call_timeout.as_millis()).unwrap_or(u64::MAX)
    }

    /// Opens a watch into the call's resource table, at most `max-open-watches` at a time.
    pub(crate) async fn open_watch(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        options: WatchOptions,
    ) -> wasmtime::Result<Result<Resource<WatchStream>, KubeError>> {
        if self.open_watches >= self.max_open_watches {
            return Ok(Err(KubeError::Denied(format!(
                "the host allows {} open watches per call (limits max-open-watches); drop one first",
                self.max_open_watches
            ))));
        }
        let stream = match self.kube.watch(&resource, namespace.as_deref(), &options).await {
            Ok(stream) => stream,
            Err(e) => return Ok(Err(e)),
        };
        let handle = self.table.push(stream)?;
        self.open_watches += 1;
        Ok(Ok(handle))
    }

    /// The next event of an open watch that the provider may see.
    pub(crate) async fn next_event(
        &mut self,
        watch: Resource<WatchStream>,
        timeout: Duration,
    ) -> wasmtime::Result<Result<Option<WatchEvent>, KubeError>> {
        let stream = self.table.get_mut(&watch)?;
        Ok(self.kube.next_event(stream, timeout).await)
    }

    /// Closes a watch the guest dropped.
    pub(crate) fn close_watch(&mut self, watch: Resource<WatchStream>) -> wasmtime::Result<()> {
        self.table.delete(watch)?;
        self.open_watches = self.open_watches.saturating_sub(1);
        Ok(())
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// The linker with everything a provider component of any supported contract version may
/// import.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasi::add_to_linker(&mut linker)?;
    since_v0_1_0::KubernetesProvider::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
    since_v0_2_0::KubernetesProvider::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
    since_v0_3_0::KubernetesProvider::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
    since_v0_4_0::KubernetesProvider::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
    Ok(linker)
}
