//! Unit tests of the controller's decisions, without a cluster: every rule, both versions.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::model::{Condition, Sandbox, SandboxStatus, SandboxVersion};
use super::plan::{Action, Failure, MIN_EXPIRY_RECHECK, Observed, Plan, plan, status_after_failure};
use super::status::*;
use super::{NAME_HASH_LABEL, POD_NAME_ANNOTATION, name_hash};
use crate::clock::format_time;

const UID: &str = "uid-box";
const VERSIONS: [SandboxVersion; 2] = [SandboxVersion::V1beta1, SandboxVersion::V1alpha1];

fn t0() -> Timestamp {
    "2026-03-01T10:00:00Z".parse().expect("valid timestamp")
}

fn hash() -> String {
    name_hash("box")
}

/// A simulated corner of the cluster: one Sandbox `ns/box` and its dependents.
#[derive(Clone)]
struct World {
    version: SandboxVersion,
    spec: Value,
    status: Value,
    annotations: BTreeMap<String, String>,
    generation: i64,
    deleting: bool,
    gone: bool,
    pod: Option<Pod>,
    extra_pods: Vec<Pod>,
    service: Option<Service>,
    pvcs: BTreeMap<String, PersistentVolumeClaim>,
    now: Timestamp,
}

impl World {
    fn new(version: SandboxVersion) -> Self {
        Self {
            version,
            spec: json!({
                "podTemplate": {
                    "metadata": {
                        "labels": { "app": "agent", "agents.x-k8s.io/sandbox-name-hash": "forged" },
                        "annotations": { "note": "kept", "agents.x-k8s.io/pod-name": "forged" }
                    },
                    "spec": { "containers": [{ "name": "main", "image": "busybox" }] }
                }
            }),
            status: Value::Null,
            annotations: BTreeMap::new(),
            generation: 1,
            deleting: false,
            gone: false,
            pod: None,
            extra_pods: Vec::new(),
            service: None,
            pvcs: BTreeMap::new(),
            now: t0(),
        }
    }

    fn with_spec(mut self, key: &str, value: Value) -> Self {
        self.set_spec(key, value);
        self
    }

    fn set_spec(&mut self, key: &str, value: Value) {
        self.spec[key] = value;
        self.generation += 1;
    }

    fn suspend(&mut self, suspended: bool) {
        match self.version {
            SandboxVersion::V1beta1 => {
                self.set_spec("operatingMode", json!(if suspended { "Suspended" } else { "Running" }))
            }
            SandboxVersion::V1alpha1 => self.set_spec("replicas", json!(if suspended { 0 } else { 1 })),
        }
    }

    fn object(&self) -> DynamicObject {
        let mut metadata = json!({
            "name": "box",
            "namespace": "ns",
            "uid": UID,
            "generation": self.generation,
            "annotations": self.annotations,
        });
        if self.deleting {
            metadata["deletionTimestamp"] = json!("2026-03-01T09:00:00Z");
        }
        serde_json::from_value(json!({
            "apiVersion": self.version.api_version(),
            "kind": "Sandbox",
            "metadata": metadata,
            "spec": self.spec,
            "status": self.status,
        }))
        .expect("valid Sandbox")
    }

    fn sandbox(&self) -> Sandbox {
        Sandbox::from_dynamic(&self.object(), self.version).expect("identity present")
    }

    fn observed(&self) -> Observed {
        let mut labelled: Vec<Pod> = self.extra_pods.clone();
        labelled.extend(
            self.pod.clone().filter(|p| {
                p.metadata.labels.as_ref().and_then(|l| l.get(NAME_HASH_LABEL)).is_some_and(|h| *h == hash())
            }),
        );
        Observed {
            sandbox: self.sandbox(),
            pod: self.pod.clone(),
            labelled_pods: labelled,
            service: self.service.clone(),
            pvcs: self.pvcs.clone(),
            now: self.now,
        }
    }

    fn plan(&self) -> Plan {
        plan(&self.observed())
    }

    fn stored_status(&self) -> SandboxStatus {
        self.sandbox().status
    }

    /// Plans and applies the plan the way the API server would.
    fn step(&mut self) -> Plan {
        let plan = self.plan();
        for action in &plan.actions {
            match action {
                Action::CreatePvc(pvc) => {
                    self.pvcs.insert(pvc.metadata.name.clone().unwrap_or_default(), (**pvc).clone());
                }
                Action::CreatePod(pod) => {
                    let mut pod = (**pod).clone();
                    pod.metadata.uid = Some(format!("pod-uid-{}", self.generation));
                    self.pod = Some(pod);
                }
                Action::DeletePod { .. } => {
                    if let Some(pod) = &mut self.pod {
                        pod.metadata.deletion_timestamp =
                            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(self.now));
                    }
                }
                Action::SetPodNameAnnotation(Some(value)) => {
                    self.annotations.insert(POD_NAME_ANNOTATION.to_string(), value.clone());
                }
                Action::SetPodNameAnnotation(None) => {
                    self.annotations.remove(POD_NAME_ANNOTATION);
                }
                Action::CreateService(service) => self.service = Some((**service).clone()),
                Action::DeleteService { .. } => self.service = None,
                Action::DeleteSandbox => self.gone = true,
                Action::PatchPvc { .. } | Action::PatchPod { .. } | Action::PatchService { .. } => {}
            }
        }
        if let Some(status) = &plan.status {
            self.status = serde_json::to_value(status).expect("status serializes");
        }
        plan
    }

    /// The kubelet finishing a deletion.
    fn pod_gone(&mut self) {
        self.pod = None;
    }

    /// The kubelet running the pod: Running, Ready, with an IP, on a node.
    fn pod_running(&mut self) {
        let pod = self.pod.as_mut().expect("a pod to run");
        *pod = with_status(pod.clone(), "Running", true, Some("10.0.0.7"));
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some("node-a".to_string());
        }
    }

    fn pod_phase(&mut self, phase: &str) {
        let pod = self.pod.as_mut().expect("a pod");
        *pod = with_status(pod.clone(), phase, false, None);
    }
}

fn with_status(mut pod: Pod, phase: &str, ready: bool, ip: Option<&str>) -> Pod {
    let status = json!({
        "phase": phase,
        "conditions": [
            { "type": "PodScheduled", "status": "True" },
            { "type": "Ready", "status": if ready { "True" } else { "False" } },
        ],
        "podIPs": ip.map(|ip| vec![json!({ "ip": ip })]).unwrap_or_default(),
    });
    pod.status = Some(serde_json::from_value(status).expect("valid pod status"));
    pod
}

fn foreign_pod(name: &str, owner_uid: Option<&str>, labelled: bool) -> Pod {
    let mut metadata = json!({ "name": name, "namespace": "ns", "uid": format!("{name}-uid") });
    if let Some(uid) = owner_uid {
        metadata["ownerReferences"] = json!([{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other", "uid": uid, "controller": true
        }]);
    }
    if labelled {
        metadata["labels"] = json!({ NAME_HASH_LABEL: hash() });
    }
    serde_json::from_value(json!({
        "metadata": metadata,
        "spec": { "containers": [{ "name": "main", "image": "busybox" }] }
    }))
    .expect("valid pod")
}

fn owned_pod(name: &str) -> Pod {
    let mut pod = foreign_pod(name, Some(UID), true);
    if let Some(refs) = pod.metadata.owner_references.as_mut() {
        refs[0].kind = "Sandbox".to_string();
        refs[0].api_version = "agents.x-k8s.io/v1beta1".to_string();
    }
    pod
}

fn condition<'a>(status: &'a SandboxStatus, type_: &str) -> &'a Condition {
    status.condition(type_).unwrap_or_else(|| panic!("condition {type_} missing in {status:?}"))
}

fn assert_condition(status: &SandboxStatus, type_: &str, expected_status: &str, reason: &str) {
    let c = condition(status, type_);
    assert_eq!((c.status.as_str(), c.reason.as_str()), (expected_status, reason), "{type_}: {c:?}");
}

fn status_of(plan: &Plan) -> &SandboxStatus {
    plan.status.as_ref().expect("the plan writes a status")
}

fn created_pod(plan: &Plan) -> Option<&Pod> {
    plan.actions.iter().find_map(|a| match a {
        Action::CreatePod(p) => Some(&**p),
        _ => None,
    })
}

#[test]
fn name_hash_is_fnv1a_32_in_hex() {
    assert_eq!(name_hash(""), "811c9dc5");
    assert_eq!(name_hash("a"), "e40c292c");
    assert_eq!(name_hash("foobar"), "bf9cf968");
    assert_eq!(name_hash("box").len(), 8);
}

#[test]
fn new_sandbox_creates_its_pod_with_owner_hash_label_and_clean_metadata() {
    for version in VERSIONS {
        let world = World::new(version);
        let plan = world.plan();
        let pod = created_pod(&plan).expect("a pod is created");
        assert_eq!(pod.metadata.name.as_deref(), Some("box"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("agent"));
        assert_eq!(labels.get(NAME_HASH_LABEL), Some(&hash()), "reserved template label dropped");
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get("note").map(String::as_str), Some("kept"));
        assert!(!annotations.contains_key(POD_NAME_ANNOTATION));
        let owners = pod.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].api_version, version.api_version());
        assert_eq!(owners[0].kind, "Sandbox");
        assert_eq!(owners[0].uid, UID);
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(owners[0].block_owner_deletion, Some(true));
        assert!(plan.actions.contains(&Action::SetPodNameAnnotation(Some("box".into()))));
        assert!(!plan.actions.iter().any(|a| matches!(a, Action::CreateService(_))));

        let status = status_of(&plan);
        assert_condition(status, SUSPENDED, "False", REASON_NOT_SUSPENDED);
        assert_condition(status, POD_SCHEDULED, "Unknown", REASON_POD_SCHEDULING_UNKNOWN);
        assert_condition(status, READY, "False", REASON_DEPENDENCIES_NOT_READY);
        assert!(status.condition(FINISHED).is_none());
        for c in &status.conditions {
            assert_eq!(c.observed_generation, Some(world.generation));
            assert_eq!(c.last_transition_time, format_time(t0()));
        }
        assert_eq!(status.selector, Some(format!("{NAME_HASH_LABEL}={}", hash())));
        assert_eq!(status.service, None);
        match version {
            SandboxVersion::V1beta1 => assert_eq!(status.replicas, None),
            SandboxVersion::V1alpha1 => assert_eq!(status.replicas, Some(1)),
        }
        assert_eq!(plan.requeue_after, None);
    }
}

#[test]
fn volume_claim_templates_become_owned_pvcs_and_pod_volumes() {
    let world = World::new(SandboxVersion::V1beta1).with_spec(
        "volumeClaimTemplates",
        json!([{
            "metadata": { "name": "data", "labels": { "tier": "disk" } },
            "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } }
        }]),
    );
    let mut world = world;
    world.spec["podTemplate"]["spec"]["volumes"] =
        json!([{ "name": "data", "emptyDir": {} }, { "name": "tmp", "emptyDir": {} }]);
    let plan = world.plan();
    let pvc = plan
        .actions
        .iter()
        .find_map(|a| match a {
            Action::CreatePvc(p) => Some(p),
            _ => None,
        })
        .expect("a PVC is created");
    assert_eq!(pvc.metadata.name.as_deref(), Some("data-box"));
    let labels = pvc.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("tier").map(String::as_str), Some("disk"));
    assert_eq!(labels.get(NAME_HASH_LABEL), Some(&hash()));
    let owners = pvc.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners[0].uid, UID);

    let pod = created_pod(&plan).expect("a pod is created");
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.clone()).unwrap_or_default();
    let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["tmp", "data"], "the claim volume replaces the template's");
    let claim = volumes[1].persistent_volume_claim.as_ref().expect("a PVC volume");
    assert_eq!(claim.claim_name, "data-box");
    let first_pvc = plan.actions.iter().position(|a| matches!(a, Action::CreatePvc(_)));
    let first_pod = plan.actions.iter().position(|a| matches!(a, Action::CreatePod(_)));
    assert!(first_pvc < first_pod, "PVCs come before the pod");
}

#[test]
fn existing_pvcs_are_kept_adopted_or_refused_and_never_deleted() {
    let templates = json!([{ "metadata": { "name": "data" }, "spec": {} }]);
    let pvc = |owner: Option<&str>, labelled: bool| -> PersistentVolumeClaim {
        let pod = foreign_pod("data-box", owner, labelled);
        PersistentVolumeClaim { metadata: pod.metadata, ..PersistentVolumeClaim::default() }
    };

    let mut world = World::new(SandboxVersion::V1beta1).with_spec("volumeClaimTemplates", templates);
    let mut owned = pvc(Some(UID), true);
    if let Some(refs) = owned.metadata.owner_references.as_mut() {
        refs[0].kind = "Sandbox".into();
    }
    world.pvcs.insert("data-box".into(), owned);
    let plan = world.plan();
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::CreatePvc(_) | Action::PatchPvc { .. })));

    world.pvcs.insert("data-box".into(), pvc(None, true));
    let plan = world.plan();
    let patch = plan
        .actions
        .iter()
        .find_map(|a| match a {
            Action::PatchPvc { name, patch } if name == "data-box" => Some(patch),
            _ => None,
        })
        .expect("the labelled PVC is adopted");
    assert_eq!(patch["metadata"]["ownerReferences"][0]["uid"], UID);
    assert_eq!(patch["metadata"]["ownerReferences"][0]["controller"], true);

    world.pvcs.insert("data-box".into(), pvc(None, false));
    assert_condition(status_of(&world.plan()), READY, "False", REASON_RECONCILER_ERROR);

    world.pvcs.insert("data-box".into(), pvc(Some("someone-else"), true));
    let status = world.plan().status.expect("status");
    assert_condition(&status, READY, "False", REASON_RECONCILER_ERROR);
    assert!(condition(&status, READY).message.contains("PVC \"data-box\" is owned by ReplicaSet/other"));

    // Suspend and expiry leave the PVC alone (there is no action that deletes a PVC).
    world.pvcs.insert("data-box".into(), pvc(Some(UID), true));
    world.suspend(true);
    assert!(!world.plan().actions.iter().any(|a| matches!(a, Action::CreatePvc(_) | Action::PatchPvc { .. })));
}

#[test]
fn ready_needs_a_running_ready_pod_with_an_ip() {
    for version in VERSIONS {
        let mut world = World::new(version);
        world.step();
        world.step();
        let cases = [
            ("Pending", false, None, "False", "Pod exists with phase: Pending"),
            ("Running", false, Some("10.0.0.7"), "False", "Pod is Running but not Ready"),
            ("Running", true, None, "False", "Pod is Ready but has no podIPs yet"),
            ("Running", true, Some("10.0.0.7"), "True", "Pod is Ready"),
        ];
        for (phase, ready, ip, expected, message) in cases {
            let mut w = world.clone();
            let pod = w.pod.take().expect("pod created");
            w.pod = Some(with_status(pod, phase, ready, ip));
            let plan = w.plan();
            assert!(plan.actions.is_empty(), "{phase}: {:?}", plan.actions);
            let status = status_of(&plan);
            let ready_condition = condition(status, READY);
            assert_eq!(ready_condition.status, expected, "{phase} {ready} {ip:?}");
            assert_eq!(ready_condition.message, message);
            let reason = if expected == "True" { REASON_DEPENDENCIES_READY } else { REASON_DEPENDENCIES_NOT_READY };
            assert_eq!(ready_condition.reason, reason);
            assert_eq!(status.pod_ips, ip.map(|ip| vec![ip.to_string()]));
        }
    }
}

#[test]
fn node_name_is_reported_in_v1beta1_only() {
    for version in VERSIONS {
        let mut world = World::new(version);
        world.step();
        world.pod_running();
        let status = world.step().status.expect("status");
        assert_condition(&status, READY, "True", REASON_DEPENDENCIES_READY);
        assert_condition(&status, POD_SCHEDULED, "True", REASON_POD_SCHEDULED);
        match version {
            SandboxVersion::V1beta1 => assert_eq!(status.node_name.as_deref(), Some("node-a")),
            SandboxVersion::V1alpha1 => {
                assert_eq!(status.node_name, None);
                assert_eq!(status.replicas, Some(1));
            }
        }
    }
}

#[test]
fn a_settled_sandbox_plans_nothing_and_writes_no_status() {
    for version in VERSIONS {
        let mut world = World::new(version).with_spec("service", json!(true));
        world.step();
        world.pod_running();
        world.step();
        world.now += SignedDuration::from_secs(30);
        let observed_status = world.stored_status();
        let plan = world.plan();
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);
        assert_eq!(status_merge_patch(version, &observed_status, status_of(&plan)), None);
    }
}

#[test]
fn service_true_creates_a_headless_service_and_gates_readiness() {
    for version in VERSIONS {
        let mut world = World::new(version).with_spec("service", json!(true));
        let plan = world.step();
        let service = plan
            .actions
            .iter()
            .find_map(|a| match a {
                Action::CreateService(s) => Some(s),
                _ => None,
            })
            .expect("a Service is created");
        assert_eq!(service.metadata.name.as_deref(), Some("box"));
        let spec = service.spec.as_ref().expect("service spec");
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.selector, Some(BTreeMap::from([(NAME_HASH_LABEL.to_string(), hash())])));
        assert_eq!(service.metadata.owner_references.as_ref().map(|o| o[0].uid.as_str()), Some(UID));
        let status = status_of(&plan);
        assert_eq!(status.service.as_deref(), Some("box"));
        assert_eq!(status.service_fqdn.as_deref(), Some("box.ns.svc.cluster.local"));

        world.pod_running();
        let ready = world.step().status.expect("status");
        assert_condition(&ready, READY, "True", REASON_DEPENDENCIES_READY);
        assert_eq!(condition(&ready, READY).message, "Pod is Ready; Service Exists");

        // A Service of somebody else's blocks readiness with an error.
        let mut w = world.clone();
        let mut foreign = w.service.take().expect("service");
        if let Some(refs) = foreign.metadata.owner_references.as_mut() {
            refs[0].uid = "someone-else".into();
        }
        w.service = Some(foreign);
        assert_condition(status_of(&w.plan()), READY, "False", REASON_RECONCILER_ERROR);

        // An unlabelled, unowned Service cannot be adopted.
        let mut w = world.clone();
        w.service = Some(Service { metadata: foreign_pod("box", None, false).metadata, ..Service::default() });
        assert_condition(status_of(&w.plan()), READY, "False", REASON_RECONCILER_ERROR);
    }
}

#[test]
fn no_service_unless_asked_and_service_false_removes_an_owned_one() {
    let mut world = World::new(SandboxVersion::V1beta1);
    world.step();
    world.pod_running();
    let status = world.step().status.expect("status");
    assert!(world.service.is_none());
    assert_eq!(status.service, None);
    assert_eq!(condition(&status, READY).message, "Pod is Ready");

    let mut world = World::new(SandboxVersion::V1beta1).with_spec("service", json!(true));
    world.step();
    world.set_spec("service", json!(false));
    let plan = world.step();
    assert!(plan.actions.contains(&Action::DeleteService { name: "box".into() }));
    assert_eq!(status_of(&plan).service, None);
    assert_eq!(status_of(&plan).service_fqdn, None);
}

#[test]
fn owned_service_with_a_drifted_selector_is_patched_and_a_labelled_one_adopted() {
    let mut world = World::new(SandboxVersion::V1beta1).with_spec("service", json!(true));
    world.step();
    let mut drifted = world.service.clone().expect("service");
    if let Some(spec) = drifted.spec.as_mut() {
        spec.selector = Some(BTreeMap::from([("app".to_string(), "x".to_string())]));
    }
    world.service = Some(drifted);
    let patch = world
        .plan()
        .actions
        .into_iter()
        .find_map(|a| match a {
            Action::PatchService { patch, .. } => Some(patch),
            _ => None,
        })
        .expect("the selector is repaired");
    assert_eq!(patch["spec"]["selector"]["app"], Value::Null);
    assert_eq!(patch["spec"]["selector"][NAME_HASH_LABEL], hash());

    world.service = Some(Service { metadata: foreign_pod("box", None, true).metadata, ..Service::default() });
    let plan = world.plan();
    let patch = plan
        .actions
        .iter()
        .find_map(|a| match a {
            Action::PatchService { patch, .. } => Some(patch),
            _ => None,
        })
        .expect("the labelled Service is adopted");
    assert_eq!(patch["metadata"]["ownerReferences"][0]["uid"], UID);
    assert_eq!(patch["spec"]["selector"][NAME_HASH_LABEL], hash());
    assert_eq!(status_of(&plan).service.as_deref(), Some("box"));
}

#[test]
fn a_deleted_pod_is_recreated_and_ready_goes_false() {
    for version in VERSIONS {
        let mut world = World::new(version);
        world.step();
        world.pod_running();
        let ready = world.step().status.expect("status");
        assert_condition(&ready, READY, "True", REASON_DEPENDENCIES_READY);
        let old_uid = world.pod.as_ref().and_then(|p| p.metadata.uid.clone());

        world.pod_gone();
        world.now += SignedDuration::from_secs(5);
        world.generation += 1;
        let plan = world.step();
        let pod = created_pod(&plan).expect("the pod is recreated");
        assert_eq!(pod.metadata.name.as_deref(), Some("box"));
        assert!(
            !plan.actions.iter().any(|a| matches!(a, Action::SetPodNameAnnotation(_))),
            "the annotation already names the pod"
        );
        let status = status_of(&plan);
        assert_condition(status, READY, "False", REASON_DEPENDENCIES_NOT_READY);
        assert_eq!(condition(status, READY).last_transition_time, format_time(world.now));
        assert_eq!(status.pod_ips, None);
        assert_eq!(status.node_name, None);
        assert_ne!(world.pod.as_ref().and_then(|p| p.metadata.uid.clone()), old_uid);
    }
}

#[test]
fn a_terminal_pod_finishes_the_sandbox_while_it_exists_and_its_deletion_brings_a_new_pod() {
    for version in VERSIONS {
        for (phase, reason) in [("Failed", REASON_POD_FAILED), ("Succeeded", REASON_POD_SUCCEEDED)] {
            let mut world = World::new(version);
            world.step();
            world.pod_running();
            world.step();
            world.pod_phase(phase);
            world.now += SignedDuration::from_secs(60);
            for _ in 0..2 {
                let plan = world.step();
                assert!(plan.actions.is_empty(), "a terminal pod is never replaced: {:?}", plan.actions);
                let status = status_of(&plan);
                assert_condition(status, FINISHED, "True", reason);
                assert_condition(status, READY, "False", reason);
                assert_condition(status, SUSPENDED, "False", REASON_NOT_SUSPENDED);
            }

            // Upstream keeps Finished only while the terminal pod is there (`computeFinishedCondition`
            // needs an owned pod): once someone deletes it, the Sandbox gets a new pod.
            world.pod_gone();
            let plan = world.step();
            let pod = created_pod(&plan).unwrap_or_else(|| panic!("{phase}: a new pod, got {:?}", plan.actions));
            assert_eq!(pod.metadata.name.as_deref(), Some("box"));
            let status = status_of(&plan);
            assert!(status.condition(FINISHED).is_none(), "{phase}: {status:?}");
            assert_condition(status, READY, "False", REASON_DEPENDENCIES_NOT_READY);
        }
    }
}

/// The kubelet stops a deleted pod before it removes it, so a suspend's pod is seen Failed (or
/// Succeeded) and Finished=True is written. A resume that lands after the pod is gone but before
/// the controller saw it gone while suspended must still bring a pod: Finished is no reason to
/// withhold one.
#[test]
fn a_resume_right_after_the_suspended_pod_went_terminal_and_away_creates_a_pod() {
    for version in VERSIONS {
        for phase in ["Failed", "Succeeded"] {
            let mut world = World::new(version);
            world.step();
            world.pod_running();
            world.step();
            world.suspend(true);
            world.step();
            world.pod_phase(phase);
            let plan = world.step();
            assert!(plan.actions.is_empty(), "{:?}", plan.actions);
            assert_condition(status_of(&plan), SUSPENDED, "False", REASON_POD_TERMINATING);

            world.pod_gone();
            world.suspend(false);
            let plan = world.step();
            let pod = created_pod(&plan).unwrap_or_else(|| panic!("{version:?} {phase}: {:?}", plan.actions));
            assert_eq!(pod.metadata.name.as_deref(), Some("box"));
            let status = status_of(&plan);
            assert!(status.condition(FINISHED).is_none(), "{status:?}");
            assert_condition(status, SUSPENDED, "False", REASON_NOT_SUSPENDED);
        }
    }
}

#[test]
fn suspend_deletes_the_pod_keeps_service_and_pvcs_and_resume_recreates_it() {
    for version in VERSIONS {
        let mut world = World::new(version)
            .with_spec("service", json!(true))
            .with_spec("volumeClaimTemplates", json!([{ "metadata": { "name": "data" }, "spec": {} }]));
        world.step();
        world.pod_running();
        world.step();

        world.suspend(true);
        world.now += SignedDuration::from_secs(10);
        let plan = world.step();
        assert!(plan.actions.contains(&Action::DeletePod { name: "box".into() }));
        assert!(plan.actions.contains(&Action::SetPodNameAnnotation(None)));
        assert!(!plan.actions.iter().any(|a| matches!(a, Action::DeleteService { .. })));
        let status = status_of(&plan);
        assert_condition(status, SUSPENDED, "False", REASON_POD_TERMINATING);
        assert_condition(status, READY, "False", REASON_SANDBOX_SUSPENDED);
        assert_eq!(condition(status, READY).message, "Sandbox is suspending");

        // While the pod terminates, it is not deleted again.
        let plan = world.step();
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);

        world.pod_gone();
        let plan = world.step();
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);
        let status = status_of(&plan);
        assert_condition(status, SUSPENDED, "True", REASON_POD_TERMINATED);
        assert_eq!(condition(status, READY).message, "Sandbox is suspended");
        assert_eq!(status.pod_ips, None);
        assert_eq!(status.node_name, None);
        assert_eq!(status.service.as_deref(), Some("box"));
        assert!(world.service.is_some());
        assert!(world.pvcs.contains_key("data-box"));
        if version == SandboxVersion::V1alpha1 {
            assert_eq!(status.replicas, Some(0));
        }

        world.suspend(false);
        world.now += SignedDuration::from_secs(10);
        let plan = world.step();
        assert_eq!(created_pod(&plan).and_then(|p| p.metadata.name.as_deref()), Some("box"));
        let status = status_of(&plan);
        assert_condition(status, SUSPENDED, "False", REASON_NOT_SUSPENDED);
        assert_eq!(condition(status, SUSPENDED).last_transition_time, format_time(world.now));
        assert_condition(status, READY, "False", REASON_DEPENDENCIES_NOT_READY);
        assert_eq!(world.annotations.get(POD_NAME_ANNOTATION).map(String::as_str), Some("box"));
    }
}

#[test]
fn suspend_refuses_to_delete_a_pod_it_does_not_own() {
    let mut world = World::new(SandboxVersion::V1beta1);
    world.suspend(true);
    world.pod = Some(foreign_pod("box", None, false));
    let plan = world.plan();
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::DeletePod { .. })));
    assert_condition(status_of(&plan), SUSPENDED, "False", REASON_POD_NOT_OWNED);
}

#[test]
fn v1alpha1_ignores_operating_mode_and_v1beta1_ignores_replicas() {
    let alpha = World::new(SandboxVersion::V1alpha1).with_spec("operatingMode", json!("Suspended"));
    assert!(created_pod(&alpha.plan()).is_some());
    let beta = World::new(SandboxVersion::V1beta1).with_spec("replicas", json!(0));
    assert!(created_pod(&beta.plan()).is_some());
    let alpha = World::new(SandboxVersion::V1alpha1).with_spec("replicas", json!(0));
    let plan = alpha.plan();
    assert!(created_pod(&plan).is_none());
    assert_condition(status_of(&plan), SUSPENDED, "True", REASON_POD_TERMINATED);
}

#[test]
fn shutdown_time_requeues_at_the_remaining_time_but_at_least_two_seconds() {
    let world = World::new(SandboxVersion::V1beta1).with_spec("shutdownTime", json!("2026-03-01T10:05:00Z"));
    assert_eq!(world.plan().requeue_after, Some(Duration::from_secs(300)));
    let world = World::new(SandboxVersion::V1beta1).with_spec("shutdownTime", json!("2026-03-01T10:00:01Z"));
    assert_eq!(world.plan().requeue_after, Some(MIN_EXPIRY_RECHECK));
    assert!(created_pod(&world.plan()).is_some(), "not expired yet");
}

#[test]
fn expiry_with_retain_marks_first_then_removes_pod_and_service_and_wipes_status() {
    for version in VERSIONS {
        let mut world = World::new(version)
            .with_spec("service", json!(true))
            .with_spec("shutdownTime", json!("2026-03-01T10:05:00Z"));
        world.step();
        world.pod_running();
        world.step();

        world.now = "2026-03-01T10:05:01Z".parse().expect("time");
        let plan = world.step();
        assert!(plan.actions.is_empty(), "first only the condition: {:?}", plan.actions);
        assert_eq!(plan.requeue_after, Some(Duration::ZERO));
        let status = status_of(&plan);
        assert_condition(status, READY, "False", REASON_SANDBOX_EXPIRED);
        assert!(status.condition(POD_SCHEDULED).is_none());

        let plan = world.step();
        assert!(plan.actions.contains(&Action::DeletePod { name: "box".into() }));
        assert!(plan.actions.contains(&Action::DeleteService { name: "box".into() }));
        assert!(!plan.actions.contains(&Action::DeleteSandbox));
        let status = status_of(&plan);
        assert_condition(status, READY, "False", REASON_SANDBOX_EXPIRED);
        assert_condition(status, SUSPENDED, "False", REASON_NOT_SUSPENDED);
        let wiped = SandboxStatus { conditions: status.conditions.clone(), ..SandboxStatus::default() };
        assert_eq!(*status, wiped);
        assert_eq!(plan.requeue_after, None);

        // Once everything is gone the expired Sandbox stays quiet and gets no new pod.
        world.pod_gone();
        world.now += SignedDuration::from_secs(3600);
        let observed = world.stored_status();
        let plan = world.step();
        assert!(plan.actions.is_empty(), "{:?}", plan.actions);
        assert_eq!(status_merge_patch(version, &observed, status_of(&plan)), None);
    }
}

#[test]
fn expiry_with_delete_policy_deletes_the_sandbox() {
    for version in VERSIONS {
        let mut world = World::new(version)
            .with_spec("shutdownPolicy", json!("Delete"))
            .with_spec("shutdownTime", json!("2026-03-01T10:05:00Z"));
        world.step();
        world.now = "2026-03-01T10:06:00Z".parse().expect("time");
        world.step();
        let plan = world.step();
        assert!(plan.actions.contains(&Action::DeletePod { name: "box".into() }));
        assert_eq!(plan.actions.last(), Some(&Action::DeleteSandbox));
        assert_eq!(plan.status, None);
        assert!(world.gone);
    }
}

#[test]
fn a_shutdown_time_already_past_at_creation_never_creates_a_pod() {
    for version in VERSIONS {
        for policy in ["Retain", "Delete"] {
            let mut world = World::new(version)
                .with_spec("shutdownTime", json!("2026-03-01T09:00:00Z"))
                .with_spec("shutdownPolicy", json!(policy))
                .with_spec("service", json!(true));
            for _ in 0..3 {
                let plan = world.step();
                assert!(
                    !plan.actions.iter().any(|a| matches!(a, Action::CreatePod(_) | Action::CreateService(_))),
                    "{:?}",
                    plan.actions
                );
            }
            assert!(world.pod.is_none());
            if policy == "Retain" {
                assert_condition(&world.stored_status(), READY, "False", REASON_SANDBOX_EXPIRED);
            } else {
                assert!(world.gone);
            }
        }
    }
}

#[test]
fn moving_shutdown_time_forward_unexpires_a_retained_sandbox() {
    for version in VERSIONS {
        let mut world = World::new(version).with_spec("shutdownTime", json!("2026-03-01T09:00:00Z"));
        world.step();
        world.step();
        assert!(world.pod.is_none());

        world.set_spec("shutdownTime", json!("2026-03-01T11:00:00Z"));
        let plan = world.step();
        assert!(created_pod(&plan).is_some());
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(3600)));
        let status = status_of(&plan);
        assert_condition(status, READY, "False", REASON_DEPENDENCIES_NOT_READY);
        assert_eq!(status.selector, Some(format!("{NAME_HASH_LABEL}={}", hash())));

        world.pod_running();
        assert_condition(&world.step().status.expect("status"), READY, "True", REASON_DEPENDENCIES_READY);
    }
}

#[test]
fn transition_time_moves_only_when_the_status_flips() {
    let mut world = World::new(SandboxVersion::V1beta1);
    world.step();
    let first = condition(&world.stored_status(), READY).clone();
    world.now += SignedDuration::from_secs(20);
    world.generation += 1;
    let status = world.step().status.expect("status");
    let same = condition(&status, READY);
    assert_eq!(same.last_transition_time, first.last_transition_time);
    assert_eq!(same.observed_generation, Some(world.generation));
    world.pod_running();
    world.now += SignedDuration::from_secs(20);
    let status = world.step().status.expect("status");
    assert_eq!(condition(&status, READY).last_transition_time, format_time(world.now));
}

#[test]
fn several_owned_pods_are_refused() {
    let mut world = World::new(SandboxVersion::V1beta1).with_spec("service", json!(true));
    world.pod = Some(owned_pod("box"));
    world.extra_pods = vec![owned_pod("box-old")];
    let plan = world.plan();
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    let status = status_of(&plan);
    assert_condition(status, READY, "False", REASON_MULTIPLE_PODS);
    assert!(condition(status, READY).message.contains("multiple Pods (2)"));
    assert_condition(status, POD_SCHEDULED, "Unknown", REASON_POD_SCHEDULING_UNKNOWN);
}

#[test]
fn foreign_pods_are_refused_and_labelled_unowned_pods_adopted() {
    let mut world = World::new(SandboxVersion::V1beta1);
    world.pod = Some(foreign_pod("box", Some("rs-uid"), true));
    let plan = world.plan();
    assert!(created_pod(&plan).is_none());
    let status = status_of(&plan);
    assert_condition(status, READY, "False", REASON_RECONCILER_ERROR);
    assert!(condition(status, READY).message.contains("owned by ReplicaSet/other"));

    world.pod = Some(foreign_pod("box", None, false));
    let plan = world.plan();
    assert!(created_pod(&plan).is_none());
    assert_condition(status_of(&plan), READY, "False", REASON_RECONCILER_ERROR);

    world.pod = Some(with_status(foreign_pod("box", None, true), "Running", true, Some("10.0.0.9")));
    let plan = world.plan();
    let patch = plan
        .actions
        .iter()
        .find_map(|a| match a {
            Action::PatchPod { name, patch } if name == "box" => Some(patch),
            _ => None,
        })
        .expect("the labelled pod is adopted");
    assert_eq!(patch["metadata"]["ownerReferences"][0]["uid"], UID);
    assert!(plan.actions.contains(&Action::SetPodNameAnnotation(Some("box".into()))));
    assert_condition(status_of(&plan), READY, "True", REASON_DEPENDENCIES_READY);
}

#[test]
fn an_owned_pod_missing_its_hash_label_gets_it_back() {
    let mut world = World::new(SandboxVersion::V1beta1);
    let mut pod = owned_pod("box");
    pod.metadata.labels = None;
    world.pod = Some(pod);
    world.annotations.insert(POD_NAME_ANNOTATION.into(), "box".into());
    let plan = world.plan();
    assert_eq!(plan.actions.len(), 1, "{:?}", plan.actions);
    assert!(
        matches!(&plan.actions[0], Action::PatchPod { patch, .. } if patch["metadata"]["labels"][NAME_HASH_LABEL] == hash())
    );
}

#[test]
fn the_owned_pod_wins_over_a_stale_annotation() {
    let mut world = World::new(SandboxVersion::V1beta1);
    world.annotations.insert(POD_NAME_ANNOTATION.into(), "gone-pod".into());
    world.pod = None;
    world.extra_pods = vec![with_status(owned_pod("box"), "Running", true, Some("10.0.0.3"))];
    let plan = world.plan();
    assert!(created_pod(&plan).is_none());
    assert!(plan.actions.contains(&Action::SetPodNameAnnotation(Some("box".into()))));
    assert_condition(status_of(&plan), READY, "True", REASON_DEPENDENCIES_READY);
}

#[test]
fn pod_scheduled_mirrors_the_pod_including_unschedulable() {
    let mut world = World::new(SandboxVersion::V1beta1);
    world.step();
    let mut pod = world.pod.take().expect("pod");
    pod.status = Some(
        serde_json::from_value(json!({
            "phase": "Pending",
            "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes are available"
            }]
        }))
        .expect("pod status"),
    );
    world.pod = Some(pod);
    let status = world.plan().status.expect("status");
    assert_condition(&status, POD_SCHEDULED, "False", "Unschedulable");
    assert_eq!(condition(&status, POD_SCHEDULED).message, "0/1 nodes are available");
    assert_condition(&status, READY, "False", REASON_DEPENDENCIES_NOT_READY);
}

#[test]
fn a_sandbox_being_deleted_is_left_alone() {
    let mut world = World::new(SandboxVersion::V1beta1);
    world.deleting = true;
    assert_eq!(world.plan(), Plan::default());
}

#[test]
fn an_unusable_spec_is_reported_without_acting() {
    let cases = [
        (SandboxVersion::V1alpha1, "replicas", json!(2)),
        (SandboxVersion::V1beta1, "operatingMode", json!("Paused")),
        (SandboxVersion::V1beta1, "shutdownTime", json!("tomorrow")),
        (SandboxVersion::V1beta1, "podTemplate", Value::Null),
    ];
    for (version, key, value) in cases {
        let world = World::new(version).with_spec(key, value);
        let plan = world.plan();
        assert!(plan.actions.is_empty(), "{key}");
        assert_condition(status_of(&plan), READY, "False", REASON_RECONCILER_ERROR);
    }
}

#[test]
fn a_failed_pod_creation_shows_as_reconciler_error_with_unknown_pod() {
    for version in VERSIONS {
        let world = World::new(version);
        let failure = Failure { pod_unknown: true, message: "creating pod box: quota exceeded".into() };
        let status = status_after_failure(&world.observed(), &failure).expect("status");
        assert_condition(&status, READY, "False", REASON_RECONCILER_ERROR);
        assert_eq!(condition(&status, READY).message, "Error seen: creating pod box: quota exceeded");
        assert_condition(&status, POD_SCHEDULED, "Unknown", REASON_POD_SCHEDULING_UNKNOWN);
        assert_eq!(status.selector, None);
        if version == SandboxVersion::V1alpha1 {
            assert_eq!(status.replicas, Some(0));
        }
    }
}

#[test]
fn a_failed_expiry_cleanup_leaves_the_status_alone() {
    let mut world = World::new(SandboxVersion::V1beta1).with_spec("shutdownTime", json!("2026-03-01T09:00:00Z"));
    world.step();
    let failure = Failure { pod_unknown: false, message: "deleting pod box: timeout".into() };
    assert_eq!(status_after_failure(&world.observed(), &failure), None);
}

#[test]
fn the_status_patch_carries_only_the_versions_fields_and_clears_with_null() {
    let observed = SandboxStatus {
        selector: Some("s".into()),
        pod_ips: Some(vec!["10.0.0.1".into()]),
        node_name: Some("node-a".into()),
        ..SandboxStatus::default()
    };
    let desired = SandboxStatus { selector: Some("s".into()), replicas: Some(0), ..SandboxStatus::default() };
    let beta = status_merge_patch(SandboxVersion::V1beta1, &observed, &desired).expect("a change");
    assert_eq!(beta["status"]["podIPs"], Value::Null);
    assert_eq!(beta["status"]["nodeName"], Value::Null);
    assert!(beta["status"].get("nodeName").is_some());
    assert!(beta["status"].get("replicas").is_none());
    let alpha = status_merge_patch(SandboxVersion::V1alpha1, &observed, &desired).expect("a change");
    assert!(alpha["status"].get("nodeName").is_none());
    assert_eq!(alpha["status"]["replicas"], 0);
    assert_eq!(status_merge_patch(SandboxVersion::V1beta1, &desired, &desired), None);
}

#[test]
fn stored_statuses_parse_leniently() {
    let status = SandboxStatus::from_value(Some(&json!({
        "selector": "", "podIPs": [], "serviceFQDN": "", "conditions": null
    })));
    assert_eq!(status, SandboxStatus::default());
    assert_eq!(SandboxStatus::from_value(Some(&json!("garbage"))), SandboxStatus::default());
    assert_eq!(SandboxStatus::from_value(None), SandboxStatus::default());
}

#[test]
fn versions_parse_and_prefer_v1beta1() {
    assert_eq!(SandboxVersion::PREFERENCE[0], SandboxVersion::V1beta1);
    assert_eq!(SandboxVersion::parse("v1alpha1"), Some(SandboxVersion::V1alpha1));
    assert_eq!(SandboxVersion::parse("v2"), None);
    assert_eq!(SandboxVersion::V1beta1.api_version(), "agents.x-k8s.io/v1beta1");
}
