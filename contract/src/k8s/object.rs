//! Lenient reads of Kubernetes objects as JSON: a missing or oddly typed field reads as absent,
//! so a partial object (right after create, or from an older controller) never panics or fails
//! a whole call. The provider reads what it made and the host proves ownership with the same
//! readers (uid, labels, the controller reference).

use serde_json::Value;

/// The string at a JSON pointer, if it is a non-empty string.
pub fn str_at<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// `metadata.name`.
pub fn name(object: &Value) -> Option<&str> {
    str_at(object, "/metadata/name")
}

/// `metadata.uid`.
pub fn uid(object: &Value) -> Option<&str> {
    str_at(object, "/metadata/uid")
}

/// `metadata.resourceVersion`.
pub fn resource_version(object: &Value) -> Option<&str> {
    str_at(object, "/metadata/resourceVersion")
}

/// `metadata.generation`.
pub fn generation(object: &Value) -> Option<i64> {
    object.pointer("/metadata/generation").and_then(Value::as_i64)
}

/// Whether `metadata.deletionTimestamp` is set: the object is being deleted.
pub fn is_terminating(object: &Value) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// One label's value.
pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
}

/// One annotation's value.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
}

/// The uid of the object's controller (the ownerReference with `controller: true`).
pub fn controller_uid(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
}

/// The reference of an object's controller (the `ownerReference` with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRef {
    /// `v1` or `group/version`.
    pub api_version: String,
    /// The controller's kind (`Sandbox`).
    pub kind: String,
    /// The controller's name, in the dependent's namespace.
    pub name: String,
    /// The controller's uid: an object of that name with another uid is not the owner.
    pub uid: String,
}

/// The object's controller reference, when it has one with every field set.
pub fn controller_ref(object: &Value) -> Option<ControllerRef> {
    let refs = object.pointer("/metadata/ownerReferences")?.as_array()?;
    let r = refs.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    let field = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ControllerRef {
        api_version: field("apiVersion")?,
        kind: field("kind")?,
        name: field("name")?,
        uid: field("uid")?,
    })
}

/// The `items` of a List object.
pub fn list_items(list: &Value) -> Vec<Value> {
    list.get("items").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// A status condition, read leniently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition<'a> {
    pub status: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    pub observed_generation: Option<i64>,
}

impl Condition<'_> {
    /// `status == "True"`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// The condition of `type_` in `status.conditions`.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<Condition<'a>> {
    let found = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
    let text = |key: &str| found.get(key).and_then(Value::as_str).unwrap_or("");
    Some(Condition {
        status: text("status"),
        reason: text("reason"),
        message: text("message"),
        observed_generation: found.get("observedGeneration").and_then(Value::as_i64),
    })
}

/// When the cluster deletes the workload on its own (epoch millis): the Sandbox's
/// `shutdownTime`, the claim's `lifecycle.shutdownTime`, or the Job's `status.startTime` (else
/// its creation) plus `activeDeadlineSeconds`.
pub fn expiry_of(workload: &Value) -> Option<i64> {
    let shutdown = str_at(workload, "/spec/shutdownTime").or_else(|| str_at(workload, "/spec/lifecycle/shutdownTime"));
    if let Some(shutdown) = shutdown {
        return crate::rfc3339::parse(shutdown);
    }
    let deadline = workload.pointer("/spec/activeDeadlineSeconds").and_then(Value::as_i64)?;
    let start = str_at(workload, "/status/startTime")
        .or_else(|| str_at(workload, "/metadata/creationTimestamp"))
        .and_then(crate::rfc3339::parse)?;
    Some(start.saturating_add(deadline.saturating_mul(1000)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_are_lenient() {
        let partial = json!({"metadata": {"name": "x", "generation": "one", "labels": {"a": 1}}});
        assert_eq!(name(&partial), Some("x"));
        assert_eq!(uid(&partial), None);
        assert_eq!(generation(&partial), None);
        assert_eq!(label(&partial, "a"), None);
        assert!(!is_terminating(&partial));
        assert!(condition(&partial, "Ready").is_none());
        assert!(list_items(&partial).is_empty());
    }

    #[test]
    fn reads_conditions_and_owners() {
        let obj = json!({
            "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "ownerReferences": [
                {"uid": "a", "controller": false}, {"uid": "b", "controller": true}]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3}]}
        });
        assert!(is_terminating(&obj));
        assert_eq!(controller_uid(&obj), Some("b"));
        let ready = condition(&obj, "Ready").unwrap();
        assert!(ready.is_true());
        assert_eq!(ready.observed_generation, Some(3));
        assert_eq!(ready.reason, "");
    }
}
