//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for request bodies:
//! kube-apiserver accepts it for built-in kinds, and kubectl's typed clients send it (1.33's
//! `create namespace|secret|configmap|serviceaccount`, every version's `create token`).
//!
//! The wire format is apimachinery's (`runtime/serializer/protobuf`): the magic bytes `k8s\0`,
//! then a `runtime.Unknown` whose `typeMeta` names the kind and whose `raw` holds the object's
//! message. The messages are `k8s-pb`'s (generated from upstream's `generated.proto`); each
//! decoded kind becomes the JSON every handler takes. A built-in kind this module does not map
//! is a 415 that says so, never a body read with fields silently missing.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::api::authentication::v1::TokenRequest;
use k8s_pb::api::authorization::v1::SelfSubjectAccessReview;
use k8s_pb::api::batch::v1::Job;
use k8s_pb::api::core::v1::{
    ConfigMap, Container, Namespace, ObjectReference, PodTemplateSpec, Secret, ServiceAccount,
};
use k8s_pb::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value, json};

use crate::status::ApiError;

/// The media type of Kubernetes' protobuf encoding.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// Whether a `Content-Type` is Kubernetes' protobuf encoding.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|media| media.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

fn bad(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("the body of the request could not be decoded as {MEDIA_TYPE}: {why}"))
}

/// Inserts the string fields that are set. Go's generated marshalling writes a non-pointer
/// string even when empty, where its JSON would leave it out: an empty string is absent.
fn strings(pairs: &[(&str, &Option<String>)]) -> Value {
    let map: Map<String, Value> = pairs
        .iter()
        .filter_map(|(k, v)| v.as_ref().filter(|v| !v.is_empty()).map(|v| (k.to_string(), json!(v))))
        .collect();
    Value::Object(map)
}

/// A non-pointer Go bool: written as `false` on the wire, left out of JSON unless true.
fn flag(doc: &mut Value, key: &str, value: Option<bool>) {
    if value == Some(true) {
        doc[key] = json!(true);
    }
}

fn string_map(map: &BTreeMap<String, String>) -> Value {
    json!(map)
}

fn bytes_map(map: &BTreeMap<String, Vec<u8>>) -> Value {
    let engine = base64::engine::general_purpose::STANDARD;
    Value::Object(map.iter().map(|(k, v)| (k.clone(), json!(engine.encode(v)))).collect())
}

/// The envelope's kind and apiVersion, and the object's bytes.
fn open(body: &[u8]) -> Result<(Value, Vec<u8>, String), ApiError> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| bad("the body does not start with the protobuf magic"))?;
    let unknown = Unknown::decode(envelope).map_err(bad)?;
    if unknown.content_encoding.as_deref().is_some_and(|e| !e.is_empty()) {
        return Err(bad("content encodings are not supported"));
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    let kind = type_meta.kind.clone().unwrap_or_default();
    let doc = strings(&[("apiVersion", &type_meta.api_version), ("kind", &type_meta.kind)]);
    Ok((doc, unknown.raw.unwrap_or_default(), kind))
}

/// The ObjectMeta fields a client may send (the server resets the others).
fn object_meta(meta: Option<ObjectMeta>) -> Value {
    let meta = meta.unwrap_or_default();
    let mut out = strings(&[
        ("name", &meta.name),
        ("generateName", &meta.generate_name),
        ("namespace", &meta.namespace),
        ("uid", &meta.uid),
        ("resourceVersion", &meta.resource_version),
    ]);
    if !meta.labels.is_empty() {
        out["labels"] = string_map(&meta.labels);
    }
    if !meta.annotations.is_empty() {
        out["annotations"] = string_map(&meta.annotations);
    }
    if !meta.finalizers.is_empty() {
        out["finalizers"] = json!(meta.finalizers);
    }
    if !meta.owner_references.is_empty() {
        let refs: Vec<Value> = meta
            .owner_references
            .iter()
            .map(|r| {
                let mut v =
                    strings(&[("apiVersion", &r.api_version), ("kind", &r.kind), ("name", &r.name), ("uid", &r.uid)]);
                if let Some(c) = r.controller {
                    v["controller"] = json!(c);
                }
                if let Some(b) = r.block_owner_deletion {
                    v["blockOwnerDeletion"] = json!(b);
                }
                v
            })
            .collect();
        out["ownerReferences"] = json!(refs);
    }
    out
}

fn object_reference(r: &ObjectReference) -> Value {
    strings(&[
        ("kind", &r.kind),
        ("namespace", &r.namespace),
        ("name", &r.name),
        ("uid", &r.uid),
        ("apiVersion", &r.api_version),
        ("resourceVersion", &r.resource_version),
        ("fieldPath", &r.field_path),
    ])
}

fn namespace(raw: &[u8], mut doc: Value) -> Result<Value, ApiError> {
    let ns = Namespace::decode(raw).map_err(bad)?;
    doc["metadata"] = object_meta(ns.metadata);
    if let Some(spec) = ns.spec.filter(|s| !s.finalizers.is_empty()) {
        doc["spec"] = json!({"finalizers": spec.finalizers});
    }
    Ok(doc)
}

fn secret(raw: &[u8], mut doc: Value) -> Result<Value, ApiError> {
    let secret = Secret::decode(raw).map_err(bad)?;
    doc["metadata"] = object_meta(secret.metadata);
    if !secret.data.is_empty() {
        doc["data"] = bytes_map(&secret.data);
    }
    if !secret.string_data.is_empty() {
        doc["stringData"] = string_map(&secret.string_data);
    }
    if let Some(t) = secret.r#type {
        doc["type"] = json!(t);
    }
    if let Some(i) = secret.immutable {
        doc["immutable"] = json!(i);
    }
    Ok(doc)
}

fn config_map(raw: &[u8], mut doc: Value) -> Result<Value, ApiError> {
    let cm = ConfigMap::decode(raw).map_err(bad)?;
    doc["metadata"] = object_meta(cm.metadata);
    if !cm.data.is_empty() {
        doc["data"] = string_map(&cm.data);
    }
    if !cm.binary_data.is_empty() {
        doc["binaryData"] = bytes_map(&cm.binary_data);
    }
    if let Some(i) = cm.immutable {
        doc["immutable"] = json!(i);
    }
    Ok(doc)
}

fn service_account(raw: &[u8], mut doc: Value) -> Result<Value, ApiError> {
    let sa = ServiceAccount::decode(raw).map_err(bad)?;
    doc["metadata"] = object_meta(sa.metadata);
    if !sa.secrets.is_empty() {
        doc["secrets"] = json!(sa.secrets.iter().map(object_reference).collect::<Vec<_>>());
    }
    if !sa.image_pull_secrets.is_empty() {
        let names: Vec<Value> = sa.image_pull_secrets.iter().map(|r| strings(&[("name", &r.name)])).collect();
        doc["imagePullSecrets"] = json!(names);
    }
    if let Some(a) = sa.automount_service_account_token {
        doc["automountServiceAccountToken"] = json!(a);
    }
    Ok(doc)
}

fn self_subject_access_review(raw: &[u8], mut doc: Value) -> Result<Value, ApiError> {
    let review = SelfSubjectAccessReview::decode(raw).map_err(bad)?;
    let meta = review.metadata.unwrap_or_default();
    doc["metadata"] = strings(&[("name", &meta.name), ("namespace", &meta.namespace)]);
    let spec = review.spec.unwrap_or_default();
    doc["spec"] = json!({});
    if let Some(r) = spec.resource_attributes {
        doc["spec"]["resourceAttributes"] = strings(&[
            ("namespace", &r.namespace),
            ("verb", &r.verb),
            ("group", &r.group),
            ("version", &r.version),
            ("resource", &r.resource),
            ("subresource", &r.subresource),
            ("name", &r.name),
        ]);
    }
    if let Some(n) = spec.non_resource_attributes {
        doc["spec"]["nonResourceAttributes"] = strings(&[("path", &n.path), ("verb", &n.verb)]);
    }
    Ok(doc)
}

fn token_request(raw: &[u8], mut doc: Value) -> Result<Value, ApiError> {
    let request = TokenRequest::decode(raw).map_err(bad)?;
    let meta = request.metadata.unwrap_or_default();
    doc["metadata"] = strings(&[("name", &meta.name), ("namespace", &meta.namespace)]);
    let spec = request.spec.unwrap_or_default();
    doc["spec"] = json!({"audiences": spec.audiences});
    if let Some(seconds) = spec.expiration_seconds {
        doc["spec"]["expirationSeconds"] = json!(seconds);
    }
    if let Some(r) = spec.bound_object_ref {
        doc["spec"]["boundObjectRef"] =
            strings(&[("kind", &r.kind), ("apiVersion", &r.api_version), ("name", &r.name), ("uid", &r.u_id)]);
    }
    Ok(doc)
}

/// Fails when a decoded message still holds a field after the mapped ones were taken out, so
/// no field a client sent is silently dropped.
fn nothing_left<T: Default + PartialEq>(left: &T, what: &str) -> Result<(), ApiError> {
    if *left == T::default() {
        return Ok(());
    }
    Err(ApiError::unsupported_media_type(format!(
        "this {what} sent as {MEDIA_TYPE} sets fields the embedded cluster does not decode from protobuf; send it as application/json"
    )))
}

fn set<T: serde::Serialize>(doc: &mut Value, key: &str, value: Option<T>) {
    if let Some(v) = value {
        doc[key] = json!(v);
    }
}

fn quantities(map: BTreeMap<String, k8s_pb::apimachinery::pkg::api::resource::Quantity>) -> Value {
    Value::Object(map.into_iter().map(|(k, q)| (k, json!(q.string.unwrap_or_default()))).collect())
}

fn container(mut c: Container) -> Result<Value, ApiError> {
    let mut out = strings(&[
        ("name", &c.name.take()),
        ("image", &c.image.take()),
        ("workingDir", &c.working_dir.take()),
        ("imagePullPolicy", &c.image_pull_policy.take()),
        ("terminationMessagePath", &c.termination_message_path.take()),
        ("terminationMessagePolicy", &c.termination_message_policy.take()),
    ]);
    if !c.command.is_empty() {
        out["command"] = json!(std::mem::take(&mut c.command));
    }
    if !c.args.is_empty() {
        out["args"] = json!(std::mem::take(&mut c.args));
    }
    let mut env = Vec::new();
    for mut e in std::mem::take(&mut c.env) {
        env.push(strings(&[("name", &e.name.take()), ("value", &e.value.take())]));
        nothing_left(&e, "container env var")?;
    }
    if !env.is_empty() {
        out["env"] = json!(env);
    }
    if let Some(mut r) = c.resources.take() {
        let mut resources = json!({});
        if !r.limits.is_empty() {
            resources["limits"] = quantities(std::mem::take(&mut r.limits));
        }
        if !r.requests.is_empty() {
            resources["requests"] = quantities(std::mem::take(&mut r.requests));
        }
        nothing_left(&r, "container's resources")?;
        out["resources"] = resources;
    }
    let mut ports = Vec::new();
    for mut p in std::mem::take(&mut c.ports) {
        let mut port = strings(&[("name", &p.name.take()), ("protocol", &p.protocol.take())]);
        set(&mut port, "containerPort", p.container_port.take());
        nothing_left(&p, "container port")?;
        ports.push(port);
    }
    if !ports.is_empty() {
        out["ports"] = json!(ports);
    }
    flag(&mut out, "stdin", c.stdin.take());
    flag(&mut out, "stdinOnce", c.stdin_once.take());
    flag(&mut out, "tty", c.tty.take());
    nothing_left(&c, "container")?;
    Ok(out)
}

fn pod_template(mut t: PodTemplateSpec) -> Result<Value, ApiError> {
    let mut out = json!({"metadata": object_meta(t.metadata.take())});
    if let Some(mut spec) = t.spec.take() {
        let mut doc = strings(&[
            ("restartPolicy", &spec.restart_policy.take()),
            ("dnsPolicy", &spec.dns_policy.take()),
            ("serviceAccountName", &spec.service_account_name.take()),
            ("nodeName", &spec.node_name.take()),
            ("schedulerName", &spec.scheduler_name.take()),
            ("priorityClassName", &spec.priority_class_name.take()),
            ("serviceAccount", &spec.service_account.take()),
            ("hostname", &spec.hostname.take()),
            ("subdomain", &spec.subdomain.take()),
        ]);
        flag(&mut doc, "hostNetwork", spec.host_network.take());
        flag(&mut doc, "hostPID", spec.host_pid.take());
        flag(&mut doc, "hostIPC", spec.host_ipc.take());
        let containers: Result<Vec<Value>, ApiError> =
            std::mem::take(&mut spec.containers).into_iter().map(container).collect();
        doc["containers"] = json!(containers?);
        set(&mut doc, "terminationGracePeriodSeconds", spec.termination_grace_period_seconds.take());
        set(&mut doc, "activeDeadlineSeconds", spec.active_deadline_seconds.take());
        set(&mut doc, "automountServiceAccountToken", spec.automount_service_account_token.take());
        if !spec.node_selector.is_empty() {
            doc["nodeSelector"] = string_map(&std::mem::take(&mut spec.node_selector));
        }
        nothing_left(&spec, "pod template's spec")?;
        out["spec"] = doc;
    }
    nothing_left(&t, "pod template")?;
    Ok(out)
}

fn label_selector(mut s: LabelSelector) -> Result<Value, ApiError> {
    let mut out = json!({});
    if !s.match_labels.is_empty() {
        out["matchLabels"] = string_map(&std::mem::take(&mut s.match_labels));
    }
    let mut expressions = Vec::new();
    for mut e in std::mem::take(&mut s.match_expressions) {
        let mut expr = strings(&[("key", &e.key.take()), ("operator", &e.operator.take())]);
        expr["values"] = json!(std::mem::take(&mut e.values));
        nothing_left(&e, "selector expression")?;
        expressions.push(expr);
    }
    if !expressions.is_empty() {
        out["matchExpressions"] = json!(expressions);
    }
    nothing_left(&s, "label selector")?;
    Ok(out)
}

fn job(raw: &[u8], mut doc: Value) -> Result<Value, ApiError> {
    let mut job = Job::decode(raw).map_err(bad)?;
    doc["metadata"] = object_meta(job.metadata.take());
    job.status = None;
    if let Some(mut spec) = job.spec.take() {
        let mut out = strings(&[
            ("completionMode", &spec.completion_mode.take()),
            ("podReplacementPolicy", &spec.pod_replacement_policy.take()),
        ]);
        set(&mut out, "parallelism", spec.parallelism.take());
        set(&mut out, "completions", spec.completions.take());
        set(&mut out, "activeDeadlineSeconds", spec.active_deadline_seconds.take());
        set(&mut out, "backoffLimit", spec.backoff_limit.take());
        set(&mut out, "manualSelector", spec.manual_selector.take());
        set(&mut out, "ttlSecondsAfterFinished", spec.ttl_seconds_after_finished.take());
        set(&mut out, "suspend", spec.suspend.take());
        if let Some(selector) = spec.selector.take() {
            out["selector"] = label_selector(selector)?;
        }
        if let Some(template) = spec.template.take() {
            out["template"] = pod_template(template)?;
        }
        nothing_left(&spec, "Job's spec")?;
        doc["spec"] = out;
    }
    nothing_left(&job, "Job")?;
    Ok(doc)
}

/// A protobuf body as the JSON body the handlers take (its `apiVersion` and `kind` are the
/// envelope's, so the handler checks them as it checks JSON bodies).
pub fn object_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let (doc, raw, kind) = open(body)?;
    let doc = match kind.as_str() {
        "Namespace" => namespace(&raw, doc)?,
        "Secret" => secret(&raw, doc)?,
        "ConfigMap" => config_map(&raw, doc)?,
        "ServiceAccount" => service_account(&raw, doc)?,
        "TokenRequest" => token_request(&raw, doc)?,
        "SelfSubjectAccessReview" => self_subject_access_review(&raw, doc)?,
        "Job" => job(&raw, doc)?,
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the embedded cluster decodes {MEDIA_TYPE} bodies of Namespace, Secret, ConfigMap, ServiceAccount, Job, TokenRequest and SelfSubjectAccessReview only, not {:?}; send this object as application/json",
                other.chars().take(60).collect::<String>()
            )));
        }
    };
    serde_json::to_vec(&doc).map_err(bad)
}

#[cfg(test)]
mod tests {
    use k8s_pb::api::authentication::v1::{BoundObjectReference, TokenRequestSpec};
    use k8s_pb::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

    use super::*;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta { api_version: Some(api_version.into()), kind: Some(kind.into()) }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        [MAGIC, &unknown.encode_to_vec()].concat()
    }

    fn decoded(body: &[u8]) -> Value {
        let json = object_json(body).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_slice(&json).unwrap_or_default()
    }

    fn meta(name: &str) -> Option<ObjectMeta> {
        Some(ObjectMeta { name: Some(name.into()), ..Default::default() })
    }

    #[test]
    fn a_token_request_becomes_its_json() {
        let request = TokenRequest {
            metadata: meta("sa"),
            spec: Some(TokenRequestSpec {
                audiences: vec!["a".into()],
                bound_object_ref: Some(BoundObjectReference {
                    kind: Some("Pod".into()),
                    api_version: Some("v1".into()),
                    name: Some("p".into()),
                    u_id: None,
                }),
                expiration_seconds: Some(600),
            }),
            status: None,
        };
        assert_eq!(
            decoded(&envelope("authentication.k8s.io/v1", "TokenRequest", request.encode_to_vec())),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "sa"},
                "spec": {"audiences": ["a"], "expirationSeconds": 600,
                    "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}})
        );
    }

    #[test]
    fn an_empty_token_request_has_an_empty_spec() {
        assert_eq!(
            decoded(&envelope("authentication.k8s.io/v1", "TokenRequest", Vec::new())),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {},
                "spec": {"audiences": []}})
        );
    }

    #[test]
    fn a_secret_keeps_its_bytes_labels_and_owner() {
        let mut data = BTreeMap::new();
        data.insert("a".to_string(), vec![0u8, 255, b'x']);
        let mut labels = BTreeMap::new();
        labels.insert("team".to_string(), "agents".to_string());
        let secret = Secret {
            metadata: Some(ObjectMeta {
                name: Some("creds".into()),
                labels,
                owner_references: vec![OwnerReference {
                    api_version: Some("v1".into()),
                    kind: Some("ConfigMap".into()),
                    name: Some("owner".into()),
                    uid: Some("u1".into()),
                    controller: Some(true),
                    block_owner_deletion: None,
                }],
                ..Default::default()
            }),
            immutable: None,
            data,
            string_data: BTreeMap::new(),
            r#type: Some("Opaque".into()),
        };
        assert_eq!(
            decoded(&envelope("v1", "Secret", secret.encode_to_vec())),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": {"a": "AP94"},
                "metadata": {"name": "creds", "labels": {"team": "agents"}, "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u1", "controller": true}]}})
        );
    }

    #[test]
    fn namespaces_config_maps_and_service_accounts_decode() {
        let ns = Namespace { metadata: meta("n"), spec: None, status: None };
        assert_eq!(
            decoded(&envelope("v1", "Namespace", ns.encode_to_vec())),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
        );
        let mut data = BTreeMap::new();
        data.insert("k".to_string(), "v".to_string());
        let cm = ConfigMap { metadata: meta("c"), immutable: Some(true), data, binary_data: BTreeMap::new() };
        assert_eq!(
            decoded(&envelope("v1", "ConfigMap", cm.encode_to_vec())),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"},
                "immutable": true})
        );
        let sa =
            ServiceAccount { metadata: meta("s"), automount_service_account_token: Some(false), ..Default::default() };
        assert_eq!(
            decoded(&envelope("v1", "ServiceAccount", sa.encode_to_vec())),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "s"},
                "automountServiceAccountToken": false})
        );
    }

    #[test]
    fn a_kind_not_mapped_is_a_415_and_garbage_a_400() {
        assert_eq!(object_json(&envelope("v1", "Pod", Vec::new())).err().map(|e| e.code), Some(415));
        assert_eq!(object_json(b"{}").err().map(|e| e.code), Some(400));
        assert_eq!(object_json(b"k8s\0\xff\xff").err().map(|e| e.code), Some(400));
    }

    #[test]
    fn a_job_decodes_and_a_field_not_mapped_is_refused() {
        use k8s_pb::api::batch::v1::JobSpec;
        use k8s_pb::api::core::v1::PodSpec;
        let template = |hostname: Option<String>| PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: Some("once".into()),
                    image: Some("busybox".into()),
                    command: vec!["true".into()],
                    ..Default::default()
                }],
                restart_policy: Some("Never".into()),
                host_network: Some(false),
                subdomain: Some(String::new()),
                hostname,
                ..Default::default()
            }),
        };
        let job = |hostname: Option<String>| Job {
            metadata: meta("once"),
            spec: Some(JobSpec { template: Some(template(hostname)), ..Default::default() }),
            status: None,
        };
        assert_eq!(
            decoded(&envelope("batch/v1", "Job", job(None).encode_to_vec())),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"}, "spec": {"template": {
                "metadata": {}, "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "once", "image": "busybox", "command": ["true"]}]}}}})
        );
        let volumes = Job {
            spec: Some(JobSpec {
                template: Some(PodTemplateSpec {
                    spec: Some(PodSpec { volumes: vec![Default::default()], ..Default::default() }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..job(None)
        };
        let refused = object_json(&envelope("batch/v1", "Job", volumes.encode_to_vec())).err();
        assert_eq!(refused.map(|e| e.code), Some(415), "a field not mapped is never dropped silently");
    }

    #[test]
    fn the_media_type_may_carry_parameters() {
        assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
        assert!(is_protobuf("application/vnd.kubernetes.protobuf; charset=utf-8"));
        assert!(!is_protobuf("application/json"));
    }
}
