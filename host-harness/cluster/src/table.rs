//! Server-side printing: what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, a `meta.k8s.io` Table whose columns
//! and cells are those kube-apiserver prints (`pkg/printers/internalversion/printers.go` for
//! built-in kinds, a CRD's `additionalPrinterColumns` through apiextensions' table convertor,
//! and `rest.DefaultTableConvertor`'s Name / Created At for kinds without a printer), and
//! `as=PartialObjectMetadata(List)` for metadata-only clients.
//!
//! Each row carries the object as `includeObject` asks: `Metadata` (the default, a
//! PartialObjectMetadata), `Object`, or `None`.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::status::ApiError;

/// What the client asked the server to send instead of the object itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    /// The object (or list) as stored.
    Object,
    /// A `meta.k8s.io` Table of this version (`v1` or `v1beta1`).
    Table(&'static str),
    /// `PartialObjectMetadata` (or its list) of this version.
    Metadata(&'static str),
}

impl Rendering {
    /// Picks the first media range of an `Accept` header the server can satisfy, in the
    /// client's order, as the real content negotiation does; plain JSON when none asks for a
    /// transformation.
    pub fn from_accept(accept: &str) -> Self {
        for range in accept.split(',') {
            let mut params = range.split(';').map(str::trim);
            let media = params.next().unwrap_or_default();
            if !matches!(media, "application/json" | "*/*" | "application/*") {
                continue;
            }
            let (mut as_kind, mut version, mut group) = ("", "", "");
            for p in params {
                match p.split_once('=') {
                    Some(("as", v)) => as_kind = v,
                    Some(("v", v)) => version = v,
                    Some(("g", v)) => group = v,
                    _ => {}
                }
            }
            if as_kind.is_empty() {
                return Self::Object;
            }
            let version = match version {
                "v1" => "v1",
                "v1beta1" => "v1beta1",
                _ => continue,
            };
            if group != "meta.k8s.io" {
                continue;
            }
            match as_kind {
                "Table" => return Self::Table(version),
                "PartialObjectMetadata" | "PartialObjectMetadataList" => return Self::Metadata(version),
                _ => continue,
            }
        }
        Self::Object
    }
}

/// How much of each object a Table row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    /// Parses `includeObject`; an unknown value is a 400 as on the real server.
    pub fn from_query(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("Metadata") | Some("") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(ApiError::bad_request(format!(
                "includeObject: unsupported value {:?}, expected one of None, Metadata, Object",
                other.chars().take(40).collect::<String>()
            ))),
        }
    }
}

/// One column of a Table.
struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
}

impl Column {
    fn new(name: &str, kind: &str, description: &str) -> Self {
        Self {
            name: name.to_string(),
            kind: kind.to_string(),
            format: String::new(),
            description: description.to_string(),
            priority: 0,
        }
    }

    fn wide(self) -> Self {
        Self { priority: 1, ..self }
    }

    fn to_json(&self) -> Value {
        json!({"name": self.name, "type": self.kind, "format": self.format, "description": self.description,
            "priority": self.priority})
    }
}

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn name_column() -> Column {
    Column { format: "name".to_string(), ..Column::new("Name", "string", NAME_DOC) }
}

fn age_column() -> Column {
    Column::new("Age", "string", AGE_DOC)
}

/// A CRD version's `additionalPrinterColumns` entry, as the CRD declares it.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub kind: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    /// The column's `jsonPath`, as an RFC 9535 query (`$` prepended).
    path: Option<serde_json_path::JsonPath>,
}

impl PrinterColumn {
    /// Reads one `additionalPrinterColumns` entry; a path that does not parse prints nothing,
    /// as a column whose path finds nothing.
    pub fn from_crd(column: &Value) -> Self {
        let text = |k: &str| column[k].as_str().unwrap_or_default().to_string();
        let path = column["jsonPath"].as_str().and_then(|p| serde_json_path::JsonPath::parse(&format!("${p}")).ok());
        Self {
            name: text("name"),
            kind: text("type"),
            format: text("format"),
            description: text("description"),
            priority: column["priority"].as_i64().unwrap_or(0),
            path,
        }
    }

    /// The cell: the first match, typed as the column says (apiextensions' `cellForJSONValue`).
    fn cell(&self, obj: &Value, now: Timestamp) -> Value {
        let Some(found) = self.path.as_ref().and_then(|p| p.query(obj).all().first().copied()) else {
            return Value::Null;
        };
        match self.kind.as_str() {
            "string" => match found {
                Value::String(s) => json!(s),
                other => json!(other.to_string()),
            },
            "date" => found.as_str().map_or(Value::Null, |t| json!(age(Some(t), now))),
            "integer" => found.as_i64().map_or(Value::Null, |n| json!(n)),
            "number" => found.as_f64().map_or(Value::Null, |n| json!(n)),
            "boolean" => found.as_bool().map_or(Value::Null, |b| json!(b)),
            _ => found.clone(),
        }
    }
}

/// Renders a GET or LIST reply (an object or a `...List`) as `rendering` asks.
pub fn render(
    rt: &ResourceType,
    printer_columns: &[PrinterColumn],
    body: &Value,
    rendering: Rendering,
    include: Include,
    now: Timestamp,
) -> Value {
    let is_list = body.get("items").is_some_and(Value::is_array);
    let objects: Vec<&Value> =
        if is_list { body["items"].as_array().into_iter().flatten().collect() } else { vec![body] };
    match rendering {
        Rendering::Object => body.clone(),
        Rendering::Metadata(version) if is_list => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": body["metadata"],
            "items": objects.iter().map(|o| partial(o, version)).collect::<Vec<_>>(),
        }),
        Rendering::Metadata(version) => partial(body, version),
        Rendering::Table(version) => {
            let columns = columns(rt, printer_columns);
            let rows: Vec<Value> = objects
                .iter()
                .map(|o| {
                    let mut row = json!({"cells": cells(rt, printer_columns, o, now)});
                    match include {
                        Include::None => {}
                        Include::Metadata => row["object"] = partial(o, version),
                        Include::Object => row["object"] = (*o).clone(),
                    }
                    row
                })
                .collect();
            let mut metadata = json!({});
            for key in ["resourceVersion", "continue", "remainingItemCount"] {
                if let Some(v) = body["metadata"].get(key).filter(|v| !v.is_null()) {
                    metadata[key] = v.clone();
                }
            }
            json!({
                "kind": "Table",
                "apiVersion": format!("meta.k8s.io/{version}"),
                "metadata": metadata,
                "columnDefinitions": columns.iter().map(Column::to_json).collect::<Vec<_>>(),
                "rows": rows,
            })
        }
    }
}

/// An object reduced to its metadata.
fn partial(obj: &Value, version: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": obj["metadata"]})
}

fn columns(rt: &ResourceType, printer_columns: &[PrinterColumn]) -> Vec<Column> {
    let wide = |name, doc: &str| Column::new(name, "string", doc).wide();
    match rt.kind {
        "Pod" => vec![
            name_column(),
            Column::new("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
            Column::new("Status", "string", "The aggregate status of the containers in this pod."),
            Column::new(
                "Restarts",
                "string",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age_column(),
            wide(
                "IP",
                "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            wide("Node", "NodeName indicates in which node this pod is scheduled."),
            wide("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods on the node."),
            wide("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness."),
        ],
        "Job" => vec![
            name_column(),
            Column::new("Status", "string", "Status of the job."),
            Column::new("Completions", "string", "The number of pods which reached phase Succeeded."),
            Column::new("Duration", "string", "Time required to complete the job."),
            age_column(),
            wide("Containers", "Names of each container in the template."),
            wide("Images", "Images referenced by each container in the template."),
            wide("Selector", "A label query over pods that should match the pod count."),
        ],
        "Node" => vec![
            name_column(),
            Column::new("Status", "string", "The status of the node"),
            Column::new("Roles", "string", "The roles of the node"),
            age_column(),
            Column::new("Version", "string", "Kubelet Version reported by the node."),
            wide("Internal-IP", "List of addresses reachable to the node."),
            wide("External-IP", "List of addresses reachable to the node."),
            wide("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
            wide("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
            wide(
                "Container-Runtime",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        "Namespace" => {
            vec![name_column(), Column::new("Status", "string", "The status of the namespace"), age_column()]
        }
        "Secret" => vec![
            name_column(),
            Column::new("Type", "string", "Used to facilitate programmatic handling of secret data."),
            Column::new("Data", "string", "Data contains the secret data."),
            age_column(),
        ],
        "ConfigMap" => {
            vec![name_column(), Column::new("Data", "string", "Data contains the configuration data."), age_column()]
        }
        "ServiceAccount" => vec![
            name_column(),
            Column::new(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            age_column(),
        ],
        _ if !printer_columns.is_empty() => {
            let mut out = vec![name_column()];
            out.extend(printer_columns.iter().map(|c| Column {
                name: c.name.clone(),
                kind: c.kind.clone(),
                format: c.format.clone(),
                description: c.description.clone(),
                priority: c.priority,
            }));
            out
        }
        _ => vec![name_column(), Column { format: "date".to_string(), ..Column::new("Created At", "date", AGE_DOC) }],
    }
}

fn cells(rt: &ResourceType, printer_columns: &[PrinterColumn], obj: &Value, now: Timestamp) -> Vec<Value> {
    let name = json!(obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default());
    let created = age(obj.pointer("/metadata/creationTimestamp").and_then(Value::as_str), now);
    match rt.kind {
        "Pod" => pod_cells(obj, name, created),
        "Job" => job_cells(obj, name, created, now),
        "Node" => node_cells(obj, name, created),
        "Namespace" => vec![name, json!(str_at(obj, "/status/phase")), json!(created)],
        "Secret" => {
            let data = obj["data"].as_object().map_or(0, |d| d.len());
            vec![name, json!(str_at(obj, "/type")), json!(data), json!(created)]
        }
        "ConfigMap" => {
            let data =
                obj["data"].as_object().map_or(0, |d| d.len()) + obj["binaryData"].as_object().map_or(0, |d| d.len());
            vec![name, json!(data), json!(created)]
        }
        "ServiceAccount" => vec![name, json!(obj["secrets"].as_array().map_or(0, Vec::len)), json!(created)],
        _ if !printer_columns.is_empty() => {
            let mut out = vec![name];
            out.extend(printer_columns.iter().map(|c| c.cell(obj, now)));
            out
        }
        _ => vec![name, json!(str_at(obj, "/metadata/creationTimestamp"))],
    }
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn none_if_empty(s: &str) -> String {
    if s.is_empty() { "<none>".to_string() } else { s.to_string() }
}

/// `printPod`: ready/total, the aggregate reason, restarts, and the wide columns.
fn pod_cells(pod: &Value, name: Value, created: String) -> Vec<Value> {
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
    let mut reason = str_at(pod, "/status/phase").to_string();
    if !str_at(pod, "/status/reason").is_empty() {
        reason = str_at(pod, "/status/reason").to_string();
    }
    let mut ready = 0;
    let mut restarts = 0;
    let mut running = false;
    let statuses = pod.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    for status in statuses.iter().rev() {
        restarts += status["restartCount"].as_i64().unwrap_or(0);
        let state = &status["state"];
        if let Some(r) = state.pointer("/waiting/reason").and_then(Value::as_str).filter(|r| !r.is_empty()) {
            reason = r.to_string();
        } else if let Some(terminated) = state.get("terminated").filter(|t| t.is_object()) {
            reason = match terminated["reason"].as_str().filter(|r| !r.is_empty()) {
                Some(r) => r.to_string(),
                None if terminated["signal"].as_i64().unwrap_or(0) != 0 => {
                    format!("Signal:{}", terminated["signal"].as_i64().unwrap_or(0))
                }
                None => format!("ExitCode:{}", terminated["exitCode"].as_i64().unwrap_or(0)),
            };
        } else if status["ready"].as_bool() == Some(true) && state.get("running").is_some_and(Value::is_object) {
            running = true;
            ready += 1;
        }
    }
    if reason == "Completed" && running {
        let pod_ready = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
        reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
    }
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        reason = if str_at(pod, "/status/reason") == "NodeLost" { "Unknown" } else { "Terminating" }.to_string();
    }
    let gates = pod.pointer("/spec/readinessGates").and_then(Value::as_array).map_or(0, Vec::len);
    let gates = if gates == 0 { "<none>".to_string() } else { format!("0/{gates}") };
    vec![
        name,
        json!(format!("{ready}/{containers}")),
        json!(reason),
        json!(restarts.to_string()),
        json!(created),
        json!(none_if_empty(str_at(pod, "/status/podIP"))),
        json!(none_if_empty(str_at(pod, "/spec/nodeName"))),
        json!(none_if_empty(str_at(pod, "/status/nominatedNodeName"))),
        json!(gates),
    ]
}

fn has_condition(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// `printJob` (1.33): status from the conditions, completions, duration, and the wide columns.
fn job_cells(job: &Value, name: Value, created: String, now: Timestamp) -> Vec<Value> {
    let succeeded = job.pointer("/status/succeeded").and_then(Value::as_i64).unwrap_or(0);
    let completions = match job.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match job.pointer("/spec/parallelism").and_then(Value::as_i64).unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let time = |p: &str| job.pointer(p).and_then(Value::as_str).and_then(|t| t.parse::<Timestamp>().ok());
    let duration = match (time("/status/startTime"), time("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now.as_second() - start.as_second()),
        (Some(start), Some(end)) => human_duration(end.as_second() - start.as_second()),
    };
    let status = if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if job.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let containers =
        job.pointer("/spec/template/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
    let joined = |key: &str| containers.iter().filter_map(|c| c[key].as_str()).collect::<Vec<_>>().join(",");
    // `metav1.FormatLabelSelector`: the canonical selector string, `<none>` when it selects all.
    let selector = crate::selectors::LabelSelector::from_json(job.pointer("/spec/selector"))
        .map_or_else(|_| "<error>".to_string(), |s| s.to_string());
    vec![
        name,
        json!(status),
        json!(completions),
        json!(duration),
        json!(created),
        json!(joined("name")),
        json!(joined("image")),
        json!(none_if_empty(&selector)),
    ]
}

/// `printNode`: Ready or NotReady (and SchedulingDisabled), roles from the role labels.
fn node_cells(node: &Value, name: Value, created: String) -> Vec<Value> {
    let ready = node.pointer("/status/conditions").and_then(Value::as_array).and_then(|cs| {
        cs.iter().find(|c| c["type"] == "Ready").map(|c| if c["status"] == "True" { "Ready" } else { "NotReady" })
    });
    let mut status = vec![ready.unwrap_or("Unknown")];
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<String> = node["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
                    Some(role) if !role.is_empty() => Some(role.to_string()),
                    _ if k == "kubernetes.io/role" => v.as_str().filter(|r| !r.is_empty()).map(String::from),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    let address = |kind: &str| {
        node.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == kind))
            .and_then(|x| x["address"].as_str())
            .map_or_else(|| "<none>".to_string(), String::from)
    };
    let info = |key: &str| {
        let v = node.pointer(&format!("/status/nodeInfo/{key}")).and_then(Value::as_str).unwrap_or_default();
        if v.is_empty() { "<unknown>".to_string() } else { v.to_string() }
    };
    vec![
        name,
        json!(status.join(",")),
        json!(none_if_empty(&roles.join(","))),
        json!(created),
        json!(str_at(node, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` without one.
fn age(timestamp: Option<&str>, now: Timestamp) -> String {
    match timestamp.and_then(|t| t.parse::<Timestamp>().ok()) {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".to_string(),
    }
}

/// apimachinery's `duration.HumanDuration`: two significant units at most, coarser with age.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectls_accept_header_asks_for_a_v1_table() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(Rendering::from_accept(kubectl), Rendering::Table("v1"));
        assert_eq!(
            Rendering::from_accept("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            Rendering::Table("v1beta1")
        );
        assert_eq!(
            Rendering::from_accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            Rendering::Metadata("v1")
        );
        assert_eq!(
            Rendering::from_accept("application/json;as=Table;v=v9;g=meta.k8s.io,application/json"),
            Rendering::Object
        );
        assert_eq!(Rendering::from_accept("application/vnd.kubernetes.protobuf,application/json"), Rendering::Object);
        assert_eq!(Rendering::from_accept(""), Rendering::Object);
    }

    #[test]
    fn durations_read_like_apimachinery() {
        for (secs, text) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (47 * 3600, "47h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
            (9 * 365 * 86400, "9y"),
        ] {
            assert_eq!(human_duration(secs), text, "{secs}s");
        }
    }

    #[test]
    fn a_running_pod_prints_ready_status_and_restarts() {
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let now: Timestamp = "2026-01-01T00:00:30Z".parse().unwrap_or_default();
        let cells = pod_cells(&pod, json!("p"), age(Some("2026-01-01T00:00:00Z"), now));
        assert_eq!(
            cells,
            [
                json!("p"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("3"),
                json!("30s"),
                json!("10.0.0.1"),
                json!("n1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn a_job_prints_its_status_from_conditions() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap_or_default();
        let job = json!({"metadata": {"name": "j"}, "spec": {"completions": 1, "template": {"spec": {"containers": [
                {"name": "c", "image": "busybox"}]}}},
            "status": {"succeeded": 1, "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:05Z",
                "conditions": [{"type": "Complete", "status": "True"}]}});
        let cells = job_cells(&job, json!("j"), "1m".into(), now);
        assert_eq!(&cells[..5], [json!("j"), json!("Complete"), json!("1/1"), json!("5s"), json!("1m")]);
        assert_eq!(&cells[5..7], [json!("c"), json!("busybox")]);
    }

    #[test]
    fn printer_columns_follow_their_json_paths() {
        let ready = PrinterColumn::from_crd(
            &json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}),
        );
        let age_col =
            PrinterColumn::from_crd(&json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
        let obj = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let now: Timestamp = "2026-01-01T00:00:07Z".parse().unwrap_or_default();
        assert_eq!(ready.cell(&obj, now), json!("True"));
        assert_eq!(age_col.cell(&obj, now), json!("7s"));
        assert_eq!(ready.cell(&json!({}), now), Value::Null, "a path that finds nothing prints nothing");
    }
}
