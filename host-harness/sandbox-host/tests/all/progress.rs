//! `acquire` in a terminal: a line that names the workload, its pod's phase and the time spent
//! against the deadline, instead of a bare spinner. Run under `script(1)`, which gives the
//! command a pseudo-terminal as a person's shell would.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{BIN, ProviderCli, component};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_in_a_terminal_shows_the_workload_its_pod_and_the_time_left() {
    let cli = ProviderCli::start("progress").await;
    // The provider's wait for readiness is held until the line has been seen.
    let hold = cli.hold_provider_watches();
    let paths = [component(), cli.kubeconfig.clone(), cli.cache.clone(), cli.config.clone()];
    let [component, kubeconfig, cache, config] = paths.map(|p| p.to_string_lossy().into_owned());
    let words = [
        BIN,
        "acquire",
        "--acquisition-id",
        "prog",
        "--component",
        &component,
        "--kubeconfig",
        &kubeconfig,
        "--cache-dir",
        &cache,
        "--config",
        &config,
    ];
    let line = shlex::try_join(words).expect("a shell line");
    let mut child = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) runs a command in a pseudo-terminal (util-linux or bsdutils)");
    let seen = Arc::new(Mutex::new(String::new()));
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut chunk) {
                seen.lock().expect("lock").push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        })
    };
    let progress_shown =
        |text: &str| text.contains("jobs.batch default/pc-prog · pod pc-prog-") && text.contains(" s of 30 s");
    let waited_since = Instant::now();
    while !progress_shown(&seen.lock().expect("lock")) {
        let text = seen.lock().expect("lock").clone();
        assert!(
            waited_since.elapsed() < Duration::from_secs(120),
            "no progress line with the Job and its pod:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cli.cluster.faults().remove(hold);
    let status = tokio::task::block_in_place(|| child.wait()).expect("script ends");
    reader.join().expect("reader");
    let text = seen.lock().expect("lock").clone();
    assert!(status.success(), "{status:?}: {text}");
    assert!(text.contains("lease      k8s:job:default:pc-prog"), "{text}");
}
