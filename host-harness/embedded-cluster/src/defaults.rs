//! What kube-apiserver adds to objects, so that clients read back what a real cluster returns.
//!
//! Three layers, matching where the real server does the work:
//! - scheme defaults (`SetDefaults_*` and v1 conversion), which run on every decoded body,
//!   create and update alike: [`apply_scheme_defaults`];
//! - create-time work of registry strategies, admission plugins and allocators (status reset,
//!   Job selector generation, Service cluster IP, default tolerations, priority):
//!   [`apply_create_defaults`];
//! - update-time carry-over of what those produced (allocated IPs, admission fields, status,
//!   which a plain PUT cannot change): [`apply_update_defaults`].

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::json::{
    arr_at, arr_mut, bool_at, default_field, ensure_obj, ensure_obj_value, int_at, nonempty_str_at, obj_at, present,
    str_at,
};
use crate::quantity;
use base64::Engine;

/// Legacy label the Job controller selects on (`controller-uid`).
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// Label the Job controller selects on (`batch.kubernetes.io/controller-uid`).
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// Legacy label carrying the Job name on its pods (`job-name`).
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// Label carrying the Job name on its pods (`batch.kubernetes.io/job-name`).
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// Label every namespace carries with its own name, so selectors can pick namespaces by name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

const TOLERATED_TAINTS: [&str; 2] = ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"];

/// Applies the scheme defaults the apiserver applies to every decoded body (create and update),
/// without allocation, admission or status side effects. Idempotent.
pub fn apply_scheme_defaults(kind: &str, obj: &mut Value) {
    match kind {
        "Pod" => {
            if let Some(spec) = ensure_obj_value(obj, "spec") {
                default_pod_only(spec);
                default_pod_spec(spec);
            }
        }
        "Job" => {
            default_job(obj);
        }
        "Service" => default_service(obj),
        "Secret" => default_secret(obj),
        "Namespace" => default_namespace(obj),
        "RoleBinding" | "ClusterRoleBinding" => crate::rbac::defaults::binding(obj),
        "PersistentVolumeClaim" => {
            if let Some(spec) = ensure_obj_value(obj, "spec") {
                default_field(spec, "volumeMode", json!("Filesystem"));
            }
            if let Some(status) = ensure_obj_value(obj, "status") {
                default_field(status, "phase", json!("Pending"));
            }
        }
        "Node" => {
            if let Some(status) = obj.get_mut("status").filter(|s| s.is_object())
                && !present(status, "allocatable")
                && let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned()
                && let Some(map) = status.as_object_mut()
            {
                map.insert("allocatable".into(), capacity);
            }
        }
        _ => {}
    }
}

/// Applies server defaults for a kind on create. `uid` is the new object's uid (needed for Job selectors); `alloc_cluster_ip` supplies a Service IP.
///
/// Includes the scheme defaults, then what registry strategies and admission plugins add on
/// create (status reset, Job selector and pod-template labels, Service IP families, default
/// tolerations, priority, service account). Metadata (uid, resourceVersion, timestamps,
/// generation) stays the server's job.
pub fn apply_create_defaults(kind: &str, obj: &mut Value, uid: &str, alloc_cluster_ip: &mut dyn FnMut() -> String) {
    match kind {
        "Pod" => {
            apply_scheme_defaults(kind, obj);
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                default_service_account(spec, None);
                default_priority(spec, None);
                default_tolerations(spec);
            }
            let qos = obj.get("spec").map_or("BestEffort", pod_qos_class);
            set_field(obj, "status", json!({"phase": "Pending", "qosClass": qos}));
        }
        "Job" => {
            let aliased = default_job(obj);
            let manual = obj.get("spec").and_then(|s| bool_at(s, "manualSelector")).unwrap_or(false);
            if !manual {
                generate_job_selector(obj, uid);
            }
            if aliased {
                let template_labels = obj.pointer("/spec/template/metadata/labels").filter(|l| l.is_object()).cloned();
                if let (Some(labels), Some(meta)) = (template_labels, ensure_obj(obj, "metadata")) {
                    meta.insert("labels".into(), labels);
                }
            }
            set_field(obj, "status", json!({}));
        }
        "Service" => {
            apply_scheme_defaults(kind, obj);
            allocate_service_ips(obj, alloc_cluster_ip);
            set_field(obj, "status", json!({"loadBalancer": {}}));
        }
        "Namespace" => {
            apply_scheme_defaults(kind, obj);
            if let Some(spec) = ensure_obj_value(obj, "spec")
                && let Some(map) = spec.as_object_mut()
            {
                let finalizers = map.entry("finalizers").or_insert(json!([]));
                if !finalizers.is_array() {
                    *finalizers = json!([]);
                }
                if let Some(list) = finalizers.as_array_mut()
                    && !list.iter().any(|f| f.as_str() == Some("kubernetes"))
                {
                    list.push(json!("kubernetes"));
                }
            }
            set_field(obj, "status", json!({"phase": "Active"}));
        }
        "PersistentVolumeClaim" => {
            set_field(obj, "status", json!({}));
            apply_scheme_defaults(kind, obj);
        }
        _ => apply_scheme_defaults(kind, obj),
    }
}

/// Applies what the server adds to an update body: scheme defaults, plus what was allocated or
/// admitted at create time and that a PUT body may omit (Service IPs and node ports, Pod priority,
/// service account and default tolerations), plus status, which only the status subresource
/// changes. Call before `validate_update` so that clients that replace objects without those
/// fields see the real server's behaviour.
pub fn apply_update_defaults(kind: &str, obj: &mut Value, old: &Value) {
    apply_scheme_defaults(kind, obj);
    match kind {
        "Pod" => {
            let old_spec = old.get("spec");
            if let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) {
                default_service_account(spec, old_spec);
                default_priority(spec, old_spec);
                default_tolerations(spec);
            }
        }
        "Service" => carry_over_service_allocations(obj, old),
        "Namespace" => {
            let old_finalizers = old.pointer("/spec/finalizers").cloned();
            if let Some(spec) = ensure_obj(obj, "spec") {
                match old_finalizers {
                    Some(f) => spec.insert("finalizers".into(), f),
                    None => spec.remove("finalizers"),
                };
            }
        }
        _ => {}
    }
    if matches!(kind, "Pod" | "Job" | "Service" | "Namespace" | "Node" | "PersistentVolumeClaim") {
        match old.get("status") {
            Some(status) => set_field(obj, "status", status.clone()),
            None => {
                if let Some(map) = obj.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
}

/// The QoS class the kubelet and scheduler derive from a pod spec (`qos.GetPodQOS`): only cpu and
/// memory count, across containers and init containers.
pub fn pod_qos_class(spec: &Value) -> &'static str {
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    for container in arr_at(spec, "containers").iter().chain(arr_at(spec, "initContainers")) {
        let resources = container.get("resources");
        for (name, q) in resources.and_then(|r| obj_at(r, "requests")).into_iter().flatten() {
            if let Some(n) = qos_quantity(name, q) {
                *requests.entry(name.as_str()).or_insert(0) += n;
            }
        }
        let mut found = (false, false);
        for (name, q) in resources.and_then(|r| obj_at(r, "limits")).into_iter().flatten() {
            if let Some(n) = qos_quantity(name, q) {
                *limits.entry(name.as_str()).or_insert(0) += n;
                found = (found.0 || name == "cpu", found.1 || name == "memory");
            }
        }
        if found != (true, true) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && requests.len() == limits.len() && requests.iter().all(|(name, req)| limits.get(name) == Some(req))
    {
        return "Guaranteed";
    }
    "Burstable"
}

/// A positive cpu or memory quantity in nano-units; other resources do not affect QoS.
fn qos_quantity(name: &str, q: &Value) -> Option<i128> {
    if name != "cpu" && name != "memory" {
        return None;
    }
    quantity::value_nanos(q).filter(|n| *n > 0)
}

fn set_field(obj: &mut Value, key: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

/// Sets an integer field when absent, null or 0 (Go's zero value for non-pointer ints).
fn default_nonzero_int(v: &mut Value, key: &str, value: i64) {
    let zero = match v.get(key) {
        None | Some(Value::Null) => true,
        Some(x) => x.as_i64() == Some(0),
    };
    if zero && let Some(map) = v.as_object_mut() {
        map.insert(key.to_string(), json!(value));
    }
}

/// `SetDefaults_Pod`: what only Pods (not pod templates) get.
fn default_pod_only(spec: &mut Value) {
    for list in ["containers", "initContainers"] {
        for container in arr_mut(spec, list).into_iter().flatten() {
            let Some(resources) = container.get_mut("resources").filter(|r| r.is_object()) else { continue };
            let Some(limits) = obj_at(resources, "limits").cloned() else { continue };
            if let Some(requests) = ensure_obj(resources, "requests") {
                for (name, q) in limits {
                    requests.entry(name).or_insert(q);
                }
            }
        }
    }
    if !present(spec, "enableServiceLinks") {
        set_field(spec, "enableServiceLinks", json!(true));
    }
    if bool_at(spec, "hostNetwork") == Some(true) {
        for list in ["containers", "initContainers"] {
            for container in arr_mut(spec, list).into_iter().flatten() {
                for port in arr_mut(container, "ports").into_iter().flatten() {
                    if let Some(cp) = int_at(port, "containerPort") {
                        default_nonzero_int(port, "hostPort", cp);
                    }
                }
            }
        }
    }
}

/// `SetDefaults_PodSpec` and the defaults of what a pod spec holds; shared by Pods and templates.
fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default_field(spec, "dnsPolicy", json!("ClusterFirst"));
    default_field(spec, "restartPolicy", json!("Always"));
    default_field(spec, "securityContext", json!({}));
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for container in arr_mut(spec, list).into_iter().flatten() {
            default_container(container);
        }
    }
    for volume in arr_mut(spec, "volumes").into_iter().flatten() {
        default_volume(volume);
    }
}

/// `SetDefaults_Container` plus its ports, env and probes.
fn default_container(c: &mut Value) {
    if !c.is_object() {
        return;
    }
    let policy = if image_tag_is_latest(str_at(c, "image").unwrap_or("")) { "Always" } else { "IfNotPresent" };
    default_field(c, "imagePullPolicy", json!(policy));
    default_field(c, "terminationMessagePath", json!("/dev/termination-log"));
    default_field(c, "terminationMessagePolicy", json!("File"));
    default_field(c, "resources", json!({}));
    for port in arr_mut(c, "ports").into_iter().flatten() {
        if port.is_object() {
            default_field(port, "protocol", json!("TCP"));
        }
    }
    for env in arr_mut(c, "env").into_iter().flatten() {
        if let Some(field_ref) = env.get_mut("valueFrom").and_then(|v| v.get_mut("fieldRef")).filter(|f| f.is_object())
        {
            default_field(field_ref, "apiVersion", json!("v1"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) else { continue };
        default_nonzero_int(p, "timeoutSeconds", 1);
        default_nonzero_int(p, "periodSeconds", 10);
        default_nonzero_int(p, "successThreshold", 1);
        default_nonzero_int(p, "failureThreshold", 3);
        if let Some(get) = p.get_mut("httpGet").filter(|g| g.is_object()) {
            default_field(get, "path", json!("/"));
            default_field(get, "scheme", json!("HTTP"));
        }
    }
}

/// `parsers.ParseImageName` reduced to the question `SetDefaults_Container` asks: is the tag
/// `latest` (explicitly, or implied by having neither tag nor digest)?
fn image_tag_is_latest(image: &str) -> bool {
    if image.is_empty() {
        return false;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => tag == "latest",
        None => digest.is_none(),
    }
}

/// `SetDefaults_Volume` and the file-mode defaults of projected sources.
fn default_volume(v: &mut Value) {
    let Some(map) = v.as_object_mut() else { return };
    if !map.iter().any(|(k, val)| k != "name" && !val.is_null()) {
        map.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(src) = map.get_mut(source).filter(|s| s.is_object())
            && !present(src, "defaultMode")
        {
            set_field(src, "defaultMode", json!(420));
        }
    }
    if let Some(host_path) = map.get_mut("hostPath").filter(|h| h.is_object())
        && !present(host_path, "type")
    {
        set_field(host_path, "type", json!(""));
    }
}

/// Admission `ServiceAccount`: pods run as `default` unless they say otherwise; the deprecated
/// `serviceAccount` mirrors it in v1 output. On update, what the pod had is kept.
fn default_service_account(spec: &mut Value, old_spec: Option<&Value>) {
    let name = nonempty_str_at(spec, "serviceAccountName")
        .or_else(|| old_spec.and_then(|o| nonempty_str_at(o, "serviceAccountName")))
        .unwrap_or("default")
        .to_string();
    default_field(spec, "serviceAccountName", json!(name));
    default_field(spec, "serviceAccount", json!(name));
}

/// Admission `Priority`: the priority value of the pod's class (0 without one) and its preemption
/// policy; on update the values set at create are kept.
fn default_priority(spec: &mut Value, old_spec: Option<&Value>) {
    if let Some(old) = old_spec {
        for key in ["priority", "preemptionPolicy"] {
            if !present(spec, key)
                && let Some(v) = old.get(key).filter(|v| !v.is_null())
            {
                set_field(spec, key, v.clone());
            }
        }
        return;
    }
    let priority = match nonempty_str_at(spec, "priorityClassName") {
        None => Some(0),
        Some("system-node-critical") => Some(2_000_001_000),
        Some("system-cluster-critical") => Some(2_000_000_000),
        Some(_) => None,
    };
    if let Some(p) = priority {
        if !present(spec, "priority") {
            set_field(spec, "priority", json!(p));
        }
        default_field(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
}

/// Admission `DefaultTolerationSeconds`: tolerate not-ready/unreachable nodes for 300s unless
/// the pod already tolerates those taints.
fn default_tolerations(spec: &mut Value) {
    let tolerates = |taint: &str| {
        arr_at(spec, "tolerations").iter().any(|t| {
            let key = str_at(t, "key").unwrap_or("");
            let effect = str_at(t, "effect").unwrap_or("");
            (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        })
    };
    let missing: Vec<&str> = TOLERATED_TAINTS.into_iter().filter(|t| !tolerates(t)).collect();
    if missing.is_empty() {
        return;
    }
    let Some(map) = spec.as_object_mut() else { return };
    let list = map.entry("tolerations").or_insert(json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    if let Some(items) = list.as_array_mut() {
        for key in missing {
            items.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

/// `SetDefaults_Job` plus the template's pod spec defaults. Returns whether the Job's labels
/// were taken from the template: Go shares that map, so labels generated later show on both.
fn default_job(obj: &mut Value) -> bool {
    let Some(spec) = ensure_obj_value(obj, "spec") else { return false };
    let has_completions = present(spec, "completions");
    if !has_completions && !present(spec, "parallelism") {
        set_field(spec, "completions", json!(1));
    }
    if !present(spec, "parallelism") {
        set_field(spec, "parallelism", json!(1));
    }
    if !present(spec, "backoffLimit") {
        let limit = if present(spec, "backoffLimitPerIndex") { i64::from(i32::MAX) } else { 6 };
        set_field(spec, "backoffLimit", json!(limit));
    }
    default_field(spec, "completionMode", json!("NonIndexed"));
    if !present(spec, "suspend") {
        set_field(spec, "suspend", json!(false));
    }
    let has_failure_policy = present(spec, "podFailurePolicy");
    for rule in spec.pointer_mut("/podFailurePolicy/rules").and_then(Value::as_array_mut).into_iter().flatten() {
        for pattern in arr_mut(rule, "onPodConditions").into_iter().flatten() {
            if pattern.is_object() {
                default_field(pattern, "status", json!("True"));
            }
        }
    }
    let replacement = if has_failure_policy { "Failed" } else { "TerminatingOrFailed" };
    default_field(spec, "podReplacementPolicy", json!(replacement));
    if let Some(template) = ensure_obj_value(spec, "template")
        && let Some(pod_spec) = ensure_obj_value(template, "spec")
    {
        default_pod_spec(pod_spec);
    }
    let template_labels = obj.pointer("/spec/template/metadata/labels").filter(|l| l.is_object()).cloned();
    let job_labels_empty = obj.pointer("/metadata/labels").and_then(Value::as_object).is_none_or(Map::is_empty);
    match template_labels {
        Some(labels) if job_labels_empty => {
            if let Some(meta) = ensure_obj(obj, "metadata") {
                meta.insert("labels".into(), labels);
            }
            true
        }
        _ => false,
    }
}

/// The Job strategy's `generateSelector`: pods get the job's name and uid as labels, and the
/// selector picks the uid label, so that no two Jobs ever select the same pods.
fn generate_job_selector(obj: &mut Value, uid: &str) {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else { return };
    if let Some(template) = ensure_obj_value(spec, "template")
        && let Some(meta) = ensure_obj_value(template, "metadata")
        && let Some(labels) = ensure_obj(meta, "labels")
    {
        for key in [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
            labels.entry(key).or_insert_with(|| json!(uid));
        }
    }
    if let Some(selector) = ensure_obj_value(spec, "selector")
        && let Some(match_labels) = ensure_obj(selector, "matchLabels")
    {
        match_labels.entry(CONTROLLER_UID_LABEL).or_insert_with(|| json!(uid));
    }
}

/// `SetDefaults_Service`, plus the strategy's mirroring of `clusterIP` into `clusterIPs`.
fn default_service(obj: &mut Value) {
    let Some(spec) = ensure_obj_value(obj, "spec") else { return };
    default_field(spec, "sessionAffinity", json!("None"));
    match str_at(spec, "sessionAffinity") {
        Some("None") => {
            if let Some(map) = spec.as_object_mut() {
                map.remove("sessionAffinityConfig");
            }
        }
        Some("ClientIP")
            if spec.pointer("/sessionAffinityConfig/clientIP/timeoutSeconds").is_none_or(Value::is_null) =>
        {
            set_field(spec, "sessionAffinityConfig", json!({"clientIP": {"timeoutSeconds": 10800}}));
        }
        _ => {}
    }
    default_field(spec, "type", json!("ClusterIP"));
    for port in arr_mut(spec, "ports").into_iter().flatten() {
        if !port.is_object() {
            continue;
        }
        default_field(port, "protocol", json!("TCP"));
        let target_unset = match port.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            Some(_) => false,
        };
        if target_unset && let Some(p) = port.get("port").cloned() {
            set_field(port, "targetPort", p);
        }
    }
    let service_type = str_at(spec, "type").unwrap_or("").to_string();
    let externally_accessible = service_type == "LoadBalancer"
        || service_type == "NodePort"
        || (service_type == "ClusterIP" && !arr_at(spec, "externalIPs").is_empty());
    if externally_accessible {
        default_field(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(service_type.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        default_field(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if service_type == "LoadBalancer" && !present(spec, "allocateLoadBalancerNodePorts") {
        set_field(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    mirror_cluster_ip(spec);
}

fn mirror_cluster_ip(spec: &mut Value) {
    if arr_at(spec, "clusterIPs").is_empty()
        && let Some(ip) = nonempty_str_at(spec, "clusterIP").map(str::to_string)
    {
        set_field(spec, "clusterIPs", json!([ip]));
    }
}

/// The Service REST allocator: a cluster IP (unless headless or ExternalName) and single-stack
/// IP family fields, as on a single-stack IPv4 cluster.
fn allocate_service_ips(obj: &mut Value, alloc_cluster_ip: &mut dyn FnMut() -> String) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else { return };
    if str_at(spec, "type") == Some("ExternalName") {
        return;
    }
    if nonempty_str_at(spec, "clusterIP").is_none() {
        let requested = arr_at(spec, "clusterIPs").first().and_then(Value::as_str).filter(|s| !s.is_empty());
        let ip = match requested {
            Some(ip) => ip.to_string(),
            None => alloc_cluster_ip(),
        };
        set_field(spec, "clusterIP", json!(ip));
    }
    if let Some(ip) = nonempty_str_at(spec, "clusterIP").map(str::to_string) {
        set_field(spec, "clusterIPs", json!([ip]));
    }
    if arr_at(spec, "ipFamilies").is_empty() {
        let family = match nonempty_str_at(spec, "clusterIP").map(str::parse::<std::net::IpAddr>) {
            Some(Ok(std::net::IpAddr::V6(_))) => "IPv6",
            _ => "IPv4",
        };
        set_field(spec, "ipFamilies", json!([family]));
    }
    default_field(spec, "ipFamilyPolicy", json!("SingleStack"));
}

/// The Service REST update path (`patchAllocatedValues`): a PUT that omits allocated values
/// keeps them, as long as the service still needs them.
fn carry_over_service_allocations(obj: &mut Value, old: &Value) {
    let Some(old_spec) = old.get("spec") else { return };
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else { return };
    let old_type = str_at(old_spec, "type").unwrap_or("ClusterIP");
    let new_type = str_at(spec, "type").unwrap_or("ClusterIP").to_string();
    if old_type != "ExternalName" && new_type != "ExternalName" {
        if nonempty_str_at(spec, "clusterIP").is_none()
            && let Some(ip) = old_spec.get("clusterIP").filter(|v| !v.is_null())
        {
            set_field(spec, "clusterIP", ip.clone());
        }
        for key in ["clusterIPs", "ipFamilies"] {
            if arr_at(spec, key).is_empty()
                && let Some(v) = old_spec.get(key).filter(|v| !v.is_null())
            {
                set_field(spec, key, v.clone());
            }
        }
        if !present(spec, "ipFamilyPolicy")
            && let Some(v) = old_spec.get("ipFamilyPolicy").filter(|v| !v.is_null())
        {
            set_field(spec, "ipFamilyPolicy", v.clone());
        }
    }
    let needs_node_ports = |t: &str| t == "NodePort" || t == "LoadBalancer";
    if needs_node_ports(old_type) && needs_node_ports(&new_type) {
        let old_ports = arr_at(old_spec, "ports");
        for port in arr_mut(spec, "ports").into_iter().flatten() {
            if int_at(port, "nodePort").unwrap_or(0) != 0 {
                continue;
            }
            let same = old_ports.iter().find(|o| {
                int_at(o, "port") == int_at(port, "port")
                    && str_at(o, "protocol").unwrap_or("TCP") == str_at(port, "protocol").unwrap_or("TCP")
            });
            if let Some(node_port) = same.and_then(|o| int_at(o, "nodePort")).filter(|p| *p != 0) {
                set_field(port, "nodePort", json!(node_port));
            }
        }
        if int_at(spec, "healthCheckNodePort").unwrap_or(0) == 0
            && let Some(p) = int_at(old_spec, "healthCheckNodePort").filter(|p| *p != 0)
        {
            set_field(spec, "healthCheckNodePort", json!(p));
        }
    }
    mirror_cluster_ip(spec);
}

/// `SetDefaults_Secret` and the v1 conversion that folds `stringData` into `data`.
fn default_secret(obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    default_field(obj, "type", json!("Opaque"));
    let string_data = match obj.get("stringData") {
        Some(Value::Object(m)) => m.clone(),
        Some(Value::Null) | None => return,
        Some(_) => return,
    };
    let Some(data) = ensure_obj(obj, "data") else { return };
    for (key, value) in string_data {
        if let Some(s) = value.as_str() {
            data.insert(key, json!(base64::engine::general_purpose::STANDARD.encode(s.as_bytes())));
        }
    }
    if let Some(map) = obj.as_object_mut() {
        map.remove("stringData");
    }
}

/// `SetDefaults_Namespace`: the name label, kept in step with the name.
fn default_namespace(obj: &mut Value) {
    let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
        return;
    };
    let name = name.to_string();
    if let Some(meta) = ensure_obj_value(obj, "metadata")
        && let Some(labels) = ensure_obj(meta, "labels")
    {
        labels.insert(NAMESPACE_NAME_LABEL.into(), json!(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(kind: &str, mut obj: Value) -> Value {
        let mut next = 0;
        let mut alloc = || {
            next += 1;
            format!("10.96.0.{}", 9 + next)
        };
        apply_create_defaults(kind, &mut obj, "uid-1", &mut alloc);
        obj
    }

    #[test]
    fn pod_gets_spec_container_and_admission_defaults() {
        let pod = create(
            "Pod",
            json!({
                "metadata": {"name": "p"},
                "spec": {"containers": [
                    {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]},
                    {"name": "b", "image": "nginx:1.27"},
                    {"name": "c", "image": "registry:5000/x@sha256:abc"},
                    {"name": "d", "image": "repo/x:latest"}
                ]}
            }),
        );
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["securityContext"], json!({}));
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        let a = &spec["containers"][0];
        assert_eq!(a["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(a["terminationMessagePolicy"], "File");
        assert_eq!(a["imagePullPolicy"], "Always");
        assert_eq!(a["resources"], json!({}));
        assert_eq!(a["ports"][0]["protocol"], "TCP");
        assert_eq!(spec["containers"][1]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(spec["containers"][2]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(spec["containers"][3]["imagePullPolicy"], "Always");
        assert_eq!(
            spec["tolerations"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ])
        );
        assert_eq!(pod["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
    }

    #[test]
    fn pod_defaults_keep_user_values_and_are_idempotent() {
        let original = json!({
            "metadata": {"name": "p"},
            "spec": {
                "restartPolicy": "Never",
                "priorityClassName": "system-node-critical",
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "a", "image": "x", "imagePullPolicy": "Never"}]
            }
        });
        let once = create("Pod", original);
        assert_eq!(once["spec"]["restartPolicy"], "Never");
        assert_eq!(once["spec"]["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(once["spec"]["priority"], 2_000_001_000);
        assert_eq!(once["spec"]["tolerations"], json!([{"operator": "Exists"}]));
        let twice = create("Pod", once.clone());
        assert_eq!(once, twice);
    }

    #[test]
    fn pod_requests_default_to_limits_and_qos_follows() {
        let pod = create(
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "a", "image": "x", "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}
            ]}}),
        );
        assert_eq!(pod["spec"]["containers"][0]["resources"]["requests"], json!({"cpu": "500m", "memory": "128Mi"}));
        assert_eq!(pod["status"]["qosClass"], "Guaranteed");
    }

    #[test]
    fn qos_classes() {
        let spec = |resources: Value| json!({"containers": [{"name": "a", "resources": resources}]});
        assert_eq!(pod_qos_class(&spec(json!({}))), "BestEffort");
        assert_eq!(pod_qos_class(&spec(json!({"requests": {"cpu": "100m"}}))), "Burstable");
        assert_eq!(
            pod_qos_class(&spec(
                json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1024Mi"}})
            )),
            "Guaranteed"
        );
        assert_eq!(
            pod_qos_class(&spec(
                json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}})
            )),
            "Burstable"
        );
        assert_eq!(pod_qos_class(&spec(json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}))), "Burstable");
        assert_eq!(pod_qos_class(&spec(json!({"requests": {"nvidia.com/gpu": "1"}}))), "BestEffort");
    }

    #[test]
    fn host_network_pods_get_host_ports() {
        let pod = create(
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"hostNetwork": true, "containers": [
                {"name": "a", "image": "x", "ports": [{"containerPort": 8080}]}
            ]}}),
        );
        assert_eq!(pod["spec"]["containers"][0]["ports"][0]["hostPort"], 8080);
    }

    #[test]
    fn volumes_and_probes_get_defaults() {
        let pod = create(
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {
                "volumes": [{"name": "scratch"}, {"name": "s", "secret": {"secretName": "x"}}, {"name": "h", "hostPath": {"path": "/x"}}],
                "containers": [{"name": "a", "image": "x",
                    "readinessProbe": {"httpGet": {"port": 80}},
                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]
            }}),
        );
        let spec = &pod["spec"];
        assert_eq!(spec["volumes"][0], json!({"name": "scratch", "emptyDir": {}}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(spec["volumes"][2]["hostPath"]["type"], "");
        let probe = &spec["containers"][0]["readinessProbe"];
        assert_eq!(probe["timeoutSeconds"], 1);
        assert_eq!(probe["periodSeconds"], 10);
        assert_eq!(probe["successThreshold"], 1);
        assert_eq!(probe["failureThreshold"], 3);
        assert_eq!(probe["httpGet"]["path"], "/");
        assert_eq!(probe["httpGet"]["scheme"], "HTTP");
        assert_eq!(spec["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    }

    #[test]
    fn job_gets_selector_labels_and_template_defaults() {
        let job = create(
            "Job",
            json!({
                "metadata": {"name": "pi"},
                "spec": {"template": {"metadata": {"labels": {"app": "pi"}}, "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "pi", "image": "perl:5"}]
                }}}
            }),
        );
        let spec = &job["spec"];
        assert_eq!(spec["parallelism"], 1);
        assert_eq!(spec["completions"], 1);
        assert_eq!(spec["backoffLimit"], 6);
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        assert!(spec.get("manualSelector").is_none());
        assert_eq!(spec["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1"}}));
        let expected_labels = json!({
            "app": "pi",
            "batch.kubernetes.io/controller-uid": "uid-1",
            "batch.kubernetes.io/job-name": "pi",
            "controller-uid": "uid-1",
            "job-name": "pi"
        });
        assert_eq!(spec["template"]["metadata"]["labels"], expected_labels);
        assert_eq!(job["metadata"]["labels"], expected_labels);
        let pod_spec = &spec["template"]["spec"];
        assert_eq!(pod_spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod_spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod_spec["containers"][0]["terminationMessagePolicy"], "File");
        assert!(pod_spec.get("enableServiceLinks").is_none());
        assert!(pod_spec.get("tolerations").is_none());
        assert!(pod_spec.get("priority").is_none());
        assert_eq!(job["status"], json!({}));
    }

    #[test]
    fn job_without_template_labels_keeps_its_own_labels_empty() {
        let job = create(
            "Job",
            json!({"metadata": {"name": "j"}, "spec": {"parallelism": 3, "template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "x"}]}}}}),
        );
        assert!(job["metadata"].get("labels").is_none());
        assert!(job["spec"].get("completions").is_none());
        assert_eq!(job["spec"]["parallelism"], 3);
        assert_eq!(job["spec"]["template"]["metadata"]["labels"]["job-name"], "j");
    }

    #[test]
    fn manual_selector_jobs_get_no_generated_selector() {
        let job = create(
            "Job",
            json!({"metadata": {"name": "j", "labels": {"team": "a"}}, "spec": {"manualSelector": true,
                "selector": {"matchLabels": {"app": "x"}},
                "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}}}}),
        );
        assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"app": "x"}}));
        assert_eq!(job["spec"]["template"]["metadata"]["labels"], json!({"app": "x"}));
        assert_eq!(job["metadata"]["labels"], json!({"team": "a"}));
    }

    #[test]
    fn service_gets_ip_and_port_defaults() {
        let svc = create(
            "Service",
            json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}}),
        );
        let spec = &svc["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["clusterIP"], "10.96.0.10");
        assert_eq!(spec["clusterIPs"], json!(["10.96.0.10"]));
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        assert_eq!(spec["ports"][0], json!({"port": 80, "protocol": "TCP", "targetPort": 80}));
        assert!(spec.get("externalTrafficPolicy").is_none());
        assert_eq!(svc["status"], json!({"loadBalancer": {}}));
    }

    #[test]
    fn headless_external_name_and_load_balancer_services() {
        let headless = create(
            "Service",
            json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None", "ports": [{"port": 80, "targetPort": "http"}]}}),
        );
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        assert_eq!(headless["spec"]["ports"][0]["targetPort"], "http");
        let external = create(
            "Service",
            json!({"metadata": {"name": "e"}, "spec": {"type": "ExternalName", "externalName": "example.com"}}),
        );
        assert!(external["spec"].get("clusterIP").is_none());
        assert!(external["spec"].get("ipFamilies").is_none());
        assert!(external["spec"].get("internalTrafficPolicy").is_none());
        let lb = create(
            "Service",
            json!({"metadata": {"name": "l"}, "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 443}]}}),
        );
        assert_eq!(lb["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
        assert_eq!(lb["spec"]["sessionAffinityConfig"], json!({"clientIP": {"timeoutSeconds": 10800}}));
    }

    #[test]
    fn secret_string_data_is_folded_into_data() {
        let secret = create(
            "Secret",
            json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "hello", "a": "y"}}),
        );
        assert_eq!(secret["type"], "Opaque");
        assert_eq!(secret["data"], json!({"a": "eQ==", "b": "aGVsbG8="}));
        assert!(secret.get("stringData").is_none());
    }

    #[test]
    fn namespace_and_pvc_defaults() {
        let ns = create("Namespace", json!({"metadata": {"name": "team-a", "labels": {"x": "y"}}}));
        assert_eq!(ns["metadata"]["labels"], json!({"x": "y", "kubernetes.io/metadata.name": "team-a"}));
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        let pvc = create(
            "PersistentVolumeClaim",
            json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Bound"}}),
        );
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pvc["status"], json!({"phase": "Pending"}));
    }

    #[test]
    fn update_defaults_carry_over_allocations_and_status() {
        let old = create(
            "Service",
            json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
        );
        let mut old_with_port = old.clone();
        old_with_port["spec"]["ports"][0]["nodePort"] = json!(30080);
        let mut new = json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        apply_update_defaults("Service", &mut new, &old_with_port);
        assert_eq!(new["spec"]["clusterIP"], old["spec"]["clusterIP"]);
        assert_eq!(new["spec"]["clusterIPs"], old["spec"]["clusterIPs"]);
        assert_eq!(new["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30080);
        assert_eq!(new["status"], json!({"loadBalancer": {}}));

        let old_pod =
            create("Pod", json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "x"}]}}));
        let mut new_pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "y"}]}, "status": {"phase": "Running"}});
        apply_update_defaults("Pod", &mut new_pod, &old_pod);
        assert_eq!(new_pod["spec"]["tolerations"], old_pod["spec"]["tolerations"]);
        assert_eq!(new_pod["spec"]["priority"], 0);
        assert_eq!(new_pod["spec"]["serviceAccountName"], "default");
        assert_eq!(new_pod["status"], old_pod["status"]);
    }
}
