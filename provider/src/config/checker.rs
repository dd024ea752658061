//! Walks config JSON by hand, collecting every problem with its JSON-pointer path.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use contract::quote;
use contract::quote::shorten;

use super::ConfigProblem;
use super::check::is_quantity;
use crate::naming::is_qualified_name;

/// Appends `key` to a JSON pointer, escaping `~` and `/` (RFC 6901). A key longer than a
/// message quotes is cut the same way, so a huge key cannot flood the problem's path.
pub(super) fn ptr(path: &str, key: &str) -> String {
    format!("{path}/{}", shorten(key).replace('~', "~0").replace('/', "~1"))
}

/// How many errors, and how many warnings, validation lists; the rest are counted. A config
/// within the size limits can still hold tens of thousands of bad keys, and an answer listing
/// each would be megabytes long.
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
                self.warn(&ptr(path, key), "unknown key, ignored; check its spelling against the config schema");
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

    pub(super) fn integer(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        key: &str,
        min: i64,
        max: i64,
    ) -> Option<i64> {
        let value = Self::field(map, key)?;
        match value.as_i64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            Some(n) => {
                self.error(&ptr(path, key), format!("must be between {min} and {max}, not {n}"));
                None
            }
            None => {
                self.error(&ptr(path, key), format!("must be an integer, not {}", type_name(value)));
                None
            }
        }
    }

    pub(super) fn string_list(&mut self, map: &Map<String, Value>, path: &str, key: &str) -> Option<Vec<String>> {
        let value = Self::field(map, key)?;
        let path = ptr(path, key);
        let Some(items) = value.as_array() else {
            self.error(&path, format!("must be an array of strings, not {}", type_name(value)));
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(s) => out.push(s.to_string()),
                None => self.error(&ptr(&path, &i.to_string()), format!("must be a string, not {}", type_name(item))),
            }
        }
        Some(out)
    }

    pub(super) fn string_map(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<BTreeMap<String, String>> {
        let value = Self::field(map, key)?;
        let path = ptr(path, key);
        let Some(entries) = value.as_object() else {
            self.error(&path, format!("must be an object of strings, not {}", type_name(value)));
            return None;
        };
        let mut out = BTreeMap::new();
        for (k, v) in entries {
            match v.as_str() {
                Some(s) => {
                    out.insert(k.clone(), s.to_string());
                }
                None => self.error(&ptr(&path, k), format!("must be a string, not {}", type_name(v))),
            }
        }
        Some(out)
    }

    /// A map of quantities; numbers are accepted and written as strings.
    pub(super) fn quantity_map(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<BTreeMap<String, String>> {
        let value = Self::field(map, key)?;
        let path = ptr(path, key);
        let Some(entries) = value.as_object() else {
            self.error(&path, format!("must be an object of quantities, not {}", type_name(value)));
            return None;
        };
        let mut out = BTreeMap::new();
        for (name, v) in entries {
            let at = ptr(&path, name);
            if !is_qualified_name(name) {
                self.error(&at, "is not a resource name (cpu, memory, ephemeral-storage, or vendor.example/device)");
                continue;
            }
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => {
                    self.error(
                        &at,
                        format!("must be a quantity such as \"500m\" or \"2Gi\", not {}", type_name(other)),
                    );
                    continue;
                }
            };
            if is_quantity(&text) {
                out.insert(name.clone(), text);
            } else {
                self.error(
                    &at,
                    format!("{} is not a Kubernetes quantity (such as \"500m\", \"2\", \"4Gi\")", quote(&text)),
                );
            }
        }
        Some(out)
    }

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

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
