//! The Node objects the simulated kubelet registers and keeps alive.
//!
//! Providers and the scheduler look at node labels, capacity and the Ready condition; a lost
//! node (`node-lost-after`) is shown the way the node lifecycle controller shows one whose
//! kubelet stopped posting status: every condition `Unknown`, heartbeat frozen.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Value, json};

use super::merge_patch::covers;

/// The kubelet version nodes report when the server's is unknown (the embedded cluster's).
pub(crate) const KUBELET_VERSION: &str = "v1.33.0";

/// The kubelet version to report to a server: its own `vX.Y.Z` (a kubelet newer than its API
/// server is unsupported, and a real node of a 1.28 cluster says v1.28.x).
pub(crate) fn kubelet_version(server_git_version: &str) -> String {
    let core = server_git_version.split(['-', '+']).next().unwrap_or_default();
    let numeric = core.strip_prefix('v').is_some_and(|v| {
        let parts: Vec<&str> = v.split('.').collect();
        parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    });
    if numeric { core.to_string() } else { KUBELET_VERSION.to_string() }
}

/// The labels a kubelet puts on its node.
pub(crate) fn labels(name: &str) -> BTreeMap<String, String> {
    [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The InternalIP of the `index`th node (`10.0.0.1`, `10.0.0.2`, …).
pub(crate) fn internal_ip(index: usize) -> String {
    format!("10.0.{}.{}", index / 254, index % 254 + 1)
}

/// The Node to create on registration, status included.
pub(crate) fn node_object(name: &str, index: usize, now: Timestamp, version: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels(name)),
            annotations: Some(BTreeMap::from([("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string())])),
            ..Default::default()
        },
        spec: None,
        status: Some(node_status(name, index, false, None, now, version)),
    }
}

/// The node's status: healthy (heartbeat `now`) or lost (every condition `Unknown`, heartbeat
/// frozen at the last one). Transition times are kept from `previous` while a condition holds.
pub(crate) fn node_status(
    name: &str,
    index: usize,
    lost: bool,
    previous: Option<&NodeStatus>,
    now: Timestamp,
    version: &str,
) -> NodeStatus {
    let before =
        |kind: &str| previous.and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|c| c.type_ == kind));
    let healthy = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ];
    let conditions = healthy
        .into_iter()
        .map(|(kind, status, reason, message)| {
            let (status, reason, message) = if lost {
                ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
            } else {
                (status, reason, message)
            };
            let old = before(kind);
            let heartbeat = if lost { old.and_then(|c| c.last_heartbeat_time.clone()) } else { Some(Time(now)) };
            let since =
                old.filter(|c| c.status == status).and_then(|c| c.last_transition_time.clone()).unwrap_or(Time(now));
            NodeCondition {
                type_: kind.to_string(),
                status: status.to_string(),
                reason: Some(reason.to_string()),
                message: Some(message.to_string()),
                last_heartbeat_time: heartbeat,
                last_transition_time: Some(since),
            }
        })
        .collect();
    let resources: BTreeMap<String, Quantity> =
        [("cpu", "8"), ("memory", "32Gi"), ("pods", "110"), ("ephemeral-storage", "100Gi")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect();
    let id = hex32(name);
    NodeStatus {
        addresses: Some(vec![
            NodeAddress { type_: "InternalIP".to_string(), address: internal_ip(index) },
            NodeAddress { type_: "Hostname".to_string(), address: name.to_string() },
        ]),
        allocatable: Some(resources.clone()),
        capacity: Some(resources),
        conditions: Some(conditions),
        daemon_endpoints: Some(NodeDaemonEndpoints { kubelet_endpoint: Some(DaemonEndpoint { port: 10250 }) }),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".to_string(),
            boot_id: id.clone(),
            container_runtime_version: "containerd://1.7.27".to_string(),
            kernel_version: "6.8.0-simulated".to_string(),
            kube_proxy_version: version.to_string(),
            kubelet_version: version.to_string(),
            machine_id: id.clone(),
            operating_system: "linux".to_string(),
            os_image: "Embedded Cluster Simulated Node".to_string(),
            system_uuid: id,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The nodes/status merge patch to send, or `None` if the node already shows it. With
/// `heartbeat_due` a healthy node is always written (that write is the heartbeat); without it
/// only a real change (a node lost or found again, a status someone else altered) is.
pub(crate) fn status_patch(
    name: &str,
    index: usize,
    lost: bool,
    observed: Option<&NodeStatus>,
    now: Timestamp,
    heartbeat_due: bool,
    version: &str,
) -> Option<Value> {
    let mut desired = node_status(name, index, lost, observed, now, version);
    let observed_value = observed.and_then(|s| serde_json::to_value(s).ok()).unwrap_or(Value::Null);
    let write = if heartbeat_due && !lost {
        true
    } else {
        // Compare with the heartbeats as they stand, so time passing alone is no change.
        for c in desired.conditions.iter_mut().flatten() {
            let old =
                observed.and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|o| o.type_ == c.type_));
            c.last_heartbeat_time = old.and_then(|o| o.last_heartbeat_time.clone());
        }
        let want = serde_json::to_value(&desired).unwrap_or(Value::Null);
        !covers(&observed_value, &want)
    };
    write.then(|| json!({ "status": desired }))
}

/// 32 hex digits naming the node's machine, stable across runs.
fn hex32(name: &str) -> String {
    (0u8..2)
        .map(|salt| {
            let mut hasher = DefaultHasher::new();
            (salt, name).hash(&mut hasher);
            format!("{:016x}", hasher.finish())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: u64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + i64::try_from(s).unwrap_or(0)).expect("valid time")
    }

    fn condition<'a>(status: &'a NodeStatus, kind: &str) -> &'a NodeCondition {
        status.conditions.iter().flatten().find(|c| c.type_ == kind).expect("condition")
    }

    #[test]
    fn nodes_report_the_servers_version() {
        assert_eq!(kubelet_version("v1.28.15"), "v1.28.15");
        assert_eq!(kubelet_version("v1.33.0-embedded"), "v1.33.0");
        assert_eq!(kubelet_version("v1.30.2+k3s1"), "v1.30.2");
        assert_eq!(kubelet_version("garbage"), KUBELET_VERSION);
    }

    #[test]
    fn a_registered_node_is_ready_with_capacity_and_addresses() {
        let node = node_object("embedded-node-1", 0, t(0), KUBELET_VERSION);
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("kubernetes.io/hostname").map(String::as_str), Some("embedded-node-1"));
        assert_eq!(labels.get("kubernetes.io/os").map(String::as_str), Some("linux"));
        assert_eq!(labels.get("kubernetes.io/arch").map(String::as_str), Some("amd64"));
        let status = node.status.expect("status");
        assert_eq!(condition(&status, "Ready").status, "True");
        assert_eq!(condition(&status, "Ready").reason.as_deref(), Some("KubeletReady"));
        assert_eq!(condition(&status, "MemoryPressure").status, "False");
        let cap = status.capacity.clone().unwrap_or_default();
        assert_eq!(cap.get("cpu"), Some(&Quantity("8".into())));
        assert_eq!(cap.get("memory"), Some(&Quantity("32Gi".into())));
        assert_eq!(cap.get("pods"), Some(&Quantity("110".into())));
        assert_eq!(status.allocatable, status.capacity);
        let addresses = status.addresses.unwrap_or_default();
        assert_eq!(addresses[0].address, "10.0.0.1");
        assert_eq!(addresses[1].type_, "Hostname");
        assert_eq!(status.node_info.map(|i| i.kubelet_version), Some(KUBELET_VERSION.to_string()));
    }

    #[test]
    fn internal_ips_are_distinct() {
        assert_eq!(internal_ip(1), "10.0.0.2");
        assert_ne!(internal_ip(0), internal_ip(254));
    }

    #[test]
    fn heartbeats_move_but_transitions_stay() {
        let first = node_status("n", 0, false, None, t(0), KUBELET_VERSION);
        let later = node_status("n", 0, false, Some(&first), t(10), KUBELET_VERSION);
        let ready = condition(&later, "Ready");
        assert_eq!(ready.last_heartbeat_time, Some(Time(t(10))));
        assert_eq!(ready.last_transition_time, Some(Time(t(0))));
    }

    #[test]
    fn a_lost_node_is_unknown_with_a_frozen_heartbeat() {
        let healthy = node_status("n", 0, false, None, t(0), KUBELET_VERSION);
        let lost = node_status("n", 0, true, Some(&healthy), t(30), KUBELET_VERSION);
        for c in lost.conditions.iter().flatten() {
            assert_eq!(c.status, "Unknown");
            assert_eq!(c.reason.as_deref(), Some("NodeStatusUnknown"));
            assert_eq!(c.last_heartbeat_time, Some(Time(t(0))));
            assert_eq!(c.last_transition_time, Some(Time(t(30))));
        }
    }

    #[test]
    fn status_is_written_for_heartbeats_and_changes_only() {
        let healthy = node_status("n", 0, false, None, t(0), KUBELET_VERSION);
        assert!(
            status_patch("n", 0, false, None, t(0), false, KUBELET_VERSION).is_some(),
            "a node without status gets one"
        );
        assert_eq!(status_patch("n", 0, false, Some(&healthy), t(5), false, KUBELET_VERSION), None);
        assert!(status_patch("n", 0, false, Some(&healthy), t(10), true, KUBELET_VERSION).is_some());
        let patch = status_patch("n", 0, true, Some(&healthy), t(20), true, KUBELET_VERSION)
            .expect("losing the node is a change");
        assert_eq!(patch["status"]["conditions"][3]["status"], "Unknown");
        let lost: NodeStatus = serde_json::from_value(patch["status"].clone()).expect("status");
        assert_eq!(
            status_patch("n", 0, true, Some(&lost), t(40), true, KUBELET_VERSION),
            None,
            "a lost node sends no heartbeat"
        );
        assert!(
            status_patch("n", 0, false, Some(&lost), t(50), false, KUBELET_VERSION).is_some(),
            "recovery is a change"
        );
    }
}
