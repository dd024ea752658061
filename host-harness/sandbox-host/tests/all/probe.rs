//! `probe` answers which writes the credentials may make, through SelfSubjectAccessReviews,
//! instead of `writes-unchecked`: under the Role `rbac` prints every write is allowed, and a
//! Role without one is an error naming it.

use serde_json::Value;

use crate::support::{BIN, OutputBlocking, ProviderCli, component};

/// `probe --json` with `kubeconfig`: its exit code and the diagnostics' codes and messages.
fn probe(cli: &ProviderCli, kubeconfig: &std::path::Path) -> (Option<i32>, Vec<(String, String)>) {
    let out = std::process::Command::new(BIN)
        .args(["probe", "--json", "--component"])
        .arg(component())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(&cli.cache)
        .arg("--config")
        .arg(&cli.config)
        .output_blocking()
        .expect("probe");
    let result: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("probe JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let diagnostics = result["diagnostics"].as_array().cloned().unwrap_or_default();
    let found = diagnostics
        .iter()
        .map(|d| (d["code"].as_str().unwrap_or("").to_string(), d["message"].as_str().unwrap_or("").to_string()))
        .collect();
    (out.status.code(), found)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_asks_the_cluster_which_writes_are_allowed() {
    let cli = ProviderCli::start("probe-writes").await;
    let (code, found) = probe(&cli, &cli.kubeconfig);
    assert_eq!(code, Some(0), "{found:?}");
    assert!(found.iter().any(|(c, _)| c == "writes-allowed"), "{found:?}");
    assert!(!found.iter().any(|(c, _)| c == "writes-unchecked"), "the host checked them: {found:?}");

    // A ServiceAccount under the Role `rbac` prints, less the Jobs' delete.
    let out = std::process::Command::new(BIN)
        .args(["rbac", "-n", "default", "--service-account", "narrow", "--component"])
        .arg(component())
        .arg("--cache-dir")
        .arg(&cli.cache)
        .output_blocking()
        .expect("rbac");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    cli.apply_yaml(&String::from_utf8_lossy(&out.stdout), |object| {
        for rule in object["rules"].as_array_mut().into_iter().flatten() {
            if rule["resources"] == serde_json::json!(["jobs"]) {
                rule["verbs"].as_array_mut().expect("verbs").retain(|v| v != "delete");
            }
        }
    })
    .await;
    let token = cli.cluster.service_account_token("default", "narrow").await.expect("token");
    let user = "system:serviceaccount:default:narrow";
    let narrow = cli.dir.join("narrow-kubeconfig");
    std::fs::write(&narrow, cli.cluster.kubeconfig_for_token(user, &token).expect("kubeconfig")).expect("write");
    let (code, found) = probe(&cli, &narrow);
    assert_eq!(code, Some(1), "a forbidden write fails the probe: {found:?}");
    let forbidden = found.iter().find(|(c, _)| c == "writes-forbidden").map(|(_, m)| m.as_str()).unwrap_or_default();
    assert!(forbidden.contains("forbids these credentials delete jobs.batch in default"), "{found:?}");
    assert!(!forbidden.contains("create jobs.batch"), "only what is missing is named: {forbidden}");
}
