//! The rules per config field: names, quantities, env, placement, labels, the workspace
//! volume, the claim's pool and template; each problem recorded with its path.

use std::collections::BTreeMap;

use serde_json::Value;

use super::checker::{Checker, ptr, type_name};
use super::security::check_security;
use super::sizes;
use super::{
    Backend, CLAIM_KEYS, ClaimSettings, Config, DEFAULT_COMMAND, DEFAULT_LEASE_TTL_SECONDS,
    DEFAULT_READINESS_TIMEOUT_SECONDS, JOB_KEYS, JobSettings, POD_KEYS, RESOURCES_KEYS, Resources, SANDBOX_KEYS,
    SandboxApiVersion, SandboxSettings, Security, TOLERATION_KEYS, TOP_KEYS, Toleration, WORKSPACE_VOLUME_KEYS,
    WorkspaceVolume,
};
use contract::quote;

use crate::image_ref;
use crate::input_limits::{IMAGE_REF, WORKING_DIR};
use crate::naming::{RESERVED_PREFIX, is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name};

/// Label keys the provider or Kubernetes controllers own; config labels may not set them.
fn reserved_label_key(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
        || key.starts_with("agents.x-k8s.io/")
        || key.starts_with("batch.kubernetes.io/")
        || matches!(key, crate::naming::LABEL_MANAGED_BY | "job-name" | "controller-uid")
}

/// Whether `s` is a Kubernetes quantity (`250m`, `4Gi`, `1e3`), not negative: the API
/// server's own parser decides, so a config this accepts is one the cluster takes.
pub fn is_quantity(s: &str) -> bool {
    contract::k8s::quantity::parse_nanos(s).is_ok_and(|n| n >= 0)
}

/// An environment variable name the provider accepts: a C identifier, which is also a valid
/// Secret key.
pub fn is_env_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Walks a config: the config when it has no errors, and every problem found.
pub(super) fn check(text: &str) -> (Option<Config>, Checker) {
    let mut c = Checker::default();
    if !sizes::text(&mut c, text) {
        return (None, c);
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            c.error("", format!("is not valid JSON: {e}"));
            return (None, c);
        }
    };
    let Some(top) = c.object(&value, "", TOP_KEYS) else {
        return (None, c);
    };
    let mut config = Config {
        namespace: String::new(),
        backend: Backend::default(),
        sandbox_api_version: SandboxApiVersion::Auto,
        image: String::new(),
        image_pull_policy: None,
        command: DEFAULT_COMMAND.iter().map(|s| s.to_string()).collect(),
        args: Vec::new(),
        working_dir: "/workspace".to_string(),
        resources: Resources::default(),
        env: BTreeMap::new(),
        node_selector: BTreeMap::new(),
        tolerations: Vec::new(),
        runtime_class_name: None,
        service_account_name: None,
        image_pull_secrets: Vec::new(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        name_prefix: "pc-".to_string(),
        lease_ttl_seconds: DEFAULT_LEASE_TTL_SECONDS,
        readiness_timeout_seconds: DEFAULT_READINESS_TIMEOUT_SECONDS,
        job: JobSettings::default(),
        sandbox: SandboxSettings::default(),
        security: Security::default(),
        claim: ClaimSettings::default(),
    };

    match c.string(top, "", "namespace") {
        Some(ns) if is_dns1123_label(&ns) => config.namespace = ns,
        Some(ns) => c.error("/namespace", format!("{} is not a namespace name (a DNS-1123 label)", quote(&ns))),
        None if !top.contains_key("namespace") || top["namespace"].is_null() => {
            c.error("/namespace", "is required: the namespace sandboxes are created in");
        }
        None => {}
    }
    if let Some(backend) =
        c.one_of(top, "", "backend", &Backend::ALL.map(Backend::as_str)).and_then(|b| Backend::parse(&b))
    {
        config.backend = backend;
    }
    if let Some(v) = c.one_of(top, "", "sandboxApiVersion", &["auto", "v1beta1", "v1alpha1"]) {
        config.sandbox_api_version = match v.as_str() {
            "v1beta1" => SandboxApiVersion::V1beta1,
            "v1alpha1" => SandboxApiVersion::V1alpha1,
            _ => SandboxApiVersion::Auto,
        };
    }
    match c.string(top, "", "image") {
        Some(image) => match IMAGE_REF.check(|| "the reference".into(), image.len()) {
            Err(e) => c.error("/image", e.to_string()),
            Ok(()) => match image_ref::parse(&image) {
                Err(e) => c.error(
                    "/image",
                    format!("{} {e}. The kubelet would refuse to pull it (InvalidImageName).", quote(&image)),
                ),
                Ok(_) => config.image = image,
            },
        },
        None if top.get("image").is_none_or(Value::is_null) && config.backend != Backend::Claim => {
            c.error("/image", "is required: the container image of the sandbox");
        }
        None => {}
    }
    config.image_pull_policy = c.one_of(top, "", "imagePullPolicy", &["Always", "IfNotPresent", "Never"]);
    if let Some(command) = c.string_list(top, "", "command") {
        config.command = command;
    }
    if let Some(args) = c.string_list(top, "", "args") {
        config.args = args;
    }
    sizes::command(&mut c, &config.command, &config.args);
    if let Some(dir) = c.string(top, "", "workingDir") {
        match WORKING_DIR.check(|| "the path".into(), dir.len()) {
            Err(e) => c.error("/workingDir", e.to_string()),
            Ok(()) if dir.starts_with('/') => config.working_dir = dir,
            Ok(()) => c.error("/workingDir", format!("{} must be an absolute path", quote(&dir))),
        }
    }
    if let Some(resources) = Checker::field(top, "resources")
        && let Some(map) = c.object(resources, "/resources", RESOURCES_KEYS)
    {
        config.resources = Resources {
            requests: c.quantity_map(map, "/resources", "requests").unwrap_or_default(),
            limits: c.quantity_map(map, "/resources", "limits").unwrap_or_default(),
        };
    }
    if let Some(env) = c.string_map(top, "", "env") {
        for (name, value) in &env {
            if !is_env_name(name) {
                c.error(&ptr("/env", name), "is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
            } else if let Some(fault) = crate::input_limits::env_fault(name, value) {
                c.error(&ptr("/env", name), format!("cannot be passed to a sandbox: {fault}"));
            }
        }
        sizes::env(&mut c, &env);
        config.env = env;
    }
    if let Some(selector) = c.string_map(top, "", "nodeSelector") {
        for (k, v) in &selector {
            if !is_qualified_name(k) {
                c.error(&ptr("/nodeSelector", k), "is not a label key");
            } else if !is_label_value(v) {
                c.error(&ptr("/nodeSelector", k), format!("{} is not a label value", quote(v)));
            }
        }
        config.node_selector = selector;
    }
    if let Some(tolerations) = Checker::field(top, "tolerations") {
        config.tolerations = check_tolerations(&mut c, tolerations);
    }
    for (key, slot) in
        [("runtimeClassName", &mut config.runtime_class_name), ("serviceAccountName", &mut config.service_account_name)]
    {
        match c.string(top, "", key) {
            Some(name) if is_dns1123_subdomain(&name) => *slot = Some(name),
            Some(name) => {
                c.error(&ptr("", key), format!("{} is not an object name (a DNS-1123 subdomain)", quote(&name)))
            }
            None => {}
        }
    }
    if let Some(secrets) = c.string_list(top, "", "imagePullSecrets") {
        for (i, name) in secrets.iter().enumerate() {
            if !is_dns1123_subdomain(name) {
                c.error(&format!("/imagePullSecrets/{i}"), format!("{} is not a Secret name", quote(name)));
            }
        }
        config.image_pull_secrets = secrets;
    }
    if let Some(labels) = c.string_map(top, "", "labels") {
        for (k, v) in &labels {
            let at = ptr("/labels", k);
            if !is_qualified_name(k) {
                c.error(&at, "is not a label key");
            } else if reserved_label_key(k) {
                c.error(&at, "is reserved for the provider or a Kubernetes controller; choose another key");
            } else if !is_label_value(v) {
                c.error(&at, format!("{} is not a label value (at most 63 of A-Z a-z 0-9 - _ .)", quote(v)));
            }
        }
        config.labels = labels;
    }
    if let Some(annotations) = c.string_map(top, "", "annotations") {
        for k in annotations.keys() {
            let at = ptr("/annotations", k);
            if !is_qualified_name(k) {
                c.error(&at, "is not an annotation key");
            } else if k.starts_with(RESERVED_PREFIX) || k.starts_with("agents.x-k8s.io/") {
                c.error(&at, "is reserved for the provider or agent-sandbox; choose another key");
            }
        }
        sizes::annotations(&mut c, &annotations);
        config.annotations = annotations;
    }
    match c.string(top, "", "namePrefix") {
        Some(p)
            if (1..=20).contains(&p.len())
                && p.starts_with(|c: char| c.is_ascii_lowercase())
                && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') =>
        {
            config.name_prefix = p;
        }
        Some(p) => {
            c.error("/namePrefix", format!("{} must be 1 to 20 of a-z 0-9 -, starting with a letter", quote(&p)))
        }
        None => {}
    }
    if let Some(ttl) = c.integer(top, "", "leaseTtlSeconds", 60, 7 * 24 * 3600) {
        config.lease_ttl_seconds = ttl as u32;
    }
    if let Some(t) = c.integer(top, "", "readinessTimeoutSeconds", 1, 600) {
        // Whether it fits the host's call deadline is the host's to say (`host_fit`).
        config.readiness_timeout_seconds = t as u32;
    }
    if let Some(job) = Checker::field(top, "job")
        && let Some(map) = c.object(job, "/job", JOB_KEYS)
    {
        if let Some(n) = c.integer(map, "/job", "backoffLimit", 0, 100) {
            config.job.backoff_limit = n as i32;
        }
        if let Some(n) = c.integer(map, "/job", "ttlSecondsAfterFinished", 0, i64::from(i32::MAX)) {
            config.job.ttl_seconds_after_finished = n as i32;
        }
    }
    if let Some(sandbox) = Checker::field(top, "sandbox")
        && let Some(map) = c.object(sandbox, "/sandbox", SANDBOX_KEYS)
        && let Some(volume) = Checker::field(map, "workspaceVolume")
    {
        config.sandbox.workspace_volume = check_workspace_volume(&mut c, volume);
    }
    if let Some(security) = Checker::field(top, "security") {
        check_security(&mut c, security, &mut config.security);
    }
    if config.sandbox.workspace_volume.is_some() && config.backend == Backend::Job {
        c.warn("/sandbox/workspaceVolume", "applies to the sandbox backend only; ignored for backend job");
    }
    let claim_errors = c.error_count();
    if let Some(claim) = Checker::field(top, "claim") {
        config.claim = check_claim(&mut c, claim);
    }
    if config.backend == Backend::Claim {
        for key in POD_KEYS.iter().filter(|k| Checker::field(top, k).is_some()) {
            c.warn(
                &ptr("", key),
                "does not apply to backend claim: the SandboxTemplate decides the pod (image, command, resources, \
                 security); ignored. Change the template, or remove this key",
            );
        }
        if config.claim.is_empty() && c.error_count() == claim_errors {
            c.error(
                "/claim",
                "is required with backend claim: set claim.warmPool (the SandboxWarmPool to adopt a ready Sandbox \
                 from; SandboxClaim v1beta1 needs it) or claim.template (the SandboxTemplate; v1alpha1 needs it), \
                 or both",
            );
        }
    } else if !config.claim.is_empty() {
        c.warn("/claim", "applies to backend claim only; ignored");
    }

    if c.error_count() == 0 { (Some(config), c) } else { (None, c) }
}

fn check_tolerations(c: &mut Checker, value: &Value) -> Vec<Toleration> {
    let Some(items) = value.as_array() else {
        c.error("/tolerations", format!("must be an array, not {}", type_name(value)));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("/tolerations/{i}");
        let Some(map) = c.object(item, &path, TOLERATION_KEYS) else {
            continue;
        };
        let errors_before = c.error_count();
        let key = c.string(map, &path, "key").filter(|k| !k.is_empty());
        if let Some(k) = &key
            && !is_qualified_name(k)
        {
            c.error(&ptr(&path, "key"), format!("{} is not a taint key", quote(k)));
        }
        let operator = c.one_of(map, &path, "operator", &["Equal", "Exists"]);
        let value = c.string(map, &path, "value").filter(|v| !v.is_empty());
        if let Some(v) = &value {
            if operator.as_deref() == Some("Exists") {
                c.error(&ptr(&path, "value"), "must be empty when operator is Exists");
            } else if !is_label_value(v) {
                c.error(&ptr(&path, "value"), format!("{} is not a taint value", quote(v)));
            }
        }
        if key.is_none() && operator.as_deref() != Some("Exists") {
            c.error(&ptr(&path, "operator"), "must be Exists when key is empty (tolerate every taint)");
        }
        let effect =
            c.one_of(map, &path, "effect", &["NoSchedule", "PreferNoSchedule", "NoExecute"]).filter(|e| !e.is_empty());
        let seconds = c.integer(map, &path, "tolerationSeconds", i64::MIN, i64::MAX);
        if seconds.is_some() && effect.as_deref() != Some("NoExecute") {
            c.error(&ptr(&path, "tolerationSeconds"), "applies only with effect NoExecute");
        }
        if c.error_count() == errors_before {
            out.push(Toleration { key, operator, value, effect, toleration_seconds: seconds });
        }
    }
    out
}

/// The claim's pool and template: object names (DNS-1123 subdomains).
fn check_claim(c: &mut Checker, value: &Value) -> ClaimSettings {
    let path = "/claim";
    let Some(map) = c.object(value, path, CLAIM_KEYS) else {
        return ClaimSettings::default();
    };
    let mut name = |key: &str, what: &str| match c.string(map, path, key) {
        Some(name) if is_dns1123_subdomain(&name) => Some(name),
        Some(name) => {
            c.error(&ptr(path, key), format!("{} is not a {what} name (a DNS-1123 subdomain)", quote(&name)));
            None
        }
        None => None,
    };
    let warm_pool = name("warmPool", "SandboxWarmPool");
    let template = name("template", "SandboxTemplate");
    ClaimSettings { warm_pool, template }
}

fn check_workspace_volume(c: &mut Checker, value: &Value) -> Option<WorkspaceVolume> {
    let path = "/sandbox/workspaceVolume";
    let map = c.object(value, path, WORKSPACE_VOLUME_KEYS)?;
    let size = match c.string(map, path, "size") {
        Some(s) if is_quantity(&s) => Some(s),
        Some(s) => {
            c.error(&ptr(path, "size"), format!("{} is not a quantity (such as \"10Gi\")", quote(&s)));
            None
        }
        None => {
            c.error(&ptr(path, "size"), "is required: the size of the workspace claim (such as \"10Gi\")");
            None
        }
    };
    let class = match c.string(map, path, "storageClassName") {
        Some(s) if is_dns1123_subdomain(&s) => Some(s),
        Some(s) => {
            c.error(&ptr(path, "storageClassName"), format!("{} is not a StorageClass name", quote(&s)));
            None
        }
        None => None,
    };
    size.map(|size| WorkspaceVolume { size, storage_class_name: class })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for ok in ["1", "250m", "4Gi", "1.5", ".5", "1e3", "2E-2", "+1", "10M"] {
            assert!(is_quantity(ok), "{ok}");
        }
        // "1e1.5" passed the provider's own parser and then failed at the API server (422).
        for bad in ["", "two", "1GB", "-1", "1.5.5", "Gi", "1e", "1 Gi", "1e1.5", "1.5e2.5", "1Ki2"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }
}
