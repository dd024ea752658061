//! Execs into pods of a cluster whose only controller is the kubelet.

use std::time::Duration;

use embedded_cluster::{ClusterConfig, ControllerKind, EmbeddedCluster};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams};
use kube::runtime::wait::Condition;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A cluster whose only controller is the kubelet (pods run; nothing else writes).
pub async fn cluster(config: ClusterConfig) -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig { controllers: vec![ControllerKind::Kubelet], ..config })
        .await
        .expect("start the embedded cluster")
}

pub fn running(container: &'static str) -> impl Condition<Pod> {
    move |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()).and_then(|s| s.container_statuses.as_ref()).is_some_and(|cs| {
            cs.iter().any(|c| c.name == container && c.state.as_ref().is_some_and(|s| s.running.is_some()))
        })
    }
}

/// What one exec printed and its final status.
pub struct Ran {
    pub stdout: String,
    pub stderr: String,
    pub status: Option<Status>,
}

pub async fn read_all(reader: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let mut out = Vec::new();
    if let Some(mut r) = reader {
        r.read_to_end(&mut out).await.expect("read the exec's output");
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs `argv` in container `main` of `pod` through kube-rs, feeding `stdin` if given.
pub async fn exec(pods: &Api<Pod>, pod: &str, argv: &[&str], stdin: Option<&[u8]>) -> Ran {
    let params = AttachParams::default().container("main").stdin(stdin.is_some());
    let run = async {
        let mut attached = pods.exec(pod, argv.to_vec(), &params).await.expect("exec");
        let status = attached.take_status().expect("status future");
        if let Some(data) = stdin {
            let mut writer = attached.stdin().expect("stdin");
            writer.write_all(data).await.expect("write stdin");
            // kube-rs sends v5's close signal on shutdown (dropping the writer is not the end).
            writer.shutdown().await.expect("close stdin");
        }
        let (stdout, stderr) = tokio::join!(read_all(attached.stdout()), read_all(attached.stderr()));
        let status = status.await;
        attached.join().await.expect("the exec's task");
        Ran { stdout, stderr, status }
    };
    tokio::time::timeout(super::WAIT, run).await.expect("the exec ends in time")
}

pub fn exit_code(status: &Option<Status>) -> Option<String> {
    let status = status.as_ref()?;
    if status.status.as_deref() == Some("Success") {
        return Some("0".to_string());
    }
    let causes = status.details.as_ref()?.causes.as_ref()?;
    causes.iter().find(|c| c.reason.as_deref() == Some("ExitCode")).and_then(|c| c.message.clone())
}

/// Whether a live process runs `sleep` with this argument (zombies have no command line).
pub fn sleeping(marker: &str) -> bool {
    let wanted = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| cmdline == wanted.as_bytes()))
}

/// Polls until `done` holds, for at most [`super::WAIT`], or fails saying what it waited for.
pub async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + super::WAIT;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
