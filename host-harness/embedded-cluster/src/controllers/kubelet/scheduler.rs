//! Placement decisions of the simulated scheduler: which node a pending pod is bound to, or
//! why none fits, worded as kube-scheduler words it so providers that parse it keep working.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodCondition, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::behaviour::Behaviour;

/// The scheduler name pods get when they do not ask for another one.
const DEFAULT_SCHEDULER: &str = "default-scheduler";
/// The taint the API server's cordon (`spec.unschedulable`) stands for.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Where a pod should go.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Placement {
    /// Bind the pod to this node.
    Bind(String),
    /// No node fits; the message is what `PodScheduled=False` carries.
    Unschedulable(String),
}

/// True for pods this scheduler is responsible for and that still need a node.
pub(crate) fn wants_scheduling(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let unbound = spec.node_name.as_deref().is_none_or(str::is_empty);
    let ours = spec.scheduler_name.as_deref().is_none_or(|s| s.is_empty() || s == DEFAULT_SCHEDULER);
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    unbound && ours && !finished && pod.metadata.deletion_timestamp.is_none()
}

/// Chooses a node for `pod`: the feasible node with the fewest pods (`load`), ties by name.
pub(crate) fn place(pod: &Pod, behaviour: &Behaviour, nodes: &[&Node], load: impl Fn(&str) -> usize) -> Placement {
    if nodes.is_empty() {
        return Placement::Unschedulable("no nodes available to schedule pods".to_string());
    }
    let mut rejected: BTreeMap<String, usize> = BTreeMap::new();
    let mut feasible: Vec<&str> = Vec::new();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        match rejection(pod, behaviour, node).or_else(|| too_many_pods(node, load(name))) {
            Some(reason) => *rejected.entry(reason).or_default() += 1,
            None => feasible.push(name),
        }
    }
    match feasible.into_iter().min_by_key(|name| (load(name), *name)) {
        Some(name) => Placement::Bind(name.to_string()),
        None => {
            let mut reasons: Vec<String> = rejected.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
            reasons.sort();
            Placement::Unschedulable(format!("0/{} nodes are available: {}.", nodes.len(), reasons.join(", ")))
        }
    }
}

/// kube-scheduler's pod-count fit: a node takes at most its allocatable `pods` (110 by default).
fn too_many_pods(node: &Node, load: usize) -> Option<String> {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref()).and_then(|a| a.get("pods"));
    let max: usize = allocatable.and_then(|q| q.0.parse().ok())?;
    (load >= max).then(|| "Too many pods".to_string())
}

/// Why `node` cannot take `pod`, in kube-scheduler's filter order (unschedulable, taints,
/// affinity), or `None` if it can.
fn rejection(pod: &Pod, behaviour: &Behaviour, node: &Node) -> Option<String> {
    if behaviour.unschedulable {
        return Some("Insufficient cpu".to_string());
    }
    let spec = pod.spec.as_ref();
    let tolerations: &[Toleration] = spec.and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let cordon_taint =
        Taint { key: UNSCHEDULABLE_TAINT.to_string(), effect: "NoSchedule".to_string(), ..Default::default() };
    if cordoned && !tolerations.iter().any(|t| tolerates(t, &cordon_taint)) {
        return Some("node(s) were unschedulable".to_string());
    }
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    let untolerated = taints
        .iter()
        .filter(|taint| taint.effect == "NoSchedule" || taint.effect == "NoExecute")
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)));
    if let Some(taint) = untolerated {
        let value = taint.value.as_deref().unwrap_or_default();
        return Some(format!("node(s) had untolerated taint {{{}: {value}}}", taint.key));
    }
    if !matches_node(pod, node) {
        return Some("node(s) didn't match Pod's node affinity/selector".to_string());
    }
    None
}

/// Kubernetes' toleration rule: an empty key with `Exists` tolerates everything; otherwise keys
/// must match and, for `Equal` (the default), values too; an empty effect matches every effect.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        _ => false,
    }
}

/// `spec.nodeSelector` and required node affinity, both of which must hold.
fn matches_node(pod: &Pod, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let selector_ok = spec.node_selector.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    let affinity_ok = required.is_none_or(|selector| {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        selector.node_selector_terms.iter().any(|term| term_matches(term, labels, name))
    });
    selector_ok && affinity_ok
}

/// One node selector term: every expression and field requirement holds; an empty term
/// matches nothing, as in Kubernetes.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let fields_ok = fields.iter().all(|req| {
        let value = (req.key == "metadata.name").then_some(node_name);
        requirement_matches(req, value)
    });
    fields_ok && expressions.iter().all(|req| requirement_matches(req, labels.get(&req.key).map(String::as_str)))
}

/// One `In`/`NotIn`/`Exists`/`DoesNotExist`/`Gt`/`Lt` requirement against a label value.
fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    let compare = |ordering: std::cmp::Ordering| match (value.and_then(number), values.first().and_then(|v| number(v)))
    {
        (Some(have), Some(want)) => have.cmp(&want) == ordering,
        _ => false,
    };
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => value.is_none_or(|v| values.iter().all(|w| w != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compare(std::cmp::Ordering::Greater),
        "Lt" => compare(std::cmp::Ordering::Less),
        _ => false,
    }
}

/// The pods/status merge patch that records `message` as `PodScheduled=False/Unschedulable`,
/// or `None` when the pod already says exactly that (so a retry writes nothing). The whole
/// conditions array is sent, since a JSON merge patch replaces arrays.
pub(crate) fn unschedulable_patch(pod: &Pod, message: &str, now: Timestamp) -> Option<Value> {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let current = conditions.iter().find(|c| c.type_ == "PodScheduled");
    let same = |c: &&PodCondition| {
        c.status == "False" && c.reason.as_deref() == Some("Unschedulable") && c.message.as_deref() == Some(message)
    };
    if current.is_some_and(|c| same(&c)) {
        return None;
    }
    let since =
        current.filter(|c| c.status == "False").and_then(|c| c.last_transition_time.clone()).unwrap_or(Time(now));
    let scheduled = PodCondition {
        type_: "PodScheduled".to_string(),
        status: "False".to_string(),
        reason: Some("Unschedulable".to_string()),
        message: Some(message.to_string()),
        last_transition_time: Some(since),
        ..Default::default()
    };
    let mut all: Vec<PodCondition> = conditions.into_iter().filter(|c| c.type_ != "PodScheduled").collect();
    all.push(scheduled);
    Some(json!({ "status": { "conditions": all } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})).expect("test pod")
    }

    fn plain_pod() -> Pod {
        pod(json!({"containers": [{"name": "c", "image": "x"}]}))
    }

    fn node(name: &str, extra_labels: Value, spec: Value) -> Node {
        let mut labels = json!({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"});
        if let (Some(l), Some(extra)) = (labels.as_object_mut(), extra_labels.as_object()) {
            l.extend(extra.clone());
        }
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec})).expect("test node")
    }

    fn no_load(_: &str) -> usize {
        0
    }

    #[test]
    fn binds_a_plain_pod_to_the_only_node() {
        let n = node("n1", json!({}), json!({}));
        assert_eq!(place(&plain_pod(), &Behaviour::default(), &[&n], no_load), Placement::Bind("n1".into()));
    }

    #[test]
    fn spreads_by_load_then_name() {
        let (a, b) = (node("a", json!({}), json!({})), node("b", json!({}), json!({})));
        let load = |name: &str| if name == "a" { 3 } else { 1 };
        assert_eq!(place(&plain_pod(), &Behaviour::default(), &[&a, &b], load), Placement::Bind("b".into()));
        assert_eq!(place(&plain_pod(), &Behaviour::default(), &[&b, &a], no_load), Placement::Bind("a".into()));
    }

    #[test]
    fn unschedulable_knob_rejects_every_node() {
        let n = node("n1", json!({}), json!({}));
        let b = Behaviour { unschedulable: true, ..Default::default() };
        assert_eq!(
            place(&plain_pod(), &b, &[&n], no_load),
            Placement::Unschedulable("0/1 nodes are available: 1 Insufficient cpu.".into())
        );
    }

    #[test]
    fn node_selector_mismatch_is_reported_like_kube_scheduler() {
        let n = node("n1", json!({}), json!({}));
        let p = pod(json!({"containers": [], "nodeSelector": {"gpu": "true"}}));
        assert_eq!(
            place(&p, &Behaviour::default(), &[&n], no_load),
            Placement::Unschedulable(
                "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.".into()
            )
        );
        let gpu = node("n2", json!({"gpu": "true"}), json!({}));
        assert_eq!(place(&p, &Behaviour::default(), &[&n, &gpu], no_load), Placement::Bind("n2".into()));
    }

    #[test]
    fn full_nodes_have_too_many_pods() {
        let mut n = node("n1", json!({}), json!({}));
        n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            allocatable: Some(
                [("pods".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()))].into(),
            ),
            ..Default::default()
        });
        assert_eq!(place(&plain_pod(), &Behaviour::default(), &[&n], |_| 1), Placement::Bind("n1".into()));
        assert_eq!(
            place(&plain_pod(), &Behaviour::default(), &[&n], |_| 2),
            Placement::Unschedulable("0/1 nodes are available: 1 Too many pods.".into())
        );
    }

    #[test]
    fn no_nodes_at_all() {
        assert_eq!(
            place(&plain_pod(), &Behaviour::default(), &[], no_load),
            Placement::Unschedulable("no nodes available to schedule pods".into())
        );
    }

    #[test]
    fn mixed_reasons_are_counted_and_sorted() {
        let cordoned = node("a", json!({}), json!({"unschedulable": true}));
        let tainted =
            node("b", json!({}), json!({"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}));
        let other =
            node("c", json!({}), json!({"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}));
        let msg = match place(&plain_pod(), &Behaviour::default(), &[&cordoned, &tainted, &other], no_load) {
            Placement::Unschedulable(m) => m,
            Placement::Bind(n) => panic!("bound to {n}"),
        };
        assert_eq!(
            msg,
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint {dedicated: infra}."
        );
    }

    #[test]
    fn tolerations_admit_tainted_and_cordoned_nodes() {
        let tainted = node(
            "b",
            json!({}),
            json!({"taints": [
                {"key": "dedicated", "value": "infra", "effect": "NoExecute"},
                {"key": "soft", "effect": "PreferNoSchedule"}
            ]}),
        );
        let equal = pod(json!({"containers": [], "tolerations": [{"key": "dedicated", "value": "infra"}]}));
        assert_eq!(place(&equal, &Behaviour::default(), &[&tainted], no_load), Placement::Bind("b".into()));
        let exists = pod(
            json!({"containers": [], "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]}),
        );
        assert_eq!(place(&exists, &Behaviour::default(), &[&tainted], no_load), Placement::Bind("b".into()));
        let wrong_effect = pod(
            json!({"containers": [], "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]}),
        );
        assert!(matches!(
            place(&wrong_effect, &Behaviour::default(), &[&tainted], no_load),
            Placement::Unschedulable(_)
        ));
        let wrong_value = pod(json!({"containers": [], "tolerations": [{"key": "dedicated", "value": "web"}]}));
        assert!(matches!(
            place(&wrong_value, &Behaviour::default(), &[&tainted], no_load),
            Placement::Unschedulable(_)
        ));
        let everything = pod(json!({"containers": [], "tolerations": [{"operator": "Exists"}]}));
        let cordoned = node("a", json!({}), json!({"unschedulable": true}));
        assert_eq!(place(&everything, &Behaviour::default(), &[&cordoned], no_load), Placement::Bind("a".into()));
    }

    #[test]
    fn required_node_affinity_operators() {
        let n = node("n1", json!({"zone": "a", "cores": "16"}), json!({}));
        let with = |expressions: Value| {
            pod(
                json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }}}}),
            )
        };
        let fits = |p: &Pod| place(p, &Behaviour::default(), &[&n], no_load) == Placement::Bind("n1".into());
        assert!(fits(&with(json!([{"key": "zone", "operator": "In", "values": ["a", "b"]}]))));
        assert!(!fits(&with(json!([{"key": "zone", "operator": "In", "values": ["b"]}]))));
        assert!(fits(&with(json!([{"key": "zone", "operator": "NotIn", "values": ["b"]}]))));
        assert!(fits(&with(json!([{"key": "missing", "operator": "NotIn", "values": ["b"]}]))));
        assert!(fits(&with(json!([{"key": "zone", "operator": "Exists"}]))));
        assert!(fits(&with(json!([{"key": "missing", "operator": "DoesNotExist"}]))));
        assert!(!fits(&with(json!([{"key": "zone", "operator": "DoesNotExist"}]))));
        assert!(fits(&with(json!([{"key": "cores", "operator": "Gt", "values": ["8"]}]))));
        assert!(!fits(&with(json!([{"key": "cores", "operator": "Lt", "values": ["8"]}]))));
        assert!(!fits(&with(json!([{"key": "zone", "operator": "Gt", "values": ["1"]}]))));
        assert!(!fits(&with(json!([{"key": "zone", "operator": "Bogus"}]))));
        assert!(!fits(&with(json!([]))), "an empty term matches nothing");
        let by_name = pod(
            json!({"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
            }}}}),
        );
        assert!(fits(&by_name));
    }

    #[test]
    fn only_unbound_live_default_scheduler_pods_are_scheduled() {
        assert!(wants_scheduling(&plain_pod()));
        assert!(!wants_scheduling(&pod(json!({"containers": [], "nodeName": "n1"}))));
        assert!(!wants_scheduling(&pod(json!({"containers": [], "schedulerName": "other"}))));
        assert!(wants_scheduling(&pod(json!({"containers": [], "schedulerName": "default-scheduler"}))));
        let mut done = plain_pod();
        done.status = Some(serde_json::from_value(json!({"phase": "Failed"})).expect("status"));
        assert!(!wants_scheduling(&done));
        let mut deleting = plain_pod();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert!(!wants_scheduling(&deleting));
    }

    #[test]
    fn unschedulable_patch_is_written_once_and_keeps_other_conditions() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let mut p = plain_pod();
        p.status = Some(
            serde_json::from_value(json!({"phase": "Pending", "conditions": [{"type": "Custom", "status": "True"}]}))
                .expect("status"),
        );
        let patch = unschedulable_patch(&p, "0/1 nodes are available: 1 Insufficient cpu.", now).expect("a patch");
        let conditions = &patch["status"]["conditions"];
        assert_eq!(conditions[0]["type"], "Custom");
        assert_eq!(conditions[1]["type"], "PodScheduled");
        assert_eq!(conditions[1]["status"], "False");
        assert_eq!(conditions[1]["reason"], "Unschedulable");
        assert_eq!(conditions[1]["lastTransitionTime"], "2026-01-01T00:00:00Z");

        p.status = Some(serde_json::from_value(patch["status"].clone()).expect("status"));
        assert_eq!(unschedulable_patch(&p, "0/1 nodes are available: 1 Insufficient cpu.", now), None);
        let later = now + jiff::SignedDuration::from_secs(60);
        let changed = unschedulable_patch(&p, "no nodes available to schedule pods", later).expect("a patch");
        assert_eq!(changed["status"]["conditions"][1]["lastTransitionTime"], "2026-01-01T00:00:00Z");
    }
}
