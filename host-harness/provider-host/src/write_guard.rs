//! What a provider may write into an object: nothing that hands it, or the sandboxes it makes,
//! a credential or an object this installation did not create.
//!
//! Ownership (`crate::ownership`) proves which objects a provider may touch; this module makes
//! sure what it writes cannot reach further. Without it, an owned object could be a key to a
//! foreign one: a Secret of type `kubernetes.io/service-account-token` that the token
//! controller fills with a ServiceAccount's token, a pod template that mounts another team's
//! Secret or runs as a privileged ServiceAccount, a Job whose `manualSelector` adopts foreign
//! pods, an `ownerReference` that ties a new object to a foreign one. The rules:
//!
//! - A Secret is `Opaque` (or of no type) and carries no `kubernetes.io/service-account.*`
//!   annotation.
//! - Every pod spec in a body (any object with a `containers` list, so a Job's template, a
//!   Sandbox's `podTemplate` or a bare pod alike) runs as the default ServiceAccount or one the
//!   policy names (`pod-service-accounts`), mounts no ServiceAccount token (explicit
//!   `automountServiceAccountToken: false`, no projected token) unless the policy allows it,
//!   and refers only to Secrets this installation owns, that do not exist yet (the lease's own,
//!   created next), or that the policy names (`pod-secrets`). An `imagePullSecrets` entry must
//!   be one the policy names: a pull secret is a registry credential the operator hands out, and
//!   the kubelet uses it with no check of whose it is, so neither another lease's Secret nor a
//!   name that anyone could create before the pod starts may serve.
//! - Every pod spec stays under the operator's `pod-security` ceiling
//!   ([`crate::pod_security_ceiling`]): Kubernetes' restricted level by default, and no
//!   RuntimeClass, toleration, nodeSelector or affinity key, or image registry the operator
//!   does not list.
//! - A Job does not choose its own selector (`manualSelector`).
//! - A SandboxClaim names only warm pools (and, in v1alpha1, templates) the policy names
//!   (`warm-pools`, `claim-templates`): its pod is the template's, which the operator vouches
//!   for; and it asks for no `volumeClaimTemplates` (a claim's PVC could clone foreign data).
//! - Every `ownerReference` names an object this installation owns, by its uid.
//! - A patch names none of these fields at all, nor those of the pod-security ceiling
//!   (security contexts, host namespaces, runtime class, tolerations, node selection), nor what
//!   a claim is served from or which Sandbox its controller adopts: what a provider patches
//!   after create (an expiry, a suspension, a Secret's values) needs none of them.

use serde_json::Value;

use crate::bindings::kube::{KubeError, PatchType, ResourceType};
use crate::config_fields;
use crate::kube_host::KubeHost;
use crate::kube_url;
use crate::ownership::{ControllerRef, Link, Owner};
use crate::policy::{Policy, quoted};
use crate::records::{Backend, Diagnostic, Severity};
use crate::warm_pool_ceiling::{ClaimSource, names_no_pool};
use contract::k8s::agent_sandbox;

/// Annotations the ServiceAccount token controller acts on.
const SERVICE_ACCOUNT_ANNOTATIONS: &str = "kubernetes.io/service-account.";

/// Fields a patch may not name: they decide which credentials and objects a workload reaches.
const GUARDED_FIELDS: &[&str] = &[
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "volumes",
    "env",
    "envFrom",
    "imagePullSecrets",
    "containers",
    "initContainers",
    "ephemeralContainers",
    "manualSelector",
    "selector",
    "securityContext",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "hostUsers",
    "runtimeClassName",
    "tolerations",
    "nodeSelector",
    "nodeName",
    "affinity",
    "ownerReferences",
    "type",
    "warmPoolRef",
    "warmpool",
    "sandboxTemplateRef",
    "volumeClaimTemplates",
    contract::k8s::agent_sandbox::ASSIGNED_SANDBOX_ANNOTATION,
];

/// Why a body was refused, for the provider.
pub(crate) type Refusal = String;

fn is_secret(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "secrets"
}

/// Refuses a Secret the token controller would fill with a ServiceAccount's token.
fn check_secret(body: &Value) -> Result<(), Refusal> {
    match body.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t == "Opaque" => {}
        Some(other) => {
            return Err(format!(
                "a provider may create only Opaque Secrets, not type {}",
                quoted(&other.as_str().map_or_else(|| other.to_string(), str::to_string))
            ));
        }
    }
    let annotations = body.pointer("/metadata/annotations").and_then(Value::as_object);
    if let Some(key) =
        annotations.into_iter().flatten().map(|(k, _)| k).find(|k| k.starts_with(SERVICE_ACCOUNT_ANNOTATIONS))
    {
        return Err(format!("a Secret may not carry {}: it asks for a ServiceAccount's token", quoted(key)));
    }
    Ok(())
}

/// Every pod spec in `body` (any object with a `containers` list), with the metadata beside it
/// (a template's or a pod's), whose annotations can ask for an AppArmor profile.
fn pod_specs(body: &Value) -> Vec<(Option<&Value>, &Value)> {
    let mut out = Vec::new();
    let mut stack = vec![(None, body)];
    while let Some((metadata, value)) = stack.pop() {
        match value {
            Value::Object(map) => {
                if map.get("containers").is_some_and(Value::is_array) {
                    out.push((metadata, value));
                }
                let beside = map.get("metadata");
                stack.extend(map.iter().map(|(k, v)| (if k == "spec" { beside } else { None }, v)));
            }
            Value::Array(items) => stack.extend(items.iter().map(|v| (None, v))),
            _ => {}
        }
    }
    out
}

/// What a pod spec refers to that carries credentials: the Secrets its volumes and env name,
/// the pull secrets it names, and whether it asks for a projected ServiceAccount token.
#[derive(Debug, Default)]
struct References {
    secrets: Vec<String>,
    pull_secrets: Vec<String>,
    projected_token: bool,
}

/// The [`References`] of a pod spec.
fn secret_references(spec: &Value) -> References {
    let mut names = Vec::new();
    let mut projected_token = false;
    let mut push = |v: Option<&Value>| {
        if let Some(name) = v.and_then(Value::as_str) {
            names.push(name.to_string());
        }
    };
    let list = |v: &Value, key: &str| v.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    for volume in list(spec, "volumes") {
        push(volume.pointer("/secret/secretName"));
        for source in list(volume.get("projected").unwrap_or(&Value::Null), "sources") {
            push(source.pointer("/secret/name"));
            projected_token |= source.get("serviceAccountToken").is_some();
        }
    }
    for kind in ["containers", "initContainers", "ephemeralContainers"] {
        for container in list(spec, kind) {
            for env in list(&container, "env") {
                push(env.pointer("/valueFrom/secretKeyRef/name"));
            }
            for from in list(&container, "envFrom") {
                push(from.pointer("/secretRef/name"));
            }
        }
    }
    let pull_secrets = list(spec, "imagePullSecrets")
        .iter()
        .filter_map(|pull| pull.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    References { secrets: names, pull_secrets, projected_token }
}

/// The top-level maps of a Secret or ConfigMap whose keys are the user's data, not fields: a
/// lease's env var may well be named `type` or `affinity`, and its Secret's values are patched.
const DATA_MAPS: &[&str] = &["data", "stringData", "binaryData"];

/// A patch's refusal when it names a guarded field (see the module docs). The keys of a
/// top-level [`DATA_MAPS`] entry are data, not fields, and are not looked at.
pub(crate) fn check_patch(patch_type: PatchType, body: &Value) -> Result<(), Refusal> {
    let named = |key: &str| GUARDED_FIELDS.contains(&key) || key.starts_with(SERVICE_ACCOUNT_ANNOTATIONS);
    let refused = |key: &str| {
        format!(
            "a patch may not change {}: which credentials and objects a workload reaches is fixed when it is created",
            quoted(key)
        )
    };
    let mut stack: Vec<&Value> = Vec::new();
    match patch_type {
        PatchType::Json => {
            for op in body.as_array().into_iter().flatten() {
                for path in ["path", "from"].iter().filter_map(|k| op.get(*k).and_then(Value::as_str)) {
                    let mut segments = path.split('/').skip(1).peekable();
                    if segments.peek().is_some_and(|first| DATA_MAPS.contains(first)) {
                        continue;
                    }
                    for segment in segments {
                        let segment = segment.replace("~1", "/").replace("~0", "~");
                        if named(&segment) {
                            return Err(refused(&segment));
                        }
                    }
                }
                let into_data = op
                    .get("path")
                    .and_then(Value::as_str)
                    .is_some_and(|p| p.split('/').nth(1).is_some_and(|first| DATA_MAPS.contains(&first)));
                if !into_data {
                    stack.extend(op.get("value"));
                }
            }
        }
        PatchType::Merge | PatchType::Strategic => match body.as_object() {
            Some(map) => {
                if let Some(key) = map.keys().find(|k| named(k)) {
                    return Err(refused(key));
                }
                stack.extend(map.iter().filter(|(k, _)| !DATA_MAPS.contains(&k.as_str())).map(|(_, v)| v));
            }
            None => stack.push(body),
        },
    }
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if let Some(key) = map.keys().find(|k| named(k)) {
                    return Err(refused(key));
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    Ok(())
}

/// A claim's refusal when it names a pool or template the policy does not, or asks for volumes.
fn check_claim(policy: &Policy, body: &Value) -> Result<(), Refusal> {
    let spec = body.get("spec");
    let text = |key: &str| spec.and_then(|s| s.pointer(key)).and_then(Value::as_str);
    if spec.and_then(|s| s.get("volumeClaimTemplates")).is_some() {
        return Err("a SandboxClaim may not ask for volumeClaimTemplates".to_string());
    }
    let annotations = body.pointer("/metadata/annotations").and_then(Value::as_object);
    if annotations.is_some_and(|a| a.contains_key(agent_sandbox::ASSIGNED_SANDBOX_ANNOTATION)) {
        return Err(format!(
            "a SandboxClaim may not name the Sandbox to adopt ({}): its controller chooses",
            agent_sandbox::ASSIGNED_SANDBOX_ANNOTATION
        ));
    }
    let pools = [text("/warmPoolRef/name"), text("/warmpool").filter(|p| !names_no_pool(p))];
    claim_source_refusal(policy, pools.into_iter().flatten(), text("/sandboxTemplateRef/name")).map_or(Ok(()), Err)
}

/// Why the policy refuses a claim served from `pools` or made from `template`, if it does.
fn claim_source_refusal<'a>(
    policy: &Policy,
    pools: impl IntoIterator<Item = &'a str>,
    template: Option<&str>,
) -> Option<Refusal> {
    let refused_pool = pools.into_iter().find(|p| !policy.allows_warm_pool(p));
    if let Some(pool) = refused_pool {
        return Some(format!(
            "the policy does not name warm pool {} in `warm-pools` (a claim's pod is its pool's template, which the \
             operator vouches for by naming the pool)",
            quoted(pool)
        ));
    }
    template.filter(|t| !policy.allows_claim_template(t)).map(|template| {
        format!(
            "the policy does not name template {} in `claim-templates` (the operator vouches for the pod a claim gets)",
            quoted(template)
        )
    })
}

/// What `probe` adds for a claim config the operator's policy would refuse at acquire: the
/// provider's probe only reads, so without this a draft probe of a claim on a pool the
/// operator did not name says ready. The config's `claim.warmPool` is checked (unless it is
/// v1alpha1's `none` or `default`, which name no pool), and its `claim.template` when it names
/// no pool (a claim names the template only then, on v1alpha1; v1beta1 claims carry the pool).
pub(crate) fn claim_probe_finding(policy: &Policy, config: &str) -> Option<Diagnostic> {
    let config: Value = serde_json::from_str(config).ok()?;
    if config_fields::backend(&config) != Some(Backend::Claim) {
        return None;
    }
    let text = |key: &str| config.pointer(key).and_then(Value::as_str);
    let pool = text("/claim/warmPool").filter(|p| !names_no_pool(p));
    let template = text("/claim/template").filter(|_| pool.is_none());
    let why = claim_source_refusal(policy, pool, template)?;
    Some(Diagnostic {
        severity: Severity::Error,
        code: "claim-source-not-allowed".to_string(),
        message: format!(
            "acquire would be denied: {why}. Ask the operator to add it to the host's policy, or choose a pool the \
             policy names (`sandbox-host policy show` lists them)."
        ),
    })
}

impl KubeHost {
    /// Refuses a create body that would reach beyond what the installation owns (see the module
    /// docs); `Ok` means it may be sent as it is (with the owner label stamped).
    pub(crate) async fn check_create(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        body: &Value,
    ) -> Result<(), KubeError> {
        let refuse = |why: Refusal| KubeError::Denied(format!("host denies create of {}: {why}", rt.plural));
        if is_secret(rt) {
            check_secret(body).map_err(refuse)?;
        }
        if rt.group == "batch" && body.pointer("/spec/manualSelector") == Some(&Value::Bool(true)) {
            return Err(refuse("a Job may not choose its own selector (manualSelector), which adopts pods".into()));
        }
        for reference in body.pointer("/metadata/ownerReferences").and_then(Value::as_array).into_iter().flatten() {
            self.check_owner_reference(reference, namespace).await.map_err(|e| match e {
                Check::Refused(why) => refuse(why),
                Check::Failed(e) => e,
            })?;
        }
        if rt.group == agent_sandbox::EXTENSIONS_GROUP && rt.plural == agent_sandbox::CLAIMS {
            check_claim(&self.policy, body).map_err(refuse)?;
            if let Some(namespace) = namespace {
                self.check_claim_template(&rt.version, namespace, ClaimSource::of_claim(body))
                    .await
                    .map_err(|refused| self.claim_template_refusal(refused))?;
            }
        }
        for (metadata, spec) in pod_specs(body) {
            self.check_pod_spec(spec, namespace).await.map_err(|e| match e {
                Check::Refused(why) => refuse(why),
                Check::Failed(e) => e,
            })?;
            self.policy.pod_security.check(metadata, spec).map_err(refuse)?;
        }
        Ok(())
    }

    async fn check_pod_spec(&self, spec: &Value, namespace: Option<&str>) -> Result<(), Check> {
        let policy = &self.policy;
        let account = spec.get("serviceAccountName").or_else(|| spec.get("serviceAccount")).and_then(Value::as_str);
        if let Some(account) =
            account.filter(|a| *a != "default" && !policy.pod_service_accounts.iter().any(|p| p == a))
        {
            return Err(Check::Refused(format!(
                "a pod may run only as the default ServiceAccount or one the policy names in `pod-service-accounts`, \
                 not {}",
                quoted(account)
            )));
        }
        let References { secrets, pull_secrets, projected_token } = secret_references(spec);
        if !policy.allow_service_account_tokens {
            if spec.get("automountServiceAccountToken") != Some(&Value::Bool(false)) {
                return Err(Check::Refused(
                    "a pod must set automountServiceAccountToken: false (the policy does not let sandboxes hold a \
                     ServiceAccount token; `allow-service-account-tokens` would)"
                        .to_string(),
                ));
            }
            if projected_token {
                return Err(Check::Refused(
                    "a pod may not project a ServiceAccount token (the policy's `allow-service-account-tokens` is off)"
                        .to_string(),
                ));
            }
        }
        if let Some(name) = pull_secrets.iter().find(|name| !policy.pod_secrets.contains(name)) {
            return Err(Check::Refused(format!(
                "a pod may pull images only with Secrets the operator names in the policy's `pod-secrets`, not {} \
                 (a pull secret is a registry credential the kubelet uses for whoever names it)",
                quoted(name)
            )));
        }
        for name in secrets {
            if policy.pod_secrets.contains(&name) {
                continue;
            }
            self.check_referenced_secret(&name, namespace).await?;
        }
        Ok(())
    }

    /// A Secret a pod refers to must be the installation's, or not exist yet.
    async fn check_referenced_secret(&self, name: &str, namespace: Option<&str>) -> Result<(), Check> {
        let refused = || {
            Check::Refused(format!(
                "a pod may refer only to Secrets this installation created (or names in the policy's `pod-secrets`), \
                 not {}",
                quoted(name)
            ))
        };
        let rt = ResourceType { group: String::new(), version: "v1".to_string(), plural: "secrets".to_string() };
        // A name no URL can carry names no Secret of the installation's; any answer of the API
        // server, a 422 included, is a check that could not be made, and says so.
        if kube_url::segment("name", name).is_err() {
            return Err(refused());
        }
        let secret = match self.read_as_host(&rt, namespace, name).await {
            Ok(Some(secret)) => secret,
            Ok(None) => return Ok(()),
            Err(e) => return Err(Check::Failed(e)),
        };
        match self.ownership(&rt, &secret).await.map_err(Check::Failed)? {
            Owner::Owned | Owner::Dependent => Ok(()),
            Owner::Foreign(why) => {
                tracing::warn!(target: "provider_host::ownership", secret = %quoted(name), reason = %why,
                    "a pod template referred to a Secret that is not this installation's");
                Err(refused())
            }
        }
    }

    /// An `ownerReference` of a new object must name an object the installation owns.
    async fn check_owner_reference(&self, reference: &Value, namespace: Option<&str>) -> Result<(), Check> {
        let field = |k: &str| reference.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let reference = ControllerRef {
            api_version: field("apiVersion"),
            kind: field("kind"),
            name: field("name"),
            uid: field("uid"),
        };
        let shown = format!("{} {}", quoted(&reference.kind), quoted(&reference.name));
        if self.memory.owner(&reference.uid) == Some(true) {
            return Ok(());
        }
        match self.read_owner(&reference, namespace).await.map_err(Check::Failed)? {
            Link::Read(owner, rt) if self.owned(&rt, &owner).is_ok() => {
                self.memory.remember_owner(&reference.uid, true);
                Ok(())
            }
            _ => Err(Check::Refused(format!(
                "an ownerReference may name only an object this installation created, not {shown}"
            ))),
        }
    }
}

/// Why a check did not pass: a refusal, or a read that failed (could not tell).
pub(crate) enum Check {
    Refused(Refusal),
    Failed(KubeError),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_opaque_secrets_without_token_requests() {
        assert!(check_secret(&json!({"type": "Opaque"})).is_ok());
        assert!(check_secret(&json!({"metadata": {"annotations": {"a": "b"}}})).is_ok());
        assert!(check_secret(&json!({"type": "kubernetes.io/service-account-token"})).is_err());
        let asks = json!({"metadata": {"annotations": {"kubernetes.io/service-account.name": "admin"}}});
        assert!(check_secret(&asks).expect_err("refused").contains("ServiceAccount's token"));
        assert!(check_secret(&json!({"type": 7})).is_err());
    }

    #[test]
    fn every_secret_a_pod_spec_names_is_found() {
        let spec = json!({
            "containers": [{"name": "c", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "k"}}}],
                "envFrom": [{"secretRef": {"name": "s2"}}]}],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "s3"}}]}],
            "volumes": [{"name": "v", "secret": {"secretName": "s4"}},
                {"name": "p", "projected": {"sources": [{"secret": {"name": "s5"}}, {"serviceAccountToken": {"path": "t"}}]}}],
            "imagePullSecrets": [{"name": "s6"}]
        });
        let mut found = secret_references(&spec);
        found.secrets.sort();
        assert_eq!(found.secrets, ["s1", "s2", "s3", "s4", "s5"]);
        assert_eq!(found.pull_secrets, ["s6"]);
        assert!(found.projected_token);
        let nested = json!({"spec": {"template": {"spec": spec.clone()}}, "other": [{"podTemplate": {"spec": spec}}]});
        assert_eq!(pod_specs(&nested).len(), 2, "a Job's template and a Sandbox's podTemplate alike");
        let annotated =
            json!({"spec": {"template": {"metadata": {"annotations": {"a": "b"}}, "spec": {"containers": []}}}});
        assert_eq!(pod_specs(&annotated)[0].0, Some(&json!({"annotations": {"a": "b"}})), "the template's metadata");
    }

    #[test]
    fn probe_names_the_pool_or_template_acquire_would_be_denied() {
        let mut policy = Policy::kubernetes_default(["a"]);
        policy.warm_pools = vec!["python".into()];
        policy.claim_templates = vec!["py-tpl".into()];
        let finding = |config: serde_json::Value| claim_probe_finding(&policy, &config.to_string());
        let other = finding(json!({"backend": "claim", "claim": {"warmPool": "team-b"}})).expect("refused");
        assert_eq!((other.severity, other.code.as_str()), (Severity::Error, "claim-source-not-allowed"));
        assert!(other.message.contains("\"team-b\"") && other.message.contains("warm-pools"), "{other:?}");
        assert_eq!(finding(json!({"backend": "claim", "claim": {"warmPool": "python"}})), None);
        assert_eq!(finding(json!({"backend": "claim", "claim": {"warmPool": "python", "template": "x"}})), None);
        let template = finding(json!({"backend": "claim", "claim": {"template": "x"}})).expect("refused");
        assert!(template.message.contains("claim-templates"), "{template:?}");
        assert_eq!(finding(json!({"backend": "claim", "claim": {"warmPool": "default", "template": "py-tpl"}})), None);
        assert_eq!(finding(json!({"backend": "job", "claim": {"warmPool": "team-b"}})), None, "not a claim");
        assert_eq!(claim_probe_finding(&policy, "not json"), None, "the provider reports a bad config");
    }

    #[test]
    fn claims_name_only_the_pools_and_templates_the_policy_names() {
        let mut policy = Policy::kubernetes_default(["a"]);
        let beta = json!({"spec": {"warmPoolRef": {"name": "python"}}});
        let alpha = json!({"spec": {"sandboxTemplateRef": {"name": "py-tpl"}, "warmpool": "default"}});
        assert!(check_claim(&policy, &beta).is_err_and(|e| e.contains("warm-pools")), "none by default");
        assert!(check_claim(&policy, &alpha).is_err_and(|e| e.contains("claim-templates")));
        policy.warm_pools = vec!["python".into()];
        policy.claim_templates = vec!["py-tpl".into()];
        assert_eq!(check_claim(&policy, &beta), Ok(()));
        assert_eq!(check_claim(&policy, &alpha), Ok(()));
        let other = json!({"spec": {"warmPoolRef": {"name": "team-b"}}});
        assert!(check_claim(&policy, &other).is_err());
        let named = json!({"spec": {"sandboxTemplateRef": {"name": "py-tpl"}, "warmpool": "team-b"}});
        assert!(check_claim(&policy, &named).is_err(), "a v1alpha1 claim's named pool is checked too");
        let volumes = json!({"spec": {"warmPoolRef": {"name": "python"}, "volumeClaimTemplates": []}});
        assert!(check_claim(&policy, &volumes).is_err());
        let chosen = json!({"metadata": {"annotations": {"agents.x-k8s.io/sandbox-name": "python-x"}},
                            "spec": {"warmPoolRef": {"name": "python"}}});
        assert!(check_claim(&policy, &chosen).is_err(), "the controller chooses the Sandbox");
        policy.warm_pools = vec!["*".into()];
        assert_eq!(check_claim(&policy, &other), Ok(()));
        for patch in [
            json!({"spec": {"warmPoolRef": {"name": "x"}}}),
            json!({"spec": {"warmpool": "x"}}),
            json!({"metadata": {"annotations": {"agents.x-k8s.io/sandbox-name": "x"}}}),
        ] {
            assert!(check_patch(PatchType::Merge, &patch).is_err(), "{patch}");
        }
        assert_eq!(check_patch(PatchType::Merge, &json!({"spec": {"lifecycle": {"shutdownTime": "t"}}})), Ok(()));
    }

    #[test]
    fn patches_may_not_name_what_a_workload_reaches() {
        let fine = [
            (PatchType::Merge, json!({"spec": {"shutdownTime": "2030-01-01T00:00:00Z"}})),
            (PatchType::Merge, json!({"spec": {"operatingMode": "Suspended"}})),
            (PatchType::Merge, json!({"stringData": {"TOKEN": "x"}})),
            // A Secret's keys are the lease's env var names, which may be anything a shell takes.
            (PatchType::Merge, json!({"stringData": {"type": "x", "affinity": "y", "env": "z"}})),
            (PatchType::Json, json!([{"op": "add", "path": "/data/nodeName", "value": "eA=="}])),
            (PatchType::Json, json!([{"op": "replace", "path": "/stringData", "value": {"volumes": "v"}}])),
            (PatchType::Json, json!([{"op": "replace", "path": "/spec/activeDeadlineSeconds", "value": 60}])),
        ];
        for (t, body) in fine {
            assert_eq!(check_patch(t, &body), Ok(()), "{body}");
        }
        let refused = [
            (PatchType::Merge, json!({"spec": {"podTemplate": {"spec": {"serviceAccountName": "admin"}}}})),
            (PatchType::Strategic, json!({"spec": {"template": {"spec": {"volumes": [{"name": "x"}]}}}})),
            (PatchType::Merge, json!({"metadata": {"ownerReferences": []}})),
            (PatchType::Merge, json!({"metadata": {"annotations": {"kubernetes.io/service-account.name": "a"}}})),
            (PatchType::Merge, json!({"type": "kubernetes.io/service-account-token"})),
            // What the pod-security ceiling checks on create is fixed as well.
            (PatchType::Merge, json!({"spec": {"podTemplate": {"spec": {"securityContext": {"runAsUser": 0}}}}})),
            (PatchType::Merge, json!({"spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}}})),
            (PatchType::Json, json!([{"op": "add", "path": "/spec/podTemplate/spec/hostPID", "value": true}])),
            (PatchType::Json, json!([{"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {}}])),
            (PatchType::Json, json!([{"op": "add", "path": "/spec", "value": {"manualSelector": true}}])),
        ];
        for (t, body) in refused {
            assert!(check_patch(t, &body).is_err(), "{body} must be refused");
        }
    }
}
