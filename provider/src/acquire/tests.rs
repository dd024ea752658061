//! Acquire as a whole, against the fake cluster: the lease, the leak guard, readiness, fail-fast
//! causes, deadlines, transient and lost connections, and secrets kept out of errors and logs.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::config::Backend;
use crate::fake_kube::{PodBehaviour, Verb};
use crate::kube_api::KubeError;
use crate::naming::LABEL_ACQUISITION_ID;
use crate::testkit::{Env, NOW, NS, SECRET_VALUE, assert_no_secret, assert_nothing_left, config, config_with, request};

#[test]
fn sandbox_acquire_watches_until_ready_and_returns_the_lease() {
    let env = Env::new();
    let lease = env.provider().acquire(request(&config("sandbox"), "acq-1")).unwrap();
    assert_eq!(lease.provider_lease_id, "k8s:sandbox:sandboxes:pc-acq-1");
    assert_eq!(lease.backend, Backend::Sandbox);
    assert_eq!(lease.api_version, "agents.x-k8s.io/v1beta1");
    assert_eq!(lease.pod_name.as_deref(), Some("pc-acq-1"));
    assert!(lease.pod_ip.is_some() && lease.pod_uid.is_some());
    assert_eq!(lease.expires_at, Some(NOW + 3_600_000));
    assert!(!lease.reusable);

    let sandbox = env.kube.object("sandboxes", NS, "pc-acq-1").unwrap();
    assert_eq!(lease.workload_uid, sandbox["metadata"]["uid"]);
    assert_eq!(sandbox["spec"]["shutdownTime"], rfc3339::format_seconds(NOW + 3_600_000));
    assert_eq!(sandbox["spec"]["shutdownPolicy"], "Delete");
    let labels = &sandbox["metadata"]["labels"];
    assert!(labels.get(naming::LABEL_MANAGED_BY).is_none(), "the host stamps its owner id");
    assert_eq!(labels[LABEL_ACQUISITION_ID], "acq-1");
    assert_eq!(labels[naming::LABEL_RUN_ID], "run-1");
    assert_eq!(labels[naming::LABEL_AGENT_ID], "agent-7");

    let secret = env.kube.object("secrets", NS, "pc-acq-1-env").unwrap();
    assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], sandbox["metadata"]["uid"]);
    assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], "Sandbox");
    assert_eq!(secret["metadata"]["labels"][LABEL_ACQUISITION_ID], "acq-1");
    assert!(secret["data"]["API_KEY"].is_string());
    let env_list = &sandbox["spec"]["podTemplate"]["spec"]["containers"][0]["env"];
    assert!(env_list.to_string().contains("secretKeyRef"));
    assert_no_secret(&env, &sandbox.to_string());
    assert_no_secret(&env, &serde_json::to_string(&lease).unwrap());

    // Readiness came from watch events: the clock moved by the pod's start time only, and the
    // Sandbox was read once after the pod was ready (no polling).
    assert_eq!(env.clock.monotonic(), Duration::from_millis(1010));
    assert_eq!(env.kube.count(Verb::Get, "sandboxes"), 1);
    assert_eq!(env.kube.count(Verb::Watch, "pods"), 1);
}

#[test]
fn job_acquire_sets_the_leak_guard_and_job_defaults() {
    let env = Env::new();
    let lease = env.provider().acquire(request(&config("job"), "acq-2")).unwrap();
    assert_eq!(lease.provider_lease_id, "k8s:job:sandboxes:pc-acq-2");
    assert_eq!(lease.api_version, "batch/v1");
    assert!(lease.pod_name.as_deref().unwrap().starts_with("pc-acq-2-"));
    let job = env.kube.object("jobs", NS, "pc-acq-2").unwrap();
    assert_eq!(job["spec"]["activeDeadlineSeconds"], 3600);
    assert_eq!(job["spec"]["backoffLimit"], 0);
    assert_eq!(job["spec"]["ttlSecondsAfterFinished"], 900);
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    let secret = env.kube.object("secrets", NS, "pc-acq-2-env").unwrap();
    assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], "Job");
}

#[test]
fn a_cluster_serving_only_v1alpha1_gets_a_v1alpha1_sandbox() {
    let env = Env::new();
    env.kube.serve_sandbox_versions(&["v1alpha1"]);
    let lease = env.provider().acquire(request(&config("sandbox"), "acq-3")).unwrap();
    assert_eq!(lease.api_version, "agents.x-k8s.io/v1alpha1");
    let sandbox = env.kube.object("sandboxes", NS, "pc-acq-3").unwrap();
    assert_eq!(sandbox["spec"]["replicas"], 1);
    assert!(sandbox["spec"].get("operatingMode").is_none());
}

#[test]
fn the_requested_expiry_bounds_the_lease() {
    let env = Env::new();
    let mut req = request(&config("job"), "acq-4");
    req.requested_expires_at = Some(NOW + 600_500);
    let lease = env.provider().acquire(req).unwrap();
    assert_eq!(lease.expires_at, Some(NOW + 600_000), "rounded down to whole seconds");
    assert_eq!(env.kube.object("jobs", NS, "pc-acq-4").unwrap()["spec"]["activeDeadlineSeconds"], 600);
}

#[test]
fn refusals_before_the_first_create_leave_nothing() {
    let env = Env::new();
    let mut past = request(&config("sandbox"), "acq-5");
    past.requested_expires_at = Some(NOW - 1);
    let unsafe_id = request(&config("sandbox"), "Acq_5");
    let bad_env = AcquireRequest {
        env: vec![EnvVar { name: "NOT-VALID".into(), value: SECRET_VALUE.into(), secret: true }],
        ..request(&config("sandbox"), "acq-5")
    };
    let bad_config = AcquireRequest { config: "{}".into(), ..request(&config("sandbox"), "acq-5") };
    let empty_run = AcquireRequest { run_id: String::new(), ..request(&config("sandbox"), "acq-5") };
    for (req, kind) in [
        (past, "rejected"),
        (unsafe_id, "rejected"),
        (bad_env, "invalid-config"),
        (bad_config, "invalid-config"),
        (empty_run, "rejected"),
    ] {
        let err = env.provider().acquire(req).unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
        assert!(!err.message().contains(SECRET_VALUE));
    }
    assert_eq!(env.kube.count(Verb::Create, "sandboxes") + env.kube.count(Verb::Create, "secrets"), 0);
    assert_nothing_left(&env);
}

#[test]
fn an_unsafe_acquisition_id_is_refused_with_the_reason() {
    let env = Env::new();
    let err = env.provider().acquire(request(&config("sandbox"), "01J9ZQ8K3M")).unwrap_err();
    assert!(err.message().contains("refuses such ids"), "{err}");
    assert!(!err.retryable());
}

#[test]
fn fail_fast_causes_are_classified_and_cleaned_up() {
    let cases = [
        (PodBehaviour::ImagePull, "image-pull", false, "cannot pull"),
        (PodBehaviour::ConfigError, "rejected", false, "CreateContainerConfigError"),
        (PodBehaviour::CrashLoop, "rejected", false, "keeps exiting"),
        (PodBehaviour::Succeeds, "rejected", false, "must keep running"),
        (PodBehaviour::Fails, "rejected", false, "failed"),
    ];
    for backend in ["sandbox", "job"] {
        for (behaviour, kind, retryable, text) in &cases {
            let env = Env::new();
            env.kube.set_behaviour(behaviour.clone());
            let err = env.provider().acquire(request(&config(backend), "acq-13")).unwrap_err();
            assert_eq!((err.kind(), err.retryable()), (*kind, *retryable), "{backend} {behaviour:?}: {err}");
            assert!(err.message().contains(text), "{backend} {behaviour:?}: {err}");
            assert!(env.clock.monotonic() < Duration::from_secs(1), "{backend} {behaviour:?} waited out the budget");
            assert_nothing_left(&env);
            assert_no_secret(&env, &err.to_string());
        }
    }
}

/// Unschedulable clears by itself on a real cluster (a volume claim binds within the second, a
/// terminating pod frees its node): it is waited out, and answered `capacity` with the
/// scheduler's words only when the readiness deadline passes.
#[test]
fn an_unschedulable_pod_is_waited_out_until_the_deadline() {
    for backend in ["sandbox", "job"] {
        let env = Env::new();
        env.kube.set_behaviour(PodBehaviour::Unschedulable { until: Some(Duration::from_secs(3)) });
        let lease = env.provider().acquire(request(&config(backend), "acq-sched")).expect("scheduled after 3 s");
        assert!(lease.pod_name.is_some(), "{backend}: {lease:?}");

        let env = Env::new();
        env.kube.set_behaviour(PodBehaviour::Unschedulable { until: None });
        let err = env.provider().acquire(request(&config(backend), "acq-never")).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("capacity", true), "{backend}: {err}");
        assert!(err.message().contains("no node can run") && err.message().contains("Insufficient cpu"), "{err}");
        assert_eq!(env.clock.monotonic(), Duration::from_secs(20), "{backend}: waited until the deadline");
        assert_nothing_left(&env);
    }
}

#[test]
fn a_sandbox_expiring_while_starting_fails_fast() {
    let env = Env::new();
    env.kube.set_behaviour(PodBehaviour::Ready { after: Duration::from_secs(10) });
    let mut req = request(&config("sandbox"), "acq-14");
    req.requested_expires_at = Some(NOW + 2_000);
    let err = env.provider().acquire(req).unwrap_err();
    assert_eq!(err.kind(), "rejected");
    assert!(err.message().contains("deleted while waiting"), "{err}");
    assert!(env.clock.monotonic() < Duration::from_secs(3));
    assert_nothing_left(&env);
}

#[test]
fn one_deadline_bounds_the_whole_acquire() {
    let env = Env::new();
    env.kube.set_behaviour(PodBehaviour::NeverReady);
    let err = env.provider().acquire(request(&config("sandbox"), "acq-15")).unwrap_err();
    assert_eq!((err.kind(), err.retryable()), ("timeout", true));
    assert!(err.message().contains("was not ready within 20 s: pod pc-acq-15 is Pending (ContainerCreating)"), "{err}");
    assert_eq!(env.clock.monotonic(), Duration::from_secs(20));
    assert_nothing_left(&env);
}

#[test]
fn a_410_on_a_read_of_the_sandbox_is_not_a_deleted_sandbox() {
    let env = Env::new();
    env.kube.fail_always(Verb::Get, "sandboxes", KubeError::Gone("the resource version is too old".into()));
    let err = env.provider().acquire(request(&config("sandbox"), "acq-24")).unwrap_err();
    assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{err}");
    assert!(!err.message().contains("deleted while waiting"), "{err}");
}

#[test]
fn transient_read_failures_in_the_wait_do_not_fail_the_acquire() {
    let env = Env::new();
    // The pod is deleted while starting: the Sandbox is read to see whether it still stands,
    // and that read fails twice; once the replacement pod is ready the Sandbox is read again.
    env.kube.schedule_remove(Duration::from_millis(500), "pods", NS, "pc-acq-26");
    env.kube.fail_times(Verb::Get, "sandboxes", 0, 2, KubeError::Other { code: 500, message: "etcd".into() });
    env.kube.fail_times(Verb::Get, "sandboxes", 1, 1, KubeError::Timeout("slow".into()));
    let lease = env.provider().acquire(request(&config("sandbox"), "acq-26")).unwrap();
    assert_eq!(env.kube.count(Verb::Get, "sandboxes"), 5, "every failed read was asked again");
    assert_eq!(lease.pod_name.as_deref(), Some("pc-acq-26"));
    assert!(env.kube.object("sandboxes", NS, "pc-acq-26").is_some());
}

#[test]
fn acquire_is_two_writes_workload_first_and_the_secret_is_owned_from_its_create() {
    for (backend, plural, kind) in [("sandbox", "sandboxes", "Sandbox"), ("job", "jobs", "Job")] {
        let env = Env::new();
        let lease = env.provider().acquire(request(&config(backend), "acq-27")).unwrap();
        let writes: Vec<(Verb, String)> = env
            .kube
            .calls()
            .into_iter()
            .filter(|c| matches!(c.verb, Verb::Create | Verb::Patch | Verb::Delete))
            .map(|c| (c.verb, c.plural))
            .collect();
        assert_eq!(writes, vec![(Verb::Create, plural.to_string()), (Verb::Create, "secrets".to_string())]);
        let secret = env.kube.object("secrets", NS, "pc-acq-27-env").unwrap();
        assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], json!(lease.workload_uid), "{backend}");
        assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], kind);
    }
}

#[test]
fn a_pod_waiting_for_the_leases_own_secret_is_still_starting() {
    let env = Env::new();
    let provider = env.provider();
    let first = provider.acquire(request(&config("sandbox"), "acq-30")).unwrap();
    // The Secret is gone (an attempt stopped between its two creates, say) and the pod
    // restarts: the kubelet holds it in CreateContainerConfigError until the Secret exists.
    env.kube.remove("secrets", NS, "pc-acq-30-env");
    env.kube.remove("pods", NS, "pc-acq-30");
    for _ in 0..2 {
        env.clock.advance(Duration::from_secs(2));
        env.kube.settle();
    }
    let pod = env.kube.object("pods", NS, "pc-acq-30").unwrap();
    assert_eq!(pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "CreateContainerConfigError");
    let second = provider.acquire(request(&config("sandbox"), "acq-30")).unwrap();
    assert_eq!(second.workload_uid, first.workload_uid);
    let secret = env.kube.object("secrets", NS, "pc-acq-30-env").unwrap();
    assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], json!(first.workload_uid));
}

#[test]
fn a_dropped_watch_resumes_and_a_gone_watch_relists() {
    let env = Env::new();
    env.kube.fail(Verb::WatchNext, "pods", 1, KubeError::Transport("connection reset".into()));
    env.provider().acquire(request(&config("sandbox"), "acq-16")).unwrap();
    assert_eq!(env.kube.count(Verb::Watch, "pods"), 2, "reopened once");
    assert_eq!(env.kube.count(Verb::List, "pods"), 0, "resumed, not re-listed");

    let env = Env::new();
    env.kube.fail(Verb::WatchNext, "pods", 2, KubeError::Gone("too old resource version".into()));
    env.provider().acquire(request(&config("job"), "acq-17")).unwrap();
    assert_eq!(env.kube.count(Verb::List, "pods"), 1, "re-listed after 410");
}

#[test]
fn a_lost_cluster_is_reported_as_lost_within_seconds() {
    for backend in ["sandbox", "job"] {
        let env = Env::new();
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        env.kube.disconnect_after(Duration::from_secs(1));
        let err = env.provider().acquire(request(&config(backend), "acq-35")).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{backend}: {err}");
        assert!(err.message().contains("the cluster stopped answering"), "{backend}: {err}");
        assert!(err.message().contains("Clean-up could not delete"), "{backend}: {err}");
        assert!(
            env.clock.monotonic() <= Duration::from_secs(6),
            "{backend}: reported at {:?}, not at the 20 s deadline",
            env.clock.monotonic()
        );
    }
}

#[test]
fn secrets_never_reach_errors_or_logs_even_when_the_server_echoes_them() {
    let env = Env::new();
    env.kube.fail(Verb::Create, "sandboxes", 1, KubeError::Invalid(format!("spec: value {SECRET_VALUE} is bad")));
    let err = env.provider().acquire(request(&config("sandbox"), "acq-18")).unwrap_err();
    assert!(err.message().contains("[redacted]"), "{err}");
    assert_no_secret(&env, &format!("{err} {err:?}"));
    assert_no_secret(&env, &format!("{:?}", request(&config("sandbox"), "acq-18")));
}

#[test]
fn reusable_leases_need_a_workspace_volume() {
    let env = Env::new();
    let mut req = request(&config("sandbox"), "acq-19");
    req.reusable = true;
    let lease = env.provider().acquire(req.clone()).unwrap();
    assert!(!lease.reusable);
    assert!(env.log_text().contains("Warn reusable lease not possible"), "a warning: {}", env.log_text());

    let with_volume = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "5Gi"}}}));
    let lease = env
        .provider()
        .acquire(AcquireRequest { config: with_volume, ..request(&config("sandbox"), "acq-20") })
        .unwrap();
    assert!(!lease.reusable, "not asked for");
    let mut req = request(&config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "5Gi"}}})), "acq-21");
    req.reusable = true;
    let lease = env.provider().acquire(req).unwrap();
    assert!(lease.reusable);
    assert_eq!(lease.provider_lease_id, "k8s:sandbox:sandboxes:pc-acq-21:pvc");
    let sandbox = env.kube.object("sandboxes", NS, "pc-acq-21").unwrap();
    assert_eq!(sandbox["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "workspace");
    let metadata = LeaseMetadata::parse_lenient(&lease.metadata);
    assert_eq!(metadata.workspace_pvc.as_deref(), Some("workspace-pc-acq-21"));
}

#[test]
fn no_secret_env_means_no_secret_object() {
    let env = Env::new();
    let req = AcquireRequest { env: Vec::new(), ..request(&config("sandbox"), "acq-22") };
    let lease = env.provider().acquire(req).unwrap();
    assert!(env.kube.object("secrets", NS, "pc-acq-22-env").is_none());
    assert_eq!(LeaseMetadata::parse_lenient(&lease.metadata).secret_name, None);
}

#[test]
fn agent_sandbox_missing_is_refused_before_creating() {
    let env = Env::new();
    env.kube.serve_sandbox_versions(&[]);
    let err = env.provider().acquire(request(&config("sandbox"), "acq-23")).unwrap_err();
    assert!(err.message().contains("agent-sandbox is not installed"), "{err}");
    assert_nothing_left(&env);
}

#[test]
fn the_wait_and_its_clean_up_fit_inside_the_hosts_call_deadline() {
    let env = Env::new();
    env.kube.set_behaviour(PodBehaviour::NeverReady);
    let fits = config_with("sandbox", json!({"readinessTimeoutSeconds": 24}));
    env.clock.set_host_deadline(Duration::from_secs(30));
    // The host already spent 10 s of this call (queued behind others, say): 20 s are left.
    env.clock.advance(Duration::from_secs(10));
    let err = env.provider().acquire(request(&fits, "acq-40")).unwrap_err();
    assert_eq!((err.kind(), err.retryable()), ("timeout", true), "{err}");
    assert!(err.message().contains("was not ready within 14 s"), "the wait is cut to fit: {err}");
    assert!(
        env.clock.monotonic() < Duration::from_secs(30),
        "finished at {:?}, before the host's deadline",
        env.clock.monotonic()
    );
    assert_nothing_left(&env);
}

#[test]
fn a_call_with_no_time_left_creates_nothing() {
    let env = Env::new();
    env.clock.set_host_deadline(Duration::from_secs(30));
    env.clock.advance(Duration::from_secs(25));
    let err = env.provider().acquire(request(&config("job"), "acq-41")).unwrap_err();
    assert_eq!((err.kind(), err.retryable()), ("timeout", true), "{err}");
    assert!(err.message().contains("nothing was created"), "{err}");
    assert_eq!(env.kube.calls().iter().filter(|c| c.verb == Verb::Create).count(), 0);
}

#[test]
fn a_config_the_host_cannot_run_is_refused_before_any_call() {
    let env = Env::new();
    env.kube.allow_namespaces(&["elsewhere"]);
    let err = env.provider().acquire(request(&config("sandbox"), "acq-42")).unwrap_err();
    assert_eq!(err, ProviderError::invalid_config("/namespace", err.message().to_string()));
    assert!(env.kube.calls().is_empty(), "{:?}", env.kube.calls());

    let env = Env::new();
    env.clock.set_host_deadline(Duration::from_secs(10));
    let err = env.provider().acquire(request(&config("sandbox"), "acq-43")).unwrap_err();
    assert!(matches!(&err, ProviderError::InvalidConfig(d) if d.path == "/readinessTimeoutSeconds"), "{err}");
    assert!(env.kube.calls().is_empty());
}

#[test]
fn an_object_another_installation_holds_under_the_name_is_a_conflict() {
    let env = Env::new();
    env.kube.put(&SandboxVersion::V1beta1.resource(), NS, json!({"metadata": {"name": "pc-acq-44"}, "spec": {}}));
    env.kube.fail(Verb::Get, "sandboxes", 1, KubeError::NotOwned("not created by this installation".into()));
    let err = env.provider().acquire(request(&config("sandbox"), "acq-44")).unwrap_err();
    assert_eq!((err.kind(), err.retryable()), ("conflict", false), "{err}");
    assert!(err.message().contains("this installation did not create it"), "{err}");
    assert_eq!(env.kube.names_in(NS), vec!["sandboxes/pc-acq-44"], "only the foreign object, untouched");
}

#[test]
fn a_create_answered_503_is_asked_again_within_the_deadline() {
    let env = Env::new();
    let overloaded = || KubeError::Unavailable { message: "overloaded".into(), retry_after_seconds: Some(1) };
    env.kube.fail(Verb::Create, "sandboxes", 1, overloaded());
    env.kube.fail(Verb::Create, "secrets", 1, overloaded());
    let lease = env.provider().acquire(request(&config("sandbox"), "retried-create")).expect("retried, then ready");
    assert_eq!((env.kube.count(Verb::Create, "sandboxes"), env.kube.count(Verb::Create, "secrets")), (2, 2));
    assert!(lease.pod_ip.is_some());
}

/// A key validate-config warns of (a misspelt one is otherwise silently a default) is a
/// warning at acquire too, which goes on with the config's valid keys.
#[test]
fn acquire_warns_of_what_validate_config_warns_of() {
    let env = Env::new();
    let typo = json!({"namespace": NS, "image": "ghcr.io/acme/agent:1", "backend": "job", "leaseTtlSecond": 60});
    let typo = typo.to_string();
    let lease = env.provider().acquire(request(&typo, "acq-typo")).unwrap();
    assert_eq!(lease.expires_at, Some(NOW + 3_600_000), "the default TTL: the misspelt key is not read");
    let log = env.log_text();
    assert!(log.contains("Warn the config has a problem") && log.contains("path=/leaseTtlSecond"), "{log}");
}

#[test]
fn the_fingerprint_s_text_is_what_earlier_versions_hashed() {
    // Adoption compares a workload's recorded fingerprint with a new one: the canonical text
    // must not change between versions, whatever the code that writes it.
    let material = json!({
        "z": [1, -2.5, true, null, "s\"q\\u{1}"],
        "a": {"y": {}, "x": [], "é/\n": "tab\there\u{1}"},
        "m": {"nested": [{"b": 2, "a": 1}]},
    });
    assert_eq!(
        String::from_utf8_lossy(&canonical_json(&material)),
        r#"{"a":{"x":[],"y":{},"é/\n":"tab\there\u0001"},"m":{"nested":[{"a":1,"b":2}]},"z":[1,-2.5,true,null,"s\"q\\u{1}"]}"#
    );
    assert_eq!(fingerprint(&material), "6e163a5e0f7de9bb");
}
