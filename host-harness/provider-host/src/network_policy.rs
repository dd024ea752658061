//! Network isolation of the sandboxes: the NetworkPolicy `sandbox-host network-policy` prints,
//! and the check `probe` makes that one is in place.
//!
//! Ownership and the write guard bound what the provider does through the API server; they do
//! nothing about what a sandbox's workload does on the network. Without a NetworkPolicy a pod
//! reaches every pod and service of the cluster, the API server and the cloud's metadata
//! endpoint, and any pod reaches it. The policy here selects the sandboxes' pods, denies all
//! ingress and allows egress to the cluster DNS alone plus what the operator's policy lists
//! (`egress`, [`EgressRule`]). See
//! <https://kubernetes.io/docs/concepts/services-networking/network-policies/> (the API:
//! <https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/network-policy-v1/>);
//! only a network plugin that implements NetworkPolicy enforces it.
//!
//! What it selects: every pod the provider makes (the Job and Sandbox backends) carries
//! [`SANDBOX_POD_LABEL`] from its pod template. A claim's pod comes from the operator's warm
//! pool template and carries that template's labels only, none of ours, so this policy cannot
//! select it; agent-sandbox gives each SandboxTemplate a NetworkPolicy of its own
//! (`spec.networkPolicy`), which the operator keeps for those. The owner id is not on pods
//! either: the policy covers the sandboxes of every installation in the namespace.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use contract::k8s::selectors;
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config_fields;
use crate::policy::{Policy, quoted};
use crate::records::{Backend, Diagnostic, Severity};

/// The label every pod the provider makes carries (its value is the acquisition id).
pub use contract::labels::LABEL_ACQUISITION_ID as SANDBOX_POD_LABEL;
/// The other label the provider puts on every pod (the run id), for selectors that use it.
use contract::labels::LABEL_RUN_ID as RUN_ID_LABEL;

/// The name of the printed NetworkPolicy unless the operator picks another.
pub const DEFAULT_NAME: &str = "sandbox-host-sandboxes";

/// The API group of NetworkPolicies; the host lists them in `probe` (the Role grants it).
pub const GROUP: &str = "networking.k8s.io";

/// The resource the host lists.
pub const PLURAL: &str = "networkpolicies";

/// Probe finding: nothing isolates the sandboxes.
pub const NO_NETWORK_POLICY: &str = "no-network-policy";

/// Probe finding: the host may not list NetworkPolicies, so it could not tell.
pub const CHECK_FORBIDDEN: &str = "network-policy-check-forbidden";

/// Probe finding: listing NetworkPolicies failed otherwise.
pub const CHECK_FAILED: &str = "network-policy-check-failed";

/// Every code the host adds to a provider's probe result.
pub const PROBE_CODES: [&str; 3] = [NO_NETWORK_POLICY, CHECK_FORBIDDEN, CHECK_FAILED];

fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

fn port(protocol: &str, number: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        protocol: Some(protocol.to_string()),
        port: Some(IntOrString::Int(i32::from(number))),
        ..Default::default()
    }
}

/// The cluster DNS: UDP and TCP 53 to the kube-dns pods (CoreDNS keeps that label) in
/// `kube-system`, whose name label the API server sets on every namespace.
fn dns() -> NetworkPolicyEgressRule {
    NetworkPolicyEgressRule {
        to: Some(vec![NetworkPolicyPeer {
            namespace_selector: Some(selector(&[("kubernetes.io/metadata.name", "kube-system")])),
            pod_selector: Some(selector(&[("k8s-app", "kube-dns")])),
            ..Default::default()
        }]),
        ports: Some(vec![port("UDP", 53), port("TCP", 53)]),
    }
}

fn operator_rule(rule: &EgressRule) -> NetworkPolicyEgressRule {
    let ports: Vec<NetworkPolicyPort> = rule.ports.iter().map(|p| port(rule.protocol.as_str(), *p)).collect();
    NetworkPolicyEgressRule {
        to: Some(vec![NetworkPolicyPeer {
            ip_block: Some(IPBlock { cidr: rule.cidr.clone(), except: None }),
            ..Default::default()
        }]),
        ports: if ports.is_empty() { None } else { Some(ports) },
    }
}

/// The NetworkPolicy `name` in `namespace` for the sandboxes: no ingress, egress to the cluster
/// DNS and the policy's `egress` only.
pub fn manifest(policy: &Policy, namespace: &str, name: &str) -> NetworkPolicy {
    let mut egress = vec![dns()];
    egress.extend(policy.egress.iter().map(operator_rule));
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([("app.kubernetes.io/component".to_string(), "sandbox-host".to_string())])),
            ..Default::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: SANDBOX_POD_LABEL.to_string(),
                    operator: "Exists".to_string(),
                    values: None,
                }]),
                ..Default::default()
            }),
            // Ingress named with no rule: nothing may connect to a sandbox.
            policy_types: Some(vec!["Ingress".to_string(), "Egress".to_string()]),
            ingress: None,
            egress: Some(egress),
        }),
    }
}

/// Whether a NetworkPolicy's `podSelector` matches a pod with `labels`: none or `{}` selects
/// every pod, a selector the API server would refuse selects none. Kubernetes' own selector
/// rule ([`selectors::LabelSelector`], the one the embedded cluster serves lists with).
fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else { return true };
    serde_json::to_value(selector)
        .ok()
        .and_then(|json| selectors::LabelSelector::from_json(Some(&json)).ok())
        .is_some_and(|rule| rule.matches(labels))
}

/// The labels a sandbox pod of `config` has: the provider's, with placeholder values, and the
/// config's own `labels`.
fn pod_labels(config: &Value) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = config
        .get("labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    labels.insert(SANDBOX_POD_LABEL.to_string(), "probe".to_string());
    labels.insert(RUN_ID_LABEL.to_string(), "probe".to_string());
    labels
}

/// What `probe` adds for the namespace `config` names: a warning when no NetworkPolicy there
/// selects the sandboxes' pods, or when the host could not tell. `None` when it is isolated,
/// when there is no cluster, when the config names no namespace the policy allows (the
/// provider reports that), or for the claim backend (the template's policy isolates it). One list, bounded by `timeout`; nothing is written.
pub(crate) async fn probe_finding(
    client: Option<kube::Client>,
    policy: &Policy,
    config: &str,
    timeout: Duration,
) -> Option<Diagnostic> {
    let client = client?;
    let config: Value = serde_json::from_str(config).ok()?;
    let namespace = config_fields::namespace(&config)?;
    // A claim's pod is the warm pool template's and carries none of the provider's labels: the
    // template's own NetworkPolicy (`spec.networkPolicy`) is what isolates it.
    if !policy.allows_namespace(namespace) || config_fields::backend(&config) == Some(Backend::Claim) {
        return None;
    }
    let apply = format!("sandbox-host network-policy -n {namespace} | kubectl apply -f -");
    let warning = |code: &str, message: String| Diagnostic { severity: Severity::Warning, code: code.into(), message };
    let api: kube::Api<NetworkPolicy> = kube::Api::namespaced(client, namespace);
    let listed = match tokio::time::timeout(timeout, api.list(&kube::api::ListParams::default())).await {
        Ok(Ok(listed)) => listed,
        Ok(Err(kube::Error::Api(status))) if status.code == 403 => {
            return Some(warning(
                CHECK_FORBIDDEN,
                format!(
                    "the host could not check whether a NetworkPolicy isolates the sandboxes in namespace {}: its \
                     credentials may not list networkpolicies ({}); grant it (the Role `sandbox-host rbac` prints \
                     does) and make sure one does: {apply}",
                    quoted(namespace),
                    status.message
                ),
            ));
        }
        Ok(Err(e)) => {
            return Some(warning(
                CHECK_FAILED,
                format!(
                    "the host could not list the NetworkPolicies of namespace {} ({e}); make sure one isolates the \
                     sandboxes: {apply}",
                    quoted(namespace)
                ),
            ));
        }
        Err(_) => {
            return Some(warning(
                CHECK_FAILED,
                format!(
                    "listing the NetworkPolicies of namespace {} did not answer within {} ms; make sure one isolates \
                     the sandboxes: {apply}",
                    quoted(namespace),
                    timeout.as_millis()
                ),
            ));
        }
    };
    let labels = pod_labels(&config);
    if listed.items.iter().any(|p| selects(p.spec.as_ref().and_then(|s| s.pod_selector.as_ref()), &labels)) {
        return None;
    }
    Some(warning(
        NO_NETWORK_POLICY,
        format!(
            "no NetworkPolicy in namespace {} selects the sandboxes' pods (label {SANDBOX_POD_LABEL}), so a sandbox \
             can reach the API server, every pod and the cloud's metadata endpoint, and any pod can reach it; \
             isolate them: {apply}",
            quoted(namespace)
        ),
    ))
}

/// One destination a sandbox's pod may reach: a CIDR, on the listed ports (all when none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct EgressRule {
    /// An IPv4 or IPv6 CIDR (`10.0.0.0/8`, `0.0.0.0/0` for anywhere).
    pub cidr: String,
    /// Destination ports; empty allows every port.
    pub ports: Vec<u16>,
    /// The ports' protocol.
    pub protocol: EgressProtocol,
}

impl fmt::Display for EgressRule {
    /// `10.0.0.0/8` or `0.0.0.0/0 TCP 443, 8443`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.cidr)?;
        if !self.ports.is_empty() {
            let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
            write!(f, " {} {}", self.protocol.as_str(), ports.join(", "))?;
        }
        Ok(())
    }
}

/// The protocols a NetworkPolicy port names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EgressProtocol {
    /// TCP, the default.
    #[default]
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl EgressProtocol {
    /// The name a NetworkPolicy port uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
            Self::Sctp => "SCTP",
        }
    }
}

/// The object form of an [`EgressRule`] in a policy file.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct EgressObject {
    cidr: String,
    #[serde(default)]
    ports: Vec<u16>,
    #[serde(default)]
    protocol: EgressProtocol,
}

impl<'de> Deserialize<'de> for EgressRule {
    /// A bare CIDR string, or the object with `cidr`, `ports` and `protocol`; a visitor
    /// rather than an untagged enum, so a mistake in the object is reported as itself.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = EgressRule;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a CIDR ("10.0.0.0/8") or {"cidr": "10.0.0.0/8", "ports": [443], "protocol": "TCP"}"#)
            }
            fn visit_str<E: serde::de::Error>(self, cidr: &str) -> Result<EgressRule, E> {
                Ok(EgressRule { cidr: cidr.to_string(), ports: Vec::new(), protocol: EgressProtocol::Tcp })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<EgressRule, A::Error> {
                let o = EgressObject::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(EgressRule { cidr: o.cidr, ports: o.ports, protocol: o.protocol })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// Why `cidr` is not a CIDR (`address/prefix`), if it is not.
fn cidr_problem(cidr: &str) -> Option<String> {
    let Some((address, prefix)) = cidr.split_once('/') else {
        return Some("it has no /prefix (write 10.0.0.5/32 for one address)".to_string());
    };
    let max = match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => 32,
        Ok(std::net::IpAddr::V6(_)) => 128,
        Err(_) => return Some(format!("{} is not an IP address", quoted(address))),
    };
    match prefix.parse::<u8>() {
        Ok(bits) if bits <= max => None,
        _ => Some(format!("the prefix must be a number from 0 to {max}")),
    }
}

/// Why the operator's egress rules cannot be printed as a NetworkPolicy, if they cannot.
pub(crate) fn check_egress(rules: &[EgressRule]) -> Result<(), String> {
    for rule in rules {
        if let Some(problem) = cidr_problem(&rule.cidr) {
            return Err(format!("cidr {} is not a CIDR: {problem}", quoted(&rule.cidr)));
        }
        if rule.ports.contains(&0) {
            return Err(format!(
                "the rule to {} names port 0; ports run from 1 to 65535 (leave `ports` out for all)",
                rule.cidr
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::HostError;

    fn printed(policy: &Policy) -> Value {
        serde_json::to_value(manifest(policy, "agents", DEFAULT_NAME)).expect("encodes")
    }

    #[test]
    fn the_default_selects_the_sandboxes_denies_ingress_and_allows_dns_only() {
        let np = printed(&Policy::kubernetes_default(["agents"]));
        assert_eq!(
            (np["apiVersion"].as_str(), np["kind"].as_str()),
            (Some("networking.k8s.io/v1"), Some("NetworkPolicy"))
        );
        assert_eq!(np["metadata"]["namespace"], "agents");
        let spec = &np["spec"];
        assert_eq!(
            spec["podSelector"],
            json!({"matchExpressions": [{"key": SANDBOX_POD_LABEL, "operator": "Exists"}]})
        );
        assert_eq!(spec["policyTypes"], json!(["Ingress", "Egress"]));
        assert!(spec.get("ingress").is_none(), "no ingress rule: all ingress denied");
        assert_eq!(
            spec["egress"],
            json!([{
                "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
            }])
        );
    }

    #[test]
    fn the_operators_egress_is_added_after_dns() {
        let policy: Policy = serde_json::from_value(json!({"namespaces": ["agents"], "egress": [
            "10.1.0.0/16",
            {"cidr": "0.0.0.0/0", "ports": [443, 80]},
            {"cidr": "fd00::/8", "ports": [5353], "protocol": "UDP"}
        ]}))
        .expect("policy");
        let egress = &printed(&policy)["spec"]["egress"];
        assert_eq!(egress.as_array().map(Vec::len), Some(4));
        assert_eq!(egress[1], json!({"to": [{"ipBlock": {"cidr": "10.1.0.0/16"}}]}), "a bare CIDR: every port");
        assert_eq!(
            egress[2],
            json!({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}],
                   "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 80}]})
        );
        assert_eq!(egress[3]["ports"], json!([{"protocol": "UDP", "port": 5353}]));
    }

    #[test]
    fn selectors_are_matched_as_the_api_server_does() {
        let labels = pod_labels(&json!({"labels": {"team": "a", "n": 1}}));
        assert_eq!(labels.get("team").map(String::as_str), Some("a"));
        assert!(!labels.contains_key("n"), "not a label value");
        let printed = manifest(&Policy::default(), "x", "y").spec.and_then(|s| s.pod_selector);
        assert!(selects(printed.as_ref(), &labels));
        assert!(selects(None, &labels) && selects(Some(&LabelSelector::default()), &labels), "every pod");
        let by = |json: Value| selects(Some(&serde_json::from_value(json).expect("selector")), &labels);
        assert!(by(json!({"matchLabels": {"team": "a"}})));
        assert!(!by(json!({"matchLabels": {"team": "b"}})));
        assert!(by(json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]})));
        assert!(by(json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]})));
        assert!(!by(json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]})));
        assert!(!by(json!({"matchExpressions": [{"key": "team", "operator": "Gt", "values": ["1"]}]})));
        assert!(!by(json!({"matchLabels": {"app": "web"}})), "another workload's policy");
    }

    #[test]
    fn egress_rules_read_as_a_cidr_or_an_object_and_are_validated() {
        let p: Policy = serde_json::from_str(
            r#"{"namespaces":["a"],"egress":["10.0.0.0/8",{"cidr":"0.0.0.0/0","ports":[443]},
                {"cidr":"fd00::/8","ports":[53],"protocol":"UDP"}]}"#,
        )
        .expect("parses");
        assert!(p.validate().is_ok());
        let shown: Vec<String> = p.egress.iter().map(EgressRule::to_string).collect();
        assert_eq!(shown, ["10.0.0.0/8", "0.0.0.0/0 TCP 443", "fd00::/8 UDP 53"]);
        assert!(p.to_string().contains("cluster DNS and 10.0.0.0/8, 0.0.0.0/0 TCP 443"), "{p}");
        assert!(Policy::default().to_string().contains("cluster DNS and none"));
        let unknown = serde_json::from_str::<Policy>(r#"{"egress":[{"cidr":"1.2.3.4/32","port":443}]}"#);
        assert!(unknown.expect_err("refused").to_string().contains("unknown field `port`"));
        assert!(serde_json::from_str::<Policy>(r#"{"egress":[443]}"#).is_err());
        for (cidr, says) in [("10.0.0.1", "no /prefix"), ("ten/8", "not an IP address"), ("10.0.0.0/33", "0 to 32")] {
            let bad = Policy {
                egress: serde_json::from_value(json!([cidr])).expect("a CIDR string"),
                ..Policy::kubernetes_default(["agents"])
            };
            assert!(matches!(bad.validate(), Err(HostError::Config(m)) if m.contains(says)), "{cidr}");
        }
        let port_zero = Policy {
            egress: serde_json::from_value(json!([{"cidr": "::/0", "ports": [0]}])).expect("rule"),
            ..Policy::kubernetes_default(["agents"])
        };
        assert!(matches!(port_zero.validate(), Err(HostError::Config(m)) if m.contains("port 0")));
    }
}
