//! OpenAPI documents (`/openapi/v3` and `/openapi/v2`), published so that `kubectl apply` and
//! `kubectl create` find the `fieldValidation` parameter and hand validation to the server, and
//! so that clients that read schemas see the Sandbox CRD's real one.

use serde_json::{Map, Value, json};

use crate::apiserver::ApiServer;
use crate::resources::ResourceType;
use crate::status::ApiError;

fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// The schema name of a kind, as kube-apiserver names them.
fn definition_name(rt: &ResourceType) -> String {
    match rt.group {
        "" => format!("io.k8s.api.core.v1.{}", rt.kind),
        "batch" => format!("io.k8s.api.batch.v1.{}", rt.kind),
        crate::rbac::GROUP => format!("io.k8s.api.rbac.v1.{}", rt.kind),
        g => {
            let reversed: Vec<&str> = g.split('.').rev().collect();
            format!("{}.{}.{}", reversed.join("."), rt.version, rt.kind)
        }
    }
}

fn gvk(rt: &ResourceType) -> Value {
    json!({"group": rt.group, "version": rt.version, "kind": rt.kind})
}

fn schema_of(api: &ApiServer, rt: &ResourceType) -> Value {
    let mut schema = match api.schemas.raw(rt) {
        Some(s) => s.clone(),
        None => json!({
            "type": "object",
            "description": format!("{} (schema not published in detail: the server validates the full type)", rt.kind),
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }
        }),
    };
    schema["x-kubernetes-group-version-kind"] = json!([gvk(rt)]);
    schema
}

const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];

fn operation(rt: &ResourceType, action: &str, params: &[&str], reference: &str, v3: bool) -> Value {
    let parameters: Vec<Value> = params
        .iter()
        .map(|p| {
            if v3 {
                json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
            } else {
                json!({"name": p, "in": "query", "type": "string", "uniqueItems": true})
            }
        })
        .collect();
    let response = if v3 {
        json!({"description": "OK", "content": {"application/json": {"schema": {"$ref": reference}}}})
    } else {
        json!({"description": "OK", "schema": {"$ref": reference}})
    };
    json!({
        "operationId": format!("{action}{}", rt.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(rt),
        "parameters": parameters,
        "responses": {"200": response},
    })
}

fn paths_for(rt: &ResourceType, v3: bool) -> Map<String, Value> {
    let base = rt.gv_path();
    let (collection, item) = if rt.namespaced {
        (
            format!("{base}/namespaces/{{namespace}}/{}", rt.plural),
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", rt.plural),
        )
    } else {
        (format!("{base}/{}", rt.plural), format!("{base}/{}/{{name}}", rt.plural))
    };
    let reference = if v3 {
        format!("#/components/schemas/{}", definition_name(rt))
    } else {
        format!("#/definitions/{}", definition_name(rt))
    };
    // Only the operations the resource serves (a SelfSubjectAccessReview is create-only).
    let served = |verb: &str| rt.verbs.contains(&verb);
    let mut on_collection = Map::new();
    if served("list") {
        let params = ["labelSelector", "fieldSelector", "limit", "continue", "watch"];
        on_collection.insert("get".into(), operation(rt, "list", &params, &reference, v3));
    }
    if served("create") {
        on_collection.insert("post".into(), operation(rt, "post", WRITE_PARAMS, &reference, v3));
    }
    let mut on_item = Map::new();
    let item_operations: [(&str, &str, &str, &[&str]); 4] = [
        ("get", "get", "get", &[]),
        ("update", "put", "put", WRITE_PARAMS),
        ("patch", "patch", "patch", &["dryRun", "fieldManager", "fieldValidation", "force"]),
        ("delete", "delete", "delete", &["dryRun", "gracePeriodSeconds", "propagationPolicy"]),
    ];
    for (verb, method, action, params) in item_operations {
        if served(verb) {
            on_item.insert(method.into(), operation(rt, action, params, &reference, v3));
        }
    }
    let mut paths = Map::new();
    for (path, operations) in [(collection, on_collection), (item, on_item)] {
        if !operations.is_empty() {
            paths.insert(path, Value::Object(operations));
        }
    }
    paths
}

/// A stable hash of what a group-version document contains, so clients may cache it.
fn content_hash(api: &ApiServer, key: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    env!("CARGO_PKG_VERSION").hash(&mut h);
    for rt in &api.types {
        (rt.group, rt.version, rt.plural).hash(&mut h);
    }
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: where each group-version's document lives.
pub fn v3_root(api: &ApiServer) -> Value {
    let mut paths = Map::new();
    for rt in &api.types {
        let key = gv_key(rt.group, rt.version);
        let url = format!("/openapi/v3/{key}?hash={}", content_hash(api, &key));
        paths.entry(key).or_insert_with(|| json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `/openapi/v3/{api/v1 | apis/group/version}`.
pub fn v3_group_version(api: &ApiServer, group: &str, version: &str) -> Option<Value> {
    let types: Vec<&ResourceType> = api.types.iter().filter(|t| t.group == group && t.version == version).collect();
    if types.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for rt in types {
        paths.extend(paths_for(rt, true));
        schemas.insert(definition_name(rt), schema_of(api, rt));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v2` in JSON; a client that accepts only the protobuf encoding gets 406.
pub fn v2(api: &ApiServer, accept: &str) -> Result<Value, ApiError> {
    let wants_json = accept.is_empty()
        || accept.split(',').any(|a| {
            let media = a.split(';').next().unwrap_or_default().trim();
            matches!(media, "application/json" | "*/*" | "application/*")
        });
    if !wants_json {
        return Err(ApiError::not_acceptable(
            "only application/json is served for /openapi/v2; clients should use /openapi/v3",
        ));
    }
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for rt in &api.types {
        paths.extend(paths_for(rt, false));
        definitions.insert(definition_name(rt), schema_of(api, rt));
    }
    Ok(json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "definitions": definitions,
    }))
}
