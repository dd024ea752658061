//! The operator's policy on the command line, and the commands that show what it grants:
//! `policy show` (the two-sided grant for a component), `rbac` (the least-privilege Role) and
//! `network-policy` (the sandboxes' isolation).
//!
//! Where the policy comes from: `--policy FILE` (JSON, see `provider_host::policy::Policy`),
//! with `--allow-namespace`, `--owner-id` and `--ownership-key-file` overriding its fields.
//! Without a file the default rules apply, in the namespaces `--allow-namespace` names, or in
//! the target namespace alone when none is named ([`crate::namespace_args`]). A provider config
//! never widens it.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use provider_host::policy::Policy;
use provider_host::runner::{HostOptions, ProviderHost};
use provider_host::{network_policy, owner_signature, rbac};

use crate::component_args::ComponentArgs;
use crate::documents::read_document;
use crate::namespace_args::{self, NamespaceArg, TargetNamespace};

/// The namespace a policy allows when the operator names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Where the operator's policy comes from.
#[derive(Args, Clone, Default)]
pub struct PolicyArgs {
    /// Host policy file (JSON): namespaces, resource rules, owner id, sandbox egress.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// A namespace the provider may use (repeatable, or comma-separated; `*`: any but the
    /// system namespaces); replaces the policy file's list. Default: the policy file's, else
    /// the target namespace (-n, else the kubeconfig context's) alone.
    #[arg(long = "allow-namespace", value_name = "NS", env = "SANDBOX_HOST_NAMESPACES", value_delimiter = ',')]
    pub allowed_namespaces: Vec<String>,
    /// The installation's owner id, stamped on everything the provider creates; every replica
    /// of one deployment must share it, and no other installation on the cluster may use it.
    #[arg(long, env = "SANDBOX_HOST_OWNER_ID")]
    pub owner_id: Option<String>,
    /// A warm pool a SandboxClaim may name (repeatable, `*` for any); adds to the policy file's.
    #[arg(long = "warm-pool", value_name = "POOL", env = "SANDBOX_HOST_WARM_POOLS", value_delimiter = ',')]
    pub warm_pools: Vec<String>,
    /// A template a v1alpha1 SandboxClaim may name (repeatable, `*` for any); adds to the policy
    /// file's.
    #[arg(
        long = "claim-template",
        value_name = "TEMPLATE",
        env = "SANDBOX_HOST_CLAIM_TEMPLATES",
        value_delimiter = ','
    )]
    pub claim_templates: Vec<String>,
    /// The operator's ownership key file: one key per line (at least 32 bytes, `openssl rand
    /// -base64 48`), the first signs what the host creates, all verify; mode 600. Replaces the
    /// policy file's `ownership-key-file`. Without one the managed-by label alone is ownership.
    #[arg(long, value_name = "PATH", env = "SANDBOX_HOST_OWNERSHIP_KEY_FILE")]
    pub ownership_key_file: Option<PathBuf>,
}

impl PolicyArgs {
    /// The operator's policy these options describe, for a command working in `target`
    /// (which is the allow-list when neither `--allow-namespace` nor a policy file gives one).
    pub fn policy(&self, target: Option<&TargetNamespace>) -> anyhow::Result<Policy> {
        let mut policy = match &self.policy {
            Some(path) => {
                let mut policy = serde_json::from_str::<Policy>(&read_document(path, "policy")?)
                    .context("the policy file does not match the policy schema")?;
                policy.namespaces_from = Some(format!("`namespaces` in the policy file {}", path.display()));
                policy
            }
            None => {
                let (namespace, widened_by) = namespace_args::default_allowed(target);
                Policy { namespaces_from: Some(widened_by), ..Policy::kubernetes_default([namespace]) }
            }
        };
        if !self.allowed_namespaces.is_empty() {
            policy.namespaces = self.allowed_namespaces.clone();
            policy.namespaces_from = Some("--allow-namespace (or SANDBOX_HOST_NAMESPACES)".to_string());
        }
        if let Some(owner) = &self.owner_id {
            policy.owner_id = owner.clone();
        }
        policy.warm_pools.extend(self.warm_pools.iter().cloned());
        policy.claim_templates.extend(self.claim_templates.iter().cloned());
        if let Some(path) = &self.ownership_key_file {
            policy.ownership_key_file = Some(path.clone());
        }
        policy.load_ownership_keys()?;
        Ok(policy)
    }
}

/// What `policy show` and `rbac` inspect: a component and the operator's policy.
#[derive(Args, Clone)]
pub struct InspectArgs {
    #[command(flatten)]
    pub component: ComponentArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub namespace: NamespaceArg,
}

/// The namespace `-n` names, as these commands' target: they reach no cluster, so no
/// kubeconfig's context is read.
fn flag_target(namespace: &NamespaceArg) -> anyhow::Result<Option<TargetNamespace>> {
    Ok(TargetNamespace::resolve(namespace.given()?, None))
}

async fn load(args: &InspectArgs) -> anyhow::Result<ProviderHost> {
    let source = args.component.source()?;
    let policy = args.policy.policy(flag_target(&args.namespace)?.as_ref())?;
    let options = HostOptions { policy, cache_dir: args.component.cache_dir(), ..Default::default() };
    Ok(ProviderHost::load_without_cluster(source, options).await?)
}

/// `policy show`: what the component declares, what the policy grants, what the host enforces.
pub async fn show(args: InspectArgs, json: bool) -> anyhow::Result<()> {
    let host = load(&args).await?;
    let grants = host.grants();
    if json {
        let value = serde_json::json!({
            "contract-version": host.contract_version(),
            "declared": grants.declared,
            "operator": grants.operator,
            "effective": grants.effective,
            "refused": grants.refused,
            "ownership": match &grants.effective.ownership_keys {
                Some(keys) => serde_json::json!({"signed": true, "signing-key": keys.fingerprint(), "keys": keys.len()}),
                None => serde_json::json!({"signed": false, "warning": owner_signature::UNSIGNED_MEANS}),
            },
        });
        crate::outln!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        crate::outln!("component {} (contract {})", args.component.shown(), host.contract_version());
        crate::out!("{grants}");
    }
    Ok(())
}

/// `rbac`: the ServiceAccount, Roles and RoleBindings for exactly the effective policy, as
/// YAML documents for `kubectl apply -f -`; the ServiceAccount lives in `-n`'s namespace, else
/// in the first allowed one.
pub async fn rbac(args: InspectArgs, service_account: &str) -> anyhow::Result<()> {
    let host = load(&args).await?;
    let effective = &host.grants().effective;
    let home = match args.namespace.given()? {
        Some(namespace) => namespace,
        None => effective.namespaces.first().context("the policy allows no namespace")?,
    };
    for object in rbac::manifests(effective, home, service_account)? {
        crate::out!("---\n{}", serde_yaml_ng::to_string(&object)?);
    }
    Ok(())
}

/// `network-policy`: the NetworkPolicy of the sandboxes in `-n`'s namespace, else in each
/// namespace the policy names, as YAML for `kubectl apply -f -`, after comments on what it
/// cannot cover.
pub fn network_policy(args: &PolicyArgs, namespace: &NamespaceArg, name: &str) -> anyhow::Result<()> {
    let policy = args.policy(flag_target(namespace)?.as_ref())?;
    policy.validate()?;
    let namespaces = match namespace.given()? {
        Some(namespace) => vec![namespace.to_string()],
        None => policy.namespaces.clone(),
    };
    if namespaces.is_empty() || namespaces.iter().any(|n| n == provider_host::policy::ANY_NAMESPACE) {
        anyhow::bail!(
            "a NetworkPolicy lives in one namespace and the policy names none (or \"*\"); name one with -n, or each \
             with --allow-namespace"
        );
    }
    crate::out!(
        "# Isolates the sandboxes' pods (label {label}): no ingress;\n\
         # egress to the cluster DNS and the policy's `egress` only. Enforced only by a network plugin\n\
         # that implements NetworkPolicy. The owner id is not on pods: this covers the sandboxes of\n\
         # every installation in the namespace.\n\
         # Pods of the claim backend come from the warm pool's SandboxTemplate and carry none of the\n\
         # provider's labels: this policy does not select them; keep the template's own NetworkPolicy\n\
         # (agent-sandbox's spec.networkPolicy) or write one that selects the template's pod labels.\n",
        label = network_policy::SANDBOX_POD_LABEL
    );
    for namespace in &namespaces {
        crate::out!("---\n{}", serde_yaml_ng::to_string(&network_policy::manifest(&policy, namespace, name))?);
    }
    Ok(())
}
