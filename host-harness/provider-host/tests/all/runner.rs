//! The runner and the compile cache with components made here: garbage, an empty component,
//! and a hand-written fake provider (`fixtures/fake-provider.wat`) whose `describe` spins,
//! traps or eats memory. Each failure must end its own call and leave the host serving.
//!
//! The real provider is checked by `real_provider_describes_itself`, on the component `make
//! component` builds (or the one `PROVIDER_WASM` names).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use provider_host::compile_cache::{self, CacheOutcome};
use provider_host::records::{ExecRequest, LeaseRef, ProviderError};
use provider_host::{
    ComponentSource, HostEngine, HostError, HostOptions, InstanceCounts, Limits, Policy, ProviderHost,
};

use crate::support::settle;

const SPIN: &str = "(loop $spin (br $spin)) unreachable";
const TRAP: &str = "unreachable";
const EAT_MEMORY: &str = "(loop $grow (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable";

fn fake_provider(describe_body: &str) -> Vec<u8> {
    let text = include_str!("fixtures/fake-provider.wat").replace("DESCRIBE_BODY", describe_body);
    wat::parse_str(text).expect("the fixture is a valid component")
}

/// A client that is never used for a request (these components make no `kube` calls).
fn idle_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
    provider_host::client_from_config(config).expect("client")
}

fn options(limits: Limits) -> HostOptions {
    HostOptions { policy: Policy::kubernetes_default(["default"]), limits, cache_dir: None }
}

async fn load(wasm: Vec<u8>, limits: Limits) -> Result<ProviderHost, HostError> {
    ProviderHost::load(ComponentSource::Bytes(wasm), idle_client(), options(limits)).await
}

/// A fresh, empty directory under the system temp dir.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("provider-host-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn still_serving(host: &ProviderHost) {
    let validation = host.validate_config("{}").await.expect("the next call works");
    assert!(validation.ok && validation.errors.is_empty() && validation.normalized_config.is_none());
}

#[tokio::test]
async fn garbage_and_missing_files_are_load_errors() {
    let garbage = load(b"\0asm but not really".to_vec(), Limits::default()).await;
    assert!(matches!(garbage, Err(HostError::Load(_))), "{:?}", garbage.err());
    let missing = ProviderHost::load(
        ComponentSource::File("/nonexistent/provider.wasm".into()),
        idle_client(),
        options(Limits::default()),
    )
    .await;
    assert!(
        matches!(&missing, Err(HostError::Load(m)) if m.contains("/nonexistent/provider.wasm")),
        "{:?}",
        missing.err()
    );
}

#[tokio::test]
async fn a_component_without_the_provider_exports_does_not_link() {
    let empty = wat::parse_str("(component)").expect("component");
    let result = load(empty, Limits::default()).await;
    assert!(
        matches!(&result, Err(HostError::Link(m)) if m.contains("paperclip:sandbox-provider/provider")),
        "{:?}",
        result.err()
    );
}

/// Calls type-check only the export they run, so the host checks them all when it loads a
/// component: one export of another type refuses the component, naming that export.
#[tokio::test]
async fn a_component_with_a_mistyped_export_does_not_load() {
    let fixture = include_str!("fixtures/fake-provider.wat").replace("DESCRIBE_BODY", TRAP);
    let mistyped = fixture.replace(
        "(result (result $destroy-report (error $provider-error)))",
        "(result (result $destroy-report (error string)))",
    );
    assert_ne!(mistyped, fixture, "the fixture's destroy was not found");
    let result = load(wat::parse_str(mistyped).expect("a valid component"), Limits::default()).await;
    assert!(
        matches!(&result, Err(HostError::Link(m)) if m.contains("destroy") && m.contains("0.1.0")),
        "{:?}",
        result.err()
    );
}

#[tokio::test]
async fn a_valid_call_returns_the_mirrored_record() {
    let host = load(fake_provider(TRAP), Limits::default()).await.expect("loads");
    still_serving(&host).await;
    still_serving(&host).await;
    assert_eq!(host.calls_started(), 2);
    assert_eq!(host.cache_outcome(), &CacheOutcome::Compiled);
}

/// Counted, a call's guest instructions are the same every time it runs on the same input, and
/// a call that fails still counts what it ran; not counted, there is no figure at all.
#[tokio::test]
async fn the_guest_s_instructions_are_counted_when_asked() {
    let loop_then_trap = "(local $i i32) (loop $again (local.set $i (i32.add (local.get $i) (i32.const 1))) \
        (br_if $again (i32.lt_u (local.get $i) (i32.const 100000)))) unreachable";
    let counting = Limits { count_guest_instructions: true, ..Limits::default() };
    let host = load(fake_provider(loop_then_trap), counting).await.expect("loads");
    let before = host.guest_instructions().expect("counted");
    still_serving(&host).await;
    let once = host.guest_instructions().expect("counted") - before;
    still_serving(&host).await;
    let twice = host.guest_instructions().expect("counted") - before;
    assert!(once > 0, "validate-config ran no instruction");
    assert_eq!(twice, 2 * once, "the same call on the same input counted differently");
    assert!(host.describe().await.is_err(), "the describe traps");
    let looped = host.guest_instructions().expect("counted") - before - twice;
    // Each round runs eight operators (two gets, two consts, add, set, compare, branch).
    assert!(looped > 8 * 100_000, "a loop of 100000 rounds counted {looped} instructions");

    let uncounted = load(fake_provider(loop_then_trap), Limits::default()).await.expect("loads");
    still_serving(&uncounted).await;
    assert_eq!(uncounted.guest_instructions(), None);
}

/// The fake provider is a contract 0.1.0 component, which has no `execute`: the host answers
/// `unsupported` itself, naming the contract, and the component stays served.
#[tokio::test]
async fn a_provider_of_contract_0_1_0_has_no_execute_and_the_host_says_so() {
    let host = load(fake_provider(TRAP), Limits::default()).await.expect("loads");
    assert_eq!(host.contract_version(), "0.1.0");
    let lease = serde_json::from_value(serde_json::json!({"provider-lease-id": "fake:1", "backend": "job",
        "namespace": "default", "api-version": "batch/v1", "workload-uid": "u-1", "metadata": "{}"}))
    .expect("lease");
    let request: ExecRequest = serde_json::from_value(serde_json::json!({"command": "true"})).expect("request");
    match host.execute(LeaseRef { lease, config: "{}".into() }, request).await {
        Err(HostError::Provider(ProviderError::Unsupported(d))) => {
            assert!(d.message.contains("contract 0.1.0") && d.message.contains("0.3.0"), "{}", d.message);
        }
        other => panic!("expected unsupported, got {other:?}"),
    }
    still_serving(&host).await;
}

#[tokio::test]
async fn an_input_larger_than_the_host_passes_is_refused_before_any_instance() {
    let limits = Limits { max_input_bytes: 1024 * 1024, ..Limits::default() };
    let host = load(fake_provider(TRAP), limits).await.expect("loads");
    let huge = format!("{{\"annotations\": {{\"a\": \"{}\"}}}}", "x".repeat(5 * 1024 * 1024));
    let refused = host.validate_config(&huge).await;
    assert!(
        matches!(&refused, Err(HostError::InputTooLarge { call: "validate-config", limit: 1_048_576, .. })),
        "{refused:?}"
    );
    assert_eq!(host.calls_started(), 0, "no guest ran");
    still_serving(&host).await;
}

#[tokio::test]
async fn a_trap_ends_only_its_call() {
    let host = load(fake_provider(TRAP), Limits::default()).await.expect("loads");
    let result = host.describe().await;
    assert!(
        matches!(&result, Err(HostError::Trap { call: "describe", message }) if message.contains("unreachable")),
        "{result:?}"
    );
    still_serving(&host).await;
}

/// Tells the helper below to run, and marks the line it prints.
const TRAP_HELPER: &str = "PROVIDER_HOST_TRAP_HELPER";

/// Run by the next test in a process of its own, whose environment asks for backtraces: prints
/// a trap's message as one JSON string.
#[tokio::test]
#[ignore = "a helper: a_trap_s_message_has_the_guest_s_frames_and_not_the_host_s_stack runs it"]
async fn helper_prints_a_trap_s_message() {
    if std::env::var_os(TRAP_HELPER).is_none() {
        return;
    }
    let host = load(fake_provider(TRAP), Limits::default()).await.expect("loads");
    match host.describe().await {
        Err(HostError::Trap { message, .. }) => println!("{TRAP_HELPER} {}", serde_json::json!(message)),
        other => panic!("not a trap: {other:?}"),
    }
}

/// A trap's message goes back to the caller (a plugin, its logs): the guest's frames say where
/// the provider failed; the host's own stack says nothing to the caller, and with
/// `RUST_BACKTRACE` set it made each message some 25 KB (about 80 frames) of the host's
/// internals and the host symbolize its own binary (about 85 MiB resident, kept) on the first
/// trap.
#[tokio::test]
async fn a_trap_s_message_has_the_guest_s_frames_and_not_the_host_s_stack() {
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    let output = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--ignored", "--exact", "--nocapture", &format!("{module}::helper_prints_a_trap_s_message")])
        .env(TRAP_HELPER, "1")
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .expect("run the helper");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix(&format!("{TRAP_HELPER} ")));
    let Some(Ok(serde_json::Value::String(message))) = line.map(serde_json::from_str) else {
        panic!("the helper printed no message: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    };
    assert!(message.contains("wasm backtrace") && message.contains("unreachable"), "{message}");
    assert!(!message.contains("Stack backtrace") && !message.contains("provider_host"), "{message}");
}

#[tokio::test]
async fn a_spinning_guest_is_stopped_at_its_deadline() {
    let host = load(fake_provider(SPIN), Limits { call_timeout_ms: 300, ..Limits::default() }).await.expect("loads");
    let started = Instant::now();
    let result = host.describe().await;
    let took = started.elapsed();
    assert!(matches!(result, Err(HostError::Timeout { call: "describe", limit_ms: 300 })), "{result:?}");
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(2), "{took:?}");
    still_serving(&host).await;
}

#[tokio::test]
async fn the_memory_cap_ends_only_its_call() {
    let limits = Limits { memory_bytes: 4 * 1024 * 1024, ..Limits::default() };
    let host = load(fake_provider(EAT_MEMORY), limits).await.expect("loads");
    let result = host.describe().await;
    assert!(
        matches!(result, Err(HostError::MemoryLimit { call: "describe", limit_bytes, requested_bytes })
            if limit_bytes == 4 << 20 && requested_bytes > 4 << 20),
        "{result:?}"
    );
    still_serving(&host).await;
}

#[tokio::test]
async fn concurrent_calls_each_get_their_own_instance() {
    let host = load(fake_provider(TRAP), Limits { max_concurrent_calls: 2, ..Limits::default() }).await.expect("loads");
    let calls = (0..8).map(|_| host.validate_config("{}"));
    for result in futures::future::join_all(calls).await {
        assert!(result.expect("call").ok);
    }
    assert_eq!(host.calls_started(), 8);
}

/// A call's result goes back before its store is dropped, and the teardown keeps the call's
/// slot until it is done. On a runtime of one thread the teardown cannot run before the caller
/// yields, so that order is observed, not raced.
#[tokio::test(flavor = "current_thread")]
async fn a_call_returns_before_its_teardown_which_holds_the_call_s_slot() {
    let host = load(fake_provider(TRAP), Limits { max_concurrent_calls: 1, ..Limits::default() }).await.expect("loads");
    let before = host.call_times();
    still_serving(&host).await;
    let first = host.call_times().since(&before);
    assert!(first.whole > Duration::ZERO, "the call's own time was not counted");
    assert_eq!(first.teardown, Duration::ZERO, "the store was dropped before the result came back");
    // The host's one slot is the first teardown's until it is done: the next call waits for it.
    still_serving(&host).await;
    assert!(host.call_times().since(&before).teardown > Duration::ZERO, "the first call's store was never dropped");
    assert_eq!(host.calls_started(), 2);
}

/// A call takes the instance made after the last call's teardown (or, for the first, at load)
/// instead of making one on its way to the export; calls at once beyond the one made ahead make
/// their own. On a runtime of one thread no refill runs before the calls yield, so the counts
/// are exact.
#[tokio::test(flavor = "current_thread")]
async fn a_call_takes_the_instance_made_ahead_and_calls_beyond_it_make_their_own() {
    let host = load(fake_provider(TRAP), Limits::default()).await.expect("loads");
    still_serving(&host).await;
    assert_eq!(host.instance_counts(), InstanceCounts { taken: 1, made_in_call: 0 }, "none was made at load");
    settle(&host).await;
    still_serving(&host).await;
    assert_eq!(host.instance_counts(), InstanceCounts { taken: 2, made_in_call: 0 }, "none was made after a call");
    settle(&host).await;
    let at_once = futures::future::join_all((0..3).map(|_| host.validate_config("{}"))).await;
    assert!(at_once.into_iter().all(|result| result.expect("call").ok));
    assert_eq!(host.instance_counts(), InstanceCounts { taken: 3, made_in_call: 2 });
    assert_eq!(host.calls_started(), 5);
}

/// An instance made ahead waits with a deadline of its own; the call that takes it runs to the
/// call's deadline, not to the one the instance was made with.
#[tokio::test]
async fn a_call_on_an_instance_made_ahead_runs_to_its_own_deadline() {
    let host = load(fake_provider(SPIN), Limits { call_timeout_ms: 300, ..Limits::default() }).await.expect("loads");
    // Longer than a call's deadline: the deadline the waiting instance was made with has passed.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let started = Instant::now();
    let result = host.describe().await;
    let took = started.elapsed();
    assert!(matches!(result, Err(HostError::Timeout { call: "describe", limit_ms: 300 })), "{result:?}");
    assert!(took >= Duration::from_millis(300), "the spin was stopped before its call's deadline, after {took:?}");
    assert_eq!(host.instance_counts().taken, 1, "the call did not run on the instance made at load");
}

#[test]
fn the_compile_cache_stores_loads_and_rebuilds_damaged_files() {
    let engine = HostEngine::new(&Limits::default()).expect("engine");
    let engine = engine.engine();
    let wasm = fake_provider(TRAP);
    let dir = scratch_dir("cache");
    let path = compile_cache::cache_path(&dir, &compile_cache::cache_key(engine, &wasm));
    let digest = path.with_extension("cwasm.sha256");
    let outcome = |dir: &PathBuf| compile_cache::load(engine, &wasm, Some(dir.as_path())).expect("component").1;

    assert_eq!(outcome(&dir), CacheOutcome::Stored);
    assert!(path.exists() && digest.exists());
    assert_eq!(outcome(&dir), CacheOutcome::Loaded);

    let mut bytes = std::fs::read(&path).expect("cwasm");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&path, &bytes).expect("damage the file");
    assert!(matches!(outcome(&dir), CacheOutcome::Rebuilt(r) if r.contains("sha256")));
    assert_eq!(outcome(&dir), CacheOutcome::Loaded);

    let full = std::fs::read(&path).expect("cwasm");
    std::fs::write(&path, &full[..full.len() / 3]).expect("truncate the file");
    assert!(matches!(outcome(&dir), CacheOutcome::Rebuilt(_)));

    std::fs::remove_file(&digest).expect("remove the digest");
    assert!(matches!(outcome(&dir), CacheOutcome::Rebuilt(r) if r.contains("digest")));

    let garbage = b"not a precompiled component".to_vec();
    let garbage_digest: String = {
        use sha2::Digest;
        sha2::Sha256::digest(&garbage).iter().map(|b| format!("{b:02x}")).collect()
    };
    std::fs::write(&path, &garbage).expect("replace the file");
    std::fs::write(&digest, garbage_digest).expect("with a matching digest");
    assert!(matches!(outcome(&dir), CacheOutcome::Rebuilt(r) if r.contains("not a precompiled component")));
    assert_eq!(outcome(&dir), CacheOutcome::Loaded);

    let other = compile_cache::cache_key(engine, &fake_provider(SPIN));
    assert_ne!(other, compile_cache::cache_key(engine, &wasm), "the key follows the wasm");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_host_loads_from_its_cache_directory() {
    let dir = scratch_dir("host-cache");
    let with_cache = |limits| HostOptions { cache_dir: Some(dir.clone()), ..options(limits) };
    let first =
        ProviderHost::load(ComponentSource::Bytes(fake_provider(TRAP)), idle_client(), with_cache(Limits::default()))
            .await
            .expect("loads");
    assert_eq!(first.cache_outcome(), &CacheOutcome::Stored);
    let second =
        ProviderHost::load(ComponentSource::Bytes(fake_provider(TRAP)), idle_client(), with_cache(Limits::default()))
            .await
            .expect("loads");
    assert_eq!(second.cache_outcome(), &CacheOutcome::Loaded);
    still_serving(&second).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Kubernetes provider as `make component` leaves it, or the component `PROVIDER_WASM` names.
fn real_provider() -> PathBuf {
    let path = std::env::var_os("PROVIDER_WASM").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-unknown-unknown/component/provider.wasm")
    });
    assert!(path.is_file(), "no provider component at {}: run `make component` (make test does)", path.display());
    path
}

#[tokio::test]
async fn real_provider_describes_itself() {
    let path = real_provider();
    let host = ProviderHost::load(ComponentSource::File(path), idle_client(), options(Limits::default()))
        .await
        .expect("the provider loads");
    let info = host.describe().await.expect("describe");
    assert_eq!(info.driver_key, "kubernetes");
    assert!(serde_json::from_str::<serde_json::Value>(&info.config_schema).is_ok(), "the schema is JSON");
}
