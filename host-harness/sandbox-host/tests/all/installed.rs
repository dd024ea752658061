//! An installed `sandbox-host` works from anywhere: copied alone into an empty directory (as
//! `cargo install` puts it in `~/.cargo/bin`) and run from another empty directory with a fresh
//! `HOME`, it finds the cluster through `KUBECONFIG` as kubectl does, runs the Kubernetes
//! provider built into it, keeps its compile cache in the user's cache directory, and writes
//! nothing where it runs but the files it is asked to write.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-host");

/// The names in `dir`.
fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

/// Runs the test's copy of the binary in `work`, with `home` as `HOME` and `KUBECONFIG` set.
fn run(binary: &Path, work: &Path, home: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    let out = tokio::task::block_in_place(|| {
        Command::new(binary)
            .args(args)
            .current_dir(work)
            .env("HOME", home)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("run the installed sandbox-host")
    });
    assert!(
        out.status.success(),
        "sandbox-host {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The cluster runs in this process: commands block a worker thread, so another must serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_binary_runs_a_lease_from_an_empty_directory() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let root: PathBuf = std::env::temp_dir().join(format!("sandbox-host-installed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (bin, home, work) = (root.join("bin"), root.join("home"), root.join("work"));
    for dir in [&bin, &home, &work] {
        std::fs::create_dir_all(dir).expect("dir");
    }
    let binary = bin.join("sandbox-host");
    std::fs::copy(BIN, &binary).expect("install the binary");
    let kubeconfig = root.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig(embedded_cluster::PROVIDER_USER).expect("kubeconfig"))
        .expect("write");
    std::fs::write(
        work.join("config.json"),
        json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"}).to_string(),
    )
    .expect("config");

    let described = run(&binary, &work, &home, &kubeconfig, &["describe", "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&described.stdout).expect("describe prints JSON");
    assert_eq!(info["driver-key"], "kubernetes", "the built-in provider: {info}");
    let acquire =
        ["acquire", "--config", "config.json", "--acquisition-id", "a-1", "--run-id", "r-1", "--out", "lease.json"];
    run(&binary, &work, &home, &kubeconfig, &acquire);
    let lease = ["--lease", "lease.json", "--config", "config.json"];
    let ran = run(
        &binary,
        &work,
        &home,
        &kubeconfig,
        &[&["exec"][..], &lease, &["--", "sh", "-c", "echo from-anywhere"]].concat(),
    );
    assert!(String::from_utf8_lossy(&ran.stdout).contains("from-anywhere"), "{ran:?}");
    run(&binary, &work, &home, &kubeconfig, &[&["destroy"][..], &lease].concat());

    assert_eq!(entries(&work), BTreeSet::from(["config.json".to_string(), "lease.json".to_string()]));
    let cache = home.join(".cache/sandbox-host");
    assert!(cache.is_dir() && !entries(&cache).is_empty(), "the compile cache is in the user's cache directory");
    assert_eq!(entries(&bin), BTreeSet::from(["sandbox-host".to_string()]), "nothing is needed beside the binary");
    let _ = std::fs::remove_dir_all(&root);
}
