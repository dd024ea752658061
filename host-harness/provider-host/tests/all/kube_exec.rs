//! `kube.exec` in the host: a command runs in a pod the installation owns (a Job's pod, owned
//! through its controller), with its stdin (left open: the command reads it by its size), exit
//! code and capped output; a pod someone else made and a policy without `exec` are refused
//! before any exec request is sent; a pod's proof is kept for its next execs until the pod is
//! replaced, and while the host's watch of the pods keeps it current the exec opens without a
//! read first, still bound to the proven pod by the read once its stream is open.

use std::time::Duration;

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ClusterConfig, EmbeddedCluster, PROVIDER_USER};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, ListParams, PostParams};
use provider_host::KubeHost;
use provider_host::bindings::kube::{ExecOptions, KubeError};
use provider_host::policy::AccessVerb;
use serde_json::json;
use tokio::io::AsyncReadExt;

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

/// Deletes `pod` at once and, once it is gone, puts a pod of nobody's under its name (no labels,
/// no owner, as anyone with `create pods` could); returns when that pod runs.
async fn replace_with_impostor(admin: &Api<Pod>, pod: &str) {
    admin.delete(pod, &kube::api::DeleteParams::default().grace_period(0)).await.expect("delete the pod");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while admin.get_opt(pod).await.expect("read the pod").is_some() {
        assert!(std::time::Instant::now() < deadline, "pod {pod} was still there 60 s after its deletion");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let impostor: Pod = serde_json::from_value(json!({
        "metadata": {"name": pod},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}
    }))
    .expect("pod");
    admin.create(&PostParams::default(), &impostor).await.expect("create the impostor under the pod's name");
    loop {
        let now = admin.get(pod).await.expect("read the impostor");
        if now.status.and_then(|s| s.phase).as_deref() == Some("Running") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the impostor {pod} was not running 60 s after the pod's deletion"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The host as the provider's identity, under the tests' policy.
async fn provider_host(c: &EmbeddedCluster) -> KubeHost {
    KubeHost::new(client_for(c, PROVIDER_USER).await, std::sync::Arc::new(test_policy()), Duration::from_secs(10))
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
    let h = provider_host(&c).await;
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
    let h = provider_host(&c).await;
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
    let h = provider_host(&c).await;
    let pod = owned_pod(&c, &h, "exec-kept").await;
    // Each exec in its own call, as the runner makes them: nothing a call read is carried over.
    let call = || h.for_call(std::time::Instant::now() + Duration::from_secs(20));
    // Gets of pods, gets of Jobs, execs; the host's own watch of the namespace's pods is apart.
    let requests = |mark| {
        let entries = c.requests().since(mark);
        let mine: Vec<_> = entries.iter().filter(|e| e.user == PROVIDER_USER).collect();
        let count = |verb: &str, resource: &str, sub: &str| {
            mine.iter().filter(|e| e.verb == verb && e.resource == resource && e.subresource == sub).count()
        };
        (count("get", "pods", ""), count("get", "jobs", ""), count("create", "pods", "exec"))
    };
    let mark = c.requests().mark();
    call().exec(NS, &pod, sh("echo one", None, 1024)).await.expect("the first exec");
    assert_eq!(requests(mark), (2, 1, 1), "the first exec proves the pod through its Job, then binds to it");
    wait_until("the first exec to start the host's watch of the namespace's pods with a list", || {
        c.requests().since(mark).iter().any(|e| e.user == PROVIDER_USER && e.resource == "pods" && e.verb == "list")
    })
    .await;
    wait_until("the host's watch to make its proof of the pod current", || h.proves_current(NS, &pod)).await;
    let mark = c.requests().mark();
    let out = call().exec(NS, &pod, sh("echo two", None, 1024)).await.expect("the second exec");
    assert_eq!(out.stdout, b"two\n");
    assert_eq!(requests(mark), (1, 0, 1), "a current proof: no read before the exec, the read that binds it");

    // The pod replaced under its name by one nobody's controller made: once the watch has seen
    // the deletion, the proof is no longer current, so the pod is read and proved again and
    // refused before any exec is sent.
    let admin: Api<Pod> = Api::namespaced(client_for(&c, embedded_cluster::ADMIN_USER).await, NS);
    replace_with_impostor(&admin, &pod).await;
    wait_until("the host's watch to see the pod deleted", || !h.proves_current(NS, &pod)).await;
    let mark = c.requests().mark();
    match call().exec(NS, &pod, sh("echo taken", None, 1024)).await {
        Err(KubeError::NotOwned(m)) => assert!(m.contains("not created by this installation"), "{m}"),
        other => panic!("expected not-owned, got {other:?}"),
    }
    assert_eq!(execs_since(&c, mark), 0, "no exec request reached the impostor");
}

#[tokio::test]
async fn a_current_proof_still_binds_the_exec_to_the_pod_it_proved() {
    let c = running_cluster().await;
    let h = provider_host(&c).await;
    let pod = owned_pod(&c, &h, "exec-bound").await;
    let call = || h.for_call(std::time::Instant::now() + Duration::from_secs(20));
    call().exec(NS, &pod, sh("echo one", None, 1024)).await.expect("the first exec");
    wait_until("the host's watch to make its proof of the pod current", || h.proves_current(NS, &pod)).await;
    // The exec's request held at the API server while the pod is replaced: the proof was
    // current when the exec began, and the read once the stream is open finds another pod.
    let hold = c.faults().add(Rule::hold_exec(NS, &pod, Duration::from_secs(120)));
    let admin: Api<Pod> = Api::namespaced(client_for(&c, embedded_cluster::ADMIN_USER).await, NS);
    let host = call();
    let exec = host.exec(NS, &pod, sh("cat > \"$HOME/taken\"", Some("the provider's input"), 1024));
    let replace = async {
        wait_until("the exec's request to be held", || c.faults().holding(hold)).await;
        replace_with_impostor(&admin, &pod).await;
        c.faults().remove(hold);
    };
    let (ran, ()) = tokio::join!(exec, replace);
    match ran {
        Err(KubeError::NotOwned(m)) => assert!(m.contains("replaced by another of that name"), "{m}"),
        other => panic!("expected not-owned, got {other:?}"),
    }
    assert!(!h.proves_current(NS, &pod), "the proof of the replaced pod is dropped");
    // The argv started in the impostor (it travels in the exec's URL), its input never did.
    let mut shown = admin
        .exec(&pod, ["sh", "-c", "cat \"$HOME/taken\" 2>/dev/null; echo end"], &AttachParams::default().stderr(false))
        .await
        .expect("exec into the impostor as the admin");
    let mut text = String::new();
    shown.stdout().expect("stdout").read_to_string(&mut text).await.expect("read the impostor's file");
    assert_eq!(text, "end\n", "the impostor got none of the provider's input");
}

#[tokio::test]
async fn a_host_refused_the_watch_of_pods_reads_each_pod_before_its_exec() {
    let c = running_cluster().await;
    let forbidden = Rule {
        matches: Match {
            verb: Some("list".into()),
            resource: Some("pods".into()),
            user: Some(PROVIDER_USER.into()),
            ..Match::default()
        },
        action: Action::Error {
            code: 403,
            reason: "Forbidden".into(),
            message: Some("pods is forbidden: cannot list resource \"pods\"".into()),
            retry_after_seconds: None,
        },
        after: 0,
        times: None,
        probability: None,
    };
    c.faults().add(forbidden);
    let h = provider_host(&c).await;
    let pod = owned_pod(&c, &h, "exec-unwatched").await;
    let call = || h.for_call(std::time::Instant::now() + Duration::from_secs(20));
    let lists = |mark| {
        c.requests()
            .since(mark)
            .iter()
            .filter(|e| e.user == PROVIDER_USER && e.verb == "list" && e.resource == "pods")
            .count()
    };
    let start = c.requests().mark();
    call().exec(NS, &pod, sh("echo one", None, 1024)).await.expect("the first exec");
    wait_until("the host's watch of pods to be refused", || lists(start) == 1).await;
    for round in 0..3 {
        let mark = c.requests().mark();
        let out = call().exec(NS, &pod, sh("echo again", None, 1024)).await.expect("an exec without the watch");
        assert_eq!(out.stdout, b"again\n");
        let reads = c.requests().since(mark).iter().filter(|e| e.user == PROVIDER_USER && e.verb == "get").count();
        assert_eq!(reads, 2, "round {round}: the pod read before the exec and once its stream is open");
        assert!(!h.proves_current(NS, &pod));
    }
    assert_eq!(lists(start), 1, "a refused watch is not started again");
}
