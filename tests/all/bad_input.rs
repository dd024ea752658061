//! Bad input, generated: configs with a field of the wrong type, empty, huge, unicode, NUL,
//! path-like, upper case or over-long; acquisition and run ids that cannot be used; lease ids
//! and metadata that are garbage. Each gets a clear, short error (naming the field where there
//! is one), no call traps, and the request log proves nothing was written to the cluster.

use embedded_cluster::SandboxVersions;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use provider_host::HostError;
use provider_host::records::{Backend, Lease, LeaseRef, ResumeOutcome};
use serde_json::{Value, json};
use tests::*;

/// Longest message a refusal may be: it quotes at most a short prefix of the input.
const SHORT: usize = 1_200;

/// The top-level fields of the provider's config, as its published schema (`describe`) names
/// them: every field the provider accepts gets the bad values, including ones added later.
fn fields(schema: &str) -> Vec<String> {
    let schema: Value = serde_json::from_str(schema).expect("the config schema is JSON");
    let fields: Vec<String> =
        schema["properties"].as_object().expect("the schema has properties").keys().cloned().collect();
    assert!(fields.len() >= 20 && fields.iter().any(|f| f == "claim"), "every backend's fields: {fields:?}");
    fields
}

/// Strings a careless or hostile caller sends.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("../../etc/passwd".to_string()),
        Just("UPPER_Case".to_string()),
        Just("nul\0byte".to_string()),
        Just("ünïcødé-✓".to_string()),
        Just("x".repeat(300)),
        Just("y".repeat(2 * 1024 * 1024)),
        "\\PC{0,40}",
        "[a-z0-9-]{1,70}",
    ]
}

/// Values of every JSON type, nasty strings among them.
fn nasty_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        nasty_string().prop_map(Value::String),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
        Just(json!([])),
        Just(json!({})),
        prop::collection::vec(nasty_string(), 0..4).prop_map(|v| json!(v)),
        prop::collection::btree_map(nasty_string(), nasty_string(), 0..4).prop_map(|m| json!(m)),
    ]
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// The provider's writes since a mark.
fn writes(h: &Harness, mark: u64) -> Vec<String> {
    h.provider_writes_since(mark)
}

fn no_trap(result: &Result<impl std::fmt::Debug, HostError>) -> Result<(), TestCaseError> {
    if let Err(e @ (HostError::Trap { .. } | HostError::MemoryLimit { .. } | HostError::Timeout { .. })) = result {
        return Err(TestCaseError::fail(format!("the call did not answer: {e}")));
    }
    Ok(())
}

fn short(what: &str, text: &str) -> Result<(), TestCaseError> {
    prop_assert!(text.len() <= SHORT, "{what} is {} bytes: {}…", text.len(), &text[..200.min(text.len())]);
    Ok(())
}

#[test]
fn configs_with_bad_fields_get_short_errors_at_their_path_and_write_nothing() {
    let rt = runtime();
    let h = rt.block_on(Harness::start(SandboxVersions::Both));
    let info = rt.block_on(h.host.describe()).expect("describe");
    let strategy = (
        prop::sample::select(fields(&info.config_schema)),
        nasty_value(),
        prop::sample::select(&["sandbox", "job"][..]),
    );
    runner(96)
        .run(&strategy, |(field, value, backend)| {
            let mut config: Value = serde_json::from_str(&config(backend, json!({}))).expect("config");
            config[field.as_str()] = value;
            let text = config.to_string();
            let mark = h.cluster.requests().mark();
            let validation = rt.block_on(h.host.validate_config(&text));
            no_trap(&validation)?;
            let Ok(validation) = validation else { return Ok(()) };
            for problem in validation.errors.iter().chain(&validation.warnings) {
                short("a problem", &format!("{} {}", problem.path, problem.message))?;
            }
            if validation.ok {
                return Ok(());
            }
            let at_field = validation.errors.iter().any(|p| p.path.starts_with(&format!("/{field}")));
            let at_root = text.len() > 512 * 1024 && validation.errors.iter().any(|p| p.path.is_empty());
            prop_assert!(at_field || at_root, "no error names /{field}: {:?}", validation.errors);
            let acquired = rt.block_on(h.host.acquire(request(&text, "bad-config-1")));
            no_trap(&acquired)?;
            match acquired {
                Err(HostError::Provider(e)) => {
                    prop_assert_eq!(e.kind(), "invalid-config", "{}", e);
                    short("the acquire's error", e.message())?;
                }
                Err(HostError::InputTooLarge { .. }) => {}
                other => prop_assert!(false, "an invalid config was acquired: {other:?}"),
            }
            prop_assert!(writes(&h, mark).is_empty(), "a refused config wrote: {:?}", writes(&h, mark));
            Ok(())
        })
        .expect("every bad config is refused cleanly");
}

#[test]
fn ids_that_cannot_be_used_are_refused_by_name_and_write_nothing() {
    let rt = runtime();
    let h = rt.block_on(Harness::start(SandboxVersions::Both));
    let cfg = config("job", json!({}));
    let unusable_acquisition = nasty_string().prop_filter("not a DNS-1123 label part", |id| {
        id.is_empty()
            || id.len() > 60
            || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            || id.starts_with('-')
            || id.ends_with('-')
    });
    let unusable_run = prop_oneof![Just(String::new()), Just("r".repeat(300)), "[a-z]{0,5}[\\x00-\\x1f][a-z]{0,5}"];
    runner(64)
        .run(&(unusable_acquisition, unusable_run, any::<bool>()), |(acquisition, run, which)| {
            let mark = h.cluster.requests().mark();
            let mut req = request(&cfg, "fine-1");
            let named = if which {
                req.acquisition_id = acquisition;
                "acquisition id"
            } else {
                req.run_id = run;
                "run id"
            };
            let acquired = rt.block_on(h.host.acquire(req));
            no_trap(&acquired)?;
            match acquired {
                Err(HostError::Provider(e)) => {
                    prop_assert!(e.message().contains(named), "{named} not named: {e}");
                    prop_assert!(!e.retryable(), "{e}");
                    short("the error", e.message())?;
                }
                Err(HostError::InputTooLarge { .. }) => {}
                other => prop_assert!(false, "an unusable {named} was acquired: {other:?}"),
            }
            prop_assert!(writes(&h, mark).is_empty(), "a refused id wrote: {:?}", writes(&h, mark));
            Ok(())
        })
        .expect("every unusable id is refused cleanly");
}

#[test]
fn garbage_leases_are_never_resumable_and_write_nothing() {
    let rt = runtime();
    let h = rt.block_on(Harness::start(SandboxVersions::Both));
    let cfg = config("sandbox", json!({}));
    let lease_id = prop_oneof![
        nasty_string(),
        "[a-z0-9-]{1,20}".prop_map(|n| format!("k8s:sandbox:{NAMESPACE}:pc-{n}")),
        "[a-z0-9-]{1,20}".prop_map(|n| format!("k8s:job:{NAMESPACE}:{n}:pvc")),
        "[a-z0-9:-]{0,40}".prop_map(|n| format!("k8s:{n}")),
    ];
    let metadata = prop_oneof![nasty_string(), nasty_value().prop_map(|v| v.to_string())];
    runner(64)
        .run(&(lease_id, metadata, nasty_string()), |(id, metadata, uid)| {
            let lease = LeaseRef {
                lease: Lease {
                    provider_lease_id: id,
                    backend: Backend::Sandbox,
                    namespace: NAMESPACE.to_string(),
                    api_version: "agents.x-k8s.io/v1beta1".to_string(),
                    workload_uid: uid,
                    pod_name: None,
                    pod_uid: None,
                    pod_ip: None,
                    claimed_sandbox: None,
                    expires_at: None,
                    reusable: true,
                    metadata,
                },
                config: cfg.clone(),
            };
            let mark = h.cluster.requests().mark();
            let resumed = rt.block_on(h.host.resume_check(lease.clone()));
            no_trap(&resumed)?;
            prop_assert!(!matches!(resumed, Ok(ResumeOutcome::Resumable(_))), "a garbage lease is resumable");
            let renewed = rt.block_on(h.host.renew(lease.clone(), jiff::Timestamp::now().as_millisecond() + 60_000));
            no_trap(&renewed)?;
            prop_assert!(!matches!(renewed, Ok(ResumeOutcome::Resumable(_))), "a garbage lease renews");
            for result in
                [rt.block_on(h.host.release(lease.clone())).map(|_| ()), rt.block_on(h.host.destroy(lease)).map(|_| ())]
            {
                no_trap(&result)?;
                if let Err(HostError::Provider(e)) = &result {
                    short("the error", e.message())?;
                }
            }
            prop_assert!(writes(&h, mark).is_empty(), "a garbage lease wrote: {:?}", writes(&h, mark));
            Ok(())
        })
        .expect("every garbage lease is answered cleanly");
}
