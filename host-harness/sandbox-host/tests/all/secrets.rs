//! Secrets given to `sandbox-host` stay out of its logs, its errors and its command line:
//! frame-level logs of the wire are capped whatever `RUST_LOG` says, secret values can come
//! from the environment or a file, and no error quotes an env entry's name or value.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use serde_json::json;

use crate::support::component;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-host");

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sandbox-host-secrets-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A value no run prints by chance; the `"` makes its JSON-escaped (and Rust-debug) form differ
/// from the plain one.
fn canary(tag: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("cAnArY\"{tag}-{}-{nanos}", std::process::id())
}

/// Standard base64 (with padding), enough to look for a secret's encoded forms.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[usize::try_from(n >> (18 - 6 * i) & 63).unwrap_or(0)]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The forms of `secret` a log could carry it in, by name: plain, its tail after the `"`,
/// JSON-escaped, hex (lower and upper case) and base64 at each of the three alignments (the
/// part of the encoding that does not depend on the bytes around it).
fn forms(secret: &str) -> Vec<(String, String)> {
    let mut forms = vec![
        ("plain".to_string(), secret.to_string()),
        ("tail".to_string(), secret.rsplit('"').next().unwrap_or(secret).to_string()),
        ("json".to_string(), serde_json::to_string(secret).unwrap_or_default().trim_matches('"').to_string()),
    ];
    let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
    forms.push(("hex".into(), hex.clone()));
    forms.push(("HEX".into(), hex.to_uppercase()));
    for prefix in 0..3 {
        let mut bytes = vec![b'x'; prefix];
        bytes.extend_from_slice(secret.as_bytes());
        let encoded = base64(&bytes);
        let start = if prefix == 0 { 0 } else { 4 };
        let stable = &encoded[start..encoded.len() - 4];
        forms.push((format!("base64+{prefix}"), stable.to_string()));
    }
    forms
}

/// Where any form of any secret shows in `text` (`what` names the text): empty when nowhere.
fn leaks(what: &str, text: &[u8], secrets: &[&str]) -> Vec<String> {
    let text = String::from_utf8_lossy(text);
    let mut found = Vec::new();
    for secret in secrets {
        for (form, needle) in forms(secret) {
            if let Some(at) = text.find(&needle) {
                let from = text[..at].rfind('\n').map_or(0, |n| n + 1);
                let line: String = text[from..].chars().take(300).collect();
                found.push(format!("{what}: {form} form of a secret in: {line}"));
            }
        }
    }
    found
}

/// Stops the cluster process when the test ends, whatever happens: SIGTERM (so it removes its
/// pods' processes and files), then SIGKILL if it has not gone within 30 s.
struct ClusterProcess(Child);

impl Drop for ClusterProcess {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.0.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sandbox-host ARGS` at `RUST_LOG=rust_log` (unset for `None`), with `env` added to its
/// environment, stdin empty; without backtraces, so its output is what a person sees.
fn sandbox_host(rust_log: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE").env_remove("RUST_LOG");
    if let Some(rust_log) = rust_log {
        cmd.env("RUST_LOG", rust_log);
    }
    cmd.envs(env.iter().copied()).args(args).stdin(Stdio::null());
    cmd.output().expect("run sandbox-host")
}

/// Asserts success and returns stdout.
fn succeeded(what: &str, out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: String = stderr.chars().rev().take(3000).collect::<Vec<_>>().into_iter().rev().collect();
    assert!(out.status.success(), "{what} failed ({:?}): {tail}", out.status.code());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--component`, `--kubeconfig`, `--cache-dir` and `--config` for the provider commands.
fn provider_args(dir: &Path, kubeconfig: &Path) -> Vec<String> {
    let config = dir.join("config.json");
    std::fs::write(&config, json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"}).to_string())
        .expect("config");
    [
        ("--component", component()),
        ("--kubeconfig", kubeconfig.to_path_buf()),
        ("--cache-dir", dir.join("cache")),
        ("--config", config),
    ]
    .into_iter()
    .flat_map(|(flag, path)| [flag.to_string(), path.to_string_lossy().into_owned()])
    .collect()
}

/// Compiles the component into `dir`'s cache with logging off: at `RUST_LOG=trace` the
/// compiler alone prints gigabytes, and compiling is not what these tests look at.
fn warm_the_compile_cache(dir: &Path) {
    let cache = dir.join("cache").to_string_lossy().into_owned();
    let component = component().to_string_lossy().into_owned();
    let out = sandbox_host(None, &["describe", "--no-cluster", "--component", &component, "--cache-dir", &cache], &[]);
    succeeded("describe (compiling the component)", &out);
}

/// With every log of `sandbox-host` on (`RUST_LOG=trace`, and `RUST_LOG=info,tungstenite=trace`),
/// a lease's secret env and an exec's secret env cross the exec WebSocket (the stdin header
/// exports them, the command prints them) and show in no output of either process: the command
/// run's, nor the cluster's (which runs at `trace` too), in no form.
#[test]
fn secrets_stay_out_of_trace_logs_of_exec() {
    let dir = temp_dir("trace");
    let kubeconfig = dir.join("kubeconfig");
    let (cluster_out, cluster_err) = (dir.join("cluster.out"), dir.join("cluster.err"));
    let child = Command::new(crate::dev_bin())
        .args(["cluster", "--port", "0", "--kubeconfig"])
        .arg(&kubeconfig)
        .env("RUST_LOG", "trace")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&cluster_out).expect("cluster.out"))
        .stderr(std::fs::File::create(&cluster_err).expect("cluster.err"))
        .spawn()
        .expect("start sandbox-dev cluster");
    let cluster = ClusterProcess(child);
    warm_the_compile_cache(&dir);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !kubeconfig.exists() {
        assert!(Instant::now() < deadline, "the cluster wrote no kubeconfig within 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let common = provider_args(&dir, &kubeconfig);
    let with = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
        let tail = args.split_off(split);
        args.extend(common.iter().cloned());
        args.extend(tail);
        args
    };
    let run = |rust_log: Option<&str>, args: &[String], env: &[(&str, &str)]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        sandbox_host(rust_log, &args, env)
    };

    let lease_secret = canary("lease");
    let exec_secret = canary("exec");
    let secrets = [lease_secret.as_str(), exec_secret.as_str()];
    let lease = dir.join("lease.json").to_string_lossy().into_owned();
    let token = format!("TOKEN={lease_secret}");
    let mut outputs: Vec<(String, Output)> = Vec::new();

    let acquire = run(
        Some("trace"),
        &with(&[
            "acquire",
            "--acquisition-id",
            "trace-1",
            "--run-id",
            "run-1",
            "--secret-env",
            &token,
            "--out",
            &lease,
        ]),
        &[],
    );
    succeeded("acquire", &acquire);
    outputs.push(("acquire at RUST_LOG=trace".into(), acquire));

    // The lease's secret alone: what every version of the host can send.
    let exec =
        run(Some("trace"), &with(&["exec", "--lease", &lease, "--", "sh", "-c", "printf '%s\\n' \"$TOKEN\""]), &[]);
    assert_eq!(succeeded("exec", &exec), "[redacted]\n", "the lease's secret went through the exec stream");
    assert!(String::from_utf8_lossy(&exec.stderr).contains("TRACE"), "RUST_LOG=trace is on");
    outputs.push(("exec at RUST_LOG=trace".into(), exec));
    let found: Vec<String> = outputs.iter().flat_map(|(what, out)| leak_report(what, out, &secrets)).collect();
    assert!(found.is_empty(), "{}", found.join("\n"));

    // And an exec's own secret env, at both settings.
    let script = "printf '%s\\n' \"$TOKEN\" \"$EXEC_TOKEN\"";
    for rust_log in ["trace", "info,tungstenite=trace"] {
        let exec = run(
            Some(rust_log),
            &with(&["exec", "--lease", &lease, "--secret-env", "EXEC_TOKEN", "--", "sh", "-c", script]),
            &[("EXEC_TOKEN", &exec_secret)],
        );
        assert_eq!(succeeded("exec", &exec), "[redacted]\n[redacted]\n", "both secrets went through");
        outputs.push((format!("exec at RUST_LOG={rust_log}"), exec));
    }
    let destroy = run(None, &with(&["destroy", "--lease", &lease]), &[]);
    succeeded("destroy", &destroy);
    drop(cluster);

    let mut found: Vec<String> = outputs.iter().flat_map(|(what, out)| leak_report(what, out, &secrets)).collect();
    for file in [&cluster_out, &cluster_err] {
        let text = std::fs::read(file).expect("the cluster's output");
        found.extend(leaks(&file.display().to_string(), &text, &secrets));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn leak_report(what: &str, out: &Output, secrets: &[&str]) -> Vec<String> {
    let mut found = leaks(&format!("{what}, stdout"), &out.stdout, secrets);
    found.extend(leaks(&format!("{what}, stderr"), &out.stderr, secrets));
    found
}

/// An embedded cluster in this process, and the provider commands' arguments for it.
struct Fixture {
    _cluster: EmbeddedCluster,
    dir: PathBuf,
    args: Vec<String>,
}

impl Fixture {
    async fn start(tag: &str) -> Self {
        let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
        let dir = temp_dir(tag);
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, cluster.kubeconfig(embedded_cluster::PROVIDER_USER).expect("kubeconfig"))
            .expect("write");
        let args = provider_args(&dir, &kubeconfig);
        Self { _cluster: cluster, dir, args }
    }

    /// `sandbox-host COMMAND ARGS` (provider options before any `--`), without blocking the
    /// cluster this process serves.
    fn run(&self, command: &[&str], env: &[(&str, &str)]) -> Output {
        let mut args: Vec<&str> = command.to_vec();
        let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let tail = args.split_off(split);
        args.extend(self.args.iter().map(String::as_str));
        args.extend(tail);
        tokio::task::block_in_place(|| sandbox_host(None, &args, env))
    }

    /// Acquires a lease with `args` added and returns its file.
    fn acquire(&self, id: &str, args: &[&str], env: &[(&str, &str)]) -> String {
        let lease = self.dir.join(format!("{id}.json")).to_string_lossy().into_owned();
        let mut command = vec!["acquire", "--acquisition-id", id, "--run-id", "run-1", "--out", &lease];
        command.extend_from_slice(args);
        succeeded("acquire", &self.run(&command, env));
        lease
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `--secret-env NAME` takes the value from this process's environment and
/// `--secret-env-file NAME=PATH` from a file (less its trailing newline), for `acquire` and
/// `exec` alike: the value is never on the command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_come_from_the_environment_or_a_file() {
    let fx = Fixture::start("sources").await;
    let file = fx.dir.join("file-token");
    std::fs::write(&file, "from-a-file\n").expect("secret file");
    let file_arg = format!("FILE_TOKEN={}", file.display());
    let lease = fx.acquire(
        "sources-1",
        &["--secret-env", "ENV_TOKEN", "--secret-env-file", &file_arg],
        &[("ENV_TOKEN", "from-the-env")],
    );
    let exec_file = fx.dir.join("exec-token");
    std::fs::write(&exec_file, "exec-file").expect("secret file");
    let exec_file_arg = format!("EXEC_FILE={}", exec_file.display());
    let script = "[ \"$ENV_TOKEN\" = from-the-env ] && [ \"$FILE_TOKEN\" = from-a-file ] && echo lease-ok; \
                  [ \"$EXEC_ENV\" = exec-env ] && [ \"$EXEC_FILE\" = exec-file ] && echo exec-ok; \
                  printf '%s\\n' \"$ENV_TOKEN\" \"$FILE_TOKEN\" \"$EXEC_ENV\" \"$EXEC_FILE\"";
    let out = fx.run(
        &[
            "exec",
            "--lease",
            &lease,
            "--secret-env",
            "EXEC_ENV",
            "--secret-env-file",
            &exec_file_arg,
            "--",
            "sh",
            "-c",
            script,
        ],
        &[("EXEC_ENV", "exec-env")],
    );
    assert_eq!(
        succeeded("exec", &out),
        "lease-ok\nexec-ok\n[redacted]\n[redacted]\n[redacted]\n[redacted]\n",
        "each value arrived whole, and each is redacted as a secret"
    );

    // A variable or file that is not there is refused by the entry's position, before any call.
    for (args, label) in [
        (["--secret-env", "NOT_SET_ANYWHERE_TOKEN"], "--secret-env #1"),
        (["--secret-env-file", "TOKEN=/nonexistent/dir/secret-file"], "--secret-env-file #1"),
    ] {
        let mut command = vec!["acquire", "--acquisition-id", "sources-2", "--run-id", "run-1"];
        command.extend_from_slice(&args);
        let out = fx.run(&command, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "a refusal: {stderr}");
        assert!(stderr.contains(label), "{stderr}");
        assert!(!stderr.contains("NOT_SET") && !stderr.contains("nonexistent"), "{stderr}");
    }
}

/// A secret put where a name goes (`--secret-env 's3cr3t-value=TOKEN'`, a name that is too
/// long, an entry without `=`) is never quoted: errors name the entry by option and position,
/// both this host's own and the provider's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_error_quotes_an_env_entrys_name() {
    let fx = Fixture::start("names").await;
    let long_name = format!("S3CR3T{}", "X".repeat(300));
    let long_entry = format!("{long_name}=value");
    let cases: [(&[&str], &str); 5] = [
        (&["--secret-env", "A=1", "--secret-env", "s3cr3t-value=TOKEN"], "--secret-env #2"),
        (&["--env", "s3cr3t value=x"], "--env #1"),
        (&["--env", "S3CR3T-NO-EQUALS"], "--env #1"),
        (&["--env", "A=1", "--env", &long_entry], "--env #2"),
        (&["--env", "S3CR3T=1", "--secret-env", "S3CR3T=2"], "--secret-env #1"),
    ];
    for (args, label) in cases {
        let mut command = vec!["acquire", "--acquisition-id", "names-1", "--run-id", "run-1"];
        command.extend_from_slice(args);
        let out = fx.run(&command, &[]);
        let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "acquire {args:?} is refused: {shown}");
        assert!(shown.contains(label), "acquire {args:?}: {shown}");
        assert!(!shown.to_lowercase().contains("s3cr3t"), "acquire {args:?} quoted it: {shown}");
    }

    let lease = fx.acquire("names-2", &[], &[]);
    for (args, label) in cases {
        let mut command = vec!["exec", "--lease", &lease];
        command.extend_from_slice(args);
        command.extend_from_slice(&["--", "true"]);
        let out = fx.run(&command, &[]);
        let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "exec {args:?} is refused: {shown}");
        assert!(shown.contains(label), "exec {args:?}: {shown}");
        assert!(!shown.to_lowercase().contains("s3cr3t"), "exec {args:?} quoted it: {shown}");
    }
}
