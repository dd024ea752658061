//! The fake's object store: keys, resourceVersions (cluster-wide), uids and generations, the
//! event history watches read, fault injection and the call log, selectors, and deletion with
//! finalizers and background garbage collection.

use contract::k8s::selectors::{FieldSelector, LabelSelector};
use serde_json::json;

use super::*;
use crate::clock::Clock;
use crate::rfc3339;

pub(super) fn key(group: &str, plural: &str, namespace: Option<&str>, name: &str) -> Key {
    (group.to_string(), plural.to_string(), namespace.unwrap_or("").to_string(), name.to_string())
}

/// The key of an object the tests name by plural (the group follows from it).
pub(super) fn scheduled_key(plural: &str, namespace: &str, name: &str) -> Key {
    let group = match plural {
        SANDBOXES => SANDBOX_GROUP,
        "jobs" => "batch",
        CLAIMS | TEMPLATES | WARM_POOLS => EXTENSIONS_GROUP,
        _ => "",
    };
    key(group, plural, Some(namespace), name)
}

pub(super) fn not_found(plural: &str, name: &str) -> KubeError {
    KubeError::NotFound(format!("{plural} \"{name}\" not found"))
}

pub(super) fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// RFC 7386 merge patch, as the API server applies `application/merge-patch+json`.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// `?labelSelector=` with the API server's grammar (`in`, `notin`, `!`, ...); a selector it
/// refuses matches nothing.
pub(super) fn labels_match(object: &Value, selector: Option<&str>) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    LabelSelector::parse(selector).is_ok_and(|s| s.matches_json(object.pointer("/metadata/labels")))
}

/// `?fieldSelector=` on the fields every kind supports (`metadata.name`, `metadata.namespace`).
pub(super) fn fields_match(object: &Value, selector: Option<&str>) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    FieldSelector::parse(selector).is_ok_and(|s| {
        s.matches(|field| match field {
            "metadata.name" | "metadata.namespace" => {
                object.pointer(&format!("/{}", field.replace('.', "/"))).and_then(Value::as_str).map(String::from)
            }
            _ => None,
        })
    })
}

impl State {
    pub(super) fn now_rfc3339(&self) -> String {
        rfc3339::format_seconds(self.clock.now_millis())
    }

    pub(super) fn record(&mut self, verb: Verb, plural: &str, name: Option<&str>) -> Result<(), KubeError> {
        self.run_due();
        self.calls.push(Call { verb, plural: plural.to_string(), name: name.map(str::to_string) });
        if self.lost() {
            return Err(KubeError::Transport("connect: connection refused".to_string()));
        }
        self.fault(verb, plural, false)
    }

    pub(super) fn lost(&self) -> bool {
        self.lost_at.is_some_and(|at| self.clock.monotonic() >= at)
    }

    /// The error of a fault due now, before (`after` false) or after the call takes effect.
    pub(super) fn fault(&mut self, verb: Verb, plural: &str, after: bool) -> Result<(), KubeError> {
        for fault in &mut self.faults {
            if fault.verb == verb && fault.plural == plural && fault.after == after && fault.times > 0 {
                if fault.skip > 0 {
                    fault.skip -= 1;
                } else {
                    fault.times -= 1;
                    return Err(fault.error.clone());
                }
            }
        }
        Ok(())
    }

    pub(super) fn check_served(&self, resource: &ResourceType) -> Result<(), KubeError> {
        let served = self.served.get(&resource.group).is_some_and(|v| v.contains(&resource.version));
        if served {
            Ok(())
        } else {
            Err(KubeError::NotFound("the server could not find the requested resource".to_string()))
        }
    }

    pub(super) fn present(resource: &ResourceType, object: &Value) -> Value {
        let mut o = object.clone();
        o["apiVersion"] = json!(resource.api_version());
        // As the component glue parses the host's answers: without the parts never read.
        crate::response_body::parse(&o.to_string(), resource).unwrap_or(o)
    }

    pub(super) fn emit(&mut self, key: &Key, kind: EventKind, object: &Value) {
        self.history.push(Event {
            rv: self.rv,
            group: key.0.clone(),
            plural: key.1.clone(),
            namespace: key.2.clone(),
            kind,
            object: object.clone(),
        });
    }

    pub(super) fn store(&mut self, key: &Key, mut object: Value, kind: EventKind) -> Value {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.emit(key, kind, &object);
        self.objects.insert(key.clone(), object.clone());
        object
    }

    pub(super) fn insert_new(&mut self, key: &Key, mut object: Value) -> Value {
        self.seq += 1;
        let meta = &mut object["metadata"];
        meta["uid"] = json!(format!("uid-{}", self.seq));
        meta["generation"] = json!(1);
        meta["creationTimestamp"] = json!(rfc3339::format_seconds(self.clock.now_millis()));
        meta["name"] = json!(key.3);
        if !key.2.is_empty() {
            meta["namespace"] = json!(key.2);
        }
        if let Some(data) = object.get("stringData").and_then(Value::as_object).cloned() {
            for (k, v) in data {
                object["data"][k] = json!(base64(v.as_str().unwrap_or("").as_bytes()));
            }
            if let Some(o) = object.as_object_mut() {
                o.remove("stringData");
            }
        }
        let stored = self.store(key, object, EventKind::Added);
        self.react_created(key);
        stored
    }

    pub(super) fn update(&mut self, key: &Key, object: Value) -> Value {
        self.store(key, object, EventKind::Modified)
    }

    pub(super) fn remove(&mut self, key: &Key, propagate: bool) {
        let Some(mut object) = self.objects.remove(key) else {
            return;
        };
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.emit(key, EventKind::Deleted, &object);
        let uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
        if propagate {
            let dependents: Vec<Key> = self
                .objects
                .iter()
                .filter(|(_, o)| {
                    o.pointer("/metadata/ownerReferences")
                        .and_then(Value::as_array)
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == json!(uid)))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for dependent in dependents {
                self.remove(&dependent, true);
            }
        }
        if key.1 == "pods" {
            self.sync_owner(&object);
            self.replace_pod(&object);
        }
        if key.1 == SANDBOXES {
            self.claim_lost_sandbox(&object);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn selectors() {
        let o = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}});
        assert!(labels_match(&o, Some("x=1,y==2")));
        assert!(labels_match(&o, Some("x,!z,y!=3")));
        assert!(!labels_match(&o, Some("x=2")));
        assert!(fields_match(&o, Some("metadata.name=a")));
        assert!(!fields_match(&o, Some("metadata.name=b")));
    }

    #[test]
    fn set_based_selectors_match_as_on_the_api_server() {
        // The equality-only matcher read "x in (1,3)" as a label named "x in (1" and matched nothing.
        let o = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"x": "1", "y": "2"}}});
        assert!(labels_match(&o, Some("x in (1,3)")));
        assert!(labels_match(&o, Some("y notin (3),x")));
        assert!(!labels_match(&o, Some("x in (2,3)")));
        assert!(!labels_match(&o, Some("x=(")), "a selector the server refuses matches nothing");
        assert!(fields_match(&o, Some("metadata.namespace=ns,metadata.name!=b")));
    }
}
