use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::resources::SandboxVersions;

/// A store holding one namespace, `ns`, with the given labels.
struct Namespace(Value);

impl Objects for Namespace {
    fn object(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        (storage == "namespaces" && namespace.is_empty() && name == "ns").then(|| Arc::new(self.0.clone()))
    }

    fn objects(&self, _: &str, _: Option<&str>) -> Vec<Arc<Value>> {
        Vec::new()
    }
}

fn labelled(labels: Value) -> Namespace {
    Namespace(json!({"metadata": {"name": "ns", "labels": labels}}))
}

fn rt(plural: &str) -> ResourceType {
    crate::resources::served(SandboxVersions::Both).into_iter().find(|r| r.plural == plural).expect("served")
}

fn pod(spec: Value) -> Value {
    json!({"metadata": {"name": "x", "namespace": "ns"}, "spec": spec})
}

/// A container that sets nothing: it fails the four restricted checks and no baseline one.
fn bare() -> Value {
    pod(json!({"containers": [{"name": "c", "image": "busybox:1.36"}]}))
}

fn compliant() -> Value {
    pod(json!({"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "busybox:1.36", "securityContext":
            {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}))
}

/// Fails baseline too: a privileged container.
fn privileged() -> Value {
    pod(json!({"containers": [{"name": "c", "image": "busybox:1.36", "securityContext": {"privileged": true}}]}))
}

const BARE_REASONS: &str = "allowPrivilegeEscalation != false (container \"c\" must set \
    securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must set \
    securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"c\" must set \
    securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must set \
    securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

fn create(ns: &Namespace, plural: &str, obj: &Value) -> Result<Vec<String>, ApiError> {
    admit(ns, &rt(plural), None, "ns", "x", obj, None)
}

#[test]
fn restricted_refuses_with_upstreams_exact_message() {
    let ns = labelled(json!({"pod-security.kubernetes.io/enforce": "restricted"}));
    let err = create(&ns, "pods", &bare()).expect_err("refused");
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        err.message,
        format!("pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": {BARE_REASONS}")
    );
    assert_eq!(err.details, Some(json!({"name": "x", "kind": "pods"})));
    assert_eq!(create(&ns, "pods", &compliant()).expect("a compliant pod is admitted"), Vec::<String>::new());
}

#[test]
fn each_level_refuses_what_it_forbids() {
    let level = |l: &str| labelled(json!({"pod-security.kubernetes.io/enforce": l}));
    let baseline = level("baseline");
    assert!(create(&baseline, "pods", &bare()).is_ok(), "baseline allows what only restricted forbids");
    let err = create(&baseline, "pods", &privileged()).expect_err("baseline forbids privileged");
    assert!(err.message.contains("violates PodSecurity \"baseline:latest\": privileged (container \"c\""), "{err:?}");
    for anything in [bare(), privileged()] {
        assert!(create(&level("privileged"), "pods", &anything).is_ok());
        assert!(create(&labelled(json!({})), "pods", &anything).is_ok(), "no labels: privileged");
    }
}

#[test]
fn warn_admits_with_a_warning_and_enforce_refuses_without_one() {
    let warn_only = labelled(json!({"pod-security.kubernetes.io/warn": "restricted"}));
    let warned = create(&warn_only, "pods", &bare()).expect("warn never refuses");
    assert_eq!(warned, vec![format!("would violate PodSecurity \"restricted:latest\": {BARE_REASONS}")]);
    let both = labelled(json!({"pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "v1.30"}));
    let warned = create(&both, "pods", &bare()).expect("baseline admits it");
    assert_eq!(warned, vec![format!("would violate PodSecurity \"restricted:v1.30\": {BARE_REASONS}")]);
    assert!(create(&both, "pods", &privileged()).is_err());
}

#[test]
fn workloads_are_warned_about_never_refused() {
    let ns = labelled(json!({"pod-security.kubernetes.io/enforce": "restricted"}));
    let job = json!({"metadata": {"name": "x", "namespace": "ns"}, "spec": {"template": {"spec": bare()["spec"]}}});
    let warned = create(&ns, "jobs", &job).expect("a Job is never refused");
    assert_eq!(warned, vec![format!("would violate PodSecurity \"restricted:latest\": {BARE_REASONS}")]);
    assert!(create(&ns, "secrets", &job).expect("not a workload").is_empty());
}

#[test]
fn other_labels_are_ignored_and_bad_values_are_restricted() {
    for labels in [
        json!({"enforce": "restricted"}),
        json!({"pod-security.example.com/enforce": "restricted"}),
        json!({"pod-security.kubernetes.io/audit": "restricted"}),
    ] {
        assert!(create(&labelled(labels.clone()), "pods", &privileged()).is_ok(), "{labels}");
    }
    let pinned = labelled(json!({"pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "v1.25"}));
    let err = create(&pinned, "pods", &bare()).expect_err("refused");
    assert!(err.message.contains("violates PodSecurity \"restricted:v1.25\": "), "{err:?}");
    let typo = labelled(json!({"pod-security.kubernetes.io/enforce": "strict",
        "pod-security.kubernetes.io/enforce-version": "1.25"}));
    let err = create(&typo, "pods", &bare()).expect_err("an unparsable level is restricted");
    assert!(err.message.contains("\"restricted:latest\""), "{err:?}");
}

#[test]
fn pod_updates_are_checked_only_when_an_image_changes() {
    let ns = labelled(json!({"pod-security.kubernetes.io/enforce": "restricted"}));
    let old = bare();
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    let pods = rt("pods");
    assert!(admit(&ns, &pods, None, "ns", "x", &relabelled, Some(&old)).is_ok(), "metadata only");
    let mut new_image = old.clone();
    new_image["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    assert!(admit(&ns, &pods, None, "ns", "x", &new_image, Some(&old)).is_err());
    assert!(admit(&ns, &pods, Some("status"), "ns", "x", &new_image, Some(&old)).is_ok());
    let mut debugged = old.clone();
    debugged["spec"]["ephemeralContainers"] = json!([{"name": "d", "image": "busybox:1.36"}]);
    assert!(admit(&ns, &pods, None, "ns", "x", &debugged, Some(&old)).is_err(), "an ephemeral container added");
}
