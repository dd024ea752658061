//! Probe's write check: which writes the host's credentials may make in the config's namespace,
//! asked of the cluster with a `SelfSubjectAccessReview` per write
//! (<https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access>),
//! as `kubectl auth can-i` asks, so a missing RoleBinding shows at `probe` instead of as a 403
//! in the middle of an acquire.
//!
//! The writes checked are those the effective policy grants on the config backend's workload
//! type and on the types every backend shares (the per-lease Secret, the workspace claim): the
//! create, patch and delete the provider may send. A provider cannot check them without
//! writing, and says so ([`contract::PROBE_WRITES_UNCHECKED`]); the host checks them only then,
//! after the provider's probe, and its finding replaces that one. Reviews the cluster does not answer (an API server without the authorization
//! API, credentials without `system:basic-user`) leave the writes unchecked, and the finding
//! says why.

use std::time::Duration;

use contract::Backend;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use serde_json::Value;

use crate::config_fields;
use crate::policy::{AccessVerb, Policy};
use crate::records::{Diagnostic, Severity};

/// The code of each finding.
pub const WRITES_ALLOWED: &str = "writes-allowed";
/// The cluster refuses a write the provider may need.
pub const WRITES_FORBIDDEN: &str = "writes-forbidden";

/// One write to check.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Write {
    verb: &'static str,
    group: String,
    plural: String,
}

impl Write {
    fn shown(&self) -> String {
        if self.group.is_empty() {
            format!("{} {}", self.verb, self.plural)
        } else {
            format!("{} {}.{}", self.verb, self.plural, self.group)
        }
    }
}

/// The writes the policy grants that a config of `backend` may send.
fn writes(policy: &Policy, backend: Backend) -> Vec<Write> {
    let mut out = Vec::new();
    for rule in policy.resources.iter().filter(|r| r.namespaced) {
        let relevant = match Backend::of_workload(&rule.group, &rule.plural) {
            Some(of) => of == backend,
            None => rule.group.is_empty(),
        };
        if !relevant {
            continue;
        }
        for (verb, name) in
            [(AccessVerb::Create, "create"), (AccessVerb::Patch, "patch"), (AccessVerb::Delete, "delete")]
        {
            if rule.allows(verb) {
                out.push(Write { verb: name, group: rule.group.clone(), plural: rule.plural.clone() });
            }
        }
    }
    out
}

/// Asks whether the credentials may make `write` in `namespace`.
async fn allowed(client: &kube::Client, namespace: &str, write: &Write) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_string()),
                verb: Some(write.verb.to_string()),
                group: Some(write.group.clone()),
                resource: Some(write.plural.clone()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The finding for `config`, or `None` without a cluster or a config naming its namespace.
pub(crate) async fn probe_finding(
    client: Option<kube::Client>,
    policy: &Policy,
    config: &str,
    within: Duration,
) -> Option<Diagnostic> {
    let client = client?;
    let config: Value = serde_json::from_str(config).ok()?;
    let (namespace, backend) = (config_fields::namespace(&config)?, config_fields::backend(&config)?);
    if !policy.allows_namespace(namespace) {
        return None;
    }
    let writes = writes(policy, backend);
    let checks = futures::future::join_all(writes.iter().map(|w| allowed(&client, namespace, w)));
    let answers = match tokio::time::timeout(within, checks).await {
        Ok(answers) => answers,
        Err(_) => return Some(unchecked(format!("no answer within {} ms", within.as_millis()))),
    };
    let mut forbidden = Vec::new();
    for (write, answer) in writes.iter().zip(answers) {
        match answer {
            Ok(true) => {}
            Ok(false) => forbidden.push(write.shown()),
            Err(e) => return Some(unchecked(format!("{e}"))),
        }
    }
    let all: Vec<String> = writes.iter().map(Write::shown).collect();
    Some(if forbidden.is_empty() {
        Diagnostic {
            severity: Severity::Info,
            code: WRITES_ALLOWED.into(),
            message: format!(
                "the cluster allows these credentials every write the provider may make in {namespace}: {}",
                all.join(", ")
            ),
        }
    } else {
        Diagnostic {
            severity: Severity::Error,
            code: WRITES_FORBIDDEN.into(),
            message: format!(
                "the cluster's RBAC forbids these credentials {} in {namespace}: acquire would fail there. Grant them \
                 (`sandbox-host rbac -n {namespace}` prints the Role the host needs)",
                forbidden.join(", ")
            ),
        }
    })
}

/// The finding when the cluster did not answer the reviews.
fn unchecked(why: String) -> Diagnostic {
    Diagnostic {
        severity: Severity::Info,
        code: contract::PROBE_WRITES_UNCHECKED.into(),
        message: format!(
            "the host could not ask the cluster which writes these credentials may make (SelfSubjectAccessReview: \
             {why}); acquire reports a refusal as a forbidden error"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_checks_its_workload_and_the_shared_types() {
        let policy = Policy::kubernetes_default(["agents"]);
        let job: Vec<String> = writes(&policy, Backend::Job).iter().map(Write::shown).collect();
        assert!(
            job.contains(&"create jobs.batch".to_string()) && job.contains(&"create secrets".to_string()),
            "{job:?}"
        );
        assert!(!job.iter().any(|w| w.contains("sandboxes")), "another backend's workload is not checked: {job:?}");
        assert!(!job.iter().any(|w| w.contains("pods")), "pods are read-only: {job:?}");
        let sandbox: Vec<String> = writes(&policy, Backend::Sandbox).iter().map(Write::shown).collect();
        assert!(sandbox.contains(&"delete persistentvolumeclaims".to_string()), "{sandbox:?}");
    }
}
