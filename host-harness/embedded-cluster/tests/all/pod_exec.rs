//! `pods/exec` against the embedded cluster: kube-rs (`Api::exec`, v5), a raw v4 WebSocket
//! client, and the real `kubectl exec`. The command runs as a local process in the pod's
//! directory with the container's environment; what it leaves running in the background lives
//! on with the pod, as in a container.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ADMIN_USER, ClusterConfig, EmbeddedCluster};
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, DeleteParams, PostParams};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::common::exec::{cluster, exec, exit_code, read_all, running, sleeping, wait_until};
use crate::common::rbac::{api_error, typed};

/// Creates the `creds` Secret and the running pod `shell` (container `main`, `workingDir: /app`,
/// the Secret's keys as variables, and `TOKEN` from one key).
async fn shell_pod(c: &EmbeddedCluster) -> Api<Pod> {
    let client = c.client().await.expect("client");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = typed(json!({"metadata": {"name": "creds"}, "stringData": {"token": "s3cret-value", "USER": "bot"}}));
    secrets.create(&PostParams::default(), &secret).await.expect("secret");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod = typed(json!({"metadata": {"name": "shell"}, "spec": {"containers": [{
        "name": "main", "image": "busybox:1.36", "workingDir": "/app",
        "envFrom": [{"secretRef": {"name": "creds"}}],
        "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "GREETING", "value": "hello $(USER)"}
        ]
    }]}}));
    pods.create(&PostParams::default(), &pod).await.expect("pod");
    crate::common::wait_for(&pods, "shell", running("main"), "the shell pod running").await;
    pods
}

#[tokio::test]
async fn kube_rs_execs_stream_output_stdin_env_and_files() {
    let c = cluster(ClusterConfig::default()).await;
    let pods = shell_pod(&c).await;

    let ran = exec(&pods, "shell", &["sh", "-c", "echo out; echo err >&2; exit 3"], None).await;
    assert_eq!((ran.stdout.as_str(), ran.stderr.as_str()), ("out\n", "err\n"));
    assert_eq!(exit_code(&ran.status).as_deref(), Some("3"));
    let status = ran.status.expect("status");
    assert_eq!((status.status.as_deref(), status.reason.as_deref()), (Some("Failure"), Some("NonZeroExitCode")));
    assert_eq!(
        status.message.as_deref(),
        Some("command terminated with non-zero exit code: command terminated with exit code 3")
    );

    let ran = exec(&pods, "shell", &["cat"], Some(b"hello")).await;
    assert_eq!(ran.stdout, "hello", "stdin is forwarded and closed with v5's close signal");
    assert_eq!(ran.status.and_then(|s| s.status).as_deref(), Some("Success"));

    let ran = exec(
        &pods,
        "shell",
        &["sh", "-c", r#"printf %s "$TOKEN" | wc -c; echo "$GREETING"; echo "${HOME:+home}""#],
        None,
    )
    .await;
    let lines: Vec<&str> = ran.stdout.lines().map(str::trim).collect();
    assert_eq!(lines, ["12", "hello bot", "home"], "{}", ran.stderr);

    let ran = exec(&pods, "shell", &["pwd"], None).await;
    let pwd = PathBuf::from(ran.stdout.trim());
    assert!(pwd.ends_with("app") && pwd.to_string_lossy().contains("embedded-cluster-"), "{pwd:?}");
    let ran = exec(&pods, "shell", &["sh", "-c", "echo kept > notes.txt"], None).await;
    assert_eq!(exit_code(&ran.status).as_deref(), Some("0"), "{}", ran.stderr);
    let ran = exec(&pods, "shell", &["cat", "notes.txt"], None).await;
    assert_eq!(ran.stdout, "kept\n", "files persist across the pod's execs");

    let ran = exec(&pods, "shell", &["no-such-program-anywhere"], None).await;
    let status = ran.status.expect("status");
    assert_eq!(status.reason.as_deref(), Some("InternalError"));
    assert!(status.message.is_some_and(|m| m.contains("executable file not found in $PATH")));

    let exec_log: Vec<(String, u16)> =
        c.requests().entries().iter().filter(|e| e.subresource == "exec").map(|e| (e.verb.clone(), e.code)).collect();
    assert_eq!(exec_log.len(), 7);
    assert!(exec_log.iter().all(|(verb, code)| verb == "create" && *code == 101), "{exec_log:?}");

    // The pod's deletion removes its directory.
    let pod_dir = pwd.parent().map(PathBuf::from).expect("the pod directory");
    assert!(pod_dir.join("app/notes.txt").is_file());
    pods.delete("shell", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.expect("delete");
    crate::common::eventually("the pod directory removed", || {
        let gone = !pod_dir.exists();
        async move { gone }
    })
    .await;
    drop(c);
}

/// A pod whose node was lost (its kubelet stopped answering): the API server cannot dial the
/// kubelet, and says so as kube-apiserver's proxy does, a 500 with no reason naming the node's
/// address and port 10250, not an overloaded API server.
#[tokio::test]
async fn an_exec_on_a_lost_node_cannot_dial_its_kubelet() {
    let c = cluster(ClusterConfig::default()).await;
    let client = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = typed(json!({
        "metadata": {"name": "stranded", "annotations": {embedded_cluster::behaviour::NODE_LOST_AFTER: "1s"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }));
    pods.create(&PostParams::default(), &pod).await.expect("pod");
    crate::common::wait_for(&pods, "stranded", running("main"), "the pod running").await;
    let nodes: Api<Node> = Api::all(client);
    let node = pods.get("stranded").await.expect("pod").spec.and_then(|s| s.node_name).expect("bound to a node");
    crate::common::eventually("the pod's node lost", || {
        let nodes = nodes.clone();
        let node = node.clone();
        async move {
            let found = nodes.get(&node).await.expect("node");
            let conditions = found.status.and_then(|s| s.conditions).unwrap_or_default();
            conditions.iter().any(|c| c.type_ == "Ready" && c.status == "Unknown")
        }
    })
    .await;
    let status = api_error(pods.exec("stranded", ["true"], &AttachParams::default()).await.err().expect("refused"));
    assert_eq!((status.code, status.reason.as_str()), (500, ""), "{status:?}");
    assert!(
        status.message.starts_with("error dialing backend: dial tcp 10.0.0.")
            && status.message.ends_with(":10250: i/o timeout"),
        "{status:?}"
    );
}

#[tokio::test]
async fn exec_refusals_are_404_400_and_403_before_any_upgrade() {
    let c = cluster(ClusterConfig::default()).await;
    let pods = shell_pod(&c).await;
    let params = AttachParams::default();
    let refused = |r: Result<kube::api::AttachedProcess, kube::Error>| {
        let status = api_error(r.err().expect("refused"));
        (status.code, status.message)
    };
    assert_eq!(refused(pods.exec("ghost", ["true"], &params).await), (404, "pods \"ghost\" not found".to_string()));
    assert_eq!(
        refused(pods.exec("shell", ["true"], &AttachParams::default().container("nope")).await),
        (400, "container nope is not valid for pod shell".to_string())
    );

    // A ServiceAccount that may read pods but not create pods/exec.
    let admin = c.client().await.expect("client");
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    sas.create(&PostParams::default(), &typed(json!({"metadata": {"name": "reader"}}))).await.expect("sa");
    let roles: Api<Role> = Api::namespaced(admin.clone(), "default");
    let rules = json!([{"apiGroups": [""], "resources": ["pods", "pods/exec"], "verbs": ["get", "list"]}]);
    roles
        .create(&PostParams::default(), &typed(json!({"metadata": {"name": "reader"}, "rules": rules})))
        .await
        .expect("role");
    let bindings: Api<RoleBinding> = Api::namespaced(admin, "default");
    let binding = json!({"metadata": {"name": "reader"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]});
    bindings.create(&PostParams::default(), &typed(binding)).await.expect("binding");
    let token = c.service_account_token("default", "reader").await.expect("token");
    let reader: Api<Pod> = Api::namespaced(c.client_for_token("reader", &token).await.expect("client"), "default");
    reader.get("shell").await.expect("the reader reads pods");
    assert_eq!(
        refused(reader.exec("shell", ["true"], &params).await),
        (
            403,
            "pods \"shell\" is forbidden: User \"system:serviceaccount:default:reader\" cannot create resource \
             \"pods/exec\" in API group \"\" in the namespace \"default\""
                .to_string()
        )
    );

    // Faults see an exec as `create` on `pods/exec`; the retry after it goes through.
    let matches = Match { verb: Some("create".into()), subresource: Some("exec".into()), ..Default::default() };
    let action = Action::Error { code: 500, reason: "InternalError".into(), message: None, retry_after_seconds: None };
    c.faults().add(Rule { matches, action, after: 0, times: Some(1), probability: None });
    assert_eq!(
        refused(pods.exec("shell", ["true"], &params).await),
        (500, "injected fault: InternalError".to_string())
    );
    let ran = exec(&pods, "shell", &["true"], None).await;
    assert_eq!(exit_code(&ran.status).as_deref(), Some("0"));
    assert_eq!(c.running_execs(), 0);
}

#[tokio::test]
async fn a_dropped_client_and_the_time_limit_kill_the_process() {
    let c = cluster(ClusterConfig { exec_timeout: Duration::from_secs(2), ..Default::default() }).await;
    let pods = shell_pod(&c).await;

    // Cut short, an exec takes what it started in the background with it.
    let command = ["sh", "-c", "sleep 987.654 & exec sleep 987.651"];
    let attached = pods.exec("shell", command, &AttachParams::default()).await.expect("exec");
    crate::common::eventually("the sleeps running", || {
        let up = sleeping("987.651") && sleeping("987.654");
        async move { up }
    })
    .await;
    assert_eq!(c.running_execs(), 1);
    drop(attached);
    crate::common::eventually("the sleeps killed once their client is gone", || {
        let gone = !sleeping("987.651") && !sleeping("987.654") && c.running_execs() == 0;
        async move { gone }
    })
    .await;

    let ran = exec(&pods, "shell", &["sleep", "987.652"], None).await;
    let status = ran.status.expect("status");
    assert_eq!((status.reason.as_deref(), status.code), (Some("Timeout"), Some(504)));
    assert!(status.message.is_some_and(|m| m.contains("limit per exec (2s)")));
    // SIGKILL is sent before the answer; the process ends when the kernel next runs it.
    wait_until("the timed-out sleep killed", || !sleeping("987.652")).await;

    // Stopping the cluster kills what still runs.
    let _attached = pods.exec("shell", ["sleep", "987.653"], &AttachParams::default()).await.expect("exec");
    crate::common::eventually("the last sleep running", || {
        let up = sleeping("987.653");
        async move { up }
    })
    .await;
    drop(c);
    crate::common::eventually("the last sleep killed with the cluster", || {
        let gone = !sleeping("987.653");
        async move { gone }
    })
    .await;
}

/// Opens a raw WebSocket to `shell`'s exec, offering `protocols`.
async fn raw_exec(
    c: &EmbeddedCluster,
    query: &str,
    protocols: &str,
) -> Result<tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, u16> {
    let address = c.url().trim_start_matches("http://").to_string();
    let url = format!("ws://{address}/api/v1/namespaces/default/pods/shell/exec?{query}");
    let mut request = url.into_client_request().expect("request");
    let headers = request.headers_mut();
    let token = c.token(ADMIN_USER).expect("admin token");
    headers.insert("authorization", format!("Bearer {token}").parse().expect("header"));
    headers.insert("sec-websocket-protocol", protocols.parse().expect("header"));
    let tcp = tokio::net::TcpStream::connect(&address).await.expect("connect");
    match tokio_tungstenite::client_async(request, tcp).await {
        Ok((ws, response)) => {
            assert_eq!(response.headers()["sec-websocket-protocol"], protocols.split(',').next().unwrap_or_default());
            Ok(ws)
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
        Err(other) => panic!("handshake: {other}"),
    }
}

/// Every message until the server closes, as (channel, payload) with base64 undone.
async fn messages(mut ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>) -> Vec<(u8, Vec<u8>)> {
    use base64::Engine as _;
    let mut out = Vec::new();
    let read = async {
        while let Some(Ok(message)) = ws.next().await {
            match message {
                Message::Binary(b) if !b.is_empty() => out.push((b[0], b[1..].to_vec())),
                Message::Text(t) if !t.is_empty() => {
                    let decoded = base64::engine::general_purpose::STANDARD.decode(&t.as_bytes()[1..]).expect("base64");
                    out.push((t.as_bytes()[0] - b'0', decoded));
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    tokio::time::timeout(crate::common::WAIT, read).await.expect("the exec ends in time");
    let _ = ws.close(None).await;
    out
}

#[tokio::test]
async fn a_v4_client_gets_the_kubelets_protocol() {
    let c = cluster(ClusterConfig { tls: false, ..Default::default() }).await;
    shell_pod(&c).await;
    let query = "command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262%3B+exit+3&stdout=true&stderr=true";

    let frames = messages(raw_exec(&c, query, "v4.channel.k8s.io").await.expect("upgrade")).await;
    assert_eq!(frames.first(), Some(&(1, Vec::new())), "an empty stdout message says the stream is up");
    let channel = |n: u8| frames.iter().filter(|(ch, _)| *ch == n).flat_map(|(_, d)| d.clone()).collect::<Vec<u8>>();
    assert_eq!(channel(1), b"out\n");
    assert_eq!(channel(2), b"err\n");
    let status: serde_json::Value = serde_json::from_slice(&channel(3)).expect("status JSON");
    assert_eq!(
        status,
        json!({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": "command terminated with non-zero exit code: error executing command [sh -c echo out; echo err >&2; exit 3], exit code 3",
            "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}})
    );
    assert_eq!(frames.last().map(|f| f.0), Some(3), "the status comes last");

    // v4 has no close signal: stdin is written, then the output read as it comes.
    let mut ws = raw_exec(&c, "command=head&command=-c&command=3&stdin=true&stdout=true", "v4.channel.k8s.io")
        .await
        .expect("upgrade");
    ws.send(Message::binary(b"\0abcdef".to_vec())).await.expect("stdin");
    let frames = messages(ws).await;
    let stdout: Vec<u8> = frames.iter().filter(|(ch, _)| *ch == 1).flat_map(|(_, d)| d.clone()).collect();
    assert_eq!(stdout, b"abc");
    assert_eq!(
        frames.last().map(|(ch, d)| (*ch, d.clone())),
        Some((3, br#"{"metadata":{},"status":"Success"}"#.to_vec()))
    );

    let frames = messages(
        raw_exec(&c, "command=echo&command=hi&stdout=true", "v4.base64.channel.k8s.io").await.expect("upgrade"),
    )
    .await;
    assert!(frames.contains(&(1, b"hi\n".to_vec())), "{frames:?}");

    assert_eq!(raw_exec(&c, query, "channel.k8s.io, base64.channel.k8s.io").await.err(), Some(403));
    assert_eq!(raw_exec(&c, query, "v4.channel.k8s.io").await.map(|_| ()).err(), None);
}

#[tokio::test]
async fn kubectl_exec_prints_the_output_and_exits_with_the_commands_code() {
    let c = cluster(ClusterConfig::default()).await;
    shell_pod(&c).await;
    let dir = std::env::temp_dir().join(format!("embedded-cluster-kubectl-exec-{}", std::process::id()));
    let kubeconfig = dir.join("kubeconfig");
    c.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut kubectl = Command::new("kubectl");
    kubectl.arg("--kubeconfig").arg(&kubeconfig).args(["exec", "shell", "--", "sh", "-c", "echo hi; exit 2"]);
    let out = tokio::task::spawn_blocking(move || kubectl.output())
        .await
        .expect("join")
        .expect("kubectl is on PATH (install it: the exec scenario needs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n", "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let upgraded =
        c.requests().entries().iter().filter(|e| e.subresource == "exec").map(|e| e.code).collect::<Vec<_>>();
    assert_eq!(upgraded, [101], "kubectl took the WebSocket, not SPDY: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn what_an_exec_starts_in_the_background_lives_until_the_pod_is_deleted() {
    let c = cluster(ClusterConfig::default()).await;
    let pods = shell_pod(&c).await;

    let ran =
        exec(&pods, "shell", &["sh", "-c", "nohup sleep 987.661 >/dev/null 2>&1 & echo $! > bridge.pid"], None).await;
    assert_eq!(exit_code(&ran.status).as_deref(), Some("0"), "{}", ran.stderr);
    // It was started before the exec's `sh` exited; it shows as `sleep` once `nohup` has run it.
    wait_until("the background process running after its exec ended", || sleeping("987.661")).await;
    assert_eq!(c.running_execs(), 0, "the exec itself is over");

    let ran = exec(&pods, "shell", &["sh", "-c", r#"kill -0 "$(cat bridge.pid)" && echo alive"#], None).await;
    assert_eq!(ran.stdout, "alive\n", "a later exec in the pod sees it: {}", ran.stderr);
    assert!(sleeping("987.661"));

    pods.delete("shell", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.expect("delete");
    wait_until("the background process killed with its pod", || !sleeping("987.661")).await;
}

#[tokio::test]
async fn what_execs_left_running_dies_with_the_cluster() {
    let c = cluster(ClusterConfig::default()).await;
    let pods = shell_pod(&c).await;
    let ran = exec(&pods, "shell", &["sh", "-c", "nohup sleep 987.662 >/dev/null 2>&1 &"], None).await;
    assert_eq!(exit_code(&ran.status).as_deref(), Some("0"), "{}", ran.stderr);
    wait_until("the background process running after its exec ended", || sleeping("987.662")).await;
    drop(c);
    wait_until("the background process killed with the cluster", || !sleeping("987.662")).await;
}

#[tokio::test]
async fn an_exec_streams_until_whatever_holds_its_output_closes_it() {
    let c = cluster(ClusterConfig::default()).await;
    let pods = shell_pod(&c).await;
    // As with containerd: the background writer inherited stdout, and the exec ends when it is
    // done with it, not when `sh` exits.
    let ran = exec(&pods, "shell", &["sh", "-c", "(sleep 1; echo late) & echo early"], None).await;
    assert_eq!(ran.stdout, "early\nlate\n", "{}", ran.stderr);
    assert_eq!(exit_code(&ran.status).as_deref(), Some("0"));
}

/// Runs `script` in `shell` on a terminal through kube-rs: what it printed and its status.
async fn tty_exec(pods: &Api<Pod>, script: &str) -> (String, Option<Status>) {
    let params = AttachParams::default().container("main").stderr(false).tty(true);
    let run = async {
        let mut attached = pods.exec("shell", ["sh", "-c", script], &params).await.expect("exec");
        let status = attached.take_status().expect("status future");
        let stdout = read_all(attached.stdout()).await;
        (stdout, status.await)
    };
    tokio::time::timeout(crate::common::WAIT, run).await.expect("the TTY exec ends in time")
}

#[tokio::test]
async fn a_tty_exec_runs_on_a_terminal_the_client_sizes() {
    let c = cluster(ClusterConfig { tls: false, ..Default::default() }).await;
    let pods = shell_pod(&c).await;

    let (stdout, status) = tty_exec(&pods, "test -t 0 && test -t 1 && echo tty").await;
    assert_eq!(stdout, "tty\r\n", "a terminal turns \\n into \\r\\n");
    assert_eq!(exit_code(&status).as_deref(), Some("0"));

    // A resize message sets the size; stdin after it is written after it.
    let query = "command=sh&command=-c&command=read+go%3B+stty+size&stdin=true&stdout=true&tty=true";
    let mut ws = raw_exec(&c, query, "v5.channel.k8s.io").await.expect("upgrade");
    let mut resize = vec![4u8];
    resize.extend_from_slice(br#"{"Width":100,"Height":30}"#);
    ws.send(Message::binary(resize)).await.expect("resize");
    ws.send(Message::binary(b"\0go\n".to_vec())).await.expect("stdin");
    let frames = messages(ws).await;
    let stdout: Vec<u8> = frames.iter().filter(|(ch, _)| *ch == 1).flat_map(|(_, d)| d.clone()).collect();
    assert_eq!(String::from_utf8_lossy(&stdout), "go\r\n30 100\r\n", "the typed line's echo, then the size");

    // As with containerd, the exec ends when its process exits, though a background process
    // that ignores the hang-up still holds the terminal; that process lives on with the pod.
    let (stdout, status) = tty_exec(&pods, "trap '' HUP; sleep 987.681 & echo started").await;
    assert_eq!((stdout.as_str(), exit_code(&status).as_deref()), ("started\r\n", Some("0")));
    wait_until("the background process running after its exec ended", || sleeping("987.681")).await;
    drop(c);
    wait_until("the background process killed with the cluster", || !sleeping("987.681")).await;
}

#[tokio::test]
async fn kubectl_exec_it_gets_a_terminal() {
    let c = cluster(ClusterConfig::default()).await;
    shell_pod(&c).await;
    let dir = std::env::temp_dir().join(format!("embedded-cluster-kubectl-exec-it-{}", std::process::id()));
    let kubeconfig = dir.join("kubeconfig");
    c.write_kubeconfig(&kubeconfig).expect("kubeconfig");

    // kubectl asks for a TTY only when its own stdin is one: give it a terminal too.
    use rustix::pty::OpenptFlags;
    let ours = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("openpt");
    rustix::pty::grantpt(&ours).expect("grantpt");
    rustix::pty::unlockpt(&ours).expect("unlockpt");
    let name = rustix::pty::ptsname(&ours, Vec::new()).expect("ptsname");
    let flags = rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC;
    let theirs = rustix::fs::open(name.as_c_str(), flags, rustix::fs::Mode::empty()).expect("open the terminal");
    let side = || Stdio::from(theirs.try_clone().expect("dup the terminal"));

    let mut kubectl = Command::new("kubectl");
    kubectl.arg("--kubeconfig").arg(&kubeconfig).args(["exec", "-it", "shell", "--", "sh", "-c", "tty; echo hi"]);
    kubectl.stdin(side()).stdout(side()).stderr(side());
    let mut child = kubectl.spawn().expect("kubectl is on PATH (install it: the exec scenario needs it)");
    drop(kubectl);
    drop(theirs);
    // Everything kubectl prints, until it exits and the terminal hangs up (EIO).
    let reader = tokio::task::spawn_blocking(move || {
        let mut terminal = std::fs::File::from(ours);
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = terminal.read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    let printed = match tokio::time::timeout(crate::common::WAIT, reader).await {
        Ok(printed) => printed.expect("join"),
        Err(_) => {
            let _ = child.kill();
            panic!("timed out waiting for kubectl exec -it to end");
        }
    };
    let status = child.wait().expect("kubectl's status");
    assert!(status.success(), "{printed}");
    assert!(printed.contains("/dev/pts/"), "the command's stdin is a terminal: {printed:?}");
    assert!(printed.contains("hi\r\n"), "{printed:?}");
    let tty = c.requests().entries().iter().filter(|e| e.subresource == "exec").map(|e| e.code).collect::<Vec<_>>();
    assert_eq!(tty, [101], "{printed}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_command_kills_its_own_group_as_the_providers_watchdog_does() {
    let c = cluster(ClusterConfig::default()).await;
    let pods = shell_pod(&c).await;
    // The provider's exec script ends a timed-out command with `kill -9 "-$$"`: the exec's
    // process leads its group, so that takes what it started along.
    let ran = exec(&pods, "shell", &["sh", "-c", r#"sleep 987.671 & kill -9 "-$$""#], None).await;
    assert_eq!(exit_code(&ran.status).as_deref(), Some("137"), "{}", ran.stderr);
    wait_until("the command's background process killed with its group", || !sleeping("987.671")).await;
}
