//! Structured log lines, routed by the component glue into the host's `log` import.
//!
//! Lines carry lease ids, operations, outcomes and the behaviour the config asked for; never an
//! env value (the provider never reads one).

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

    /// An info line.
    fn info(&self, message: &str, fields: &[(&str, &str)]) {
        self.emit(Level::Info, message, fields);
    }

    /// A warning line.
    fn warn(&self, message: &str, fields: &[(&str, &str)]) {
        self.emit(Level::Warn, message, fields);
    }
}
