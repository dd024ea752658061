//! `sandbox-host demo`: a Sandbox's and a Job's life, step by step, on the embedded cluster (or
//! a real one), with each step's outcome, wall time and API calls.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use embedded_cluster::behaviour::Behaviour;
use embedded_cluster::{ADMIN_USER, ClusterConfig, EmbeddedCluster, SandboxVersions};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::core::ApiResource;
use kube::runtime::wait::{Condition, await_condition};
use kube::{Client, ResourceExt};
use serde_json::json;

const NAMESPACE: &str = "sandbox-demo";
const WAIT: Duration = Duration::from_secs(60);

struct Step {
    name: String,
    outcome: String,
    wall: Duration,
    calls: Option<usize>,
}

struct Recorder<'a> {
    cluster: Option<&'a EmbeddedCluster>,
    steps: Vec<Step>,
}

impl Recorder<'_> {
    async fn step<F, Fut>(&mut self, name: &str, f: F) -> anyhow::Result<()>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<String>>,
    {
        let mark = self.cluster.map(|c| c.requests().mark());
        let started = Instant::now();
        let result = f().await;
        let wall = started.elapsed();
        let calls =
            self.cluster.zip(mark).map(|(c, m)| c.requests().since(m).iter().filter(|e| e.user == ADMIN_USER).count());
        let outcome = match &result {
            Ok(o) => o.clone(),
            Err(e) => format!("FAILED: {e:#}"),
        };
        println!(
            "  {:<34} {:>9.1} ms  {:>5}  {}",
            name,
            wall.as_secs_f64() * 1000.0,
            calls.map_or("-".into(), |c| c.to_string()),
            outcome
        );
        self.steps.push(Step { name: name.into(), outcome, wall, calls });
        result.map(|_| ())
    }
}

fn sandbox_ready() -> impl Condition<DynamicObject> {
    |obj: Option<&DynamicObject>| condition_is(obj, "Ready", "True")
}

fn condition_is(obj: Option<&DynamicObject>, kind: &str, status: &str) -> bool {
    obj.and_then(|o| o.data["status"]["conditions"].as_array())
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == status))
}

async fn wait<K, C>(api: &Api<K>, name: &str, cond: C, what: &str) -> anyhow::Result<Option<K>>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    C: Condition<K>,
{
    tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond))
        .await
        .with_context(|| format!("timed out after {WAIT:?} waiting for {what}"))?
        .with_context(|| format!("watch failed while waiting for {what}"))
}

/// Runs the demo; with `kubeconfig`, against that cluster instead of the embedded one.
pub async fn run(kubeconfig: Option<&Path>, versions: SandboxVersions) -> anyhow::Result<()> {
    let cluster;
    let client = match kubeconfig {
        Some(path) => {
            cluster = None;
            let yaml = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
            embedded_cluster::tls::client_from_kubeconfig(&yaml).await?
        }
        None => {
            cluster =
                Some(EmbeddedCluster::start(ClusterConfig { sandbox_versions: versions, ..Default::default() }).await?);
            cluster.as_ref().context("cluster")?.client().await?
        }
    };
    match &cluster {
        Some(c) => println!("embedded cluster at {} (controllers: sandbox, job, kubelet, gc)", c.url()),
        None => println!("cluster from kubeconfig: Kubernetes {}", client.apiserver_version().await?.git_version),
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(NAMESPACE).await?.is_none() {
        namespaces
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?)
            .await?;
    }
    println!("\n  {:<34} {:>12}  {:>5}  outcome", "step", "wall", "calls");
    let mut rec = Recorder { cluster: cluster.as_ref(), steps: Vec::new() };
    sandbox_life(&client, &mut rec).await?;
    job_life(&client, &mut rec).await?;
    let total: Duration = rec.steps.iter().map(|s| s.wall).sum();
    let calls: usize = rec.steps.iter().filter_map(|s| s.calls).sum();
    let failed =
        rec.steps.iter().filter(|s| s.outcome.starts_with("FAILED")).map(|s| s.name.as_str()).collect::<Vec<_>>();
    println!(
        "\n  {} steps in {:.1} ms, {} API calls by the demo client",
        rec.steps.len(),
        total.as_secs_f64() * 1000.0,
        calls
    );
    if !failed.is_empty() {
        bail!("steps failed: {}", failed.join(", "));
    }
    Ok(())
}

async fn sandbox_resource(client: &Client) -> anyhow::Result<ApiResource> {
    let group = kube::discovery::group(client, "agents.x-k8s.io")
        .await
        .context("agent-sandbox is not installed (no agents.x-k8s.io group)")?;
    for v in ["v1beta1", "v1alpha1"] {
        if let Some((ar, _)) = group.versioned_resources(v).into_iter().find(|(ar, _)| ar.plural == "sandboxes") {
            return Ok(ar);
        }
    }
    bail!("agents.x-k8s.io serves no sandboxes resource")
}

async fn sandbox_life(client: &Client, rec: &mut Recorder<'_>) -> anyhow::Result<()> {
    let ar = sandbox_resource(client).await?;
    let beta = ar.version == "v1beta1";
    let sandboxes: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let name = "demo-sandbox";
    let knobs = Behaviour {
        start_delay: Some(Duration::from_millis(300)),
        ready_delay: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    let body = json!({
        "apiVersion": ar.api_version, "kind": "Sandbox", "metadata": {"name": name},
        "spec": {"podTemplate": {"metadata": {"annotations": knobs.to_annotations()},
            "spec": {"containers": [{"name": "agent", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}}
    });
    rec.step(&format!("sandbox: create ({})", ar.version), || async {
        let obj: DynamicObject = serde_json::from_value(body.clone())?;
        let created = sandboxes.create(&PostParams::default(), &obj).await?;
        Ok(format!("uid {}", created.uid().unwrap_or_default()))
    })
    .await?;
    rec.step("sandbox: wait Ready (watch)", || async {
        wait(&sandboxes, name, sandbox_ready(), "the Sandbox to be Ready").await?;
        let pod = pods.get(name).await?;
        let ip = pod.status.and_then(|s| s.pod_ip).unwrap_or_default();
        Ok(format!(
            "pod {} on {} ip {ip}",
            pod.metadata.name.unwrap_or_default(),
            pod.spec.and_then(|s| s.node_name).unwrap_or_default()
        ))
    })
    .await?;
    let first_uid = pods.get(name).await?.uid().unwrap_or_default();
    rec.step("sandbox: suspend", || async {
        let patch =
            if beta { json!({"spec": {"operatingMode": "Suspended"}}) } else { json!({"spec": {"replicas": 0}}) };
        sandboxes.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        wait(
            &sandboxes,
            name,
            |o: Option<&DynamicObject>| condition_is(o, "Suspended", "True"),
            "the Sandbox to be suspended",
        )
        .await?;
        wait(&pods, name, kube::runtime::conditions::is_deleted(&first_uid), "the pod to be deleted").await?;
        Ok("pod deleted, Suspended=True".into())
    })
    .await?;
    rec.step("sandbox: resume", || async {
        let patch = if beta { json!({"spec": {"operatingMode": "Running"}}) } else { json!({"spec": {"replicas": 1}}) };
        sandboxes.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        wait(&sandboxes, name, sandbox_ready(), "the Sandbox to be Ready again").await?;
        let uid = pods.get(name).await?.uid().unwrap_or_default();
        Ok(format!("Ready again, new pod uid {}", if uid != first_uid { "yes" } else { "NO" }))
    })
    .await?;
    rec.step("sandbox: delete (foreground)", || async {
        let uid = sandboxes.get(name).await?.uid().unwrap_or_default();
        sandboxes.delete(name, &DeleteParams::foreground()).await?;
        wait(&sandboxes, name, kube::runtime::conditions::is_deleted(&uid), "the Sandbox to be deleted").await?;
        let left = pods.get_opt(name).await?.is_some();
        Ok(if left { "Sandbox gone, pod still there".into() } else { "Sandbox and pod gone".into() })
    })
    .await
}

async fn job_life(client: &Client, rec: &mut Recorder<'_>) -> anyhow::Result<()> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let name = "demo-job";
    let knobs = Behaviour { run_duration: Some(Duration::from_millis(800)), exit_code: Some(0), ..Default::default() };
    let body = json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 900, "template": {
            "metadata": {"annotations": knobs.to_annotations()},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "task", "image": "busybox:1.36", "command": ["true"]}]}}}
    });
    rec.step("job: create", || async {
        let created = jobs.create(&PostParams::default(), &serde_json::from_value(body.clone())?).await?;
        Ok(format!("uid {}", created.uid().unwrap_or_default()))
    })
    .await?;
    rec.step("job: wait pod ready", || async {
        wait(
            &jobs,
            name,
            |j: Option<&Job>| j.and_then(|j| j.status.as_ref()).and_then(|s| s.ready).unwrap_or(0) >= 1,
            "a ready pod",
        )
        .await?;
        let list = pods.list(&kube::api::ListParams::default().labels(&format!("job-name={name}"))).await?;
        Ok(format!("pod {}", list.items.first().map(|p| p.name_any()).unwrap_or_default()))
    })
    .await?;
    rec.step("job: wait Complete", || async {
        wait(&jobs, name, kube::runtime::conditions::is_job_completed(), "the Job to complete").await?;
        let job = jobs.get(name).await?;
        Ok(format!("succeeded {}", job.status.and_then(|s| s.succeeded).unwrap_or(0)))
    })
    .await?;
    rec.step("job: delete (background)", || async {
        let uid = jobs.get(name).await?.uid().unwrap_or_default();
        jobs.delete(
            name,
            &DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() },
        )
        .await?;
        wait(&jobs, name, kube::runtime::conditions::is_deleted(&uid), "the Job to be deleted").await?;
        let selector = format!("job-name={name}");
        let deadline = Instant::now() + WAIT;
        loop {
            let left = pods.list(&kube::api::ListParams::default().labels(&selector)).await?.items.len();
            if left == 0 {
                return Ok("Job gone, pods collected".into());
            }
            if Instant::now() > deadline {
                bail!("{left} pods of the Job were not garbage-collected");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}
