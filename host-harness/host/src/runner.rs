//! [`ProviderHost`]: load a provider component once, then run each lifecycle call in a fresh
//! store with a memory cap and a deadline.
//!
//! A fresh store per call costs microseconds with the pooling allocator and buys isolation:
//! whatever a call leaves behind (a trap, a blown deadline, open watches, a corrupted heap) is
//! dropped with its store and cannot reach the next call or the host.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::sync::Semaphore;
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::bindings::KubernetesProviderPre;
use crate::bindings::exports::paperclip::sandbox_provider::provider::Guest;
use crate::bindings::paperclip::sandbox_provider::types as wit;
use crate::compile_cache::{self, CacheOutcome};
use crate::engine::HostEngine;
use crate::error::HostError;
use crate::kube_host::KubeHost;
use crate::limits::Limits;
use crate::policy::Policy;
use crate::records::{
    AcquireRequest, DestroyReport, Lease, LeaseRef, ProbeResult, ProviderError, ProviderInfo, ResumeOutcome, Validation,
};
use crate::state::{self, CallState};

/// Where the component comes from.
#[derive(Debug, Clone)]
pub enum ComponentSource {
    /// A `.wasm` component file.
    File(PathBuf),
    /// The component's bytes.
    Bytes(Vec<u8>),
}

/// How a host runs its provider. Serde-free on purpose: the CLI decides where each part comes
/// from (policy and limits are serde types of their own).
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// What the provider may do on the cluster.
    pub policy: Policy,
    /// Per-call limits.
    pub limits: Limits,
    /// Where precompiled components are kept; `None` compiles in memory every time.
    pub cache_dir: Option<PathBuf>,
}

/// A loaded provider component, ready to serve calls concurrently (`&self` everywhere).
pub struct ProviderHost {
    pre: KubernetesProviderPre<CallState>,
    kube: KubeHost,
    limits: Limits,
    slots: Semaphore,
    cache: CacheOutcome,
    calls: AtomicU64,
    _engine: HostEngine,
}

/// A boxed export call borrowing the guest bindings and the store.
type CallFuture<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// Where a call failed: creating the instance or running the export.
enum Stage {
    Instantiate(wasmtime::Error),
    Call(wasmtime::Error),
}

impl ProviderHost {
    /// Builds the engine, compiles (or loads the cached precompiled) component and links it
    /// against the host's imports once; calls then only instantiate.
    pub async fn load(source: ComponentSource, client: kube::Client, options: HostOptions) -> Result<Self, HostError> {
        options.policy.validate()?;
        options.limits.validate()?;
        let engine = HostEngine::new(&options.limits)?;
        let wasm = match source {
            ComponentSource::Bytes(bytes) => bytes,
            ComponentSource::File(path) => tokio::fs::read(&path)
                .await
                .map_err(|e| HostError::Load(format!("cannot read {}: {e}", path.display())))?,
        };
        let compiler = engine.engine().clone();
        let cache_dir = options.cache_dir.clone();
        let started = Instant::now();
        let (component, cache) =
            tokio::task::spawn_blocking(move || compile_cache::load(&compiler, &wasm, cache_dir.as_deref()))
                .await
                .map_err(|e| HostError::Load(format!("the compile task failed: {e}")))??;
        tracing::debug!(target: "provider_host", cache = ?cache, millis = started.elapsed().as_millis() as u64,
            "provider component ready");
        let linker = state::linker(engine.engine())
            .map_err(|e| HostError::Config(format!("cannot link the host's imports: {e:?}")))?;
        let instance_pre = linker.instantiate_pre(&component).map_err(|e| HostError::Link(format!("{e:?}")))?;
        let pre = KubernetesProviderPre::new(instance_pre).map_err(|e| HostError::Link(format!("{e:?}")))?;
        let kube = KubeHost::new(client, Arc::new(options.policy), options.limits.kube_request_timeout());
        let slots = Semaphore::new(usize::try_from(options.limits.max_concurrent_calls).unwrap_or(usize::MAX));
        Ok(Self { pre, kube, limits: options.limits, slots, cache, calls: AtomicU64::new(0), _engine: engine })
    }

    /// How the component was obtained (compiled, loaded from the cache, rebuilt).
    pub fn cache_outcome(&self) -> &CacheOutcome {
        &self.cache
    }

    /// How many calls have started (each on its own instance).
    pub fn calls_started(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The policy the provider's `kube` calls go through.
    pub fn policy(&self) -> &Policy {
        self.kube.policy()
    }

    /// Identity, capabilities and config schema of the provider.
    pub async fn describe(&self) -> Result<ProviderInfo, HostError> {
        let info = self.call("describe", |guest, store| Box::pin(guest.call_describe(store))).await?;
        Ok(info.into())
    }

    /// Every problem of a config, and the normalized config.
    pub async fn validate_config(&self, config: &str) -> Result<Validation, HostError> {
        let config = config.to_string();
        let validation = self
            .call("validate-config", move |guest, store| {
                Box::pin(async move { guest.call_validate_config(store, &config).await })
            })
            .await?;
        Ok(validation.into())
    }

    /// Whether a config can work against the cluster.
    pub async fn probe(&self, config: &str) -> Result<ProbeResult, HostError> {
        let config = config.to_string();
        let result = self
            .call("probe", move |guest, store| Box::pin(async move { guest.call_probe(store, &config).await }))
            .await?;
        Ok(result.into())
    }

    /// Provisions a sandbox and waits until it is ready.
    pub async fn acquire(&self, request: AcquireRequest) -> Result<Lease, HostError> {
        let request = wit::AcquireRequest::from(request);
        let result = self
            .call("acquire", move |guest, store| Box::pin(async move { guest.call_acquire(store, &request).await }))
            .await?;
        result.map(Lease::from).map_err(provider_error)
    }

    /// Whether a stored lease can be used again.
    pub async fn resume_check(&self, lease: LeaseRef) -> Result<ResumeOutcome, HostError> {
        let lease = wit::LeaseRef::from(lease);
        let result = self
            .call("resume-check", move |guest, store| {
                Box::pin(async move { guest.call_resume_check(store, &lease).await })
            })
            .await?;
        result.map(ResumeOutcome::from).map_err(provider_error)
    }

    /// Moves the lease's expiry to `expires_at` (epoch millis): the renewed lease, or `expired`
    /// when the sandbox is gone.
    pub async fn renew(&self, lease: LeaseRef, expires_at: i64) -> Result<ResumeOutcome, HostError> {
        let lease = wit::LeaseRef::from(lease);
        let result = self
            .call("renew", move |guest, store| {
                Box::pin(async move { guest.call_renew(store, &lease, expires_at).await })
            })
            .await?;
        result.map(ResumeOutcome::from).map_err(provider_error)
    }

    /// Ends a run: destroys an ephemeral lease, suspends a reusable one.
    pub async fn release(&self, lease: LeaseRef) -> Result<(), HostError> {
        let lease = wit::LeaseRef::from(lease);
        let result = self
            .call("release", move |guest, store| Box::pin(async move { guest.call_release(store, &lease).await }))
            .await?;
        result.map_err(provider_error)
    }

    /// Deletes everything the lease could own.
    pub async fn destroy(&self, lease: LeaseRef) -> Result<DestroyReport, HostError> {
        let lease = wit::LeaseRef::from(lease);
        let result = self
            .call("destroy", move |guest, store| Box::pin(async move { guest.call_destroy(store, &lease).await }))
            .await?;
        result.map(DestroyReport::from).map_err(provider_error)
    }

    /// Runs one export on a fresh instance in a fresh store, under the memory cap and the
    /// deadline: epoch ticks yield to the runtime every tick and interrupt the guest at the
    /// deadline; the `tokio` timeout covers time spent awaiting host calls.
    async fn call<R, F>(&self, call: &'static str, run: F) -> Result<R, HostError>
    where
        R: Send,
        F: for<'a> FnOnce(&'a Guest, &'a mut Store<CallState>) -> CallFuture<'a, R> + Send,
    {
        let _slot = self.slots.acquire().await.map_err(|e| HostError::Instantiate { call, message: e.to_string() })?;
        let limit = self.limits.call_timeout();
        let started = Instant::now();
        let deadline = started + limit;
        let mut store = Store::new(self.pre.engine(), CallState::new(call, self.kube.clone(), &self.limits));
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
        });
        self.calls.fetch_add(1, Ordering::Relaxed);
        let pre = &self.pre;
        let store_ref = &mut store;
        let outcome = tokio::time::timeout(limit, async move {
            let provider = pre.instantiate_async(&mut *store_ref).await.map_err(Stage::Instantiate)?;
            run(provider.paperclip_sandbox_provider_provider(), store_ref).await.map_err(Stage::Call)
        })
        .await;
        let result = match outcome {
            Err(_) => Err(HostError::Timeout { call, limit_ms: self.limits.call_timeout_ms }),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(Stage::Instantiate(e))) => Err(self.classify(call, &store, e, true)),
            Ok(Err(Stage::Call(e))) => Err(self.classify(call, &store, e, false)),
        };
        let millis = started.elapsed().as_millis() as u64;
        match &result {
            Ok(_) => tracing::debug!(target: "provider_host", call, millis, "provider call finished"),
            Err(e) => tracing::debug!(target: "provider_host", call, millis, error = %e, "provider call failed"),
        }
        result
    }

    fn classify(
        &self,
        call: &'static str,
        store: &Store<CallState>,
        err: wasmtime::Error,
        instantiating: bool,
    ) -> HostError {
        if let Some(requested) = store.data().limiter.refused_memory() {
            return HostError::MemoryLimit {
                call,
                limit_bytes: self.limits.memory_bytes,
                requested_bytes: u64::try_from(requested).unwrap_or(u64::MAX),
            };
        }
        if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            return HostError::Timeout { call, limit_ms: self.limits.call_timeout_ms };
        }
        if instantiating {
            return HostError::Instantiate { call, message: format!("{err:?}") };
        }
        HostError::Trap { call, message: format!("{err:?}") }
    }
}

fn provider_error(e: wit::ProviderError) -> HostError {
    HostError::Provider(ProviderError::from(e))
}
