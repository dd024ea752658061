//! `sandbox-host serve` as another process runs it: requests written without waiting, replies
//! matched by id, a whole lease life on the embedded cluster, and SIGTERM.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::support::built;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-host");

/// An empty scratch directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let scratch = std::env::temp_dir().join(format!("sandbox-host-serve-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    scratch
}

/// A running `sandbox-host serve` and its pipes; killed when the test ends.
struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    scratch: PathBuf,
}

impl Served {
    /// `sandbox-host serve --component COMPONENT ARGS` with no cluster to infer (`HOME` is a
    /// scratch directory).
    fn start(tag: &str, component: &Path, args: &[&str]) -> Self {
        Self::start_in(scratch(tag), component, args)
    }

    /// [`Served::start`] on `cluster`, through a kubeconfig of the provider's identity as a
    /// real cluster is reached.
    fn start_on(tag: &str, cluster: &EmbeddedCluster, component: &Path, args: &[&str]) -> Self {
        let scratch = scratch(tag);
        let kubeconfig = scratch.join("kubeconfig");
        std::fs::write(&kubeconfig, cluster.kubeconfig(embedded_cluster::PROVIDER_USER).expect("kubeconfig"))
            .expect("write the kubeconfig");
        let kubeconfig = kubeconfig.to_string_lossy().into_owned();
        Self::start_in(scratch, component, &[&["--kubeconfig", kubeconfig.as_str()][..], args].concat())
    }

    fn start_in(scratch: PathBuf, component: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--component")
            .arg(component)
            .arg("--cache-dir")
            .arg(scratch.join("cache"))
            .args(args)
            .env("HOME", &scratch)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start sandbox-host serve");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self { child, stdin, stdout, scratch }
    }

    async fn send(&mut self, request: Value) {
        let line = format!("{request}\n");
        self.stdin.as_mut().expect("stdin is open").write_all(line.as_bytes()).await.expect("serve reads");
    }

    async fn reply(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.stdout.next_line())
            .await
            .expect("a reply in time")
            .expect("stdout reads")
            .expect("a reply before the end of output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not one JSON reply ({e}): {line}"))
    }

    /// `n` replies, by id.
    async fn replies(&mut self, n: usize) -> std::collections::HashMap<String, Value> {
        let mut by_id = std::collections::HashMap::new();
        for _ in 0..n {
            let reply = self.reply().await;
            by_id.insert(reply["id"].to_string(), reply);
        }
        by_id
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill").args([&format!("-{name}"), &pid]).status().expect("kill");
        assert!(status.success(), "kill -{name} {pid}");
    }

    /// Closes stdin (or not) and waits for the exit: the exit code and stderr.
    async fn exit(mut self) -> (Option<i32>, String) {
        self.stdin = None;
        let mut stderr = self.child.stderr.take().expect("stderr");
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("serve exits in time")
            .expect("wait");
        assert_eq!(self.stdout.next_line().await.expect("stdout reads"), None, "no reply after the summary");
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await.expect("stderr");
        (status.code(), text)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

#[tokio::test]
async fn concurrent_leases_live_their_whole_life_through_one_serve_process() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("start the embedded cluster");
    let mut served = Served::start_on("lease", &cluster, &built("provider.wasm"), &["--allow-namespace", "default"]);
    let config = json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"});
    served.send(json!({"id": "hello", "method": "hello"})).await;
    for n in 0..4 {
        let mut params = json!({"config": config, "run-id": "run-1", "acquisition-id": format!("serve-{n}")});
        if n == 0 {
            params["env"] = json!([{"name": "TOKEN", "value": "serve-secret-7", "secret": true}]);
        }
        served.send(json!({"id": n, "method": "acquire", "params": params})).await;
    }
    let replies = served.replies(5).await;
    assert_eq!(replies["\"hello\""]["result"]["contract-version"], "0.4.0", "{replies:?}");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README");
    let example = readme.lines().find(|l| l.starts_with(r#"<- {"id":"h","result":"#)).expect("README's hello example");
    let shown = format!(r#""contract-version":{}"#, replies["\"hello\""]["result"]["contract-version"]);
    assert!(example.contains(&shown), "the README's hello example says what hello answers ({shown}): {example}");
    assert_eq!(replies["\"hello\""]["result"]["exec-timeout-ms"], 600_000, "what a client waits for a command");
    let leases: Vec<Value> = (0..4).map(|n| replies[&n.to_string()]["result"].clone()).collect();
    for (n, lease) in leases.iter().enumerate() {
        assert_eq!(lease["backend"], "job", "acquire {n}: {:?}", replies[&n.to_string()]);
    }
    assert!(replies.values().all(|r| !r.to_string().contains("serve-secret-7")), "no secret value in any reply");

    for (n, lease) in leases.iter().enumerate() {
        served.send(json!({"id": n, "method": "resume-check", "params": {"lease": lease, "config": config}})).await;
    }
    let resumed = served.replies(4).await;
    assert!(resumed.values().all(|r| r["result"]["resumable"].is_object()), "{resumed:?}");
    for (n, lease) in leases.iter().enumerate() {
        served.send(json!({"id": n, "method": "destroy", "params": {"lease": lease, "config": config}})).await;
    }
    let destroyed = served.replies(4).await;
    for reply in destroyed.values() {
        let outcomes: Vec<&Value> =
            reply["result"]["objects"].as_array().expect("objects").iter().map(|o| &o["outcome"]).collect();
        assert!(outcomes.iter().all(|o| *o == "deleted" || *o == "already-gone"), "{reply}");
    }
    served.send(json!({"id": 9, "method": "resume-check", "params": {"lease": leases[0], "config": config}})).await;
    let gone = served.reply().await;
    assert!(gone["result"]["expired"].is_string(), "gone is an answer: {gone}");

    let (code, stderr) = served.exit().await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("stopped (end of input): 14 replies"), "{stderr}");
}

#[tokio::test]
async fn sigterm_lets_short_calls_finish_and_a_second_one_cancels_the_rest() {
    let mut served = Served::start("sigterm", &built("reference_provider.wasm"), &[]);
    let slow = |id: u32, millis: u64| {
        json!({"id": id, "method": "acquire", "params": {
            "config": {"operations": {"acquire": {"delayMillis": millis}}},
            "run-id": "run-1", "acquisition-id": format!("term-{id}")}})
    };
    served.send(json!({"id": 0, "method": "hello"})).await;
    assert_eq!(served.reply().await["result"]["protocol"], 1, "loaded and serving");
    served.send(slow(1, 20_000)).await;
    served.send(slow(2, 500)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    served.signal("TERM");
    let finished = served.reply().await;
    assert_eq!(
        (finished["id"].clone(), finished["result"]["provider-lease-id"].clone()),
        (json!(2), json!("reference:term-2"))
    );
    served.signal("TERM");
    let cancelled = served.reply().await;
    assert_eq!(
        (cancelled["id"].clone(), cancelled["error"]["kind"].clone()),
        (json!(1), json!("cancelled")),
        "{cancelled}"
    );
    let (code, stderr) = served.exit().await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "stopped (SIGTERM): 3 replies; of the calls in flight at the stop, 1 finished and 1 were cancelled"
        ),
        "{stderr}"
    );
}

/// A kubeconfig from an environment's config would otherwise run its `exec` plugin on the
/// host's machine: refused before kube-rs loads it, naming the field and no value.
#[tokio::test]
async fn an_untrusted_kubeconfig_that_runs_a_program_is_refused_before_anything_runs() {
    let scratch = std::env::temp_dir().join(format!("sandbox-host-untrusted-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch");
    let marker = scratch.join("ran");
    let kubeconfig = scratch.join("kubeconfig");
    let yaml = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
         clusters:\n- name: k\n  cluster: {{server: 'https://127.0.0.1:1'}}\nusers:\n- name: u\n  user:\n    exec:\n      \
         apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: ['-c', 'touch {} # token-9f2']\n",
        marker.display()
    );
    std::fs::write(&kubeconfig, yaml).expect("kubeconfig");
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    let served =
        Served::start("untrusted", &built("provider.wasm"), &["--untrusted-kubeconfig", "--kubeconfig", &kubeconfig]);
    let (code, stderr) = served.exit().await;
    assert_eq!(code, Some(4), "a kubeconfig it cannot use has its own exit code: {stderr}");
    assert!(stderr.contains("users[\"u\"].exec is refused: it runs a program"), "{stderr}");
    assert!(!stderr.contains("token-9f2"), "no value shown: {stderr}");
    assert!(!marker.exists(), "the exec plugin never ran");
    let _ = std::fs::remove_dir_all(&scratch);
}

/// Validation needs no cluster: with `--no-cluster` the Kubernetes provider (which declares
/// `kube` access) still loads and validates, even where a kubeconfig could be inferred, and a
/// call that needs the cluster is refused, not sent anywhere.
#[tokio::test]
async fn no_cluster_validates_a_config_and_never_reaches_a_cluster() {
    let mut serve = Served::start("no-cluster", &built("provider.wasm"), &["--no-cluster"]);
    let config = json!({"namespace": "default", "backend": "job", "image": "busybox:1.36", "imagee": "x"});
    serve.send(json!({"id": 1, "method": "validate-config", "params": {"config": config}})).await;
    serve.send(json!({"id": 2, "method": "probe", "params": {"config": config}})).await;
    let replies = serve.replies(2).await;
    let validation = &replies["1"]["result"];
    assert_eq!(validation["ok"], json!(true), "{validation}");
    assert_eq!(validation["warnings"][0]["path"], json!("/imagee"), "{validation}");
    let probe = &replies["2"]["result"];
    assert_eq!(probe["ok"], json!(false), "no cluster, nothing reachable: {probe}");
    // A namespace the policy does not allow fails at once, before any cluster call.
    let elsewhere = json!({"namespace": "kube-system", "backend": "job", "image": "busybox:1.36"});
    let acquire = json!({"config": elsewhere, "run-id": "r-1", "acquisition-id": "nc-1"});
    serve.send(json!({"id": 3, "method": "acquire", "params": acquire})).await;
    let failed = serve.reply().await;
    let kind = failed["error"]["kind"].as_str().expect("acquire fails without a cluster").to_string();
    let (code, stderr) = serve.exit().await;
    assert_eq!(code, Some(0));
    let logged: Vec<&str> = stderr.lines().filter(|l| l.contains("call failed")).collect();
    assert_eq!(logged.len(), 1, "the operator's log has the failed call, once: {stderr}");
    assert!(logged[0].contains("method=acquire") && logged[0].contains(&format!("kind={kind}")), "{stderr}");
}

/// A kubeconfig that cannot be used ends `serve` at once with its own exit code (4), which a
/// client reports at the config's field instead of starting the process again.
#[tokio::test]
async fn an_unusable_kubeconfig_exits_with_its_own_code_and_quotes_nothing() {
    let dir = std::env::temp_dir().join(format!("sandbox-host-bad-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("kubeconfig");
    std::fs::write(&file, "token-canary-77: [not a kubeconfig").expect("write");
    let kubeconfig = file.to_string_lossy().into_owned();
    for extra in [&["--untrusted-kubeconfig"][..], &[][..]] {
        let mut args = vec!["--kubeconfig", kubeconfig.as_str()];
        args.extend_from_slice(extra);
        let (code, stderr) = Served::start("bad-kubeconfig", &built("provider.wasm"), &args).exit().await;
        assert_eq!(code, Some(4), "{extra:?}: {stderr}");
        assert!(stderr.contains("Error: the kubeconfig"), "{extra:?}: {stderr}");
        if !extra.is_empty() {
            assert!(!stderr.contains("token-canary-77"), "an untrusted kubeconfig is never quoted: {stderr}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One run's flood of long commands never holds another run up: with 70 commands of lease A in
/// flight (each waits for a file the test makes), lease B's hello, resume-check, renew and a
/// command of its own are all answered before any of A's commands has ended; then A's all
/// finish, and every request gets exactly one reply.
#[tokio::test]
async fn a_flood_of_one_leases_commands_keeps_no_other_lease_waiting() {
    const FLOOD: usize = 70;
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("start the embedded cluster");
    let mut served = Served::start_on("fair", &cluster, &built("provider.wasm"), &["--allow-namespace", "default"]);
    let gate = served.scratch.join("gate");
    let config = json!({"namespace": "default", "backend": "job", "image": "busybox:1.36",
        "command": ["sleep", "infinity"]});
    for run in ["a", "b"] {
        let params = json!({"config": config, "run-id": format!("run-{run}"), "acquisition-id": format!("fair-{run}")});
        served.send(json!({"id": run, "method": "acquire", "params": params})).await;
    }
    let acquired = served.replies(2).await;
    let (a, b) = (acquired["\"a\""]["result"].clone(), acquired["\"b\""]["result"].clone());
    assert!(a["provider-lease-id"].is_string() && b["provider-lease-id"].is_string(), "{acquired:?}");

    // Each of A's commands waits for the gate (for three minutes at most, so none outlives a
    // failed test), then says which it was.
    for n in 0..FLOOD {
        let script = format!(
            "i=0; while [ ! -e '{}' ] && [ $i -lt 900 ]; do sleep 0.2; i=$((i+1)); done; [ -e '{}' ] && echo a-{n}",
            gate.display(),
            gate.display()
        );
        let request = json!({"command": "sh", "args": ["-c", script], "timeout-ms": 300_000});
        let params = json!({"lease": a, "config": config, "request": request});
        served.send(json!({"id": format!("a-{n}"), "method": "execute", "params": params})).await;
    }
    let started = std::time::Instant::now();
    let expires_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64 + 3_600_000)
        .expect("clock");
    served.send(json!({"id": "b-hello", "method": "hello"})).await;
    served.send(json!({"id": "b-resume", "method": "resume-check", "params": {"lease": b, "config": config}})).await;
    let renew = json!({"lease": b, "config": config, "expires-at": expires_at});
    served.send(json!({"id": "b-renew", "method": "renew", "params": renew})).await;
    let echo = json!({"command": "sh", "args": ["-c", "echo b"], "timeout-ms": 60_000});
    let execute = json!({"lease": b, "config": config, "request": echo});
    served.send(json!({"id": "b-exec", "method": "execute", "params": execute})).await;

    let mut answered = std::collections::HashMap::new();
    while answered.len() < 4 {
        let reply = served.reply().await;
        let id = reply["id"].as_str().unwrap_or_default().to_string();
        assert!(id.starts_with("b-"), "one of A's commands answered before all of B's calls, so B waited: {reply}");
        eprintln!("diagnostic: {id} answered {} ms after B's calls were sent", started.elapsed().as_millis());
        answered.insert(id, reply);
    }
    assert_eq!(answered["b-hello"]["result"]["max-executes-per-lease"], 4, "{:?}", answered["b-hello"]);
    assert!(answered["b-resume"]["result"]["resumable"].is_object(), "{:?}", answered["b-resume"]);
    assert!(answered["b-renew"]["result"]["resumable"].is_object(), "{:?}", answered["b-renew"]);
    assert_eq!(answered["b-exec"]["result"]["stdout"], "b\n", "{:?}", answered["b-exec"]);

    std::fs::write(&gate, "open").expect("open the gate");
    let mut flood = std::collections::HashSet::new();
    for _ in 0..FLOOD {
        let reply = served.reply().await;
        let id = reply["id"].as_str().unwrap_or_default().to_string();
        assert_eq!(reply["result"]["exit-code"], 0, "{reply}");
        assert_eq!(reply["result"]["stdout"], format!("{id}\n"), "{reply}");
        assert!(flood.insert(id.clone()), "{id} was answered twice");
    }
    for (id, lease) in [("a-destroy", &a), ("b-destroy", &b)] {
        served.send(json!({"id": id, "method": "destroy", "params": {"lease": lease, "config": config}})).await;
    }
    let destroyed = served.replies(2).await;
    assert!(destroyed.values().all(|r| r["result"]["objects"].is_array()), "{destroyed:?}");
    let (code, stderr) = served.exit().await;
    assert_eq!(code, Some(0), "{stderr}");
    let replies = 2 + FLOOD + 4 + 2;
    assert!(stderr.contains(&format!("stopped (end of input): {replies} replies")), "{stderr}");
}
