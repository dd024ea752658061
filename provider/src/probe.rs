//! Probe: can this config work against this cluster? API reachable, namespace present, which
//! Sandbox versions are served (and, for backend claim, which SandboxClaim versions, and
//! whether the config names what that version needs), and what the host's policy lets the
//! provider read and watch. Every problem is a diagnostic; probe itself never fails.

pub use contract::{Diagnostic, ProbeResult, Severity};

use crate::api_versions::{self, ClaimVersion, SANDBOX_GROUP, SandboxVersion};
use crate::backend::claim;
use crate::clock::Clock;
use crate::config::{self, Backend, Config, SandboxApiVersion};
use crate::errors::ProviderError;
use crate::host_fit;
use crate::kube_api::{Kube, KubeError, ResourceType, WatchOptions};
use crate::log::Log;

struct Findings(Vec<Diagnostic>);

impl Findings {
    fn add(&mut self, severity: Severity, code: &str, message: impl Into<String>) {
        self.0.push(Diagnostic { severity, code: code.to_string(), message: message.into() });
    }

    fn finish(self, ready: String) -> ProbeResult {
        let errors: Vec<&Diagnostic> = self.0.iter().filter(|d| d.severity == Severity::Error).collect();
        let summary = match errors.first() {
            None => ready,
            Some(first) => format!("{} problem(s); first: {}", errors.len(), first.message),
        };
        ProbeResult { ok: errors.is_empty(), summary, diagnostics: self.0 }
    }
}

/// Backend claim: the SandboxClaim version acquire would use, whether the config names what it
/// needs, and a Sandbox version to read the claimed Sandbox in.
fn probe_claim<K: Kube>(
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
    match claim::manifest::source(version, &config.claim) {
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

fn unreachable_code(error: &KubeError) -> &'static str {
    match error {
        KubeError::Forbidden(_) => "discovery-forbidden",
        KubeError::Denied(_) => "discovery-denied",
        KubeError::Unauthorized(_) => "credentials-rejected",
        _ => "api-unreachable",
    }
}

/// Probes a config (see the module docs).
pub fn probe<K: Kube>(kube: &K, clock: &dyn Clock, log: &dyn Log, config_text: &str) -> ProbeResult {
    let mut found = Findings(Vec::new());
    let validation = config::validate(config_text);
    for problem in &validation.errors {
        found.add(Severity::Error, "config-invalid", format!("{}: {}", problem.path, problem.message));
    }
    for problem in &validation.warnings {
        found.add(Severity::Warning, "config-warning", format!("{}: {}", problem.path, problem.message));
    }
    let Ok(config) = config::parse(config_text) else {
        return found.finish(String::new());
    };
    let ns = config.namespace.as_str();
    let unfit = host_fit::problems(ns, config.readiness_timeout_seconds, kube, clock);
    for problem in &unfit {
        let code = if problem.path == "/namespace" { "namespace-not-allowed" } else { "readiness-exceeds-deadline" };
        found.add(Severity::Error, code, format!("{}: {}", problem.path, problem.message));
    }
    if unfit.iter().any(|p| p.path == "/namespace") {
        // The host would deny every call in that namespace: probing it would only say so again.
        return found.finish(String::new());
    }

    let served = match api_versions::served_sandbox_versions(kube) {
        Ok(served) => served,
        Err(e) => {
            let raw = kube.served_versions(SANDBOX_GROUP).err();
            let code = raw.as_ref().map_or("api-unreachable", unreachable_code);
            found.add(Severity::Error, code, format!("the API server did not answer discovery: {}", e.message()));
            log.warn("probe: API unreachable", &[("error", e.message())]);
            return found.finish(String::new());
        }
    };
    found.add(Severity::Info, "api-reachable", "the API server answered discovery");
    let names = served.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ");
    let mut chosen: Option<SandboxVersion> = None;
    let mut claims: Option<ClaimVersion> = None;
    match config.backend {
        Backend::Claim => {
            claims = probe_claim(kube, &config, &served, &mut found);
            chosen = served.first().copied();
        }
        Backend::Sandbox => {
            let pinned = match config.sandbox_api_version {
                SandboxApiVersion::Auto => None,
                SandboxApiVersion::V1beta1 => Some(SandboxVersion::V1beta1),
                SandboxApiVersion::V1alpha1 => Some(SandboxVersion::V1alpha1),
            };
            if served.is_empty() {
                found.add(
                    Severity::Error,
                    "sandbox-crd-absent",
                    "the cluster serves no agents.x-k8s.io Sandbox version: install agent-sandbox (v0.5 or later), \
                     or set backend to \"job\"",
                );
            } else if let Some(p) = pinned.filter(|p| !served.contains(p)) {
                found.add(
                    Severity::Error,
                    "sandbox-version-not-served",
                    format!("sandboxApiVersion is pinned to {} but the cluster serves {names}", p.as_str()),
                );
            } else {
                let version = pinned.or_else(|| served.first().copied());
                chosen = version;
                let used = version.map_or("", SandboxVersion::as_str);
                found.add(
                    Severity::Info,
                    "sandbox-versions",
                    format!("Sandbox versions served: {names}; acquire uses {used}"),
                );
                if version == Some(SandboxVersion::V1alpha1) {
                    found.add(
                        Severity::Warning,
                        "sandbox-v1alpha1-only",
                        "Sandbox v1alpha1 is deprecated and removed in agent-sandbox v1.0; upgrade agent-sandbox",
                    );
                }
            }
        }
        Backend::Job => {
            let shown = if names.is_empty() { "none".to_string() } else { names.clone() };
            found.add(
                Severity::Info,
                "sandbox-versions",
                format!("Sandbox versions served: {shown} (backend job does not need them)"),
            );
        }
    }

    match kube.get(&api_versions::namespaces(), None, ns) {
        Ok(_) => found.add(Severity::Info, "namespace-exists", format!("namespace {ns} exists")),
        Err(KubeError::NotFound(_)) => found.add(
            Severity::Error,
            "namespace-missing",
            format!("namespace {ns} does not exist; create it (kubectl create namespace {ns}) or fix /namespace"),
        ),
        Err(KubeError::Forbidden(m) | KubeError::Denied(m)) => found.add(
            Severity::Warning,
            "namespace-check-forbidden",
            format!(
                "the host's policy does not let the provider read namespace {ns} ({m}); acquire fails if it is missing"
            ),
        ),
        Err(e) => found.add(Severity::Error, "namespace-check-failed", format!("could not read namespace {ns}: {e}")),
    }

    let mut needed: Vec<(ResourceType, &str)> = vec![(api_versions::pods(), "get, list, watch")];
    let mut watched = vec![api_versions::pods()];
    match (config.backend, chosen) {
        (Backend::Sandbox, Some(v)) => needed.push((v.resource(), "get, list, watch, create, patch, delete")),
        (Backend::Sandbox | Backend::Claim, None) => {}
        (Backend::Job, _) => needed.push((api_versions::jobs(), "get, list, watch, create, patch, delete")),
        (Backend::Claim, Some(v)) => needed.push((v.resource(), "get, list, watch")),
    }
    if let Some(v) = claims {
        needed.push((v.resource(), "get, list, watch, create, patch, delete"));
        watched.push(v.resource());
    }
    needed.push((api_versions::secrets(), "get, create, patch, delete"));
    if config.backend == Backend::Sandbox && config.sandbox.workspace_volume.is_some() {
        needed.push((api_versions::pvcs(), "delete"));
    }
    let mut readable = Vec::new();
    for (resource, verbs) in &needed {
        // A GET of a name no object has: 404 proves the provider may read the type, without
        // needing a verb (like list on secrets) the provider never uses.
        match kube.get(resource, Some(ns), ACCESS_CHECK_NAME) {
            Ok(_) | Err(KubeError::NotFound(_)) => readable.push(resource.plural.clone()),
            Err(KubeError::Forbidden(m) | KubeError::Denied(m)) => found.add(
                Severity::Error,
                &format!("forbidden-{}", resource.plural),
                format!(
                    "the host's policy or RBAC forbids reading {} in {ns} ({m}); the provider needs {verbs} on it",
                    resource.plural
                ),
            ),
            Err(e) => found.add(
                Severity::Warning,
                &format!("read-failed-{}", resource.plural),
                format!("could not read {} in {ns}: {e}", resource.plural),
            ),
        }
    }
    let watch = WatchOptions { timeout_seconds: Some(1), ..Default::default() };
    for resource in &watched {
        let plural = &resource.plural;
        match kube.watch(resource, Some(ns), &watch) {
            Ok(_) => readable.push(format!("{plural} (watch)")),
            Err(KubeError::Forbidden(m) | KubeError::Denied(m)) => found.add(
                Severity::Error,
                &format!("forbidden-watch-{plural}"),
                format!(
                    "the host's policy or RBAC forbids watching {plural} in {ns} ({m}); readiness is detected by \
                     watching"
                ),
            ),
            Err(e) => found.add(
                Severity::Warning,
                &format!("watch-failed-{plural}"),
                format!("could not watch {plural} in {ns}: {e}"),
            ),
        }
    }
    if !readable.is_empty() {
        found.add(Severity::Info, "reads-allowed", format!("allowed to read in {ns}: {}", readable.join(", ")));
    }
    found.add(
        Severity::Info,
        "writes-unchecked",
        "create, patch and delete cannot be checked without writing; acquire reports a refusal as a forbidden (cluster) or denied (host) error",
    );
    let version = match (config.backend, claims) {
        (Backend::Claim, Some(v)) => format!(", SandboxClaim {}", v.as_str()),
        (Backend::Claim, None) => String::new(),
        _ => chosen.map(|v| format!(", Sandbox {}", v.as_str())).unwrap_or_default(),
    };
    found.finish(format!("ready: namespace {ns}, backend {}{version}", config.backend.as_str()))
}

/// The name probe reads to check access; no provider object is ever named like this.
const ACCESS_CHECK_NAME: &str = "paperclip-probe-access-check";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kube::Verb;
    use crate::testkit::{Env, claim_config, config, config_with};

    fn codes(result: &ProbeResult, severity: Severity) -> Vec<&str> {
        result.diagnostics.iter().filter(|d| d.severity == severity).map(|d| d.code.as_str()).collect()
    }

    #[test]
    fn a_healthy_cluster_probes_ok() {
        let env = Env::new();
        let result = env.provider().probe(&config("sandbox"));
        assert!(result.ok, "{result:?}");
        assert_eq!(result.summary, "ready: namespace sandboxes, backend sandbox, Sandbox v1beta1");
        let info = codes(&result, Severity::Info);
        for code in ["api-reachable", "sandbox-versions", "namespace-exists", "reads-allowed", "writes-unchecked"] {
            assert!(info.contains(&code), "{code} missing from {info:?}");
        }
    }

    #[test]
    fn problems_are_diagnostics_never_errors() {
        let env = Env::new();
        let missing_ns = config_with("sandbox", serde_json::json!({"namespace": "nope"}));
        let result = env.provider().probe(&missing_ns);
        assert!(!result.ok);
        assert!(codes(&result, Severity::Error).contains(&"namespace-missing"));
        assert!(result.summary.contains("namespace nope does not exist"), "{}", result.summary);

        env.kube.serve_sandbox_versions(&[]);
        let result = env.provider().probe(&config("sandbox"));
        assert!(codes(&result, Severity::Error).contains(&"sandbox-crd-absent"));
        assert!(env.provider().probe(&config("job")).ok, "jobs do not need agent-sandbox");

        env.kube.serve_sandbox_versions(&["v1alpha1"]);
        let result = env.provider().probe(&config("sandbox"));
        assert!(result.ok);
        assert!(codes(&result, Severity::Warning).contains(&"sandbox-v1alpha1-only"));
        let pinned = config_with("sandbox", serde_json::json!({"sandboxApiVersion": "v1beta1"}));
        assert!(codes(&env.provider().probe(&pinned), Severity::Error).contains(&"sandbox-version-not-served"));
    }

    #[test]
    fn a_claim_config_is_probed_against_the_served_claim_version() {
        let env = Env::new();
        let result = env.provider().probe(&claim_config(serde_json::json!({})));
        assert!(result.ok, "{result:?}");
        assert_eq!(result.summary, "ready: namespace sandboxes, backend claim, SandboxClaim v1beta1");
        let info = codes(&result, Severity::Info);
        assert!(info.contains(&"claim-versions") && info.contains(&"sandbox-versions"), "{info:?}");
        let reads = result.diagnostics.iter().find(|d| d.code == "reads-allowed").unwrap();
        assert!(
            reads.message.contains("sandboxclaims (watch)") && reads.message.contains("sandboxes"),
            "{}",
            reads.message
        );

        let pool_only = claim_config(serde_json::json!({"claim": {"warmPool": "python"}}));
        env.kube.serve_claim_versions(&["v1alpha1"]);
        let result = env.provider().probe(&pool_only);
        assert!(!result.ok);
        assert!(codes(&result, Severity::Error).contains(&"claim-config-version"), "{result:?}");
        assert!(result.summary.contains("/claim/template"), "{}", result.summary);
        assert!(codes(&result, Severity::Warning).contains(&"claim-v1alpha1-only"));

        env.kube.serve_claim_versions(&[]);
        let result = env.provider().probe(&pool_only);
        assert!(codes(&result, Severity::Error).contains(&"claim-crd-absent"), "{result:?}");
        env.kube.serve_sandbox_versions(&[]);
        assert!(codes(&env.provider().probe(&pool_only), Severity::Error).contains(&"sandbox-crd-absent"));
    }

    #[test]
    fn a_claim_config_needs_to_watch_claims() {
        let env = Env::new();
        env.kube.fail_always(Verb::Watch, "sandboxclaims", KubeError::Forbidden("denied by host policy".into()));
        let result = env.provider().probe(&claim_config(serde_json::json!({})));
        assert!(codes(&result, Severity::Error).contains(&"forbidden-watch-sandboxclaims"), "{result:?}");
    }

    #[test]
    fn what_the_policy_forbids_shows_up() {
        let env = Env::new();
        env.kube.fail_always(Verb::Get, "secrets", KubeError::Forbidden("denied by host policy".into()));
        env.kube.fail_always(Verb::Watch, "pods", KubeError::Forbidden("denied by host policy".into()));
        let result = env.provider().probe(&config("job"));
        assert!(!result.ok);
        let errors = codes(&result, Severity::Error);
        assert!(errors.contains(&"forbidden-secrets") && errors.contains(&"forbidden-watch-pods"), "{errors:?}");
    }

    #[test]
    fn a_namespace_the_host_does_not_allow_is_reported_before_any_call() {
        let env = Env::new();
        env.kube.allow_namespaces(&["other"]);
        let result = env.provider().probe(&config("sandbox"));
        assert!(!result.ok);
        assert_eq!(codes(&result, Severity::Error), vec!["namespace-not-allowed"]);
        assert!(env.kube.calls().is_empty(), "{:?}", env.kube.calls());
    }

    #[test]
    fn an_unreachable_api_and_a_bad_config_are_reported() {
        let env = Env::new();
        env.kube.fail_always(
            Verb::ServedVersions,
            "agents.x-k8s.io",
            KubeError::Transport("connection refused".into()),
        );
        let result = env.provider().probe(&config("sandbox"));
        assert_eq!(codes(&result, Severity::Error), vec!["api-unreachable"]);

        let result = env.provider().probe(r#"{"namespace": "x", "imagee": "y"}"#);
        assert!(!result.ok);
        assert!(codes(&result, Severity::Error).contains(&"config-invalid"));
        assert!(codes(&result, Severity::Warning).contains(&"config-warning"));
    }
}
