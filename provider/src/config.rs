//! The provider config: its JSON Schema, its validation (every problem with a JSON-pointer
//! path, unknown keys as warnings), its defaults, and the normalized form a host stores.
//!
//! Validation walks the JSON by hand instead of deriving `Deserialize`, so one pass reports
//! every problem with its exact path instead of stopping at the first.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::errors::ProviderError;
use crate::naming::{RESERVED_PREFIX, is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name};

/// Default readiness budget. A host times a lifecycle call out after 30 s by default; 20 s of
/// waiting leaves room for the creates before it and the clean-up after a failure.
pub const DEFAULT_READINESS_TIMEOUT_SECONDS: u32 = 20;
/// Above this, a readiness wait no longer fits a host's default 30 s call budget.
pub const HOST_BUDGET_SAFE_SECONDS: u32 = 25;
/// Default lease life without renewal.
pub const DEFAULT_LEASE_TTL_SECONDS: u32 = 3600;
/// Default command: a sandbox must keep running while the host executes commands in it.
pub const DEFAULT_COMMAND: [&str; 2] = ["sleep", "infinity"];

pub use sandbox_contract::{Backend, ConfigProblem, Validation};

/// Which Sandbox API version to create with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxApiVersion {
    /// Discover what the cluster serves; prefer v1beta1.
    Auto,
    V1beta1,
    V1alpha1,
}

/// Requests and limits, as Kubernetes quantities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub requests: BTreeMap<String, String>,
    pub limits: BTreeMap<String, String>,
}

impl Default for Resources {
    fn default() -> Self {
        let map = |pairs: [(&str, &str); 2]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Self { requests: map([("cpu", "250m"), ("memory", "512Mi")]), limits: map([("cpu", "2"), ("memory", "4Gi")]) }
    }
}

/// A pod toleration (the Kubernetes fields).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// Job backend settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSettings {
    pub backoff_limit: i32,
    pub ttl_seconds_after_finished: i32,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self { backoff_limit: 0, ttl_seconds_after_finished: 900 }
    }
}

/// A persistent workspace: a PVC from a claim template, kept while a reusable lease is suspended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceVolume {
    pub size: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// Sandbox backend settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_volume: Option<WorkspaceVolume>,
}

/// Linux capabilities of the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub drop: Vec<String>,
    pub add: Vec<String>,
}

/// The pod's seccomp profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SeccompProfile {
    RuntimeDefault,
    Unconfined,
}

impl SeccompProfile {
    /// The Kubernetes `seccompProfile.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RuntimeDefault => "RuntimeDefault",
            Self::Unconfined => "Unconfined",
        }
    }
}

/// Hardened pod defaults; each field loosens only when a config sets it explicitly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Security {
    pub run_as_non_root: bool,
    pub run_as_user: i64,
    pub run_as_group: i64,
    pub fs_group: i64,
    pub allow_privilege_escalation: bool,
    pub capabilities: Capabilities,
    pub seccomp_profile: SeccompProfile,
    pub read_only_root_filesystem: bool,
    pub automount_service_account_token: bool,
}

impl Default for Security {
    fn default() -> Self {
        Self {
            run_as_non_root: true,
            run_as_user: 1000,
            run_as_group: 1000,
            fs_group: 1000,
            allow_privilege_escalation: false,
            capabilities: Capabilities { drop: vec!["ALL".to_string()], add: Vec::new() },
            seccomp_profile: SeccompProfile::RuntimeDefault,
            read_only_root_filesystem: true,
            automount_service_account_token: false,
        }
    }
}

/// A validated config with every default filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub namespace: String,
    pub backend: Backend,
    pub sandbox_api_version: SandboxApiVersion,
    pub image: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub resources: Resources,
    pub env: BTreeMap<String, String>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    pub image_pull_secrets: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub name_prefix: String,
    pub lease_ttl_seconds: u32,
    pub readiness_timeout_seconds: u32,
    pub job: JobSettings,
    pub sandbox: SandboxSettings,
    pub security: Security,
}

/// Keys of the top-level object.
pub(crate) const TOP_KEYS: &[&str] = &[
    "namespace",
    "backend",
    "sandboxApiVersion",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "workingDir",
    "resources",
    "env",
    "nodeSelector",
    "tolerations",
    "runtimeClassName",
    "serviceAccountName",
    "imagePullSecrets",
    "labels",
    "annotations",
    "namePrefix",
    "leaseTtlSeconds",
    "readinessTimeoutSeconds",
    "job",
    "sandbox",
    "security",
];
pub(crate) const RESOURCES_KEYS: &[&str] = &["requests", "limits"];
pub(crate) const TOLERATION_KEYS: &[&str] = &["key", "operator", "value", "effect", "tolerationSeconds"];
pub(crate) const JOB_KEYS: &[&str] = &["backoffLimit", "ttlSecondsAfterFinished"];
pub(crate) const SANDBOX_KEYS: &[&str] = &["workspaceVolume"];
pub(crate) const WORKSPACE_VOLUME_KEYS: &[&str] = &["size", "storageClassName"];
pub(crate) const SECURITY_KEYS: &[&str] = &[
    "runAsNonRoot",
    "runAsUser",
    "runAsGroup",
    "fsGroup",
    "allowPrivilegeEscalation",
    "capabilities",
    "seccompProfile",
    "readOnlyRootFilesystem",
    "automountServiceAccountToken",
];
pub(crate) const CAPABILITIES_KEYS: &[&str] = &["drop", "add"];

/// Label keys the provider or Kubernetes controllers own; config labels may not set them.
fn reserved_label_key(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
        || key.starts_with("agents.x-k8s.io/")
        || key.starts_with("batch.kubernetes.io/")
        || matches!(key, "app.kubernetes.io/managed-by" | "job-name" | "controller-uid")
}

/// Appends `key` to a JSON pointer, escaping `~` and `/` (RFC 6901).
fn ptr(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// Whether `s` is a Kubernetes quantity (`250m`, `4Gi`, `1e3`), not negative.
pub fn is_quantity(s: &str) -> bool {
    fn number(s: &str) -> Option<&str> {
        let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let int = digits(s);
        let mut rest = &s[int..];
        let mut frac = 0;
        if let Some(after) = rest.strip_prefix('.') {
            frac = digits(after);
            rest = &after[frac..];
        }
        if int == 0 && frac == 0 { None } else { Some(rest) }
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let Some(suffix) = number(s) else {
        return false;
    };
    match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        exp if exp.starts_with(['e', 'E']) => {
            let exp = &exp[1..];
            let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            number(exp) == Some("")
        }
        _ => false,
    }
}

/// An environment variable name the provider accepts: a C identifier, which is also a valid
/// Secret key.
pub fn is_env_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Collects problems while walking a config.
#[derive(Default)]
struct Checker {
    errors: Vec<ConfigProblem>,
    warnings: Vec<ConfigProblem>,
}

impl Checker {
    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(ConfigProblem { path: path.to_string(), message: message.into() });
    }

    fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(ConfigProblem { path: path.to_string(), message: message.into() });
    }

    /// `value` as an object, warning about keys outside `known`.
    fn object<'v>(&mut self, value: &'v Value, path: &str, known: &[&str]) -> Option<&'v Map<String, Value>> {
        let Some(map) = value.as_object() else {
            self.error(path, format!("must be an object, not {}", type_name(value)));
            return None;
        };
        for key in map.keys() {
            if !known.contains(&key.as_str()) {
                self.warn(&ptr(path, key), "unknown key, ignored; check its spelling against the config schema");
            }
        }
        Some(map)
    }

    /// A present, non-null field.
    fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
        map.get(key).filter(|v| !v.is_null())
    }

    fn string(&mut self, map: &Map<String, Value>, path: &str, key: &str) -> Option<String> {
        let value = Self::field(map, key)?;
        match value.as_str() {
            Some(s) => Some(s.to_string()),
            None => {
                self.error(&ptr(path, key), format!("must be a string, not {}", type_name(value)));
                None
            }
        }
    }

    fn boolean(&mut self, map: &Map<String, Value>, path: &str, key: &str) -> Option<bool> {
        let value = Self::field(map, key)?;
        match value.as_bool() {
            Some(b) => Some(b),
            None => {
                self.error(&ptr(path, key), format!("must be true or false, not {}", type_name(value)));
                None
            }
        }
    }

    fn integer(&mut self, map: &Map<String, Value>, path: &str, key: &str, min: i64, max: i64) -> Option<i64> {
        let value = Self::field(map, key)?;
        match value.as_i64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            Some(n) => {
                self.error(&ptr(path, key), format!("must be between {min} and {max}, not {n}"));
                None
            }
            None => {
                self.error(&ptr(path, key), format!("must be an integer, not {}", type_name(value)));
                None
            }
        }
    }

    fn string_list(&mut self, map: &Map<String, Value>, path: &str, key: &str) -> Option<Vec<String>> {
        let value = Self::field(map, key)?;
        let path = ptr(path, key);
        let Some(items) = value.as_array() else {
            self.error(&path, format!("must be an array of strings, not {}", type_name(value)));
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(s) => out.push(s.to_string()),
                None => self.error(&ptr(&path, &i.to_string()), format!("must be a string, not {}", type_name(item))),
            }
        }
        Some(out)
    }

    fn string_map(&mut self, map: &Map<String, Value>, path: &str, key: &str) -> Option<BTreeMap<String, String>> {
        let value = Self::field(map, key)?;
        let path = ptr(path, key);
        let Some(entries) = value.as_object() else {
            self.error(&path, format!("must be an object of strings, not {}", type_name(value)));
            return None;
        };
        let mut out = BTreeMap::new();
        for (k, v) in entries {
            match v.as_str() {
                Some(s) => {
                    out.insert(k.clone(), s.to_string());
                }
                None => self.error(&ptr(&path, k), format!("must be a string, not {}", type_name(v))),
            }
        }
        Some(out)
    }

    /// A map of quantities; numbers are accepted and written as strings.
    fn quantity_map(&mut self, map: &Map<String, Value>, path: &str, key: &str) -> Option<BTreeMap<String, String>> {
        let value = Self::field(map, key)?;
        let path = ptr(path, key);
        let Some(entries) = value.as_object() else {
            self.error(&path, format!("must be an object of quantities, not {}", type_name(value)));
            return None;
        };
        let mut out = BTreeMap::new();
        for (name, v) in entries {
            let at = ptr(&path, name);
            if !is_qualified_name(name) {
                self.error(&at, "is not a resource name (cpu, memory, ephemeral-storage, or vendor.example/device)");
                continue;
            }
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => {
                    self.error(
                        &at,
                        format!("must be a quantity such as \"500m\" or \"2Gi\", not {}", type_name(other)),
                    );
                    continue;
                }
            };
            if is_quantity(&text) {
                out.insert(name.clone(), text);
            } else {
                self.error(&at, format!("{text:?} is not a Kubernetes quantity (such as \"500m\", \"2\", \"4Gi\")"));
            }
        }
        Some(out)
    }

    fn one_of(&mut self, map: &Map<String, Value>, path: &str, key: &str, allowed: &[&str]) -> Option<String> {
        let s = self.string(map, path, key)?;
        if allowed.contains(&s.as_str()) {
            Some(s)
        } else {
            self.error(&ptr(path, key), format!("must be one of {}, not {s:?}", allowed.join(", ")));
            None
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Walks a config: the config when it has no errors, and every problem found.
fn check(text: &str) -> (Option<Config>, Checker) {
    let mut c = Checker::default();
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
        backend: Backend::Sandbox,
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
    };

    match c.string(top, "", "namespace") {
        Some(ns) if is_dns1123_label(&ns) => config.namespace = ns,
        Some(ns) => c.error("/namespace", format!("{ns:?} is not a namespace name (a DNS-1123 label)")),
        None if !top.contains_key("namespace") || top["namespace"].is_null() => {
            c.error("/namespace", "is required: the namespace sandboxes are created in");
        }
        None => {}
    }
    if let Some(b) = c.one_of(top, "", "backend", &["sandbox", "job"]) {
        config.backend = if b == "job" { Backend::Job } else { Backend::Sandbox };
    }
    if let Some(v) = c.one_of(top, "", "sandboxApiVersion", &["auto", "v1beta1", "v1alpha1"]) {
        config.sandbox_api_version = match v.as_str() {
            "v1beta1" => SandboxApiVersion::V1beta1,
            "v1alpha1" => SandboxApiVersion::V1alpha1,
            _ => SandboxApiVersion::Auto,
        };
    }
    match c.string(top, "", "image") {
        Some(image) if image.is_empty() || image.len() > 1024 || image.chars().any(char::is_whitespace) => {
            c.error("/image", format!("{image:?} is not an image reference (non-empty, no spaces)"));
        }
        Some(image) => config.image = image,
        None if top.get("image").is_none_or(Value::is_null) => {
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
    match c.string(top, "", "workingDir") {
        Some(dir) if dir.starts_with('/') => config.working_dir = dir,
        Some(dir) => c.error("/workingDir", format!("{dir:?} must be an absolute path")),
        None => {}
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
        for name in env.keys() {
            if !is_env_name(name) {
                c.error(&ptr("/env", name), "is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
            }
        }
        config.env = env;
    }
    if let Some(selector) = c.string_map(top, "", "nodeSelector") {
        for (k, v) in &selector {
            if !is_qualified_name(k) {
                c.error(&ptr("/nodeSelector", k), "is not a label key");
            } else if !is_label_value(v) {
                c.error(&ptr("/nodeSelector", k), format!("{v:?} is not a label value"));
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
            Some(name) => c.error(&ptr("", key), format!("{name:?} is not an object name (a DNS-1123 subdomain)")),
            None => {}
        }
    }
    if let Some(secrets) = c.string_list(top, "", "imagePullSecrets") {
        for (i, name) in secrets.iter().enumerate() {
            if !is_dns1123_subdomain(name) {
                c.error(&format!("/imagePullSecrets/{i}"), format!("{name:?} is not a Secret name"));
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
                c.error(&at, format!("{v:?} is not a label value (at most 63 of A-Z a-z 0-9 - _ .)"));
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
        Some(p) => c.error("/namePrefix", format!("{p:?} must be 1 to 20 of a-z 0-9 -, starting with a letter")),
        None => {}
    }
    if let Some(ttl) = c.integer(top, "", "leaseTtlSeconds", 60, 7 * 24 * 3600) {
        config.lease_ttl_seconds = ttl as u32;
    }
    if let Some(t) = c.integer(top, "", "readinessTimeoutSeconds", 1, 600) {
        config.readiness_timeout_seconds = t as u32;
        if t > i64::from(HOST_BUDGET_SAFE_SECONDS) {
            c.warn(
                "/readinessTimeoutSeconds",
                format!(
                    "{t} s does not fit a host's default 30 s call budget (keep it at or under \
                     {HOST_BUDGET_SAFE_SECONDS} s, or raise the host's timeout to match)"
                ),
            );
        }
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

    if c.errors.is_empty() { (Some(config), c) } else { (None, c) }
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
        let errors_before = c.errors.len();
        let key = c.string(map, &path, "key").filter(|k| !k.is_empty());
        if let Some(k) = &key
            && !is_qualified_name(k)
        {
            c.error(&ptr(&path, "key"), format!("{k:?} is not a taint key"));
        }
        let operator = c.one_of(map, &path, "operator", &["Equal", "Exists"]);
        let value = c.string(map, &path, "value").filter(|v| !v.is_empty());
        if let Some(v) = &value {
            if operator.as_deref() == Some("Exists") {
                c.error(&ptr(&path, "value"), "must be empty when operator is Exists");
            } else if !is_label_value(v) {
                c.error(&ptr(&path, "value"), format!("{v:?} is not a taint value"));
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
        if c.errors.len() == errors_before {
            out.push(Toleration { key, operator, value, effect, toleration_seconds: seconds });
        }
    }
    out
}

fn check_workspace_volume(c: &mut Checker, value: &Value) -> Option<WorkspaceVolume> {
    let path = "/sandbox/workspaceVolume";
    let map = c.object(value, path, WORKSPACE_VOLUME_KEYS)?;
    let size = match c.string(map, path, "size") {
        Some(s) if is_quantity(&s) => Some(s),
        Some(s) => {
            c.error(&ptr(path, "size"), format!("{s:?} is not a quantity (such as \"10Gi\")"));
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
            c.error(&ptr(path, "storageClassName"), format!("{s:?} is not a StorageClass name"));
            None
        }
        None => None,
    };
    size.map(|size| WorkspaceVolume { size, storage_class_name: class })
}

fn check_security(c: &mut Checker, value: &Value, security: &mut Security) {
    let path = "/security";
    let Some(map) = c.object(value, path, SECURITY_KEYS) else {
        return;
    };
    let loosened = |c: &mut Checker, key: &str, what: &str| {
        c.warn(&ptr(path, key), format!("loosens a hardened default: {what}"));
    };
    if let Some(b) = c.boolean(map, path, "runAsNonRoot") {
        security.run_as_non_root = b;
        if !b {
            loosened(c, "runAsNonRoot", "the container may run as root");
        }
    }
    for (key, slot) in [
        ("runAsUser", &mut security.run_as_user),
        ("runAsGroup", &mut security.run_as_group),
        ("fsGroup", &mut security.fs_group),
    ] {
        if let Some(id) = c.integer(map, path, key, 0, i64::from(i32::MAX)) {
            *slot = id;
        }
    }
    if security.run_as_user == 0 {
        if security.run_as_non_root {
            c.error(
                &ptr(path, "runAsUser"),
                "is 0 (root) while runAsNonRoot is true; the kubelet would refuse the pod",
            );
        } else {
            loosened(c, "runAsUser", "the container runs as root");
        }
    }
    if let Some(b) = c.boolean(map, path, "allowPrivilegeEscalation") {
        security.allow_privilege_escalation = b;
        if b {
            loosened(c, "allowPrivilegeEscalation", "processes may gain privileges (setuid binaries)");
        }
    }
    if let Some(caps) = Checker::field(map, "capabilities") {
        let caps_path = ptr(path, "capabilities");
        if let Some(caps_map) = c.object(caps, &caps_path, CAPABILITIES_KEYS) {
            for key in ["drop", "add"] {
                if let Some(list) = c.string_list(caps_map, &caps_path, key) {
                    for (i, cap) in list.iter().enumerate() {
                        if cap.is_empty() || !cap.chars().all(|ch| ch.is_ascii_uppercase() || ch == '_') {
                            c.error(
                                &format!("{caps_path}/{key}/{i}"),
                                format!("{cap:?} is not a capability name (NET_BIND_SERVICE, ALL)"),
                            );
                        }
                    }
                    if key == "drop" {
                        security.capabilities.drop = list;
                    } else {
                        security.capabilities.add = list;
                    }
                }
            }
            if !security.capabilities.drop.iter().any(|d| d == "ALL") {
                loosened(c, "capabilities", "not every capability is dropped");
            }
            if !security.capabilities.add.is_empty() {
                loosened(c, "capabilities", "capabilities are added");
            }
        }
    }
    if c.one_of(map, path, "seccompProfile", &["RuntimeDefault", "Unconfined"]).as_deref() == Some("Unconfined") {
        security.seccomp_profile = SeccompProfile::Unconfined;
        loosened(c, "seccompProfile", "no seccomp filter");
    }
    if let Some(b) = c.boolean(map, path, "readOnlyRootFilesystem") {
        security.read_only_root_filesystem = b;
        if !b {
            loosened(c, "readOnlyRootFilesystem", "the image's filesystem is writable");
        }
    }
    if let Some(b) = c.boolean(map, path, "automountServiceAccountToken") {
        security.automount_service_account_token = b;
        if b {
            loosened(c, "automountServiceAccountToken", "the sandbox gets a Kubernetes API token");
        }
    }
}

/// Validates a config: every problem with its path, warnings for unknown keys and loosened
/// defaults, and the normalized config when there are no errors.
pub fn validate(text: &str) -> Validation {
    let (config, checker) = check(text);
    let normalized_config = config.as_ref().and_then(|c| serde_json::to_string(c).ok());
    Validation { ok: config.is_some(), warnings: checker.warnings, errors: checker.errors, normalized_config }
}

/// Parses a config for a lifecycle call; the first problem is the error.
pub fn parse(text: &str) -> Result<Config, ProviderError> {
    match check(text) {
        (Some(config), _) => Ok(config),
        (None, checker) => Err(match checker.errors.into_iter().next() {
            Some(p) => {
                ProviderError::invalid_config(p.path, format!("{}; run validate-config for every problem", p.message))
            }
            None => ProviderError::internal("config check failed without naming a problem"),
        }),
    }
}

/// The JSON Schema (draft 2020-12) of the config, for `describe`.
pub fn schema() -> Value {
    let string_map = |description: &str| json!({"type": "object", "additionalProperties": {"type": "string"}, "description": description});
    let quantity_map = |description: &str| json!({"type": "object", "additionalProperties": {"type": ["string", "number"]}, "description": description});
    let string_list =
        |description: &str| json!({"type": "array", "items": {"type": "string"}, "description": description});
    let tolerations = json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "key": {"type": "string"},
                "operator": {"enum": ["Equal", "Exists"]},
                "value": {"type": "string"},
                "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
                "tolerationSeconds": {"type": "integer"}
            }
        }
    });
    let job = json!({
        "type": "object",
        "properties": {
            "backoffLimit": {"type": "integer", "minimum": 0, "maximum": 100, "default": 0},
            "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0, "default": 900}
        }
    });
    let sandbox = json!({
        "type": "object",
        "properties": {
            "workspaceVolume": {
                "type": "object",
                "required": ["size"],
                "description": "A persistent workspace claim; reusable leases need it (release suspends the Sandbox and keeps the disk).",
                "properties": {"size": {"type": "string"}, "storageClassName": {"type": "string"}}
            }
        }
    });
    let security = json!({
        "type": "object",
        "description": "Hardened defaults; each loosening must be explicit and is reported as a warning.",
        "properties": {
            "runAsNonRoot": {"type": "boolean", "default": true},
            "runAsUser": {"type": "integer", "default": 1000},
            "runAsGroup": {"type": "integer", "default": 1000},
            "fsGroup": {"type": "integer", "default": 1000},
            "allowPrivilegeEscalation": {"type": "boolean", "default": false},
            "capabilities": {
                "type": "object",
                "properties": {"drop": {"type": "array", "items": {"type": "string"}, "default": ["ALL"]}, "add": {"type": "array", "items": {"type": "string"}, "default": []}}
            },
            "seccompProfile": {"enum": ["RuntimeDefault", "Unconfined"], "default": "RuntimeDefault"},
            "readOnlyRootFilesystem": {"type": "boolean", "default": true},
            "automountServiceAccountToken": {"type": "boolean", "default": false}
        }
    });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Kubernetes sandbox provider config",
        "description": "Unknown keys are reported as warnings and ignored. Every default is filled in by validate-config.",
        "type": "object",
        "required": ["namespace", "image"],
        "properties": {
            "namespace": {"type": "string", "description": "Namespace the sandboxes are created in (must exist)."},
            "backend": {"enum": ["sandbox", "job"], "default": "sandbox", "description": "sandbox: an agent-sandbox Sandbox (agents.x-k8s.io); job: a batch/v1 Job."},
            "sandboxApiVersion": {"enum": ["auto", "v1beta1", "v1alpha1"], "default": "auto", "description": "auto discovers what the cluster serves and prefers v1beta1."},
            "image": {"type": "string", "description": "Container image of the sandbox."},
            "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            "command": string_list("Container command; default [\"sleep\", \"infinity\"] keeps the sandbox alive; [] uses the image's entrypoint."),
            "args": string_list("Container arguments."),
            "workingDir": {"type": "string", "default": "/workspace", "description": "Absolute working directory."},
            "resources": {
                "type": "object",
                "description": "Requests and limits; when absent: requests cpu 250m, memory 512Mi; limits cpu 2, memory 4Gi.",
                "properties": {"requests": quantity_map("Resource requests."), "limits": quantity_map("Resource limits.")}
            },
            "env": string_map("Non-secret environment variables; the request's env wins on the same name."),
            "nodeSelector": string_map("Node labels the pod must match."),
            "tolerations": tolerations,
            "runtimeClassName": {"type": "string", "description": "RuntimeClass (gVisor, Kata) for stronger isolation."},
            "serviceAccountName": {"type": "string"},
            "imagePullSecrets": string_list("Names of Secrets in the namespace for pulling the image."),
            "labels": string_map("Extra labels on every object (keys under sandbox.paperclip.io/ are reserved)."),
            "annotations": string_map("Extra annotations on every object and the pod."),
            "namePrefix": {"type": "string", "default": "pc-", "description": "Object names are this prefix plus the acquisition id, unchanged."},
            "leaseTtlSeconds": {"type": "integer", "minimum": 60, "maximum": 604800, "default": DEFAULT_LEASE_TTL_SECONDS, "description": "Longest life of a lease without renewal; the cluster deletes the sandbox then, whatever happens to the host."},
            "readinessTimeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 600, "default": DEFAULT_READINESS_TIMEOUT_SECONDS, "description": "One deadline over a whole acquire (or a resume's wait). The default 20 s stays well inside a host's default 30 s call budget, leaving room for clean-up after a failure; above 25 s, raise the host's timeout too."},
            "job": job,
            "sandbox": sandbox,
            "security": security
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        json!({"namespace": "sandboxes", "image": "ghcr.io/acme/agent:1"})
    }

    fn paths(problems: &[ConfigProblem]) -> Vec<&str> {
        problems.iter().map(|p| p.path.as_str()).collect()
    }

    #[test]
    fn minimal_config_gets_every_default() {
        let v = validate(&minimal().to_string());
        assert!(v.ok, "{v:?}");
        assert!(v.errors.is_empty() && v.warnings.is_empty());
        let normalized: Value = serde_json::from_str(v.normalized_config.as_deref().unwrap()).unwrap();
        assert_eq!(normalized["backend"], "sandbox");
        assert_eq!(normalized["sandboxApiVersion"], "auto");
        assert_eq!(normalized["readinessTimeoutSeconds"], 20);
        assert_eq!(normalized["leaseTtlSeconds"], 3600);
        assert_eq!(normalized["job"], json!({"backoffLimit": 0, "ttlSecondsAfterFinished": 900}));
        assert_eq!(normalized["command"], json!(["sleep", "infinity"]));
        assert_eq!(normalized["security"]["runAsNonRoot"], true);
        assert_eq!(normalized["security"]["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(normalized["resources"]["limits"]["memory"], "4Gi");
        let again = validate(&normalized.to_string());
        assert_eq!(again.normalized_config, v.normalized_config, "normalizing is idempotent");
    }

    #[test]
    fn every_problem_is_reported_with_its_path() {
        let config = json!({
            "namespace": "Bad_NS",
            "backend": "vm",
            "resources": {"limits": {"cpu": "two", "memory": "4Gi"}},
            "env": {"1BAD": "x", "GOOD": 3},
            "labels": {"sandbox.paperclip.io/run-id": "x", "team": "not valid!"},
            "tolerations": [{"operator": "Exists", "value": "x"}, {"effect": "NoExecute", "key": "k", "tolerationSeconds": "soon"}],
            "job": {"backoffLimit": -1},
            "readinessTimeoutSeconds": 0,
            "security": {"runAsUser": 0}
        });
        let v = validate(&config.to_string());
        assert!(!v.ok);
        assert!(v.normalized_config.is_none());
        let got = paths(&v.errors);
        for expected in [
            "/namespace",
            "/backend",
            "/image",
            "/resources/limits/cpu",
            "/env/1BAD",
            "/env/GOOD",
            "/labels/sandbox.paperclip.io~1run-id",
            "/labels/team",
            "/tolerations/0/value",
            "/tolerations/1/tolerationSeconds",
            "/job/backoffLimit",
            "/readinessTimeoutSeconds",
            "/security/runAsUser",
        ] {
            assert!(got.contains(&expected), "missing {expected} in {got:?}");
        }
    }

    #[test]
    fn unknown_keys_are_warnings_with_paths() {
        let mut config = minimal();
        config["imagePullPolicyy"] = json!("Always");
        config["job"] = json!({"backofLimit": 2});
        config["security"] = json!({"capabilities": {"drop": ["ALL"], "keep": []}});
        let v = validate(&config.to_string());
        assert!(v.ok, "{v:?}");
        assert_eq!(paths(&v.warnings), vec!["/imagePullPolicyy", "/job/backofLimit", "/security/capabilities/keep"]);
    }

    #[test]
    fn loosening_defaults_is_explicit_and_warned() {
        let mut config = minimal();
        config["security"] = json!({
            "runAsNonRoot": false, "runAsUser": 0, "allowPrivilegeEscalation": true,
            "capabilities": {"drop": [], "add": ["NET_ADMIN"]}, "seccompProfile": "Unconfined",
            "readOnlyRootFilesystem": false, "automountServiceAccountToken": true
        });
        let v = validate(&config.to_string());
        assert!(v.ok, "{v:?}");
        assert_eq!(v.warnings.len(), 8, "{:?}", v.warnings);
        assert!(v.warnings.iter().all(|w| w.message.starts_with("loosens a hardened default")));
        let parsed = parse(&config.to_string()).unwrap();
        assert!(!parsed.security.run_as_non_root);
        assert_eq!(parsed.security.capabilities.add, vec!["NET_ADMIN"]);
    }

    #[test]
    fn long_readiness_timeout_warns_about_the_host_budget() {
        let mut config = minimal();
        config["readinessTimeoutSeconds"] = json!(60);
        let v = validate(&config.to_string());
        assert!(v.ok);
        assert_eq!(paths(&v.warnings), vec!["/readinessTimeoutSeconds"]);
        assert!(v.warnings[0].message.contains("30 s"));
    }

    #[test]
    fn parse_reports_the_first_problem_as_invalid_config() {
        let err = parse(r#"{"image": "x"}"#).unwrap_err();
        match err {
            ProviderError::InvalidConfig(d) => assert_eq!(d.path, "/namespace"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse("not json"), Err(ProviderError::InvalidConfig(_))));
        assert!(matches!(parse("[1]"), Err(ProviderError::InvalidConfig(_))));
    }

    #[test]
    fn full_config_parses() {
        let config = json!({
            "namespace": "team-a", "backend": "job", "sandboxApiVersion": "v1alpha1", "image": "busybox:1.36",
            "imagePullPolicy": "IfNotPresent", "command": ["/bin/sh"], "args": ["-c", "sleep 1d"], "workingDir": "/work",
            "resources": {"requests": {"cpu": 1, "memory": "1Gi"}},
            "env": {"MODE": "fast"}, "nodeSelector": {"pool": "sandboxes"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "sandbox", "effect": "NoSchedule"}],
            "runtimeClassName": "gvisor", "serviceAccountName": "sandbox", "imagePullSecrets": ["regcred"],
            "labels": {"team": "a"}, "annotations": {"example.com/owner": "team a"}, "namePrefix": "sbx-",
            "leaseTtlSeconds": 600, "readinessTimeoutSeconds": 15, "job": {"backoffLimit": 1, "ttlSecondsAfterFinished": 60},
            "sandbox": {"workspaceVolume": {"size": "10Gi", "storageClassName": "fast"}}
        });
        let v = validate(&config.to_string());
        assert!(v.ok, "{v:?}");
        assert_eq!(paths(&v.warnings), vec!["/sandbox/workspaceVolume"], "workspace volume is ignored for jobs");
        let c = parse(&config.to_string()).unwrap();
        assert_eq!(c.backend, Backend::Job);
        assert_eq!(c.sandbox_api_version, SandboxApiVersion::V1alpha1);
        assert_eq!(c.resources.requests["cpu"], "1");
        assert!(c.resources.limits.is_empty(), "explicit resources replace the defaults");
        assert_eq!(c.tolerations[0].effect.as_deref(), Some("NoSchedule"));
        assert_eq!(c.job.backoff_limit, 1);
        assert_eq!(c.name_prefix, "sbx-");
    }

    #[test]
    fn quantities() {
        for ok in ["1", "250m", "4Gi", "1.5", ".5", "1e3", "2E-2", "+1", "10M"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "two", "1GB", "-1", "1.5.5", "Gi", "1e", "1 Gi"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn schema_names_every_key_validation_knows() {
        let schema = schema();
        let keys = |pointer: &str| -> Vec<String> {
            let mut k: Vec<String> =
                schema.pointer(pointer).and_then(Value::as_object).unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let sorted = |list: &[&str]| {
            let mut k: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        assert_eq!(keys("/properties"), sorted(TOP_KEYS));
        assert_eq!(keys("/properties/resources/properties"), sorted(RESOURCES_KEYS));
        assert_eq!(keys("/properties/tolerations/items/properties"), sorted(TOLERATION_KEYS));
        assert_eq!(keys("/properties/job/properties"), sorted(JOB_KEYS));
        assert_eq!(keys("/properties/sandbox/properties"), sorted(SANDBOX_KEYS));
        assert_eq!(keys("/properties/sandbox/properties/workspaceVolume/properties"), sorted(WORKSPACE_VOLUME_KEYS));
        assert_eq!(keys("/properties/security/properties"), sorted(SECURITY_KEYS));
        assert_eq!(keys("/properties/security/properties/capabilities/properties"), sorted(CAPABILITIES_KEYS));
        assert!(schema["properties"]["readinessTimeoutSeconds"]["description"].as_str().unwrap().contains("30 s"));
    }
}
