//! [`ProviderHost`]: load a provider component once, then run each lifecycle call in a fresh
//! store with a memory cap and a deadline.
//!
//! A fresh store per call costs microseconds with the pooling allocator and buys isolation:
//! whatever a call leaves behind (a trap, a blown deadline, open watches, a corrupted heap) is
//! dropped with its store and cannot reach the next call or the host. The store is dropped
//! after the call's result has gone back to its caller, on the runtime, holding the call's slot
//! until it is gone, and the next call's store and instance are made then, before it asks: the
//! caller waits neither for the teardown nor, when one is ready, for the making; no more
//! instances exist at once than there are slots and instances made ahead.
//!
//! Here: loading, and each operation's call of its export; `call`: the fresh store and instance
//! every call runs in; `made_ahead`: the next call's, made between calls; `slots`: how many
//! calls and commands run at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{AcquireError, Semaphore};

use crate::call_time::{CallTimes, CallTotals};
use crate::capabilities::{self, Grants};
use crate::compile_cache::{self, CacheOutcome};
use crate::created_objects::CreatedObjects;
use crate::engine::HostEngine;
use crate::error::HostError;
use crate::kube_host::KubeHost;
use crate::lease_scope::LeaseScope;
use crate::limits::Limits;
use crate::metrics::HostMetrics;
use crate::network_policy;
use crate::policy::Policy;
use crate::records::{
    AcquireRequest, DestroyReport, ExecRequest, ExecResult, Lease, LeaseRef, ProbeResult, ProviderError, ProviderInfo,
    ResumeOutcome, Severity, Validation,
};
use crate::state;
use crate::versions::{Bound, BoundPre, on_each_version};

mod call;
mod made_ahead;
mod slots;

pub(crate) use made_ahead::AHEAD as INSTANCES_MADE_AHEAD;
pub use made_ahead::InstanceCounts;
use made_ahead::MadeAhead;

use slots::{LeaseSlots, exec_share};

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
    /// What the operator lets the provider do on the cluster; the host narrows it to what the
    /// provider declares ([`crate::capabilities`]).
    pub policy: Policy,
    /// Per-call limits.
    pub limits: Limits,
    /// Where precompiled components are kept; `None` compiles in memory every time.
    pub cache_dir: Option<PathBuf>,
}

/// The two phases of a call's isolation: making its store and instance, and dropping them
/// (which returns the instance's memory to the pool and resets it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstantiateTimes {
    /// A fresh store, an instance from the pre-instantiated component, and acquire's export
    /// bound to it.
    pub instantiate: Duration,
    /// Dropping both.
    pub teardown: Duration,
}

/// A loaded provider component, ready to serve calls concurrently (`&self` everywhere).
pub struct ProviderHost {
    pre: Arc<BoundPre>,
    /// The next calls' instances, made between calls ([`made_ahead`]).
    made_ahead: Arc<MadeAhead>,
    kube: KubeHost,
    grants: Grants,
    limits: Limits,
    /// Calls at once, each slot held from before its call takes or makes its instance until its
    /// store is dropped and the next instance is made ahead.
    slots: Arc<Semaphore>,
    /// Calls of `execute` at once ([`exec_share`] of the slots): a command may hold its slot
    /// for minutes.
    exec_slots: Semaphore,
    /// Calls of `execute` at once per lease (`max-executes-per-lease`), taken before an
    /// `exec_slots` one: one run's flood of commands waits on itself, not on other runs.
    lease_slots: LeaseSlots,
    cache: CacheOutcome,
    calls: AtomicU64,
    /// WebAssembly instructions run by the guest in all calls, when counted.
    guest_instructions: AtomicU64,
    /// Guest, import and teardown time of all calls (teardowns add theirs when done).
    call_times: Arc<CallTotals>,
    _engine: HostEngine,
}

impl ProviderHost {
    /// Builds the engine, compiles (or loads the cached precompiled) component, links it
    /// against the host's imports and type-checks its exports once; calls then only instantiate
    /// (and check the one export they run). The provider's declared access is read once here
    /// and intersected with the policy ([`ProviderHost::grants`]).
    pub async fn load(source: ComponentSource, client: kube::Client, options: HostOptions) -> Result<Self, HostError> {
        Self::load_with(source, Some(client), options).await
    }

    /// Loads a component for the cluster a kube-rs configuration names, through the host's own
    /// client ([`crate::client_from_config`]: no transparent retries); messages about a request
    /// that got no answer name the API server, as kubectl's do.
    pub async fn load_for_config(
        source: ComponentSource,
        config: kube::Config,
        options: HostOptions,
    ) -> Result<Self, HostError> {
        let server = crate::kubeconfig::shown_server(&config.cluster_url).map(Arc::from);
        let mut host = Self::load(source, crate::client_from_config(config)?, options).await?;
        host.kube.server = server;
        Ok(host)
    }

    /// Loads a component without a cluster, to describe it or report its grants: every `kube`
    /// call it makes is `unavailable`.
    pub async fn load_without_cluster(source: ComponentSource, options: HostOptions) -> Result<Self, HostError> {
        Self::load_with(source, None, options).await
    }

    async fn load_with(
        source: ComponentSource,
        client: Option<kube::Client>,
        options: HostOptions,
    ) -> Result<Self, HostError> {
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
        let pre = Arc::new(BoundPre::new(instance_pre).map_err(HostError::Link)?);
        let made_ahead = Arc::new(MadeAhead::new(pre.clone(), options.limits.clone()));
        let kube =
            KubeHost::with_client(client, Arc::new(options.policy.clone()), options.limits.kube_request_timeout())
                .with_body_limit(&options.limits);
        let slots =
            Arc::new(Semaphore::new(usize::try_from(options.limits.max_concurrent_calls).unwrap_or(usize::MAX)));
        let exec_slots = Semaphore::new(exec_share(options.limits.max_concurrent_calls));
        let lease_slots = LeaseSlots::new(options.limits.max_executes_per_lease);
        let grants = capabilities::grant(&options.policy, None);
        let mut host = Self {
            pre,
            made_ahead,
            kube,
            grants,
            limits: options.limits,
            slots,
            exec_slots,
            lease_slots,
            cache,
            calls: AtomicU64::new(0),
            guest_instructions: AtomicU64::new(0),
            call_times: Arc::default(),
            _engine: engine,
        };
        host.check_exports().await?;
        // A 0.1.0 component cannot declare its access; asking it would only run its code. The
        // declaration itself is read with no access at all: nothing is granted before it is known.
        if !matches!(*host.pre, BoundPre::SinceV0_1_0(..)) {
            let operator = host.kube.clone();
            host.kube = operator.with_policy(Policy {
                resources: Vec::new(),
                namespaces: Vec::new(),
                ..options.policy.clone()
            });
            let info = host.describe().await;
            host.kube = operator;
            host.grants = capabilities::grant(&options.policy, Some(&info?.access));
        }
        host.grants.log(host.pre.version());
        host.kube = host.kube.with_policy(host.grants.effective.clone());
        // The first call's instance, made before any call asks for it.
        host.made_ahead.refill().await;
        Ok(host)
    }

    /// What the provider declared, what the operator granted, and what the host enforces.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The contract version the component was built against (`0.2.0`).
    pub fn contract_version(&self) -> &'static str {
        self.pre.version()
    }

    /// How the component was obtained (compiled, loaded from the cache, rebuilt).
    pub fn cache_outcome(&self) -> &CacheOutcome {
        &self.cache
    }

    /// How many calls have started (each on its own instance).
    pub fn calls_started(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// How many calls took an instance made ahead, and how many made their own on their way to
    /// the export: calls at once beyond those made ahead make their own.
    pub fn instance_counts(&self) -> InstanceCounts {
        self.made_ahead.counts()
    }

    /// WebAssembly instructions the guest has run in this host's calls so far (instantiation
    /// included, made ahead or not); `None` unless `limits.count_guest_instructions`. The
    /// difference across one call is that call's work in the guest, the same on any machine for
    /// the same answers.
    pub fn guest_instructions(&self) -> Option<u64> {
        self.limits.count_guest_instructions.then(|| self.guest_instructions.load(Ordering::Relaxed))
    }

    /// The guest, import, whole and teardown time of this host's calls so far
    /// ([`crate::call_time`]); the difference across one call is where that call's time went
    /// (its teardown once it is done).
    pub fn call_times(&self) -> CallTimes {
        self.call_times.get()
    }

    /// Waits until every call started so far has ended, its store is dropped (a call's
    /// teardown follows its result) and the instance made ahead after it is made: for a caller
    /// about to read what the host holds, such as its resident memory.
    pub async fn settled(&self) {
        // Every slot at once: held by no call, and by no teardown. The semaphore is never closed.
        drop(self.slots.acquire_many(self.limits.max_concurrent_calls).await);
    }

    /// The per-call limits the host applies.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The policy the provider's `kube` calls go through: the effective one.
    pub fn policy(&self) -> &Policy {
        self.kube.policy()
    }

    /// Identity, capabilities and config schema of the provider.
    pub async fn describe(&self) -> Result<ProviderInfo, HostError> {
        self.call("describe", |bound, store| {
            Box::pin(async move {
                Ok(on_each_version!(bound, guest => ProviderInfo::from(guest.call_describe(store).await?),
                    neutral world, glue => glue::describe(world, store).await?))
            })
        })
        .await
    }

    /// Every problem of a config, and the normalized config.
    pub async fn validate_config(&self, config: &str) -> Result<Validation, HostError> {
        self.check_input("validate-config", config.len())?;
        let config = config.to_string();
        self.call("validate-config", move |bound, store| {
            Box::pin(async move {
                Ok(on_each_version!(bound, guest => Validation::from(guest.call_validate_config(store, &config).await?)))
            })
        })
        .await
    }

    /// Whether a config can work against the cluster; the host adds whether a NetworkPolicy
    /// isolates the sandboxes ([`network_policy`]), checked alongside and within the call's time,
    /// whether its policy would deny a claim's pool or template at acquire, or the template's pod
    /// exceeds the pod-security ceiling (not ok then: [`crate::warm_pool_ceiling`], which also
    /// warns of a template whose pod keeps its main process as PID 1), and a warning when it has
    /// no ownership key ([`crate::owner_signature`]).
    pub async fn probe(&self, config: &str) -> Result<ProbeResult, HostError> {
        self.check_input("probe", config.len())?;
        let within = self.limits.call_timeout().min(self.limits.kube_request_timeout());
        let isolation = network_policy::probe_finding(self.kube.client.clone(), self.policy(), config, within);
        let refusal = crate::write_guard::claim_probe_finding(self.policy(), config);
        let template = async {
            let check = crate::warm_pool_ceiling::probe_findings(&self.kube, config);
            tokio::time::timeout(within, check).await.unwrap_or_default()
        };
        let asked = config.to_string();
        let config = config.to_string();
        let provider = self.call("probe", move |bound, store| {
            Box::pin(async move {
                Ok(on_each_version!(bound, guest => ProbeResult::from(guest.call_probe(store, &config).await?)))
            })
        });
        let (result, finding, template) = tokio::join!(provider, isolation, template);
        let mut result = result?;
        result.diagnostics.extend(finding);
        // The host answers what a provider says it could not check, and only that.
        let unchecked = result.diagnostics.iter().any(|d| d.code == contract::PROBE_WRITES_UNCHECKED);
        let writes = if unchecked {
            crate::write_access::probe_finding(self.kube.client.clone(), self.policy(), &asked, within).await
        } else {
            None
        };
        if let Some(writes) = writes {
            result.diagnostics.retain(|d| d.code != contract::PROBE_WRITES_UNCHECKED);
            if writes.severity == Severity::Error {
                result.ok = false;
                result.summary = writes.message.clone();
            }
            result.diagnostics.push(writes);
        }
        result.diagnostics.extend(crate::owner_signature::probe_finding(self.policy().ownership_keys.as_ref()));
        let (over_ceiling, warnings): (Vec<_>, Vec<_>) =
            template.into_iter().partition(|d| d.severity == Severity::Error);
        result.diagnostics.extend(warnings);
        for refusal in refusal.into_iter().chain(over_ceiling) {
            result.ok = false;
            result.summary = refusal.message.clone();
            result.diagnostics.push(refusal);
        }
        Ok(result)
    }

    /// The host's access to the cluster, for the host's own reads ([`crate::inventory`]).
    pub(crate) fn kube(&self) -> &KubeHost {
        &self.kube
    }

    /// Counts the policy's denials of the provider's requests in `metrics` from now on (the
    /// calls themselves are counted by whoever answers them, such as [`crate::serve`]).
    pub fn record_metrics(&mut self, metrics: Arc<HostMetrics>) {
        self.kube.metrics = Some(metrics);
    }

    /// Records every create the provider sends from now on, for a caller that must say what an
    /// interrupted call left behind ([`crate::created_objects`]).
    pub fn record_created(&mut self) -> CreatedObjects {
        let objects = CreatedObjects::default();
        self.kube.created = Some(objects.clone());
        objects
    }

    /// Provisions a sandbox and waits until it is ready.
    pub async fn acquire(&self, request: AcquireRequest) -> Result<Lease, HostError> {
        self.check_input("acquire", request_size(&request))?;
        self.call("acquire", move |bound, store| {
            Box::pin(async move {
                Ok(on_each_version!(bound, guest => guest
                .call_acquire(store, &request.into())
                .await?
                .map(Lease::from)
                .map_err(ProviderError::from),
                neutral world, glue => {
                    let request = request.into();
                    match world.provider().call_acquire(&mut *store, &request).await? {
                        Ok(lease) => glue::lease(world, store, lease).await?,
                        Err(e) => Err(ProviderError::from(e)),
                    }
                }))
            })
        })
        .await?
        .map_err(HostError::Provider)
    }

    /// Whether a stored lease can be used again.
    pub async fn resume_check(&self, lease: LeaseRef) -> Result<ResumeOutcome, HostError> {
        self.check_input("resume-check", lease_size(&lease))?;
        let scope = LeaseScope::of(&lease.lease);
        self.call_scoped("resume-check", scope, move |bound, store| {
            Box::pin(async move {
                Ok(on_each_version!(bound, guest => guest
                .call_resume_check(store, &lease.into())
                .await?
                .map(ResumeOutcome::from)
                .map_err(ProviderError::from),
                neutral world, glue => {
                    let lease = lease.into();
                    match world.provider().call_resume_check(&mut *store, &lease).await? {
                        Ok(outcome) => glue::outcome(world, store, outcome).await?,
                        Err(e) => Err(ProviderError::from(e)),
                    }
                }))
            })
        })
        .await?
        .map_err(HostError::Provider)
    }

    /// Moves the lease's expiry to `expires_at` (epoch millis): the renewed lease, or `expired`
    /// when the sandbox is gone.
    pub async fn renew(&self, lease: LeaseRef, expires_at: i64) -> Result<ResumeOutcome, HostError> {
        self.check_input("renew", lease_size(&lease))?;
        let scope = LeaseScope::of(&lease.lease);
        self.call_scoped("renew", scope, move |bound, store| {
            Box::pin(async move {
                Ok(on_each_version!(bound, guest => guest
                .call_renew(store, &lease.into(), expires_at)
                .await?
                .map(ResumeOutcome::from)
                .map_err(ProviderError::from),
                neutral world, glue => {
                    let lease = lease.into();
                    let provider = world.provider();
                    match provider.call_renew(&mut *store, &lease, expires_at).await? {
                        Ok(outcome) => glue::outcome(world, store, outcome).await?,
                        Err(e) => Err(ProviderError::from(e)),
                    }
                }))
            })
        })
        .await?
        .map_err(HostError::Provider)
    }

    /// Ends a run: destroys an ephemeral lease, suspends a reusable one.
    pub async fn release(&self, lease: LeaseRef) -> Result<(), HostError> {
        self.check_input("release", lease_size(&lease))?;
        let scope = LeaseScope::of(&lease.lease);
        self.call_scoped("release", scope, move |bound, store| {
            Box::pin(async move {
                Ok(on_each_version!(bound, guest => guest
                    .call_release(store, &lease.into())
                    .await?
                    .map_err(ProviderError::from)))
            })
        })
        .await?
        .map_err(HostError::Provider)
    }

    /// Deletes everything the lease could own.
    pub async fn destroy(&self, lease: LeaseRef) -> Result<DestroyReport, HostError> {
        self.check_input("destroy", lease_size(&lease))?;
        let scope = LeaseScope::of(&lease.lease);
        self.call_scoped("destroy", scope, move |bound, store| {
            Box::pin(async move {
                Ok(on_each_version!(bound, guest => guest
                    .call_destroy(store, &lease.into())
                    .await?
                    .map(DestroyReport::from)
                    .map_err(ProviderError::from)))
            })
        })
        .await?
        .map_err(HostError::Provider)
    }

    /// Runs a command in the lease's sandbox. The call's deadline is the call timeout plus the
    /// command's own (at most `exec-timeout-ms`); a provider of contract 0.1.0 or 0.2.0 has no
    /// `execute`, which is the provider's `unsupported`.
    pub async fn execute(&self, lease: LeaseRef, request: ExecRequest) -> Result<ExecResult, HostError> {
        let stdin = request.stdin.as_ref().map_or(0, String::len);
        let words: usize = request.args.iter().map(String::len).sum::<usize>() + request.command.len();
        let env: usize = request.env.iter().map(|e| e.name.len() + e.value.len()).sum();
        self.check_input("execute", lease_size(&lease).saturating_add(stdin + words + env))?;
        let command = self
            .limits
            .exec_timeout()
            .min(request.timeout_ms.map_or(self.limits.exec_timeout(), |ms| Duration::from_millis(u64::from(ms))));
        // The provider sees the command's real bound, not whatever the call has left.
        let mut request = request;
        request.timeout_ms = Some(u32::try_from(command.as_millis()).unwrap_or(u32::MAX));
        let limit = self.limits.call_timeout() + command;
        let slot_error = |e: AcquireError| HostError::Instantiate { call: "execute", message: e.to_string() };
        let _lease_slot = self.lease_slots.acquire(&lease.lease.provider_lease_id).await.map_err(slot_error)?;
        let _exec = self.exec_slots.acquire().await.map_err(slot_error)?;
        let scope = LeaseScope::of(&lease.lease);
        self.call_within("execute", limit, scope, move |bound, store| {
            Box::pin(async move {
                Ok(match bound {
                    Bound::SinceV0_4_0(world) => {
                        let request = request.into();
                        let provider = world.provider();
                        provider
                            .call_execute(store, &lease.into(), &request)
                            .await?
                            .map(ExecResult::from)
                            .map_err(ProviderError::from)
                    }
                    Bound::SinceV0_3_0(world) => {
                        let request = request.into();
                        let provider = world.provider();
                        provider
                            .call_execute(store, &lease.into(), &request)
                            .await?
                            .map(ExecResult::from)
                            .map_err(ProviderError::from)
                    }
                    Bound::SinceV0_1_0(_) => Err(no_execute("0.1.0")),
                    Bound::SinceV0_2_0(_) => Err(no_execute("0.2.0")),
                })
            })
        })
        .await?
        .map_err(HostError::Provider)
    }

    /// Refuses a call whose input is larger than the host passes to a guest, before any
    /// instance is made: a guest's memory is capped, so an oversized input would only trap it.
    fn check_input(&self, call: &'static str, bytes: usize) -> Result<(), HostError> {
        let limit = self.limits.max_input_bytes;
        if u64::try_from(bytes).unwrap_or(u64::MAX) > limit {
            return Err(HostError::InputTooLarge { call, bytes: u64::try_from(bytes).unwrap_or(u64::MAX), limit });
        }
        Ok(())
    }
}

/// What each list item costs a guest beyond its strings (its record, its allocations), so a
/// million empty env vars count for something.
const ITEM_OVERHEAD: usize = 32;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What a provider of a contract without `execute` answers.
fn no_execute(version: &str) -> ProviderError {
    ProviderError::unsupported(format!(
        "this provider was built against contract {version}, which has no execute; rebuild it against 0.3.0 or later \
         to run commands in its sandboxes"
    ))
}

/// The bytes a request carries into the guest: its strings, and every list item.
fn request_size(r: &AcquireRequest) -> usize {
    let env: usize = r.env.iter().map(|e| e.name.len() + e.value.len() + ITEM_OVERHEAD).sum();
    r.config.len() + r.run_id.len() + r.acquisition_id.len() + r.agent_id.as_ref().map_or(0, String::len) + env
}

/// The bytes a stored lease carries into the guest.
fn lease_size(r: &LeaseRef) -> usize {
    let l = &r.lease;
    let optional =
        [&l.pod_name, &l.pod_uid, &l.pod_ip].iter().map(|o| o.as_ref().map_or(0, String::len)).sum::<usize>();
    r.config.len()
        + l.provider_lease_id.len()
        + l.namespace.len()
        + l.api_version.len()
        + l.workload_uid.len()
        + l.metadata.len()
        + optional
}
