pub(super) use serde_json::json;

use super::*;
use crate::field_error::FieldErrorKind;

mod formats;
mod prune;
mod validate;

const QUANTITY: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A container of the hand-written Sandbox schema (split out to keep `json!` shallow).
pub(super) fn container_schema() -> Value {
    json!({
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "image": {"type": "string"},
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                "items": {"type": "object", "required": ["containerPort"], "properties": {
                    "containerPort": {"type": "integer", "format": "int32"},
                    "protocol": {"type": "string", "default": "TCP"}
                }}
            },
            "resources": {"type": "object", "properties": {
                "limits": {"type": "object", "additionalProperties": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "pattern": QUANTITY,
                    "x-kubernetes-int-or-string": true
                }}
            }}
        }
    })
}

/// A hand-written cut of the Sandbox schema, with the same shapes as the real one.
pub(super) fn sandbox_schema() -> CrdSchema {
    CrdSchema::new(json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["podTemplate"],
                "properties": {
                    "operatingMode": {"type": "string", "default": "Running", "enum": ["Running", "Suspended"]},
                    "shutdownPolicy": {"type": "string", "default": "Retain", "enum": ["Delete", "Retain"]},
                    "shutdownTime": {"type": "string", "format": "date-time"},
                    "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 1, "default": 1},
                    "service": {"type": "boolean"},
                    "podTemplate": {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "metadata": {"type": "object", "properties": {
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                            }},
                            "spec": {
                                "type": "object",
                                "required": ["containers"],
                                "properties": {
                                    "containers": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                        "items": container_schema()
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }))
}

pub(super) fn sandbox(spec: Value) -> Value {
    json!({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": "s"}, "spec": spec})
}

pub(super) fn minimal_spec() -> Value {
    json!({"podTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}})
}

/// Decodes then validates, as the server does for a create.
pub(super) fn admit(schema: &CrdSchema, mut obj: Value) -> (Value, Vec<String>, Vec<FieldError>) {
    let pruned = schema.default_and_prune(&mut obj);
    let errs = schema.validate(&obj);
    (obj, pruned, errs)
}

/// A schema with one field `x` of the given schema, under an object root.
pub(super) fn one_field(x: Value) -> CrdSchema {
    CrdSchema::new(json!({"type": "object", "properties": {"x": x}}))
}

pub(super) fn errors_for(x: Value, value: Value) -> Vec<FieldError> {
    one_field(x).validate(&json!({ "x": value }))
}

pub(super) fn real_schema(yaml: &str) -> CrdSchema {
    let crd: Value = serde_yaml_ng::from_str(yaml).expect("the bundled CRD is valid YAML");
    let schema = crd.pointer("/spec/versions/0/schema/openAPIV3Schema").expect("the CRD has a schema").clone();
    CrdSchema::new(schema)
}

pub(super) fn v1beta1() -> CrdSchema {
    real_schema(include_str!("../../../crds/sandboxes-v1beta1.yaml"))
}

pub(super) fn v1alpha1() -> CrdSchema {
    real_schema(include_str!("../../../crds/sandboxes-v1alpha1.yaml"))
}

/// A Sandbox such as a user would write, touching the big parts of the pod template.
pub(super) fn realistic_sandbox() -> Value {
    json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": "demo", "namespace": "default", "labels": {"app": "demo"}},
        "spec": {
            "podTemplate": {
                "metadata": {"labels": {"app": "demo"}, "annotations": {"example.com/owner": "team-a"}},
                "spec": {
                    "containers": [{
                        "name": "agent",
                        "image": "python:3.12",
                        "command": ["python", "-m", "http.server"],
                        "args": ["8080"],
                        "env": [
                            {"name": "MODE", "value": "dev"},
                            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                        ],
                        "ports": [{"containerPort": 8080, "name": "http"}],
                        "resources": {"limits": {"cpu": 1, "memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}},
                        "securityContext": {
                            "runAsNonRoot": true,
                            "runAsUser": 1000,
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}
                        },
                        "volumeMounts": [
                            {"name": "work", "mountPath": "/work"},
                            {"name": "config", "mountPath": "/etc/config", "readOnly": true}
                        ],
                        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 5}
                    }],
                    "securityContext": {"fsGroup": 2000},
                    "restartPolicy": "Always",
                    "volumes": [
                        {"name": "work", "emptyDir": {"sizeLimit": "1Gi"}},
                        {"name": "config", "configMap": {"name": "demo-config", "items": [{"key": "a", "path": "a"}]}}
                    ]
                }
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }],
            "shutdownTime": "2030-01-01T00:00:00Z",
            "shutdownPolicy": "Delete"
        }
    })
}
