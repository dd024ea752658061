//! The rules per config field, each problem recorded with its path.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::checker::{Checker, ptr};
use super::{
    BEHAVIOUR_KEYS, Behaviour, Config, DEFAULT_LEASE_TTL_SECONDS, DEFAULT_STALL_MARGIN_MILLIS, ErrorCase, FAILURE_KEYS,
    Failure, MAX_DELAY_MILLIS, MAX_LEASE_TTL_SECONDS, MAX_STALL_MARGIN_MILLIS, Operation, STALL_KEYS, Stall,
    StallUntil, TOP_KEYS, operation_path,
};
use crate::input_limits::{CONFIG_TEXT, FAILURE_MESSAGE};

/// Walks a config: the config when it has no errors, and every problem found.
pub(super) fn check(text: &str) -> (Option<Config>, Checker) {
    let mut c = Checker::default();
    if let Err(message) = CONFIG_TEXT.check("the config", text.len()) {
        c.error("", message);
        return (None, c);
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            c.error("", format!("is not valid JSON: {e}"));
            return (None, c);
        }
    };
    let Some(top) = c.object(&value, "", TOP_KEYS) else {
        return (None, c);
    };
    let mut config = Config { lease_ttl_seconds: DEFAULT_LEASE_TTL_SECONDS, operations: BTreeMap::new() };
    if let Some(ttl) = c.integer(top, "", "leaseTtlSeconds", 1, u64::from(MAX_LEASE_TTL_SECONDS)) {
        config.lease_ttl_seconds = u32::try_from(ttl).unwrap_or(MAX_LEASE_TTL_SECONDS);
    }
    if let Some(operations) = Checker::field(top, "operations") {
        let known: Vec<&str> = Operation::ALL.iter().map(|o| o.as_str()).collect();
        if let Some(map) = c.object(operations, "/operations", &known) {
            for operation in Operation::ALL {
                if let Some(settings) = Checker::field(map, operation.as_str())
                    && let Some(behaviour) = check_behaviour(&mut c, operation, settings)
                {
                    config.operations.insert(operation, behaviour);
                }
            }
        }
    }
    if c.error_count() == 0 { (Some(config), c) } else { (None, c) }
}

/// One operation's settings; `None` when they have errors.
fn check_behaviour(c: &mut Checker, operation: Operation, value: &Value) -> Option<Behaviour> {
    let path = operation_path(operation);
    let map = c.object(value, &path, BEHAVIOUR_KEYS)?;
    let errors_before = c.error_count();
    let delay_millis = c.integer(map, &path, "delayMillis", 0, MAX_DELAY_MILLIS);
    let stall = Checker::field(map, "stall").and_then(|v| check_stall(c, &ptr(&path, "stall"), v));
    let fail = Checker::field(map, "fail").and_then(|v| check_failure(c, operation, &ptr(&path, "fail"), v));
    if Checker::field(map, "delayMillis").is_some() && Checker::field(map, "stall").is_some() {
        c.error(
            &path,
            "sets both delayMillis and stall; choose one: a delay is a fixed wait, a stall is measured from the host's \
             deadline",
        );
    }
    if stall.is_some_and(|s| s.until == StallUntil::PastDeadline) && fail.is_some() {
        c.warn(
            &ptr(&path, "fail"),
            "is never answered: after a stall past the deadline the host has ended the call, and if it has not, the \
             provider answers timeout to say so",
        );
    }
    (c.error_count() == errors_before).then_some(Behaviour { delay_millis, stall, fail })
}

fn check_stall(c: &mut Checker, path: &str, value: &Value) -> Option<Stall> {
    let map = c.object(value, path, STALL_KEYS)?;
    let until = match c.one_of(map, path, "until", &["before-deadline", "past-deadline"]) {
        Some(u) if u == "past-deadline" => Some(StallUntil::PastDeadline),
        Some(_) => Some(StallUntil::BeforeDeadline),
        None if Checker::field(map, "until").is_none() => {
            c.error(&ptr(path, "until"), "is required: before-deadline or past-deadline");
            None
        }
        None => None,
    };
    let margin = c.integer(map, path, "marginMillis", 0, MAX_STALL_MARGIN_MILLIS);
    until.map(|until| Stall { until, margin_millis: margin.unwrap_or(DEFAULT_STALL_MARGIN_MILLIS) })
}

fn check_failure(c: &mut Checker, operation: Operation, path: &str, value: &Value) -> Option<Failure> {
    let map: &Map<String, Value> = c.object(value, path, FAILURE_KEYS)?;
    let names: Vec<&str> = ErrorCase::ALL.iter().map(|e| e.as_str()).collect();
    let error = match c.one_of(map, path, "error", &names) {
        Some(name) => ErrorCase::parse(&name),
        None if Checker::field(map, "error").is_none() => {
            c.error(&ptr(path, "error"), format!("is required: the provider-error case, one of {}", names.join(", ")));
            None
        }
        None => None,
    };
    let retryable = c.boolean(map, path, "retryable");
    if error == Some(ErrorCase::InvalidConfig) && retryable.is_some() {
        c.error(&ptr(path, "retryable"), "does not apply: an invalid-config error carries a path, not retry advice");
    }
    let message = match c.string(map, path, "message") {
        Some(m) if m.is_empty() => {
            c.error(&ptr(path, "message"), "is empty; leave it out for the default message");
            None
        }
        Some(m) => match FAILURE_MESSAGE.check("the message", m.len()) {
            Ok(()) => Some(m),
            Err(why) => {
                c.error(&ptr(path, "message"), why);
                None
            }
        },
        None => None,
    };
    let error = error?;
    let message = message.unwrap_or_else(|| {
        format!(
            "{} failed with {} because the config asks for it at {path}; this is the reference provider's configured \
             failure, not a real one",
            operation.as_str(),
            error.as_str()
        )
    });
    let retryable = if error == ErrorCase::InvalidConfig { None } else { Some(retryable.unwrap_or(false)) };
    Some(Failure { error, retryable, message })
}
