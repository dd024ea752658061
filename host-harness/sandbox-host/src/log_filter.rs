//! The log filter every `sandbox-host` subcommand installs: `RUST_LOG` (or the command's
//! default), with frame-level logging of the wire capped at `debug` whatever `RUST_LOG` says.
//!
//! At `trace`, tungstenite prints every exec WebSocket frame: the stdin header that exports the
//! command's secret env, the command's raw output (before the provider redacts the lease's
//! secrets), and each payload again in hex. Since the exec output and the request bodies are the
//! one place secret values travel in clear, the crates that handle them never log below `debug`
//! here, even for `RUST_LOG=trace` or `RUST_LOG=tungstenite::protocol=trace`.
//!
//! The cap is a filter of its own next to the `EnvFilter`, not directives added to it: an
//! `EnvFilter` directive for a target also *raises* that target's level (a `tungstenite=debug`
//! cap would print tungstenite's debug lines at the default `warn`), and a more specific
//! directive (`tungstenite::protocol=trace`) or a span directive (`[exec]=trace`) would still
//! override it. A separate filter can only turn events off, and every layer must agree.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The crates whose `trace` lines carry what crosses the wire (frames, payloads, headers,
/// handshake messages): the exec WebSocket, HTTP/1 and HTTP/2, TLS and the Kubernetes client.
pub const WIRE_TARGETS: &[&str] = &[
    "tungstenite",
    "tokio_tungstenite",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "tokio_rustls",
    "kube_client",
    "tower_http",
];

/// A command's directives when `RUST_LOG` names none: warnings and errors, but none of kube-rs's
/// client, which logs each failed request at ERROR (a refused connection a dozen times over one
/// acquire) while the host reports the failure once, typed, through the provider.
pub const DEFAULT: &str = "warn,kube_client=off";

/// The most any of [`WIRE_TARGETS`] may log.
pub const WIRE_CAP: LevelFilter = LevelFilter::DEBUG;

/// The cap: [`WIRE_TARGETS`] at [`WIRE_CAP`], everything else let through (to the `EnvFilter`).
pub fn wire_cap() -> Targets {
    Targets::new().with_default(LevelFilter::TRACE).with_targets(WIRE_TARGETS.iter().map(|target| (*target, WIRE_CAP)))
}

/// `rust_log`'s directives, or `default` when it is unset or does not parse (as
/// `EnvFilter::try_from_default_env` falls back).
pub fn env_filter(rust_log: Option<&str>, default: &str) -> EnvFilter {
    rust_log.and_then(|directives| EnvFilter::try_new(directives).ok()).unwrap_or_else(|| EnvFilter::new(default))
}

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for a person.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`), for a log collector.
    Json,
}

/// Installs the process's logger on stderr: human-readable lines (coloured only on a terminal)
/// or JSON objects, filtered by `RUST_LOG` (or `default`) and capped by [`wire_cap`].
pub fn init(default: &str, format: LogFormat) {
    let rust_log = std::env::var(EnvFilter::DEFAULT_ENV).ok();
    let text = (format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(crate::cli_io::colour_on_stderr())
    });
    let json =
        (format == LogFormat::Json).then(|| tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr));
    tracing_subscriber::registry()
        .with(env_filter(rust_log.as_deref(), default))
        .with(wire_cap())
        .with(text)
        .with(json)
        .init();
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// Formatted log lines, in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut out) = self.0.lock() {
                out.extend_from_slice(buf);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    impl Captured {
        fn text(&self) -> String {
            self.0.lock().map(|out| String::from_utf8_lossy(&out).into_owned()).unwrap_or_default()
        }
    }

    /// What the process's logger prints for one event of each kind, with `RUST_LOG=rust_log`.
    fn printed(rust_log: &str) -> String {
        let out = Captured::default();
        let subscriber = tracing_subscriber::registry()
            .with(env_filter(Some(rust_log), "warn"))
            .with(wire_cap())
            .with(tracing_subscriber::fmt::layer().with_writer(out.clone()).with_ansi(false));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("exec");
            let _inside = span.enter();
            tracing::trace!(target: "tungstenite::protocol", "frame-payload-trace");
            tracing::trace!(target: "tokio_tungstenite::compat", "compat-trace");
            tracing::trace!(target: "hyper::proto::h1", "hyper-trace");
            tracing::trace!(target: "rustls::client::hs", "rustls-trace");
            tracing::debug!(target: "tungstenite::protocol", "frame-debug");
            tracing::debug!(target: "hyper_util::client", "hyper-util-debug");
            tracing::trace!(target: "provider_host::kube", "host-trace");
            tracing::trace!(target: "provider", "provider-trace");
        });
        out.text()
    }

    #[test]
    fn no_directive_turns_on_frame_level_logs_of_the_wire() {
        assert!(EnvFilter::try_new("[exec]=trace").is_ok(), "a span directive parses");
        for rust_log in [
            "trace",
            "info,tungstenite=trace",
            "tungstenite::protocol=trace,tokio_tungstenite=trace,hyper=trace,rustls=trace",
            "[exec]=trace",
            "warn,tungstenite=trace,tungstenite=trace",
        ] {
            let out = printed(rust_log);
            for line in ["frame-payload-trace", "compat-trace", "hyper-trace", "rustls-trace"] {
                assert!(!out.contains(line), "RUST_LOG={rust_log} printed {line}: {out}");
            }
        }
    }

    #[test]
    fn other_targets_keep_the_level_rust_log_gives_them() {
        let out = printed("trace");
        for line in ["frame-debug", "hyper-util-debug", "host-trace", "provider-trace"] {
            assert!(out.contains(line), "RUST_LOG=trace dropped {line}: {out}");
        }
        let out = printed("provider_host=trace");
        assert!(out.contains("host-trace"), "{out}");
        assert!(!out.contains("provider-trace"), "{out}");
    }

    /// The cap only lowers: at the default level the wire crates stay as quiet as the rest.
    #[test]
    fn the_cap_turns_nothing_on() {
        let out = printed("warn");
        assert_eq!(out, "", "nothing at warn");
        let out = printed("off");
        assert_eq!(out, "", "nothing when off");
    }

    #[test]
    fn an_unset_or_broken_rust_log_means_the_default() {
        assert_eq!(env_filter(None, "warn").to_string(), "warn");
        assert_eq!(env_filter(Some("tungstenite=nonsense-level"), "off").to_string(), "off");
    }
}
