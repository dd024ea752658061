//! The JSON-lines server (`provider_host::serve`) over the reference provider: replies in the
//! order calls finish, one per request, typed errors, and a shutdown that lets calls in flight
//! finish or cancels them, saying so.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use provider_host::serve::{ServeOptions, ServeSummary, StopReason, serve};
use provider_host::{ComponentSource, HostOptions, Limits, Policy, ProviderHost};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

fn component() -> ComponentSource {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-wasip2/component/reference_provider.wasm");
    assert!(path.exists(), "no reference provider at {}: build it with `make component`", path.display());
    ComponentSource::File(path)
}

/// A server on the reference provider, and the client's ends of its input, output and signals.
struct Client {
    input: Option<DuplexStream>,
    output: Lines<BufReader<DuplexStream>>,
    signals: mpsc::UnboundedSender<String>,
    server: JoinHandle<ServeSummary>,
}

async fn start(grace: Duration, max_line_bytes: usize) -> Client {
    start_with(Some(grace), max_line_bytes, Limits::default(), 1 << 20).await
}

/// A server with these options and limits, whose output pipe holds `output_bytes`.
async fn start_with(grace: Option<Duration>, max_line_bytes: usize, limits: Limits, output_bytes: usize) -> Client {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/provider-cache-tests");
    let options = HostOptions { policy: Policy::kubernetes_default(["default"]), limits, cache_dir: Some(cache) };
    let host = Arc::new(ProviderHost::load_without_cluster(component(), options).await.expect("loads"));
    let serve_options = ServeOptions { max_line_bytes, shutdown_grace: grace, ..ServeOptions::for_host(&host) };
    let (input, server_in) = tokio::io::duplex(1 << 20);
    let (server_out, output) = tokio::io::duplex(output_bytes);
    let (signals, stop) = mpsc::unbounded_channel();
    let server = tokio::spawn(serve(host, server_in, server_out, stop, serve_options));
    Client { input: Some(input), output: BufReader::new(output).lines(), signals, server }
}

impl Client {
    async fn send(&mut self, line: &str) {
        let input = self.input.as_mut().expect("the input is open");
        input.write_all(format!("{line}\n").as_bytes()).await.expect("the server reads");
    }

    /// Ends the server's input, as a client at end of file.
    fn close_input(&mut self) {
        self.input = None;
    }

    async fn reply(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.output.next_line())
            .await
            .expect("a reply in time")
            .expect("the output reads")
            .expect("a reply, not the end of output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("a reply is one JSON line ({e}): {line}"))
    }

    /// The summary, once the output has ended (after every reply was read).
    async fn finish(mut self) -> ServeSummary {
        let rest = self.output.next_line().await.expect("the output reads");
        assert_eq!(rest, None, "no more replies");
        self.server.await.expect("the server ends")
    }
}

fn acquire(id: u32, acquisition: &str, config: Value) -> String {
    json!({"id": id, "method": "acquire", "params": {"config": config, "run-id": "run-1", "acquisition-id": acquisition}})
        .to_string()
}

fn slow(millis: u64) -> Value {
    json!({"operations": {"acquire": {"delayMillis": millis}}})
}

#[tokio::test]
async fn replies_come_as_calls_finish_and_a_lease_lives_its_whole_life() {
    let mut client = start(Duration::from_secs(5), 1 << 20).await;
    client.send(&acquire(1, "slow-1", slow(600))).await;
    client.send(r#"{"id":"d","method":"describe"}"#).await;
    client.send(r#"{"id":"h","method":"hello"}"#).await;
    let (first, second) = (client.reply().await, client.reply().await);
    let mut fast = [first["id"].clone(), second["id"].clone()];
    fast.sort_by_key(Value::to_string);
    assert_eq!(fast, [json!("d"), json!("h")], "describe and hello overtake the slow acquire");
    let hello = if first["id"] == "h" { first } else { second };
    assert_eq!(hello["result"]["protocol"], 1);
    assert_eq!(hello["result"]["contract-version"], "0.3.0");
    // What a client needs to stay inside the server's limits, so no line is refused unanswered.
    assert_eq!(hello["result"]["max-line-bytes"], 1 << 20);
    assert_eq!(
        (hello["result"]["call-timeout-ms"].as_u64(), hello["result"]["max-concurrent-calls"].as_u64()),
        (Some(30_000), Some(16))
    );
    let acquired = client.reply().await;
    assert_eq!(acquired["id"], 1);
    let lease = acquired["result"].clone();
    assert_eq!(lease["provider-lease-id"], "reference:slow-1", "{acquired}");

    let stored = json!({"lease": lease, "config": slow(600)});
    client.send(&json!({"id": 2, "method": "resume-check", "params": stored}).to_string()).await;
    let resumed = client.reply().await;
    assert_eq!(resumed["result"]["resumable"]["provider-lease-id"], "reference:slow-1", "{resumed}");
    let mut renew = stored.clone();
    renew["expires-at"] = json!(lease["expires-at"].as_i64().expect("an expiry") - 1000);
    client.send(&json!({"id": 3, "method": "renew", "params": renew}).to_string()).await;
    assert!(client.reply().await["result"]["resumable"].is_object());
    client.send(&json!({"id": 4, "method": "release", "params": stored}).to_string()).await;
    assert_eq!(client.reply().await, json!({"id": 4, "result": null}));
    client.send(&json!({"id": 5, "method": "destroy", "params": stored}).to_string()).await;
    let destroyed = client.reply().await;
    assert_eq!(destroyed["result"]["objects"][0]["outcome"], "deleted", "{destroyed}");

    client.close_input();
    let summary = client.finish().await;
    assert_eq!((summary.reason, summary.replies, summary.cancelled), (StopReason::EndOfInput, 7, 0));
}

#[tokio::test]
async fn mistakes_are_answered_and_the_server_goes_on() {
    let mut client = start(Duration::from_secs(5), 4096).await;
    client.send("not json").await;
    assert_eq!(client.reply().await["error"]["kind"], "parse-error");
    client.send(&format!(r#"{{"id":1,"method":"probe","params":{{"config":"{}"}}}}"#, "x".repeat(5000))).await;
    let long = client.reply().await;
    assert_eq!((long["id"].clone(), long["error"]["kind"].clone()), (Value::Null, json!("line-too-long")));
    client.send(r#"{"id":2,"method":"acquir"}"#).await;
    let unknown = client.reply().await;
    assert_eq!((unknown["id"].clone(), unknown["error"]["kind"].clone()), (json!(2), json!("unknown-method")));
    client.send(r#"{"id":3,"method":"renew","params":{"lease":{},"config":{}}}"#).await;
    let bad = client.reply().await;
    assert_eq!(
        (bad["error"]["kind"].as_str(), bad["error"]["source"].as_str()),
        (Some("invalid-params"), Some("protocol"))
    );
    assert!(bad["error"]["message"].as_str().is_some_and(|m| m.contains("params.lease")), "{bad}");

    // A provider's typed error keeps its case, its retry advice and its path.
    client.send(&acquire(4, "bad-1", json!({"leaseTtlSeconds": "soon"}))).await;
    let invalid = client.reply().await;
    assert_eq!(
        (invalid["error"]["source"].as_str(), invalid["error"]["kind"].as_str()),
        (Some("provider"), Some("invalid-config")),
        "{invalid}"
    );
    assert_eq!(invalid["error"]["path"], "/leaseTtlSeconds");

    // An id in flight cannot be reused; once answered, it can.
    client.send(&acquire(5, "slow-5", slow(800))).await;
    client.send(&acquire(5, "slow-5b", slow(0))).await;
    let duplicate = client.reply().await;
    assert_eq!((duplicate["id"].clone(), duplicate["error"]["kind"].clone()), (json!(5), json!("duplicate-id")));
    assert_eq!(client.reply().await["result"]["provider-lease-id"], "reference:slow-5");
    client.send(&acquire(5, "slow-5b", slow(0))).await;
    assert_eq!(client.reply().await["result"]["provider-lease-id"], "reference:slow-5b");
}

#[tokio::test]
async fn at_end_of_input_calls_in_flight_finish_and_answer() {
    let mut client = start(Duration::from_secs(10), 1 << 20).await;
    client.send(&acquire(1, "eof-1", slow(700))).await;
    client.send(&acquire(2, "eof-2", slow(300))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    client.close_input();
    assert_eq!(client.reply().await["id"], 2);
    assert_eq!(client.reply().await["result"]["provider-lease-id"], "reference:eof-1");
    let summary = client.finish().await;
    assert_eq!((summary.reason, summary.finished_after_stop, summary.cancelled), (StopReason::EndOfInput, 2, 0));
}

#[tokio::test]
async fn a_signal_stops_reading_and_a_second_one_cancels_what_is_in_flight() {
    let mut client = start(Duration::from_secs(20), 1 << 20).await;
    client.send(&acquire(1, "sig-1", slow(10_000))).await;
    client.send(&acquire(2, "sig-2", slow(200))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    client.signals.send("SIGTERM".into()).expect("the server listens");
    // The fast call finishes inside the grace; a request sent after the stop is never read.
    assert_eq!(client.reply().await["id"], 2);
    let late = acquire(3, "sig-3", slow(0)) + "\n";
    let input = client.input.as_mut().expect("the input is open");
    // The server no longer reads: the write fails or lands in a buffer nobody reads.
    let _ = input.write_all(late.as_bytes()).await;
    client.signals.send("SIGTERM".into()).expect("the server listens");
    let cancelled = client.reply().await;
    assert_eq!(cancelled["id"], 1);
    assert_eq!(
        (cancelled["error"]["kind"].as_str(), cancelled["error"]["source"].as_str()),
        (Some("cancelled"), Some("host"))
    );
    let message = cancelled["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("SIGTERM") && message.contains("same acquisition-id"), "{message}");
    let summary = client.finish().await;
    assert_eq!(summary.reason, StopReason::Signal("SIGTERM".into()));
    assert_eq!((summary.replies, summary.finished_after_stop, summary.cancelled), (2, 1, 1));
}

#[tokio::test]
async fn a_call_that_outlasts_the_grace_is_cancelled_and_answered() {
    let mut client = start(Duration::from_millis(300), 1 << 20).await;
    client.send(&acquire(1, "grace-1", slow(10_000))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    client.close_input();
    assert_eq!(client.reply().await["error"]["kind"], "cancelled");
    assert!(started.elapsed() < Duration::from_secs(5), "cancelled at the grace, not at the call's end");
    assert_eq!(client.finish().await.cancelled, 1);
}

#[tokio::test]
async fn by_default_calls_queued_for_a_slot_still_answer_at_end_of_input() {
    let limits = Limits { max_concurrent_calls: 1, call_timeout_ms: 2_000, ..Limits::default() };
    let mut client = start_with(None, 1 << 20, limits, 1 << 20).await;
    for n in 1..=3 {
        client.send(&acquire(n, &format!("queued-{n}"), slow(1_500))).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    client.close_input();
    // One slot: the calls run one after another, 4.5 s in all, past a single call timeout.
    for _ in 1..=3 {
        let reply = client.reply().await;
        assert!(reply["result"]["provider-lease-id"].is_string(), "{reply}");
    }
    let summary = client.finish().await;
    assert_eq!((summary.finished_after_stop, summary.cancelled), (3, 0));
}

#[tokio::test]
async fn a_stopped_server_exits_even_when_nobody_reads_its_replies() {
    let mut client = start_with(Some(Duration::from_millis(200)), 1 << 20, Limits::default(), 64).await;
    for n in 1..=3 {
        client.send(&json!({"id": n, "method": "describe"}).to_string()).await;
    }
    client.close_input();
    let Client { server, output, .. } = client;
    let summary = tokio::time::timeout(Duration::from_secs(20), server).await.expect("the server ends").expect("joins");
    assert_eq!(summary.reason, StopReason::EndOfInput);
    drop(output);
}

/// Executes are counted apart from the other calls: a flood of one lease's commands never
/// stops the server from reading, so `hello`, another lease's `resume-check` and its command
/// are answered while the flood is in flight; past what one lease may queue, an execute is
/// answered `busy` at once. A stop then cancels the flood, and every request has one reply.
#[tokio::test]
async fn a_flood_of_executes_never_stops_the_reading_nor_another_lease() {
    let mut client = start(Duration::from_secs(1), 1 << 20).await;
    // The defaults: 64 requests of other methods in flight, so 128 executes of one lease.
    let queued = 128;
    client.send(&acquire(1, "flood-x", json!({}))).await;
    client.send(&acquire(2, "quiet-y", json!({}))).await;
    let (first, second) = (client.reply().await, client.reply().await);
    let lease = |id: u32| if first["id"] == id { first["result"].clone() } else { second["result"].clone() };
    let (x, y) = (lease(1), lease(2));
    let stalled = json!({"operations": {"execute": {"delayMillis": 600_000}}});
    for n in 0..=queued {
        let params = json!({"lease": x, "config": stalled, "request": {"command": "true"}});
        client.send(&json!({"id": format!("x-{n}"), "method": "execute", "params": params}).to_string()).await;
    }
    let busy = client.reply().await;
    assert_eq!(busy["id"], format!("x-{queued}"), "{busy}");
    assert_eq!(
        (&busy["error"]["source"], &busy["error"]["kind"], &busy["error"]["retryable"]),
        (&json!("host"), &json!("busy"), &json!(true)),
        "{busy}"
    );
    client.send(r#"{"id":"h","method":"hello"}"#).await;
    assert_eq!(client.reply().await["id"], "h", "read and answered while the flood is in flight");
    let stored = json!({"lease": y, "config": {}});
    client.send(&json!({"id": "y-resume", "method": "resume-check", "params": stored}).to_string()).await;
    let resumed = client.reply().await;
    assert_eq!(resumed["id"], "y-resume", "{resumed}");
    assert!(resumed["result"]["resumable"].is_object(), "{resumed}");
    let params = json!({"lease": y, "config": {}, "request": {"command": "true"}});
    client.send(&json!({"id": "y-exec", "method": "execute", "params": params}).to_string()).await;
    let ran = client.reply().await;
    assert_eq!((&ran["id"], &ran["error"]["kind"]), (&json!("y-exec"), &json!("unsupported")), "{ran}");

    client.signals.send("SIGTERM".into()).expect("the server listens");
    let mut cancelled = std::collections::HashSet::new();
    for _ in 0..queued {
        let reply = client.reply().await;
        assert_eq!(reply["error"]["kind"], "cancelled", "{reply}");
        assert!(cancelled.insert(reply["id"].to_string()), "{reply} twice");
    }
    let summary = client.finish().await;
    let sent = 2 + queued + 1 + 3;
    assert_eq!((summary.replies, summary.cancelled), (sent as u64, queued as u64), "{summary:?}");
}
