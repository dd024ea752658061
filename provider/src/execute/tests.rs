//! Execute against the fake cluster, whose exec runs the wrapper with the local shell: the
//! command's real output and exit code, stdin, env, timeouts, redaction, caps, and refusals.

use std::time::Duration;

use super::*;
use crate::acquire::EnvVar;
use crate::fake_kube::Verb;
use crate::lease::{Lease, PodContainer};
use crate::testkit::{Env, NS, SECRET_VALUE, claim_config, config, request, stored};
use crate::workload_state::DEFAULT_CONTAINER_ANNOTATION;

fn acquired(env: &Env, backend: &str) -> (Lease, String) {
    let config = config(backend);
    let lease = env.provider().acquire(request(&config, "acq-x")).expect("acquires");
    (lease, config)
}

fn sh(script: &str) -> ExecRequest {
    ExecRequest {
        command: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: None,
        env: Vec::new(),
        stdin: None,
        timeout_ms: Some(20_000),
    }
}

#[test]
fn a_signal_that_ended_the_command_is_named_with_its_status() {
    assert_eq!(crate::exec_wrapper::signal_of_status(143), Some("SIGTERM"));
    assert_eq!(crate::exec_wrapper::signal_of_status(137), Some("SIGKILL"));
    assert_eq!(crate::exec_wrapper::signal_of_status(130), Some("SIGINT"));
    for plain in [0, 1, 3, 125, 126, 127, 128, 160, 255, -1, i32::MIN] {
        assert_eq!(crate::exec_wrapper::signal_of_status(plain), None, "{plain}");
    }
    let env = Env::new();
    let (lease, config) = acquired(&env, "job");
    let result = env.provider().execute(stored(&lease, &config), sh("kill -TERM $$")).expect("runs");
    assert_eq!((result.exit_code, result.signal.as_deref(), result.timed_out), (Some(143), Some("SIGTERM"), false));
    env.provider().destroy(stored(&lease, &config)).expect("destroys");
}

#[test]
fn a_command_s_output_and_exit_code_come_back() {
    let env = Env::new();
    for backend in ["sandbox", "job"] {
        let (lease, config) = acquired(&env, backend);
        let mut request = sh("cat; echo \"[$MODE]\"; echo oops >&2; exit 3");
        request.stdin = Some("from stdin\n".into());
        request.env = vec![EnvVar { name: "MODE".into(), value: "it's\nfast".into(), secret: false }];
        let result = env.provider().execute(stored(&lease, &config), request).expect("runs");
        assert_eq!(result.exit_code, Some(3), "{backend}: {result:?}");
        assert_eq!(result.stdout, "from stdin\n[it's\nfast]\n");
        assert_eq!(result.stderr, "oops\n");
        assert!(!result.timed_out && result.signal.is_none());
        env.provider().destroy(stored(&lease, &config)).expect("destroys");
    }
}

#[test]
fn nothing_of_the_request_is_in_the_exec_command() {
    let env = Env::new();
    let (lease, config) = acquired(&env, "job");
    let mut request = sh("echo hi");
    request.env = vec![EnvVar { name: "TOKEN".into(), value: "tok-123456789".into(), secret: true }];
    env.provider().execute(stored(&lease, &config), request).expect("runs");
    let execs = env.kube.execs();
    assert_eq!(execs.len(), 1);
    assert_eq!(execs[0].command, exec_wrapper::argv(), "the fixed script, the same for every call");
    assert_eq!(execs[0].container.as_deref(), Some(crate::naming::CONTAINER_NAME));
    let stdin = String::from_utf8_lossy(execs[0].stdin.as_deref().unwrap_or_default()).into_owned();
    assert!(stdin.contains("tok-123456789") && stdin.contains("echo hi"), "the request travels on stdin");
}

#[test]
fn secret_values_are_redacted_from_the_output() {
    let env = Env::new();
    let (lease, config) = acquired(&env, "sandbox");
    // The lease's own secret (from its Secret) and one the request marks secret.
    let mut request = sh(&format!("echo {SECRET_VALUE}; echo \"$EXTRA\" >&2"));
    request.env = vec![EnvVar { name: "EXTRA".into(), value: "extra-secret-42".into(), secret: true }];
    let result = env.provider().execute(stored(&lease, &config), request).expect("runs");
    assert_eq!(result.stdout, format!("{}\n", crate::redact::REDACTED));
    assert_eq!(result.stderr, format!("{}\n", crate::redact::REDACTED));
    assert!(!env.log_text().contains(SECRET_VALUE));
}

/// `sleep &` without redirection keeps the exec's output open after the command ended, so the
/// exec lasts until the host's deadline; the command still ended in time, with status 0, and
/// is reported so (it read as killed at its timeout, `SIGKILL`).
#[test]
fn a_background_process_holding_the_output_is_not_a_timeout() {
    let env = Env::new();
    let (lease, config) = acquired(&env, "job");
    let mut request = sh("sleep 987.444 & echo started");
    request.timeout_ms = Some(300);
    let result = env.provider().execute(stored(&lease, &config), request).expect("runs");
    assert_eq!((result.exit_code, result.signal.as_deref(), result.timed_out), (Some(0), None, false), "{result:?}");
    assert_eq!((result.stdout.as_str(), result.stderr.as_str()), ("started\n", ""));
    assert!(env.log_text().contains("kept its output open until the timeout"), "{}", env.log_text());
}

#[test]
fn a_command_past_its_timeout_is_killed_and_reported() {
    let env = Env::new();
    let (lease, config) = acquired(&env, "job");
    let mut request = sh("echo started; sleep 30");
    request.timeout_ms = Some(300);
    let started = std::time::Instant::now();
    let result = env.provider().execute(stored(&lease, &config), request).expect("runs");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(result.timed_out, "{result:?}");
    assert_eq!((result.exit_code, result.signal.as_deref()), (None, Some("SIGKILL")));
    assert_eq!(result.stdout, "started\n");
}

#[test]
fn output_over_the_cap_is_cut_and_says_so() {
    let env = Env::new();
    let (lease, config) = acquired(&env, "job");
    let request = sh("head -c 1500000 /dev/zero | tr '\\0' a");
    let result = env.provider().execute(stored(&lease, &config), request).expect("runs");
    assert_eq!(result.exit_code, Some(0));
    assert!(result.stdout_truncated && !result.stderr_truncated);
    assert_eq!(result.stdout.len(), OUTPUT_CAP as usize);
}

#[test]
fn a_gone_sandbox_is_an_error_that_says_to_acquire_again() {
    let env = Env::new();
    let (lease, config) = acquired(&env, "job");
    env.provider().destroy(stored(&lease, &config)).expect("destroys");
    let error = env.provider().execute(stored(&lease, &config), sh("true")).expect_err("gone");
    assert_eq!(error.kind(), "rejected");
    assert!(error.message().to_lowercase().contains("acquire a new"), "{error}");
    assert_eq!(env.kube.count(Verb::Exec, "pods"), 0);
}

#[test]
fn bad_requests_are_refused_before_anything_is_sent() {
    let env = Env::new();
    let (lease, config) = acquired(&env, "job");
    let calls = env.kube.calls().len();
    let mut bad_name = sh("true");
    bad_name.env = vec![EnvVar { name: "1X".into(), value: "v".into(), secret: false }];
    let mut reserved = sh("true");
    reserved.env = vec![EnvVar { name: "sandbox_exec_pid".into(), value: "v".into(), secret: false }];
    let mut nul_value = sh("true");
    nul_value.env = vec![EnvVar { name: "K".into(), value: "se\0cret-value".into(), secret: true }];
    let empty = ExecRequest { command: String::new(), ..sh("") };
    let no_time = ExecRequest { timeout_ms: Some(0), ..sh("true") };
    let mut second_nul = sh("true");
    second_nul.env = vec![
        EnvVar { name: "OK".into(), value: "v".into(), secret: false },
        EnvVar { name: "K".into(), value: "se\0cret-value".into(), secret: false },
    ];
    for request in [bad_name, reserved, nul_value, second_nul, empty, no_time] {
        let error = env.provider().execute(stored(&lease, &config), request).expect_err("refused");
        assert_eq!(error.kind(), "rejected", "{error}");
        assert!(!error.message().contains("cret-value"), "{error}");
    }
    let mut second_nul = sh("true");
    second_nul.env = vec![
        EnvVar { name: "OK".into(), value: "v".into(), secret: false },
        EnvVar { name: "K".into(), value: "se\0cret-value".into(), secret: true },
    ];
    let error = env.provider().execute(stored(&lease, &config), second_nul).expect_err("refused");
    assert!(error.message().contains("env[1] (\"K\")") && error.message().contains("NUL"), "{error}");
    assert_eq!(env.kube.calls().len(), calls, "nothing was sent");
}

#[test]
fn the_timeout_fits_in_the_call_s_deadline() {
    let env = Env::new();
    env.clock.set_host_deadline(Duration::from_secs(30));
    let cut = timeout(&env.clock, Some(120_000)).expect("room");
    assert!(cut <= Duration::from_secs(30) - HOST_GRACE, "{cut:?}");
    assert_eq!(timeout(&env.clock, Some(1_000)).expect("room"), Duration::from_secs(1));
    env.clock.set_host_deadline(Duration::from_secs(5));
    assert_eq!(timeout(&env.clock, None).expect_err("no room").kind(), "timeout");
}

#[test]
fn the_command_runs_in_the_lease_id_s_namespace_whatever_the_metadata_says() {
    let env = Env::new();
    env.kube.add_namespace("elsewhere");
    let (mut lease, config) = acquired(&env, "job");
    lease.namespace = "elsewhere".into();
    let result = env.provider().execute(stored(&lease, &config), sh("echo here")).expect("runs where the id says");
    assert_eq!(result.stdout, "here\n");
}

#[test]
fn a_lease_whose_secret_is_gone_runs_nothing() {
    let env = Env::new();
    let (lease, config) = acquired(&env, "job");
    env.kube.remove("secrets", NS, "pc-acq-x-env");
    let error = env.provider().execute(stored(&lease, &config), sh("echo $API_KEY")).expect_err("cannot redact");
    assert_eq!(error.kind(), "rejected", "{error}");
    assert!(error.message().contains("cannot be redacted"), "{error}");
    assert_eq!(env.kube.count(Verb::Exec, "pods"), 0);
}

#[test]
fn a_claim_lease_s_env_reaches_every_command_through_stdin_and_nowhere_else() {
    let env = Env::new();
    env.with_pool(1);
    // The template's pod has none of it: the config's and the acquire request's env (MODE
    // overridden to "fast", API_KEY secret) are in the lease's Secret.
    let config = claim_config(serde_json::json!({"env": {"LEVEL": "debug", "MODE": "from-config"}}));
    let lease = env.provider().acquire(request(&config, "acq-c")).expect("acquires");
    let mut request = sh("echo \"$LEVEL|$MODE|$API_KEY|$EXTRA\"");
    request.env = vec![
        EnvVar { name: "LEVEL".into(), value: "trace".into(), secret: false },
        EnvVar { name: "EXTRA".into(), value: "extra-secret-42".into(), secret: true },
    ];
    let result = env.provider().execute(stored(&lease, &config), request).expect("runs");
    let redacted = crate::redact::REDACTED;
    assert_eq!(
        result.stdout,
        format!("trace|fast|{redacted}|{redacted}\n"),
        "the request's env wins; secrets redacted"
    );
    assert_eq!(result.exit_code, Some(0));

    let execs = env.kube.execs();
    assert_eq!(execs.len(), 1);
    assert_eq!(execs[0].command, exec_wrapper::argv(), "nothing of the env in the exec command");
    assert_eq!(execs[0].container.as_deref(), Some("main"), "the template's only container");
    let stdin = String::from_utf8_lossy(execs[0].stdin.as_deref().unwrap_or_default()).into_owned();
    let header = stdin.lines().next().unwrap_or_default();
    assert!(header.contains(&format!("export API_KEY='{SECRET_VALUE}'")), "the lease's secret travels in the header");
    assert!(header.contains("export MODE='fast'") && header.contains("export LEVEL='trace'"), "{header}");
    assert!(!header.contains("LEVEL='debug'"), "an overridden lease value is not exported: {header}");

    let claim = env.kube.object("sandboxclaims", NS, "pc-acq-c").expect("the claim");
    assert!(!claim.to_string().contains(SECRET_VALUE) && claim["spec"].get("env").is_none(), "{claim}");
    assert!(!env.log_text().contains(SECRET_VALUE), "{}", env.log_text());
}

#[test]
fn a_claim_lease_whose_secret_holds_a_foreign_entry_runs_nothing() {
    let env = Env::new();
    env.with_pool(1);
    let config = claim_config(serde_json::json!({}));
    let lease = env.provider().acquire(request(&config, "acq-d")).expect("acquires");
    env.kube.modify("secrets", NS, "pc-acq-d-env", |s| s["data"]["LD_PRELOAD"] = serde_json::json!("eA=="));
    let error = env.provider().execute(stored(&lease, &config), sh("true")).expect_err("refused");
    assert_eq!(error.kind(), "rejected", "{error}");
    assert!(error.message().contains("LD_PRELOAD"), "{error}");
    assert_eq!(env.kube.count(Verb::Exec, "pods"), 0);
}

/// A claim lease whose pod (from its pool's template) has the containers `names` and, when
/// given, the default-container annotation `annotated`.
fn claim_pod_with(env: &Env, id: &str, names: &[&str], annotated: Option<&str>) -> (Lease, String) {
    env.with_pool_of(1, |pod| {
        pod["spec"]["containers"] =
            names.iter().map(|n| serde_json::json!({"name": n, "image": "busybox:1.36"})).collect();
        if let Some(a) = annotated {
            pod["metadata"]["annotations"][DEFAULT_CONTAINER_ANNOTATION] = serde_json::json!(a);
        }
    });
    let config = claim_config(serde_json::json!({}));
    let lease = env.provider().acquire(request(&config, id)).expect("acquires");
    (lease, config)
}

fn ran_in(env: &Env, lease: &Lease, config: &str) -> Option<String> {
    env.provider().execute(stored(lease, config), sh("echo ok")).expect("runs");
    let execs = env.kube.execs();
    assert_eq!(execs.len(), 1);
    execs[0].container.clone()
}

#[test]
fn a_claim_lease_runs_in_the_container_the_pod_s_annotation_names() {
    let env = Env::new();
    let (lease, config) = claim_pod_with(&env, "acq-e", &["sandbox", "agent"], Some("agent"));
    assert_eq!(ran_in(&env, &lease, &config).as_deref(), Some("agent"), "the annotation wins over the name");

    let env = Env::new();
    let (lease, config) = claim_pod_with(&env, "acq-e", &["sidecar", "sandbox"], Some("no-such-container"));
    assert_eq!(ran_in(&env, &lease, &config).as_deref(), Some("sandbox"), "an annotation naming none is ignored");
}

#[test]
fn a_claim_lease_runs_in_the_sandbox_container_of_several() {
    let env = Env::new();
    let (lease, config) = claim_pod_with(&env, "acq-f", &["sidecar", "sandbox", "proxy"], None);
    assert_eq!(ran_in(&env, &lease, &config).as_deref(), Some("sandbox"));
}

#[test]
fn a_claim_lease_runs_in_the_pod_s_only_container_whatever_its_name() {
    let env = Env::new();
    let (lease, config) = claim_pod_with(&env, "acq-g", &["python"], None);
    assert_eq!(ran_in(&env, &lease, &config).as_deref(), Some("python"));
}

#[test]
fn a_claim_lease_whose_pod_has_several_containers_and_no_hint_runs_nothing() {
    let env = Env::new();
    let (lease, config) = claim_pod_with(&env, "acq-h", &["main", "sidecar"], None);
    let error = env.provider().execute(stored(&lease, &config), sh("true")).expect_err("refused");
    assert_eq!(error.kind(), "rejected", "{error}");
    let message = error.message();
    assert!(message.contains("several containers") && message.contains("\"main\", \"sidecar\""), "{message}");
    assert!(message.contains(DEFAULT_CONTAINER_ANNOTATION) && message.contains("template"), "{message}");
    assert_eq!(env.kube.count(Verb::Exec, "pods"), 0, "nothing exec'd");
}

/// The requests of one execute, as verb and resource.
fn requests_of(env: &Env, run: impl FnOnce()) -> Vec<(Verb, String)> {
    let before = env.kube.calls().len();
    run();
    env.kube.calls().into_iter().skip(before).map(|c| (c.verb, c.plural)).collect()
}

#[test]
fn a_lease_that_names_its_pod_reads_only_its_secret_before_the_command() {
    let env = Env::new();
    for backend in ["sandbox", "job"] {
        let (lease, config) = acquired(&env, backend);
        let sent = requests_of(&env, || {
            let result = env.provider().execute(stored(&lease, &config), sh("echo hi")).expect("runs");
            assert_eq!(result.stdout, "hi\n");
        });
        assert_eq!(sent, [(Verb::Get, "secrets".into()), (Verb::Exec, "pods".into())], "{backend}");
        env.provider().destroy(stored(&lease, &config)).expect("destroys");
    }
}

#[test]
fn a_claim_lease_runs_in_the_container_it_recorded_without_reading_its_pod() {
    let env = Env::new();
    let (lease, config) = claim_pod_with(&env, "acq-r", &["sidecar", "agent"], Some("agent"));
    let recorded = LeaseMetadata::parse_lenient(&lease.metadata).container.expect("acquire records the container");
    assert_eq!((recorded.pod.as_str(), recorded.name.as_str()), (lease.pod_name.as_deref().unwrap(), "agent"));
    let sent = requests_of(&env, || {
        assert_eq!(ran_in(&env, &lease, &config).as_deref(), Some("agent"));
    });
    assert_eq!(sent, [(Verb::Get, "secrets".into()), (Verb::Exec, "pods".into())], "no read of the pod");
}

#[test]
fn a_recorded_container_the_pod_refuses_is_picked_again_from_the_pod() {
    let env = Env::new();
    let (mut lease, config) = claim_pod_with(&env, "acq-s", &["sidecar", "agent"], Some("agent"));
    let mut metadata = LeaseMetadata::parse_lenient(&lease.metadata);
    metadata.container.as_mut().expect("recorded").name = "no-such-container".into();
    lease.metadata = metadata.to_json();
    let sent = requests_of(&env, || {
        let result = env.provider().execute(stored(&lease, &config), sh("echo ok")).expect("runs");
        assert_eq!(result.stdout, "ok\n");
    });
    let containers: Vec<_> = env.kube.execs().into_iter().map(|e| e.container).collect();
    assert_eq!(containers, [Some("no-such-container".into()), Some("agent".into())]);
    assert_eq!(
        sent,
        [
            (Verb::Get, "secrets".into()),
            (Verb::Exec, "pods".into()),
            (Verb::Get, "pods".into()),
            (Verb::Exec, "pods".into())
        ]
    );
}

#[test]
fn a_container_recorded_for_another_pod_is_not_used() {
    let env = Env::new();
    let (mut lease, config) = claim_pod_with(&env, "acq-t", &["sidecar", "agent"], Some("agent"));
    let mut metadata = LeaseMetadata::parse_lenient(&lease.metadata);
    let recorded = metadata.container.as_mut().expect("recorded");
    (recorded.pod, recorded.name) = ("another-pod".into(), "sidecar".into());
    lease.metadata = metadata.to_json();
    assert_eq!(ran_in(&env, &lease, &config).as_deref(), Some("agent"), "picked from the pod the lease names");
}

#[test]
fn a_pod_that_refuses_a_claim_lease_s_command_gets_it_once() {
    let env = Env::new();
    let (lease, config) = claim_pod_with(&env, "acq-u", &["main"], None);
    let completed = "cannot exec into a container in a completed pod; current phase is Succeeded";
    env.kube.fail_always(Verb::Exec, "pods", KubeError::Invalid(completed.into()));
    let error = env.provider().execute(stored(&lease, &config), sh("true")).expect_err("refused");
    assert!(error.message().contains("completed pod"), "{error}");
    assert_eq!(env.kube.count(Verb::Exec, "pods"), 1, "the pick from the pod is the recorded container");
}

#[test]
fn metadata_does_not_choose_the_container_of_a_sandbox_or_job_lease() {
    let env = Env::new();
    for backend in ["sandbox", "job"] {
        let (mut lease, config) = acquired(&env, backend);
        let pod = lease.pod_name.clone().expect("a pod");
        env.kube.modify("pods", NS, &pod, |p| {
            p["spec"]["containers"].as_array_mut().expect("containers").push(serde_json::json!({"name": "sidecar"}));
        });
        let mut metadata = LeaseMetadata::parse_lenient(&lease.metadata);
        metadata.container = Some(PodContainer { pod, name: "sidecar".into() });
        lease.metadata = metadata.to_json();
        let before = env.kube.execs().len();
        env.provider().execute(stored(&lease, &config), sh("true")).expect("runs");
        let containers: Vec<_> = env.kube.execs().into_iter().skip(before).map(|e| e.container).collect();
        assert_eq!(containers, [Some(CONTAINER_NAME.to_string())], "{backend}");
        env.provider().destroy(stored(&lease, &config)).expect("destroys");
    }
}

#[test]
fn a_lease_without_a_secret_reads_nothing_before_the_command() {
    let env = Env::new();
    let config = config("job");
    let mut plain = request(&config, "acq-plain");
    plain.env.retain(|v| !v.secret);
    let lease = env.provider().acquire(plain).expect("acquires");
    let sent = requests_of(&env, || {
        env.provider().execute(stored(&lease, &config), sh("true")).expect("runs");
    });
    assert_eq!(sent, [(Verb::Exec, "pods".into())]);
}

#[test]
fn a_pod_the_lease_names_that_is_gone_sends_the_command_to_the_workload_s_pod_now() {
    let env = Env::new();
    let (mut lease, config) = acquired(&env, "job");
    let now = lease.pod_name.replace("pc-acq-x-replaced".into()).expect("the lease names its pod");
    let result = env.provider().execute(stored(&lease, &config), sh("echo moved")).expect("runs in the pod now");
    assert_eq!(result.stdout, "moved\n");
    assert_eq!(env.kube.count(Verb::List, "pods"), 1, "the resume-check found the pod {now}");
    assert_eq!(env.kube.count(Verb::Exec, "pods"), 2, "the named pod was tried first");
}

#[test]
fn a_lease_whose_own_record_has_expired_is_resume_checked_before_the_command() {
    let env = Env::new();
    let (mut lease, config) = acquired(&env, "sandbox");
    // Renewed since by another host: the workload's expiry is the one that counts.
    lease.expires_at = Some(env.clock.now_millis() - 1);
    let sent = requests_of(&env, || {
        env.provider().execute(stored(&lease, &config), sh("true")).expect("runs");
    });
    let read = |verb: Verb, plural: &str| sent.iter().position(|s| *s == (verb, plural.to_string()));
    let exec = read(Verb::Exec, "pods").expect("the command ran");
    assert!(read(Verb::Get, "sandboxes").is_some_and(|at| at < exec), "{sent:?}");
    assert!(read(Verb::List, "pods").is_some_and(|at| at < exec), "{sent:?}");
}
