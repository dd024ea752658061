//! `sandbox-host serve --metrics-addr`: the host's metrics scraped in the Prometheus text
//! format while leases live their life through the server.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::support::{BIN, component, temp_dir};

/// `GET path` on `addr`: the status line and the body.
async fn get(addr: &str, path: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect to the metrics address");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    (head.lines().next().unwrap_or_default().to_string(), body.to_string())
}

/// The value of the sample `name{labels}` (exactly as written), if the scrape has it.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn serve_counts_calls_leases_and_denials_for_prometheus() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let dir: PathBuf = temp_dir("metrics");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig(embedded_cluster::PROVIDER_USER).expect("kubeconfig"))
        .expect("write");
    let mut child = Command::new(BIN)
        .args(["serve", "--allow-namespace", "default", "--metrics-addr", "127.0.0.1:0", "--component"])
        .arg(component())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let line = stderr.next_line().await.expect("stderr").expect("serve prints the metrics address");
            if let Some(rest) = line.strip_prefix("sandbox-host serve: metrics at http://") {
                break rest.trim_end_matches("/metrics").to_string();
            }
        }
    })
    .await
    .expect("the metrics address in time");
    let mut call = async |request: Value| -> Value {
        stdin.write_all(format!("{request}\n").as_bytes()).await.expect("send");
        let line = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
            .await
            .expect("a reply in time")
            .expect("stdout")
            .expect("a reply");
        serde_json::from_str(&line).expect("JSON")
    };

    let (status, before) = get(&addr, "/metrics").await;
    assert!(status.ends_with("200 OK"), "{status}");
    assert_eq!(sample(&before, "sandbox_host_leases"), Some(0.0), "{before}");
    assert!(before.ends_with("# EOF\n"), "{before}");

    let config = json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"});
    let acquired = call(json!({"id": 1, "method": "acquire",
        "params": {"config": config, "run-id": "r", "acquisition-id": "metrics-1"}}))
    .await;
    let lease = acquired["result"].clone();
    assert!(lease["provider-lease-id"].is_string(), "{acquired}");
    let executed = call(json!({"id": 2, "method": "execute",
        "params": {"lease": lease, "config": config, "request": {"command": "true"}}}))
    .await;
    assert_eq!(executed["result"]["exit-code"], 0, "{executed}");
    let (_, during) = get(&addr, "/metrics").await;
    for (series, value) in [
        ("sandbox_host_calls_total{operation=\"acquire\",outcome=\"ok\"}", 1.0),
        ("sandbox_host_calls_total{operation=\"execute\",outcome=\"ok\"}", 1.0),
        ("sandbox_host_call_duration_seconds_count{operation=\"acquire\"}", 1.0),
        ("sandbox_host_leases", 1.0),
        ("sandbox_host_call_guest_seconds_count{operation=\"acquire\"}", 1.0),
        ("sandbox_host_call_import_seconds_count{operation=\"execute\"}", 1.0),
    ] {
        assert_eq!(sample(&during, series), Some(value), "{series} in:\n{during}");
    }
    // Each call ran on one instance; the first on the one made when the host loaded.
    let made = |how: &str| sample(&during, &format!("sandbox_host_call_instances_total{{made=\"{how}\"}}"));
    let (ahead, in_call) = (made("ahead").expect("ahead"), made("in-call").expect("in-call"));
    assert!(ahead >= 1.0 && ahead + in_call == 2.0, "instances: {ahead} ahead, {in_call} in calls:\n{during}");
    // Each call's guest and import time are parts of its duration: both there, neither past it.
    for op in ["acquire", "execute"] {
        let sum = |metric: &str| sample(&during, &format!("sandbox_host_{metric}_sum{{operation=\"{op}\"}}"));
        let (guest, imports) = (sum("call_guest_seconds"), sum("call_import_seconds"));
        let total = sum("call_duration_seconds").expect("the call's duration");
        assert!(guest.is_some_and(|g| g > 0.0) && imports.is_some_and(|i| i > 0.0), "{op}: {guest:?} {imports:?}");
        let parts = guest.unwrap_or_default() + imports.unwrap_or_default();
        assert!(parts <= total, "{op}: guest + imports {parts} > duration {total}");
    }

    // A lease in a namespace the policy does not allow: its deletes are refused by the host.
    let elsewhere = json!({"provider-lease-id": "k8s:job:other:pc-x", "backend": "job", "namespace": "other",
        "api-version": "batch/v1", "workload-uid": "", "metadata": "{}"});
    let refused = call(json!({"id": 3, "method": "destroy", "params": {"lease": elsewhere, "config": config}})).await;
    assert!(refused["error"].is_object(), "{refused}");
    let destroyed = call(json!({"id": 4, "method": "destroy", "params": {"lease": lease, "config": config}})).await;
    assert!(destroyed["result"].is_object(), "{destroyed}");
    let (_, after) = get(&addr, "/metrics").await;
    assert_eq!(sample(&after, "sandbox_host_leases"), Some(0.0), "{after}");
    assert!(sample(&after, "sandbox_host_policy_denials_total{verb=\"delete\"}").is_some_and(|n| n >= 1.0), "{after}");
    let failed = after
        .lines()
        .any(|l| l.starts_with("sandbox_host_calls_total{operation=\"destroy\",outcome=") && !l.contains("\"ok\""));
    assert!(failed, "the refused destroy is counted by its error's kind:\n{after}");
    // The README's table names exactly the metrics served.
    let served: std::collections::BTreeSet<String> = after
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| match l.split_once(' ')? {
            (name, "counter") => Some(format!("{name}_total")),
            (name, _) => Some(name.to_string()),
        })
        .collect();
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README");
    let documented: std::collections::BTreeSet<String> = readme
        .lines()
        .filter_map(|l| {
            l.strip_prefix("| `sandbox_host_")?.split_once('`').map(|(name, _)| format!("sandbox_host_{name}"))
        })
        .collect();
    assert_eq!(documented, served, "the README's metrics table against a scrape");
    let (status, _) = get(&addr, "/elsewhere").await;
    assert!(status.ends_with("404 Not Found"), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}
