//! Probe of a claim config: the SandboxClaim version acquire would use, whether the config names
//! what that version needs (a warm pool for v1beta1, a template for v1alpha1), and a Sandbox
//! version to read the claimed Sandbox in. The claim is read, watched and written; the Sandbox
//! only read.

use crate::api_versions::{self, ClaimVersion, SandboxVersion};
use crate::backend::Needs;
use crate::backend::claim::manifest;
use crate::config::Config;
use crate::errors::ProviderError;
use crate::kube_api::Kube;
use crate::probe::{Findings, Severity};

/// Probes a claim config (see the module docs).
pub(crate) fn probe<K: Kube>(kube: &K, config: &Config, sandboxes: &[SandboxVersion], found: &mut Findings) -> Needs {
    let claims = claim_version(kube, config, sandboxes, found);
    let mut needs = Needs { resources: Vec::new(), watched: Vec::new(), deleted: Vec::new(), uses: String::new() };
    if let Some(read) = sandboxes.first() {
        needs.resources.push((read.resource(), "get, list, watch"));
    }
    if let Some(version) = claims {
        needs.resources.push((version.resource(), "get, list, watch, create, patch, delete"));
        needs.watched.push(version.resource());
        needs.uses = format!(", SandboxClaim {}", version.as_str());
    }
    needs
}

/// The SandboxClaim version acquire would use (none when the claim cannot work), with what it
/// found in `found`.
fn claim_version<K: Kube>(
    kube: &K,
    config: &Config,
    sandboxes: &[SandboxVersion],
    found: &mut Findings,
) -> Option<ClaimVersion> {
    match sandboxes.first() {
        None => found.add(
            Severity::Error,
            "sandbox-crd-absent",
            "the cluster serves no agents.x-k8s.io Sandbox version, so a claim's Sandbox cannot be read: install \
             agent-sandbox (v0.5 or later)",
        ),
        Some(read) => {
            let names = sandboxes.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ");
            found.add(
                Severity::Info,
                "sandbox-versions",
                format!("Sandbox versions served: {names}; a claim's Sandbox is read in {}", read.as_str()),
            );
        }
    }
    let served = match api_versions::served_claim_versions(kube) {
        Ok(served) => served,
        Err(e) => {
            found.add(
                Severity::Error,
                "claim-discovery-failed",
                format!("could not discover SandboxClaim versions: {}", e.message()),
            );
            return None;
        }
    };
    let Some(version) = served.first().copied() else {
        found.add(
            Severity::Error,
            "claim-crd-absent",
            "the cluster serves no SandboxClaim version (extensions.agents.x-k8s.io): install agent-sandbox's \
             extensions (claims, templates, warm pools), or set backend to \"sandbox\" or \"job\"",
        );
        return None;
    };
    let names = served.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ");
    found.add(
        Severity::Info,
        "claim-versions",
        format!("SandboxClaim versions served: {names}; acquire uses {}", version.as_str()),
    );
    if version == ClaimVersion::V1alpha1 {
        found.add(
            Severity::Warning,
            "claim-v1alpha1-only",
            "SandboxClaim v1alpha1 (agent-sandbox v0.4) is superseded by v1beta1; upgrade agent-sandbox",
        );
    }
    match manifest::source(version, &config.claim) {
        Ok(_) => Some(version),
        Err(ProviderError::InvalidConfig(d)) => {
            found.add(Severity::Error, "claim-config-version", format!("{}: {}", d.path, d.message));
            None
        }
        Err(e) => {
            found.add(Severity::Error, "claim-config-version", e.message().to_string());
            None
        }
    }
}
