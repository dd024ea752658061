//! Lenient reads of Kubernetes objects as JSON: a missing or oddly typed field reads as absent,
//! so a partial object (right after create, or from an older controller) never panics or fails
//! a whole call. The provider reads what it made and the host proves ownership with the same
//! readers (uid, labels, the controller reference).

use std::borrow::Cow;

use serde_json::Value;

/// The value at a JSON pointer ([RFC 6901](https://www.rfc-editor.org/rfc/rfc6901)), as
/// `Value::pointer` finds it, without its cost: that one allocates two strings per token (it
/// unescapes `~1` and `~0` whether or not they occur), and the provider looks fields up on
/// every object it reads, so a call spent a tenth of its WebAssembly time there.
pub fn at<'a>(object: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(object);
    }
    pointer.strip_prefix('/')?.split('/').try_fold(object, |target, token| {
        let token = if token.contains('~') {
            Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
        } else {
            Cow::Borrowed(token)
        };
        match target {
            Value::Object(map) => map.get(token.as_ref()),
            Value::Array(items) => index(&token).and_then(|i| items.get(i)),
            _ => None,
        }
    })
}

/// An array index token: decimal digits, no sign, no leading zero (RFC 6901, section 4).
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// The string at a JSON pointer, if it is a non-empty string.
pub fn str_at<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    at(object, pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
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
    at(object, "/metadata/generation").and_then(Value::as_i64)
}

/// Whether `metadata.deletionTimestamp` is set: the object is being deleted.
pub fn is_terminating(object: &Value) -> bool {
    at(object, "/metadata/deletionTimestamp").is_some_and(|v| !v.is_null())
}

/// One label's value.
pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    at(object, "/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
}

/// One annotation's value.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    at(object, "/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
}

/// The uid of the object's controller (the ownerReference with `controller: true`).
pub fn controller_uid(object: &Value) -> Option<&str> {
    at(object, "/metadata/ownerReferences")
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
    let refs = at(object, "/metadata/ownerReferences")?.as_array()?;
    let r = refs.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    let field = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ControllerRef {
        api_version: field("apiVersion")?,
        kind: field("kind")?,
        name: field("name")?,
        uid: field("uid")?,
    })
}

/// The `items` of a List object, taken out of it (a list of pods is most of what a call
/// parses; copying it cost as much again).
pub fn list_items(list: &mut Value) -> Vec<Value> {
    match list.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
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
    let found = at(object, "/status/conditions")
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
    let deadline = at(workload, "/spec/activeDeadlineSeconds").and_then(Value::as_i64)?;
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
        assert!(list_items(&mut partial.clone()).is_empty());
    }

    #[test]
    fn a_pointer_finds_what_serde_json_s_finds() {
        let doc = json!({"a": {"b/c": 1, "d~e": 2, "": 3, "list": [10, 11, {"x": "y"}], "01": 4},
            "m~1n": 5, "p q": 6});
        // Comma-separated, the empty pointer first.
        let pointers = ",/,/a,/a/b~1c,/a/d~0e,/a/,/a/list/0,/a/list/2/x,/a/list/3,/a/list/01,/a/list/+1,/a/list/-,/a/01,\
                        /m~01n,/m~1n,/p q,a,/a/list/0/x,/missing/deeper,/a/b~2c,/a/list/18446744073709551616";
        for pointer in pointers.split(',') {
            assert_eq!(at(&doc, pointer), doc.pointer(pointer), "pointer {pointer:?}");
        }
    }

    #[test]
    fn a_list_gives_up_its_items() {
        let mut list = json!({"kind": "PodList", "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]});
        let names: Vec<_> = list_items(&mut list).iter().filter_map(name).map(str::to_string).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(list_items(&mut json!({"items": "none"})).is_empty());
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
