//! Exec sessions without a cluster: background processes, pod deletion, terminals.

use super::*;
use rustix::process::Signal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[test]
fn container_paths_stay_inside_the_pod_directory() {
    let dir = Path::new("/tmp/pods/u");
    assert_eq!(inside(dir, "/"), dir);
    assert_eq!(inside(dir, "/app/data"), dir.join("app/data"));
    assert_eq!(inside(dir, "../../etc/./x/.."), dir.join("etc/x"));
    assert_eq!(safe_segment("../a b"), "___a_b");
}

fn spec(uid: &str, argv: &[&str]) -> ExecSpec {
    ExecSpec {
        pod_uid: uid.to_string(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::from([("GREETING".to_string(), b"hello".to_vec())]),
        working_dir: Some("/work".to_string()),
        hostname: "pod-a".to_string(),
        stdin: false,
        stdout: true,
        stderr: true,
        tty: false,
        main_process: MainProcess::Sleep,
    }
}

/// Runs one exec until its process exits and returns what it printed.
async fn run(host: &Arc<ExecHost>, spec: ExecSpec) -> String {
    let mut p = host.start(spec).expect("start");
    let mut out = String::new();
    if let Some(mut stdout) = p.stdout.take() {
        stdout.read_to_string(&mut out).await.expect("read the output");
    }
    p.child.wait().await.expect("wait");
    out
}

/// Whether a live process runs `sleep` with this argument (a zombie has no command line).
fn sleeping(marker: &str) -> bool {
    let wanted = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| cmdline == wanted.as_bytes()))
}

/// Polls until `done` holds, for at most 30 seconds, or fails saying what it waited for.
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_process_runs_in_the_pod_directory_with_a_clean_environment() {
    let host = Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT, None));
    let mut p = host.start(spec("uid-1", &["sh", "-c", "pwd; echo $GREETING $HOSTNAME; env | wc -l"])).expect("start");
    let mut out = String::new();
    p.stdout.take().expect("stdout").read_to_string(&mut out).await.expect("read");
    assert!(p.child.wait().await.expect("wait").success());
    let pwd = host.pod_dir("uid-1").join("work");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], [pwd.to_string_lossy().as_ref(), "hello pod-a"], "{out}");
    assert!(lines[2].trim().parse::<usize>().is_ok_and(|n| n < 10), "only a few variables: {out}");
    assert_eq!(host.running(), 1);
    drop(p);
    assert_eq!(host.running(), 0);
    host.pod_deleted("uid-1");
    assert!(!host.pod_dir("uid-1").exists());
    host.shutdown();
    assert!(!host.root.exists());
    assert!(matches!(host.start(spec("uid-1", &["true"])), Err(StartError::Stopped)));
}

#[tokio::test]
async fn a_missing_program_is_the_runtimes_error() {
    let host = Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT, None));
    let err = host.start(spec("uid-2", &["no-such-program-here"])).expect_err("not found");
    assert_eq!(err.to_string(), "exec: \"no-such-program-here\": executable file not found in $PATH");
    host.shutdown();
}

#[tokio::test]
async fn what_an_exec_leaves_running_lives_until_its_pod_is_deleted() {
    // Without a namespace the cluster keeps the session (in one, the namespace holds it).
    let host = Arc::new(ExecHost::without_namespaces(DEFAULT_EXEC_LIMIT));
    let pid = run(&host, spec("uid-3", &["sh", "-c", "nohup sleep 301.11 >/dev/null 2>&1 & echo $!"])).await;
    // Started before `sh` exited, it shows as `sleep` once `nohup` has run it.
    wait_until("the background process running after its exec ended", || sleeping("301.11")).await;
    assert_eq!((host.running(), host.lock().entries.len()), (0, 1), "its session is kept for the pod");
    let check = format!("kill -0 {} && echo alive", pid.trim());
    assert_eq!(run(&host, spec("uid-3", &["sh", "-c", &check])).await, "alive\n", "a later exec sees it");
    host.pod_deleted("uid-3");
    wait_until("the background process killed with its pod", || !sleeping("301.11")).await;
    assert!(host.lock().entries.is_empty());
    assert!(matches!(host.start(spec("uid-3", &["true"])), Err(StartError::PodDeleted)));
}

#[tokio::test]
async fn a_finished_exec_is_forgotten_once_nothing_of_it_runs() {
    let host = Arc::new(ExecHost::without_namespaces(DEFAULT_EXEC_LIMIT));
    assert_eq!(run(&host, spec("uid-4", &["sh", "-c", "echo done"])).await, "done\n");
    assert!(host.lock().entries.is_empty(), "nothing left running: forgotten at once");
    let pid = run(&host, spec("uid-4", &["sh", "-c", "nohup sleep 301.12 >/dev/null 2>&1 & echo $!"])).await;
    let session = host.lock().entries.values().map(|e| e.session).next().expect("the session kept");
    let pid = pid.trim().parse::<i32>().ok().and_then(Pid::from_raw).expect("the background process's pid");
    rustix::process::kill_process(pid, Signal::KILL).expect("kill the background process");
    wait_until("the session empty", || !Processes::default().alive(session)).await;
    assert_eq!(host.lock().entries.len(), 1, "not noticed yet");
    run(&host, spec("uid-4", &["true"])).await;
    assert!(host.lock().entries.is_empty(), "pruned when the next exec started");
}

#[tokio::test]
async fn stopping_the_host_kills_what_execs_left_running() {
    let host = Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT, None));
    run(&host, spec("uid-5", &["sh", "-c", "nohup sleep 301.13 >/dev/null 2>&1 &"])).await;
    wait_until("the background process running after its exec ended", || sleeping("301.13")).await;
    drop(host);
    wait_until("the background process killed with the host", || !sleeping("301.13")).await;
}

#[tokio::test]
async fn an_exec_cut_short_takes_what_it_started_with_it() {
    let host = Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT, None));
    let p = host.start(spec("uid-6", &["sh", "-c", "sleep 301.14 & sleep 301.15"])).expect("start");
    wait_until("both sleeps running", || sleeping("301.14") && sleeping("301.15")).await;
    drop(p);
    wait_until("both sleeps killed with their exec", || !sleeping("301.14") && !sleeping("301.15")).await;
    assert!(host.lock().entries.is_empty());
}

#[tokio::test]
async fn a_tty_exec_has_a_controlling_terminal_of_the_clients_size() {
    let host = Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT, None));
    let script = "read -r go; test -t 0 && test -t 1 && test -t 2 && echo tty; \
                  (: </dev/tty) 2>/dev/null && echo controlling; stty size";
    let tty = ExecSpec { stdin: true, stderr: false, tty: true, ..spec("uid-7", &["sh", "-c", script]) };
    let mut p = host.start(tty).expect("start");
    assert!(p.stderr.is_none(), "stderr is the terminal");
    p.resize(100, 30);
    p.stdin.take().expect("stdin").write_all(b"go\n").await.expect("type");
    let mut out = String::new();
    p.stdout.take().expect("the terminal").read_to_string(&mut out).await.expect("read until it closes");
    assert!(p.child.wait().await.expect("wait").success(), "{out:?}");
    let lines: Vec<&str> = out.lines().map(str::trim_end).collect();
    assert_eq!(lines, ["go", "tty", "controlling", "30 100"], "the echo of the input, then the script's");
}

/// Tells the helper below where to say it is ready.
const HELPER_DIR: &str = "EMBEDDED_CLUSTER_EXEC_HELPER_DIR";

/// Run by the next test in a process of its own: leaves a background process, says so, and
/// waits to be killed.
#[tokio::test]
#[ignore = "a helper: a_process_that_dies_without_stopping_the_host_leaves_nothing_running runs it"]
async fn helper_leaves_a_background_process_and_waits() {
    let Some(dir) = std::env::var_os(HELPER_DIR).map(PathBuf::from) else { return };
    let host = Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT, None));
    run(&host, spec("uid-8", &["sh", "-c", "nohup sleep 301.16 >/dev/null 2>&1 &"])).await;
    std::fs::write(dir.join("ready"), b"").expect("say it is ready");
    std::future::pending::<()>().await;
}

/// A child process, killed if the test fails before it is done with it.
struct Helper(std::process::Child);

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_process_that_dies_without_stopping_the_host_leaves_nothing_running() {
    let dir = std::env::temp_dir().join(format!("embedded-cluster-exec-helper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the helper's directory");
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    let helper = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--ignored", "--exact", &format!("{module}::helper_leaves_a_background_process_and_waits")])
        .env(HELPER_DIR, &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the helper");
    let mut helper = Helper(helper);
    wait_until("the helper's background process", || dir.join("ready").exists() && sleeping("301.16")).await;
    let pid = i32::try_from(helper.0.id()).ok().and_then(Pid::from_raw).expect("the helper's pid");
    rustix::process::kill_process(pid, Signal::TERM).expect("SIGTERM to the helper");
    let _ = helper.0.wait();
    wait_until("the background process killed by the guardian", || !sleeping("301.16")).await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("embedded-cluster-{}-0", pid.as_raw_nonzero())));
}
