//! What the host's `kube` answers are parsed into: the object (or List) as JSON, without the
//! parts the provider never reads: `metadata.managedFields`, a workload's pod template, and of
//! a pod's spec everything but its containers' names.
//!
//! A real API server records in every object which manager set which fields
//! ([server-side apply](https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management)):
//! a Job's pod carries an entry of the controller-manager (every field of its template) and
//! one of the kubelet (its status fields). A Sandbox carries its pod's template in
//! `spec.podTemplate` and a Job in `spec.template`: the provider wrote them, fingerprints them
//! when it writes them (an annotation, never the live object), and reads the pod itself when it
//! needs to know what runs: its metadata and status, and its containers' names (to pick the one
//! a command runs in). A pod's spec is otherwise its template again, plus what admission added
//! (a real cluster's service-account token volume and default tolerations). The provider never
//! writes an object back whole (its writes are patches of its own fields), so these are skipped
//! while parsing: an answer's JSON tree, which the component builds for every object it reads,
//! is then about what the provider reads. Skipped are those of the object itself and of a
//! List's items; anything that is not an object with an object `metadata` (and, when there is
//! one, an object `spec`, and for a pod a list of object `containers`) is parsed whole.
//!
//! Which object is a pod is told by the request, not the answer: a List's items carry no
//! `kind` (core resources), and a `kind` may come after the `spec` it would decide on.
//!
//! The fake cluster of the unit tests answers through [`parse`] too, so the provider's logic
//! is tested on the shapes it gets from the host.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::api_versions;
use crate::kube_api::{KubeError, ResourceType};

/// An answer of the host to a request for `resource` (an object, a List of them, or a watch
/// event's object) as JSON, without the parts never read (see the module docs).
pub fn parse(text: &str, resource: &ResourceType) -> Result<Value, KubeError> {
    let shape = if api_versions::is_pods(resource) { Shape::Pod } else { Shape::Other };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let pruned =
        Level::Object(shape).deserialize(&mut deserializer).and_then(|value| deserializer.end().map(|()| value));
    pruned
        .or_else(|_| serde_json::from_str(text))
        .map_err(|e| KubeError::Transport(format!("the host returned a body that is not JSON: {e}")))
}

/// What kind of object an answer holds, as far as pruning goes.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Pod,
    Other,
}

/// A map the parser builds: an object (its `metadata` a [`Level::Metadata`], its `spec` a
/// [`Level::Spec`] or [`Level::PodSpec`], a List's `items` each an object of the same shape),
/// an object's metadata (without `managedFields`), a workload's spec (without a pod template),
/// a pod's spec (its `containers` alone) or a container (its `name` alone). Anything else
/// fails, and [`parse`] parses the whole text as it is.
#[derive(Debug, Clone, Copy)]
enum Level {
    Object(Shape),
    Metadata,
    Spec,
    PodSpec,
    Container,
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
            Level::Object(_) => "a Kubernetes object",
            Level::Metadata => "an object's metadata",
            Level::Spec => "an object's spec",
            Level::PodSpec => "a pod's spec",
            Level::Container => "a container",
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = fields.next_key::<String>()? {
            if self.skips(&key) {
                fields.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = match (self, key.as_str()) {
                (Level::Object(_), "metadata") => fields.next_value_seed(Level::Metadata)?,
                (Level::Object(Shape::Pod), "spec") => fields.next_value_seed(Level::PodSpec)?,
                (Level::Object(Shape::Other), "spec") => fields.next_value_seed(Level::Spec)?,
                (Level::Object(shape), "items") => fields.next_value_seed(Items(Some(shape)))?,
                (Level::PodSpec, "containers") => fields.next_value_seed(Items(None))?,
                _ => fields.next_value()?,
            };
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

impl Level {
    /// Whether `key` of this map is one the provider never reads.
    fn skips(self, key: &str) -> bool {
        match self {
            Level::Object(_) => false,
            Level::Metadata => key == "managedFields",
            Level::Spec => matches!(key, "podTemplate" | "template"),
            Level::PodSpec => key != "containers",
            Level::Container => key != "name",
        }
    }
}

/// A list of maps: a List's `items`, each a [`Level::Object`] of the shape, or a pod's
/// `containers` (`None`), each a [`Level::Container`].
struct Items(Option<Shape>);

impl<'de> DeserializeSeed<'de> for Items {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(if self.0.is_some() { "a List's items" } else { "a pod's containers" })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let level = self.0.map_or(Level::Container, Level::Object);
        let mut out = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(item) = items.next_element_seed(level)? {
            out.push(item);
        }
        Ok(Value::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api_versions::{jobs, pods};

    fn sandboxes() -> ResourceType {
        ResourceType::new("agents.x-k8s.io", "v1alpha1", "sandboxes")
    }

    const MANAGED: &str = r#"[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1",
        "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:containers":{"k:{\"name\":\"sandbox\"}":{".":{}}}}}}]"#;

    #[test]
    fn managed_fields_are_dropped_from_objects_and_list_items() {
        let job = format!(
            r#"{{"kind":"Job","metadata":{{"name":"j","managedFields":{MANAGED},"uid":"u"}},"spec":{{"a":1}}}}"#
        );
        assert_eq!(
            parse(&job, &jobs()).unwrap(),
            json!({"kind": "Job", "metadata": {"name": "j", "uid": "u"}, "spec": {"a": 1}})
        );
        let list = format!(
            r#"{{"kind":"JobList","metadata":{{"resourceVersion":"7"}},"items":[{job},{{"metadata":{{"name":"q"}}}}]}}"#
        );
        assert_eq!(
            parse(&list, &jobs()).unwrap(),
            json!({"kind": "JobList", "metadata": {"resourceVersion": "7"}, "items": [
                {"kind": "Job", "metadata": {"name": "j", "uid": "u"}, "spec": {"a": 1}},
                {"metadata": {"name": "q"}},
            ]})
        );
        let pod = format!(r#"{{"metadata":{{"name":"p","managedFields":{MANAGED}}},"status":{{"phase":"Running"}}}}"#);
        assert_eq!(parse(&pod, &pods()).unwrap(), json!({"metadata": {"name": "p"}, "status": {"phase": "Running"}}));
    }

    #[test]
    fn a_workload_s_pod_template_is_dropped_and_the_rest_of_its_spec_kept() {
        let sandbox = r#"{"kind":"Sandbox","metadata":{"name":"s"},"spec":{"podTemplate":{"spec":{"containers":[]}},
            "operatingMode":"Running","shutdownTime":"2026-12-05T10:00:00Z"},"status":{"replicas":1}}"#;
        assert_eq!(
            parse(sandbox, &sandboxes()).unwrap(),
            json!({"kind": "Sandbox", "metadata": {"name": "s"},
                "spec": {"operatingMode": "Running", "shutdownTime": "2026-12-05T10:00:00Z"}, "status": {"replicas": 1}})
        );
        let jobs_list = r#"{"kind":"JobList","metadata":{},"items":[{"metadata":{"name":"j"},
            "spec":{"template":{"spec":{"containers":[]}},"activeDeadlineSeconds":60}}]}"#;
        assert_eq!(
            parse(jobs_list, &jobs()).unwrap(),
            json!({"kind": "JobList", "metadata": {}, "items": [
                {"metadata": {"name": "j"}, "spec": {"activeDeadlineSeconds": 60}},
            ]})
        );
    }

    /// A pod as a real API server returns it, in its field order: `spec.volumes` comes before
    /// `spec.containers`, and admission added the service-account token volume and the default
    /// tolerations.
    const POD: &str = r#"{"metadata":{"name":"pc-1","namespace":"ns","uid":"u1","labels":{"a":"b"},
        "annotations":{"kubectl.kubernetes.io/default-container":"sandbox"}},
        "spec":{"volumes":[{"name":"kube-api-access-x","projected":{"sources":[{"serviceAccountToken":
        {"expirationSeconds":3607,"path":"token"}}]}}],"containers":[{"name":"sandbox","image":"img",
        "env":[{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}}],"resources":{},
        "volumeMounts":[{"name":"kube-api-access-x","mountPath":"/var/run/secrets"}]},{"image":"side","name":"sidecar"}],
        "nodeName":"node-1","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists",
        "effect":"NoExecute","tolerationSeconds":300}],"serviceAccountName":"default"},
        "status":{"phase":"Running","podIP":"10.0.0.7","containerStatuses":[{"name":"sandbox","ready":true,
        "state":{"running":{"startedAt":"2026-12-05T06:00:00Z"}}}]}}"#;

    fn pruned_pod() -> Value {
        let mut pod: Value = serde_json::from_str(POD).unwrap();
        pod["spec"] = json!({"containers": [{"name": "sandbox"}, {"name": "sidecar"}]});
        pod
    }

    #[test]
    fn of_a_pod_s_spec_only_its_containers_names_are_kept() {
        assert_eq!(parse(POD, &pods()).unwrap(), pruned_pod());
        // A List's items carry no kind: the request says they are pods.
        let list = format!(r#"{{"kind":"PodList","metadata":{{"resourceVersion":"9"}},"items":[{POD},{POD}]}}"#);
        assert_eq!(
            parse(&list, &pods()).unwrap(),
            json!({"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": [pruned_pod(), pruned_pod()]})
        );
    }

    #[test]
    fn a_pod_s_spec_is_pruned_only_in_answers_about_pods() {
        // The same text as the answer about another resource (a pods-named one of another
        // group included) keeps its spec whole.
        for other in [sandboxes(), jobs(), ResourceType::new("metrics.k8s.io", "v1beta1", "pods")] {
            assert_eq!(parse(POD, &other).unwrap(), serde_json::from_str::<Value>(POD).unwrap(), "{other:?}");
        }
    }

    #[test]
    fn only_a_spec_s_own_template_goes() {
        // A template key deeper down or outside the spec stays.
        let text = r#"{"metadata":{"annotations":{"template":"a"}},"spec":{"containers":[{"template":"b"}],
            "volumes":[{"ephemeral":{"volumeClaimTemplate":{"spec":{}}}}]},"data":{"podTemplate":"c"}}"#;
        assert_eq!(parse(text, &sandboxes()).unwrap(), serde_json::from_str::<Value>(text).unwrap());
    }

    #[test]
    fn only_managed_fields_of_metadata_go() {
        // A field of that name elsewhere (a ConfigMap's data, a spec) is the object's own.
        let text = r#"{"metadata":{"annotations":{"managedFields":"kept"}},"data":{"managedFields":"kept too"}}"#;
        assert_eq!(parse(text, &pods()).unwrap(), serde_json::from_str::<Value>(text).unwrap());
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
            r#"{"metadata": {}, "spec": {"volumes": [], "containers": "not a list"}}"#,
            r#"{"metadata": {}, "spec": {"volumes": [], "containers": [{"name": "a"}, "not a map"]}}"#,
        ] {
            for resource in [pods(), sandboxes()] {
                let parsed = parse(text, &resource).unwrap();
                assert_eq!(parsed, serde_json::from_str::<Value>(text).unwrap(), "{text} as {resource:?}");
            }
        }
    }

    #[test]
    fn what_is_not_json_is_a_transport_error() {
        for text in ["", "{", r#"{"metadata": {}} trailing"#, "{\"a\": tru}"] {
            let parsed = parse(text, &pods());
            assert!(matches!(parsed, Err(KubeError::Transport(m)) if m.contains("not JSON")), "{text}");
        }
    }
}
