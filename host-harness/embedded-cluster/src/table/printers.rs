//! The built-in kinds' printers (`pkg/printers/internalversion/printers.go`): each kind's
//! columns and cells, the CRD and default tables, and apimachinery's HumanDuration.

use super::*;

pub(super) fn columns(rt: &ResourceType, printer_columns: &[PrinterColumn]) -> Vec<Column> {
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
        "Event" => vec![
            Column::new(
                "Last Seen",
                "string",
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            Column::new(
                "Type",
                "string",
                "Type of this event (Normal, Warning), new types could be added in the future",
            ),
            Column::new(
                "Reason",
                "string",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            Column::new("Object", "string", "The object that this event is about."),
            wide("Subobject", "The object's field this event is about (a container: spec.containers{name})."),
            wide("Source", "The component reporting this event."),
            Column::new("Message", "string", "A human-readable description of the status of this operation."),
            wide("First Seen", "The time at which the event was first recorded."),
            wide("Count", "The number of times this event has occurred."),
            wide("Name", "The event's name."),
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

pub(super) fn cells(rt: &ResourceType, printer_columns: &[PrinterColumn], obj: &Value, now: Timestamp) -> Vec<Value> {
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
        "Event" => event_cells(obj, name, now),
        _ if !printer_columns.is_empty() => {
            let mut out = vec![name];
            out.extend(printer_columns.iter().map(|c| c.cell(obj, now)));
            out
        }
        _ => vec![name, json!(str_at(obj, "/metadata/creationTimestamp"))],
    }
}

/// `printEvent`: when last and first seen, the type and reason, `kind/name` of the object, the
/// container's field path, the source (`component, host`), the message and the count.
pub(super) fn event_cells(event: &Value, name: Value, now: Timestamp) -> Vec<Value> {
    let since = |pointer: &str| obj_time(event, pointer).map(|t| age(Some(t), now));
    let first = since("/firstTimestamp").or_else(|| since("/eventTime")).unwrap_or_else(|| "<unknown>".to_string());
    let mut last = since("/lastTimestamp").unwrap_or_else(|| first.clone());
    let mut count = event["count"].as_i64().filter(|c| *c > 0).unwrap_or(1);
    if let Some(series) = event.get("series").filter(|s| s.is_object()) {
        last = obj_time(series, "/lastObservedTime").map_or(last, |t| age(Some(t), now));
        count = series["count"].as_i64().unwrap_or(count);
    }
    let kind = str_at(event, "/involvedObject/kind").to_lowercase();
    let object = match str_at(event, "/involvedObject/name") {
        "" => kind,
        involved => format!("{kind}/{involved}"),
    };
    let first_non_empty = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { a.to_string() };
    let component = first_non_empty(str_at(event, "/source/component"), str_at(event, "/reportingComponent"));
    let instance = first_non_empty(str_at(event, "/source/host"), str_at(event, "/reportingInstance"));
    let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
    vec![
        json!(last),
        json!(str_at(event, "/type")),
        json!(str_at(event, "/reason")),
        json!(object),
        json!(str_at(event, "/involvedObject/fieldPath")),
        json!(source),
        json!(str_at(event, "/message").trim()),
        json!(first),
        json!(count),
        name,
    ]
}

/// A timestamp field that is set (not null, not empty).
fn obj_time<'a>(obj: &'a Value, pointer: &str) -> Option<&'a str> {
    obj.pointer(pointer).and_then(Value::as_str).filter(|t| !t.is_empty())
}

pub(super) fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

pub(super) fn none_if_empty(s: &str) -> String {
    if s.is_empty() { "<none>".to_string() } else { s.to_string() }
}

/// `printPod`: ready/total, the aggregate reason, restarts, and the wide columns.
pub(super) fn pod_cells(pod: &Value, name: Value, created: String) -> Vec<Value> {
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

pub(super) fn has_condition(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// `printJob` (1.33): status from the conditions, completions, duration, and the wide columns.
pub(super) fn job_cells(job: &Value, name: Value, created: String, now: Timestamp) -> Vec<Value> {
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
pub(super) fn node_cells(node: &Value, name: Value, created: String) -> Vec<Value> {
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
pub(super) fn age(timestamp: Option<&str>, now: Timestamp) -> String {
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
    fn an_event_prints_when_what_and_who_like_kubectl() {
        let now: Timestamp = "2026-12-01T00:10:00Z".parse().expect("time");
        let event = json!({
            "metadata": {"name": "p.1"},
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{main}"},
            "reason": "BackOff", "type": "Warning", "message": " Back-off restarting \n",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2026-12-01T00:00:00Z", "lastTimestamp": "2026-12-01T00:08:00Z", "count": 3
        });
        let cells = event_cells(&event, json!("p.1"), now);
        assert_eq!(
            cells,
            vec![
                json!("2m"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/p"),
                json!("spec.containers{main}"),
                json!("kubelet, node-1"),
                json!("Back-off restarting"),
                json!("10m"),
                json!(3),
                json!("p.1"),
            ]
        );
        let scheduler = json!({"involvedObject": {"kind": "Pod", "name": "p"}, "reportingComponent": "default-scheduler",
            "eventTime": "2026-12-01T00:09:00.000000Z"});
        let cells = event_cells(&scheduler, json!("p.2"), now);
        assert_eq!(
            (cells[0].clone(), cells[5].clone(), cells[8].clone()),
            (json!("60s"), json!("default-scheduler"), json!(1))
        );
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
}
