//! Deciding whether a JSON merge patch would change anything.
//!
//! The kubelet recomputes every status on every pass; writing only real changes keeps the API
//! server and every watcher (the provider under test included) free of no-op updates.

use serde_json::Value;

/// True if `have` already shows everything in `want`: objects may carry extra fields (set by
/// other writers or defaulted by the server), arrays must match element by element (a merge
/// patch replaces them whole), and `null` in `want` means absent.
pub(crate) fn covers(have: &Value, want: &Value) -> bool {
    match want {
        Value::Null => have.is_null(),
        Value::Object(fields) => fields.iter().all(|(k, v)| covers(have.get(k).unwrap_or(&Value::Null), v)),
        Value::Array(items) => {
            have.as_array().is_some_and(|h| h.len() == items.len() && h.iter().zip(items).all(|(h, w)| covers(h, w)))
        }
        other => have == other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extra_fields_are_ignored_but_differences_are_not() {
        let have = json!({"phase": "Running", "qosClass": "BestEffort", "conditions": [{"type": "Ready", "status": "True", "extra": 1}]});
        assert!(covers(
            &have,
            &json!({"phase": "Running", "reason": null, "conditions": [{"type": "Ready", "status": "True"}]})
        ));
        assert!(!covers(&have, &json!({"phase": "Pending"})));
        assert!(!covers(&have, &json!({"qosClass": null})));
        assert!(!covers(&have, &json!({"conditions": []})));
        assert!(!covers(&have, &json!({"conditions": [{"type": "Ready", "status": "False"}]})));
        assert!(!covers(&json!({"conditions": {"a": 1}}), &json!({"conditions": [1]})));
    }
}
