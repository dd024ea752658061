//! The Kubernetes Pod Security Standards (<https://kubernetes.io/docs/concepts/security/pod-security-standards/>)
//! evaluated on a pod spec, as `k8s.io/pod-security-admission/policy` checks them at version
//! `latest`: the host holds a provider's pods under a ceiling with them, and the embedded
//! cluster admits pods with them, so both refuse the same pods with the same words.
//!
//! Each check has upstream's id (`runAsNonRoot`, `capabilities_restricted`, ...) and reason
//! text (`runAsNonRoot != true (pod or container "c" must set ...)`). A restricted check that
//! tightens a baseline one (`capabilities_restricted`, `seccompProfile_restricted`,
//! `restrictedVolumes`) replaces it at the restricted level, as upstream's overrides do.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A Pod Security Standards level, from least to most restrictive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Unrestricted.
    Privileged,
    /// Prevents known privilege escalations.
    Baseline,
    /// Current pod hardening best practice.
    Restricted,
}

impl Level {
    /// The level's name in namespace labels and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Privileged => "privileged",
            Self::Baseline => "baseline",
            Self::Restricted => "restricted",
        }
    }
}

/// One check a pod failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Upstream's check id, which an exemption names.
    pub check: &'static str,
    /// Upstream's reason with its detail in parentheses, as admission reports it.
    pub reason: String,
}

/// The pod as the checks read it: its metadata (for the AppArmor annotations) and its spec.
struct Pod<'a> {
    annotations: Option<&'a serde_json::Map<String, Value>>,
    spec: &'a Value,
}

impl<'a> Pod<'a> {
    /// Init, regular and ephemeral containers, in upstream's visiting order.
    fn containers(&self) -> impl Iterator<Item = &'a Value> {
        let spec = self.spec;
        ["initContainers", "containers", "ephemeralContainers"]
            .into_iter()
            .flat_map(move |kind| spec.get(kind).and_then(Value::as_array).into_iter().flatten())
    }

    /// The names of the containers for which `bad` holds.
    fn containers_where(&self, mut bad: impl FnMut(&Value) -> bool) -> Vec<String> {
        self.containers().filter(|c| bad(c)).map(name).collect()
    }

    fn pod_context(&self, field: &str) -> Option<&'a Value> {
        self.spec.get("securityContext").and_then(|s| s.get(field)).filter(|v| !v.is_null())
    }
}

fn name(container: &Value) -> String {
    container.get("name").and_then(Value::as_str).unwrap_or_default().to_string()
}

fn context<'v>(container: &'v Value, field: &str) -> Option<&'v Value> {
    container.get("securityContext").and_then(|s| s.get(field)).filter(|v| !v.is_null())
}

fn strings(value: Option<&Value>) -> impl Iterator<Item = &str> {
    value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

/// Go's `%q` of each item, joined by ", ".
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    items.iter().map(|s| format!("{:?}", s.as_ref())).collect::<Vec<_>>().join(", ")
}

fn pluralize<'s>(singular: &'s str, plural: &'s str, count: usize) -> &'s str {
    if count == 1 { singular } else { plural }
}

/// `container "a"` or `containers "a", "b"`.
fn containers_named(names: &[String]) -> String {
    format!("{} {}", pluralize("container", "containers", names.len()), join_quote(names))
}

fn failure(reason: &str, details: Vec<String>) -> Option<String> {
    if details.is_empty() { None } else { Some(format!("{reason} ({})", details.join("; "))) }
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|i| i == item) {
        list.push(item.to_string());
    }
}

/// A check: its id, the lowest level it applies at, the baseline check it replaces, and the
/// failure it finds (reason and detail), if any.
struct Check {
    id: &'static str,
    level: Level,
    overrides: Option<&'static str>,
    run: fn(&Pod<'_>) -> Option<String>,
}

/// Every check, sorted by id as upstream reports them.
const CHECKS: &[Check] = &[
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        overrides: None,
        run: allow_privilege_escalation,
    },
    Check { id: "appArmorProfile", level: Level::Baseline, overrides: None, run: app_armor_profile },
    Check { id: "capabilities_baseline", level: Level::Baseline, overrides: None, run: capabilities_baseline },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        overrides: Some("capabilities_baseline"),
        run: capabilities_restricted,
    },
    Check { id: "hostNamespaces", level: Level::Baseline, overrides: None, run: host_namespaces },
    Check { id: "hostPathVolumes", level: Level::Baseline, overrides: None, run: host_path_volumes },
    Check { id: "hostPorts", level: Level::Baseline, overrides: None, run: host_ports },
    Check { id: "privileged", level: Level::Baseline, overrides: None, run: privileged },
    Check { id: "procMount", level: Level::Baseline, overrides: None, run: proc_mount },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        overrides: Some("hostPathVolumes"),
        run: restricted_volumes,
    },
    Check { id: "runAsNonRoot", level: Level::Restricted, overrides: None, run: run_as_non_root },
    Check { id: "runAsUser", level: Level::Restricted, overrides: None, run: run_as_user },
    Check { id: "seLinuxOptions", level: Level::Baseline, overrides: None, run: se_linux_options },
    Check { id: "seccompProfile_baseline", level: Level::Baseline, overrides: None, run: seccomp_baseline },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        overrides: Some("seccompProfile_baseline"),
        run: seccomp_restricted,
    },
    Check { id: "sysctls", level: Level::Baseline, overrides: None, run: sysctls },
    Check { id: "windowsHostProcess", level: Level::Baseline, overrides: None, run: windows_host_process },
];

/// Every check id, for a policy that names checks to exempt.
pub fn check_ids() -> impl Iterator<Item = &'static str> {
    CHECKS.iter().map(|c| c.id)
}

/// The checks `spec` (a PodSpec) fails at `level`.
pub fn evaluate(level: Level, spec: &Value) -> Vec<Violation> {
    evaluate_pod(level, None, spec, &[] as &[&str])
}

/// The checks a pod fails at `level`, its `metadata` read for AppArmor annotations, skipping the
/// check ids in `exempt`. An exempt restricted check brings back the baseline check it replaces,
/// so exempting `capabilities_restricted` still forbids the capabilities baseline forbids.
pub fn evaluate_pod<S: AsRef<str>>(
    level: Level,
    metadata: Option<&Value>,
    spec: &Value,
    exempt: &[S],
) -> Vec<Violation> {
    let pod = Pod { annotations: metadata.and_then(|m| m.get("annotations")).and_then(Value::as_object), spec };
    let exempt = |id: &str| exempt.iter().any(|e| e.as_ref() == id);
    let active = |check: &Check| check.level <= level && !exempt(check.id);
    CHECKS
        .iter()
        .filter(|check| active(check) && !CHECKS.iter().any(|o| o.overrides == Some(check.id) && active(o)))
        .filter_map(|check| (check.run)(&pod).map(|reason| Violation { check: check.id, reason }))
        .collect()
}

/// The API server's refusal of a pod that fails `violations` at `level` (of the policy
/// `version` the namespace names: `latest`, `v1.30`), word for word.
pub fn forbidden_message(pod_name: &str, level: Level, version: &str, violations: &[Violation]) -> String {
    format!(
        "pods {pod_name:?} is forbidden: violates PodSecurity \"{}:{version}\": {}",
        level.as_str(),
        reasons(violations)
    )
}

/// The violations' reasons as the API server lists them in a refusal or a warning.
pub fn reasons(violations: &[Violation]) -> String {
    violations.iter().map(|v| v.reason.as_str()).collect::<Vec<_>>().join(", ")
}

fn host_namespaces(pod: &Pod<'_>) -> Option<String> {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|f| pod.spec.get(*f) == Some(&Value::Bool(true)))
        .map(|f| format!("{f}=true"))
        .collect();
    if set.is_empty() { None } else { Some(format!("host namespaces ({})", set.join(", "))) }
}

fn privileged(pod: &Pod<'_>) -> Option<String> {
    let names = pod.containers_where(|c| context(c, "privileged") == Some(&Value::Bool(true)));
    let detail = (!names.is_empty())
        .then(|| format!("{} must not set securityContext.privileged=true", containers_named(&names)));
    failure("privileged", detail.into_iter().collect())
}

/// What baseline lets a container add (containerd's and CRI-O's defaults).
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The containers that add a capability outside `allowed`, and those capabilities.
fn added_beyond(pod: &Pod<'_>, allowed: &[&str]) -> Option<String> {
    let mut names = Vec::new();
    let mut capabilities = Vec::new();
    for container in pod.containers() {
        let added = context(container, "capabilities").and_then(|c| c.get("add"));
        let mut bad = false;
        for capability in strings(added).filter(|c| !allowed.contains(c)) {
            bad = true;
            push_unique(&mut capabilities, capability);
        }
        if bad {
            names.push(name(container));
        }
    }
    (!names.is_empty()).then(|| {
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&names),
            join_quote(&capabilities)
        )
    })
}

fn capabilities_baseline(pod: &Pod<'_>) -> Option<String> {
    failure("non-default capabilities", added_beyond(pod, BASELINE_CAPABILITIES).into_iter().collect())
}

fn capabilities_restricted(pod: &Pod<'_>) -> Option<String> {
    let no_drop_all =
        pod.containers_where(|c| !strings(context(c, "capabilities").and_then(|c| c.get("drop"))).any(|d| d == "ALL"));
    let mut details = Vec::new();
    if !no_drop_all.is_empty() {
        details
            .push(format!("{} must set securityContext.capabilities.drop=[\"ALL\"]", containers_named(&no_drop_all)));
    }
    details.extend(added_beyond(pod, &["NET_BIND_SERVICE"]));
    failure("unrestricted capabilities", details)
}

fn host_path_volumes(pod: &Pod<'_>) -> Option<String> {
    let names: Vec<String> =
        volumes(pod).filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null())).map(name).collect();
    (!names.is_empty())
        .then(|| format!("hostPath volumes ({} {})", pluralize("volume", "volumes", names.len()), join_quote(&names)))
}

fn volumes<'a>(pod: &Pod<'a>) -> impl Iterator<Item = &'a Value> {
    pod.spec.get("volumes").and_then(Value::as_array).into_iter().flatten()
}

fn host_ports(pod: &Pod<'_>) -> Option<String> {
    let mut names = Vec::new();
    let mut ports = Vec::new();
    for container in pod.containers() {
        let used: Vec<String> = container
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("hostPort").and_then(Value::as_i64))
            .filter(|p| *p != 0)
            .map(|p| p.to_string())
            .collect();
        if !used.is_empty() {
            names.push(name(container));
            ports.extend(used);
        }
    }
    (!names.is_empty()).then(|| {
        format!(
            "hostPort ({} {} {} {})",
            containers_named(&names),
            pluralize("uses", "use", names.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        )
    })
}

fn app_armor_profile(pod: &Pod<'_>) -> Option<String> {
    let allowed_type = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let mut bad = Vec::new();
    for (key, value) in pod.annotations.into_iter().flatten() {
        let value = value.as_str().unwrap_or_default();
        if key.starts_with("container.apparmor.security.beta.kubernetes.io/")
            && !(value.is_empty() || value == "runtime/default" || value.starts_with("localhost/"))
        {
            bad.push(format!("{key}={value:?}"));
        }
    }
    let field = "securityContext.appArmorProfile.type";
    if let Some(t) = pod.pod_context("appArmorProfile").and_then(|p| p.get("type")).and_then(Value::as_str)
        && !allowed_type(t)
    {
        bad.push(format!("pod must not set {field} to {t:?}"));
    }
    for container in pod.containers() {
        if let Some(t) = context(container, "appArmorProfile").and_then(|p| p.get("type")).and_then(Value::as_str)
            && !allowed_type(t)
        {
            bad.push(format!("container {:?} must not set {field} to {t:?}", name(container)));
        }
    }
    (!bad.is_empty()).then(|| {
        format!(
            "{} ({})",
            pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", bad.len()),
            bad.join(", ")
        )
    })
}

fn se_linux_options(pod: &Pod<'_>) -> Option<String> {
    const TYPES: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"];
    let mut types = Vec::new();
    let mut users = Vec::new();
    let mut roles = Vec::new();
    let mut bad = |options: Option<&Value>| {
        let text = |k: &str| options.and_then(|o| o.get(k)).and_then(Value::as_str).unwrap_or_default();
        let mut found = false;
        if !TYPES.contains(&text("type")) {
            push_unique(&mut types, text("type"));
            found = true;
        }
        for (field, list) in [("user", &mut users), ("role", &mut roles)] {
            if !text(field).is_empty() {
                push_unique(list, text(field));
                found = true;
            }
        }
        found
    };
    let pod_bad = bad(pod.pod_context("seLinuxOptions"));
    let names = pod.containers_where(|c| bad(context(c, "seLinuxOptions")));
    if !pod_bad && names.is_empty() {
        return None;
    }
    let subject = match (pod_bad, names.is_empty()) {
        (true, true) => "pod".to_string(),
        (true, false) => format!("pod and {}", containers_named(&names)),
        _ => containers_named(&names),
    };
    let mut parts = Vec::new();
    for (what, list) in [("type", &types), ("user", &users), ("role", &roles)] {
        if !list.is_empty() {
            parts.push(format!("{what} {}", join_quote(list)));
        }
    }
    Some(format!("seLinuxOptions ({subject} set forbidden securityContext.seLinuxOptions: {})", parts.join("; ")))
}

fn proc_mount(pod: &Pod<'_>) -> Option<String> {
    let mut values = Vec::new();
    let names = pod.containers_where(|c| match context(c, "procMount").and_then(Value::as_str) {
        None | Some("Default") => false,
        Some(other) => {
            values.push(other.to_string());
            true
        }
    });
    let detail = (!names.is_empty()).then(|| {
        format!("{} must not set securityContext.procMount to {}", containers_named(&names), join_quote(&values))
    });
    failure("procMount", detail.into_iter().collect())
}

fn seccomp_type(context: Option<&Value>) -> Option<&str> {
    context.and_then(|s| s.get("type")).and_then(Value::as_str)
}

fn seccomp_baseline(pod: &Pod<'_>) -> Option<String> {
    seccomp(pod, false)
}

fn seccomp_restricted(pod: &Pod<'_>) -> Option<String> {
    seccomp(pod, true)
}

/// Baseline forbids `Unconfined`; restricted also requires `RuntimeDefault` or `Localhost` on
/// the pod or on every container.
fn seccomp(pod: &Pod<'_>, restricted: bool) -> Option<String> {
    let forbidden = |t: &str| if restricted { !matches!(t, "RuntimeDefault" | "Localhost") } else { t == "Unconfined" };
    let field = "securityContext.seccompProfile.type";
    let mut details = Vec::new();
    let pod_type = seccomp_type(pod.pod_context("seccompProfile"));
    if let Some(t) = pod_type.filter(|t| forbidden(t)) {
        details.push(format!("pod must not set {field} to {t:?}"));
    }
    let mut bad_types = Vec::new();
    let bad = pod.containers_where(|c| match seccomp_type(context(c, "seccompProfile")) {
        Some(t) if forbidden(t) => {
            push_unique(&mut bad_types, t);
            true
        }
        _ => false,
    });
    if !bad.is_empty() {
        details.push(format!("{} must not set {field} to {}", containers_named(&bad), join_quote(&bad_types)));
    }
    if restricted && pod_type.is_none() {
        let unset = pod.containers_where(|c| seccomp_type(context(c, "seccompProfile")).is_none());
        if !unset.is_empty() {
            details.push(format!(
                "pod or {} must set {field} to \"RuntimeDefault\" or \"Localhost\"",
                containers_named(&unset)
            ));
        }
    }
    failure("seccompProfile", details)
}

/// Sysctls baseline allows: namespaced ones that cannot touch another pod.
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ping_group_range",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_wmem",
];

fn sysctls(pod: &Pod<'_>) -> Option<String> {
    let bad: Vec<&str> = pod
        .pod_context("sysctls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .filter(|n| !SAFE_SYSCTLS.contains(n))
        .collect();
    (!bad.is_empty()).then(|| format!("forbidden sysctls ({})", bad.join(", ")))
}

fn windows_host_process(pod: &Pod<'_>) -> Option<String> {
    let host_process = |options: Option<&Value>| options.and_then(|o| o.get("hostProcess")) == Some(&Value::Bool(true));
    let pod_set = host_process(pod.pod_context("windowsOptions"));
    let names = pod.containers_where(|c| host_process(context(c, "windowsOptions")));
    let subject = match (pod_set, names.is_empty()) {
        (false, true) => return None,
        (true, true) => "pod".to_string(),
        (true, false) => format!("pod and {}", containers_named(&names)),
        (false, false) => containers_named(&names),
    };
    Some(format!("hostProcess ({subject} must not set securityContext.windowsOptions.hostProcess=true)"))
}

/// Volume types restricted allows; any other (hostPath, nfs, iscsi, ...) is refused.
const RESTRICTED_VOLUME_TYPES: &[&str] =
    &["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];

fn restricted_volumes(pod: &Pod<'_>) -> Option<String> {
    let mut names = Vec::new();
    let mut types = Vec::new();
    for volume in volumes(pod) {
        let mut bad = false;
        for (kind, source) in volume.as_object().into_iter().flatten() {
            if kind != "name" && !source.is_null() && !RESTRICTED_VOLUME_TYPES.contains(&kind.as_str()) {
                push_unique(&mut types, kind);
                bad = true;
            }
        }
        if bad {
            names.push(name(volume));
        }
    }
    (!names.is_empty()).then(|| {
        format!(
            "restricted volume types ({} {} {} {} {})",
            pluralize("volume", "volumes", names.len()),
            join_quote(&names),
            pluralize("uses", "use", names.len()),
            pluralize("restricted volume type", "restricted volume types", types.len()),
            join_quote(&types)
        )
    })
}

fn allow_privilege_escalation(pod: &Pod<'_>) -> Option<String> {
    let names = pod.containers_where(|c| context(c, "allowPrivilegeEscalation") != Some(&Value::Bool(false)));
    let detail = (!names.is_empty())
        .then(|| format!("{} must set securityContext.allowPrivilegeEscalation=false", containers_named(&names)));
    failure("allowPrivilegeEscalation != false", detail.into_iter().collect())
}

fn run_as_non_root(pod: &Pod<'_>) -> Option<String> {
    let pod_value = pod.pod_context("runAsNonRoot");
    let mut details = Vec::new();
    let explicit_false = pod.containers_where(|c| context(c, "runAsNonRoot") == Some(&Value::Bool(false)));
    if let Some(setters) = setters(pod_value == Some(&Value::Bool(false)), &explicit_false) {
        details.push(format!("{setters} must not set securityContext.runAsNonRoot=false"));
    }
    if pod_value != Some(&Value::Bool(true)) {
        let unset = pod.containers_where(|c| context(c, "runAsNonRoot").is_none());
        if !unset.is_empty() {
            details.push(format!("pod or {} must set securityContext.runAsNonRoot=true", containers_named(&unset)));
        }
    }
    failure("runAsNonRoot != true", details)
}

fn run_as_user(pod: &Pod<'_>) -> Option<String> {
    let root = |v: Option<&Value>| v.and_then(Value::as_i64) == Some(0);
    let names = pod.containers_where(|c| root(context(c, "runAsUser")));
    let detail = setters(root(pod.pod_context("runAsUser")), &names).map(|s| format!("{s} must not set runAsUser=0"));
    failure("runAsUser=0", detail.into_iter().collect())
}

/// Who set a forbidden value: `pod`, `container "a"`, or `pod and container "a"`, as upstream
/// joins its `badSetters`.
fn setters(pod_set: bool, containers: &[String]) -> Option<String> {
    let mut who = Vec::new();
    if pod_set {
        who.push("pod".to_string());
    }
    if !containers.is_empty() {
        who.push(containers_named(containers));
    }
    (!who.is_empty()).then(|| who.join(" and "))
}

#[cfg(test)]
mod tests;
