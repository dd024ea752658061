//! The `sandbox-dev` binary from outside: `cluster` serves a cluster another process can use,
//! `simulate` drives a cluster's workloads from another process, `fault` and `requests` steer it,
//! and `contract` runs the fault matrix.

use std::path::{Path, PathBuf};

use crate::built;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::await_condition;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-dev");

/// Kills the child process when the test ends, whatever happens.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sandbox-dev-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

async fn client_for(kubeconfig: &Path) -> kube::Client {
    let yaml = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    embedded_cluster::tls::client_from_kubeconfig(&yaml).await.expect("client")
}

#[tokio::test]
async fn cluster_command_serves_a_cluster_to_other_processes() {
    let dir = temp_dir("cluster");
    let kubeconfig = dir.join("kubeconfig");
    let child = Command::new(BIN)
        .args(["cluster", "--port", "0", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .spawn()
        .expect("start sandbox-dev cluster");
    let _reaper = Reaper(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !kubeconfig.exists() {
        assert!(Instant::now() < deadline, "no kubeconfig written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = client_for(&kubeconfig).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()), "{names:?}");

    let out = Command::new(BIN)
        .args(["fault", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["add", "--verb", "create", "--resource", "configmaps", "--code", "500", "--times", "1"])
        .output()
        .expect("run fault add");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("cm");
    let err = cms.create(&PostParams::default(), &cm).await.expect_err("the injected fault");
    assert!(matches!(err, kube::Error::Api(s) if s.code == 500));
    cms.create(&PostParams::default(), &cm).await.expect("the fault fired once");

    let out = Command::new(BIN)
        .args(["requests", "--counts", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("run requests");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"create configmaps\": 2"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `sandbox-dev fault ...` against a kubeconfig, without blocking the cluster this test
/// serves; its stdout, or the failure's stderr.
async fn fault(kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let out = tokio::process::Command::new(BIN)
        .args(["fault", "--kubeconfig"])
        .arg(kubeconfig)
        .args(args)
        .output()
        .await
        .expect("run fault");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `kubectl ARGS` against a kubeconfig: stdout, or a panic with what kubectl said.
fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl").arg("--kubeconfig").arg(kubeconfig).args(args).output().expect("run kubectl");
    assert!(out.status.success(), "kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// SIGTERM (what a supervisor or a test harness sends) stops `sandbox-dev cluster` in order, as
/// Ctrl-C does: it exits 0, the processes its pods started are gone, and so are its files.
#[test]
fn cluster_command_stops_in_order_on_sigterm() {
    let dir = temp_dir("cluster-sigterm");
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(BIN)
        .args(["cluster", "--port", "0", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .spawn()
        .expect("start sandbox-dev cluster");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kubeconfig.exists() {
        assert!(Instant::now() < deadline, "no kubeconfig written within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    kubectl(
        &kubeconfig,
        &["run", "sigterm", "--image", "busybox:1.36", "--restart", "Never", "--", "sleep", "infinity"],
    );
    kubectl(&kubeconfig, &["wait", "--for=condition=Ready", "pod/sigterm", "--timeout=120s"]);
    kubectl(&kubeconfig, &["exec", "sigterm", "--", "sh", "-c", "sleep 300.417 >/dev/null 2>&1 &"]);
    // Its pid on this machine (`$!` would say its pid in the pod's PID namespace).
    let sleeping = || {
        std::fs::read_dir("/proc").expect("/proc").flatten().find_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            (cmdline == b"sleep\x00300.417\x00").then(|| e.file_name().to_string_lossy().into_owned())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        if let Some(pid) = sleeping() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the exec's background process never showed");
        std::thread::sleep(Duration::from_millis(50));
    };
    let proc_dir = PathBuf::from("/proc").join(&pid);
    assert!(proc_dir.exists(), "the background process {pid} outlives its exec");
    let root_prefix = format!("embedded-cluster-{}-", child.id());
    let roots = || {
        std::fs::read_dir(std::env::temp_dir())
            .expect("temp dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&root_prefix))
            .count()
    };
    assert_eq!(roots(), 1, "the cluster keeps its pods' files under the temp dir");

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let exit = loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            break exit;
        }
        assert!(Instant::now() < deadline, "sandbox-dev cluster still runs 60 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exit.code(), Some(0), "an orderly stop, not death by the signal");
    let deadline = Instant::now() + Duration::from_secs(30);
    while proc_dir.exists() && !std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default().contains(") Z ") {
        assert!(
            Instant::now() < deadline,
            "the pod's background process {pid} still runs 30 s after the cluster stopped"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(roots(), 0, "the cluster's files are removed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn fault_add_flags_round_trip_through_the_admin_endpoint() {
    let cluster = EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() })
        .await
        .expect("API server only");
    let dir = temp_dir("fault-flags");
    let kubeconfig = dir.join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).expect("write kubeconfig");

    let discovery = [
        "add",
        "--kind",
        "discovery",
        "--group",
        "agents.x-k8s.io",
        "--api-version",
        "v1beta1",
        "--path",
        "/apis/*",
        "--verb",
        "get",
        "--user",
        "someone",
        "--after",
        "1",
        "--times",
        "2",
        "--code",
        "500",
    ];
    fault(&kubeconfig, &discovery).await.expect("fault add a discovery rule");
    let lost = [
        "add",
        "--group",
        "",
        "--resource",
        "configmaps",
        "--subresource",
        "",
        "--namespace",
        "default",
        "--name",
        "cm-*",
        "--verb",
        "create",
        "--drop-after-apply",
        "--probability",
        "0.5",
    ];
    fault(&kubeconfig, &lost).await.expect("fault add a lost-response rule");
    fault(&kubeconfig, &["add", "--resource", "pods", "--drop-before-apply"]).await.expect("fault add a drop rule");

    let match_of = |v: serde_json::Value| serde_json::from_value::<Match>(v).expect("a match");
    let expected = vec![
        Rule {
            matches: match_of(json!({"kind": "discovery", "group": "agents.x-k8s.io", "version": "v1beta1",
                "path": "/apis/*", "verb": "get", "user": "someone"})),
            action: Action::Error {
                code: 500,
                reason: "InternalError".into(),
                message: None,
                retry_after_seconds: None,
            },
            after: 1,
            times: Some(2),
            probability: None,
        },
        Rule {
            matches: match_of(json!({"group": "", "resource": "configmaps", "subresource": "", "namespace": "default",
                "name": "cm-*", "verb": "create"})),
            action: Action::DropAfterApply,
            after: 0,
            times: None,
            probability: Some(0.5),
        },
        Rule {
            matches: match_of(json!({"resource": "pods"})),
            action: Action::DropBeforeApply,
            after: 0,
            times: None,
            probability: None,
        },
    ];
    let stored: Vec<Rule> = cluster.faults().list().into_iter().map(|(_, rule)| rule).collect();
    assert_eq!(stored, expected);

    let listed: serde_json::Value =
        serde_json::from_str(&fault(&kubeconfig, &["list"]).await.expect("fault list")).expect("JSON");
    let listed: Vec<Rule> = listed["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| serde_json::from_value(r["rule"].clone()).expect("a rule"))
        .collect();
    assert_eq!(listed, expected, "fault list shows what was added");

    let refused =
        fault(&kubeconfig, &["add", "--kind", "nonsense", "--code", "500"]).await.expect_err("an unknown kind");
    assert!(refused.contains("discovery"), "{refused}");
    let refused =
        fault(&kubeconfig, &["add", "--drop-before-apply", "--drop-after-apply"]).await.expect_err("two actions");
    assert!(refused.contains("cannot be used with"), "{refused}");
    assert_eq!(cluster.faults().list().len(), 3, "refused rules were never sent");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An API server without controllers, and an admin kubeconfig for it in a temp dir named by
/// `tag`: each simulated controller impersonates its own user from it, as inside the embedded
/// cluster, so the request log tells their calls apart.
async fn api_server_only(tag: &str) -> (EmbeddedCluster, PathBuf, PathBuf) {
    let cluster = EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() })
        .await
        .expect("API server only");
    let dir = temp_dir(tag);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig(embedded_cluster::ADMIN_USER).expect("kubeconfig"))
        .expect("write kubeconfig");
    (cluster, dir, kubeconfig)
}

#[tokio::test]
async fn simulate_runs_the_controllers_from_another_process() {
    let (cluster, dir, kubeconfig) = api_server_only("simulate").await;
    let child = Command::new(BIN)
        .args(["simulate", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .spawn()
        .expect("start sandbox-dev simulate");
    let _reaper = Reaper(child);

    let client = cluster.client().await.expect("client");
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox"), "sandboxes");
    let sandboxes: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let sb: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": "remote"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}
    }))
    .expect("sandbox");
    sandboxes.create(&PostParams::default(), &sb).await.expect("create");
    let ready = |o: Option<&DynamicObject>| {
        o.and_then(|o| o.data["status"]["conditions"].as_array())
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    };
    tokio::time::timeout(Duration::from_secs(60), await_condition(sandboxes, "remote", ready))
        .await
        .expect("Ready in time, driven by the out-of-process controllers")
        .expect("watch");
    let entries = cluster.requests().entries();
    let by =
        |kind: embedded_cluster::ControllerKind| entries.iter().filter(|e| e.user == kind.user()).collect::<Vec<_>>();
    use embedded_cluster::ControllerKind::{Gc, Job, Kubelet, Sandbox};
    assert!(
        by(Kubelet).iter().any(|e| e.verb == "create" && e.subresource == "binding"),
        "the remote scheduler bound the pod as the node"
    );
    assert!(
        by(Sandbox).iter().any(|e| e.resource == "sandboxes" && e.subresource == "status"),
        "the remote Sandbox controller wrote status as itself"
    );
    assert!(by(Gc).iter().any(|e| e.verb == "watch"), "the collector watches as itself");
    assert!(by(Job).iter().any(|e| e.resource == "jobs"), "the Job controller reads Jobs as itself");
    assert!(
        !entries
            .iter()
            .any(|e| e.user == embedded_cluster::ADMIN_USER && matches!(e.subresource.as_str(), "binding" | "status")),
        "no controller runs as the kubeconfig's user"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `simulate` runs until stopped: a reader of its progress lines that went away (`simulate |
/// head`) must not end it. Its stdout is closed before it writes a line; it still runs its
/// controllers, and is still running once they have started.
#[tokio::test]
async fn simulate_outlives_a_reader_that_went_away() {
    let (cluster, dir, kubeconfig) = api_server_only("simulate-epipe").await;
    let mut child = Command::new(BIN)
        .args(["simulate", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sandbox-dev simulate");
    drop(child.stdout.take());
    let mut reaper = Reaper(child);
    let kubelet = embedded_cluster::ControllerKind::Kubelet.user();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !cluster.requests().entries().iter().any(|e| e.user == kubelet) {
        assert!(reaper.0.try_wait().expect("wait").is_none(), "simulate ended: its stdout was closed");
        assert!(std::time::Instant::now() < deadline, "the kubelet made no request within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reaper.0.try_wait().expect("wait").is_none(), "simulate ended after its controllers started");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn simulate_leaves_jobs_and_collection_to_a_running_controller_manager() {
    let (cluster, dir, kubeconfig) = api_server_only("simulate-kcm").await;
    let client = cluster.client().await.expect("client");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client, "kube-system");
    let now = jiff::Timestamp::now().to_string();
    let lease = serde_json::from_value(json!({"metadata": {"name": "kube-controller-manager"},
        "spec": {"holderIdentity": "cp-1_abc", "leaseDurationSeconds": 15, "renewTime": now}}))
    .expect("lease");
    leases.create(&PostParams::default(), &lease).await.expect("the controller manager's lease");
    let lines = simulate_report(&kubeconfig, &[], "gc").await;
    for kind in ["job", "gc"] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("not starting {kind}: kube-controller-manager holds its leader Lease"))),
            "{lines:?}"
        );
    }
    assert!(lines.iter().any(|l| l.starts_with("kubelet acts as")), "{lines:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    use embedded_cluster::ControllerKind::{Gc, Job};
    let entries = cluster.requests().entries();
    assert!(!entries.iter().any(|e| e.user == Job.user() || e.user == Gc.user()), "neither ran");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `simulate` (with `extra` flags) says of its controllers until it has said whether it
/// runs controller `last`; the process is stopped then.
async fn simulate_report(kubeconfig: &Path, extra: &[&str], last: &str) -> Vec<String> {
    use std::io::BufRead as _;
    let mut child = Command::new(BIN)
        .args(["simulate", "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start sandbox-dev simulate");
    let stdout = child.stdout.take().expect("stdout");
    let _reaper = Reaper(child);
    let last = last.to_string();
    let lines = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let about_last =
                line.starts_with(&format!("not starting {last}")) || line.starts_with(&format!("{last} acts as"));
            seen.push(line);
            if about_last {
                break;
            }
        }
        seen
    });
    tokio::time::timeout(Duration::from_secs(30), lines).await.expect("simulate reports").expect("join")
}

/// kube-controller-manager started without leader election holds no Lease: simulate finds it
/// by its pod in kube-system, and the operator's `--controller-manager` overrides what it finds
/// either way (`running` for one started as a plain process elsewhere).
#[tokio::test]
async fn simulate_finds_a_controller_manager_by_its_pod_and_takes_the_operators_word() {
    let (cluster, dir, kubeconfig) = api_server_only("simulate-kcm-pod").await;
    let lines = simulate_report(&kubeconfig, &["--controller-manager", "running"], "job").await;
    assert!(lines.iter().any(|l| l.starts_with("not starting job: --controller-manager running")), "{lines:?}");

    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(cluster.client().await.expect("client"), "kube-system");
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "kube-controller-manager-cp-1", "labels": {"component": "kube-controller-manager"}},
        "spec": {"containers": [{"name": "kube-controller-manager", "image": "registry.k8s.io/kube-controller-manager:v1.33.0"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("the controller manager's static pod");
    let running = json!({"status": {"phase": "Running"}});
    pods.patch_status("kube-controller-manager-cp-1", &PatchParams::default(), &Patch::Merge(running))
        .await
        .expect("it runs");
    let lines = simulate_report(&kubeconfig, &[], "job").await;
    assert!(
        lines.iter().any(|l| l.starts_with("not starting job: kube-controller-manager runs as pod kube-system/")),
        "{lines:?}"
    );
    let lines = simulate_report(&kubeconfig, &["--controller-manager", "absent"], "job").await;
    assert!(lines.iter().any(|l| l.starts_with("job acts as")), "{lines:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `contract` prints the fault matrix of the operations asked for as a table with its pass
/// count, and a config whose readiness wait does not fit a cell's deadline fails the clean
/// run, saying what to set.
#[test]
fn contract_prints_the_fault_matrix_of_one_operation() {
    let dir = temp_dir("contract-matrix");
    let config = dir.join("job.json");
    let job =
        json!({"namespace": "contract", "backend": "job", "image": "busybox:1.36", "readinessTimeoutSeconds": 20});
    std::fs::write(&config, job.to_string()).expect("config");
    let run = |config: &Path| {
        Command::new(BIN)
            .args(["contract", "--no-scenarios", "--operation", "release", "--clusters", "4", "--component"])
            .arg(built("provider.wasm"))
            .arg("--config")
            .arg(config)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .output()
            .expect("run sandbox-dev contract")
    };
    let out = run(&config);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("fault matrix, backend job") && stdout.contains("release #0 get jobs"), "{stdout}");
    let totals = stdout.lines().find(|l| l.contains("cells passed")).expect("a pass count");
    let numbers: Vec<u32> = totals.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(matches!(numbers[..], [passed, cells] if passed == cells && cells >= 20), "{totals}");
    assert!(!stdout.contains("acquire #"), "only the operation asked for: {stdout}");

    let slow = dir.join("slow.json");
    let slow_job =
        json!({"namespace": "contract", "backend": "job", "image": "busybox:1.36", "readinessTimeoutSeconds": 120});
    std::fs::write(&slow, slow_job.to_string()).expect("config");
    let out = run(&slow);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("matrix release clean") && stdout.contains("Set it to at most 24"), "{stdout}");
}

/// `--embedded` runs any `sandbox-host` command that loads a component against a fresh
/// in-process embedded cluster; it is refused where it means nothing, or where another flag
/// names the cluster.
#[test]
fn embedded_runs_a_host_command_on_an_in_process_cluster() {
    let dir = temp_dir("embedded");
    let config = dir.join("job.json");
    std::fs::write(&config, json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"}).to_string())
        .expect("config");
    let run = |args: &[&str]| {
        Command::new(BIN)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .args(args)
            .output()
            .expect("run sandbox-dev")
    };
    let component = built("provider.wasm");
    let (component, config, cache) =
        (component.to_string_lossy(), config.to_string_lossy(), dir.join("cache").to_string_lossy().into_owned());
    let probe = ["probe", "--embedded", "--component", &component, "--config", &config, "--cache-dir", &cache];
    let out = run(&probe);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("api-reachable") && stdout.contains("namespace-exists"), "{stdout}");

    let out = run(&["rbac", "--embedded"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--embedded applies to"), "{out:?}");
    let out = run(&[&probe[..], &["--kubeconfig", "k.yaml"]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with --kubeconfig"), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
