//! `kube.exec` in the host: a command runs in a pod the installation owns (a Job's pod, owned
//! through its controller), with its stdin (left open: the command reads it by its size), exit
//! code and capped output; a pod someone else made and a policy without `exec` are refused
//! before any exec request is sent; a pod's proof is kept for its next execs until the pod is
//! replaced.

use std::time::Duration;

use embedded_cluster::{ClusterConfig, EmbeddedCluster, PROVIDER_USER};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use provider_host::KubeHost;
use provider_host::bindings::kube::{ExecOptions, KubeError};
use provider_host::policy::AccessVerb;
use serde_json::json;

use crate::support::*;

fn sh(script: &str, stdin: Option<&str>, max_output_bytes: u32) -> ExecOptions {
    ExecOptions {
        container: Some("main".into()),
        command: vec!["sh".into(), "-c".into(), script.into()],
        stdin: stdin.map(|s| s.as_bytes().to_vec()),
        timeout_ms: 20_000,
        max_output_bytes,
    }
}

/// A Job the host created (so it carries the installation's label), and its pod's name.
async fn owned_pod(c: &EmbeddedCluster, h: &KubeHost, name: &str) -> String {
    h.create(&jobs(), Some(NS), &job(name, json!({}))).await.expect("create the Job");
    let pods: Api<Pod> = Api::namespaced(client_for(c, embedded_cluster::ADMIN_USER).await, NS);
    for _ in 0..200 {
        let listed = pods.list(&ListParams::default().labels(&format!("job-name={name}"))).await.expect("list");
        if let Some(pod) =
            listed.items.into_iter().find(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some())
        {
            return pod.metadata.name.unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the Job's pod never ran");
}

/// A cluster whose controllers run the pods (the shared one runs none).
async fn running_cluster() -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig::default()).await.expect("start the cluster")
}

fn execs_since(c: &EmbeddedCluster, mark: u64) -> usize {
    c.requests().since(mark).iter().filter(|e| e.user == PROVIDER_USER && e.subresource == "exec").count()
}

#[tokio::test]
async fn a_command_runs_in_an_owned_pod_with_its_input_exit_code_and_capped_output() {
    let c = running_cluster().await;
    let h =
        KubeHost::new(client_for(&c, PROVIDER_USER).await, std::sync::Arc::new(test_policy()), Duration::from_secs(10));
    let pod = owned_pod(&c, &h, "exec-owned").await;
    let out = h.exec(NS, &pod, sh("head -c 3; echo err >&2; exit 5", Some("in\n"), 1024)).await.expect("exec");
    assert_eq!((out.exit_code, out.stdout.as_slice(), out.stderr.as_slice()), (Some(5), &b"in\n"[..], &b"err\n"[..]));
    assert!(!out.timed_out && !out.stdout_truncated);
    let big = h.exec(NS, &pod, sh("head -c 100000 /dev/zero", None, 1000)).await.expect("exec");
    assert_eq!((big.exit_code, big.stdout.len(), big.stdout_truncated), (Some(0), 1000, true));
    let slow = ExecOptions { timeout_ms: 300, ..sh("sleep 30", None, 1024) };
    let started = std::time::Instant::now();
    let timed = h.exec(NS, &pod, slow).await.expect("exec");
    assert!(timed.timed_out && timed.exit_code.is_none(), "{timed:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn someone_else_s_pod_and_a_policy_without_exec_are_refused_before_sending() {
    let c = running_cluster().await;
    let pods: Api<Pod> = Api::namespaced(client_for(&c, embedded_cluster::ADMIN_USER).await, NS);
    let foreign: Pod = serde_json::from_value(json!({
        "metadata": {"name": "kubectl-made"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &foreign).await.expect("create");
    let h =
        KubeHost::new(client_for(&c, PROVIDER_USER).await, std::sync::Arc::new(test_policy()), Duration::from_secs(10));
    let mark = c.requests().mark();
    match h.exec(NS, "kubectl-made", sh("echo taken", None, 1024)).await {
        Err(KubeError::NotOwned(m)) => assert!(m.contains("not created by this installation"), "{m}"),
        other => panic!("expected not-owned, got {other:?}"),
    }
    let mut no_exec = test_policy();
    for rule in no_exec.resources.iter_mut().filter(|r| r.plural == "pods") {
        rule.verbs.retain(|v| *v != AccessVerb::Exec);
    }
    let denied =
        KubeHost::new(client_for(&c, PROVIDER_USER).await, std::sync::Arc::new(no_exec), Duration::from_secs(10));
    let pod = owned_pod(&c, &h, "exec-denied").await;
    let mark_denied = c.requests().mark();
    match denied.exec(NS, &pod, sh("echo hi", None, 1024)).await {
        Err(KubeError::Denied(m)) => assert!(m.contains("exec"), "{m}"),
        other => panic!("expected a denial, got {other:?}"),
    }
    assert!(c.requests().since(mark_denied).iter().all(|e| e.user != PROVIDER_USER), "a denial sends nothing");
    assert_eq!(execs_since(&c, mark), 0, "no exec request was sent");
}

#[tokio::test]
async fn a_pod_s_proof_is_kept_for_its_next_execs_and_dropped_when_it_is_replaced() {
    let c = running_cluster().await;
    let h =
        KubeHost::new(client_for(&c, PROVIDER_USER).await, std::sync::Arc::new(test_policy()), Duration::from_secs(10));
    let pod = owned_pod(&c, &h, "exec-kept").await;
    // Each exec in its own call, as the runner makes them: nothing a call read is carried over.
    let call = || h.for_call(std::time::Instant::now() + Duration::from_secs(20));
    let requests = |mark| {
        let entries = c.requests().since(mark);
        let mine: Vec<_> = entries.iter().filter(|e| e.user == PROVIDER_USER).collect();
        let count =
            |resource: &str, sub: &str| mine.iter().filter(|e| e.resource == resource && e.subresource == sub).count();
        (count("pods", ""), count("jobs", ""), count("pods", "exec"))
    };
    let mark = c.requests().mark();
    call().exec(NS, &pod, sh("echo one", None, 1024)).await.expect("the first exec");
    assert_eq!(requests(mark), (2, 1, 1), "the first exec proves the pod through its Job, then binds to it");
    let mark = c.requests().mark();
    let out = call().exec(NS, &pod, sh("echo two", None, 1024)).await.expect("the second exec");
    assert_eq!(out.stdout, b"two\n");
    assert_eq!(requests(mark), (2, 0, 1), "the kept proof spares the Job: the pod is read and bound, as always");

    // The pod replaced under its name by one nobody's controller made: the kept proof is not
    // the new pod's, so it is proved again and refused before any exec is sent.
    let admin: Api<Pod> = Api::namespaced(client_for(&c, embedded_cluster::ADMIN_USER).await, NS);
    admin.delete(&pod, &kube::api::DeleteParams::default().grace_period(0)).await.expect("delete the pod");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while admin.get_opt(&pod).await.expect("read the pod").is_some() {
        assert!(std::time::Instant::now() < deadline, "pod {pod} was still there 60 s after its deletion");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let impostor: Pod = serde_json::from_value(json!({
        "metadata": {"name": pod},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .expect("pod");
    admin.create(&PostParams::default(), &impostor).await.expect("create the impostor under the pod's name");
    let mark = c.requests().mark();
    match call().exec(NS, &pod, sh("echo taken", None, 1024)).await {
        Err(KubeError::NotOwned(m)) => assert!(m.contains("not created by this installation"), "{m}"),
        other => panic!("expected not-owned, got {other:?}"),
    }
    assert_eq!(execs_since(&c, mark), 0, "no exec request reached the impostor");
}
