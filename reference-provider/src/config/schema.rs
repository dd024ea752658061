//! The JSON Schema (draft 2020-12) of the config, which `describe` publishes.

use serde_json::{Map, Value, json};

use super::{
    DEFAULT_LEASE_TTL_SECONDS, DEFAULT_STALL_MARGIN_MILLIS, ErrorCase, MAX_DELAY_MILLIS, MAX_LEASE_TTL_SECONDS,
    MAX_STALL_MARGIN_MILLIS, Operation,
};
use crate::input_limits::{CONFIG_TEXT, FAILURE_MESSAGE};

/// The schema of one operation's settings.
fn behaviour() -> Value {
    let cases: Vec<&str> = ErrorCase::ALL.iter().map(|e| e.as_str()).collect();
    json!({
        "type": "object",
        "description": "What the operation does before it answers: wait (delayMillis or stall, not both), then fail as \
                        configured, or answer as it would have.",
        "not": {"required": ["delayMillis", "stall"]},
        "properties": {
            "delayMillis": {
                "type": "integer", "minimum": 0, "maximum": MAX_DELAY_MILLIS,
                "description": "A fixed wait before the answer; it must be shorter than the host's call deadline."
            },
            "stall": {
                "type": "object",
                "required": ["until"],
                "description": "A wait measured from the host's deadline (the deadline import).",
                "properties": {
                    "until": {
                        "enum": ["before-deadline", "past-deadline"],
                        "description": "before-deadline: wake marginMillis before the deadline and answer; \
                                        past-deadline: sleep until marginMillis past it, which the host must end."
                    },
                    "marginMillis": {
                        "type": "integer", "minimum": 0, "maximum": MAX_STALL_MARGIN_MILLIS,
                        "default": DEFAULT_STALL_MARGIN_MILLIS
                    }
                }
            },
            "fail": {
                "type": "object",
                "required": ["error"],
                "description": "Answer this provider-error, on every call of the operation (a provider without state \
                                cannot count attempts). For probe, an error diagnostic instead.",
                "properties": {
                    "error": {"enum": cases, "description": "The provider-error case."},
                    "retryable": {
                        "type": "boolean", "default": false,
                        "description": "The error's retry advice; not for invalid-config, whose path is this knob's."
                    },
                    "message": {
                        "type": "string", "minLength": 1, "maxLength": FAILURE_MESSAGE.max,
                        "description": "The error's message; by default one naming the operation and this knob."
                    }
                }
            }
        }
    })
}

/// The JSON Schema (draft 2020-12) of the config, for `describe`.
pub fn schema() -> Value {
    let operations: Map<String, Value> = Operation::ALL.iter().map(|o| (o.as_str().to_string(), behaviour())).collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Reference sandbox provider config",
        "description": format!(
            "Unknown keys are reported as warnings and ignored; validate-config fills in every default. The config's JSON \
             text is at most {} bytes.",
            CONFIG_TEXT.max
        ),
        "type": "object",
        "properties": {
            "leaseTtlSeconds": {
                "type": "integer", "minimum": 1, "maximum": MAX_LEASE_TTL_SECONDS, "default": DEFAULT_LEASE_TTL_SECONDS,
                "description": "Longest life of a lease without renewal, and the cap of every renewal. Stored in the lease \
                                at acquire: renew uses the lease's, not a later config's."
            },
            "operations": {
                "type": "object",
                "description": "Per operation (WIT names), what it does before it answers; operations left out answer at \
                                once. execute answers unsupported unless it fails as configured: there is no sandbox \
                                to run a command in.",
                "properties": operations
            }
        }
    })
}
