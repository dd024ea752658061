//! Secrets and ConfigMaps a pod needs before its containers can be created.
//!
//! A real kubelet cannot build a container's environment or volumes while a referenced Secret
//! or ConfigMap is missing: the container waits with `CreateContainerConfigError` and starts as
//! soon as the object appears. Sandbox providers rely on that to report "secret not found".
//! A kubelet whose watch-based cache lags a new pod says `failed to sync secret cache: timed
//! out waiting for the condition` instead, for a while, even for a Secret that exists; the
//! `config-sync-delay` knob shows that ([`NotSynced`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod};

/// What a lookup knows about one Secret or ConfigMap.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Found {
    /// It does not exist.
    Absent,
    /// It exists with these keys.
    Present(BTreeSet<String>),
    /// The cache is not synced (or the API server does not serve the kind): do not block on it.
    Unknown,
    /// The kubelet's own cache for this pod has not synced (`config-sync-delay`): block, with
    /// the kubelet's words for a cache that timed out.
    NotSynced,
}

/// What the cluster holds right now; the kubelet answers from its watch caches, tests from maps.
pub(crate) trait ConfigLookup {
    /// A Secret in `namespace`.
    fn secret(&self, namespace: &str, name: &str) -> Found;
    /// A ConfigMap in `namespace`.
    fn config_map(&self, namespace: &str, name: &str) -> Found;
}

/// A lookup whose caches have not synced yet: every required reference blocks its container.
pub(crate) struct NotSynced;

impl ConfigLookup for NotSynced {
    fn secret(&self, _: &str, _: &str) -> Found {
        Found::NotSynced
    }

    fn config_map(&self, _: &str, _: &str) -> Found {
        Found::NotSynced
    }
}

/// The kind of object a reference names, for the kubelet's error wording.
#[derive(Clone, Copy)]
enum Kind {
    Secret,
    ConfigMap,
}

/// Why each blocked container cannot be created, keyed by container name (init containers
/// included); empty when every required reference resolves. Volume problems block every
/// container, because the kubelet mounts all of a pod's volumes before starting any.
pub(crate) fn config_errors(pod: &Pod, lookup: &impl ConfigLookup) -> BTreeMap<String, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeMap::new();
    };
    let check = |kind: Kind, name: &str, key: Option<&str>, optional: Option<bool>| {
        missing(lookup, namespace, kind, name, key, optional.unwrap_or(false))
    };

    let volume_error = spec.volumes.iter().flatten().find_map(|volume| {
        let from_secret = volume
            .secret
            .as_ref()
            .and_then(|s| s.secret_name.as_deref().and_then(|name| check(Kind::Secret, name, None, s.optional)));
        let from_config_map =
            volume.config_map.as_ref().and_then(|c| check(Kind::ConfigMap, &c.name, None, c.optional));
        let from_projection = volume.projected.as_ref().and_then(|p| {
            p.sources.iter().flatten().find_map(|source| {
                let secret = source.secret.as_ref().and_then(|s| check(Kind::Secret, &s.name, None, s.optional));
                secret.or_else(|| {
                    source.config_map.as_ref().and_then(|c| check(Kind::ConfigMap, &c.name, None, c.optional))
                })
            })
        });
        from_secret.or(from_config_map).or(from_projection)
    });

    let containers = spec.init_containers.iter().flatten().chain(spec.containers.iter());
    containers
        .filter_map(|container| {
            let own = container_error(container, &check);
            own.or_else(|| volume_error.clone()).map(|message| (container.name.clone(), message))
        })
        .collect()
}

/// The first unresolvable reference in one container's `env` and `envFrom`.
fn container_error(
    container: &Container,
    check: &impl Fn(Kind, &str, Option<&str>, Option<bool>) -> Option<String>,
) -> Option<String> {
    let from_env = container.env.iter().flatten().find_map(|env| {
        let source = env.value_from.as_ref()?;
        let secret =
            source.secret_key_ref.as_ref().and_then(|s| check(Kind::Secret, &s.name, Some(&s.key), s.optional));
        secret.or_else(|| {
            source.config_map_key_ref.as_ref().and_then(|c| check(Kind::ConfigMap, &c.name, Some(&c.key), c.optional))
        })
    });
    from_env.or_else(|| {
        container.env_from.iter().flatten().find_map(|source| {
            let secret = source.secret_ref.as_ref().and_then(|s| check(Kind::Secret, &s.name, None, s.optional));
            secret.or_else(|| {
                source.config_map_ref.as_ref().and_then(|c| check(Kind::ConfigMap, &c.name, None, c.optional))
            })
        })
    })
}

/// The kubelet's message for one reference that does not resolve, if it does not.
fn missing(
    lookup: &impl ConfigLookup,
    namespace: &str,
    kind: Kind,
    name: &str,
    key: Option<&str>,
    optional: bool,
) -> Option<String> {
    if optional {
        return None;
    }
    let found = match kind {
        Kind::Secret => lookup.secret(namespace, name),
        Kind::ConfigMap => lookup.config_map(namespace, name),
    };
    let (lower, title) = match kind {
        Kind::Secret => ("secret", "Secret"),
        Kind::ConfigMap => ("configmap", "ConfigMap"),
    };
    match (found, key) {
        (Found::Absent, _) => Some(format!("{lower} \"{name}\" not found")),
        (Found::NotSynced, _) => Some(format!("failed to sync {lower} cache: timed out waiting for the condition")),
        (Found::Present(keys), Some(key)) if !keys.contains(key) => {
            Some(format!("couldn't find key {key} in {title} {namespace}/{name}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Objects that exist, by (namespace, name), with their keys.
    #[derive(Default)]
    struct Fixture {
        secrets: BTreeMap<(String, String), BTreeSet<String>>,
        config_maps: BTreeMap<(String, String), BTreeSet<String>>,
    }

    impl Fixture {
        fn secret(mut self, name: &str, keys: &[&str]) -> Self {
            let keys = keys.iter().map(|k| k.to_string()).collect();
            self.secrets.insert(("ns".to_string(), name.to_string()), keys);
            self
        }
        fn config_map(mut self, name: &str, keys: &[&str]) -> Self {
            let keys = keys.iter().map(|k| k.to_string()).collect();
            self.config_maps.insert(("ns".to_string(), name.to_string()), keys);
            self
        }
    }

    impl ConfigLookup for Fixture {
        fn secret(&self, namespace: &str, name: &str) -> Found {
            let keys = self.secrets.get(&(namespace.to_string(), name.to_string())).cloned();
            keys.map_or(Found::Absent, Found::Present)
        }
        fn config_map(&self, namespace: &str, name: &str) -> Found {
            let keys = self.config_maps.get(&(namespace.to_string(), name.to_string())).cloned();
            keys.map_or(Found::Absent, Found::Present)
        }
    }

    /// A lookup whose caches have not synced.
    struct Unsynced;

    impl ConfigLookup for Unsynced {
        fn secret(&self, _: &str, _: &str) -> Found {
            Found::Unknown
        }
        fn config_map(&self, _: &str, _: &str) -> Found {
            Found::Unknown
        }
    }

    #[test]
    fn unknown_objects_never_block() {
        assert!(config_errors(&env_secret_pod(None), &Unsynced).is_empty());
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})).expect("test pod")
    }

    fn env_secret_pod(optional: Option<bool>) -> Pod {
        pod(json!({"containers": [{"name": "main", "image": "busybox", "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token", "optional": optional}}}
        ]}]}))
    }

    #[test]
    fn missing_secret_key_ref_blocks_its_container() {
        let errors = config_errors(&env_secret_pod(None), &Fixture::default());
        assert_eq!(errors.get("main").map(String::as_str), Some("secret \"creds\" not found"));
    }

    #[test]
    fn present_secret_resolves() {
        let fixture = Fixture::default().secret("creds", &["token"]);
        assert!(config_errors(&env_secret_pod(None), &fixture).is_empty());
    }

    #[test]
    fn missing_key_in_present_secret_is_reported() {
        let fixture = Fixture::default().secret("creds", &["other"]);
        let errors = config_errors(&env_secret_pod(None), &fixture);
        assert_eq!(errors.get("main").map(String::as_str), Some("couldn't find key token in Secret ns/creds"));
    }

    #[test]
    fn optional_references_never_block() {
        assert!(config_errors(&env_secret_pod(Some(true)), &Fixture::default()).is_empty());
    }

    #[test]
    fn env_from_secret_and_config_map_are_checked() {
        let p = pod(json!({"containers": [
            {"name": "a", "image": "x", "envFrom": [{"secretRef": {"name": "s1"}}]},
            {"name": "b", "image": "x", "envFrom": [{"configMapRef": {"name": "cm1"}}]},
            {"name": "c", "image": "x"}
        ]}));
        let errors = config_errors(&p, &Fixture::default());
        assert_eq!(errors.get("a").map(String::as_str), Some("secret \"s1\" not found"));
        assert_eq!(errors.get("b").map(String::as_str), Some("configmap \"cm1\" not found"));
        assert!(!errors.contains_key("c"));
    }

    #[test]
    fn config_map_key_ref_is_checked() {
        let p = pod(json!({"containers": [{"name": "a", "image": "x", "env": [
            {"name": "V", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}
        ]}]}));
        let errors = config_errors(&p, &Fixture::default());
        assert_eq!(errors.get("a").map(String::as_str), Some("configmap \"settings\" not found"));
        let fixture = Fixture::default().config_map("settings", &["other"]);
        let errors = config_errors(&p, &fixture);
        assert_eq!(errors.get("a").map(String::as_str), Some("couldn't find key mode in ConfigMap ns/settings"));
        let fixture = Fixture::default().config_map("settings", &["mode"]);
        assert!(config_errors(&p, &fixture).is_empty());
    }

    #[test]
    fn missing_volume_secret_blocks_every_container() {
        let p = pod(json!({
            "initContainers": [{"name": "init", "image": "x"}],
            "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}],
            "volumes": [{"name": "v", "secret": {"secretName": "certs"}}]
        }));
        let errors = config_errors(&p, &Fixture::default());
        assert_eq!(errors.len(), 3);
        assert!(errors.values().all(|m| m == "secret \"certs\" not found"));
        assert!(config_errors(&p, &Fixture::default().secret("certs", &[])).is_empty());
    }

    #[test]
    fn optional_volume_and_projected_sources() {
        let p = pod(json!({
            "containers": [{"name": "a", "image": "x"}],
            "volumes": [
                {"name": "v", "secret": {"secretName": "certs", "optional": true}},
                {"name": "w", "projected": {"sources": [
                    {"configMap": {"name": "bundle"}}
                ]}}
            ]
        }));
        let errors = config_errors(&p, &Fixture::default());
        assert_eq!(errors.get("a").map(String::as_str), Some("configmap \"bundle\" not found"));
    }

    #[test]
    fn container_error_wins_over_volume_error() {
        let p = pod(json!({
            "containers": [{"name": "a", "image": "x", "envFrom": [{"secretRef": {"name": "env"}}]}],
            "volumes": [{"name": "v", "configMap": {"name": "files"}}]
        }));
        let errors = config_errors(&p, &Fixture::default());
        assert_eq!(errors.get("a").map(String::as_str), Some("secret \"env\" not found"));
    }

    #[test]
    fn pod_without_spec_has_no_errors() {
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap_or_default();
        assert!(config_errors(&p, &Fixture::default()).is_empty());
    }
}
