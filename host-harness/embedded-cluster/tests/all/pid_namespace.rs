//! Each pod's processes in a PID namespace of their own: PID 1 stands in for the main process,
//! orphans of an exec are reparented to it, and the pod's end is the end of all of them.

use embedded_cluster::{ClusterConfig, EmbeddedCluster, PodProcess};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::common::exec::{cluster, exec, exit_code, running, sleeping, wait_until};
use crate::common::rbac::typed;

/// Creates the running pod `name` with `spec` merged over one container `main`; its uid.
async fn pod(c: &EmbeddedCluster, name: &str, spec: Value) -> (Api<Pod>, String) {
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    let mut body =
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}});
    if let (Some(body), Some(extra)) = (body["spec"].as_object_mut(), spec.as_object()) {
        body.extend(extra.clone());
    }
    let created = pods.create(&PostParams::default(), &typed(body)).await.expect("pod");
    crate::common::wait_for(&pods, name, running("main"), "the pod running").await;
    (pods, created.metadata.uid.expect("uid"))
}

/// The pod's processes, once it has a namespace.
fn processes(c: &EmbeddedCluster, uid: &str) -> Vec<PodProcess> {
    c.pod_processes(uid).expect("the pod has a PID namespace after an exec (the machine gives namespaces)")
}

/// Starts an orphan (a `sh` whose parent exits at once) that runs until [`release`] lets it
/// exit, and returns its pid on the machine once the pod shows it.
async fn orphan(c: &EmbeddedCluster, pods: &Api<Pod>, name: &str, uid: &str, marker: &str) -> i32 {
    let waiting = format!("while [ ! -e {marker} ]; do sleep 0.05; done");
    let ran = exec(pods, name, &["sh", "-c", &format!("(sh -c '{waiting}' >/dev/null 2>&1 </dev/null &)")], None).await;
    assert_eq!(exit_code(&ran.status).as_deref(), Some("0"), "{}", ran.stderr);
    let command = format!("sh -c {waiting}");
    let mut pid = None;
    wait_until("the orphan running in the pod", || {
        pid = processes(c, uid).iter().find(|p| p.command == command).map(|p| p.pid);
        pid.is_some()
    })
    .await;
    pid.expect("seen")
}

/// Lets the orphan waiting for `marker` exit.
async fn release(pods: &Api<Pod>, name: &str, marker: &str) {
    let ran = exec(pods, name, &["touch", marker], None).await;
    assert_eq!(exit_code(&ran.status).as_deref(), Some("0"), "{}", ran.stderr);
}

#[tokio::test]
async fn an_exec_sees_the_pods_processes_with_its_main_process_as_pid_1() {
    let c = cluster(ClusterConfig::default()).await;
    let (pods, uid) = pod(&c, "plain", json!({})).await;
    let ran =
        exec(&pods, "plain", &["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'"], None)
            .await;
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.first().map(|l| l.trim()), Some("sleep infinity"), "{ran:?}", ran = ran.stdout);
    // PID 1, the exec's `sh`, `tr` or `ls`, and `grep`: the machine's other processes are not there.
    let count: usize = lines.get(1).and_then(|n| n.parse().ok()).expect("a count");
    assert!(count <= 5, "the pod's /proc lists {count} processes");
    assert!(processes(&c, &uid).iter().any(|p| p.command == "sleep infinity"));
}

/// A main process that never waits (`sleep infinity` as PID 1) leaves every orphan a zombie,
/// as on a real node: what made the provider's sandboxes run out of pids.
#[tokio::test]
async fn an_orphan_becomes_a_zombie_under_a_main_process_that_does_not_reap() {
    let c = cluster(ClusterConfig::default()).await;
    let (pods, uid) = pod(&c, "plain", json!({})).await;
    let pid = orphan(&c, &pods, "plain", &uid, "orphan-may-exit").await;
    release(&pods, "plain", "orphan-may-exit").await;
    wait_until("the orphan to exit and stay a zombie", || {
        processes(&c, &uid).iter().any(|p| p.pid == pid && p.state == 'Z')
    })
    .await;
}

/// With `shareProcessNamespace`, PID 1 is the pause process, which reaps orphans.
#[tokio::test]
async fn a_pod_that_shares_its_process_namespace_reaps_orphans() {
    let c = cluster(ClusterConfig::default()).await;
    let (pods, uid) = pod(&c, "shared", json!({"shareProcessNamespace": true})).await;
    let pid = orphan(&c, &pods, "shared", &uid, "orphan-may-exit").await;
    release(&pods, "shared", "orphan-may-exit").await;
    wait_until("the orphan to exit and be reaped", || processes(&c, &uid).iter().all(|p| p.pid != pid)).await;
    assert!(processes(&c, &uid).iter().all(|p| p.state != 'Z'), "{:?}", processes(&c, &uid));
}

/// A process that leaves the exec's session (`setsid`) is still the pod's: the pod's end kills it.
#[tokio::test]
async fn deleting_the_pod_ends_a_process_that_left_its_session() {
    let c = cluster(ClusterConfig::default()).await;
    let (pods, _) = pod(&c, "daemon", json!({})).await;
    let ran = exec(&pods, "daemon", &["sh", "-c", "setsid sleep 987.663 >/dev/null 2>&1 </dev/null &"], None).await;
    assert_eq!(exit_code(&ran.status).as_deref(), Some("0"), "{}", ran.stderr);
    wait_until("the detached process running", || sleeping("987.663")).await;
    pods.delete("daemon", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.expect("delete");
    wait_until("the detached process killed with its pod", || !sleeping("987.663")).await;
}

/// With a pod PID limit (a kubelet's `podPidsLimit`), zombies count against it: under a PID 1
/// that never reaps, each exec that leaves an orphan uses one up until forks fail, as on a real
/// node; beside a pause that reaps, the same execs run on.
#[tokio::test]
async fn a_pod_pid_limit_counts_zombies_until_forks_fail() {
    let mut config = ClusterConfig::default();
    config.kubelet.pod_pids_limit = Some(16);
    let c = cluster(config).await;
    let orphaning = ["sh", "-c", "(true &) ; echo ran"];
    let (plain, _) = pod(&c, "limited", json!({})).await;
    let mut refused = None;
    for n in 1..=30 {
        let ran = exec(&plain, "limited", &orphaning, None).await;
        if exit_code(&ran.status).as_deref() != Some("0") || ran.stdout != "ran\n" || !ran.stderr.is_empty() {
            refused = Some((n, ran.stderr));
            break;
        }
    }
    let (n, stderr) = refused.expect("30 orphaning execs under a PID limit of 16 and a PID 1 that never reaps");
    assert!(n > 5, "the first execs ran (refused at #{n}: {stderr})");
    assert!(stderr.contains("fork") || stderr.contains("Resource temporarily unavailable"), "#{n}: {stderr}");

    let (shared, _) = pod(&c, "reaped", json!({"shareProcessNamespace": true})).await;
    for n in 1..=30 {
        let ran = exec(&shared, "reaped", &orphaning, None).await;
        assert_eq!(
            (exit_code(&ran.status).as_deref(), ran.stdout.as_str()),
            (Some("0"), "ran\n"),
            "#{n}: {}",
            ran.stderr
        );
    }
}
