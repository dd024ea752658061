//! Keeps secret env values out of everything that leaves the provider except the Secret body.
//!
//! The provider never formats a secret value on purpose; this is the second line: any text
//! that could carry a server's echo of a request (error messages, log lines) passes through
//! [`Redactor::scrub`] first.

use crate::errors::ProviderError;
use crate::log::{Level, Log};

/// The same marker the contract's `Debug` of secret env values shows.
pub use sandbox_contract::REDACTED;

/// Replaces known secret values in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a value that contains another is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for these values (empty ones are ignored: they reveal nothing).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut secrets: Vec<String> = values.into_iter().filter(|v| !v.is_empty()).map(str::to_string).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// `text` with every secret value replaced by [`REDACTED`].
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }

    /// The error with its message scrubbed.
    pub fn scrub_error(&self, error: ProviderError) -> ProviderError {
        if self.secrets.is_empty() {
            return error;
        }
        error.map_message(|m| self.scrub(&m))
    }
}

/// A log that scrubs messages and field values before passing them on.
pub struct RedactingLog<'a, L: Log> {
    inner: &'a L,
    redactor: &'a Redactor,
}

impl<'a, L: Log> RedactingLog<'a, L> {
    /// Wraps `inner`.
    pub fn new(inner: &'a L, redactor: &'a Redactor) -> Self {
        Self { inner, redactor }
    }
}

impl<L: Log> Log for RedactingLog<'_, L> {
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let message = self.redactor.scrub(message);
        let values: Vec<String> = fields.iter().map(|(_, v)| self.redactor.scrub(v)).collect();
        let fields: Vec<(&str, &str)> = fields.iter().zip(&values).map(|((k, _), v)| (*k, v.as_str())).collect();
        self.inner.emit(level, &message, &fields);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_longest_value_first() {
        let r = Redactor::new(["abc", "abcdef", ""]);
        assert_eq!(r.scrub("x abcdef y abc"), "x [redacted] y [redacted]");
    }

    #[test]
    fn scrubs_error_messages() {
        let r = Redactor::new(["hunter2"]);
        let e = r.scrub_error(ProviderError::rejected("the server said hunter2 is invalid"));
        assert_eq!(e.message(), "the server said [redacted] is invalid");
    }
}
