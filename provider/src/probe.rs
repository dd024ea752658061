//! Probe: can this config work against this cluster? API reachable, namespace present, which
//! Sandbox versions are served, and what the host's policy lets the provider read and watch.
//! Every problem is a diagnostic; probe itself never fails.

pub use sandbox_contract::{Diagnostic, ProbeResult, Severity};

use crate::api_versions::{self, SANDBOX_GROUP, SandboxVersion};
use crate::clock::Clock;
use crate::config::{self, Backend, SandboxApiVersion};
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
    match config.backend {
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
    match (config.backend, chosen) {
        (Backend::Sandbox, Some(v)) => needed.push((v.resource(), "get, list, watch, create, patch, delete")),
        (Backend::Sandbox, None) => {}
        (Backend::Job, _) => needed.push((api_versions::jobs(), "get, list, watch, create, patch, delete")),
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
    match kube.watch(&api_versions::pods(), Some(ns), &watch) {
        Ok(_) => readable.push("pods (watch)".to_string()),
        Err(KubeError::Forbidden(m) | KubeError::Denied(m)) => found.add(
            Severity::Error,
            "forbidden-watch-pods",
            format!("the host's policy or RBAC forbids watching pods in {ns} ({m}); readiness is detected by watching"),
        ),
        Err(e) => found.add(Severity::Warning, "watch-failed-pods", format!("could not watch pods in {ns}: {e}")),
    }
    if !readable.is_empty() {
        found.add(Severity::Info, "reads-allowed", format!("allowed to read in {ns}: {}", readable.join(", ")));
    }
    found.add(
        Severity::Info,
        "writes-unchecked",
        "create, patch and delete cannot be checked without writing; acquire reports a refusal as a forbidden (cluster) or denied (host) error",
    );
    let version = chosen.map(|v| format!(", Sandbox {}", v.as_str())).unwrap_or_default();
    found.finish(format!("ready: namespace {ns}, backend {}{version}", config.backend.as_str()))
}

/// The name probe reads to check access; no provider object is ever named like this.
const ACCESS_CHECK_NAME: &str = "paperclip-probe-access-check";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kube::Verb;
    use crate::testkit::{Env, config, config_with};

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
