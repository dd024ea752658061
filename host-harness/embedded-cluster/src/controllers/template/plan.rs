//! The template controller's decisions: the NetworkPolicy a template should have, and what to
//! change to get there.

use contract::k8s::agent_sandbox::{TEMPLATE_KIND, TEMPLATE_REF_HASH_LABEL};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::controllers::extensions::blueprint::Template;
use crate::controllers::extensions::{controller_of, controller_reference, name_hash};

/// The NetworkPolicy of template `t` is `t-network-policy`.
pub fn network_policy_name(template: &str) -> String {
    format!("{template}-network-policy")
}

/// What one reconcile should do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Merge-patch the template's labels (the ref-hash label).
    LabelTemplate(Value),
    /// Create the policy.
    Create(Box<NetworkPolicy>),
    /// Replace the policy's spec (it drifted from the template).
    ReplaceSpec(Box<NetworkPolicySpec>),
    /// Delete the template's own policy (the template went `Unmanaged`).
    Delete {
        /// The policy's uid, as precondition.
        uid: String,
    },
    /// A policy of that name exists and is not the template's: leave it, say why.
    Refuse(String),
}

/// The template's managed policy: pods with its ref-hash label, ingress and egress as the
/// template says, or upstream's strict default (ingress only from the sandbox router, egress
/// only to public addresses, so no cluster DNS either).
pub fn desired_spec(template: &Template) -> Result<NetworkPolicySpec, String> {
    let (ingress, egress) = match &template.network_policy {
        Some(rules) => (rules.get("ingress").cloned(), rules.get("egress").cloned()),
        None => (Some(default_ingress()), Some(default_egress())),
    };
    let spec = json!({
        "podSelector": {"matchLabels": {TEMPLATE_REF_HASH_LABEL: name_hash(&template.name)}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": ingress,
        "egress": egress,
    });
    serde_json::from_value(spec).map_err(|e| format!("spec.networkPolicy cannot be used: {e}"))
}

fn default_ingress() -> Value {
    json!([{"from": [{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "agent-sandbox-system"}},
        "podSelector": {"matchLabels": {"app": "sandbox-router"}},
    }]}])
}

fn default_egress() -> Value {
    json!([{"to": [
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"]}},
        {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10"]}},
    ]}])
}

/// Decides what to do for a template (not being deleted, served as `api_version`) and the
/// policy named after it.
pub fn plan(
    template: &Template,
    namespace: &str,
    api_version: &str,
    policy: Option<&NetworkPolicy>,
) -> Result<Vec<Action>, String> {
    let mut actions = Vec::new();
    let hash = name_hash(&template.name);
    if template.labels.get(TEMPLATE_REF_HASH_LABEL) != Some(&hash) {
        actions.push(Action::LabelTemplate(json!({"metadata": {"labels": {TEMPLATE_REF_HASH_LABEL: hash}}})));
    }
    let ours = policy.map(|p| controller_of(&p.metadata).is_some_and(|r| r.uid == template.uid));
    if !template.network_policy_managed {
        if let (Some(p), Some(true)) = (policy, ours) {
            actions.push(Action::Delete { uid: p.metadata.uid.clone().unwrap_or_default() });
        }
        return Ok(actions);
    }
    let desired = desired_spec(template)?;
    match (policy, ours) {
        (None, _) => {
            let owner = controller_reference(api_version, TEMPLATE_KIND, &template.name, &template.uid);
            actions.push(Action::Create(Box::new(NetworkPolicy {
                metadata: ObjectMeta {
                    name: Some(network_policy_name(&template.name)),
                    namespace: Some(namespace.to_string()),
                    owner_references: Some(vec![owner]),
                    ..ObjectMeta::default()
                },
                spec: Some(desired),
            })))
        }
        (Some(_), Some(false) | None) => actions.push(Action::Refuse(format!(
            "refusing to update NetworkPolicy {:?}: it is not controlled by SandboxTemplate {:?}",
            network_policy_name(&template.name),
            template.name
        ))),
        (Some(p), Some(true)) => {
            if p.spec.as_ref() != Some(&desired) {
                actions.push(Action::ReplaceSpec(Box::new(desired)));
            }
        }
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::DynamicObject;

    const API: &str = "extensions.agents.x-k8s.io/v1beta1";

    fn template(extra: Value, labels: Value) -> Template {
        let mut spec = json!({"podTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}}});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": API, "kind": "SandboxTemplate",
            "metadata": {"name": "t", "uid": "tu", "labels": labels}, "spec": spec}))
        .unwrap_or_else(|e| panic!("{e}"));
        Template::from_dynamic(&obj).unwrap_or_else(|e| panic!("{e}"))
    }

    fn labelled() -> Value {
        json!({TEMPLATE_REF_HASH_LABEL: name_hash("t")})
    }

    fn policy(owner_uid: &str, spec: NetworkPolicySpec) -> NetworkPolicy {
        NetworkPolicy {
            metadata: ObjectMeta {
                name: Some(network_policy_name("t")),
                uid: Some("pu".into()),
                owner_references: Some(vec![controller_reference(API, TEMPLATE_KIND, "t", owner_uid)]),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        }
    }

    fn run(template: &Template, existing: Option<&NetworkPolicy>) -> Vec<Action> {
        plan(template, "ns", API, existing).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_managed_template_gets_the_strict_default_policy_and_its_label() {
        let t = template(json!({}), json!({}));
        let actions = run(&t, None);
        assert!(
            matches!(&actions[0], Action::LabelTemplate(p) if p["metadata"]["labels"][TEMPLATE_REF_HASH_LABEL] == name_hash("t"))
        );
        let Action::Create(np) = &actions[1] else { panic!("{actions:?}") };
        assert_eq!(np.metadata.name.as_deref(), Some("t-network-policy"));
        let owner = &np.metadata.owner_references.as_ref().unwrap_or_else(|| panic!("owner"))[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("SandboxTemplate", "tu", Some(true)));
        let spec = serde_json::to_value(np.spec.as_ref()).unwrap_or_default();
        assert_eq!(spec["podSelector"]["matchLabels"][TEMPLATE_REF_HASH_LABEL], name_hash("t"));
        assert_eq!(spec["egress"][0]["to"][0]["ipBlock"]["cidr"], "0.0.0.0/0");
        assert_eq!(spec["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app"], "sandbox-router");
    }

    #[test]
    fn an_existing_policy_is_kept_in_line_or_left_alone() {
        let t =
            template(json!({"networkPolicy": {"egress": [{"to": [{"ipBlock": {"cidr": "1.2.3.0/24"}}]}]}}), labelled());
        let desired = desired_spec(&t).unwrap_or_else(|e| panic!("{e}"));
        assert!(run(&t, Some(&policy("tu", desired.clone()))).is_empty(), "in line: nothing to do");
        let drifted = NetworkPolicySpec { policy_types: Some(vec!["Ingress".into()]), ..desired.clone() };
        assert_eq!(run(&t, Some(&policy("tu", drifted))), [Action::ReplaceSpec(Box::new(desired.clone()))]);
        assert!(matches!(run(&t, Some(&policy("someone-else", desired))).as_slice(), [Action::Refuse(_)]));
    }

    #[test]
    fn an_unmanaged_template_removes_only_its_own_policy() {
        let t = template(json!({"networkPolicyManagement": "Unmanaged"}), labelled());
        let spec = NetworkPolicySpec::default();
        assert_eq!(run(&t, Some(&policy("tu", spec.clone()))), [Action::Delete { uid: "pu".into() }]);
        assert!(run(&t, Some(&policy("other", spec))).is_empty());
        assert!(run(&t, None).is_empty());
    }
}
