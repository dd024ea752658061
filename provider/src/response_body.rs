//! What the host's `kube` answers are parsed into: the object (or List) as JSON, without the
//! parts the provider never reads: `metadata.managedFields` and a workload's pod template.
//!
//! A real API server records in every object which manager set which fields
//! ([server-side apply](https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management)):
//! a Job's pod carries an entry of the controller-manager (every field of its template) and
//! one of the kubelet (its status fields). A Sandbox carries its pod's template in
//! `spec.podTemplate` and a Job in `spec.template`: the provider wrote them, fingerprints them
//! when it writes them (an annotation, never the live object), and reads the pod itself when it
//! needs to know what runs. It never writes an object back whole (its writes are patches of its
//! own fields), so these are skipped while parsing: an answer's JSON tree, which the component
//! builds for every object it reads, is then about what the provider reads. Skipped are those
//! of the object itself and of a List's items; anything that is not an object with an object
//! `metadata` (and, when there is one, an object `spec`) is parsed whole.
//!
//! The fake cluster of the unit tests answers through [`parse`] too, so the provider's logic
//! is tested on the shapes it gets from the host.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::kube_api::KubeError;

/// An answer of the host as JSON, without the parts never read (see the module docs).
pub fn parse(text: &str) -> Result<Value, KubeError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let pruned = Level::Object.deserialize(&mut deserializer).and_then(|value| deserializer.end().map(|()| value));
    pruned
        .or_else(|_| serde_json::from_str(text))
        .map_err(|e| KubeError::Transport(format!("the host returned a body that is not JSON: {e}")))
}

/// A map the parser builds: an object (its `metadata` a [`Level::Metadata`], its `spec` a
/// [`Level::Spec`], a List's `items` each an object), an object's metadata (without
/// `managedFields`) or its spec (without a pod template). Anything else fails, and [`parse`]
/// parses the whole text as it is.
#[derive(Debug, Clone, Copy)]
enum Level {
    Object,
    Metadata,
    Spec,
}

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Level {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            Level::Object => "a Kubernetes object",
            Level::Metadata => "an object's metadata",
            Level::Spec => "an object's spec",
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = fields.next_key::<String>()? {
            let value = match (self, key.as_str()) {
                (Level::Object, "metadata") => fields.next_value_seed(Level::Metadata)?,
                (Level::Object, "spec") => fields.next_value_seed(Level::Spec)?,
                (Level::Object, "items") => fields.next_value_seed(Items)?,
                (Level::Metadata, "managedFields") | (Level::Spec, "podTemplate" | "template") => {
                    fields.next_value::<IgnoredAny>()?;
                    continue;
                }
                _ => fields.next_value()?,
            };
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// A List's `items`, each a [`Level::Object`].
struct Items;

impl<'de> DeserializeSeed<'de> for Items {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a List's items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(item) = items.next_element_seed(Level::Object)? {
            out.push(item);
        }
        Ok(Value::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MANAGED: &str = r#"[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1",
        "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:containers":{"k:{\"name\":\"sandbox\"}":{".":{}}}}}}]"#;

    #[test]
    fn managed_fields_are_dropped_from_objects_and_list_items() {
        let pod = format!(
            r#"{{"kind":"Pod","metadata":{{"name":"p","managedFields":{MANAGED},"uid":"u"}},"spec":{{"a":1}}}}"#
        );
        assert_eq!(
            parse(&pod).unwrap(),
            json!({"kind": "Pod", "metadata": {"name": "p", "uid": "u"}, "spec": {"a": 1}})
        );
        let list = format!(
            r#"{{"kind":"PodList","metadata":{{"resourceVersion":"7"}},"items":[{pod},{{"metadata":{{"name":"q"}}}}]}}"#
        );
        assert_eq!(
            parse(&list).unwrap(),
            json!({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [
                {"kind": "Pod", "metadata": {"name": "p", "uid": "u"}, "spec": {"a": 1}},
                {"metadata": {"name": "q"}},
            ]})
        );
    }

    #[test]
    fn a_workload_s_pod_template_is_dropped_and_the_rest_of_its_spec_kept() {
        let sandbox = r#"{"kind":"Sandbox","metadata":{"name":"s"},"spec":{"podTemplate":{"spec":{"containers":[]}},
            "operatingMode":"Running","shutdownTime":"2026-12-05T10:00:00Z"},"status":{"replicas":1}}"#;
        assert_eq!(
            parse(sandbox).unwrap(),
            json!({"kind": "Sandbox", "metadata": {"name": "s"},
                "spec": {"operatingMode": "Running", "shutdownTime": "2026-12-05T10:00:00Z"}, "status": {"replicas": 1}})
        );
        let jobs = r#"{"kind":"JobList","metadata":{},"items":[{"metadata":{"name":"j"},
            "spec":{"template":{"spec":{"containers":[]}},"activeDeadlineSeconds":60}}]}"#;
        assert_eq!(
            parse(jobs).unwrap(),
            json!({"kind": "JobList", "metadata": {}, "items": [
                {"metadata": {"name": "j"}, "spec": {"activeDeadlineSeconds": 60}},
            ]})
        );
    }

    #[test]
    fn only_a_spec_s_own_template_goes() {
        // A pod's spec has no template; a template key deeper down or outside the spec stays.
        let text = r#"{"metadata":{"annotations":{"template":"a"}},"spec":{"containers":[{"template":"b"}],
            "volumes":[{"ephemeral":{"volumeClaimTemplate":{"spec":{}}}}]},"data":{"podTemplate":"c"}}"#;
        assert_eq!(parse(text).unwrap(), serde_json::from_str::<Value>(text).unwrap());
    }

    #[test]
    fn only_managed_fields_of_metadata_go() {
        // A field of that name elsewhere (a ConfigMap's data, a spec) is the object's own.
        let text = r#"{"metadata":{"annotations":{"managedFields":"kept"}},"data":{"managedFields":"kept too"}}"#;
        assert_eq!(parse(text).unwrap(), serde_json::from_str::<Value>(text).unwrap());
    }

    #[test]
    fn what_is_not_an_object_is_parsed_whole() {
        for text in [
            r#""a string""#,
            "[1, 2]",
            "42",
            "null",
            r#"{"metadata": "odd", "managedFields": []}"#,
            r#"{"items": [1, {"metadata": {}}]}"#,
            r#"{"items": {"not": "a list"}}"#,
            r#"{"metadata": {}, "spec": ["not", "a map"], "template": 1}"#,
        ] {
            assert_eq!(parse(text).unwrap(), serde_json::from_str::<Value>(text).unwrap(), "{text}");
        }
    }

    #[test]
    fn what_is_not_json_is_a_transport_error() {
        for text in ["", "{", r#"{"metadata": {}} trailing"#, "{\"a\": tru}"] {
            assert!(matches!(parse(text), Err(KubeError::Transport(m)) if m.contains("not JSON")), "{text}");
        }
    }
}
