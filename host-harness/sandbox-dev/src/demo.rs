//! `sandbox-dev demo`: the Kubernetes provider's full lease lifecycle on each backend, on the
//! embedded cluster (or a real one), with each step's outcome, wall time and API calls; the
//! claim backend twice, on a warm pool with Ready members and on an empty one, so a warm and a
//! cold acquire show side by side; then the reference provider in the same host, with no
//! cluster at all: providers swap.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use contract_suite::warm_pool::{self, PoolSpec};
use embedded_cluster::{ClusterConfig, EmbeddedCluster, PROVIDER_USER, SandboxVersions};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use provider_host::compile_cache::CacheOutcome;
use provider_host::error::HostError;
use provider_host::policy::Policy;
use provider_host::records::{AcquireRequest, DeleteOutcome, DestroyReport, EnvVar, Lease, LeaseRef, ResumeOutcome};
use provider_host::runner::{ComponentSource, HostOptions, ProviderHost};
use sandbox_host::component_args::ComponentArgs;
use serde_json::json;

const NAMESPACE: &str = "sandbox-demo";

/// The demo's template, its warm pool (with Ready members) and its empty pool (every claim on
/// it starts cold).
const TEMPLATE: &str = "demo";
const WARM_POOL: &str = "demo-warm";
const EMPTY_POOL: &str = "demo-empty";
/// The warm pool's size.
const WARM_MEMBERS: u32 = 2;

struct Row {
    backend: &'static str,
    step: &'static str,
    ok: bool,
    outcome: String,
    wall: Duration,
    calls: Option<usize>,
}

struct Demo<'a> {
    host: &'a ProviderHost,
    cluster: Option<&'a EmbeddedCluster>,
    rows: Vec<Row>,
}

impl Demo<'_> {
    async fn step<T, F>(
        &mut self,
        backend: &'static str,
        step: &'static str,
        fut: F,
        show: impl Fn(&T) -> (bool, String),
    ) -> Option<T>
    where
        F: std::future::Future<Output = Result<T, HostError>>,
    {
        let mark = self.cluster.map(|c| c.requests().mark());
        let started = Instant::now();
        let result = fut.await;
        let wall = started.elapsed();
        let calls = self
            .cluster
            .zip(mark)
            .map(|(c, m)| c.requests().since(m).iter().filter(|e| e.user == PROVIDER_USER).count());
        let (ok, outcome, value) = match result {
            Ok(v) => {
                let (ok, text) = show(&v);
                (ok, text, Some(v))
            }
            Err(e) => (false, format!("error: {e}"), None),
        };
        sandbox_host::outln!(
            "  {:<10} {:<22} {:>9.1} ms {:>6}  {}{}",
            backend,
            step,
            wall.as_secs_f64() * 1000.0,
            calls.map_or("-".to_string(), |c| c.to_string()),
            if ok { "" } else { "UNEXPECTED: " },
            outcome
        );
        self.rows.push(Row { backend, step, ok, outcome, wall, calls });
        value
    }
}

/// A destroy report as a person reads it, in the words `--json` uses (`already-gone`).
fn report_words(report: &DestroyReport) -> String {
    let outcome = |o: &DeleteOutcome| match o {
        DeleteOutcome::Deleted => "deleted".to_string(),
        DeleteOutcome::AlreadyGone => "already-gone".to_string(),
        DeleteOutcome::Failed(why) => format!("failed: {why}"),
    };
    let objects: Vec<String> =
        report.objects.iter().map(|o| format!("{} {}: {}", o.kind, o.name, outcome(&o.outcome))).collect();
    objects.join(", ")
}

fn lease_summary(l: &Lease) -> String {
    format!(
        "{} pod {} ip {}",
        l.provider_lease_id,
        l.pod_name.as_deref().unwrap_or("-"),
        l.pod_ip.as_deref().unwrap_or("-")
    )
}

/// Runs the demo with `component`; with `kubeconfig`, against that cluster; then the reference
/// provider at `reference`. What the demo made on the cluster is removed at the end, unless
/// `keep`.
pub async fn run(
    component: &ComponentArgs,
    reference: &Path,
    kubeconfig: Option<&Path>,
    versions: SandboxVersions,
    keep: bool,
) -> anyhow::Result<()> {
    let cluster = match kubeconfig {
        Some(_) => None,
        None => Some(EmbeddedCluster::start(ClusterConfig { sandbox_versions: versions, ..Default::default() }).await?),
    };
    let (admin, client) = match (&cluster, kubeconfig) {
        (Some(c), _) => {
            let config = provider_host::kubeconfig::config(&c.kubeconfig(PROVIDER_USER)?).await?;
            (c.client().await?, provider_host::client_from_config(config)?)
        }
        (None, Some(path)) => {
            let yaml = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
            let config = provider_host::kubeconfig::config(&yaml).await?;
            (provider_host::kubeconfig::client(&yaml).await?, provider_host::client_from_config(config)?)
        }
        (None, None) => bail!("no cluster"),
    };
    match &cluster {
        Some(c) => sandbox_host::outln!("embedded cluster at {} (sandbox versions: {versions})", c.url()),
        None => {
            sandbox_host::outln!("cluster from kubeconfig: Kubernetes {}", admin.apiserver_version().await?.git_version)
        }
    }
    let mut made = Made::default();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if namespaces.get_opt(NAMESPACE).await?.is_none() {
        namespaces
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?)
            .await?;
        made.namespace = true;
    }
    let result = steps(component, reference, client, &admin, cluster.as_ref(), &mut made).await;
    let cleaned = if keep {
        made.say_kept();
        Ok(())
    } else {
        made.clean_up(&admin).await
    };
    result.and(cleaned)
}

/// What the demo made on the cluster besides its leases (which each lifecycle destroys).
#[derive(Default)]
struct Made {
    /// The namespace, when it was not there before.
    namespace: bool,
    /// The warm pools and their template.
    pools: bool,
}

impl Made {
    /// Removes the pools and the template, and the namespace when the demo made it.
    async fn clean_up(&self, admin: &kube::Client) -> anyhow::Result<()> {
        if self.pools {
            warm_pool::delete(admin, NAMESPACE, WARM_POOL, Some(TEMPLATE)).await?;
            warm_pool::delete(admin, NAMESPACE, EMPTY_POOL, None).await?;
        }
        if self.namespace {
            match Api::<Namespace>::all(admin.clone()).delete(NAMESPACE, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("delete the demo's namespace {NAMESPACE}")),
            }
        }
        let mut removed = Vec::new();
        if self.pools {
            removed.push(format!("the warm pools {WARM_POOL} and {EMPTY_POOL} and the template {TEMPLATE}"));
        }
        if self.namespace {
            removed.push(format!("the namespace {NAMESPACE}, which the demo made"));
        }
        if !removed.is_empty() {
            sandbox_host::outln!("\n  removed {} (--keep leaves them)", removed.join(", and "));
        }
        Ok(())
    }

    /// Says what `--keep` left and how to remove it.
    fn say_kept(&self) {
        let how = if self.namespace {
            format!("kubectl delete namespace {NAMESPACE}")
        } else {
            format!(
                "kubectl -n {NAMESPACE} delete sandboxwarmpools {WARM_POOL} {EMPTY_POOL}; kubectl -n {NAMESPACE} delete \
                 sandboxtemplates {TEMPLATE}"
            )
        };
        if self.namespace || self.pools {
            sandbox_host::outln!("\n  kept what the demo made in namespace {NAMESPACE}; remove it with: {how}");
        }
    }
}

/// The steps: each backend's lifecycle, the warm and cold claims, then the reference provider.
async fn steps(
    component: &ComponentArgs,
    reference: &Path,
    client: kube::Client,
    admin: &kube::Client,
    cluster: Option<&EmbeddedCluster>,
    made: &mut Made,
) -> anyhow::Result<()> {
    let source = component.source()?;
    let options = HostOptions {
        policy: Policy {
            warm_pools: vec![WARM_POOL.into(), EMPTY_POOL.into()],
            claim_templates: vec![TEMPLATE.into()],
            ..Policy::kubernetes_default([NAMESPACE])
        },
        cache_dir: component.cache_dir(),
        ..Default::default()
    };
    let loaded = Instant::now();
    let host = ProviderHost::load(source, client, options).await?;
    let cache = match host.cache_outcome() {
        CacheOutcome::Compiled => "compiled, no cache directory".to_string(),
        CacheOutcome::Loaded => "from the compile cache".to_string(),
        CacheOutcome::Stored => "compiled and cached".to_string(),
        CacheOutcome::Rebuilt(why) => format!("compiled again: {why}"),
        CacheOutcome::NotStored(why) => format!("compiled, not cached: {why}"),
    };
    sandbox_host::outln!("provider loaded in {:.1} ms ({cache})", loaded.elapsed().as_secs_f64() * 1000.0);
    sandbox_host::outln!("\n  {:<10} {:<22} {:>12} {:>6}  outcome", "backend", "step", "wall", "calls");
    let mut demo = Demo { host: &host, cluster, rows: Vec::new() };
    for backend in ["sandbox", "job"] {
        let settings = json!({"backend": backend, "image": "busybox:1.36", "command": ["sleep", "infinity"]});
        lifecycle(&mut demo, backend, settings).await;
    }
    made.pools = true;
    pools(admin).await?;
    // A v1beta1 claim takes its warm pool's template; only a v1alpha1 claim names one.
    let names_template = warm_pool::served_version(admin).await? == "v1alpha1";
    for (label, pool) in [("claim/cold", EMPTY_POOL), ("claim/warm", WARM_POOL)] {
        let mut claim = json!({"warmPool": pool});
        if names_template {
            claim["template"] = json!(TEMPLATE);
        }
        lifecycle(&mut demo, label, json!({"backend": "claim", "claim": claim})).await;
    }
    let acquire = |label: &str| demo.rows.iter().find(|r| r.backend == label && r.step == "acquire" && r.ok);
    if let (Some(cold), Some(warm)) = (acquire("claim/cold"), acquire("claim/warm")) {
        sandbox_host::outln!(
            "\n  a claim on a warm pool was ready in {:.1} ms, a cold one in {:.1} ms ({:.0}x faster)",
            warm.wall.as_secs_f64() * 1000.0,
            cold.wall.as_secs_f64() * 1000.0,
            cold.wall.as_secs_f64() / warm.wall.as_secs_f64().max(1e-6)
        );
    }
    if reference.exists() {
        let options = HostOptions { cache_dir: component.cache_dir(), ..Default::default() };
        let other = ProviderHost::load_without_cluster(ComponentSource::File(reference.to_path_buf()), options).await?;
        sandbox_host::outln!(
            "\n  the reference provider, in the same host with no cluster (it declares no kube access):"
        );
        let mut swapped = Demo { host: &other, cluster: None, rows: Vec::new() };
        reference_lifecycle(&mut swapped).await;
        demo.rows.append(&mut swapped.rows);
    } else {
        sandbox_host::outln!("\n  no reference provider at {} (make component builds it)", reference.display());
    }
    let failed: Vec<String> = demo.rows.iter().filter(|r| !r.ok).map(|r| format!("{} {}", r.backend, r.step)).collect();
    let total: Duration = demo.rows.iter().map(|r| r.wall).sum();
    let calls: usize = demo.rows.iter().filter_map(|r| r.calls).sum();
    sandbox_host::outln!(
        "\n  {} steps in {:.1} ms; {} API calls by the provider",
        demo.rows.len(),
        total.as_secs_f64() * 1000.0,
        calls
    );
    if !failed.is_empty() {
        let detail: Vec<&str> = demo.rows.iter().filter(|r| !r.ok).map(|r| r.outcome.as_str()).collect();
        bail!("steps did not go as expected: {} ({})", failed.join(", "), detail.join("; "));
    }
    Ok(())
}

/// The demo's warm pool (waited for until its members are Ready) and its empty pool, as an
/// operator sets them up (`sandbox-host pool create`).
async fn pools(admin: &kube::Client) -> anyhow::Result<()> {
    for (name, replicas) in [(WARM_POOL, WARM_MEMBERS), (EMPTY_POOL, 0)] {
        let spec = PoolSpec {
            namespace: NAMESPACE.into(),
            name: name.into(),
            template: TEMPLATE.into(),
            replicas,
            image: "busybox:1.36".into(),
        };
        warm_pool::apply(admin, &spec).await?;
    }
    let status = warm_pool::wait_ready(admin, NAMESPACE, WARM_POOL, WARM_MEMBERS, Duration::from_secs(120)).await?;
    sandbox_host::outln!(
        "\n  warm pool {WARM_POOL}: {}/{} Ready; pool {EMPTY_POOL}: none (its claims start cold)",
        status.ready,
        status.desired
    );
    Ok(())
}

/// One lease's life on the backend that `settings` (merged into the demo's config) chooses.
async fn lifecycle(demo: &mut Demo<'_>, backend: &'static str, settings: serde_json::Value) {
    let mut config = json!({"namespace": NAMESPACE, "leaseTtlSeconds": 14_400});
    if let (Some(config), Some(settings)) = (config.as_object_mut(), settings.as_object()) {
        config.extend(settings.clone());
    }
    let config = config.to_string();
    let tag = backend.replace('/', "-");
    let request = AcquireRequest {
        config: config.clone(),
        run_id: format!("demo-run-{tag}"),
        acquisition_id: format!("demo-{tag}-1"),
        agent_id: Some("demo-agent".into()),
        requested_expires_at: Some(jiff::Timestamp::now().as_millisecond() + 3_600_000),
        env: vec![
            EnvVar { name: "TASK".into(), value: "demo".into(), secret: false },
            EnvVar { name: "API_TOKEN".into(), value: "s3cr3t-demo-token".into(), secret: true },
        ],
        reusable: false,
    };
    let host = demo.host;
    let Some(lease) = demo.step(backend, "acquire", host.acquire(request), |l: &Lease| (true, lease_summary(l))).await
    else {
        return;
    };
    let lease_ref = LeaseRef { lease: lease.clone(), config: config.clone() };
    demo.step(backend, "resume-check", host.resume_check(lease_ref.clone()), |o| match o {
        ResumeOutcome::Resumable(l) => (true, format!("resumable ({})", lease_summary(l))),
        ResumeOutcome::Expired(r) => (false, format!("expired: {r}")),
    })
    .await;
    let later = jiff::Timestamp::now().as_millisecond() + 2 * 3_600_000;
    demo.step(backend, "renew (+2 h)", host.renew(lease_ref.clone(), later), |o| match o {
        ResumeOutcome::Resumable(l) => {
            let at = l.expires_at.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok());
            let shown = at.map(|t| t.to_string()).unwrap_or_default();
            (l.expires_at.is_some_and(|e| e >= later - 1_000), format!("expires at {shown}"))
        }
        ResumeOutcome::Expired(r) => (false, format!("expired: {r}")),
    })
    .await;
    demo.step(backend, "release (ephemeral)", host.release(lease_ref.clone()), |_| (true, "destroyed".into())).await;
    demo.step(backend, "resume-check", host.resume_check(lease_ref.clone()), |o| match o {
        ResumeOutcome::Resumable(_) => (false, "still resumable".into()),
        ResumeOutcome::Expired(r) => (true, format!("expired: {r}")),
    })
    .await;
    demo.step(backend, "destroy again", host.destroy(lease_ref), |report| {
        let all_gone = report.objects.iter().all(|o| matches!(o.outcome, DeleteOutcome::AlreadyGone));
        (all_gone, report_words(report))
    })
    .await;
}

/// The reference provider's life: it keeps everything in the lease, so a retried acquire gets
/// the same lease, and a failure its config asks for comes back typed.
async fn reference_lifecycle(demo: &mut Demo<'_>) {
    let config = json!({"leaseTtlSeconds": 3600}).to_string();
    let request = |config: &str, id: &str| AcquireRequest {
        config: config.to_string(),
        run_id: "demo-run-reference".into(),
        acquisition_id: id.into(),
        agent_id: None,
        requested_expires_at: Some(jiff::Timestamp::now().as_millisecond() + 3_600_000),
        env: Vec::new(),
        reusable: false,
    };
    let host = demo.host;
    let Some(lease) = demo
        .step("ref", "acquire", host.acquire(request(&config, "demo-ref-1")), |l: &Lease| {
            (true, l.provider_lease_id.clone())
        })
        .await
    else {
        return;
    };
    let id = lease.provider_lease_id.clone();
    demo.step("ref", "acquire again", host.acquire(request(&config, "demo-ref-1")), |l: &Lease| {
        (l.provider_lease_id == id, format!("the same lease {}", l.provider_lease_id))
    })
    .await;
    let lease_ref = LeaseRef { lease, config: config.clone() };
    demo.step("ref", "resume-check", host.resume_check(lease_ref.clone()), |o| match o {
        ResumeOutcome::Resumable(l) => (true, format!("resumable ({})", l.provider_lease_id)),
        ResumeOutcome::Expired(r) => (false, format!("expired: {r}")),
    })
    .await;
    let failing = json!({"operations": {"acquire": {"fail": {"error": "capacity", "retryable": true}}}}).to_string();
    let refused = async { Ok::<_, HostError>(host.acquire(request(&failing, "demo-ref-2")).await) };
    demo.step("ref", "acquire (told to fail)", refused, |r| match r {
        Err(HostError::Provider(e)) => {
            (e.kind() == "capacity", format!("{} ({})", e.kind(), if e.retryable() { "retryable" } else { "final" }))
        }
        other => (false, format!("{other:?}")),
    })
    .await;
    demo.step("ref", "destroy", host.destroy(lease_ref), |report| (true, report_words(report))).await;
}
