//! Per call: what a fresh instance costs (pooling allocator and on demand), and each operation
//! through the WebAssembly host next to the same provider logic compiled natively over the same
//! transport (`native`), for the ratio WASM / native per operation and for a whole lifecycle;
//! each lifecycle step split on both sides into the host's requests and the provider's own
//! work (the component's by the host's call clock, [`provider_host::call_time`]; the native
//! provider's by [`native::Spent`]), which says whether the gap is that work run as
//! WebAssembly, the host's requests, or the call around them; and the guest's instructions per
//! operation ([`guest_work`]), which do not move with the machine's load.
//!
//! The cluster runs with no kubelet delay, so a lifecycle's time is the provider's, the host's
//! and the API server's, not a simulated container start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use embedded_cluster::EmbeddedCluster;
use provider_host::call_time::CallTimes;
use provider_host::lease_scope::LeaseScope;
use provider_host::records::{Lease, ResumeOutcome};
use provider_host::{KubeHost, Limits, ProviderHost};
use tokio::runtime::Runtime;

use crate::guest_work;
use crate::micro::Micro;
use crate::native;
use crate::stats::{Samples, fmt_duration};
use crate::table::Table;
use crate::world::{self, BACKENDS};

/// The instantiate target of the issue that asked for this report.
const INSTANTIATE_TARGET: Duration = Duration::from_micros(10);
/// The lifecycle ratio the host is held to.
const LIFECYCLE_RATIO_TARGET: f64 = 1.10;
/// Lifecycles whose guest instructions are counted: counts repeat, so a few show the spread.
const GUEST_WORK_ROUNDS: usize = 5;
/// The steps of a lifecycle, in the order they run.
const STEPS: [&str; 4] = ["acquire", "resume-check", "renew", "destroy"];

/// One step of a component lifecycle: its time, and the parts the host's call clock charged to
/// the guest and to the imports.
#[derive(Debug, Clone, Copy, Default)]
struct WasmStep {
    took: Duration,
    times: CallTimes,
}

impl WasmStep {
    /// What the step took outside the host's call: the input checks, the call slot, the
    /// runtime's `block_on` around it.
    fn outside(&self) -> Duration {
        self.took.saturating_sub(self.times.whole)
    }
}

/// One step of a native lifecycle: its time, and the parts of it the host spent serving its
/// requests and the provider spent parsing the answers.
#[derive(Debug, Clone, Copy, Default)]
struct NativeStep {
    took: Duration,
    serving: Duration,
    parsing: Duration,
}

impl NativeStep {
    /// The provider's own work: the step without the host's serving (the parsing included).
    fn own(&self) -> Duration {
        self.took.saturating_sub(self.serving)
    }
}

/// What the per-call section measures against.
struct Bench<'a> {
    runtime: &'a Runtime,
    host: ProviderHost,
    kube: KubeHost,
    limits: Limits,
}

impl Bench<'_> {
    /// The native provider for one call, with what the component's call gets: a fresh access
    /// for the call (its memory of what it was shown, its deadline) and, for a call on a stored
    /// lease, that lease's scope.
    fn native_call(&self, spent: &Arc<native::Spent>, lease: Option<&Lease>) -> native::Provider {
        let kube = self.kube.clone().scoped(lease.and_then(LeaseScope::of));
        let deadline = Instant::now() + self.limits.call_timeout();
        native::provider(&kube, self.runtime.handle().clone(), deadline, spent.clone())
    }

    /// Runs `f` on a native provider for one call ([`Self::native_call`]).
    fn native<R>(&self, lease: Option<&Lease>, f: impl FnOnce(&native::Provider) -> R) -> R {
        f(&self.native_call(&Arc::new(native::Spent::default()), lease))
    }

    fn wasm<R>(&self, f: impl std::future::Future<Output = R>) -> R {
        self.runtime.block_on(f)
    }

    fn acquire_wasm(&self, config: &str, id: &str) -> anyhow::Result<Lease> {
        Ok(self.wasm(self.host.acquire(world::request(config, id)))?)
    }
}

fn fail(e: impl std::fmt::Debug) -> anyhow::Error {
    anyhow::anyhow!("{e:?}")
}

fn must_resume(outcome: ResumeOutcome) -> anyhow::Result<()> {
    match outcome {
        ResumeOutcome::Resumable(_) => Ok(()),
        ResumeOutcome::Expired(why) => anyhow::bail!("a live lease was reported expired: {why}"),
    }
}

/// The instantiate table and the WASM / native table.
pub fn measure(runtime: &Runtime, micro: &mut Micro, lifecycles: usize) -> anyhow::Result<Vec<Table>> {
    let component = world::provider_component()?;
    let cluster: EmbeddedCluster = runtime.block_on(world::cluster(1, Duration::ZERO))?;
    let limits = Limits::default();
    let host = runtime.block_on(world::load(&cluster, &component, limits.clone()))?;
    let on_demand = runtime.block_on(world::load(&cluster, &component, Limits { pooling: false, ..limits.clone() }))?;
    let kube = runtime.block_on(world::kube_host(&cluster, &host, &limits))?;
    let bench = Bench { runtime, host, kube, limits };

    let mut instantiate = Table::new(
        "Instantiate (fresh store + instance per call)",
        &["instance", "instantiate p50", "instantiate p99", "teardown p50", "total p50", "target"],
    );
    // Criterion's ids are the ones earlier runs saved their baselines under.
    let allocators = [("made, pooling (the host's)", "pooling", &bench.host), ("made, on demand", "on", &on_demand)];
    for (name, id, host) in allocators {
        let id = format!("instantiate/{id}");
        let mut teardown = Vec::new();
        let made = micro.measure_timed(&id, || {
            let times = runtime.block_on(host.instantiate_only()).map_err(fail)?;
            teardown.push(times.teardown);
            Ok(times.instantiate)
        })?;
        // The teardowns of the measured calls: as many as criterion kept, the last ones.
        let teardown = Samples::new(teardown.split_off(teardown.len().saturating_sub(made.len())));
        let verdict = format!("making it: {}", verdict(made.p50()));
        instantiate.row([
            name.to_string(),
            fmt_duration(made.p50()),
            fmt_duration(made.p99()),
            fmt_duration(teardown.p50()),
            fmt_duration(made.p50() + teardown.p50()),
            verdict,
        ]);
    }

    let mut ratio = Table::new(
        "WASM / native, per operation (same provider logic, same host transport)",
        &["operation", "backend", "WASM p50", "native p50", "WASM / native", "WASM p99", "native p99"],
    );
    let mut pair = |op: &str, backend: &str, wasm: Samples, native: Samples| {
        let r = wasm.p50().as_secs_f64() / native.p50().as_secs_f64().max(1e-9);
        ratio.row([
            op.to_string(),
            backend.to_string(),
            fmt_duration(wasm.p50()),
            fmt_duration(native.p50()),
            format!("{r:.2}"),
            fmt_duration(wasm.p99()),
            fmt_duration(native.p99()),
        ]);
        r
    };

    let w = micro.measure("describe/wasm", || bench.wasm(bench.host.describe()).map(drop).map_err(fail))?;
    let n = micro.measure("describe/native", || {
        bench.native(None, |p| drop(p.describe()));
        Ok(())
    })?;
    pair("describe", "-", w, n);
    let config = world::config("sandbox");
    let w = micro
        .measure("validate-config/wasm", || bench.wasm(bench.host.validate_config(&config)).map(drop).map_err(fail))?;
    let n = micro.measure("validate-config/native", || {
        bench.native(None, |p| drop(p.validate_config(&config)));
        Ok(())
    })?;
    pair("validate-config", "sandbox", w, n);

    for backend in BACKENDS {
        let config = world::config(backend);
        let lease = bench.acquire_wasm(&config, &format!("per-call-{backend}"))?;
        let lease_ref = world::lease_ref(&lease, &config);
        let w = micro.measure(&format!("resume-check/{backend}/wasm"), || {
            must_resume(bench.wasm(bench.host.resume_check(lease_ref.clone())).map_err(fail)?)
        })?;
        let n = micro.measure(&format!("resume-check/{backend}/native"), || {
            must_resume(bench.native(Some(&lease_ref.lease), |p| p.resume_check(lease_ref.clone())).map_err(fail)?)
        })?;
        pair("resume-check", backend, w, n);
        let expires = || jiff::Timestamp::now().as_millisecond() + 1_800_000;
        let w = micro.measure(&format!("renew/{backend}/wasm"), || {
            must_resume(bench.wasm(bench.host.renew(lease_ref.clone(), expires())).map_err(fail)?)
        })?;
        let n = micro.measure(&format!("renew/{backend}/native"), || {
            must_resume(bench.native(Some(&lease_ref.lease), |p| p.renew(lease_ref.clone(), expires())).map_err(fail)?)
        })?;
        pair("renew", backend, w, n);
        bench.wasm(bench.host.destroy(lease_ref)).map_err(fail)?;
    }

    let mut split = Table::new(
        "Where WASM's extra time goes, per lifecycle step",
        &[
            "step",
            "backend",
            "WASM p50",
            "native p50",
            "WASM - native",
            "host's requests: WASM / native",
            "provider's work: WASM / native",
            "of which parsing (native)",
            "WASM: the host's call work",
            "WASM: outside the call",
        ],
    );
    let mut worst = 0.0f64;
    let counts_before = bench.host.instance_counts();
    let mut waits = Vec::new();
    for backend in BACKENDS {
        let config = world::config(backend);
        let (mut wasm, mut native) = (Vec::new(), Vec::new());
        let (mut wasm_steps, mut native_steps) = (Vec::new(), Vec::new());
        for i in 0..lifecycles {
            // Alternate which goes first, so drift in the cluster's state weighs on both alike.
            for native_first in [i % 2 == 0, i % 2 != 0] {
                let id = format!("lc-{backend}-{i}-{native_first}");
                let started = Instant::now();
                if native_first {
                    native_steps.push(lifecycle_native(&bench, &config, &id)?);
                    native.push(started.elapsed());
                } else {
                    wasm_steps.push(lifecycle_wasm(&bench, &config, &id)?);
                    wasm.push(started.elapsed());
                }
            }
        }
        worst = worst.max(pair("lifecycle", backend, Samples::new(wasm), Samples::new(native)));
        waits.extend(wasm_steps.iter().flatten().map(|step| step.times.instance));
        for (i, step) in STEPS.iter().enumerate() {
            let p50 = |values: Vec<Duration>| Samples::new(values).p50();
            let wasm = p50(wasm_steps.iter().map(|s| s[i].took).collect());
            let native = p50(native_steps.iter().map(|s| s[i].took).collect());
            let extra = match wasm.checked_sub(native) {
                Some(more) => fmt_duration(more),
                None => format!("-{}", fmt_duration(native - wasm)),
            };
            let pair = |w: Duration, n: Duration| format!("{} / {}", fmt_duration(w), fmt_duration(n));
            split.row([
                step.to_string(),
                backend.to_string(),
                fmt_duration(wasm),
                fmt_duration(native),
                extra,
                pair(
                    p50(wasm_steps.iter().map(|s| s[i].times.imports).collect()),
                    p50(native_steps.iter().map(|s| s[i].serving).collect()),
                ),
                pair(
                    p50(wasm_steps.iter().map(|s| s[i].times.guest).collect()),
                    p50(native_steps.iter().map(|s| s[i].own()).collect()),
                ),
                fmt_duration(p50(native_steps.iter().map(|s| s[i].parsing).collect())),
                fmt_duration(p50(wasm_steps.iter().map(|s| s[i].times.own()).collect())),
                fmt_duration(p50(wasm_steps.iter().map(|s| s[i].outside()).collect())),
            ]);
        }
    }
    let counts = bench.host.instance_counts();
    let (taken, made_in_call) = (counts.taken - counts_before.taken, counts.made_in_call - counts_before.made_in_call);
    let waits = Samples::new(waits);
    instantiate.row([
        "taken by a call (lifecycle calls below)".to_string(),
        fmt_duration(waits.p50()),
        fmt_duration(waits.p99()),
        "-".to_string(),
        "-".to_string(),
        format!("a call's wait: {}", verdict(waits.p50())),
    ]);
    instantiate.note(
        "Made: a Store with its limiter, epoch deadline and WASI context, an instance from the \
         `InstancePre`, and the export a call runs bound and type-checked (acquire's, the largest; \
         the others are checked once, when the component loads); no export runs. Teardown: dropping both, which \
         returns the instance's memory to the pool and resets it. The host does both between calls, holding \
         the slot of the call before, after its result has gone back: it drops that call's store and makes the \
         next call's store and instance.",
    );
    instantiate.note(format!(
        "Taken by a call: what the component's calls in the lifecycles below waited, from their slot to their \
         export's start (the host's call clock): an instance made ahead taken and given the call's state (its \
         name, access, lease scope, deadline), or one made then when none was ready: {taken} of {} calls took \
         one, {made_in_call} made their own. The target is what a call waits for its instance.",
        taken + made_in_call
    ));
    ratio.note(format!(
        "Lifecycle: acquire, resume-check, renew, destroy ({lifecycles} each, alternating); target WASM / native < {LIFECYCLE_RATIO_TARGET:.2}: {}.",
        if worst < LIFECYCLE_RATIO_TARGET { "met" } else { "missed" }
    ));
    ratio.note(
        "Native: the provider crate compiled for the host, each `kube` request driven on the same runtime through \
         the same `KubeHost` (policy, ownership, client) that serves the component's import; like each of the \
         component's calls, each native call gets that access fresh (its memory of what it was shown, its \
         deadline) and, on a stored lease, limited to the lease's scope.",
    );
    split.note(
        "From the lifecycles above, each step timed apart (p50s of each part, so the parts need not add up to \
         the step). The host's requests: the component's time inside the host's imports (the host's call clock, \
         `sandbox_host_call_import_seconds`) against the native provider's time in the same `KubeHost` serving \
         the same requests. The provider's work: the time the component's code ran \
         (`sandbox_host_call_guest_seconds`) against the native step without the host's serving; of which \
         parsing: `response_body::parse` of the host's answers natively, the code the guest runs on them. The \
         host's call work: the host's whole time for the call less both (its store and instance taken, \
         arguments in, result out: the per-call isolation, whose teardown and next instance follow the \
         result), which the native provider does not have. Outside the call: the step less the host's whole \
         time (the input checks, the call slot, the runtime's `block_on`).",
    );
    let guest = guest_work::measure(runtime, &cluster, &component, GUEST_WORK_ROUNDS)?;
    Ok(vec![instantiate, ratio, split, guest])
}

/// Whether `p50` meets the instantiate target, as the table says it.
fn verdict(p50: Duration) -> &'static str {
    if p50 < INSTANTIATE_TARGET { "met (< 10 us p50)" } else { "missed (< 10 us p50)" }
}

/// Runs `step`, adding its time to `took`.
fn timed<R>(took: &mut Duration, step: impl FnOnce() -> R) -> R {
    let started = Instant::now();
    let out = step();
    *took += started.elapsed();
    out
}

/// Runs `run` as `step` of a component lifecycle, with the share of the host's call clock it
/// added.
fn wasm_step<R>(host: &ProviderHost, step: &mut WasmStep, run: impl FnOnce() -> R) -> R {
    let before = host.call_times();
    let out = timed(&mut step.took, run);
    step.times = host.call_times().since(&before);
    out
}

fn lifecycle_wasm(bench: &Bench<'_>, config: &str, id: &str) -> anyhow::Result<[WasmStep; 4]> {
    let mut steps = [WasmStep::default(); 4];
    let host = &bench.host;
    let lease = wasm_step(host, &mut steps[0], || bench.acquire_wasm(config, id))?;
    let lease_ref = world::lease_ref(&lease, config);
    let resumed = wasm_step(host, &mut steps[1], || bench.wasm(host.resume_check(lease_ref.clone())));
    must_resume(resumed.map_err(fail)?)?;
    let expires = jiff::Timestamp::now().as_millisecond() + 1_800_000;
    let renewed = wasm_step(host, &mut steps[2], || bench.wasm(host.renew(lease_ref.clone(), expires)));
    must_resume(renewed.map_err(fail)?)?;
    wasm_step(host, &mut steps[3], || bench.wasm(host.destroy(lease_ref))).map_err(fail)?;
    Ok(steps)
}

/// Runs `run` as `step` of a native lifecycle, with its share of what `spent` sums.
fn native_step<R>(spent: &native::Spent, step: &mut NativeStep, run: impl FnOnce() -> R) -> R {
    let (serving, parsing) = (spent.serving(), spent.parsing());
    let out = timed(&mut step.took, run);
    step.serving = spent.serving().saturating_sub(serving);
    step.parsing = spent.parsing().saturating_sub(parsing);
    out
}

/// A native lifecycle, each step one call on a provider of its own, as each of the component's
/// steps is a call on a fresh instance.
fn lifecycle_native(bench: &Bench<'_>, config: &str, id: &str) -> anyhow::Result<[NativeStep; 4]> {
    let spent = Arc::new(native::Spent::default());
    let mut steps = [NativeStep::default(); 4];
    let call = |lease: Option<&Lease>| bench.native_call(&spent, lease);
    let lease = native_step(&spent, &mut steps[0], || call(None).acquire(world::request(config, id))).map_err(fail)?;
    let lease_ref = world::lease_ref(&lease, config);
    let on_lease = Some(&lease_ref.lease);
    let resumed = native_step(&spent, &mut steps[1], || call(on_lease).resume_check(lease_ref.clone()));
    must_resume(resumed.map_err(fail)?)?;
    let expires = jiff::Timestamp::now().as_millisecond() + 1_800_000;
    let renewed = native_step(&spent, &mut steps[2], || call(on_lease).renew(lease_ref.clone(), expires));
    must_resume(renewed.map_err(fail)?)?;
    native_step(&spent, &mut steps[3], || call(on_lease).destroy(lease_ref.clone())).map_err(fail)?;
    Ok(steps)
}
