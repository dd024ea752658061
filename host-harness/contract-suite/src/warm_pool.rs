//! Warm pools as an operator sets them up: a `SandboxTemplate` and a `SandboxWarmPool` of it,
//! written with the operator's own credentials (never the provider's: a provider only claims
//! from a pool). `sandbox-host pool`, the demo, the benchmarks and the tests of the `claim`
//! backend share these, so each sets a pool up the same way.
//!
//! The template's pod is the provider's own hardened pod (non-root, no privilege escalation,
//! read-only root, every capability dropped, no ServiceAccount token), with one container named
//! `sandbox` that sleeps, so `execute` finds it, writable `/workspace`, `/home/sandbox` and
//! `/tmp`, and a shared process namespace, so the pause process is PID 1: it reaps what
//! executes leave and a claim's destroy takes seconds, not the grace period (see the
//! provider's `pod_spec`). Which extensions version is written follows what the cluster serves: v1beta1
//! (agent-sandbox v0.5 on) or v1alpha1 (v0.4).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use contract::k8s::agent_sandbox::{
    EXTENSIONS_GROUP, EXTENSIONS_VERSIONS, TEMPLATE_KIND, TEMPLATES, WARM_POOL_KIND, WARM_POOLS,
};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

/// The field manager of the operator's writes.
const FIELD_MANAGER: &str = "sandbox-host-pool";

/// A pool to set up.
#[derive(Debug, Clone)]
pub struct PoolSpec {
    /// The namespace of the template, the pool and every Sandbox they make.
    pub namespace: String,
    /// The pool's name (its members are named `<name>-xxxxx`).
    pub name: String,
    /// The template's name.
    pub template: String,
    /// How many Ready members the pool keeps.
    pub replicas: u32,
    /// The sandbox image.
    pub image: String,
}

/// What a pool reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStatus {
    /// `spec.replicas`.
    pub desired: u32,
    /// `status.replicas`: members, ready or not.
    pub members: u32,
    /// `status.readyReplicas`.
    pub ready: u32,
    /// The template it makes members from.
    pub template: String,
}

/// The served version of the extensions group, preferring v1beta1.
pub async fn served_version(client: &Client) -> anyhow::Result<&'static str> {
    let group = kube::discovery::group(client, EXTENSIONS_GROUP).await.with_context(|| {
        format!("the cluster does not serve {EXTENSIONS_GROUP}: install agent-sandbox's extensions (v0.4 or later)")
    })?;
    for version in EXTENSIONS_VERSIONS {
        if group.versioned_resources(version).iter().any(|(ar, _)| ar.plural == WARM_POOLS) {
            return Ok(version);
        }
    }
    bail!("{EXTENSIONS_GROUP} is served without {WARM_POOLS} in {}", EXTENSIONS_VERSIONS.join(" or "))
}

fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(EXTENSIONS_GROUP, version, kind), plural)
}

/// The template of `spec`: the hardened sleeping pod described in the module docs.
pub fn template_manifest(spec: &PoolSpec, version: &str) -> Value {
    let empty = |name: &str| json!({"name": name, "emptyDir": {}});
    let mount = |name: &str, path: &str| json!({"name": name, "mountPath": path});
    json!({
        "apiVersion": format!("{EXTENSIONS_GROUP}/{version}"),
        "kind": TEMPLATE_KIND,
        "metadata": {"name": spec.template, "namespace": spec.namespace},
        "spec": {
            "podTemplate": {
                "metadata": {"labels": {"app.kubernetes.io/name": "sandbox"}},
                "spec": {
                    "automountServiceAccountToken": false,
                    "shareProcessNamespace": true,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "sandbox",
                        "image": spec.image,
                        "command": ["sleep", "infinity"],
                        "workingDir": "/workspace",
                        "env": [{"name": "HOME", "value": "/home/sandbox"}],
                        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                                      "limits": {"cpu": "2", "memory": "4Gi"}},
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [mount("workspace", "/workspace"), mount("home", "/home/sandbox"),
                                         mount("tmp", "/tmp")],
                    }],
                    "volumes": [empty("workspace"), empty("home"), empty("tmp")],
                },
            },
        },
    })
}

/// The pool of `spec`.
pub fn pool_manifest(spec: &PoolSpec, version: &str) -> Value {
    json!({
        "apiVersion": format!("{EXTENSIONS_GROUP}/{version}"),
        "kind": WARM_POOL_KIND,
        "metadata": {"name": spec.name, "namespace": spec.namespace},
        "spec": {"replicas": spec.replicas, "sandboxTemplateRef": {"name": spec.template}},
    })
}

/// Creates or updates the template and the pool (a create, or a merge patch of the spec when
/// it exists, so running it again with another replica count scales the pool; the embedded
/// cluster has no server-side apply).
pub async fn apply(client: &Client, spec: &PoolSpec) -> anyhow::Result<()> {
    let version = served_version(client).await?;
    let templates: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &spec.namespace, &resource(version, TEMPLATE_KIND, TEMPLATES));
    put(&templates, &spec.template, template_manifest(spec, version))
        .await
        .with_context(|| format!("write SandboxTemplate {}/{}", spec.namespace, spec.template))?;
    let pools: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &spec.namespace, &resource(version, WARM_POOL_KIND, WARM_POOLS));
    put(&pools, &spec.name, pool_manifest(spec, version))
        .await
        .with_context(|| format!("write SandboxWarmPool {}/{}", spec.namespace, spec.name))?;
    Ok(())
}

/// Creates `manifest`, or merge-patches its spec over the existing object of that name.
async fn put(api: &Api<DynamicObject>, name: &str, manifest: Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(manifest.clone()).context("encode the object")?;
    match api.create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            api.patch(name, &params, &Patch::Merge(json!({"spec": manifest["spec"]}))).await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// The pool's status, or `None` when there is no such pool.
pub async fn status(client: &Client, namespace: &str, name: &str) -> anyhow::Result<Option<PoolStatus>> {
    let version = served_version(client).await?;
    let pools: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource(version, WARM_POOL_KIND, WARM_POOLS));
    let Some(pool) = pools.get_opt(name).await.with_context(|| format!("read SandboxWarmPool {namespace}/{name}"))?
    else {
        return Ok(None);
    };
    let count = |path: &str| pool.data.pointer(path).and_then(Value::as_u64).unwrap_or(0);
    let count = |path: &str| u32::try_from(count(path)).unwrap_or(u32::MAX);
    Ok(Some(PoolStatus {
        desired: count("/spec/replicas"),
        members: count("/status/replicas"),
        ready: count("/status/readyReplicas"),
        template: pool.data.pointer("/spec/sandboxTemplateRef/name").and_then(Value::as_str).unwrap_or("").to_string(),
    }))
}

/// Waits until the pool reports `ready` Ready members (and no more members than it wants).
pub async fn wait_ready(
    client: &Client,
    namespace: &str,
    name: &str,
    ready: u32,
    timeout: Duration,
) -> anyhow::Result<PoolStatus> {
    let started = Instant::now();
    loop {
        let now = status(client, namespace, name).await?;
        match now {
            Some(s) if s.ready >= ready && s.members <= s.desired => return Ok(s),
            last if started.elapsed() >= timeout => bail!(
                "SandboxWarmPool {namespace}/{name} did not reach {ready} Ready members within {} s (last: {last:?}); \
                 is the warm pool controller running?",
                timeout.as_secs()
            ),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Deletes the pool (its unclaimed members go with it, by garbage collection) and, with
/// `template`, the template too. Claimed Sandboxes are their claims' and stay.
pub async fn delete(client: &Client, namespace: &str, name: &str, template: Option<&str>) -> anyhow::Result<()> {
    let version = served_version(client).await?;
    let pools: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource(version, WARM_POOL_KIND, WARM_POOLS));
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
    match pools.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if gone(&e) => {}
        Err(e) => return Err(e).with_context(|| format!("delete SandboxWarmPool {namespace}/{name}")),
    }
    if let Some(template) = template {
        let templates: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &resource(version, TEMPLATE_KIND, TEMPLATES));
        match templates.delete(template, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if gone(&e) => {}
            Err(e) => return Err(e).with_context(|| format!("delete SandboxTemplate {namespace}/{template}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PoolSpec {
        PoolSpec {
            namespace: "agents".into(),
            name: "python".into(),
            template: "python-tpl".into(),
            replicas: 3,
            image: "python:3.12".into(),
        }
    }

    #[test]
    fn the_template_runs_the_hardened_sleeping_sandbox_container() {
        let t = template_manifest(&spec(), "v1beta1");
        assert_eq!(t["apiVersion"], "extensions.agents.x-k8s.io/v1beta1");
        let pod = &t["spec"]["podTemplate"]["spec"];
        assert_eq!(pod["containers"][0]["name"], "sandbox");
        assert_eq!(pod["containers"][0]["image"], "python:3.12");
        assert_eq!(pod["automountServiceAccountToken"], false);
        assert_eq!(pod["shareProcessNamespace"], true, "pause is PID 1");
        assert_eq!(pod["containers"][0]["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    }

    #[test]
    fn the_pool_names_its_template_and_size() {
        let p = pool_manifest(&spec(), "v1alpha1");
        assert_eq!(p["apiVersion"], "extensions.agents.x-k8s.io/v1alpha1");
        assert_eq!(p["spec"], json!({"replicas": 3, "sandboxTemplateRef": {"name": "python-tpl"}}));
    }
}
