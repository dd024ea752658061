//! Pod Security Admission, end to end: in a namespace labelled
//! `pod-security.kubernetes.io/enforce=restricted` the embedded cluster refuses what
//! kube-apiserver refuses, the provider's default pods still run there, and the host's default
//! pod-security ceiling refuses exactly the pods the namespace refuses.

use std::sync::Arc;
use std::time::Duration;

use embedded_cluster::{PROVIDER_USER, SandboxVersions};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use provider_host::bindings::kube::{KubeError, ResourceType};
use provider_host::{KubeHost, Policy};
use serde_json::{Value, json};
use tests::*;

/// A pod spec the restricted level accepts, with `container` merged into its container's
/// `securityContext` and `pod` into the pod's.
fn pod_spec(pod: Value, container: Value) -> Value {
    let mut spec = json!({"restartPolicy": "Never", "automountServiceAccountToken": false,
        "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]});
    for (path, extra) in [("/securityContext", pod), ("/containers/0/securityContext", container)] {
        if let (Some(t), Some(e)) = (spec.pointer_mut(path).and_then(Value::as_object_mut), extra.as_object()) {
            t.extend(e.clone());
        }
    }
    spec
}

/// The tester's pod: root, every capability, no seccomp.
fn hostile() -> Value {
    pod_spec(
        json!({"runAsUser": 0, "runAsNonRoot": false, "seccompProfile": {"type": "Unconfined"}}),
        json!({"runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": true,
            "capabilities": {"add": ["ALL"]}}),
    )
}

/// Sends a pod straight to the API server as the cluster admin: the namespace's admission
/// verdict, `Err` with the refusal's message.
async fn admitted(h: &Harness, name: &str, spec: &Value) -> Result<(), String> {
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pod");
    match Api::<Pod>::namespaced(h.admin.clone(), NAMESPACE).create(&PostParams::default(), &pod).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"), "{status:?}");
            Err(status.message)
        }
        Err(other) => panic!("creating pod {name}: {other}"),
    }
}

#[tokio::test]
async fn a_namespace_enforcing_restricted_refuses_what_the_ceiling_refuses() {
    let h = Harness::start(SandboxVersions::Both).await;
    let labels = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    Api::<Namespace>::all(h.admin.clone())
        .patch(NAMESPACE, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .expect("label the namespace");

    // The provider's own pods meet the level: both backends still acquire.
    for backend in ["job", "sandbox"] {
        let lease = h.host.acquire(request(&config(backend, json!({})), &format!("psa-{backend}"))).await;
        let lease = lease.unwrap_or_else(|e| panic!("{backend} acquire under enforce=restricted: {e:?}"));
        assert!(lease.pod_name.is_some(), "{backend}: {lease:?}");
    }

    // A root pod sent directly is refused in kube-apiserver's words.
    let refusal = admitted(&h, "root", &hostile()).await.expect_err("a root pod is refused");
    assert_eq!(
        refusal,
        "pods \"root\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false \
         (container \"main\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities \
         (container \"main\" must set securityContext.capabilities.drop=[\"ALL\"]; container \"main\" must not \
         include \"ALL\" in securityContext.capabilities.add), runAsNonRoot != true (pod and container \"main\" \
         must not set securityContext.runAsNonRoot=false), runAsUser=0 (pod and container \"main\" must not set \
         runAsUser=0), seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"
    );

    // The host's default ceiling refuses a provider's Job exactly when the namespace refuses its pod.
    let config =
        embedded_cluster::tls::config_from_kubeconfig(&h.cluster.kubeconfig(PROVIDER_USER).expect("kubeconfig"))
            .await
            .expect("provider config");
    let client = provider_host::client_from_config(config).expect("provider client");
    let host = KubeHost::new(client, Arc::new(Policy::kubernetes_default([NAMESPACE])), Duration::from_secs(10));
    let jobs = ResourceType { group: "batch".into(), version: "v1".into(), plural: "jobs".into() };
    let specs = [
        ("hostile", hostile(), true),
        ("net-admin", pod_spec(json!({}), json!({"capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}})), true),
        ("compliant", pod_spec(json!({}), json!({})), false),
    ];
    for (name, spec, refused) in specs {
        let verdict = admitted(&h, name, &spec).await;
        assert_eq!(verdict.is_err(), refused, "{name}: the namespace said {verdict:?}");
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": spec}}});
        match (host.create(&jobs, Some(NAMESPACE), &job.to_string()).await, verdict) {
            (Err(KubeError::Denied(ceiling)), Err(psa)) => {
                // Both name the same reasons; the ceiling joins them with "; ".
                let reasons = psa.split_once("\"restricted:latest\": ").map(|(_, r)| r).unwrap_or_default();
                assert!(ceiling.contains(&reasons.replace("), ", "); ")), "{name}: {ceiling:?} vs {psa:?}");
            }
            (Ok(_), Ok(())) => {}
            (host, psa) => panic!("{name}: the ceiling said {host:?}, the namespace {psa:?}"),
        }
    }
}
