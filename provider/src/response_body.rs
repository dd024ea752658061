//! What the host's `kube` answers are parsed into: the object (or List) as JSON, without
//! `metadata.managedFields`.
//!
//! A real API server records in every object which manager set which fields
//! ([server-side apply](https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management)):
//! a Job's pod carries an entry of the controller-manager (every field of its template) and
//! one of the kubelet (its status fields). The provider never reads them and
//! never writes an object back whole (its writes are patches of its own fields), so it is
//! skipped while parsing: an answer's JSON tree, which the component builds for every object it
//! reads, is then about what the provider reads. Skipped are the `managedFields` of the
//! object's own `metadata` and of a List's items; anything that is not an object with an
//! object `metadata` is parsed whole.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::kube_api::KubeError;

/// An answer of the host as JSON, without the `managedFields` (see the module docs).
pub fn parse(text: &str) -> Result<Value, KubeError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let pruned = Level::Object.deserialize(&mut deserializer).and_then(|value| deserializer.end().map(|()| value));
    pruned
        .or_else(|_| serde_json::from_str(text))
        .map_err(|e| KubeError::Transport(format!("the host returned a body that is not JSON: {e}")))
}

/// A map the parser builds: an object (its `metadata` a [`Level::Metadata`], a List's `items`
/// each an object) or an object's metadata (without `managedFields`). Anything else fails,
/// and [`parse`] parses the whole text as it is.
#[derive(Debug, Clone, Copy)]
enum Level {
    Object,
    Metadata,
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
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = fields.next_key::<String>()? {
            let value = match (self, key.as_str()) {
                (Level::Object, "metadata") => fields.next_value_seed(Level::Metadata)?,
                (Level::Object, "items") => fields.next_value_seed(Items)?,
                (Level::Metadata, "managedFields") => {
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
