//! The environment a container's declared variables give an exec'd process, built as the
//! kubelet's `makeEnvironmentVariables` builds it (`pkg/kubelet/kubelet_pods.go`):
//!
//! 1. `envFrom`, in order: every key of the Secret's or ConfigMap's `data` (Secret values
//!    base64-decoded), with the source's `prefix`; a later source wins over an earlier one.
//! 2. `env`, in order, overriding what `envFrom` set: a literal `value` with `$(NAME)`
//!    references to variables defined before it expanded (`$$` is a literal `$`, an unknown
//!    name is left as written), or `valueFrom` a Secret key, a ConfigMap key or a pod field
//!    (`metadata.name`, `metadata.namespace`, `metadata.uid`, `metadata.labels['k']`,
//!    `metadata.annotations['k']`, `spec.nodeName`, `spec.serviceAccountName`, `status.podIP`,
//!    `status.podIPs`, `status.hostIP`, `status.hostIPs`).
//!
//! A reference marked `optional` that does not resolve is skipped; one that is not is an error
//! with the kubelet's wording. Keys containing `=` or NUL cannot be variable names and are
//! skipped, as the kubelet skips invalid names. `resourceFieldRef` and `fileKeyRef` are not
//! simulated: their variables are left out.
//!
//! Unlike the kubelet, which fixes the environment when the container starts, the simulation
//! reads the Secrets and ConfigMaps at each exec, so a change shows in the next exec.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

/// The `data` of Secrets and ConfigMaps, by namespace and name; the API server answers from
/// its store, tests from maps.
pub(crate) trait ConfigData {
    /// A Secret's decoded data, or None when it does not exist.
    fn secret(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>>;
    /// A ConfigMap's `data`, or None when it does not exist.
    fn config_map(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>>;
}

/// Why a container's environment cannot be built; the wording is the kubelet's. No variant
/// carries a value, so a message never shows a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EnvError {
    /// A required Secret or ConfigMap does not exist.
    #[error("{kind} \"{name}\" not found")]
    Missing { kind: &'static str, name: String },
    /// A required key is not in a Secret or ConfigMap that exists.
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    MissingKey { kind: &'static str, namespace: String, name: String, key: String },
}

/// Which kind of object a reference names.
#[derive(Clone, Copy)]
enum Source {
    Secret,
    ConfigMap,
}

impl Source {
    /// The kind as "not found" messages name it.
    fn lower(self) -> &'static str {
        match self {
            Source::Secret => "secret",
            Source::ConfigMap => "configmap",
        }
    }

    /// The kind as "couldn't find key" messages name it.
    fn title(self) -> &'static str {
        match self {
            Source::Secret => "Secret",
            Source::ConfigMap => "ConfigMap",
        }
    }

    fn read(self, data: &impl ConfigData, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
        match self {
            Source::Secret => data.secret(namespace, name),
            Source::ConfigMap => data.config_map(namespace, name),
        }
    }
}

/// The variables `container` of `pod` declares, resolved against `data`, in name order.
pub(crate) fn container_env(
    pod: &Pod,
    container: &Container,
    data: &impl ConfigData,
) -> Result<BTreeMap<String, Vec<u8>>, EnvError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut env: BTreeMap<String, Vec<u8>> = BTreeMap::new();

    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        let source = match (&from.secret_ref, &from.config_map_ref) {
            (Some(s), _) => Some((Source::Secret, s.name.as_str(), s.optional.unwrap_or(false))),
            (None, Some(c)) => Some((Source::ConfigMap, c.name.as_str(), c.optional.unwrap_or(false))),
            (None, None) => None,
        };
        let Some((source, name, optional)) = source else { continue };
        match source.read(data, namespace, name) {
            Some(values) => {
                for (key, value) in values {
                    let var = format!("{prefix}{key}");
                    if valid_name(&var) {
                        env.insert(var, value);
                    }
                }
            }
            None if optional => {}
            None => return Err(EnvError::Missing { kind: source.lower(), name: name.to_string() }),
        }
    }

    for var in container.env.iter().flatten() {
        let Some(from) = var.value_from.as_ref() else {
            let value = expand(var.value.as_deref().unwrap_or_default(), &env);
            env.insert(var.name.clone(), value);
            continue;
        };
        let key_ref = match (&from.secret_key_ref, &from.config_map_key_ref) {
            (Some(s), _) => Some((Source::Secret, s.name.as_str(), s.key.as_str(), s.optional.unwrap_or(false))),
            (None, Some(c)) => Some((Source::ConfigMap, c.name.as_str(), c.key.as_str(), c.optional.unwrap_or(false))),
            (None, None) => None,
        };
        let value = match (key_ref, &from.field_ref) {
            (Some((source, name, key, optional)), _) => match source.read(data, namespace, name) {
                Some(mut values) => match values.remove(key) {
                    Some(value) => Some(value),
                    None if optional => None,
                    None => {
                        return Err(EnvError::MissingKey {
                            kind: source.title(),
                            namespace: namespace.to_string(),
                            name: name.to_string(),
                            key: key.to_string(),
                        });
                    }
                },
                None if optional => None,
                None => return Err(EnvError::Missing { kind: source.lower(), name: name.to_string() }),
            },
            (None, Some(field)) => pod_field(pod, &field.field_path).map(String::into_bytes),
            (None, None) => None,
        };
        if let Some(value) = value {
            env.insert(var.name.clone(), value);
        }
    }
    Ok(env)
}

/// Whether a key can be a variable name at all (the API server validates `env[].name`; keys of
/// `envFrom` sources are only checked here).
fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

/// `$(NAME)` references to variables already defined, expanded as the kubelet's
/// `third_party/forked/golang/expansion` does.
fn expand(input: &str, defined: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.extend_from_slice(&rest.as_bytes()[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push(b'$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match defined.get(name) {
                        Some(value) => out.extend_from_slice(value),
                        None => out.extend_from_slice(format!("$({name})").as_bytes()),
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.extend_from_slice(b"$(");
                    rest = inner;
                }
            }
        } else {
            out.push(b'$');
            rest = after;
        }
    }
    out.extend_from_slice(rest.as_bytes());
    out
}

/// A pod field a `fieldRef` names, as the downward API gives it; None for a field that is not
/// set or not simulated.
fn pod_field(pod: &Pod, path: &str) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        map?.get(key).cloned()
    };
    let joined = |ips: Option<Vec<String>>| ips.filter(|ips| !ips.is_empty()).map(|ips| ips.join(","));
    match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        "status.podIP" => status.and_then(|s| s.pod_ip.clone()),
        "status.hostIP" => status.and_then(|s| s.host_ip.clone()),
        "status.podIPs" => {
            joined(status.and_then(|s| s.pod_ips.as_ref()).map(|v| v.iter().map(|ip| ip.ip.clone()).collect()))
        }
        "status.hostIPs" => {
            joined(status.and_then(|s| s.host_ips.as_ref()).map(|v| v.iter().map(|ip| ip.ip.clone()).collect()))
        }
        _ => keyed("metadata.labels['", meta.labels.as_ref())
            .or_else(|| keyed("metadata.annotations['", meta.annotations.as_ref())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Secrets and ConfigMaps in namespace `ns`.
    #[derive(Default)]
    struct Fixture {
        secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
        config_maps: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    }

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect()
    }

    impl ConfigData for Fixture {
        fn secret(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
            (namespace == "ns").then(|| self.secrets.get(name).cloned()).flatten()
        }
        fn config_map(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
            (namespace == "ns").then(|| self.config_maps.get(name).cloned()).flatten()
        }
    }

    fn env_of(container: serde_json::Value, data: &Fixture) -> Result<BTreeMap<String, String>, EnvError> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [container]},
            "status": {"podIP": "10.244.0.5", "podIPs": [{"ip": "10.244.0.5"}]}
        }))
        .expect("test pod");
        let spec = pod.spec.as_ref().expect("spec");
        let env = container_env(&pod, &spec.containers[0], data)?;
        Ok(env.into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned())).collect())
    }

    fn fixture() -> Fixture {
        let mut f = Fixture::default();
        f.secrets.insert("creds".into(), values(&[("token", "s3cret"), ("user", "bot")]));
        f.config_maps.insert("settings".into(), values(&[("mode", "fast"), ("bad=key", "x")]));
        f
    }

    #[test]
    fn env_from_then_env_with_later_entries_winning() {
        let env = env_of(
            json!({"name": "c", "image": "x",
                "envFrom": [{"secretRef": {"name": "creds"}}, {"configMapRef": {"name": "settings"}, "prefix": "CM_"}],
                "env": [{"name": "user", "value": "override"}, {"name": "GREETING", "value": "hi $(user) $$(user) $(NOPE) $("}]}),
            &fixture(),
        )
        .expect("env");
        assert_eq!(env.get("token").map(String::as_str), Some("s3cret"));
        assert_eq!(env.get("CM_mode").map(String::as_str), Some("fast"));
        assert!(!env.keys().any(|k| k.contains('=')), "keys that cannot be names are skipped");
        assert_eq!(env.get("user").map(String::as_str), Some("override"));
        assert_eq!(env.get("GREETING").map(String::as_str), Some("hi override $(user) $(NOPE) $("));
    }

    #[test]
    fn key_refs_and_pod_fields_resolve() {
        let env = env_of(
            json!({"name": "c", "image": "x", "env": [
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}},
                {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k", "optional": true}}}
            ]}),
            &fixture(),
        )
        .expect("env");
        let want = [("APP", "web"), ("IPS", "10.244.0.5"), ("MODE", "fast"), ("NAME", "p"), ("TOKEN", "s3cret")];
        assert_eq!(env, want.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    }

    #[test]
    fn required_references_that_do_not_resolve_are_the_kubelets_errors() {
        let missing =
            env_of(json!({"name": "c", "image": "x", "envFrom": [{"secretRef": {"name": "gone"}}]}), &fixture());
        assert_eq!(missing.map_err(|e| e.to_string()), Err("secret \"gone\" not found".to_string()));
        let key = env_of(
            json!({"name": "c", "image": "x", "env": [
                {"name": "V", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "nope"}}}]}),
            &fixture(),
        );
        assert_eq!(key.map_err(|e| e.to_string()), Err("couldn't find key nope in ConfigMap ns/settings".to_string()));
        let optional = env_of(
            json!({"name": "c", "image": "x", "envFrom": [{"configMapRef": {"name": "gone", "optional": true}}]}),
            &fixture(),
        );
        assert_eq!(optional, Ok(BTreeMap::new()));
    }
}
