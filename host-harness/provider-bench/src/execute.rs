//! Execute: a command in a lease's sandbox through the whole product (the component's
//! `execute`, the host's proof, the provider's wrapper script, the exec stream) beside the
//! same command through kube-rs's `Api::exec` with no provider and no host (what `kubectl
//! exec` costs on this cluster: the floor), in one run, for the overhead over the floor.
//!
//! Where the time goes is read off three more measurements of the same command, each adding
//! one layer to the floor: the provider's wrapper script sent through kube-rs (wrapper), then
//! through the host's `kube.exec` (the host's proof and binding read), then through the
//! component (the provider: instantiate, its own reads, JSON, redaction). Each layer's share is
//! the difference of two medians, so the shares are estimates that add up to the medians.
//!
//! The requests of one execute come from the embedded cluster's request log, for each command
//! and for one command on a lease without secret env and on a claim lease (a warm pool's); the
//! parallel row runs several commands of one lease at once against one alone.

use std::time::{Duration, Instant};

use embedded_cluster::PROVIDER_USER;
use embedded_cluster::request_log::{Entry, RequestKind, RequestLog};
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use provider::exec_wrapper::{self, Invocation};
use provider_host::bindings::kube::ExecOptions;
use provider_host::records::{AcquireRequest, ExecRequest, LeaseRef};
use provider_host::{KubeHost, Limits, ProviderHost};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

use crate::stats::{Samples, fmt_duration};
use crate::table::Table;
use crate::{warm_pool, world};

/// The overhead over the floor the product is held to.
const OVERHEAD_TARGET: Duration = Duration::from_millis(10);
/// The most requests one execute should make: the read that binds the exec to its pod, and
/// the exec.
const READS_TARGET: usize = 1;
/// Commands of one lease run at once in the parallel row: the host's default limit per lease.
const PARALLEL: usize = 4;
/// How long each command of the parallel row sleeps.
const PARALLEL_SLEEP: &str = "0.5";

/// One measured command: what the provider is asked to run, and the same through a plain exec.
struct Case {
    name: &'static str,
    command: &'static str,
    args: Vec<String>,
    stdin: Option<String>,
    /// The floor's argv: the command itself, reading exactly the stdin it is given.
    floor: Vec<String>,
}

fn cases() -> Vec<Case> {
    const MIB: usize = 1024 * 1024;
    let kib = "k".repeat(1024);
    vec![
        Case { name: "`true`", command: "true", args: vec![], stdin: None, floor: vec!["true".into()] },
        Case {
            name: "`echo` of 1 KiB",
            command: "echo",
            args: vec![kib.clone()],
            stdin: None,
            floor: vec!["echo".into(), kib],
        },
        Case {
            name: "1 MiB of output",
            command: "head",
            args: vec!["-c".into(), MIB.to_string(), "/dev/zero".into()],
            stdin: None,
            floor: vec!["head".into(), "-c".into(), MIB.to_string(), "/dev/zero".into()],
        },
        Case {
            name: "1 MiB of stdin",
            command: "wc",
            args: vec!["-c".into()],
            stdin: Some("s".repeat(MIB)),
            // kube-rs cannot close stdin alone on every protocol version, so the floor's
            // command reads exactly the bytes it is sent, as the wrapper does.
            floor: vec!["sh".into(), "-c".into(), format!("head -c {MIB} | wc -c")],
        },
    ]
}

/// What one run of a command took, through each layer.
#[derive(Default)]
struct Layers {
    floor: Vec<Duration>,
    wrapper: Vec<Duration>,
    host: Vec<Duration>,
    execute: Vec<Duration>,
}

/// The execute table: one row per case, the requests of each, and the parallel row.
pub fn measure(runtime: &Runtime, rounds: usize) -> anyhow::Result<Table> {
    runtime.block_on(async {
        let cluster = world::cluster(1, Duration::ZERO).await?;
        let limits = Limits::default();
        let host = world::load(&cluster, &world::provider_component()?, limits.clone()).await?;
        let kube = world::kube_host(&cluster, &host, &limits).await?;
        let config = world::config("sandbox");
        let lease = host.acquire(world::request(&config, "execute-bench")).await?;
        let pod = lease.pod_name.clone().ok_or_else(|| anyhow::anyhow!("the acquired lease names no pod"))?;
        let lease_ref = world::lease_ref(&lease, &config);
        let pods: Api<Pod> = Api::namespaced(world::host_client(&cluster).await?, world::NAMESPACE);
        let log = cluster.requests();

        let mut table = Table::new(
            "Execute: a command in a lease's sandbox, against kube-rs's exec on the same cluster",
            &[
                "command",
                "floor p50",
                "execute p50",
                "overhead p50",
                "execute p99",
                "requests per execute",
                "host proof",
                "provider",
                "wrapper",
                "stream",
            ],
        );
        let mut missed = Vec::new();
        for case in cases() {
            let mut layers = Layers::default();
            // One round of each first: the host's caches and the pod's page cache warm.
            for round in 0..=rounds {
                let floor = timed(plain_exec(&pods, &pod, case.floor.clone(), case.stdin.as_deref())).await?;
                let wrapper = timed(plain_exec(&pods, &pod, exec_wrapper::argv(), Some(&wrapper_stdin(&case)))).await?;
                let through_host = timed(host_exec(&kube, &pod, &case)).await?;
                let execute = timed(run(&host, &lease_ref, &case)).await?;
                if round > 0 {
                    layers.floor.push(floor);
                    layers.wrapper.push(wrapper);
                    layers.host.push(through_host);
                    layers.execute.push(execute);
                }
            }
            let mark = log.mark();
            run(&host, &lease_ref, &case).await?;
            let requests = Requests::of(&log.since(mark));
            let [floor, wrapper, through_host, execute] =
                [layers.floor, layers.wrapper, layers.host, layers.execute].map(Samples::new);
            let overhead = execute.p50().saturating_sub(floor.p50());
            if overhead >= OVERHEAD_TARGET {
                missed.push(format!("{}: overhead {}", case.name, fmt_duration(overhead)));
            }
            if requests.reads > READS_TARGET || requests.execs != 1 {
                missed.push(format!("{}: {}", case.name, requests.summary()));
            }
            table.row([
                case.name.to_string(),
                fmt_duration(floor.p50()),
                fmt_duration(execute.p50()),
                fmt_duration(overhead),
                fmt_duration(execute.p99()),
                requests.summary(),
                fmt_duration(through_host.p50().saturating_sub(wrapper.p50())),
                fmt_duration(execute.p50().saturating_sub(through_host.p50())),
                fmt_duration(wrapper.p50().saturating_sub(floor.p50())),
                fmt_duration(floor.p50()),
            ]);
        }
        let (alone, together) = parallel(&host, &lease_ref).await?;
        host.destroy(lease_ref).await?;
        let plain = without_secret_env(&host, &config, log).await?;
        if plain.reads > READS_TARGET || plain.execs != 1 {
            missed.push(format!("a lease without secret env: {}", plain.summary()));
        }
        warm_pool::set_pool(&cluster.client().await?, warm_pool::POOL, 1).await?;
        let claim = warm_pool::claim_config(warm_pool::POOL);
        let claimed = one_execute(&host, &claim, world::request(&claim, "execute-bench-claim"), log).await?;
        if claimed.reads > READS_TARGET || claimed.execs != 1 {
            missed.push(format!("a claim lease: {}", claimed.summary()));
        }

        table.note(format!(
            "{rounds} rounds per command, after one to warm up, on a Sandbox lease with a secret env var; the cluster \
             runs each command as a local process (no container runtime), so the floor is the API server's exec \
             path and the process itself. Floor: `Api::<Pod>::exec` of the command (what `kubectl exec` does), no \
             provider and no host. Overhead: execute's p50 minus the floor's."
        ));
        table.note(
            "Where execute's time goes, as differences of medians: stream = the floor; wrapper = the provider's \
             wrapper script (its header on stdin, its watchdog, its end line) through the same plain exec, minus \
             the floor; host proof = the wrapper through the host's `kube.exec` (policy, the pod's proof, which \
             the host's watch of the namespace's pods keeps current after the first exec, and the binding read \
             once the stream is open), minus the plain wrapper; provider = the \
             component's `execute` (a fresh instance, its reads, the request and output through JSON, redaction), \
             minus the host's exec.",
        );
        table.note(format!(
            "Requests: the provider identity's requests of one execute after the rounds (reads are gets and lists; \
             exec is the pods/exec upgrade; the host's watch of the namespace's pods, opened once by the first \
             exec, is no request of an execute). Parallel: {PARALLEL} executes of `sleep {PARALLEL_SLEEP}` on one lease \
             at once took {} against {} for one alone ({:.2}x; 1.00x is no serialising).",
            fmt_duration(together),
            fmt_duration(alone),
            together.as_secs_f64() / alone.as_secs_f64().max(1e-9)
        ));
        table.note(format!(
            "A lease without secret env has no Secret, so its executes read none (the values redacted from the \
             output are the Secret's and the command's own secret env): one execute of `true` on such a lease, \
             after one to warm up, made {}.",
            plain.summary()
        ));
        table.note(format!(
            "A claim lease (a warm pool's Sandbox, whose pod is the pool's template: its env is all in the lease's \
             Secret, and its container is the one acquire picked and recorded): one execute of `true`, after one to \
             warm up, made {}.",
            claimed.summary()
        ));
        table.note(
            "Why a lease with secret values reads its Secret on every execute: the host keeps no copy of a Secret, as \
             nothing would prove a kept copy current. A retried acquire brings the values up to date in the same \
             Secret (a merge patch), another host process may do it, and the host may not watch Secrets (list and \
             watch of Secrets would show it every value in the namespace), so the read is the only proof of the \
             values a command's output is scrubbed of.",
        );
        table.note(format!(
            "Targets: overhead over the floor < {} p50, at most {READS_TARGET} read and 1 exec per execute: {}.",
            fmt_duration(OVERHEAD_TARGET),
            if missed.is_empty() { "met".to_string() } else { format!("missed ({})", missed.join("; ")) }
        ));
        Ok(table)
    })
}

/// The requests of one execute of `true` on a lease acquired without secret env, after one to
/// warm up (its pod proved by the host).
async fn without_secret_env(host: &ProviderHost, config: &str, log: &RequestLog) -> anyhow::Result<Requests> {
    let mut request = world::request(config, "execute-bench-plain");
    request.env.retain(|var| !var.secret);
    one_execute(host, config, request, log).await
}

/// The requests of one execute of `true` on a lease acquired by `request`, after one to warm up
/// (its pod proved by the host); the lease is destroyed after.
async fn one_execute(
    host: &ProviderHost,
    config: &str,
    request: AcquireRequest,
    log: &RequestLog,
) -> anyhow::Result<Requests> {
    let lease = host.acquire(request).await?;
    let lease_ref = world::lease_ref(&lease, config);
    let truth = Case { name: "`true`", command: "true", args: vec![], stdin: None, floor: Vec::new() };
    run(host, &lease_ref, &truth).await?;
    let mark = log.mark();
    run(host, &lease_ref, &truth).await?;
    let requests = Requests::of(&log.since(mark));
    host.destroy(lease_ref).await?;
    Ok(requests)
}

async fn timed<T>(work: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<Duration> {
    let started = Instant::now();
    work.await?;
    Ok(started.elapsed())
}

/// The stdin the provider's wrapper gets for `case`, with no env and a generous timeout.
fn wrapper_stdin(case: &Case) -> String {
    let invocation = Invocation {
        command: case.command,
        args: &case.args,
        cwd: None,
        env: Vec::new(),
        timeout: Duration::from_secs(60),
        end_marker: &exec_wrapper::end_marker(7),
    };
    String::from_utf8_lossy(&exec_wrapper::stdin(&invocation, case.stdin.as_deref())).into_owned()
}

fn request(case: &Case) -> ExecRequest {
    ExecRequest {
        command: case.command.to_string(),
        args: case.args.clone(),
        cwd: None,
        env: Vec::new(),
        stdin: case.stdin.clone(),
        timeout_ms: Some(60_000),
    }
}

/// The case through the component.
async fn run(host: &ProviderHost, lease: &LeaseRef, case: &Case) -> anyhow::Result<()> {
    let result = host.execute(lease.clone(), request(case)).await?;
    anyhow::ensure!(result.exit_code == Some(0), "{} exited with {:?}: {}", case.name, result.exit_code, result.stderr);
    Ok(())
}

/// The case's wrapper through the host's `kube.exec`, as the provider would send it.
async fn host_exec(kube: &KubeHost, pod: &str, case: &Case) -> anyhow::Result<()> {
    let options = ExecOptions {
        container: Some(provider::naming::CONTAINER_NAME.to_string()),
        command: exec_wrapper::argv(),
        stdin: Some(wrapper_stdin(case).into_bytes()),
        timeout_ms: 60_000,
        max_output_bytes: provider::execute::OUTPUT_CAP,
    };
    let call = kube.for_call(Instant::now() + Duration::from_secs(60));
    let output = call.exec(world::NAMESPACE, pod, options).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    anyhow::ensure!(!output.timed_out, "{} timed out through the host", case.name);
    Ok(())
}

/// The floor's buffers between the WebSocket and its pipes: kube-rs's default (1 KiB) splits
/// even a short stdin into messages that wait on TCP acknowledgements, which `kubectl` never
/// does, so the floor would not be the cluster's.
const FLOOR_BUFFER: usize = 64 * 1024;

/// `argv` through kube-rs alone, its output read to the end and its status taken.
async fn plain_exec(pods: &Api<Pod>, pod: &str, argv: Vec<String>, stdin: Option<&str>) -> anyhow::Result<()> {
    let params = AttachParams::default()
        .container(provider::naming::CONTAINER_NAME)
        .stdin(stdin.is_some())
        .stdout(true)
        .stderr(true)
        .max_stdin_buf_size(FLOOR_BUFFER)
        .max_stdout_buf_size(FLOOR_BUFFER)
        .max_stderr_buf_size(FLOOR_BUFFER);
    let mut process = pods.exec(pod, argv, &params).await?;
    let (out, err) = (process.stdout(), process.stderr());
    let mut input = process.stdin();
    let status = process.take_status();
    let write = async {
        if let (Some(pipe), Some(text)) = (input.as_mut(), stdin) {
            pipe.write_all(text.as_bytes()).await?;
            pipe.flush().await?;
        }
        anyhow::Ok(())
    };
    let (written, _, _) = tokio::join!(write, drain(out), drain(err));
    written?;
    let status = match status {
        Some(status) => status.await,
        None => None,
    };
    drop(input);
    process.abort();
    anyhow::ensure!(
        status.as_ref().and_then(|s| s.status.as_deref()) == Some("Success"),
        "the plain exec failed: {status:?}"
    );
    Ok(())
}

async fn drain(stream: Option<impl AsyncRead + Unpin>) {
    if let Some(mut stream) = stream {
        let mut buf = vec![0u8; 64 * 1024];
        while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
    }
}

/// One execute's requests by the provider's identity.
struct Requests {
    reads: usize,
    execs: usize,
    detail: String,
}

impl Requests {
    fn of(entries: &[Entry]) -> Self {
        let mine: Vec<&Entry> =
            entries.iter().filter(|e| e.user == PROVIDER_USER && e.kind == RequestKind::Resource).collect();
        let execs = mine.iter().filter(|e| e.subresource == "exec").count();
        let reads = mine.iter().filter(|e| e.subresource != "exec" && !e.is_write() && e.verb != "watch").count();
        let counts = RequestLog::counts(entries, Some(PROVIDER_USER));
        let detail = counts
            .iter()
            .map(|(what, n)| if *n == 1 { what.clone() } else { format!("{what} x{n}") })
            .collect::<Vec<_>>()
            .join(", ");
        Self { reads, execs, detail }
    }

    fn summary(&self) -> String {
        let reads = if self.reads == 1 { "read" } else { "reads" };
        format!("{} {reads}, {} exec ({})", self.reads, self.execs, self.detail)
    }
}

/// One `sleep` alone, then [`PARALLEL`] of them at once on the same lease: wall times.
async fn parallel(host: &ProviderHost, lease: &LeaseRef) -> anyhow::Result<(Duration, Duration)> {
    let sleep =
        Case { name: "sleep", command: "sleep", args: vec![PARALLEL_SLEEP.into()], stdin: None, floor: Vec::new() };
    let alone = timed(run(host, lease, &sleep)).await?;
    let started = Instant::now();
    for outcome in join_all((0..PARALLEL).map(|_| run(host, lease, &sleep))).await {
        outcome?;
    }
    Ok((alone, started.elapsed()))
}
