//! The two fields of a provider config the host reads for its own checks: the namespace the
//! config names and its backend. The provider validates the whole config; the host's probe
//! findings (writes, NetworkPolicy, warm pools) and its write guard only need these two, and
//! read them here, so a config names its namespace and backend in one way for all of them.

use serde_json::Value;

use crate::records::Backend;

/// The namespace the config names, if it names one as a string.
pub(crate) fn namespace(config: &Value) -> Option<&str> {
    config.get("namespace")?.as_str()
}

/// The backend the config names, or the default one when it names none; `None` for a name no
/// backend has (the provider's validation says so).
pub(crate) fn backend(config: &Value) -> Option<Backend> {
    match config.get("backend").and_then(Value::as_str) {
        Some(name) => Backend::parse(name),
        None => Some(Backend::default()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_config_names_its_namespace_and_backend_or_takes_the_default_backend() {
        let config = json!({"namespace": "team-a", "backend": "claim"});
        assert_eq!((namespace(&config), backend(&config)), (Some("team-a"), Some(Backend::Claim)));
        assert_eq!(backend(&json!({})), Some(Backend::default()));
        assert_eq!(backend(&json!({"backend": "vm"})), None);
        assert_eq!(namespace(&json!({"namespace": 7})), None);
        assert_eq!(namespace(&json!({"backend": "job"})), None);
    }
}
