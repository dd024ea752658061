//! Structured log lines, routed by the component glue into the host's `log` import.
//!
//! Lines carry names, namespaces, durations and outcomes; never an env value. Acquire wraps
//! its log in a [`Redactor`](crate::redact::Redactor) so even a server message that echoed a
//! secret is scrubbed before it leaves the provider.

/// Severity of a line (mirrors the WIT `log.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Where the provider's log lines go.
pub trait Log {
    /// Emits one line with key/value fields.
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]);

    /// A debug line.
    fn debug(&self, message: &str, fields: &[(&str, &str)]) {
        self.emit(Level::Debug, message, fields);
    }

    /// An info line.
    fn info(&self, message: &str, fields: &[(&str, &str)]) {
        self.emit(Level::Info, message, fields);
    }

    /// A warning line.
    fn warn(&self, message: &str, fields: &[(&str, &str)]) {
        self.emit(Level::Warn, message, fields);
    }
}

impl<L: Log + ?Sized> Log for &L {
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        (**self).emit(level, message, fields);
    }
}

/// A log that drops every line (for callers that do not care).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLog;

impl Log for NoLog {
    fn emit(&self, _level: Level, _message: &str, _fields: &[(&str, &str)]) {}
}
