//! The `log` import: a provider's log lines become `tracing` events with target `provider`, so
//! an operator filters them like any other host component (`RUST_LOG=provider=debug`).
//!
//! Guest text is untrusted: control characters are escaped (a newline cannot forge a log line)
//! and messages and fields are bounded so a chatty or hostile guest cannot flood the host's log.

use std::fmt::Write as _;

use crate::bindings::log::{Field, Level};

/// Longest message kept, in bytes.
const MAX_MESSAGE: usize = 4096;
/// Longest field key or value kept, in bytes.
const MAX_FIELD: usize = 512;
/// Fields kept per line.
const MAX_FIELDS: usize = 32;

/// Escapes control characters and cuts at `max` bytes (at a character boundary).
pub(crate) fn sanitize(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        if out.len() >= max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Renders fields as `key=value` pairs; values with spaces or quotes are quoted.
pub(crate) fn render_fields(fields: &[Field]) -> String {
    let mut out = String::new();
    for field in fields.iter().take(MAX_FIELDS) {
        if !out.is_empty() {
            out.push(' ');
        }
        let key = sanitize(&field.key, MAX_FIELD);
        let value = sanitize(&field.value, MAX_FIELD);
        if value.is_empty() || value.contains([' ', '"', '=']) {
            let _ = write!(out, "{key}={value:?}");
        } else {
            let _ = write!(out, "{key}={value}");
        }
    }
    if fields.len() > MAX_FIELDS {
        let _ = write!(out, " (+{} more fields)", fields.len() - MAX_FIELDS);
    }
    out
}

/// Emits one provider line into `tracing`, tagged with the call it came from.
pub(crate) fn emit(call: &'static str, level: Level, message: &str, fields: &[Field]) {
    let message = sanitize(message, MAX_MESSAGE);
    let fields = render_fields(fields);
    match level {
        Level::Trace => tracing::trace!(target: "provider", call, fields = %fields, "{message}"),
        Level::Debug => tracing::debug!(target: "provider", call, fields = %fields, "{message}"),
        Level::Info => tracing::info!(target: "provider", call, fields = %fields, "{message}"),
        Level::Warn => tracing::warn!(target: "provider", call, fields = %fields, "{message}"),
        Level::Error => tracing::error!(target: "provider", call, fields = %fields, "{message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(key: &str, value: &str) -> Field {
        Field { key: key.into(), value: value.into() }
    }

    /// Collects formatted log output in memory.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_become_tracing_events_with_target_provider() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            emit("acquire", Level::Warn, "pod unschedulable", &[field("pod", "sb-1")]);
            emit("probe", Level::Trace, "details", &[]);
        });
        let text = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("WARN") && lines[0].contains("provider:"), "{}", lines[0]);
        assert!(lines[0].contains("pod unschedulable") && lines[0].contains("call=\"acquire\""), "{}", lines[0]);
        assert!(lines[0].contains("fields=pod=sb-1"), "{}", lines[0]);
        assert!(lines[1].contains("TRACE") && lines[1].contains("details"), "{}", lines[1]);
    }

    #[test]
    fn control_characters_cannot_forge_lines() {
        assert_eq!(sanitize("a\nINFO fake line\r\x1b[31m", 100), "a\\nINFO fake line\\r\\u{1b}[31m");
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary() {
        let cut = sanitize(&"é".repeat(100), 11);
        assert!(cut.ends_with('…') && cut.len() <= 11 + 2 + '…'.len_utf8(), "{cut}");
    }

    #[test]
    fn fields_render_as_key_value_pairs() {
        let out = render_fields(&[field("name", "sb-1"), field("reason", "image pull"), field("empty", "")]);
        assert_eq!(out, r#"name=sb-1 reason="image pull" empty="""#);
        let many: Vec<Field> = (0..40).map(|i| field(&format!("k{i}"), "v")).collect();
        assert!(render_fields(&many).ends_with("(+8 more fields)"));
    }
}
