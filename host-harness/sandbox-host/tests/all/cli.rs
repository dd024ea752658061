//! The `sandbox-host` binary from outside: the provider commands against a cluster (an
//! embedded one in this process, reached through a kubeconfig as a real one is), the policy
//! commands and `contract` on a kubeconfig.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::support::{BIN, OutputBlocking, ProviderCli, component, refused, temp_dir};

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
    let (code, _, stderr) = inspect(&["rbac", "--allow-namespace", "*"]);
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
    assert!(message.contains("sandbox-host network-policy -n default | kubectl apply -f -"), "{message}");

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
        cmd.args(["contract", "--scenario", "lifecycle", "--component"])
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

/// `describe` and `validate-config` make no cluster call, so where no cluster is found (no
/// kubeconfig, no in-cluster ServiceAccount) they run without one, as a CI job linting configs
/// needs; a command that needs the cluster still says there is none.
#[test]
fn describe_and_validate_config_need_no_cluster() {
    let dir = temp_dir("offline");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let config = dir.join("config.json");
    std::fs::write(&config, json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"}).to_string())
        .expect("config");
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .env("HOME", &home)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .output()
            .expect("run");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let config_arg = config.to_string_lossy().to_string();
    let (code, stdout, stderr) = run(&["validate-config", "--config", &config_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("config is valid"), "{stdout}");
    let (code, stdout, stderr) = run(&["describe"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("backends:"), "{stdout}");
    let (code, _, stderr) = run(&["probe", "--config", &config_arg]);
    assert_ne!(code, Some(0), "probe needs the cluster: {stderr}");
    assert!(stderr.contains("kubeconfig"), "and says how to name one: {stderr}");
}

/// A config may be YAML, as kubectl takes either, or come on standard input (`--config -`);
/// text that is neither says so, and standard input serves one file only.
#[test]
fn a_config_may_be_yaml_or_standard_input() {
    let dir = temp_dir("documents");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let validate = |config: &str, stdin: &str, extra: &[&str]| {
        let mut child = Command::new(BIN)
            .args(["validate-config", "--json", "--config", config])
            .args(extra)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .env("HOME", &home)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), stdin.as_bytes()).expect("write stdin");
        let out = child.wait_with_output().expect("wait");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let yaml = "namespace: default\nbackend: job\nimage: busybox:1.36\n";
    let file = dir.join("config.yaml");
    std::fs::write(&file, yaml).expect("config");
    let file_arg = file.to_string_lossy().to_string();
    for (config, stdin) in
        [(file_arg.as_str(), ""), ("-", yaml), ("-", r#"{"namespace":"default","image":"busybox:1.36"}"#)]
    {
        let (code, stdout, stderr) = validate(config, stdin, &[]);
        assert_eq!(code, Some(0), "{config}: {stderr}");
        let validation: serde_json::Value = serde_json::from_str(&stdout).expect("validate-config --json");
        assert_eq!(validation["ok"], true, "{config}: {stdout}");
    }

    let (code, _, stderr) = validate("-", "just some words", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("from standard input is neither a JSON object nor a YAML mapping"), "{stderr}");
    let (code, _, stderr) = validate("-", "{\"namespace\": ", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is not JSON"), "text that starts like JSON gets JSON's error: {stderr}");
    let (code, _, stderr) = validate("-", yaml, &["--limits", "-"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("only one file can be `-`"), "{stderr}");
}

/// What acquire goes on without is said on stderr at the default log level: a reusable lease
/// it cannot give, and a key validate-config warns of (a misspelt one is otherwise silently
/// its default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_warns_of_what_it_goes_on_without() {
    let cli = ProviderCli::start("warnings").await;
    let typo = json!({"namespace": "default", "backend": "job", "image": "busybox:1.36", "leaseTtlSecond": 60});
    std::fs::write(&cli.config, typo.to_string()).expect("config");
    let out = cli
        .run(&["acquire", "--acquisition-id", "cli-w", "--run-id", "run-1", "--reusable"])
        .env_remove("RUST_LOG")
        .output_blocking()
        .expect("acquire");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("reusable lease not possible"), "{stderr}");
    assert!(stderr.contains("/leaseTtlSecond") && stderr.contains("unknown key"), "{stderr}");
}

/// `--expires-in` beyond the config's lease TTL is capped, and acquire and renew say so; a
/// shorter one is granted as asked, without a note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_capped_by_the_lease_ttl_is_noted() {
    let cli = ProviderCli::start("capped").await;
    let lease = cli.dir.join("lease.json");
    let lease_arg = lease.to_string_lossy().to_string();
    let acquire = |id: &str, expires_in: &str| {
        cli.run(&[
            "acquire",
            "--acquisition-id",
            id,
            "--run-id",
            "run-1",
            "--expires-in",
            expires_in,
            "--out",
            &lease_arg,
        ])
        .output_blocking()
        .expect("acquire")
    };
    let out = acquire("cli-c", "7200");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("note: the lease expires at") && stderr.contains("leaseTtlSeconds"), "{stderr}");
    let out = cli.run(&["renew", "--lease", &lease_arg, "--expires-in", "7200"]).output_blocking().expect("renew");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("note: the lease expires at"), "renew notes it too: {stderr}");
    let out = acquire("cli-d", "600");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("note:"), "granted as asked: {stderr}");
}

/// Every host limit is named where an operator looks for it: `--help` and the README.
#[test]
fn every_host_limit_is_named_in_the_help_and_the_readme() {
    let help = Command::new(BIN).args(["acquire", "--help"]).output().expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README");
    let limits = serde_json::to_value(provider_host::limits::Limits::default()).expect("limits");
    for key in limits.as_object().expect("an object").keys() {
        assert!(help.contains(key.as_str()), "--help names {key}: {help}");
        assert!(readme.contains(&format!("`{key}`")), "the README names {key}");
    }
    assert!(help.contains("--call-timeout-ms"), "{help}");
}

/// A readinessTimeoutSeconds the call deadline cannot hold names the flag that raises it, and
/// the flag does.
#[test]
fn the_call_deadline_a_config_needs_is_one_flag_away() {
    let dir = temp_dir("call-timeout");
    let config = dir.join("config.json");
    let wants =
        json!({"namespace": "default", "backend": "job", "image": "busybox:1.36", "readinessTimeoutSeconds": 25});
    std::fs::write(&config, wants.to_string()).expect("config");
    let validate = |extra: &[&str]| {
        let out = Command::new(BIN)
            .args(["validate-config", "--no-cluster", "--config"])
            .arg(&config)
            .args(extra)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .output()
            .expect("run");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, stdout) = validate(&[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("/readinessTimeoutSeconds") && stdout.contains("call-timeout-ms"), "{stdout}");
    let (code, stdout) = validate(&["--call-timeout-ms", "60000"]);
    assert_eq!(code, Some(0), "{stdout}");
}

/// An acquire run by hand may leave out its ids: the acquisition id is generated and printed
/// with the way to get the same sandbox again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_without_ids_generates_and_prints_them() {
    let cli = ProviderCli::start("ids").await;
    let out = cli.run(&["acquire", "--json"]).output_blocking().expect("acquire");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let note = stderr.lines().find(|l| l.starts_with("note: no --acquisition-id given")).expect("a note");
    let id = note.split_whitespace().find(|w| w.starts_with("cli-")).expect("the id").to_string();
    let lease: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the lease");
    assert_eq!(lease["provider-lease-id"], format!("k8s:job:default:pc-{id}"), "{note}");
    assert!(note.contains(&format!("--acquisition-id {id}")), "{note}");
}

/// `pool` reads like kubectl: the name after the verb, `-n` and `--kubeconfig` anywhere; the
/// older `pool --name NAME VERB`, and `--name` after the verb, still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_commands_take_the_name_after_the_verb() {
    let cli = ProviderCli::start("pool").await;
    let kubeconfig = cli.kubeconfig.to_string_lossy().to_string();
    let pool = |args: &[&str]| {
        let out = Command::new(BIN).arg("pool").args(args).output_blocking().expect("pool");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = pool(&[
        "create",
        "py-a",
        "--replicas",
        "1",
        "--wait-seconds",
        "60",
        "-n",
        "default",
        "--kubeconfig",
        &kubeconfig,
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("SandboxWarmPool default/py-a applied") && stdout.contains("1/1 Ready"), "{stdout}");
    let (code, stdout, stderr) = pool(&["--kubeconfig", &kubeconfig, "--name", "py-a", "status"]);
    assert_eq!(code, Some(0), "the older form: {stderr}");
    assert!(stdout.contains("pool py-a: 1/1 Ready"), "{stdout}");
    let (code, stdout, stderr) =
        pool(&["create", "--name", "py-b", "--replicas", "1", "--wait-seconds", "0", "--kubeconfig", &kubeconfig]);
    assert_eq!(code, Some(0), "--name after the verb: {stderr}");
    assert!(stdout.contains("SandboxWarmPool default/py-b applied"), "{stdout}");
    let (code, _, stderr) = pool(&["status", "--kubeconfig", &kubeconfig]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("name the pool: sandbox-host pool status NAME"), "{stderr}");
    for name in ["py-a", "py-b"] {
        let (code, stdout, stderr) = pool(&["delete", name, "--template", name, "--kubeconfig", &kubeconfig]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains(&format!("SandboxWarmPool default/{name} deleted")), "{stdout}");
    }
}

/// A failed acquire is said once, by the command: the provider's own record of the failure is
/// not a second warning beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_acquire_is_reported_once() {
    let cli = ProviderCli::start("once").await;
    let elsewhere = json!({"namespace": "kube-system", "backend": "job", "image": "busybox:1.36"});
    std::fs::write(&cli.config, elsewhere.to_string()).expect("config");
    let out = cli
        .run(&["acquire", "--acquisition-id", "cli-o", "--run-id", "run-1"])
        .env_remove("RUST_LOG")
        .output_blocking()
        .expect("acquire");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let told = stderr.lines().filter(|l| l.contains("does not allow namespace")).count();
    assert_eq!(told, 1, "once: {stderr}");
}

/// An API server nobody answers at: the failure is said once, with its cause, and without a
/// line per failed request from the Kubernetes client; the message names the server, as
/// kubectl does, and no clean-up is spoken of: the Job's create was never sent.
#[test]
fn an_unreachable_server_is_one_clear_error() {
    let dir = temp_dir("unreachable");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n\
         users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
    )
    .expect("kubeconfig");
    let config = dir.join("config.json");
    std::fs::write(&config, json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"}).to_string())
        .expect("config");
    let out = Command::new(BIN)
        .args(["acquire", "--acquisition-id", "cli-u", "--run-id", "run-1", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("--config")
        .arg(&config)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .env_remove("RUST_LOG")
        .output()
        .expect("acquire");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("kube_client"), "no line per failed request: {stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("Connection refused")).collect();
    assert_eq!(errors.len(), 1, "said once, with its cause: {stderr}");
    assert!(errors[0].contains("no connection to the API server at https://127.0.0.1:1 could be made"), "{stderr}");
    assert!(!stderr.contains("lean-up"), "no clean-up of a Job whose create was never sent: {stderr}");
}

/// What a person reads uses the words a script reads in `--json`: `job`, `deleted`,
/// `already-gone`, not Rust's names for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_output_speaks_the_json_words() {
    let cli = ProviderCli::start("words").await;
    let lease = cli.dir.join("lease.json");
    let lease_arg = lease.to_string_lossy().to_string();
    let stdout = |args: &[&str]| {
        let out = cli.run(args).output_blocking().expect("run");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let acquired = stdout(&["acquire", "--acquisition-id", "cli-words", "--run-id", "run-1", "--out", &lease_arg]);
    assert!(acquired.contains("backend    job (batch/v1)"), "{acquired}");
    let destroyed = stdout(&["destroy", "--lease", &lease_arg]);
    assert!(destroyed.contains(" deleted") && !destroyed.contains("Deleted"), "{destroyed}");
    let again = stdout(&["destroy", "--lease", &lease_arg]);
    assert!(again.contains(" already-gone") && !again.contains("AlreadyGone"), "{again}");
    let described =
        Command::new(BIN).args(["describe", "--no-cluster", "--cache-dir"]).arg(&cli.cache).output_blocking();
    let described = String::from_utf8_lossy(&described.expect("describe").stdout).into_owned();
    assert!(described.contains("backends: sandbox, job, claim;"), "{described}");
}
