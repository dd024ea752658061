//! `sandbox-host leases list|gc`: the installation's leases found on the cluster (not another
//! installation's), and the clean-up of those that ended.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::support::{OutputBlocking, ProviderCli};

fn ok(out: std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_listed_and_the_ended_ones_collected() {
    let cli = ProviderCli::start("leases").await;
    let jobs = Api::<Job>::namespaced(cli.cluster.client().await.expect("admin client"), "default");
    // Another installation's Job in the same namespace: never listed, never collected.
    let theirs: Job = serde_json::from_value(json!({
        "metadata": {"name": "theirs", "labels": {"app.kubernetes.io/managed-by": "another-installation"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}
    }))
    .expect("a Job");
    jobs.create(&PostParams::default(), &theirs).await.expect("their Job");
    let acquire = |id: &str, extra: &[&str]| -> String {
        let args = [&["acquire", "--json", "--acquisition-id", id], extra].concat();
        let lease: Value =
            serde_json::from_str(&ok(cli.run(&args).output_blocking().expect("acquire"))).expect("lease");
        lease["provider-lease-id"].as_str().expect("an id").to_string()
    };
    let live = acquire("live", &[]);
    let short = acquire("short", &["--expires-in", "3"]);
    let listed = || -> Vec<(String, String)> {
        let out = cli.run_without_config(&["leases", "list", "--json"]).output_blocking().expect("leases list");
        let records: Vec<Value> = serde_json::from_str(&ok(out)).expect("records");
        records
            .iter()
            .map(|r| (r["provider-lease-id"].as_str().unwrap_or("").into(), r["state"].as_str().unwrap_or("").into()))
            .collect()
    };
    let first = listed();
    assert_eq!(
        first.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        [live.as_str(), short.as_str()],
        "{first:?}"
    );
    let table = ok(cli.run_without_config(&["leases", "list"]).output_blocking().expect("leases list"));
    let row = |id: &str| table.lines().find(|l| l.starts_with(id)).map(|l| l.split_whitespace().collect::<Vec<_>>());
    assert!(table.starts_with("LEASE"), "{table}");
    assert_eq!(row(&live).map(|cells| cells[1]), Some("ready"), "{table}");
    assert!(!table.contains("theirs"), "{table}");

    let since = Instant::now();
    while !listed().iter().any(|(id, state)| *id == short && (state == "expired" || state == "ended")) {
        assert!(since.elapsed() < Duration::from_secs(120), "the 3 s lease never showed as over: {:?}", listed());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let dry = ok(cli.run_without_config(&["leases", "gc", "--dry-run"]).output_blocking().expect("gc --dry-run"));
    assert!(dry.contains(&format!("would destroy {short}")) && !dry.contains(&live), "{dry}");
    assert!(jobs.get_opt("pc-short").await.expect("read").is_some(), "a dry run destroys nothing");
    let collected = ok(cli.run_without_config(&["leases", "gc"]).output_blocking().expect("gc"));
    assert!(collected.contains(&format!("destroyed     {short} (")), "{collected}");
    let gone = |job: Option<Job>| job.is_none_or(|j| j.metadata.deletion_timestamp.is_some());
    assert!(gone(jobs.get_opt("pc-short").await.expect("read")), "the ended lease is destroyed");
    assert!(!gone(jobs.get_opt("pc-live").await.expect("read")), "the live one stays");
    let old = ok(cli.run_without_config(&["leases", "gc", "--older-than", "0"]).output_blocking().expect("gc"));
    assert!(old.contains(&format!("destroyed     {live} (older than 0s)")), "{old}");
    assert!(!gone(jobs.get_opt("theirs").await.expect("read")), "another installation's Job is never touched");
}
