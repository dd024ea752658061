//! The agent-sandbox `SandboxClaim` object (v1beta1, or v1alpha1 where a cluster serves only
//! that), with its leak guard: `lifecycle.shutdownTime` at the lease's expiry and
//! `shutdownPolicy: Delete`, so the claim controller deletes the claim whatever happens to the
//! host, and garbage collection its Sandbox, the Sandbox's pod and the lease's Secret. Also the
//! patch that renews it.
//!
//! What the claim names depends on the version ([`source`]): a v1beta1 claim names a warm pool
//! (`spec.warmPoolRef`) and gets the pool's template; a v1alpha1 claim names its template
//! (`spec.sandboxTemplateRef`) and a pool in `spec.warmpool` (`default`: any pool of the
//! template). The claim carries neither env nor volume claim templates, either of which makes
//! the controller skip the warm pool and cold-start (the lease's env is in its Secret, see
//! `secret`), and no pod metadata (the controller refuses some keys, and the template labels
//! the pod).

use std::collections::BTreeMap;

use crate::k8s_types::ObjectMeta;
use contract::k8s::agent_sandbox::{CLAIM_KIND, shutdown_policy, warm_pool_policy};
use serde::Serialize;
use serde_json::{Value, json};

use crate::api_versions::ClaimVersion;
use crate::config::ClaimSettings;
use crate::errors::ProviderError;

/// What a claim names, as its version needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimSource<'a> {
    /// v1beta1: the warm pool, whose template makes a Sandbox when none is ready.
    Pool(&'a str),
    /// v1alpha1: the template, and the pool (or `default`, or `none`).
    Template { template: &'a str, warm_pool: &'a str },
}

impl ClaimSource<'_> {
    /// The version this source is written in.
    pub fn version(self) -> ClaimVersion {
        match self {
            Self::Pool(_) => ClaimVersion::V1beta1,
            Self::Template { .. } => ClaimVersion::V1alpha1,
        }
    }
}

/// What a claim of `version` names, from the config: v1beta1 needs `claim.warmPool`, v1alpha1
/// needs `claim.template` (its pool defaults to `default`, any pool of the template). A config
/// that lacks what the served version needs is an `invalid-config` at that path.
pub fn source(version: ClaimVersion, claim: &ClaimSettings) -> Result<ClaimSource<'_>, ProviderError> {
    match version {
        ClaimVersion::V1beta1 => claim.warm_pool.as_deref().map(ClaimSource::Pool).ok_or_else(|| {
            ProviderError::invalid_config(
                "/claim/warmPool",
                "is required: the cluster serves SandboxClaim v1beta1 (agent-sandbox v0.5 and later), whose claims \
                 name a SandboxWarmPool (spec.warmPoolRef) and take the template from it. Set claim.warmPool to a \
                 pool in the config's namespace",
            )
        }),
        ClaimVersion::V1alpha1 => match claim.template.as_deref() {
            Some(template) => Ok(ClaimSource::Template {
                template,
                warm_pool: claim.warm_pool.as_deref().unwrap_or(warm_pool_policy::DEFAULT),
            }),
            None => Err(ProviderError::invalid_config(
                "/claim/template",
                "is required: the cluster serves only SandboxClaim v1alpha1 (agent-sandbox v0.4), whose claims name \
                 their SandboxTemplate (spec.sandboxTemplateRef). Set claim.template; claim.warmPool is then optional \
                 (default: any warm pool of the template)",
            )),
        },
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Claim<'a> {
    api_version: String,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: ClaimSpec<'a>,
}

#[derive(Serialize)]
struct NameRef<'a> {
    name: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClaimSpec<'a> {
    /// v1beta1 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    warm_pool_ref: Option<NameRef<'a>>,
    /// v1alpha1 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox_template_ref: Option<NameRef<'a>>,
    /// v1alpha1 only (the field is all lowercase there).
    #[serde(skip_serializing_if = "Option::is_none")]
    warmpool: Option<&'a str>,
    lifecycle: Lifecycle<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Lifecycle<'a> {
    shutdown_time: &'a str,
    shutdown_policy: &'static str,
}

/// Everything a claim is made of.
pub struct ClaimParams<'a> {
    /// The claim's name (`naming::workload_name`).
    pub name: &'a str,
    /// The config's namespace.
    pub namespace: &'a str,
    /// What it names (and so its version).
    pub source: ClaimSource<'a>,
    /// The identity's and the config's labels.
    pub labels: &'a BTreeMap<String, String>,
    /// The config's annotations, the raw ids and the spec fingerprint.
    pub annotations: &'a BTreeMap<String, String>,
    /// RFC 3339, whole seconds.
    pub shutdown_time: &'a str,
}

fn spec<'a>(source: ClaimSource<'a>, shutdown_time: &'a str) -> ClaimSpec<'a> {
    let (warm_pool_ref, sandbox_template_ref, warmpool) = match source {
        ClaimSource::Pool(pool) => (Some(NameRef { name: pool }), None, None),
        ClaimSource::Template { template, warm_pool } => (None, Some(NameRef { name: template }), Some(warm_pool)),
    };
    ClaimSpec {
        warm_pool_ref,
        sandbox_template_ref,
        warmpool,
        lifecycle: Lifecycle { shutdown_time, shutdown_policy: shutdown_policy::DELETE },
    }
}

/// The claim manifest.
pub fn claim(p: &ClaimParams<'_>) -> Result<Value, ProviderError> {
    let manifest = Claim {
        api_version: p.source.version().resource().api_version(),
        kind: CLAIM_KIND,
        metadata: crate::naming::object_meta(p.name, p.namespace, p.labels, p.annotations),
        spec: spec(p.source, p.shutdown_time),
    };
    serde_json::to_value(&manifest)
        .map_err(|e| ProviderError::internal(format!("could not encode the SandboxClaim: {e}")))
}

/// What an adopted claim must share with this request: its version and what it names (the
/// expiry differs per attempt).
pub fn spec_material(source: ClaimSource<'_>) -> Value {
    let mut spec = serde_json::to_value(spec(source, "")).unwrap_or(Value::Null);
    if let Some(map) = spec.as_object_mut() {
        map.remove("lifecycle");
    }
    json!({"version": source.version().as_str(), "spec": spec})
}

/// Moves the leak guard (renew): the claim controller deletes the claim at the new time.
pub fn shutdown_patch(shutdown_time: &str) -> Value {
    json!({"spec": {"lifecycle": {"shutdownTime": shutdown_time}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: ClaimSource<'_>) -> Value {
        let labels = BTreeMap::from([("l".to_string(), "v".to_string())]);
        let annotations = BTreeMap::from([("a".to_string(), "b".to_string())]);
        claim(&ClaimParams {
            name: "pc-1",
            namespace: "ns",
            source,
            labels: &labels,
            annotations: &annotations,
            shutdown_time: "2026-11-30T10:00:00Z",
        })
        .unwrap()
    }

    #[test]
    fn v1beta1_names_the_pool_and_carries_the_leak_guard() {
        let c = render(ClaimSource::Pool("python"));
        assert_eq!(c["apiVersion"], "extensions.agents.x-k8s.io/v1beta1");
        assert_eq!(c["kind"], "SandboxClaim");
        assert_eq!(
            c["spec"],
            json!({"warmPoolRef": {"name": "python"},
                   "lifecycle": {"shutdownTime": "2026-11-30T10:00:00Z", "shutdownPolicy": "Delete"}}),
            "no env, no volume claim templates, no pod metadata"
        );
        assert_eq!(
            (c["metadata"]["labels"]["l"].clone(), c["metadata"]["annotations"]["a"].clone()),
            (json!("v"), json!("b"))
        );
    }

    #[test]
    fn v1alpha1_names_the_template_and_the_pool_by_its_own_field() {
        let c = render(ClaimSource::Template { template: "py-tpl", warm_pool: "default" });
        assert_eq!(c["apiVersion"], "extensions.agents.x-k8s.io/v1alpha1");
        assert_eq!(
            c["spec"],
            json!({"sandboxTemplateRef": {"name": "py-tpl"}, "warmpool": "default",
                   "lifecycle": {"shutdownTime": "2026-11-30T10:00:00Z", "shutdownPolicy": "Delete"}})
        );
        assert_eq!(
            shutdown_patch("2026-12-01T00:00:00Z"),
            json!({"spec": {"lifecycle": {"shutdownTime": "2026-12-01T00:00:00Z"}}})
        );
    }

    #[test]
    fn what_the_served_version_needs_is_checked_with_the_path_and_why() {
        let pool_only = ClaimSettings { warm_pool: Some("python".into()), template: None };
        let template_only = ClaimSettings { warm_pool: None, template: Some("py-tpl".into()) };
        assert_eq!(source(ClaimVersion::V1beta1, &pool_only).unwrap(), ClaimSource::Pool("python"));
        assert_eq!(
            source(ClaimVersion::V1alpha1, &template_only).unwrap(),
            ClaimSource::Template { template: "py-tpl", warm_pool: "default" }
        );
        for (version, settings, path, why) in [
            (ClaimVersion::V1beta1, &template_only, "/claim/warmPool", "v1beta1"),
            (ClaimVersion::V1alpha1, &pool_only, "/claim/template", "v1alpha1"),
        ] {
            match source(version, settings).unwrap_err() {
                ProviderError::InvalidConfig(d) => {
                    assert_eq!(d.path, path);
                    assert!(d.message.contains(why) && d.message.starts_with("is required"), "{}", d.message);
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn the_fingerprint_leaves_the_expiry_out() {
        let a = spec_material(ClaimSource::Pool("python"));
        assert_eq!(a, json!({"version": "v1beta1", "spec": {"warmPoolRef": {"name": "python"}}}));
        assert_ne!(a, spec_material(ClaimSource::Pool("go")));
    }
}
