//! A warm pool's template under the pod-security ceiling: a claim's pod is the template's, which
//! no provider body carries, so the host reads it and checks it as it checks a pod spec a
//! provider sends ([`crate::pod_security_ceiling`]).
//!
//! The operator vouches for a pool by naming it in `warm-pools`; naming it does not lift the
//! ceiling. A claim's **templates** are the SandboxTemplate its pool's `spec.sandboxTemplateRef`
//! names and, for a v1alpha1 claim, the one its own `spec.sandboxTemplateRef` names (it starts
//! cold from that one when the pool has no ready member); its pod is a template's
//! `spec.podTemplate`. The host reads the pool and the template with its
//! own credentials (the Role `sandbox-host rbac` prints grants `get` on both) before it sends a
//! claim's create, and `probe` reports a template above the ceiling for a claim config
//! (`warm-pool-over-ceiling`), and warns of one whose pod keeps its main process as PID 1
//! (`template-pid-1-never-reaps`). A pool or template that does not exist is the claim controller's
//! to report; one the host may not read refuses the claim, since nothing would be checked.
//! Limit: the template can change after the check; an operator who lets others edit templates
//! should enforce the same level with Pod Security Admission on the namespace.

use serde_json::Value;

use crate::bindings::kube::{KubeError, ResourceType};
use crate::config_fields;
use crate::kube_host::KubeHost;
use crate::policy::quoted;
use crate::records::{Backend, Diagnostic, Severity};
use contract::k8s::agent_sandbox::{EXTENSIONS_GROUP, EXTENSIONS_VERSIONS, TEMPLATES, WARM_POOLS};

/// The probe error of a claim config whose template exceeds the ceiling.
pub const OVER_CEILING: &str = "warm-pool-over-ceiling";

/// The probe warning of a claim config whose template's pod keeps its main process as PID 1.
pub const NO_SHARED_PROCESSES: &str = "template-pid-1-never-reaps";

/// What the check of a claim's templates found.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// A template was found (and all found are under the ceiling).
    pub found: bool,
    /// The templates found whose pod does not share its process namespace, as `from` names them.
    pub unshared: Vec<String>,
}

/// Where a claim's pod comes from, as its body or config names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClaimSource<'a> {
    /// The warm pool it is served from (none for v1alpha1's `none` and `default`).
    pub pool: Option<&'a str>,
    /// The template a v1alpha1 claim names.
    pub template: Option<&'a str>,
}

/// Whether a v1alpha1 claim's `warmpool` names no pool: `none`, or `default` (any pool of its
/// template).
pub(crate) fn names_no_pool(pool: &str) -> bool {
    matches!(pool, "none" | "default")
}

impl<'a> ClaimSource<'a> {
    /// Where a SandboxClaim body says its pod comes from (`spec.warmPoolRef.name` in v1beta1,
    /// `spec.warmpool` and `spec.sandboxTemplateRef.name` in v1alpha1).
    pub(crate) fn of_claim(body: &'a Value) -> Self {
        let text = |key: &str| body.pointer(key).and_then(Value::as_str);
        let pool = text("/spec/warmPoolRef/name").or_else(|| text("/spec/warmpool").filter(|p| !names_no_pool(p)));
        ClaimSource { pool, template: text("/spec/sandboxTemplateRef/name") }
    }
}

impl<'a> ClaimSource<'a> {
    /// What the provider's claim of extensions `version` names for a claim config: a v1beta1
    /// claim only its pool (`claim.warmPool`), a v1alpha1 claim its template (`claim.template`)
    /// and its pool.
    fn of_config(config: &'a Value, version: &str) -> Self {
        let text = |key: &str| config.pointer(key).and_then(Value::as_str);
        let pool = text("/claim/warmPool").filter(|p| !names_no_pool(p));
        let template = text("/claim/template").filter(|_| version == "v1alpha1");
        ClaimSource { pool, template }
    }
}

/// Why a claim's template cannot be checked or exceeds the ceiling.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The template exceeds the ceiling: the text says how.
    OverCeiling(String),
    /// A read the check needs failed.
    Unreadable(KubeError),
}

fn resource(version: &str, plural: &str) -> ResourceType {
    ResourceType { group: EXTENSIONS_GROUP.to_string(), version: version.to_string(), plural: plural.to_string() }
}

impl KubeHost {
    /// Checks the templates a claim in `namespace` (of extensions API `version`) may get its pod
    /// from against the ceiling: its pool's, and the one it names itself (a v1alpha1 claim
    /// starts cold from it when the pool has no ready member). `found` is false when none exists
    /// in that version (the claim controller reports that).
    pub(crate) async fn check_claim_template(
        &self,
        version: &str,
        namespace: &str,
        source: ClaimSource<'_>,
    ) -> Result<Checked, Refused> {
        let mut pools_template = None;
        if let Some(pool) = source.pool {
            let read = self.read_as_host(&resource(version, WARM_POOLS), Some(namespace), pool).await;
            if let Some(pool_object) = read.map_err(Refused::Unreadable)? {
                pools_template =
                    pool_object.pointer("/spec/sandboxTemplateRef/name").and_then(Value::as_str).map(str::to_string);
            }
        }
        let mut checked = Checked::default();
        if let (Some(pool), Some(name)) = (source.pool, &pools_template) {
            let from = format!("warm pool {}'s template {}", quoted(pool), quoted(name));
            self.check_template(version, namespace, name, from, &mut checked).await?;
        }
        if let Some(name) = source.template.filter(|t| pools_template.as_deref() != Some(*t)) {
            self.check_template(version, namespace, name, format!("template {}", quoted(name)), &mut checked).await?;
        }
        Ok(checked)
    }

    /// Reads template `name` and holds its pod to the ceiling; nothing is noted when it does
    /// not exist.
    async fn check_template(
        &self,
        version: &str,
        namespace: &str,
        name: &str,
        from: String,
        checked: &mut Checked,
    ) -> Result<(), Refused> {
        let read = self.read_as_host(&resource(version, TEMPLATES), Some(namespace), name).await;
        let Some(template) = read.map_err(Refused::Unreadable)? else {
            return Ok(());
        };
        let Some(spec) = template.pointer("/spec/podTemplate/spec") else {
            return Ok(());
        };
        let metadata = template.pointer("/spec/podTemplate/metadata");
        self.policy.pod_security.check(metadata, spec).map_err(|why| Refused::OverCeiling(format!("{from}: {why}")))?;
        checked.found = true;
        if spec.get("shareProcessNamespace").and_then(Value::as_bool) != Some(true) {
            checked.unshared.push(from);
        }
        Ok(())
    }

    /// The answer to a claim's create whose template exceeds the ceiling (denied) or could not
    /// be read: a 403 says which grant is missing; any other failure of the read is passed on as
    /// it came, so the provider treats a blip as a blip and retries.
    pub(crate) fn claim_template_refusal(&self, refused: Refused) -> KubeError {
        match refused {
            Refused::OverCeiling(why) => {
                tracing::warn!(target: "provider_host::policy", reason = %why,
                    "claim refused: its template exceeds the pod-security ceiling");
                KubeError::Denied(format!("host denies create of sandboxclaims: {why}"))
            }
            Refused::Unreadable(KubeError::Forbidden(why)) => KubeError::Forbidden(format!(
                "the host could not read the claim's warm pool or template to check its pod against the \
                 pod-security ceiling ({why}); grant it `get` on {WARM_POOLS} and {TEMPLATES} (the Role `sandbox-host \
                 rbac` prints does)"
            )),
            Refused::Unreadable(other) => other,
        }
    }
}

/// What `probe` adds for a claim config: an error when its pool's (or own) template exceeds
/// the ceiling, since acquire would be denied; a warning for each template whose pod keeps its
/// main process as PID 1 (no `shareProcessNamespace`): on a real node that process reaps no
/// orphan, so every execute leaves zombies until the pod's PID limit stops all forks, and it
/// ignores SIGTERM, so a released pod is held for its whole grace period. The served extensions
/// version is found by trying each; nothing when there is no cluster, no pool or template, or
/// it cannot be read (acquire says why).
pub(crate) async fn probe_findings(kube: &KubeHost, config: &str) -> Vec<Diagnostic> {
    let Some(config) = kube.client.as_ref().and_then(|_| serde_json::from_str::<Value>(config).ok()) else {
        return Vec::new();
    };
    if config_fields::backend(&config) != Some(Backend::Claim) {
        return Vec::new();
    }
    let Some(namespace) = config_fields::namespace(&config) else {
        return Vec::new();
    };
    if !kube.policy.allows_namespace(namespace) {
        return Vec::new();
    }
    for version in EXTENSIONS_VERSIONS {
        let source = ClaimSource::of_config(&config, version);
        match kube.check_claim_template(version, namespace, source).await {
            Ok(checked) if checked.found => {
                return checked.unshared.into_iter().map(|from| Diagnostic {
                    severity: Severity::Warning,
                    code: NO_SHARED_PROCESSES.to_string(),
                    message: format!(
                        "{from}'s pod does not share its process namespace, so its main process is PID 1: on a real \
                         node it reaps nothing, and every command run in the sandbox leaves zombies until the pod's \
                         PID limit stops all forks, and it ignores SIGTERM, so a released pod is held for its whole \
                         grace period. Set spec.podTemplate.spec.shareProcessNamespace: true in the template."
                    ),
                }).collect();
            }
            Ok(_) => continue,
            Err(Refused::OverCeiling(why)) => {
                return vec![Diagnostic {
                    severity: Severity::Error,
                    code: OVER_CEILING.to_string(),
                    message: format!(
                        "acquire would be denied: {why}. Fix the template, or ask the operator to relax the ceiling."
                    ),
                }];
            }
            Err(Refused::Unreadable(_)) => return Vec::new(),
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_claim_names_its_pod_by_pool_or_template() {
        let beta = json!({"spec": {"warmPoolRef": {"name": "py"}}});
        assert_eq!(ClaimSource::of_claim(&beta), ClaimSource { pool: Some("py"), template: None });
        let alpha = json!({"spec": {"warmpool": "py", "sandboxTemplateRef": {"name": "t"}}});
        assert_eq!(ClaimSource::of_claim(&alpha), ClaimSource { pool: Some("py"), template: Some("t") });
        for no_pool in ["none", "default"] {
            let cold = json!({"spec": {"warmpool": no_pool, "sandboxTemplateRef": {"name": "t"}}});
            assert_eq!(ClaimSource::of_claim(&cold), ClaimSource { pool: None, template: Some("t") }, "{no_pool}");
        }
        assert_eq!(ClaimSource::of_claim(&json!({})), ClaimSource { pool: None, template: None });
        let config = json!({"backend": "claim", "claim": {"warmPool": "py", "template": "t"}});
        assert_eq!(ClaimSource::of_config(&config, "v1beta1"), ClaimSource { pool: Some("py"), template: None });
        assert_eq!(ClaimSource::of_config(&config, "v1alpha1"), ClaimSource { pool: Some("py"), template: Some("t") });
    }
}
