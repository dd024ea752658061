//! A sandbox whose lease file is lost, or was never written: `destroy` from the lease id alone,
//! and an acquire stopped by Ctrl-C.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;

use crate::support::{BIN, OutputBlocking, ProviderCli, refused};

/// The row: `{"provider-lease-id": ...}` was refused with `missing field backend`, and
/// destroy needed a config it never reads. Now the id (in a file, or on the command line) is
/// enough, the other commands say why they need the whole lease, and an id of another provider
/// is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_needs_only_the_lease_id() {
    let cli = ProviderCli::start("lost-lease").await;
    let jobs = Api::<Job>::namespaced(cli.cluster.client().await.expect("admin client"), "default");
    let acquire = |id: &str| -> String {
        let out = cli.run(&["acquire", "--json", "--acquisition-id", id]).output_blocking().expect("acquire");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let lease: serde_json::Value = serde_json::from_slice(&out.stdout).expect("lease JSON");
        lease["provider-lease-id"].as_str().expect("an id").to_string()
    };

    let first = acquire("lost-1");
    let id_only = cli.dir.join("id-only.json");
    std::fs::write(&id_only, serde_json::json!({"provider-lease-id": first}).to_string()).expect("write");
    let id_only = id_only.to_string_lossy().into_owned();
    let stderr = refused(&cli.run(&["resume-check", "--lease", &id_only]).output_blocking().expect("resume-check"));
    assert!(stderr.contains("not the rest of the lease") && stderr.contains("--lease-id"), "{stderr}");
    let out = cli.run_without_config(&["destroy", "--lease", &id_only]).output_blocking().expect("destroy");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pc-lost-1"), "{out:?}");

    let second = acquire("lost-2");
    let out = cli.run_without_config(&["destroy", "--json", "--lease-id", &second]).output_blocking().expect("destroy");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report JSON");
    let job = report["objects"].as_array().expect("objects").iter().find(|o| o["kind"] == "Job").cloned();
    assert_eq!(job.map(|o| o["outcome"].clone()), Some(serde_json::json!("deleted")), "{report}");
    for name in ["pc-lost-1", "pc-lost-2"] {
        let left = jobs.get_opt(name).await.expect("read the Job");
        assert!(left.is_none_or(|job| job.metadata.deletion_timestamp.is_some()), "{name} is deleted");
    }

    let stderr =
        refused(&cli.run_without_config(&["destroy", "--lease-id", "ref:abc"]).output_blocking().expect("run"));
    assert!(stderr.contains("not made by the Kubernetes provider") && stderr.contains("--lease"), "{stderr}");
    assert!(cli.provider_writes().iter().filter(|w| w.starts_with("delete")).count() >= 2);
}

/// The row: Ctrl-C during acquire exited silently and left the Job until its TTL. Now
/// it says what the acquire created and prints the command that removes it, which works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_acquire_says_what_is_left_and_how_to_remove_it() {
    let cli = ProviderCli::start("ctrl-c").await;
    let jobs = Api::<Job>::namespaced(cli.cluster.client().await.expect("admin client"), "default");
    // The provider's wait for readiness (a watch) is held, so the acquire is surely under way.
    let hold = cli.hold_provider_watches();
    let child = cli
        .run(&["acquire", "--acquisition-id", "ctrl-c"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start acquire");
    let waited_since = Instant::now();
    while !cli.cluster.faults().holding(hold) {
        assert!(waited_since.elapsed() < Duration::from_secs(120), "the acquire never reached its wait for readiness");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill -INT");
    assert!(status.success());
    let out = tokio::task::block_in_place(|| child.wait_with_output()).expect("acquire ends");
    cli.cluster.faults().remove(hold);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "stopped as a shell reports SIGINT: {stderr}");
    assert!(stderr.contains("jobs.batch default/pc-ctrl-c"), "names what it created: {stderr}");
    assert!(jobs.get_opt("pc-ctrl-c").await.expect("read").is_some(), "the Job is there, as it says");

    let command = stderr.lines().find_map(|l| l.strip_prefix("Remove them with: ")).expect("the command");
    let words = shlex::split(command).expect("shell words");
    assert_eq!(words[..4], ["sandbox-host", "destroy", "--lease-id", "k8s:job:default:pc-ctrl-c"], "{command}");
    let out =
        Command::new(BIN).args(&words[1..]).arg("--cache-dir").arg(&cli.cache).output_blocking().expect("destroy");
    assert_eq!(out.status.code(), Some(0), "the printed command works: {}", String::from_utf8_lossy(&out.stderr));
    let left = jobs.get_opt("pc-ctrl-c").await.expect("read the Job");
    assert!(left.as_ref().is_none_or(|job| job.metadata.deletion_timestamp.is_some()), "deleted: {left:?}");
}
