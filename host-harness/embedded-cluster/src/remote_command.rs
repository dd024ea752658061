//! Kubernetes' remote-command protocol over a WebSocket, the server side, as kube-apiserver's
//! stream translator (`v5.channel.k8s.io`) and the kubelet's streaming server
//! (`v4.channel.k8s.io`, `v4.base64.channel.k8s.io`) speak it: `k8s.io/apimachinery`'s
//! `util/httpstream/wsstream/conn.go`, `k8s.io/apiserver`'s `util/proxy/websocket.go` and
//! `streamtranslator.go`, and the kubelet's `cri/streaming/remotecommand/websocket.go`.
//!
//! * Every message carries one channel: 0 stdin, 1 stdout, 2 stderr, 3 error (the final
//!   status), 4 resize. Binary protocols put the channel in the first byte; the base64 one puts
//!   the digit `'0' + channel` first and base64-encodes the rest (as text frames). Frames of
//!   either WebSocket type are read, as `x/net/websocket` reads them; frames for a channel the
//!   session did not open, or past channel 4, are dropped.
//! * The server first sends an empty message on the lowest writable channel (stdout, else
//!   stderr, else error) to tell the client the connection is up.
//! * v5 adds channel 255: the client's `[255, n]` closes stream `n` (so `[255, 0]` is the end of
//!   stdin). A close message of another length, or for a channel past 4, ends the session, as
//!   upstream's read loop breaks on it. v4 has no such signal: the client's only way to end
//!   stdin is to close the connection, which ends the exec.
//! * A resize message (`{"Width":W,"Height":H}`, client-go's `TerminalSize`) sets the size of
//!   a TTY exec's terminal; without a terminal, or malformed, it is dropped.
//! * The exec ends when its process has exited and its output is read, as the kubelet's
//!   runtime ends it (`controllers/kubelet/exec.rs` says when that is, with a TTY and without,
//!   and what is killed when the client goes or the cluster's time limit comes first).
//! * When the command has ended and its output is sent, the server sends the `metav1.Status` on
//!   channel 3 and a WebSocket close (1000), then waits briefly for the client's close.
//!
//! The final status is what a client reads the exit code from (client-go's `errorDecoderV4`,
//! kube-rs's `AttachedProcess::take_status`): `{"metadata":{},"status":"Success"}` for 0, and
//! for anything else `Failure`, reason `NonZeroExitCode`, one cause of type `ExitCode` whose
//! message is the code, and the message each upstream path words:
//! * v5 (kube-apiserver translates to SPDY toward the kubelet and re-wraps the exit it got):
//!   `command terminated with non-zero exit code: command terminated with exit code N`;
//! * v4 (proxied to the kubelet, which wraps containerd's error):
//!   `command terminated with non-zero exit code: error executing command [ARGV], exit code N`.
//!
//! A process killed by a signal exits with 128 + the signal, as the container runtime reports
//! it (SIGKILL: 137).

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::controllers::kubelet::exec::{ExecHost, ExecSpec, StartError};

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
/// Channels 0 to 4 exist.
const CHANNELS: u8 = 5;
/// v5's stream-close signal.
const CLOSE: u8 = 255;

/// How much of the client's stdin is held while the process does not read it, before the
/// session stops reading the connection (the client then waits on TCP).
const MAX_PENDING_STDIN: usize = 1024 * 1024;
/// One read of the process's output, sent as one message.
const READ_CHUNK: usize = 32 * 1024;
/// How long the server waits for the client's close after its own.
const CLOSE_WAIT: Duration = Duration::from_secs(10);
/// How much of the command a v4 status shows.
const SHOWN_COMMAND_CHARS: usize = 256;
/// After a TTY exec's process exited, how long its terminal is still read, unless it closes
/// first: long enough for what the process wrote last (a terminal buffers little, so a writer
/// cannot exit far ahead of its reader), and no longer, so that a background process still
/// holding the terminal does not keep the exec open (containerd closes the console when the
/// exec's process exits).
const TTY_DRAIN: Duration = Duration::from_millis(250);

/// A subprotocol of the remote-command WebSocket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `v5.channel.k8s.io`: v4 plus the client's stream-close signal.
    V5,
    /// `v4.channel.k8s.io`: binary channels, a `metav1.Status` on the error channel.
    V4,
    /// `v4.base64.channel.k8s.io`: v4 as text, each message's data base64-encoded.
    V4Base64,
}

impl Protocol {
    /// Every subprotocol served, as the refusal names them.
    pub const SERVED: [Protocol; 3] = [Protocol::V5, Protocol::V4, Protocol::V4Base64];

    /// The `Sec-WebSocket-Protocol` token.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::V5 => "v5.channel.k8s.io",
            Protocol::V4 => "v4.channel.k8s.io",
            Protocol::V4Base64 => "v4.base64.channel.k8s.io",
        }
    }

    /// The subprotocol for the client's offer: v5 whenever offered (kube-apiserver then
    /// handles the request itself), else the first the client lists that the kubelet would take.
    pub fn negotiate<'a>(offered: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let offered: Vec<&str> = offered.into_iter().map(str::trim).collect();
        if offered.contains(&Protocol::V5.name()) {
            return Some(Protocol::V5);
        }
        offered.iter().find_map(|o| [Protocol::V4, Protocol::V4Base64].into_iter().find(|p| p.name() == *o))
    }

    fn base64(self) -> bool {
        self == Protocol::V4Base64
    }

    /// One message on `channel`.
    fn encode(self, channel: u8, data: &[u8]) -> Message {
        if self.base64() {
            let mut text = String::with_capacity(1 + data.len().div_ceil(3) * 4);
            text.push(char::from(b'0' + channel));
            base64::engine::general_purpose::STANDARD.encode_string(data, &mut text);
            Message::text(text)
        } else {
            let mut frame = Vec::with_capacity(data.len() + 1);
            frame.push(channel);
            frame.extend_from_slice(data);
            Message::binary(frame)
        }
    }

    /// What a client's message means.
    fn decode(self, message: Message) -> Inbound {
        let bytes = match message {
            Message::Binary(b) => b,
            Message::Text(t) => Bytes::from(t),
            Message::Close(_) => return Inbound::Gone,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => return Inbound::Ignore,
        };
        let Some(&first) = bytes.first() else { return Inbound::Ignore };
        if self == Protocol::V5 && first == CLOSE {
            return match bytes.get(1) {
                Some(&channel) if bytes.len() == 2 && channel < CHANNELS => Inbound::CloseStream(channel),
                _ => Inbound::ProtocolError,
            };
        }
        let channel = if self.base64() { first.wrapping_sub(b'0') } else { first };
        if channel >= CHANNELS {
            return Inbound::Ignore;
        }
        let data = bytes.slice(1..);
        if !self.base64() {
            return Inbound::Data { channel, data };
        }
        match base64::engine::general_purpose::STANDARD.decode(&data) {
            Ok(decoded) => Inbound::Data { channel, data: Bytes::from(decoded) },
            Err(_) => Inbound::Ignore,
        }
    }
}

/// A client's message, decoded.
#[derive(Debug, PartialEq, Eq)]
enum Inbound {
    Data {
        channel: u8,
        data: Bytes,
    },
    /// v5: the client closed one of its streams.
    CloseStream(u8),
    Ignore,
    /// The client closed the connection.
    Gone,
    /// A malformed close signal: upstream ends the session.
    ProtocolError,
}

/// How an exec ended, for its final status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The process exited with this code (128 + signal when killed).
    Exited(i32),
    /// The cluster's limit per exec ran out and the process was killed.
    TimedOut(Duration),
    /// The process could not be started.
    NotStarted(String),
}

/// `metav1.Status` as Go marshals it: field order and omitted empty fields included.
#[derive(Serialize)]
struct StatusDoc {
    metadata: Empty,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<u16>,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct Details {
    causes: Vec<Cause>,
}

#[derive(Serialize)]
struct Cause {
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    message: String,
}

/// The final status of an exec, as the JSON sent on channel 3.
pub fn final_status(protocol: Protocol, outcome: &Outcome, argv: &[String]) -> String {
    let failure = |message: String, reason, details, code| StatusDoc {
        metadata: Empty {},
        status: "Failure",
        message: Some(message),
        reason: Some(reason),
        details,
        code,
    };
    let doc = match outcome {
        Outcome::Exited(0) => {
            StatusDoc { metadata: Empty {}, status: "Success", message: None, reason: None, details: None, code: None }
        }
        Outcome::Exited(code) => {
            let inner = match protocol {
                Protocol::V5 => format!("command terminated with exit code {code}"),
                Protocol::V4 | Protocol::V4Base64 => {
                    format!("error executing command [{}], exit code {code}", shown_command(argv))
                }
            };
            let cause = Cause { reason: Some("ExitCode"), message: code.to_string() };
            let details = Some(Details { causes: vec![cause] });
            failure(format!("command terminated with non-zero exit code: {inner}"), "NonZeroExitCode", details, None)
        }
        Outcome::TimedOut(limit) => failure(
            format!(
                "the command ran for the embedded cluster's limit per exec ({}s) and was killed; \
                 split the work into shorter execs or raise ClusterConfig::exec_timeout",
                limit.as_secs()
            ),
            "Timeout",
            None,
            Some(504),
        ),
        Outcome::NotStarted(why) => {
            let error = format!("error executing command in container: failed to exec in container: {why}");
            let details = Some(Details { causes: vec![Cause { reason: None, message: error.clone() }] });
            failure(format!("Internal error occurred: {error}"), "InternalError", details, Some(500))
        }
    };
    serde_json::to_string(&doc).unwrap_or_default()
}

/// argv as Go's `%v` prints a `[]string` (space-separated), cut when long.
fn shown_command(argv: &[String]) -> String {
    let joined = argv.join(" ");
    match joined.char_indices().nth(SHOWN_COMMAND_CHARS) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

/// A resize message: client-go's `TerminalSize`.
#[derive(Deserialize)]
struct TerminalSize {
    #[serde(rename = "Width", alias = "width")]
    width: u16,
    #[serde(rename = "Height", alias = "height")]
    height: u16,
}

/// The exit code a container runtime reports for a status.
fn exit_code(status: ExitStatus) -> i32 {
    status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(128)
}

/// Reads from an optional pipe; never ready once it is gone.
async fn read_some(pipe: &mut Option<impl AsyncRead + Unpin>, buf: &mut [u8]) -> std::io::Result<usize> {
    match pipe {
        Some(p) => p.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Writes the oldest pending stdin bytes; never ready when there is nothing to write.
async fn write_some(pipe: &mut Option<impl AsyncWrite + Unpin>, pending: &VecDeque<Bytes>) -> std::io::Result<usize> {
    match (pipe, pending.front()) {
        (Some(p), Some(front)) => p.write(front).await,
        _ => std::future::pending().await,
    }
}

/// Sleeps until `deadline`; forever without one.
async fn sleep_until_if_set(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Runs one exec over an established WebSocket until the command ends or the client goes.
/// Ended before the command exited, the exec takes its whole session with it; after, what the
/// command left running stays with the pod.
pub async fn serve<S>(mut ws: WebSocketStream<S>, protocol: Protocol, host: Arc<ExecHost>, spec: ExecSpec)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let first = if spec.stdout {
        STDOUT
    } else if spec.stderr {
        STDERR
    } else {
        ERROR
    };
    if ws.send(protocol.encode(first, &[])).await.is_err() {
        return;
    }
    let argv = spec.argv.clone();
    let tty = spec.tty;
    let forward_stdout = spec.stdout;
    let mut process = match host.start(spec) {
        Ok(p) => p,
        Err(StartError::Stopped) => return,
        Err(e) => return finish(ws, protocol, &Outcome::NotStarted(e.to_string()), &argv).await,
    };
    let mut stdin = process.stdin.take();
    let mut stdout = process.stdout.take();
    let mut stderr = process.stderr.take();
    let mut pending: VecDeque<Bytes> = VecDeque::new();
    let mut pending_bytes = 0usize;
    let mut stdin_closing = false;
    let mut exited: Option<ExitStatus> = None;
    let mut timed_out = false;
    let mut killed_at_limit = false;
    // With a TTY, once the process exited: when to stop reading the terminal.
    let mut drain_until: Option<tokio::time::Instant> = None;
    let deadline = tokio::time::Instant::now() + host.limit();
    let mut stopped = host.stopped();
    let mut out_buf = vec![0u8; READ_CHUNK];
    let mut err_buf = vec![0u8; READ_CHUNK];

    loop {
        if exited.is_some() {
            let output_closed = stdout.is_none() && stderr.is_none();
            let drained = drain_until.is_some_and(|until| tokio::time::Instant::now() >= until);
            if output_closed || drained || timed_out {
                break;
            }
        }
        if stdin_closing && pending.is_empty() {
            stdin = None;
        }
        tokio::select! {
            message = ws.next(), if pending_bytes < MAX_PENDING_STDIN => {
                let Some(Ok(message)) = message else { return };
                match protocol.decode(message) {
                    Inbound::Data { channel: STDIN, data } if stdin.is_some() && !stdin_closing => {
                        pending_bytes += data.len();
                        pending.push_back(data);
                    }
                    Inbound::CloseStream(STDIN) => stdin_closing = true,
                    Inbound::Data { channel: RESIZE, data } => {
                        if let Ok(size) = serde_json::from_slice::<TerminalSize>(&data) {
                            process.resize(size.width, size.height);
                        }
                    }
                    Inbound::Data { .. } | Inbound::CloseStream(_) | Inbound::Ignore => {}
                    Inbound::Gone | Inbound::ProtocolError => return,
                }
            }
            written = write_some(&mut stdin, &pending) => match written {
                Ok(n) => {
                    pending_bytes = pending_bytes.saturating_sub(n);
                    if let Some(front) = pending.front_mut() {
                        if n >= front.len() {
                            pending.pop_front();
                        } else {
                            *front = front.slice(n..);
                        }
                    }
                }
                Err(_) => {
                    // The process closed its stdin: what the client still sends is dropped.
                    stdin = None;
                    pending.clear();
                    pending_bytes = 0;
                }
            },
            read = read_some(&mut stdout, &mut out_buf) => match read {
                Ok(n) if n > 0 => {
                    if forward_stdout && ws.send(protocol.encode(STDOUT, &out_buf[..n])).await.is_err() {
                        return;
                    }
                }
                _ => stdout = None,
            },
            read = read_some(&mut stderr, &mut err_buf) => match read {
                Ok(n) if n > 0 => {
                    if ws.send(protocol.encode(STDERR, &err_buf[..n])).await.is_err() {
                        return;
                    }
                }
                _ => stderr = None,
            },
            status = process.child.wait(), if exited.is_none() => {
                // What the command left running stays; without a TTY it may hold the output
                // open, and the exec goes on until it closes it.
                exited = Some(status.unwrap_or_else(|_| ExitStatus::from_raw(128 << 8)));
                if tty {
                    drain_until = Some(tokio::time::Instant::now() + TTY_DRAIN);
                }
            }
            () = tokio::time::sleep_until(deadline), if !timed_out => {
                timed_out = true;
                if exited.is_none() {
                    process.kill_all();
                    killed_at_limit = true;
                }
            }
            () = sleep_until_if_set(drain_until) => {}
            _ = stopped.changed() => return,
        }
    }
    drop(process);
    let outcome = match exited {
        _ if killed_at_limit => Outcome::TimedOut(host.limit()),
        Some(status) => Outcome::Exited(exit_code(status)),
        None => Outcome::Exited(128),
    };
    finish(ws, protocol, &outcome, &argv).await;
}

/// Sends the final status and a close, then waits a little for the client's close.
async fn finish<S>(mut ws: WebSocketStream<S>, protocol: Protocol, outcome: &Outcome, argv: &[String])
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let status = final_status(protocol, outcome, argv);
    if ws.send(protocol.encode(ERROR, status.as_bytes())).await.is_err() {
        return;
    }
    let close = CloseFrame { code: CloseCode::Normal, reason: "".into() };
    if ws.close(Some(close)).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(CLOSE_WAIT, async { while let Some(Ok(_)) = ws.next().await {} }).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v5_is_chosen_whenever_offered_else_the_clients_first_v4() {
        assert_eq!(Protocol::negotiate(["v4.channel.k8s.io", " v5.channel.k8s.io"]), Some(Protocol::V5));
        assert_eq!(
            Protocol::negotiate(["channel.k8s.io", "v4.base64.channel.k8s.io", "v4.channel.k8s.io"]),
            Some(Protocol::V4Base64)
        );
        assert_eq!(Protocol::negotiate(["v4.channel.k8s.io"]), Some(Protocol::V4));
        assert_eq!(Protocol::negotiate(["channel.k8s.io", "base64.channel.k8s.io"]), None);
        assert_eq!(Protocol::negotiate([]), None);
    }

    #[test]
    fn frames_carry_their_channel() {
        assert_eq!(Protocol::V5.encode(STDOUT, b"hi"), Message::binary(vec![1, b'h', b'i']));
        assert_eq!(Protocol::V4Base64.encode(STDOUT, b"\n"), Message::text("1Cg=="));
        let data = |channel, data: &'static [u8]| Inbound::Data { channel, data: Bytes::from_static(data) };
        assert_eq!(Protocol::V5.decode(Message::binary(vec![0, b'x'])), data(0, b"x"));
        assert_eq!(Protocol::V4Base64.decode(Message::text("0Zm9vCg==")), data(0, b"foo\n"));
        assert_eq!(Protocol::V4Base64.decode(Message::text("0%%%")), Inbound::Ignore);
        assert_eq!(Protocol::V5.decode(Message::binary(vec![CLOSE, 0])), Inbound::CloseStream(0));
        assert_eq!(Protocol::V5.decode(Message::binary(vec![CLOSE, 0, 0])), Inbound::ProtocolError);
        assert_eq!(Protocol::V5.decode(Message::binary(vec![CLOSE, 9])), Inbound::ProtocolError);
        assert_eq!(Protocol::V4.decode(Message::binary(vec![CLOSE, 0])), Inbound::Ignore, "no close signal in v4");
        assert_eq!(Protocol::V4.decode(Message::binary(vec![7, 1])), Inbound::Ignore);
        assert_eq!(Protocol::V4.decode(Message::binary(Vec::new())), Inbound::Ignore);
        assert_eq!(Protocol::V4.decode(Message::Close(None)), Inbound::Gone);
    }

    #[test]
    fn statuses_are_what_upstream_sends() {
        let argv: Vec<String> = ["sh", "-c", "exit 3"].iter().map(|s| s.to_string()).collect();
        assert_eq!(final_status(Protocol::V5, &Outcome::Exited(0), &argv), r#"{"metadata":{},"status":"Success"}"#);
        assert_eq!(
            final_status(Protocol::V5, &Outcome::Exited(3), &argv),
            r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: command terminated with exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
        );
        assert_eq!(
            final_status(Protocol::V4, &Outcome::Exited(3), &argv),
            r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
        );
        let not_started = final_status(Protocol::V4, &Outcome::NotStarted("exec: \"x\": nope".into()), &argv);
        let doc: serde_json::Value = serde_json::from_str(&not_started).expect("json");
        assert_eq!(doc["reason"], "InternalError");
        assert_eq!(doc["code"], 500);
        assert!(doc["message"].as_str().is_some_and(|m| m.starts_with("Internal error occurred: error executing")));
        let long = vec!["x".repeat(1000)];
        assert!(shown_command(&long).chars().count() == SHOWN_COMMAND_CHARS + 1);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(2 << 8)), 2);
    }
}
