//! The host as a long-running process: one loaded component, concurrent calls over a
//! JSON-lines protocol (`sandbox-host serve` runs it on stdin and stdout). This is how a host
//! written in another language (a Paperclip plugin worker in TypeScript) uses the component.
//!
//! # Protocol (version [`PROTOCOL_VERSION`])
//!
//! Each line in is one request, a JSON object; each line out is the reply to one request.
//! Replies come in the order calls finish, not the order they were sent: match them by `id`.
//!
//! ```text
//! -> {"id": 1, "method": "acquire", "params": {"config": {..}, "run-id": "r1", "acquisition-id": "a1"}}
//! -> {"id": "x", "method": "describe"}
//! <- {"id": "x", "result": {"driver-key": "kubernetes", ..}}
//! <- {"id": 1, "result": {"provider-lease-id": "sbx-..", "backend": "sandbox", ..}}
//! <- {"id": 2, "error": {"source": "provider", "kind": "image-pull", "message": "..", "retryable": false}}
//! ```
//!
//! - `id`: a string or an integer, unique among the requests in flight (a reused one is
//!   refused with `duplicate-id`). `params`: an object, omitted when a method takes none.
//! - Methods and params mirror the WIT (kebab-case, the JSON `--json` prints):
//!   `hello` (protocol, host and contract versions, the methods, the limits a client plans
//!   with: `max-line-bytes`, `call-timeout-ms`, `exec-timeout-ms`, `max-concurrent-calls`,
//!   `max-executes-per-lease`), `describe`,
//!   `validate-config {config}`, `probe {config}`, `acquire {acquire-request}`,
//!   `resume-check {lease, config}`, `renew {lease, config, expires-at}`,
//!   `release {lease, config}` (result `null`), `destroy {lease, config}`,
//!   `execute {lease, config, request}` (an `exec-request`; result `exec-result`, whose call
//!   runs for the command's timeout on top of `call-timeout-ms`). A `config` is the
//!   JSON object or its text; a `lease` is exactly what `acquire` returned.
//! - `error.source` is `provider` (its `provider-error`, `kind` is the WIT case name and
//!   `path` the field of an `invalid-config`), `host` (`timeout`, `trap`, `memory-limit`,
//!   `input-too-large`, `instantiate`, `cancelled`, `busy`, ...) or `protocol` (`parse-error`,
//!   `invalid-request`, `invalid-params`, `unknown-method`, `duplicate-id`, `line-too-long`,
//!   `not-utf8`: nothing was called). A line whose id cannot be read is answered with
//!   `"id": null`. Each failed call is also logged once, at WARN (`call failed`, with its id,
//!   method, kind and message), for the operator: the client's reply does not reach their log.
//! - Calls run concurrently under the host's limits (each on a fresh instance, at most
//!   `max-concurrent-calls` at once, each within `call-timeout-ms`, an execute longer); at most
//!   [`ServeOptions::max_in_flight`] requests other than `execute` are taken at a time, after
//!   which the host stops reading until one finishes (back-pressure, not an error).
//! - Executes are counted apart, so a flood of long commands never stops the host from reading
//!   the next line: a run's `renew` is answered while its commands run. A lease (by its
//!   `provider-lease-id`) runs at most `max-executes-per-lease` commands at once and its
//!   others wait for one of them, so one run's flood never holds another run's commands
//!   back. At most [`EXECUTES_PER_LEASE`] times `max_in_flight` executes of one lease, and
//!   [`EXECUTES_IN_ALL`] times it of all leases, are taken at once (each holds its request in
//!   memory); one more is answered at once with the retryable host error `busy`.
//! - Shutdown: at end of input, or on the first stop signal, the host reads no more requests
//!   and lets the calls in flight finish, for up to [`ServeOptions::shutdown_grace`] (by
//!   default long enough for every call in flight to wait for its slot and run to its deadline,
//!   so every call answers). A call still running then, or when a second stop signal comes, is
//!   cancelled: its reply is a `cancelled` error saying what to do. Every request gets exactly
//!   one reply, then output ends; replies nobody reads are given up after a few seconds, so a
//!   stopped server always exits.

mod dispatch;
mod protocol;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;

pub use protocol::{ErrorSource, PROTOCOL_VERSION, Reply, RequestId, WireError};

use crate::metrics::HostMetrics;
use crate::runner::ProviderHost;
use contract::quote;

/// How the server reads and stops.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The longest request line taken; a longer one is answered `line-too-long` and skipped.
    pub max_line_bytes: usize,
    /// Requests taken at once before the server stops reading.
    pub max_in_flight: usize,
    /// How long calls in flight may go on after the stop begins before they are cancelled;
    /// `None`: as long as they can take (see [`ServeOptions::default_grace`]).
    pub shutdown_grace: Option<Duration>,
    /// Where each answered call is counted ([`crate::metrics`]); `None` keeps no metrics.
    pub metrics: Option<Arc<HostMetrics>>,
}

/// The most requests a server takes at once, whatever its options say.
const MAX_IN_FLIGHT: usize = 65_536;

/// Executes of one lease taken at once, in units of `max_in_flight`: a run's commands wait for
/// their lease's slots in the host, and their requests wait here.
pub const EXECUTES_PER_LEASE: usize = 2;

/// Executes of all leases taken at once, in units of `max_in_flight`: twice one lease's, so
/// one run's flood leaves room for another run's commands.
pub const EXECUTES_IN_ALL: usize = 2 * EXECUTES_PER_LEASE;

/// How long a reply may wait for a reader once the server is stopping.
const REPLY_GIVE_UP: Duration = Duration::from_secs(5);

impl ServeOptions {
    /// Options fitting `host`'s limits: a line holds the largest input the host passes on (with
    /// room for JSON escaping), four requests wait per call slot, and the default grace.
    pub fn for_host(host: &ProviderHost) -> Self {
        let limits = host.limits();
        let input = usize::try_from(limits.max_input_bytes).unwrap_or(usize::MAX);
        Self {
            max_line_bytes: input.saturating_mul(2).saturating_add(64 * 1024),
            max_in_flight: usize::try_from(limits.max_concurrent_calls).unwrap_or(usize::MAX).saturating_mul(4),
            shutdown_grace: None,
            metrics: None,
        }
    }

    /// The grace that lets `in_flight` calls all answer: each waits for one of the host's call
    /// slots, then runs to its deadline at most, so rounds of `max-concurrent-calls` calls take
    /// a call timeout each; and a second more.
    pub fn default_grace(host: &ProviderHost, in_flight: usize) -> Duration {
        let limits = host.limits();
        let slots = usize::try_from(limits.max_concurrent_calls).unwrap_or(usize::MAX).max(1);
        let rounds = u32::try_from(in_flight.div_ceil(slots)).unwrap_or(u32::MAX).max(1);
        limits.call_timeout().saturating_mul(rounds) + Duration::from_secs(1)
    }
}

/// Why the server stopped reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The input ended.
    EndOfInput,
    /// A stop signal came (its name).
    Signal(String),
    /// The output closed: nobody can hear replies, so calls in flight were cancelled at once.
    OutputClosed,
    /// Reading the input failed.
    InputFailed(String),
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::EndOfInput => f.write_str("end of input"),
            Self::Signal(name) => f.write_str(name),
            Self::OutputClosed => f.write_str("the output closed"),
            Self::InputFailed(e) => write!(f, "reading the input failed: {e}"),
        }
    }
}

/// What a server did, for its last log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSummary {
    /// Why it stopped reading.
    pub reason: StopReason,
    /// Requests answered in all (cancellations included).
    pub replies: u64,
    /// Calls that were in flight when the stop began and finished in the grace period.
    pub finished_after_stop: u64,
    /// Calls cancelled by the stop.
    pub cancelled: u64,
}

/// Serves requests from `input` on `host`, replies to `output`, until the input ends, the
/// output closes or `stop` delivers a signal's name (a second one cancels what is in flight).
pub async fn serve<R, W>(
    host: Arc<ProviderHost>,
    input: R,
    output: W,
    mut stop: mpsc::UnboundedReceiver<String>,
    options: ServeOptions,
) -> ServeSummary
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max_in_flight = options.max_in_flight.clamp(1, MAX_IN_FLIGHT);
    let (replies, writer_rx) = mpsc::channel::<String>(max_in_flight);
    let output_closed = CancellationToken::new();
    let writer = tokio::spawn(write_replies(output, writer_rx, output_closed.clone()));
    let mut lines = LineReader::new(input, options.max_line_bytes);
    let mut calls =
        Calls { max_line_bytes: options.max_line_bytes, max_in_flight, metrics: options.metrics, ..Calls::default() };
    let mut sent = 0u64;

    let reason = loop {
        tokio::select! {
            signal = next_signal(&mut stop) => break StopReason::Signal(signal),
            () = output_closed.cancelled() => break StopReason::OutputClosed,
            Some(done) = calls.tasks.join_next_with_id(), if !calls.tasks.is_empty() => {
                if let Some(reply) = calls.finished(done, None) {
                    sent += 1;
                    let _ = replies.send(reply.to_line()).await;
                }
            }
            line = lines.next(), if calls.others < max_in_flight => match line {
                Ok(None) => break StopReason::EndOfInput,
                Err(e) => break StopReason::InputFailed(e.to_string()),
                Ok(Some(line)) => {
                    if let Some(reply) = calls.start(&host, line, &replies) {
                        sent += 1;
                        let _ = replies.send(reply.to_line()).await;
                    }
                }
            },
        }
    };
    drop(lines);
    tracing::info!(target: "provider_host::serve", reason = %reason, in_flight = calls.tasks.len(),
        "no more requests are read; calls in flight finish");

    let mut finished_after_stop = 0;
    if reason != StopReason::OutputClosed {
        let grace = options.shutdown_grace.unwrap_or_else(|| ServeOptions::default_grace(&host, calls.tasks.len()));
        let grace = tokio::time::sleep(grace);
        tokio::pin!(grace);
        while !calls.tasks.is_empty() {
            tokio::select! {
                Some(done) = calls.tasks.join_next_with_id() => {
                    if let Some(reply) = calls.finished(done, None) {
                        sent += 1;
                        let _ = replies.send(reply.to_line()).await;
                    }
                    finished_after_stop += 1;
                }
                () = &mut grace => break,
                second = next_signal(&mut stop) => {
                    tracing::warn!(target: "provider_host::serve", signal = %second, "second stop signal: cancelling calls in flight");
                    break;
                }
                () = output_closed.cancelled() => break,
            }
        }
    }
    calls.tasks.abort_all();
    let mut cancelled = 0;
    while let Some(done) = calls.tasks.join_next_with_id().await {
        let was_cancelled = done.as_ref().is_err_and(tokio::task::JoinError::is_cancelled);
        match calls.finished(done, Some(&reason)) {
            None => finished_after_stop += 1,
            Some(reply) => {
                if was_cancelled {
                    cancelled += 1;
                } else {
                    sent += 1;
                }
                let _ = tokio::time::timeout(REPLY_GIVE_UP, replies.send(reply.to_line())).await;
            }
        }
    }
    drop(replies);
    // A client that keeps its end open but reads no more must not keep the server alive.
    let mut writer = writer;
    if tokio::time::timeout(REPLY_GIVE_UP, &mut writer).await.is_err() {
        writer.abort();
    }
    ServeSummary { reason, replies: sent + calls.replied + cancelled, finished_after_stop, cancelled }
}

/// The calls in flight: their tasks, and the id and method of each, so a cancelled one is
/// still answered and an id is not reused while its call runs. A call frees its id before its
/// reply is written: a client that reuses an id once it has the reply is never refused.
/// Executes are counted by lease, the other calls together (`others`, which stops the reading).
#[derive(Default)]
struct Calls {
    max_line_bytes: usize,
    max_in_flight: usize,
    tasks: JoinSet<()>,
    running: HashMap<tokio::task::Id, Running>,
    ids: Arc<Mutex<HashSet<RequestId>>>,
    replied: u64,
    /// Calls in flight other than executes.
    others: usize,
    /// Executes in flight by the `provider-lease-id` they name.
    executes: HashMap<String, usize>,
    /// Executes in flight in all.
    all_executes: usize,
    /// Where each answered call is counted.
    metrics: Option<Arc<HostMetrics>>,
}

/// A call in flight: its id and method, and the lease of an execute.
struct Running {
    id: RequestId,
    method: String,
    lease: Option<String>,
}

impl Calls {
    /// Starts the call a line asks for; the reply to send at once when it starts none.
    fn start(&mut self, host: &Arc<ProviderHost>, line: Line, replies: &mpsc::Sender<String>) -> Option<Reply> {
        let text = match line {
            Line::Text(text) => text,
            Line::TooLong(limit) => {
                return Some(Reply::error(
                    None,
                    WireError::protocol(
                        "line-too-long",
                        format!(
                            "a request line is longer than {limit} bytes and was skipped; send smaller configs and leases"
                        ),
                    ),
                ));
            }
            Line::NotUtf8 => {
                return Some(Reply::error(
                    None,
                    WireError::protocol("not-utf8", "a request line is not UTF-8 and was skipped"),
                ));
            }
        };
        if text.trim().is_empty() {
            return None;
        }
        let request = match protocol::parse_request(&text) {
            Ok(r) => r,
            Err(reply) => return Some(*reply),
        };
        if let Some(error) = dispatch::refuse_unknown(&request.method) {
            return Some(Reply::error(Some(request.id), error));
        }
        let lease = (request.method == "execute").then(|| execute_lease(&request.params));
        if let Some(lease) = &lease
            && let Some(error) = self.refuse_execute(lease)
        {
            return Some(Reply::error(Some(request.id), error));
        }
        if !lock(&self.ids).insert(request.id.clone()) {
            let error = WireError::protocol(
                "duplicate-id",
                format!("request {} is still in flight; give each request in flight its own id", request.id),
            );
            return Some(Reply::error(Some(request.id), error));
        }
        let (host, replies, ids, max_line_bytes) =
            (Arc::clone(host), replies.clone(), Arc::clone(&self.ids), self.max_line_bytes);
        let metrics = self.metrics.clone();
        let (id, method) = (request.id.clone(), request.method.clone());
        tracing::debug!(target: "provider_host::serve", id = %id, method = %method, "request");
        let task = self.tasks.spawn(async move {
            let started = std::time::Instant::now();
            let lease_id =
                metrics.as_ref().and(request.params["lease"]["provider-lease-id"].as_str()).map(str::to_string);
            let result = dispatch::run(&host, &request.method, request.params, max_line_bytes).await;
            if let Some(metrics) = &metrics {
                let outcome = result.as_ref().map_or_else(|e| e.kind.as_str(), |_| "ok");
                let seconds = started.elapsed().as_secs_f64();
                metrics.call(&request.method, outcome, seconds, result.as_ref().ok(), lease_id.as_deref());
            }
            let reply = match result {
                Ok(value) => Reply::result(request.id.clone(), value),
                Err(error) => {
                    // The operator's record of what failed: the client gets the reply, the
                    // provider logs its own steps, and neither reaches the operator's log.
                    tracing::warn!(target: "provider_host::serve", id = %request.id, method = %request.method,
                        kind = %error.kind, retryable = error.retryable, "call failed: {}", error.message);
                    Reply::error(Some(request.id.clone()), error)
                }
            };
            lock(&ids).remove(&request.id);
            let _ = replies.send(reply.to_line()).await;
        });
        match &lease {
            Some(lease) => {
                *self.executes.entry(lease.clone()).or_default() += 1;
                self.all_executes += 1;
            }
            None => self.others += 1,
        }
        self.running.insert(task.id(), Running { id, method, lease });
        None
    }

    /// The `busy` answer to an execute over the executes taken at once (see the module docs).
    fn refuse_execute(&self, lease: &str) -> Option<WireError> {
        let per_lease = self.max_in_flight.saturating_mul(EXECUTES_PER_LEASE);
        let in_all = self.max_in_flight.saturating_mul(EXECUTES_IN_ALL);
        let of_lease = self.executes.get(lease).copied().unwrap_or(0);
        let message = if of_lease >= per_lease {
            format!(
                "execute was not taken: lease {} already has {of_lease} commands in flight, the most one lease may \
                 have queued; send it again once one of them has answered",
                quote(lease)
            )
        } else if self.all_executes >= in_all {
            format!(
                "execute was not taken: {} commands are in flight, the most this host queues; send it again once \
                 one of them has answered",
                self.all_executes
            )
        } else {
            return None;
        };
        Some(WireError::busy(message))
    }

    /// Forgets a call's share of what is in flight.
    fn release(&mut self, running: &Running) {
        match &running.lease {
            Some(lease) => {
                self.all_executes = self.all_executes.saturating_sub(1);
                if let Some(n) = self.executes.get_mut(lease) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.executes.remove(lease);
                    }
                }
            }
            None => self.others = self.others.saturating_sub(1),
        }
    }

    /// Forgets a call that ended; the reply to send for one that ended without answering (a
    /// panic, which only a host bug causes, or a cancellation, with `cancelled_by`).
    fn finished(
        &mut self,
        done: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
        cancelled_by: Option<&StopReason>,
    ) -> Option<Reply> {
        match done {
            Ok((task, ())) => {
                if let Some(running) = self.running.remove(&task) {
                    self.release(&running);
                }
                self.replied += 1;
                None
            }
            Err(e) => {
                let running = self.running.remove(&e.id())?;
                self.release(&running);
                let Running { id, method, .. } = running;
                lock(&self.ids).remove(&id);
                let error = match cancelled_by {
                    Some(reason) if e.is_cancelled() => WireError::cancelled(&method, &reason.to_string()),
                    _ => {
                        tracing::error!(target: "provider_host::serve", id = %id, method = %method, error = %e,
                            "a call failed in the host");
                        WireError::host_bug(&method)
                    }
                };
                Some(Reply::error(Some(id), error))
            }
        }
    }
}

/// The lease an execute's params name (its `provider-lease-id`), by which its commands are
/// counted; params without one are counted together (dispatch refuses them anyway).
fn execute_lease(params: &serde_json::Value) -> String {
    params.pointer("/lease/provider-lease-id").and_then(serde_json::Value::as_str).unwrap_or_default().to_string()
}

/// The set of ids in flight; a poisoned lock still holds a usable set (inserts and removes
/// cannot leave it half-changed).
fn lock(ids: &Mutex<HashSet<RequestId>>) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
    ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The next stop signal's name; never, once no signal can come.
async fn next_signal(stop: &mut mpsc::UnboundedReceiver<String>) -> String {
    match stop.recv().await {
        Some(name) => name,
        None => std::future::pending().await,
    }
}

/// Writes each reply as one line and flushes it; on a write error, says the output closed.
async fn write_replies<W: AsyncWrite + Unpin>(
    mut output: W,
    mut lines: mpsc::Receiver<String>,
    closed: CancellationToken,
) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
            closed.cancel();
            return;
        }
    }
    let _ = output.shutdown().await;
}

/// One input line as read.
enum Line {
    Text(String),
    /// Longer than the limit (in bytes); skipped up to its newline.
    TooLong(usize),
    NotUtf8,
}

/// Reads bounded lines, cancel-safely (a `select!` may drop [`LineReader::next`] at any await:
/// bytes read are kept in the buffer). [`LinesCodec`] skips the rest of an over-long line.
struct LineReader<R> {
    input: R,
    buffer: BytesMut,
    codec: LinesCodec,
    limit: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(input: R, limit: usize) -> Self {
        Self { input, buffer: BytesMut::with_capacity(64 * 1024), codec: LinesCodec::new_with_max_length(limit), limit }
    }

    /// The next line; `None` at end of input.
    async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            if let Some(line) = self.decoded(false)? {
                return Ok(Some(line));
            }
            if self.input.read_buf(&mut self.buffer).await? == 0 {
                return self.decoded(true);
            }
        }
    }

    fn decoded(&mut self, at_end: bool) -> std::io::Result<Option<Line>> {
        let decoded =
            if at_end { self.codec.decode_eof(&mut self.buffer) } else { self.codec.decode(&mut self.buffer) };
        match decoded {
            Ok(line) => Ok(line.map(Line::Text)),
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong(self.limit))),
            Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => Ok(Some(Line::NotUtf8)),
            Err(LinesCodecError::Io(e)) => Err(e),
        }
    }
}
