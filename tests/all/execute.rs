//! Execute through the built component in the wasmtime host against the embedded cluster,
//! whose simulated kubelet runs the command as a local process with the pod's env: the real
//! output and exit code, the lease's Secret in the env but never in what comes back, stdin,
//! timeouts, and the same for a Sandbox and a Job.

use std::time::{Duration, Instant};

use embedded_cluster::SandboxVersions;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use provider_host::HostError;
use provider_host::records::{ExecRequest, ExecResult, LeaseRef};
use serde_json::json;
use tests::*;

fn sh(script: &str) -> ExecRequest {
    serde_json::from_value(json!({"command": "sh", "args": ["-c", script], "timeout-ms": 20_000})).expect("request")
}

async fn run(h: &Harness, lease: &LeaseRef, request: ExecRequest) -> ExecResult {
    h.host.execute(lease.clone(), request).await.expect("execute")
}

#[tokio::test]
async fn a_command_sees_the_secret_without_printing_it_on_both_backends() {
    let h = Harness::start(SandboxVersions::Both).await;
    let (logs, _guard) = capture_logs();
    for backend in ["sandbox", "job"] {
        let cfg = config(backend, json!({}));
        let lease = h.host.acquire(request(&cfg, &format!("exec-{backend}"))).await.expect("acquire");
        let stored = lease_ref(&lease, &cfg);
        let counted = run(&h, &stored, sh("echo $API_TOKEN | wc -c")).await;
        assert_eq!(counted.exit_code, Some(0), "{backend}: {counted:?}");
        assert_eq!(counted.stdout.trim(), (SECRET_VALUE.len() + 1).to_string(), "{backend}: the value's bytes");
        let echoed = run(&h, &stored, sh("echo \"$API_TOKEN\"; echo \"$API_TOKEN\" >&2; echo $TASK")).await;
        assert_eq!(echoed.stdout, "[redacted]\ne2e\n", "{backend}");
        assert_eq!(echoed.stderr, "[redacted]\n", "{backend}");
        h.host.destroy(stored).await.expect("destroy");
    }
    assert!(!logs.text().contains(SECRET_VALUE), "the secret reached a log line");
}

#[tokio::test]
async fn exit_codes_stdin_env_and_cwd_reach_the_command() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("job", json!({}));
    let lease = h.host.acquire(request(&cfg, "exec-io")).await.expect("acquire");
    let stored = lease_ref(&lease, &cfg);
    let request: ExecRequest = serde_json::from_value(json!({
        "command": "sh", "args": ["-c", "cat; printf '%s' \"$GREETING\"; cd /tmp && pwd >&2; exit 7"],
        "env": [{"name": "GREETING", "value": "it's\nhere"}], "stdin": "piped in\n", "cwd": "/", "timeout-ms": 20_000
    }))
    .expect("request");
    let result = run(&h, &stored, request).await;
    assert_eq!(result.exit_code, Some(7), "{result:?}");
    assert_eq!(result.stdout, "piped in\nit's\nhere");
    assert_eq!(result.stderr, "/tmp\n");
    assert!(!result.timed_out && !result.stdout_truncated);
    h.host.destroy(stored).await.expect("destroy");
}

#[tokio::test]
async fn a_command_past_its_timeout_is_killed_and_said_so() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("job", json!({}));
    let lease = h.host.acquire(request(&cfg, "exec-slow")).await.expect("acquire");
    let stored = lease_ref(&lease, &cfg);
    let mut slow = sh("echo started; sleep 60; echo never");
    slow.timeout_ms = Some(1_000);
    let started = Instant::now();
    let result = run(&h, &stored, slow).await;
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    assert!(result.timed_out, "{result:?}");
    assert_eq!(
        (result.exit_code, result.signal.as_deref(), result.stdout.as_str()),
        (None, Some("SIGKILL"), "started\n")
    );
    // The sandbox is still there for the next command.
    assert_eq!(run(&h, &stored, sh("exit 0")).await.exit_code, Some(0));
    h.host.destroy(stored).await.expect("destroy");
}

/// A background process that keeps the command's output open holds the exec until the host's
/// deadline, as a real runtime does; the command itself ended at once, with status 0, and
/// that is the answer: not killed, not timed out (it read as `SIGKILL` at the timeout).
#[tokio::test]
async fn a_background_process_holding_the_output_is_not_a_timeout() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("job", json!({}));
    let lease = h.host.acquire(request(&cfg, "exec-held")).await.expect("acquire");
    let stored = lease_ref(&lease, &cfg);
    let mut held = sh("sleep 987.555 & echo started");
    held.timeout_ms = Some(2_000);
    let result = run(&h, &stored, held).await;
    assert_eq!(
        (result.exit_code, result.signal.as_deref(), result.timed_out, result.stdout.as_str(), result.stderr.as_str()),
        (Some(0), None, false, "started\n", ""),
        "{result:?}"
    );
    h.host.destroy(stored).await.expect("destroy");
}

/// A command that reads only the start of a large input answers as soon as it ends: the rest
/// of the input, which nobody reads, does not hold the exec open until the timeout.
#[tokio::test]
async fn a_command_that_leaves_its_input_unread_answers_at_once() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("job", json!({}));
    let lease = h.host.acquire(request(&cfg, "exec-unread")).await.expect("acquire");
    let stored = lease_ref(&lease, &cfg);
    let mut head = sh("head -c 5");
    head.stdin = Some("x".repeat(404 * 1024));
    head.timeout_ms = Some(60_000);
    let result = run(&h, &stored, head).await;
    assert_eq!((result.exit_code, result.timed_out, result.stdout.as_str()), (Some(0), false, "xxxxx"), "{result:?}");
    h.host.destroy(stored).await.expect("destroy");
}

#[tokio::test]
async fn a_destroyed_lease_runs_nothing() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("sandbox", json!({}));
    let lease = h.host.acquire(request(&cfg, "exec-gone")).await.expect("acquire");
    let stored = lease_ref(&lease, &cfg);
    h.host.destroy(stored.clone()).await.expect("destroy");
    let mark = h.cluster.requests().mark();
    match h.host.execute(stored, sh("echo hi")).await {
        Err(HostError::Provider(e)) => {
            assert_eq!(e.kind(), "rejected", "{e}");
            assert!(e.message().to_lowercase().contains("acquire a new"), "{e}");
        }
        other => panic!("expected the provider's refusal, got {other:?}"),
    }
    assert!(h.provider_calls_since(mark).iter().all(|e| e.subresource != "exec"));
}

/// A NUL in a secret value could never reach a process: acquire refuses it as the input's
/// mistake, by the entry's position and without the value, before anything is created.
#[tokio::test]
async fn a_nul_in_a_secret_value_is_refused_at_acquire_and_nothing_is_made() {
    let h = Harness::start(SandboxVersions::Both).await;
    for backend in ["job", "sandbox"] {
        let cfg = config(backend, json!({}));
        let acquisition = format!("nul-{backend}");
        let mut req = request(&cfg, &acquisition);
        req.env[1].value = format!("{SECRET_VALUE}\0tail");
        let mark = h.cluster.requests().mark();
        match h.host.acquire(req).await {
            Err(HostError::Provider(e)) => {
                assert_eq!((e.kind(), e.retryable()), ("invalid-config", false), "{backend}: {e}");
                assert!(e.message().contains("env[1]") && e.message().contains("NUL"), "{backend}: {e}");
                assert!(!e.message().contains(SECRET_VALUE), "{backend}: the value is never shown: {e}");
            }
            other => panic!("{backend}: expected invalid-config, got {other:?}"),
        }
        assert!(h.provider_calls_since(mark).is_empty(), "{backend}: nothing was sent to the cluster");
        let name = format!("pc-{acquisition}");
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(h.admin.clone(), NAMESPACE);
        let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> = kube::Api::namespaced(h.admin.clone(), NAMESPACE);
        assert!(secrets.get_opt(&format!("{name}-env")).await.expect("get").is_none(), "{backend}: no Secret");
        assert!(jobs.get_opt(&name).await.expect("get").is_none(), "{backend}: no Job");
        assert!(sandboxes(&h, "v1beta1").get_opt(&name).await.expect("get").is_none(), "{backend}: no Sandbox");
    }
}

/// Every execute leaves orphans (the script's watchdog, what a command starts in the
/// background): under a main process that never reaps, each became a zombie holding a pid of
/// the pod's limit until forks failed. The sandbox's pod now reaps them, so after many
/// executes its processes are what they were after the first.
#[tokio::test]
async fn many_executes_leave_no_process_behind_on_both_backends() {
    let h = Harness::start(SandboxVersions::Both).await;
    for backend in ["sandbox", "job"] {
        let cfg = config(backend, json!({}));
        let lease = h.host.acquire(request(&cfg, &format!("exec-pids-{backend}"))).await.expect("acquire");
        let stored = lease_ref(&lease, &cfg);
        let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);
        let pod = lease.pod_name.as_deref().expect("the lease names its pod");
        let uid = pods.get(pod).await.expect("the lease's pod").metadata.uid.expect("uid");
        assert_eq!(run(&h, &stored, sh("true")).await.exit_code, Some(0), "{backend}");
        let processes = || h.cluster.pod_processes(&uid).expect("the pod has a PID namespace after an exec");
        let before = processes().len();
        for _ in 0..20 {
            assert_eq!(run(&h, &stored, sh("true")).await.exit_code, Some(0), "{backend}");
        }
        let background = run(&h, &stored, sh("sleep 0.2 >/dev/null 2>&1 & echo started")).await;
        assert_eq!(background.stdout, "started\n", "{backend}: {background:?}");
        eventually(
            &format!("{backend}: the pod's processes back to the {before} it had after the first execute"),
            || async {
                let now = processes();
                now.len() == before && now.iter().all(|p| p.state != 'Z')
            },
        )
        .await;
        h.host.destroy(stored).await.expect("destroy");
    }
}
