//! The host is the security boundary, through the built component: a hand-written lease that
//! points at objects the provider never created (made with kubectl) touches nothing and is
//! never resumable; namespaces come from the operator's policy, never from the provider
//! config, and destroy works from the lease id alone; a Secret someone else made under the
//! lease's name is neither read nor deleted; with the operator's key, an object that carries
//! the managed-by label but not its signature is foreign too.

use embedded_cluster::SandboxVersions;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, PostParams};
use provider_host::HostError;
use provider_host::owner_signature::SIGNATURE_ANNOTATION;
use provider_host::records::{Backend, DeleteOutcome, Lease, LeaseRef, ProviderError, ResumeOutcome};
use serde_json::json;
use tests::*;

fn provider_error(e: HostError) -> ProviderError {
    match e {
        HostError::Provider(p) => p,
        other => panic!("expected the provider's own error, got {other}"),
    }
}

/// A lease as a hostile or confused caller would write it by hand.
fn forged(id: &str, backend: Backend, namespace: &str, reusable: bool) -> LeaseRef {
    LeaseRef {
        lease: Lease {
            provider_lease_id: id.to_string(),
            backend,
            namespace: namespace.to_string(),
            api_version: match backend {
                Backend::Sandbox => "agents.x-k8s.io/v1beta1".to_string(),
                Backend::Job => "batch/v1".to_string(),
                Backend::Claim => "extensions.agents.x-k8s.io/v1beta1".to_string(),
            },
            workload_uid: String::new(),
            pod_name: None,
            pod_uid: None,
            pod_ip: None,
            claimed_sandbox: None,
            expires_at: None,
            reusable,
            metadata: "{}".to_string(),
        },
        config: config("sandbox", json!({})),
    }
}

/// What a provider could change of every object (uid, generation, labels, annotations, spec,
/// data), so a test can prove nothing changed; controllers may still write status.
async fn fingerprints(h: &Harness) -> Vec<(String, serde_json::Value)> {
    let print = |kind: &str, o: serde_json::Value| {
        let m = &o["metadata"];
        let name = format!("{kind}/{}", m["name"].as_str().unwrap_or_default());
        (name, json!([m["uid"], m["generation"], m["labels"], m["annotations"], o["spec"], o["data"]]))
    };
    let mut out = Vec::new();
    let jobs: Api<Job> = Api::namespaced(h.admin.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(h.admin.clone(), NAMESPACE);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(h.admin.clone(), NAMESPACE);
    for j in jobs.list(&Default::default()).await.expect("jobs").items {
        out.push(print("job", serde_json::to_value(j).expect("json")));
    }
    for s in secrets.list(&Default::default()).await.expect("secrets").items {
        out.push(print("secret", serde_json::to_value(s).expect("json")));
    }
    for c in claims.list(&Default::default()).await.expect("claims").items {
        out.push(print("pvc", serde_json::to_value(c).expect("json")));
    }
    for s in sandboxes(h, "v1beta1").list(&Default::default()).await.expect("sandboxes").items {
        out.push(print("sandbox", serde_json::to_value(s).expect("json")));
    }
    out
}

/// Objects made with kubectl: a Job, a Sandbox with its Secret and workspace claim.
async fn kubectl_objects(h: &Harness) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "foreign-job"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}}
    }))
    .expect("job");
    Api::<Job>::namespaced(h.admin.clone(), NAMESPACE).create(&PostParams::default(), &job).await.expect("job");
    let sandbox: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": "foreign-sb"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}
    }))
    .expect("sandbox");
    sandboxes(h, "v1beta1").create(&PostParams::default(), &sandbox).await.expect("sandbox");
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "foreign-sb-env"}, "stringData": {"TOKEN": "theirs"}}))
            .expect("secret");
    Api::<Secret>::namespaced(h.admin.clone(), NAMESPACE).create(&PostParams::default(), &secret).await.expect("s");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "workspace-foreign-sb"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("pvc");
    Api::<PersistentVolumeClaim>::namespaced(h.admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &claim)
        .await
        .expect("pvc");
}

#[tokio::test]
async fn forged_leases_touch_nothing_and_are_never_resumable() {
    let h = Harness::start(SandboxVersions::Both).await;
    kubectl_objects(&h).await;
    let before = fingerprints(&h).await;
    let mark = h.cluster.requests().mark();
    let leases = [
        forged(&format!("k8s:job:{NAMESPACE}:foreign-job"), Backend::Job, NAMESPACE, false),
        forged(&format!("k8s:sandbox:{NAMESPACE}:foreign-sb"), Backend::Sandbox, NAMESPACE, false),
        forged(&format!("k8s:sandbox:{NAMESPACE}:foreign-sb:pvc"), Backend::Sandbox, NAMESPACE, true),
    ];
    let soon = jiff::Timestamp::now().as_millisecond() + 600_000;
    for lease in leases {
        let id = lease.lease.provider_lease_id.clone();
        match h.host.resume_check(lease.clone()).await {
            Ok(ResumeOutcome::Resumable(_)) => panic!("{id}: a foreign object is never resumable"),
            Ok(ResumeOutcome::Expired(why)) => assert!(why.contains("not this installation"), "{id}: {why}"),
            Err(e) => panic!("{id}: resume-check must answer: {e}"),
        }
        match h.host.renew(lease.clone(), soon).await {
            Ok(ResumeOutcome::Expired(why)) => assert!(why.contains("not this installation"), "{id}: {why}"),
            other => panic!("{id}: renew of a foreign object: {other:?}"),
        }
        h.host.release(lease.clone()).await.unwrap_or_else(|e| panic!("{id}: release: {e}"));
        let report = h.host.destroy(lease).await.unwrap_or_else(|e| panic!("{id}: destroy: {e}"));
        assert!(
            report.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone),
            "{id}: nothing of this installation's existed: {report:?}"
        );
    }
    let writes = h.provider_writes_since(mark);
    assert!(writes.is_empty(), "forged leases wrote to the cluster: {writes:?}");
    assert_eq!(fingerprints(&h).await, before, "every foreign object is untouched");
}

#[tokio::test]
async fn namespaces_come_from_the_operator_never_from_the_config() {
    let h = Harness::start(SandboxVersions::Both).await;
    let mark = h.cluster.requests().mark();
    let system = json!({"namespace": "kube-system", "backend": "job", "image": "busybox:1.36"}).to_string();
    let validation = h.host.validate_config(&system).await.expect("validate-config");
    assert!(!validation.ok);
    let problem = validation.errors.iter().find(|p| p.path == "/namespace").expect("refused at /namespace");
    assert!(problem.message.contains("kube-system") && problem.message.contains("system namespace"), "{problem:?}");
    let probe = h.host.probe(&system).await.expect("probe");
    assert!(!probe.ok && probe.diagnostics.iter().any(|d| d.code == "namespace-not-allowed"), "{probe:?}");
    let err = provider_error(h.host.acquire(request(&system, "sys-1")).await.expect_err("refused"));
    assert_eq!(err.kind(), "invalid-config", "{err:?}");
    let forged_system = forged("k8s:job:kube-system:coredns", Backend::Job, "kube-system", false);
    let err = provider_error(h.host.destroy(forged_system).await.expect_err("denied"));
    assert_eq!(err.kind(), "denied", "{err:?}");
    assert!(h.provider_calls_since(mark).is_empty(), "nothing was sent: {:?}", h.provider_calls_since(mark));

    // The lease alone is enough: destroy needs no config naming its namespace.
    let cfg = config("job", json!({}));
    let lease = h.host.acquire(request(&cfg, "from-id-1")).await.expect("acquire");
    let mut bare = lease_ref(&lease, "not a config");
    bare.lease.metadata = "garbage".to_string();
    let report = h.host.destroy(bare).await.expect("destroy from the lease id alone");
    assert!(report.objects.iter().any(|o| o.kind == "Job" && o.outcome == DeleteOutcome::Deleted), "{report:?}");

    // A namespace the operator did not name is refused even when it exists.
    let namespaces: Api<Namespace> = Api::all(h.admin.clone());
    let other: Namespace = serde_json::from_value(json!({"metadata": {"name": "elsewhere"}})).expect("ns");
    namespaces.create(&PostParams::default(), &other).await.expect("ns");
    let elsewhere = json!({"namespace": "elsewhere", "backend": "sandbox", "image": "busybox:1.36"}).to_string();
    let err = provider_error(h.host.acquire(request(&elsewhere, "else-1")).await.expect_err("refused"));
    assert_eq!(err.kind(), "invalid-config", "{err:?}");
    let sent = h.provider_calls_since(mark).into_iter().filter(|e| e.namespace == "elsewhere").count();
    assert_eq!(sent, 0, "a refused namespace never reaches the cluster");
}

#[tokio::test]
async fn a_secret_someone_else_made_under_the_leases_name_is_left_alone() {
    let h = Harness::start(SandboxVersions::Both).await;
    let secrets: Api<Secret> = Api::namespaced(h.admin.clone(), NAMESPACE);
    let theirs: Secret =
        serde_json::from_value(json!({"metadata": {"name": "pc-steal-1-env"}, "stringData": {"TOKEN": "theirs-9f"}}))
            .expect("secret");
    let created = secrets.create(&PostParams::default(), &theirs).await.expect("create");
    let (captured, _guard) = capture_logs();
    let mark = h.cluster.requests().mark();
    let err =
        provider_error(h.host.acquire(request(&config("sandbox", json!({})), "steal-1")).await.expect_err("refused"));
    // The host refuses the Sandbox itself: its pod would read a Secret this installation did not
    // create. Nothing is created, so nothing needs cleaning up.
    assert_eq!((err.kind(), err.retryable()), ("denied", false), "{err:?}");
    assert!(err.message().contains("pc-steal-1-env"), "{err}");
    let still = secrets.get("pc-steal-1-env").await.expect("the foreign Secret stays");
    assert_eq!((still.uid(), still.resource_version()), (created.uid(), created.resource_version()));
    assert!(!format!("{err:?}{}", captured.text()).contains("theirs-9f"), "its value never reached the provider");
    let writes = h.provider_writes_since(mark);
    assert!(writes.is_empty(), "nothing was written: {writes:?}");
    assert!(sandboxes(&h, "v1beta1").get_opt("pc-steal-1").await.expect("get").is_none());
}

/// A lease's uids are checked against each other and the live object: a lease whose top-level
/// workload-uid was altered points at nothing, whether its metadata was dropped (`"{}"`) or
/// kept. Its calls touch nothing and its workload stays; the genuine lease still works, and a
/// lease with no uid at all (a host that lost it) still destroys from its id alone.
#[tokio::test]
async fn a_lease_whose_uid_is_not_its_workloads_points_at_nothing() {
    let h = Harness::start(SandboxVersions::Both).await;
    for backend in ["job", "sandbox"] {
        let cfg = config(backend, json!({}));
        let lease = h.host.acquire(request(&cfg, &format!("uid-{backend}"))).await.expect("acquire");
        let genuine = lease_ref(&lease, &cfg);
        let bogus_uid = "00000000-0000-4000-8000-00000000dead".to_string();
        let mut dropped = genuine.clone();
        dropped.lease.workload_uid = bogus_uid.clone();
        dropped.lease.metadata = "{}".to_string();
        let mut kept = genuine.clone();
        kept.lease.workload_uid = bogus_uid;
        let before = fingerprints(&h).await;
        let mark = h.cluster.requests().mark();
        let soon = jiff::Timestamp::now().as_millisecond() + 600_000;
        for (case, forged) in [("metadata {}", dropped), ("good metadata", kept)] {
            match h.host.resume_check(forged.clone()).await {
                Ok(ResumeOutcome::Expired(_)) => {}
                other => panic!("{backend}, {case}: resume-check must say expired: {other:?}"),
            }
            match h.host.renew(forged.clone(), soon).await {
                Ok(ResumeOutcome::Expired(_)) => {}
                other => panic!("{backend}, {case}: renew must say expired: {other:?}"),
            }
            let report = h.host.destroy(forged).await.unwrap_or_else(|e| panic!("{backend}, {case}: destroy: {e}"));
            assert!(
                report.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone),
                "{backend}, {case}: the lease's uid is not the live object's, so nothing is its: {report:?}"
            );
        }
        let writes = h.provider_writes_since(mark);
        assert!(writes.is_empty(), "{backend}: a lease with another uid wrote to the cluster: {writes:?}");
        assert_eq!(fingerprints(&h).await, before, "{backend}: the live workload and its Secret are untouched");

        match h.host.resume_check(genuine.clone()).await {
            Ok(ResumeOutcome::Resumable(_)) => {}
            other => panic!("{backend}: the genuine lease is still resumable: {other:?}"),
        }
        let mut lost = genuine;
        lost.lease.workload_uid = String::new();
        lost.lease.metadata = "{}".to_string();
        let report = h.host.destroy(lost).await.expect("destroy from the lease id alone");
        assert!(
            report.objects.iter().any(|o| o.outcome == DeleteOutcome::Deleted),
            "{backend}: an empty workload-uid is no forgery: {report:?}"
        );
    }
}

/// The managed-by label is a claim anyone who may create objects in the namespace can make;
/// with the operator's key only a signature proves ownership. Jobs made with kubectl that carry
/// the label (one bare, one with the signature copied from the installation's own Job) are
/// neither resumed, renewed, exec'd into nor deleted, even by a lease that names their uids; the
/// installation's own Job keeps working.
#[tokio::test]
async fn a_labelled_object_without_its_signature_is_not_the_installations() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("job", json!({}));
    let lease = h.host.acquire(request(&cfg, "signed-1")).await.expect("acquire");
    let jobs: Api<Job> = Api::namespaced(h.admin.clone(), NAMESPACE);
    let ours = jobs.get("pc-signed-1").await.expect("the installation's Job");
    let signature = ours.annotations().get(SIGNATURE_ANNOTATION).expect("the host signed its Job").clone();
    let labels = ours.labels().clone();
    let mut forged_leases = Vec::new();
    for (name, annotations) in [("pc-bare-1", json!({})), ("pc-copied-1", json!({SIGNATURE_ANNOTATION: signature}))] {
        let job: Job = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}}
        }))
        .expect("job");
        let made = jobs.create(&PostParams::default(), &job).await.expect("kubectl's Job");
        let mut lease = forged(&format!("k8s:job:{NAMESPACE}:{name}"), Backend::Job, NAMESPACE, false);
        lease.lease.workload_uid = made.uid().expect("uid");
        lease.config = cfg.clone();
        forged_leases.push(lease);
    }
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);
    eventually("the kubectl Jobs' pods run", || async {
        let running = pods.list(&Default::default()).await.expect("pods").items;
        ["pc-bare-1", "pc-copied-1"].iter().all(|job| {
            running.iter().any(|p| {
                p.labels().get("job-name").map(String::as_str) == Some(*job)
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
        })
    })
    .await;
    let before = fingerprints(&h).await;
    let mark = h.cluster.requests().mark();
    let soon = jiff::Timestamp::now().as_millisecond() + 600_000;
    for lease in forged_leases {
        let id = lease.lease.provider_lease_id.clone();
        match h.host.resume_check(lease.clone()).await {
            Ok(ResumeOutcome::Expired(why)) => assert!(why.contains("not this installation"), "{id}: {why}"),
            other => panic!("{id}: a labelled Job without its signature is never resumable: {other:?}"),
        }
        match h.host.renew(lease.clone(), soon).await {
            Ok(ResumeOutcome::Expired(_)) => {}
            other => panic!("{id}: renew of a labelled Job without its signature: {other:?}"),
        }
        let exec =
            serde_json::from_value(json!({"command": "sh", "args": ["-c", "echo ran > /tmp/ran"]})).expect("request");
        let err = provider_error(h.host.execute(lease.clone(), exec).await.expect_err("no exec"));
        assert!(err.message().contains("not this installation"), "{id}: {err:?}");
        let report = h.host.destroy(lease).await.unwrap_or_else(|e| panic!("{id}: destroy: {e}"));
        assert!(report.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{id}: {report:?}");
    }
    let sent = h.provider_calls_since(mark);
    assert!(!sent.iter().any(|e| e.subresource == "exec"), "no exec reached a forged Job's pod: {sent:?}");
    let writes = h.provider_writes_since(mark);
    assert!(writes.is_empty(), "labelled Jobs without their signature were written: {writes:?}");
    assert_eq!(fingerprints(&h).await, before, "the kubectl Jobs are untouched");

    let genuine = lease_ref(&lease, &cfg);
    assert!(matches!(h.host.renew(genuine.clone(), soon).await, Ok(ResumeOutcome::Resumable(_))), "ours renews");
    let report = h.host.destroy(genuine).await.expect("destroy");
    assert!(report.objects.iter().any(|o| o.kind == "Job" && o.outcome == DeleteOutcome::Deleted), "{report:?}");
}
