//! Probe: can this config work against this cluster? API reachable, namespace present, which
//! Sandbox versions are served (and, for backend claim, which SandboxClaim versions, and
//! whether the config names what that version needs), and what the host's policy lets the
//! provider read and watch. Every problem is a diagnostic; probe itself never fails. What a
//! backend needs (its versions, its resources) is its own `Steps::probe`.

pub use contract::{Diagnostic, ProbeResult, Severity};

use crate::api_versions::{self, SANDBOX_GROUP};
use crate::backend;
use crate::clock::Clock;
use crate::config;
use crate::host_fit;
use crate::kube_api::{Kube, KubeError, ResourceType, WatchOptions};
use crate::log::Log;

/// The diagnostics a probe collects; backends add theirs (`Steps::probe`).
pub(crate) struct Findings(Vec<Diagnostic>);

impl Findings {
    /// One diagnostic, under its stable `code`.
    pub(crate) fn add(&mut self, severity: Severity, code: &str, message: impl Into<String>) {
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
    let (validation, config) = config::validate_and_parse(config_text);
    for problem in &validation.errors {
        found.add(Severity::Error, "config-invalid", format!("{}: {}", problem.path, problem.message));
    }
    for problem in &validation.warnings {
        found.add(Severity::Warning, "config-warning", format!("{}: {}", problem.path, problem.message));
    }
    let Some(config) = config else {
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
    let needs = backend::steps::<K>(config.backend).probe(kube, &config, &served, &mut found);

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
    needed.extend(needs.resources);
    needed.push((api_versions::secrets(), "get, create, patch, delete"));
    needed.extend(needs.deleted.into_iter().map(|resource| (resource, "delete")));
    let mut watched = vec![api_versions::pods()];
    watched.extend(needs.watched);
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
        contract::PROBE_WRITES_UNCHECKED,
        "create, patch and delete cannot be checked without writing; acquire reports a refusal as a forbidden (cluster) or denied (host) error",
    );
    found.finish(format!("ready: namespace {ns}, backend {}{}", config.backend.as_str(), needs.uses))
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
