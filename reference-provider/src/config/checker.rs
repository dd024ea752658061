//! Walks config JSON by hand, collecting every problem with its JSON-pointer path.

use serde_json::{Map, Value};

use contract::quote;
use contract::quote::shorten;

use super::ConfigProblem;

/// Appends `key` to a JSON pointer, escaping `~` and `/` (RFC 6901). A key longer than a
/// message quotes is cut the same way, so a huge key cannot flood the problem's path.
pub(super) fn ptr(path: &str, key: &str) -> String {
    format!("{path}/{}", shorten(key).replace('~', "~0").replace('/', "~1"))
}

/// How many errors, and how many warnings, validation lists; the rest are counted. A config
/// within the size limit can still hold thousands of unknown keys.
pub(super) const MAX_LISTED_PROBLEMS: usize = 50;

/// Collects problems while walking a config.
#[derive(Default)]
pub(super) struct Checker {
    errors: Vec<ConfigProblem>,
    warnings: Vec<ConfigProblem>,
    unlisted_errors: usize,
    unlisted_warnings: usize,
}

/// Records a problem, or counts it once [`MAX_LISTED_PROBLEMS`] are listed.
fn record(list: &mut Vec<ConfigProblem>, unlisted: &mut usize, path: &str, message: impl Into<String>) {
    if list.len() < MAX_LISTED_PROBLEMS {
        list.push(ConfigProblem { path: path.to_string(), message: message.into() });
    } else {
        *unlisted += 1;
    }
}

/// The listed problems, and one more saying how many were not listed.
fn listed(mut list: Vec<ConfigProblem>, unlisted: usize, what: &str) -> Vec<ConfigProblem> {
    if unlisted > 0 {
        list.push(ConfigProblem {
            path: String::new(),
            message: format!("{unlisted} more {what} not listed; fix the ones above and validate again"),
        });
    }
    list
}

impl Checker {
    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) {
        record(&mut self.errors, &mut self.unlisted_errors, path, message);
    }

    pub(super) fn warn(&mut self, path: &str, message: impl Into<String>) {
        record(&mut self.warnings, &mut self.unlisted_warnings, path, message);
    }

    /// Every error found, listed or not.
    pub(super) fn error_count(&self) -> usize {
        self.errors.len() + self.unlisted_errors
    }

    /// The errors and the warnings, each list bounded (see [`MAX_LISTED_PROBLEMS`]).
    pub(super) fn into_problems(self) -> (Vec<ConfigProblem>, Vec<ConfigProblem>) {
        (listed(self.errors, self.unlisted_errors, "errors"), listed(self.warnings, self.unlisted_warnings, "warnings"))
    }

    /// `value` as an object, warning about keys outside `known`.
    pub(super) fn object<'v>(
        &mut self,
        value: &'v Value,
        path: &str,
        known: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(map) = value.as_object() else {
            self.error(path, format!("must be an object, not {}", type_name(value)));
            return None;
        };
        for key in map.keys() {
            if !known.contains(&key.as_str()) {
                self.warn(
                    &ptr(path, key),
                    format!("unknown key, ignored; the known keys here are {}", known.join(", ")),
                );
            }
        }
        Some(map)
    }

    /// A present, non-null field.
    pub(super) fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
        map.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn string(&mut self, map: &Map<String, Value>, path: &str, key: &str) -> Option<String> {
        let value = Self::field(map, key)?;
        match value.as_str() {
            Some(s) => Some(s.to_string()),
            None => {
                self.error(&ptr(path, key), format!("must be a string, not {}", type_name(value)));
                None
            }
        }
    }

    pub(super) fn boolean(&mut self, map: &Map<String, Value>, path: &str, key: &str) -> Option<bool> {
        let value = Self::field(map, key)?;
        match value.as_bool() {
            Some(b) => Some(b),
            None => {
                self.error(&ptr(path, key), format!("must be true or false, not {}", type_name(value)));
                None
            }
        }
    }

    /// An integer in `min..=max`.
    pub(super) fn integer(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        key: &str,
        min: u64,
        max: u64,
    ) -> Option<u64> {
        let value = Self::field(map, key)?;
        match (value.as_u64(), value.as_i64()) {
            (Some(n), _) if (min..=max).contains(&n) => Some(n),
            (Some(n), _) => {
                self.error(&ptr(path, key), format!("must be between {min} and {max}, not {n}"));
                None
            }
            (None, Some(n)) => {
                self.error(&ptr(path, key), format!("must be between {min} and {max}, not {n}"));
                None
            }
            (None, None) => {
                self.error(&ptr(path, key), format!("must be an integer, not {}", type_name(value)));
                None
            }
        }
    }

    /// A string out of `allowed`.
    pub(super) fn one_of(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        key: &str,
        allowed: &[&str],
    ) -> Option<String> {
        let s = self.string(map, path, key)?;
        if allowed.contains(&s.as_str()) {
            Some(s)
        } else {
            self.error(&ptr(path, key), format!("must be one of {}, not {}", allowed.join(", "), quote(&s)));
            None
        }
    }
}

/// How a message names a JSON value's type.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
