//! The `sandbox-host` binary from outside: `cluster` serves a cluster another process can use,
//! `simulate` drives a cluster's workloads from another process, `fault` and `requests` steer it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::await_condition;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-host");

/// Kills the child process when the test ends, whatever happens.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sandbox-host-{tag}-{}", std::process::id()));
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
        .expect("start sandbox-host cluster");
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

/// Runs `sandbox-host fault ...` against a kubeconfig, without blocking the cluster this test
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

/// SIGTERM (what a supervisor or a test harness sends) stops `sandbox-host cluster` in order, as
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
        .expect("start sandbox-host cluster");
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
        assert!(Instant::now() < deadline, "sandbox-host cluster still runs 60 s after SIGTERM");
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
        .expect("start sandbox-host simulate");
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
        .expect("start sandbox-host simulate");
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
        .expect("start sandbox-host simulate");
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

/// Runs a command without stalling the async runtime's other work (the in-process cluster).
trait OutputBlocking {
    fn output_blocking(&mut self) -> std::io::Result<std::process::Output>;
}

impl OutputBlocking for Command {
    fn output_blocking(&mut self) -> std::io::Result<std::process::Output> {
        tokio::task::block_in_place(|| self.output())
    }
}

fn component() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-wasip2/component/provider.wasm");
    assert!(path.exists(), "no provider component at {}: run `make component` (make test does)", path.display());
    path
}

/// An embedded cluster in this process and the files the provider commands take.
struct ProviderCli {
    cluster: EmbeddedCluster,
    dir: PathBuf,
    kubeconfig: PathBuf,
    config: PathBuf,
    cache: PathBuf,
}

impl ProviderCli {
    /// A cluster, its kubeconfig for the provider's identity, and a Job backend config.
    async fn start(tag: &str) -> Self {
        let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
        let dir = temp_dir(tag);
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, cluster.kubeconfig(embedded_cluster::PROVIDER_USER).expect("kubeconfig"))
            .expect("write");
        let config = dir.join("config.json");
        std::fs::write(&config, json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"}).to_string())
            .expect("config");
        let cache = dir.join("cache");
        Self { cluster, dir, kubeconfig, config, cache }
    }

    /// `sandbox-host ARGS` against the cluster, with the config; without backtraces, so its
    /// output is what a person sees.
    fn run(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
        cmd.args(args)
            .arg("--component")
            .arg(component())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .arg("--config")
            .arg(&self.config);
        cmd
    }

    /// `sandbox-host exec` on a lease file: `sh -c script`, which must come last.
    fn exec(&self, lease: &str, script: &str) -> std::process::Output {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
        cmd.arg("exec").arg("--component").arg(component()).arg("--kubeconfig").arg(&self.kubeconfig);
        cmd.arg("--cache-dir").arg(&self.cache).arg("--config").arg(&self.config).args(["--lease", lease]);
        cmd.args(["--", "sh", "-c", script]).output_blocking().expect("exec")
    }

    /// Requests of the provider's identity that change the cluster.
    fn provider_writes(&self) -> Vec<String> {
        self.cluster
            .requests()
            .entries()
            .into_iter()
            .filter(|e| {
                e.user == embedded_cluster::PROVIDER_USER && !matches!(e.verb.as_str(), "get" | "list" | "watch")
            })
            .map(|e| format!("{} {}", e.verb, e.resource))
            .collect()
    }
}

impl Drop for ProviderCli {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The cluster runs in this process: commands block a worker thread, so another must serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_commands_round_trip_a_lease_through_files() {
    let cli = ProviderCli::start("lease").await;
    let lease = cli.dir.join("lease.json");
    let lease_arg = lease.to_string_lossy().to_string();
    let run = |args: &[&str]| cli.run(args);

    let out = run(&[
        "acquire",
        "--acquisition-id",
        "cli-1",
        "--run-id",
        "run-1",
        "--secret-env",
        "TOKEN=cli-secret-9",
        "--json",
        "--out",
        &lease_arg,
    ])
    .output()
    .expect("acquire");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "acquire: {}{stdout}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("\"provider-lease-id\""), "{stdout}");
    assert!(!stdout.contains("cli-secret-9"), "no secret value in the printed lease");

    let out = run(&["resume-check", "--lease", &lease_arg]).output_blocking().expect("resume-check");
    assert_eq!(out.status.code(), Some(0), "resumable: {}", String::from_utf8_lossy(&out.stderr));
    let out = cli.exec(&lease_arg, "echo $TOKEN | wc -c; echo \"$TOKEN\"; echo to-stderr >&2; exit 4");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "the command's exit code: {stderr}");
    assert_eq!(stdout, "13\n[redacted]\n", "the secret's length, never the secret");
    assert!(stderr.contains("to-stderr"), "{stderr}");
    let out = run(&["validate-config"]).output_blocking().expect("validate-config");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    // The namespaces are the operator's: a stored config that names another one neither widens
    // the policy nor stops destroy, which works from the lease id alone.
    let elsewhere = json!({"namespace": "kube-system", "backend": "job", "image": "busybox:1.36"});
    std::fs::write(&cli.config, elsewhere.to_string()).expect("config");
    let out = run(&["destroy", "--json", "--lease", &lease_arg]).output_blocking().expect("destroy");
    assert!(out.status.success(), "destroy: {}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["resume-check", "--lease", &lease_arg]).output_blocking().expect("resume-check");
    assert_eq!(out.status.code(), Some(3), "expired is exit code 3: {}", String::from_utf8_lossy(&out.stdout));
    let out = run(&["validate-config"]).output_blocking().expect("validate-config");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("error   /namespace: the host's policy does not allow namespace \"kube-system\""),
        "{stdout}"
    );
}

/// Asserts that a command failed as a refusal (exit code 1) and returns its stderr.
fn refused(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "a refusal, not a crash: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_env_entry_without_equals_is_quoted_by_a_short_prefix() {
    let cli = ProviderCli::start("env-quote").await;
    let entry = "E".repeat(100_000);
    let out = cli
        .run(&["acquire", "--acquisition-id", "cli-q", "--run-id", "run-1", "--env", &entry])
        .output_blocking()
        .expect("acquire");
    let stderr = refused(&out);
    assert!(stderr.len() < 1_000, "a {} byte message: {stderr}", stderr.len());
    assert!(stderr.contains("not NAME=VALUE") && stderr.contains("(100000 bytes)"), "{stderr}");
    assert_eq!(cli.provider_writes(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_env_entry_without_equals_is_never_shown() {
    let cli = ProviderCli::start("secret-env").await;
    let out = cli
        .run(&["acquire", "--acquisition-id", "cli-s", "--run-id", "run-1", "--secret-env", "hunter2-cli-secret"])
        .output_blocking()
        .expect("acquire");
    let stderr = refused(&out);
    let shown = format!("{stderr}{}", String::from_utf8_lossy(&out.stdout));
    assert!(!shown.contains("hunter2"), "the value was shown: {shown}");
    assert!(stderr.contains("--secret-env") && stderr.contains("NAME=VALUE"), "{stderr}");
    assert_eq!(cli.provider_writes(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_beyond_any_time_is_a_clear_error_not_a_panic() {
    let cli = ProviderCli::start("expires-in").await;
    let huge = u64::MAX.to_string();
    for expires_in in ["9223372036854775807", huge.as_str()] {
        let out = cli
            .run(&["acquire", "--acquisition-id", "cli-e", "--run-id", "run-1", "--expires-in", expires_in])
            .output_blocking()
            .expect("acquire");
        let stderr = refused(&out);
        assert!(stderr.contains("--expires-in") && stderr.contains(expires_in), "{stderr}");
    }
    let lease = cli.dir.join("lease.json");
    let stored = json!({
        "provider-lease-id": "k8s:job:default:pc-cli-e", "backend": "job", "namespace": "default",
        "api-version": "batch/v1", "workload-uid": "u-1", "metadata": "{}"
    });
    std::fs::write(&lease, stored.to_string()).expect("lease");
    let lease_arg = lease.to_string_lossy().to_string();
    let out = cli
        .run(&["renew", "--lease", &lease_arg, "--expires-in", "9223372036854775807"])
        .output_blocking()
        .expect("renew");
    let stderr = refused(&out);
    assert!(stderr.contains("--expires-in"), "{stderr}");
    assert_eq!(cli.provider_writes(), Vec::<String>::new());
}

/// `policy show` and `rbac` need no cluster: they load the component, read what it declares
/// and print what the operator's policy grants it.
#[test]
fn policy_show_and_rbac_print_the_effective_grant() {
    let dir = temp_dir("policy");
    let inspect = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .arg("--component")
            .arg(component())
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    let (code, stdout, stderr) = inspect(&["policy", "show", "--namespace", "agents", "--warm-pool", "python"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("claims may name warm pools: python; templates: none"), "{stdout}");
    assert!(stdout.contains("(contract 0.4.0)"), "{stdout}");
    assert!(stdout.contains("namespaces  agents"), "{stdout}");
    assert!(stdout.contains("refused: nothing"), "{stdout}");
    assert!(stdout.contains("ownership   label only. Warning: the host has no ownership key"), "{stdout}");

    let key = "cli-test-ownership-key-0123456789abcdef";
    let key_file = dir.join("ownership-key");
    std::fs::write(&key_file, format!("{key}\n")).expect("key");
    let key_arg = key_file.to_string_lossy().to_string();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (code, stdout, stderr) = inspect(&["policy", "show", "--ownership-key-file", &key_arg]);
    assert_eq!(code, Some(1), "a key file others may read is refused: {stdout}");
    assert!(stderr.contains("chmod 600") && !stderr.contains(key), "{stderr}");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (code, stdout, stderr) = inspect(&["policy", "show", "--ownership-key-file", &key_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("ownership   signed (signing key ") && !stdout.contains(key), "{stdout}");
    let (code, stdout, stderr) = inspect(&["policy", "show", "--json", "--ownership-key-file", &key_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    let shown: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!((shown["ownership"]["signed"].as_bool(), shown["ownership"]["keys"].as_u64()), (Some(true), Some(1)));
    assert!(!stdout.contains(key), "{stdout}");

    let narrow = dir.join("policy.json");
    let rules = json!({"namespaces": ["agents"], "owner-id": "team-a", "resources": [
        {"group": "batch", "versions": ["v1"], "plural": "jobs", "verbs": ["get", "create", "delete"]},
        {"group": "", "versions": ["v1"], "plural": "configmaps", "verbs": ["get"]}
    ]});
    std::fs::write(&narrow, rules.to_string()).expect("policy");
    let policy_arg = narrow.to_string_lossy().to_string();
    let (code, stdout, stderr) = inspect(&["policy", "show", "--json", "--policy", &policy_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    let shown: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(
        shown["effective"]["resources"],
        json!([{"group": "batch", "versions": ["v1"], "plural": "jobs", "verbs": ["get", "create", "delete"],
            "subresources": [], "namespaced": true}]),
        "the intersection: configmaps were not asked for, Jobs' patch was not granted"
    );
    assert_eq!(shown["effective"]["owner-id"], "team-a");
    let refused: Vec<&str> =
        shown["refused"].as_array().expect("refused").iter().filter_map(|r| r["plural"].as_str()).collect();
    assert!(refused.contains(&"sandboxes") && refused.contains(&"jobs"), "{refused:?}");

    let (code, stdout, stderr) = inspect(&["rbac", "--namespace", "agents", "--service-account", "paperclip"]);
    assert_eq!(code, Some(0), "{stderr}");
    for expected in [
        "kind: ServiceAccount",
        "kind: Role\n",
        "kind: RoleBinding",
        "name: paperclip",
        "- persistentvolumeclaims",
        "- pods/exec",
        "- networkpolicies",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing from:\n{stdout}");
    }
    assert!(!stdout.contains("ClusterRole") && !stdout.contains('*'), "{stdout}");
    let (code, _, stderr) = inspect(&["rbac", "--namespace", "*"]);
    assert_eq!(code, Some(1), "a wildcard needs a ClusterRole, which is never generated");
    assert!(stderr.contains("ClusterRole"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `probe` warns while no NetworkPolicy selects the sandboxes of the config's namespace; the one
/// `network-policy` prints is taken by the cluster as it is, and then the warning is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_policy_prints_what_probe_looks_for() {
    let cli = ProviderCli::start("network-policy").await;
    let isolation_findings = || {
        let out = cli.run(&["probe", "--json"]).output_blocking().expect("probe");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("probe JSON");
        let diagnostics = result["diagnostics"].as_array().cloned().unwrap_or_default();
        diagnostics.into_iter().filter(|d| d["code"].as_str().is_some_and(|c| c.contains("network-policy"))).collect()
    };
    let before: Vec<serde_json::Value> = isolation_findings();
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(
        (before[0]["code"].as_str(), before[0]["severity"].as_str()),
        (Some("no-network-policy"), Some("warning"))
    );
    let message = before[0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("sandbox-host network-policy --namespace default | kubectl apply -f -"), "{message}");

    let print = |args: &[&str]| Command::new(BIN).arg("network-policy").args(args).output_blocking().expect("run");
    let out = print(&["--namespace", "default", "--owner-id", "team-a"]);
    let yaml = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(yaml.starts_with("# ") && yaml.contains("does not select them"), "the claim pods' gap is said: {yaml}");
    let policy: NetworkPolicy = serde_yaml_ng::from_str(&yaml).expect("one NetworkPolicy document");
    let admin = cli.cluster.client().await.expect("admin client");
    Api::<NetworkPolicy>::namespaced(admin, "default")
        .create(&PostParams::default(), &policy)
        .await
        .expect("the cluster takes the printed policy");
    assert_eq!(isolation_findings(), Vec::<serde_json::Value>::new(), "isolated now");
    // Credentials that may not list NetworkPolicies: the host says it could not tell.
    cli.cluster.faults().add(Rule {
        matches: Match { verb: Some("list".into()), resource: Some("networkpolicies".into()), ..Default::default() },
        action: Action::Error { code: 403, reason: "Forbidden".into(), message: None, retry_after_seconds: None },
        after: 0,
        times: None,
        probability: None,
    });
    let forbidden = isolation_findings();
    assert_eq!(forbidden.len(), 1, "{forbidden:?}");
    assert_eq!(forbidden[0]["code"], "network-policy-check-forbidden");
    assert!(forbidden[0]["message"].as_str().is_some_and(|m| m.contains("could not check")), "{forbidden:?}");

    let file = cli.dir.join("egress-policy.json");
    std::fs::write(&file, json!({"egress": ["10.0.0.0/8", {"cidr": "0.0.0.0/0", "ports": [443]}]}).to_string())
        .expect("policy");
    let file_arg = file.to_string_lossy().to_string();
    let out = print(&["--policy", &file_arg, "--namespace", "agents"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let policy: NetworkPolicy = serde_yaml_ng::from_slice(&out.stdout).expect("NetworkPolicy");
    let egress = serde_json::to_value(policy.spec.and_then(|s| s.egress)).expect("egress");
    assert_eq!(egress[1], json!({"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}));
    assert_eq!(egress[2]["ports"], json!([{"protocol": "TCP", "port": 443}]));
    std::fs::write(&file, json!({"egress": ["10.0.0.1"]}).to_string()).expect("policy");
    let stderr = refused(&print(&["--policy", &file_arg]));
    assert!(stderr.contains("\"10.0.0.1\" is not a CIDR") && stderr.contains("/32"), "{stderr}");
}

/// On a real cluster (a kubeconfig), `contract` says that its own warm pool stays for the next
/// run, since its members are running pods, and `--clean-up` deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_on_a_kubeconfig_names_the_pool_it_leaves_and_cleans_it_up() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let dir = temp_dir("contract-pool");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig(embedded_cluster::ADMIN_USER).expect("kubeconfig")).expect("write");
    let run = |extra: &[&str]| {
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.args(["contract", "--no-matrix", "--scenario", "lifecycle", "--component"])
            .arg(component())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .args(extra);
        cmd.output()
    };
    let out = run(&[]).await.expect("run sandbox-host contract");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.contains("left in place for the next run: SandboxWarmPool contract/contract-pool"), "{stderr}");
    assert!(stderr.contains("--clean-up"), "{stderr}");

    let out = run(&["--clean-up"]).await.expect("run sandbox-host contract --clean-up");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.contains("deleted SandboxWarmPool contract/contract-pool"), "{stderr}");
    let admin = cluster.client().await.expect("client");
    let left = contract_suite::warm_pool::status(&admin, "contract", "contract-pool").await.expect("status");
    assert!(left.is_none(), "the pool is gone: {left:?}");
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
            .arg(component())
            .arg("--config")
            .arg(config)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .output()
            .expect("run sandbox-host contract")
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
