//! Least privilege, end to end: the host runs the provider under exactly the Role that
//! `sandbox-host rbac` generates for the effective policy (a ServiceAccount token authorized by
//! the embedded cluster's RBAC), and a full set of lifecycles on both backends, with the lease
//! inventory, gets no 403 and uses every verb the Role grants. The operator's pod-security ceiling holds against a
//! provider config that asks for root.

use std::collections::BTreeSet;

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ControllerKind, SandboxVersions};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use provider_host::{HostError, ProviderHost};
use serde_json::{Value, json};
use tests::*;

const ACCOUNT: &str = "sandbox-host";

/// Applies the generated RBAC objects as the cluster admin.
async fn apply(h: &Harness, objects: &[Value]) {
    for object in objects {
        let api_version = object["apiVersion"].as_str().expect("apiVersion");
        let kind = object["kind"].as_str().expect("kind");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let plural = format!("{}s", kind.to_lowercase());
        let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
        let namespace = object["metadata"]["namespace"].as_str().expect("namespaced");
        let api: Api<DynamicObject> = Api::namespaced_with(h.admin.clone(), namespace, &resource);
        let typed: DynamicObject = serde_json::from_value(object.clone()).expect("object");
        api.create(&PostParams::default(), &typed).await.unwrap_or_else(|e| panic!("apply {kind}: {e}"));
    }
}

/// The (resource, verb) pairs a Role grants, subresources as `plural/sub`.
fn granted(role: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        for resource in rule["resources"].as_array().expect("resources").iter().filter_map(Value::as_str) {
            for verb in rule["verbs"].as_array().expect("verbs").iter().filter_map(Value::as_str) {
                out.insert((resource.to_string(), verb.to_string()));
            }
        }
    }
    out
}

/// Makes the provider take its slower paths too: the Sandbox turns Ready a little after its
/// pod (so the provider watches the Sandbox), and that watch, and the first watch of a claim,
/// are cut with 410 once (so it re-lists).
fn slow_paths(h: &Harness, user: &str) {
    let faults = h.cluster.faults();
    faults.add(Rule {
        matches: Match {
            verb: Some("patch".into()),
            resource: Some("sandboxes".into()),
            subresource: Some("status".into()),
            user: Some(ControllerKind::Sandbox.user().into()),
            ..Default::default()
        },
        action: Action::Delay { millis: 300 },
        after: 0,
        times: None,
        probability: None,
    });
    // The probe's access check opens a claim watch before the acquire's: cut both.
    for (resource, times) in [("sandboxes", 1), ("sandboxclaims", 2)] {
        faults.add(Rule {
            matches: Match {
                verb: Some("watch".into()),
                resource: Some(resource.into()),
                user: Some(user.into()),
                ..Default::default()
            },
            action: Action::EndWatch { code: Some(410), after_events: 0 },
            after: 0,
            times: Some(times),
            probability: None,
        });
    }
}

/// The warm pool the claim backend's lifecycle claims from, set up as an operator would.
const POOL: &str = "least-pool";

/// Every operation on every backend, a retried (adopting) acquire, and a reusable lease.
async fn lifecycles(host: &ProviderHost) {
    let claim = json!({"claim": {"warmPool": POOL, "template": POOL}});
    for (backend, extra) in [("sandbox", json!({})), ("job", json!({})), ("claim", claim)] {
        let cfg = config(backend, extra);
        assert!(host.probe(&cfg).await.expect("probe").ok);
        assert!(host.validate_config(&cfg).await.expect("validate-config").ok);
        let lease = host.acquire(request(&cfg, &format!("least-{backend}"))).await.expect("acquire");
        // A retried acquire adopts what the first made and brings the Secret's values up to date.
        let again = host.acquire(request(&cfg, &format!("least-{backend}"))).await.expect("retried acquire");
        assert_eq!(again.workload_uid, lease.workload_uid);
        // The lease inventory (`sandbox-host leases list`) reads it under the same Role.
        let listed = host.leases(&[NAMESPACE.to_string()]).await.expect("leases");
        assert!(listed.iter().any(|l| l.provider_lease_id == lease.provider_lease_id), "{listed:?}");
        let r = lease_ref(&lease, &cfg);
        host.resume_check(r.clone()).await.expect("resume-check");
        host.renew(r.clone(), jiff::Timestamp::now().as_millisecond() + 1_800_000).await.expect("renew");
        let command = serde_json::from_value(json!({"command": "true"})).expect("exec request");
        assert_eq!(host.execute(r.clone(), command).await.expect("execute").exit_code, Some(0));
        host.release(r.clone()).await.expect("release");
        host.destroy(r).await.expect("destroy");
    }
    let cfg = config("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
    let mut req = request(&cfg, "least-reuse");
    req.reusable = true;
    let lease = host.acquire(req).await.expect("acquire reusable");
    let r = lease_ref(&lease, &cfg);
    host.release(r.clone()).await.expect("suspend");
    host.resume_check(r.clone()).await.expect("resume");
    host.destroy(r).await.expect("destroy");
}

#[tokio::test]
async fn the_generated_role_is_exactly_what_the_host_and_provider_use() {
    let h = Harness::start(SandboxVersions::Both).await;
    let objects =
        provider_host::rbac::manifests(&h.host.grants().effective, NAMESPACE, ACCOUNT).expect("RBAC manifests");
    apply(&h, &objects).await;
    let role = objects.iter().find(|o| o["kind"] == "Role").expect("a Role");
    let token = h.cluster.service_account_token(NAMESPACE, ACCOUNT).await.expect("token");
    let user = format!("system:serviceaccount:{NAMESPACE}:{ACCOUNT}");
    let host = load_host(&h.cluster.kubeconfig_for_token(&user, &token).expect("kubeconfig")).await;
    slow_paths(&h, &user);
    let pool = contract_suite::warm_pool::PoolSpec {
        namespace: NAMESPACE.into(),
        name: POOL.into(),
        template: POOL.into(),
        replicas: 1,
        image: "busybox:1.36".into(),
    };
    contract_suite::warm_pool::apply(&h.admin, &pool).await.expect("the warm pool");

    let mark = h.cluster.requests().mark();
    lifecycles(&host).await;
    let calls: Vec<_> = h.cluster.requests().since(mark).into_iter().filter(|e| e.user == user).collect();
    let refused: Vec<String> =
        calls.iter().filter(|e| e.code == 403).map(|e| format!("{} {} {}", e.verb, e.resource, e.name)).collect();
    assert!(refused.is_empty(), "the generated Role refused calls: {refused:?}");
    let used: BTreeSet<(String, String)> = calls
        .iter()
        .filter(|e| !e.resource.is_empty())
        .map(|e| {
            let resource =
                if e.subresource.is_empty() { e.resource.clone() } else { format!("{}/{}", e.resource, e.subresource) };
            (resource, e.verb.clone())
        })
        .collect();
    let granted = granted(role);
    // An exec is authorized as `create pods/exec` from Kubernetes 1.31 on (this cluster) and as
    // `get` before: the Role grants both, and only one can be used on any one cluster.
    let older_servers = ("pods/exec".to_string(), "get".to_string());
    let unused: Vec<_> = granted.difference(&used).filter(|g| **g != older_servers).collect();
    // Probe asks which writes the Role allows; every authenticated user may (system:basic-user).
    let review = ("selfsubjectaccessreviews".to_string(), "create".to_string());
    let outside: Vec<_> = used.difference(&granted).filter(|u| **u != review).collect();
    assert!(outside.is_empty(), "calls outside the Role (each would be a 403): {outside:?}");
    assert!(unused.is_empty(), "the Role grants verbs nothing used: {unused:?} (used: {used:?})");
}

/// The tester's hostile `security` config (a company admin's, not the operator's): the host
/// refuses the workload under its default pod-security ceiling before it is sent, naming each
/// check, and acquire creates nothing on either backend.
#[tokio::test]
async fn a_config_asking_for_root_and_every_capability_is_refused_and_creates_nothing() {
    let h = Harness::start(SandboxVersions::Both).await;
    let hostile = json!({"security": {"runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": true,
        "capabilities": {"add": ["ALL"]}, "seccompProfile": "Unconfined"}});
    for backend in ["job", "sandbox"] {
        let cfg = config(backend, hostile.clone());
        let mark = h.cluster.requests().mark();
        let err = match h.host.acquire(request(&cfg, &format!("root-{backend}"))).await {
            Err(HostError::Provider(e)) => e,
            other => panic!("{backend}: expected the host's refusal, got {other:?}"),
        };
        assert_eq!((err.kind(), err.retryable()), ("denied", false), "{err:?}");
        for named in ["pod-security", "\"runAsUser\"", "\"runAsNonRoot\"", "\"capabilities_restricted\""] {
            assert!(err.message().contains(named), "{backend}: {err} should name {named}");
        }
        let writes = h.provider_writes_since(mark);
        assert!(writes.is_empty(), "{backend}: nothing was written: {writes:?}");
    }
    let jobs: Api<Job> = Api::namespaced(h.admin.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(h.admin.clone(), NAMESPACE);
    assert!(jobs.list(&Default::default()).await.expect("jobs").items.is_empty());
    assert!(secrets.list(&Default::default()).await.expect("secrets").items.is_empty());
    assert!(sandboxes(&h, "v1beta1").list(&Default::default()).await.expect("sandboxes").items.is_empty());
}
