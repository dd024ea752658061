//! Decoding built-in objects through their real Go-equivalent types (k8s-openapi), as the API
//! server's decoder does: wrong JSON types are a 400, and fields the type does not have are
//! "unknown fields" that `fieldValidation=Strict` rejects and `Warn` reports.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Outcome of decoding an object of a built-in kind.
pub enum Decoded {
    /// The object decodes; these JSON paths were not part of the type.
    Ok { unknown: Vec<String> },
    /// The object does not decode (a wrong type); the message says where.
    Malformed(String),
}

/// Decodes `obj` as the built-in `kind`. Kinds without a typed model decode as-is.
pub fn decode(kind: &str, obj: &Value) -> Decoded {
    use k8s_openapi::api::{
        authentication::v1 as authentication, batch::v1 as batch, core::v1 as core, rbac::v1 as rbac,
    };
    match kind {
        "Pod" => roundtrip::<core::Pod>(kind, obj),
        "Secret" => roundtrip::<core::Secret>(kind, obj),
        "ConfigMap" => roundtrip::<core::ConfigMap>(kind, obj),
        "Service" => roundtrip::<core::Service>(kind, obj),
        "Namespace" => roundtrip::<core::Namespace>(kind, obj),
        "Node" => roundtrip::<core::Node>(kind, obj),
        "PersistentVolumeClaim" => roundtrip::<core::PersistentVolumeClaim>(kind, obj),
        "Event" => roundtrip::<core::Event>(kind, obj),
        "Binding" => roundtrip::<core::Binding>(kind, obj),
        "Job" => roundtrip::<batch::Job>(kind, obj),
        "ServiceAccount" => roundtrip::<core::ServiceAccount>(kind, obj),
        "TokenRequest" => roundtrip::<authentication::TokenRequest>(kind, obj),
        "Role" => roundtrip::<rbac::Role>(kind, obj),
        "ClusterRole" => roundtrip::<rbac::ClusterRole>(kind, obj),
        "RoleBinding" => roundtrip::<rbac::RoleBinding>(kind, obj),
        "ClusterRoleBinding" => roundtrip::<rbac::ClusterRoleBinding>(kind, obj),
        _ => Decoded::Ok { unknown: Vec::new() },
    }
}

fn roundtrip<T: DeserializeOwned + Serialize>(kind: &str, obj: &Value) -> Decoded {
    let typed: T = match serde_json::from_value(obj.clone()) {
        Ok(t) => t,
        Err(e) => return Decoded::Malformed(format!("{kind} in version \"v1\" cannot be handled as a {kind}: {e}")),
    };
    let back = match serde_json::to_value(&typed) {
        Ok(v) => v,
        Err(e) => return Decoded::Malformed(format!("{kind} cannot be encoded: {e}")),
    };
    let mut unknown = Vec::new();
    diff(obj, &back, String::new(), &mut unknown);
    Decoded::Ok { unknown }
}

/// Collects the paths present (and not null) in `input` but absent from `typed`.
fn diff(input: &Value, typed: &Value, path: String, out: &mut Vec<String>) {
    match (input, typed) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                if v.is_null() {
                    continue;
                }
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                match b.get(k) {
                    Some(bv) => diff(v, bv, p, out),
                    None if is_empty(v) => {}
                    None => out.push(p),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (av, bv)) in a.iter().zip(b).enumerate() {
                diff(av, bv, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Empty maps and lists vanish in k8s-openapi's encoding without being unknown.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_reported_with_paths() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "imagee": "typo"}]}
        });
        match decode("Pod", &pod) {
            Decoded::Ok { unknown } => assert_eq!(unknown, vec!["metadata.bogus", "spec.containers[0].imagee"]),
            Decoded::Malformed(m) => panic!("{m}"),
        }
    }

    #[test]
    fn wrong_types_are_malformed() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "nope"}});
        assert!(matches!(decode("Pod", &pod), Decoded::Malformed(m) if m.contains("cannot be handled as a Pod")));
    }

    #[test]
    fn a_clean_job_has_no_unknown_fields() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": {}},
            "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}});
        assert!(matches!(decode("Job", &job), Decoded::Ok { unknown } if unknown.is_empty()));
    }
}
