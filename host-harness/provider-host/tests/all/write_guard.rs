//! What a provider may write, proved by the host before a create or patch is sent: no Secret
//! the token controller would fill with a ServiceAccount's token, no pod that mounts a foreign
//! Secret, runs as another ServiceAccount or holds a token, no Job that adopts pods, no
//! ownerReference to a foreign object, no patch that changes any of that later.

use std::sync::Arc;
use std::time::Duration;

use contract::k8s::pod_security::Level;
use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{EmbeddedCluster, PROVIDER_USER};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use provider_host::KubeHost;
use provider_host::bindings::kube::{KubeError, PatchType};
use provider_host::pod_security_ceiling::PodSecurityCeiling;
use provider_host::policy::Policy;
use serde_json::{Value, json};

use crate::support::*;

async fn provider_host(c: &EmbeddedCluster, policy: Policy) -> KubeHost {
    KubeHost::new(client_for(c, PROVIDER_USER).await, Arc::new(policy), Duration::from_secs(10))
}

/// A Job whose pod spec is `spec` merged over a valid, token-free, restricted one.
fn job_with(name: &str, spec: Value) -> String {
    let mut pod = json!({"restartPolicy": "Never", "automountServiceAccountToken": false,
        "securityContext": restricted_pod_security(),
        "containers": [{"name": "main", "image": "busybox:1.36", "securityContext": restricted_container_security()}]});
    if let (Some(p), Some(extra)) = (pod.as_object_mut(), spec.as_object()) {
        p.extend(extra.clone());
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": {"spec": pod}}})
        .to_string()
}

fn refused(result: Result<String, KubeError>, expected: &str) {
    match result {
        Err(KubeError::Denied(m)) => assert!(m.contains(expected), "{m:?} should say {expected:?}"),
        other => panic!("expected a denial saying {expected:?}, got {other:?}"),
    }
}

fn creates_since(c: &EmbeddedCluster, mark: u64) -> Vec<String> {
    requests_by(c, PROVIDER_USER, mark).into_iter().filter(|r| r.starts_with("create")).collect()
}

#[tokio::test]
async fn no_secret_that_would_hold_a_service_account_token() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    let mark = c.requests().mark();
    let typed = json!({"metadata": {"name": "t1"}, "type": "kubernetes.io/service-account-token"});
    refused(h.create(&secrets(), Some(NS), &typed.to_string()).await, "only Opaque Secrets");
    let asking = json!({"metadata": {"name": "t2", "annotations": {"kubernetes.io/service-account.name": "default"}}});
    refused(h.create(&secrets(), Some(NS), &asking.to_string()).await, "ServiceAccount's token");
    assert!(creates_since(&c, mark).is_empty(), "nothing was sent");
    h.create(&secrets(), Some(NS), &secret("plain", json!({}))).await.expect("an Opaque Secret is fine");
}

#[tokio::test]
async fn pods_refer_only_to_the_installations_secrets() {
    let c = cluster().await;
    let policy = Policy { pod_secrets: vec!["regcred".into()], ..test_policy() };
    let h = provider_host(&c, policy).await;
    let theirs: Secret =
        serde_json::from_value(json!({"metadata": {"name": "their-db"}, "stringData": {"p": "w"}})).expect("secret");
    Api::<Secret>::namespaced(client_for(&c, embedded_cluster::ADMIN_USER).await, NS)
        .create(&PostParams::default(), &theirs)
        .await
        .expect("a foreign Secret");
    h.create(&secrets(), Some(NS), &secret("mine", json!({}))).await.expect("an owned Secret");

    let env = |name: &str| {
        json!({"containers": [{"name": "main", "image": "busybox:1.36", "securityContext": restricted_container_security(),
        "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": name, "key": "k"}}}]}]})
    };
    let mark = c.requests().mark();
    refused(h.create(&jobs(), Some(NS), &job_with("j1", env("their-db"))).await, "not \"their-db\"");
    let volume = json!({"volumes": [{"name": "v", "secret": {"secretName": "their-db"}}]});
    refused(h.create(&jobs(), Some(NS), &job_with("j2", volume)).await, "their-db");
    let pull = json!({"imagePullSecrets": [{"name": "their-db"}]});
    refused(h.create(&jobs(), Some(NS), &job_with("j3", pull)).await, "their-db");
    // A pull secret is the operator's to name: neither the installation's own Secret (another
    // lease's) nor a name nobody holds yet (which anyone could create before the pod pulls).
    let owned_pull = json!({"imagePullSecrets": [{"name": "mine"}]});
    refused(h.create(&jobs(), Some(NS), &job_with("j4", owned_pull)).await, "pod-secrets");
    let future_pull = json!({"imagePullSecrets": [{"name": "not-yet"}]});
    refused(h.create(&jobs(), Some(NS), &job_with("j5", future_pull)).await, "pod-secrets");
    assert!(creates_since(&c, mark).is_empty(), "nothing was sent");

    h.create(&jobs(), Some(NS), &job_with("ok-1", env("mine"))).await.expect("an owned Secret");
    h.create(&jobs(), Some(NS), &job_with("ok-2", env("not-yet"))).await.expect("the lease's own, created next");
    let allowed = json!({"imagePullSecrets": [{"name": "regcred"}]});
    h.create(&jobs(), Some(NS), &job_with("ok-3", allowed)).await.expect("named by the policy");
}

/// A referenced Secret the host could not read is a check that failed, not a foreign Secret:
/// an API server that answers the read with 422 or 500 gets the create refused as the failure
/// it was (nothing sent), so the provider does not report a policy denial for a blip; a name
/// that cannot be a Secret's is still denied without a request.
#[tokio::test]
async fn a_secret_the_host_cannot_read_fails_the_create_and_is_no_denial() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    let env = |name: &str| {
        json!({"containers": [{"name": "main", "image": "busybox:1.36", "securityContext": restricted_container_security(),
        "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": name, "key": "k"}}}]}]})
    };
    for (code, reason) in [(422, "Invalid"), (500, "InternalError")] {
        let rule = Rule {
            matches: Match { verb: Some("get".into()), resource: Some("secrets".into()), ..Default::default() },
            action: Action::Error { code, reason: reason.into(), message: None, retry_after_seconds: None },
            after: 0,
            times: Some(1),
            probability: None,
        };
        c.faults().add(rule);
        let mark = c.requests().mark();
        match h.create(&jobs(), Some(NS), &job_with(&format!("j-{code}"), env("lease-env"))).await {
            Err(KubeError::Denied(m)) => panic!("{code} on the check is no denial: {m}"),
            Err(_) => {}
            Ok(_) => panic!("{code} on the check let the create through"),
        }
        assert!(creates_since(&c, mark).is_empty(), "nothing was sent after a {code}");
    }
    let mark = c.requests().mark();
    refused(h.create(&jobs(), Some(NS), &job_with("j-bad", env("../x"))).await, "not \"../x\"");
    assert!(requests_by(&c, PROVIDER_USER, mark).is_empty(), "an impossible name costs no request");
}

#[tokio::test]
async fn pods_run_as_no_other_service_account_and_hold_no_token() {
    let c = cluster().await;
    let h = provider_host(&c, Policy { pod_service_accounts: vec!["sandbox-runner".into()], ..test_policy() }).await;
    refused(
        h.create(&jobs(), Some(NS), &job_with("sa-1", json!({"serviceAccountName": "cluster-admin-sa"}))).await,
        "default ServiceAccount",
    );
    refused(
        h.create(&jobs(), Some(NS), &job_with("sa-2", json!({"automountServiceAccountToken": true}))).await,
        "automountServiceAccountToken: false",
    );
    let unset = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sa-3"}, "spec": {"template":
        {"spec": {"restartPolicy": "Never", "securityContext": restricted_pod_security(),
            "containers": [{"name": "main", "image": "busybox:1.36", "securityContext": restricted_container_security()}]}}}});
    refused(h.create(&jobs(), Some(NS), &unset.to_string()).await, "automountServiceAccountToken: false");
    let projected =
        json!({"volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]});
    refused(h.create(&jobs(), Some(NS), &job_with("sa-4", projected)).await, "project a ServiceAccount token");
    h.create(&jobs(), Some(NS), &job_with("sa-5", json!({"serviceAccountName": "sandbox-runner"})))
        .await
        .expect("a ServiceAccount the policy names");
    let open = provider_host(&c, Policy { allow_service_account_tokens: true, ..test_policy() }).await;
    open.create(&jobs(), Some(NS), &unset.to_string()).await.expect("tokens allowed by the policy");
}

#[tokio::test]
async fn no_job_adopts_pods_and_no_owner_reference_names_a_foreign_object() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    let mut adopting: Value = serde_json::from_str(&job_with("adopt", json!({}))).expect("job");
    adopting["spec"]["manualSelector"] = json!(true);
    adopting["spec"]["selector"] = json!({"matchLabels": {"app": "theirs"}});
    refused(h.create(&jobs(), Some(NS), &adopting.to_string()).await, "manualSelector");

    let jobs_api: Api<k8s_openapi::api::batch::v1::Job> =
        Api::namespaced(client_for(&c, embedded_cluster::ADMIN_USER).await, NS);
    let theirs: k8s_openapi::api::batch::v1::Job = serde_json::from_str(&job("theirs", json!({}))).expect("job");
    let their_uid = jobs_api.create(&PostParams::default(), &theirs).await.expect("job").metadata.uid.expect("uid");
    let mine = parse(&h.create(&jobs(), Some(NS), &job("mine", json!({}))).await.expect("job"));
    let owned_by = |name: &str, uid: &str| {
        json!({"metadata": {"name": format!("s-{name}"), "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid}]}})
        .to_string()
    };
    refused(h.create(&secrets(), Some(NS), &owned_by("theirs", &their_uid)).await, "ownerReference");
    let my_uid = mine["metadata"]["uid"].as_str().expect("uid");
    h.create(&secrets(), Some(NS), &owned_by("mine", my_uid)).await.expect("owned by an owned Job");
    refused(h.create(&secrets(), Some(NS), &owned_by("mine", "a-stale-uid")).await, "ownerReference");
}

#[tokio::test]
async fn a_patch_cannot_change_what_a_workload_reaches() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    h.create(&jobs(), Some(NS), &job_with("steady", json!({}))).await.expect("job");
    let mark = c.requests().mark();
    let mount = r#"{"spec":{"template":{"spec":{"volumes":[{"name":"v","secret":{"secretName":"their-db"}}]}}}}"#;
    refused(h.patch(&jobs(), Some(NS), "steady", PatchType::Strategic, mount, None).await, "\"volumes\"");
    let account = r#"[{"op":"add","path":"/spec/template/spec/serviceAccountName","value":"admin"}]"#;
    refused(h.patch(&jobs(), Some(NS), "steady", PatchType::Json, account, None).await, "serviceAccountName");
    assert!(requests_by(&c, PROVIDER_USER, mark).is_empty(), "refused before anything was sent");
    h.patch(&jobs(), Some(NS), "steady", PatchType::Merge, r#"{"spec":{"activeDeadlineSeconds":60}}"#, None)
        .await
        .expect("an expiry is fine");
}

/// The tester's provider configs as the provider renders them (root with every capability and
/// no seccomp; SYS_ADMIN and NET_ADMIN; a keyless toleration onto the control plane): refused
/// under the default ceiling with nothing sent, in a Job's template and a Sandbox's podTemplate
/// alike, and allowed once the operator relaxes what each refusal names.
#[tokio::test]
async fn pods_stay_under_the_operators_pod_security_ceiling() {
    let c = cluster().await;
    let h = provider_host(&c, test_policy()).await;
    let root = json!({"securityContext": {"runAsUser": 0, "runAsNonRoot": false, "seccompProfile": {"type": "Unconfined"}},
        "containers": [{"name": "main", "image": "busybox:1.36", "securityContext": {"runAsUser": 0,
            "runAsNonRoot": false, "allowPrivilegeEscalation": true, "capabilities": {"add": ["ALL"]}}}]});
    let admin = json!({"containers": [{"name": "main", "image": "busybox:1.36", "securityContext":
        {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN", "NET_ADMIN"]}}}]});
    let control_plane =
        json!({"tolerations": [{"operator": "Exists"}], "nodeSelector": {"node-role.kubernetes.io/control-plane": ""}});
    let sandboxes = rt("agents.x-k8s.io", "v1beta1", "sandboxes");
    let sandbox = |name: &str, spec: Value| {
        let job: Value = serde_json::from_str(&job_with(name, spec)).expect("job");
        json!({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": name},
            "spec": {"podTemplate": job["spec"]["template"]}})
        .to_string()
    };

    let mark = c.requests().mark();
    let root_checks = [
        "allowPrivilegeEscalation",
        "capabilities_restricted",
        "runAsNonRoot",
        "runAsUser",
        "seccompProfile_restricted",
    ];
    for check in root_checks {
        refused(h.create(&jobs(), Some(NS), &job_with("root", root.clone())).await, &format!("{check:?}"));
    }
    refused(h.create(&sandboxes, Some(NS), &sandbox("root", root.clone())).await, "pod-security.allow");
    refused(h.create(&jobs(), Some(NS), &job_with("admin", admin.clone())).await, "\"SYS_ADMIN\", \"NET_ADMIN\"");
    refused(h.create(&jobs(), Some(NS), &job_with("cp", control_plane.clone())).await, "toleration without a key");
    assert!(creates_since(&c, mark).is_empty(), "nothing was sent");

    let allowing = |allow: &[&str], level: Level| {
        let pod_security = PodSecurityCeiling {
            level,
            allow: allow.iter().map(|a| a.to_string()).collect(),
            toleration_keys: vec!["*".into()],
            node_selector_keys: vec!["node-role.kubernetes.io/control-plane".into()],
            ..Default::default()
        };
        provider_host(&c, Policy { pod_security, ..test_policy() })
    };
    // Exempting the restricted checks brings back the baseline ones they replace.
    let restricted_only = allowing(&root_checks, Level::Restricted).await;
    refused(
        restricted_only.create(&jobs(), Some(NS), &job_with("root", root.clone())).await,
        "\"capabilities_baseline\"",
    );
    let every = [&root_checks[..], &["capabilities_baseline", "seccompProfile_baseline"]].concat();
    let relaxed = allowing(&every, Level::Restricted).await;
    relaxed.create(&jobs(), Some(NS), &job_with("root", root)).await.expect("the operator allowed each check");
    relaxed.create(&jobs(), Some(NS), &job_with("admin", admin)).await.expect("capabilities allowed");
    relaxed.create(&jobs(), Some(NS), &job_with("cp", control_plane)).await.expect("the keys are the operator's");
}
