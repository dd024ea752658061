//! Drives the embedded cluster with the real `kubectl`, when it is on PATH: apply a Sandbox from
//! YAML (server-side validation, no `--validate=false`), wait for Ready, get, watch, delete; and
//! apply a ServiceAccount with a Role and RoleBinding, create a token for it and use it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use embedded_cluster::{ClusterConfig, EmbeddedCluster, SandboxVersions};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};

const SANDBOX_YAML: &str = r#"apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: from-kubectl
  labels:
    team: agents
spec:
  podTemplate:
    spec:
      containers:
      - name: agent
        image: busybox:1.36
        command: ["sleep", "infinity"]
"#;

const RBAC_YAML: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: deployer
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: pod-reader
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: deployer-reads-pods
subjects:
- kind: ServiceAccount
  name: deployer
  namespace: default
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: pod-reader
"#;

fn kubectl_available() -> bool {
    Command::new("kubectl").arg("version").arg("--client").output().is_ok_and(|o| o.status.success())
}

/// The kubectl binaries to hold the cluster to: 1.28 and the newest one installed. The kubectl
/// on PATH here is a dispatcher that picks a `kubectl.1.NN` beside it by the server's version;
/// calling those directly pins the client.
fn pinned_kubectls() -> Vec<(String, PathBuf)> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file());
    let Some(dir) = on_path.and_then(|p| std::fs::canonicalize(p).ok()).and_then(|p| p.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().to_string();
            let minor = name.strip_prefix("kubectl.1.")?.parse().ok()?;
            Some((minor, entry.path()))
        })
        .collect();
    found.sort();
    let mut out = Vec::new();
    if let Some((_, p)) = found.iter().find(|(minor, _)| *minor == 28) {
        out.push(("1.28".to_string(), p.clone()));
    }
    if let Some((minor, p)) = found.last().filter(|(minor, _)| *minor != 28) {
        out.push((format!("1.{minor}"), p.clone()));
    }
    out
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    kubectl_at(Path::new("kubectl"), kubeconfig, args).await
}

async fn kubectl_at(binary: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(binary);
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
    let shown = format!("{} {}", binary.display(), args.join(" "));
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("run {shown}: {e}"))
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[tokio::test]
async fn kubectl_applies_waits_gets_watches_and_deletes() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not on PATH; install kubectl to run the kubectl scenario");
        return;
    }
    let c = crate::common::full_cluster(SandboxVersions::Both).await;
    let dir = std::env::temp_dir().join(format!("embedded-cluster-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    c.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let manifest = dir.join("sandbox.yaml");
    std::fs::write(&manifest, SANDBOX_YAML).expect("manifest");
    let m = manifest.to_string_lossy().to_string();

    let out = kubectl(&kubeconfig, &["apply", "-f", &m]).await;
    assert!(out.status.success(), "apply: {}", text(&out));
    assert!(text(&out).contains("sandbox.agents.x-k8s.io/from-kubectl created"), "{}", text(&out));

    let out = kubectl(&kubeconfig, &["wait", "--for=condition=Ready", "sandbox/from-kubectl", "--timeout=30s"]).await;
    assert!(out.status.success(), "wait: {}", text(&out));

    let out = kubectl(
        &kubeconfig,
        &["get", "sandbox", "from-kubectl", "-o", "jsonpath={.metadata.annotations.agents\\.x-k8s\\.io/pod-name}"],
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-kubectl", "{}", text(&out));
    let out = kubectl(&kubeconfig, &["get", "pods", "-l", "agents.x-k8s.io/sandbox-name-hash", "-o", "name"]).await;
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "pod/from-kubectl", "{}", text(&out));

    let out = kubectl(&kubeconfig, &["apply", "-f", &m]).await;
    assert!(text(&out).contains("unchanged"), "re-apply: {}", text(&out));

    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, SANDBOX_YAML.replace("command:", "bogusField: 1\n        command:")).expect("bad manifest");
    let out = kubectl(&kubeconfig, &["apply", "-f", &bad.to_string_lossy()]).await;
    assert!(!out.status.success() && text(&out).contains("unknown field"), "strict validation: {}", text(&out));

    let mut watch = Command::new("kubectl");
    watch.arg("--kubeconfig").arg(&kubeconfig).args([
        "get",
        "sandboxes",
        "--watch",
        "--output-watch-events",
        "--request-timeout=5s",
    ]);
    let watcher = tokio::task::spawn_blocking(move || watch.output());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let out = kubectl(&kubeconfig, &["delete", "-f", &m, "--timeout=30s"]).await;
    assert!(out.status.success(), "delete: {}", text(&out));
    let watched = watcher.await.expect("join").expect("kubectl watch");
    let watched = text(&watched);
    assert!(watched.contains("ADDED") && watched.contains("from-kubectl"), "watch output: {watched}");

    let out = kubectl(&kubeconfig, &["get", "sandbox", "from-kubectl"]).await;
    assert!(text(&out).contains("NotFound"), "{}", text(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kubectl describe pod` and `kubectl get events` show what the scheduler and the kubelet
/// recorded, with each pinned kubectl.
#[tokio::test]
async fn kubectl_describe_pod_shows_the_scheduler_and_kubelet_events() {
    let c = crate::common::full_cluster(SandboxVersions::Both).await;
    let dir = std::env::temp_dir().join(format!("embedded-cluster-kubectl-events-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    c.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    let pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "described"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}))
    .expect("pod");
    pods.create(&PostParams::default(), &pod).await.expect("pod");
    crate::common::eventually("the pod's Started event", || {
        let kubeconfig = kubeconfig.clone();
        async move {
            let out =
                kubectl(&kubeconfig, &["get", "events", "--field-selector", "involvedObject.name=described"]).await;
            text(&out).contains("Started")
        }
    })
    .await;
    let mut binaries = vec![("PATH".to_string(), PathBuf::from("kubectl"))];
    binaries.extend(pinned_kubectls());
    for (version, binary) in binaries {
        let out = kubectl_at(&binary, &kubeconfig, &["describe", "pod", "described"]).await;
        let described = text(&out);
        assert!(out.status.success(), "{version}: {described}");
        let events = described.split("Events:").nth(1).unwrap_or_else(|| panic!("{version}: no events: {described}"));
        for shown in [
            "Scheduled",
            "default-scheduler",
            "Successfully assigned default/described to",
            "Pulled",
            "Created",
            "Started",
            "Started container main",
            "kubelet",
        ] {
            assert!(events.contains(shown), "{version}: {shown:?} not in the events: {events}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn kubectl_applies_rbac_and_uses_a_service_account_token() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not on PATH; install kubectl to run the kubectl scenario");
        return;
    }
    let c = EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() })
        .await
        .expect("start the embedded cluster");
    let dir = std::env::temp_dir().join(format!("embedded-cluster-kubectl-rbac-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    c.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let manifest = dir.join("rbac.yaml");
    std::fs::write(&manifest, RBAC_YAML).expect("manifest");
    let m = manifest.to_string_lossy().to_string();
    eprintln!("{}", text(&kubectl(&kubeconfig, &["version"]).await));

    let out = kubectl(&kubeconfig, &["apply", "-f", &m]).await;
    assert!(out.status.success(), "apply: {}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "serviceaccount/deployer created\nrole.rbac.authorization.k8s.io/pod-reader created\n\
         rolebinding.rbac.authorization.k8s.io/deployer-reads-pods created\n"
    );
    let out = kubectl(&kubeconfig, &["apply", "-f", &m]).await;
    assert_eq!(text(&out).matches("unchanged").count(), 3, "re-apply: {}", text(&out));

    let out = kubectl(&kubeconfig, &["create", "token", "deployer"]).await;
    assert!(out.status.success(), "create token: {}", text(&out));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!token.is_empty() && !token.contains(char::is_whitespace), "{token:?}");

    let out = kubectl(&kubeconfig, &["--token", &token, "get", "pods"]).await;
    assert!(out.status.success(), "get pods with the token: {}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), "No resources found in default namespace.");
    let out = kubectl(&kubeconfig, &["--token", &token, "get", "secrets"]).await;
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Error from server (Forbidden): secrets is forbidden: User \"system:serviceaccount:default:deployer\" \
         cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
    );
    // `auth can-i` sends a SelfSubjectAccessReview (as protobuf) and prints the answer.
    let out = kubectl(&kubeconfig, &["--token", &token, "auth", "can-i", "list", "pods"]).await;
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stdout).trim()), (Some(0), "yes"), "{}", text(&out));
    let out = kubectl(&kubeconfig, &["--token", &token, "auth", "can-i", "list", "secrets"]).await;
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stdout).trim()), (Some(1), "no"), "{}", text(&out));
    let users: Vec<String> =
        c.requests().entries().iter().filter(|e| e.resource == "secrets").map(|e| e.user.clone()).collect();
    assert_eq!(users, ["system:serviceaccount:default:deployer"], "the request log names the token's user");

    let out = kubectl(&kubeconfig, &["create", "token", "deployer", "--duration=1m"]).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: failed to create token: TokenRequest.authentication.k8s.io \"\" is invalid: \
         spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
    );
    let out = kubectl(&kubeconfig, &["create", "token", "ghost"]).await;
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: failed to create token: serviceaccounts \"ghost\" not found"
    );

    let changed = dir.join("changed.yaml");
    let new_ref = RBAC_YAML.replace("  kind: Role\n  name: pod-reader\n", "  kind: Role\n  name: other\n");
    std::fs::write(&changed, new_ref).expect("changed manifest");
    let out = kubectl(&kubeconfig, &["apply", "-f", &changed.to_string_lossy()]).await;
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "The RoleBinding \"deployer-reads-pods\" is invalid: roleRef: Invalid value: \
         rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"other\"}: cannot change roleRef"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first line of a `kubectl get` table and the row of one object, with runs of spaces
/// collapsed, so the assertion reads like the terminal.
fn header_and_row(out: &Output, name: &str) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let squeeze = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let header = stdout.lines().next().map(squeeze).unwrap_or_default();
    let row = stdout.lines().find(|l| l.split_whitespace().next() == Some(name)).map(squeeze).unwrap_or_default();
    (header, row)
}

#[tokio::test]
async fn kubectl_1_28_and_the_newest_create_core_objects_and_print_the_servers_columns() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not on PATH; install kubectl to run the kubectl scenario");
        return;
    }
    let kubectls = pinned_kubectls();
    assert!(
        kubectls.iter().any(|(v, _)| v == "1.28") && kubectls.len() == 2,
        "kubectl is on PATH but kubectl.1.28 and a newer kubectl.1.NN are not beside it: {kubectls:?}"
    );
    let c = crate::common::full_cluster(SandboxVersions::Both).await;
    let dir = std::env::temp_dir().join(format!("embedded-cluster-kubectl-versions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    c.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let manifest = dir.join("sandbox.yaml");
    std::fs::write(&manifest, SANDBOX_YAML).expect("manifest");
    let out = kubectl(&kubeconfig, &["apply", "-f", &manifest.to_string_lossy()]).await;
    assert!(out.status.success(), "apply: {}", text(&out));
    let out = kubectl(&kubeconfig, &["wait", "--for=condition=Ready", "sandbox/from-kubectl", "--timeout=30s"]).await;
    assert!(out.status.success(), "wait: {}", text(&out));

    for (version, bin) in &kubectls {
        let k = |args: Vec<String>| {
            let bin = bin.clone();
            let kubeconfig = kubeconfig.clone();
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                kubectl_at(&bin, &kubeconfig, &args).await
            }
        };
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ns = format!("ns-{}", version.replace('.', "-"));
        // kubectl's typed clients (1.33 sends these as protobuf).
        let out = k(args(&["create", "namespace", &ns])).await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("namespace/{ns} created"),
            "{version}: {}",
            text(&out)
        );
        let out =
            k(args(&["-n", &ns, "create", "secret", "generic", "creds", "--from-literal=a=1", "--from-literal=b=2"]))
                .await;
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "secret/creds created", "{version}: {}", text(&out));
        let out = k(args(&["-n", &ns, "create", "configmap", "settings", "--from-literal=k=v"])).await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "configmap/settings created",
            "{version}: {}",
            text(&out)
        );
        let out = k(args(&["-n", &ns, "get", "secret", "creds", "-o", "jsonpath={.data.a}{.type}"])).await;
        assert_eq!(String::from_utf8_lossy(&out.stdout), "MQ==Opaque", "{version}: {}", text(&out));
        let out = k(args(&["-n", &ns, "create", "job", "once", "--image=busybox:1.36", "--", "true"])).await;
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "job.batch/once created", "{version}: {}", text(&out));

        // Server-side printing: the columns the real server prints.
        let out = k(args(&["get", "namespace", &ns])).await;
        assert_eq!(header_and_row(&out, &ns).0, "NAME STATUS AGE", "{version}: {}", text(&out));
        assert!(header_and_row(&out, &ns).1.starts_with(&format!("{ns} Active ")), "{version}: {}", text(&out));
        let out = k(args(&["-n", &ns, "get", "secrets"])).await;
        assert_eq!(header_and_row(&out, "creds").0, "NAME TYPE DATA AGE", "{version}: {}", text(&out));
        assert!(header_and_row(&out, "creds").1.starts_with("creds Opaque 2 "), "{version}: {}", text(&out));
        let out = k(args(&["-n", &ns, "get", "configmaps"])).await;
        assert_eq!(header_and_row(&out, "settings").0, "NAME DATA AGE", "{version}: {}", text(&out));
        let out = k(args(&["-n", &ns, "get", "jobs"])).await;
        assert_eq!(header_and_row(&out, "once").0, "NAME STATUS COMPLETIONS DURATION AGE", "{version}: {}", text(&out));
        let out = k(args(&["get", "pods", "-o", "wide"])).await;
        let (header, row) = header_and_row(&out, "from-kubectl");
        assert_eq!(header, "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES", "{version}");
        assert!(row.starts_with("from-kubectl 1/1 Running 0 "), "{version}: {}", text(&out));
        let out = k(args(&["get", "nodes"])).await;
        assert_eq!(header_and_row(&out, "").0, "NAME STATUS ROLES AGE VERSION", "{version}: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains(" Ready "), "{version}: {}", text(&out));
        let out = k(args(&["get", "sandboxes"])).await;
        let (header, row) = header_and_row(&out, "from-kubectl");
        assert_eq!(header, "NAME READY REASON AGE", "{version}: {}", text(&out));
        assert!(row.starts_with("from-kubectl True "), "{version}: {}", text(&out));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
