//! `sandbox-host kubeconfig`: a kubeconfig with inline credentials for the ServiceAccount that
//! `rbac` makes, which a whole lifecycle runs under, as an untrusted kubeconfig (a Paperclip
//! environment's).

use crate::support::{BIN, OutputBlocking, ProviderCli, component};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_kubeconfig_runs_a_lifecycle_under_the_generated_role() {
    let cli = ProviderCli::start("sa-kubeconfig").await;
    let admin = cli.dir.join("admin-kubeconfig");
    cli.cluster.write_kubeconfig(&admin).expect("admin kubeconfig");
    let cache = cli.cache.to_string_lossy().into_owned();
    let host = |args: &[&str]| {
        std::process::Command::new(BIN).args(args).env_remove("KUBECONFIG").output_blocking().expect("run sandbox-host")
    };
    let component = component().to_string_lossy().into_owned();
    let rbac = host(&[
        "rbac",
        "-n",
        "default",
        "--service-account",
        "paperclip",
        "--component",
        &component,
        "--cache-dir",
        &cache,
    ]);
    assert_eq!(rbac.status.code(), Some(0), "{}", String::from_utf8_lossy(&rbac.stderr));
    cli.apply_yaml(&String::from_utf8_lossy(&rbac.stdout), |_| {}).await;

    let admin_arg = admin.to_string_lossy().into_owned();
    let made = ["kubeconfig", "-n", "default", "--service-account", "paperclip", "--kubeconfig", &admin_arg];
    let out = host(&[&made[..], &["--duration", "3600"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("the token in this kubeconfig expires at"), "{stderr}");
    let yaml = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(yaml.contains("certificate-authority-data") && yaml.contains("token:"), "inline credentials: {yaml}");
    let kubeconfig = cli.dir.join("paperclip-kubeconfig");
    std::fs::write(&kubeconfig, &yaml).expect("write");
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();

    let lease = cli.dir.join("lease.json").to_string_lossy().into_owned();
    let config = cli.config.to_string_lossy().into_owned();
    let under_sa = |args: &[&str]| {
        let common =
            ["--component", &component, "--kubeconfig", &kubeconfig, "--untrusted-kubeconfig", "--config", &config];
        // The subcommand, the common options, then its own (exec's command comes last).
        let out = host(&[&args[..1], &common[..], &args[1..]].concat());
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mark = cli.cluster.requests().mark();
    under_sa(&["probe"]);
    under_sa(&["acquire", "--acquisition-id", "sa-1", "--out", &lease]);
    assert_eq!(under_sa(&["exec", "--lease", &lease, "--", "echo", "from-the-sa"]), "from-the-sa\n");
    under_sa(&["destroy", "--lease", &lease]);
    let user = "system:serviceaccount:default:paperclip";
    let calls: Vec<_> = cli.cluster.requests().since(mark).into_iter().filter(|e| e.user == user).collect();
    assert!(calls.iter().any(|e| e.verb == "create" && e.resource == "jobs"), "the ServiceAccount made the Job");
    let refused: Vec<String> =
        calls.iter().filter(|e| e.code == 403).map(|e| format!("{} {}", e.verb, e.resource)).collect();
    assert!(refused.is_empty(), "the generated Role refused: {refused:?}");

    let short = host(&[&made[..], &["--duration", "60"]].concat());
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert_eq!(short.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("may not specify a duration less than 10 minutes"), "the API server's own words: {stderr}");
}
