//! Discovery documents: `/version`, `/api`, `/apis`, and the APIResourceLists that kubectl and
//! `kube::Discovery` read to learn which resources, verbs and subresources exist.

use serde_json::{Value, json};

use crate::resources::{ResourceType, groups};

/// The minor version of the Kubernetes API the embedded cluster serves.
pub const MINOR_VERSION: u32 = 33;

/// The Kubernetes version the embedded cluster reports (1.`minor`).
pub fn version(minor: u32) -> Value {
    json!({
        "major": "1",
        "minor": minor.to_string(),
        "gitVersion": format!("v1.{minor}.0-embedded"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_doc(name: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub fn group_list(types: &[ResourceType]) -> Value {
    let gs: Vec<Value> = groups(types).iter().map(|(g, vs)| group_doc(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/{group}`.
pub fn group(types: &[ResourceType], name: &str) -> Option<Value> {
    let (g, vs) = groups(types).into_iter().find(|(g, _)| *g == name)?;
    let mut doc = group_doc(g, &vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` and `/apis/{group}/{version}`.
pub fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for t in types.iter().filter(|t| t.group == group && t.version == version) {
        let mut r = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": t.verbs,
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        for sub in t.subresources {
            let (kind, verbs): (&str, &[&str]) = match *sub {
                "binding" => ("Binding", &["create"]),
                "exec" => ("PodExecOptions", &["create", "get"]),
                "log" => (t.kind, &["get"]),
                "finalize" => (t.kind, &["update"]),
                "token" => ("TokenRequest", &["create"]),
                _ => (t.kind, &["get", "patch", "update"]),
            };
            let mut doc = json!({
                "name": format!("{}/{sub}", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if *sub == "token" {
                // A subresource of another group's kind names that group and version.
                doc["group"] = json!("authentication.k8s.io");
                doc["version"] = json!("v1");
            }
            resources.push(doc);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{SandboxVersions, served};

    #[test]
    fn core_list_has_pod_subresources() {
        let doc = resource_list(&served(SandboxVersions::Both), "", "v1").expect("core");
        let names: Vec<&str> =
            doc["resources"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
        assert!(names.contains(&"pods/status") && names.contains(&"pods/binding") && names.contains(&"namespaces"));
        let token = doc["resources"].as_array().into_iter().flatten().find(|r| r["name"] == "serviceaccounts/token");
        assert_eq!(
            token,
            Some(&json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true,
                "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}))
        );
    }

    #[test]
    fn sandbox_group_prefers_v1beta1() {
        let doc = group(&served(SandboxVersions::Both), "agents.x-k8s.io").expect("group");
        assert_eq!(doc["preferredVersion"]["version"], "v1beta1");
        assert!(
            group(&served(SandboxVersions::V1alpha1Only), "agents.x-k8s.io")
                .is_some_and(|d| d["preferredVersion"]["version"] == "v1alpha1")
        );
    }
}
