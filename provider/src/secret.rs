//! The sandbox's environment and the per-lease Secret that holds its secret values.
//!
//! Secret values go into one Secret (`<name>-env`) and nowhere else: the pod references them
//! with `secretKeyRef`, and the Secret is owned by the workload (ownerReference) so garbage
//! collection removes it even if an explicit delete is missed.
//!
//! A claim lease keeps its whole env (the config's and the request's, plain and secret) in that
//! Secret, owned by the SandboxClaim, and `execute` exports it into every command it runs; the
//! claim itself carries none. Its `spec.env` would force the claim controller to cold-start a
//! Sandbox from the template (defeating the warm pool, whose Sandboxes run already), and would
//! store the values in plain text in the claim, which anyone who may read claims can see. Keys
//! say which values are secret ([`CLAIM_PLAIN_PREFIX`], [`CLAIM_SECRET_PREFIX`]): only those
//! are redacted from a command's output.

use std::collections::BTreeMap;
use std::fmt;

use contract::quote;
use serde_json::{Value, json};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::acquire::EnvVar;
use crate::config::is_env_name;
use crate::errors::ProviderError;
use crate::exec_wrapper::RESERVED_ENV_PREFIX;
use crate::input_limits::{ENV_VARS, PLAIN_ENV, env_entry_len};
use crate::k8s_types::{EnvVar as PodEnvVar, EnvVarSource, Secret, SecretKeySelector};
use crate::pod_spec::HOME_DIR;

/// The container env and the Secret data it refers to.
pub struct EnvPlan {
    /// Env of the container: plain values, and `secretKeyRef`s for secret ones.
    pub pod_env: Vec<PodEnvVar>,
    /// Secret values by key (the env name); empty when no value is secret.
    pub secret_data: BTreeMap<String, String>,
}

impl fmt::Debug for EnvPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvPlan")
            .field("pod_env", &self.pod_env.iter().map(|e| e.name.as_str()).collect::<Vec<_>>())
            .field("secret_keys", &self.secret_data.keys().collect::<Vec<_>>())
            .finish()
    }
}

enum Source {
    Plain(String),
    Secret(String),
}

/// Key prefix of a plain env value in a claim lease's Secret (`plain.MODE`).
pub const CLAIM_PLAIN_PREFIX: &str = "plain.";
/// Key prefix of a secret env value in a claim lease's Secret (`secret.API_KEY`).
pub const CLAIM_SECRET_PREFIX: &str = "secret.";

/// Merges `entries` (the start), the config's env and the request's env (later wins on a name),
/// refusing names a shell cannot export and names the request repeats; the merged env is held
/// to the same limits as each part (`what` names it for the count).
fn merge(
    mut entries: Vec<(String, Source)>,
    config_env: &BTreeMap<String, String>,
    request: &[EnvVar],
    what: &str,
) -> Result<Vec<(String, Source)>, ProviderError> {
    let mut put = |name: &str, source: Source| match entries.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => slot.1 = source,
        None => entries.push((name.to_string(), source)),
    };
    for (name, value) in config_env {
        put(name, Source::Plain(value.clone()));
    }
    let mut seen: Vec<&str> = Vec::new();
    for var in request {
        if !is_env_name(&var.name) {
            return Err(ProviderError::rejected(format!(
                "env var name {} is not accepted: names must match [A-Za-z_][A-Za-z0-9_]*; rename it in the host",
                quote(&var.name)
            )));
        }
        if seen.contains(&var.name.as_str()) {
            return Err(ProviderError::rejected(format!(
                "env var {} appears more than once in the request; send each name once",
                quote(&var.name)
            )));
        }
        seen.push(&var.name);
        put(&var.name, if var.secret { Source::Secret(var.value.clone()) } else { Source::Plain(var.value.clone()) });
    }
    ENV_VARS.check(|| what.to_string(), entries.len())?;
    let plain = entries.iter().fold(0usize, |n, (name, source)| match source {
        Source::Plain(value) => n.saturating_add(env_entry_len(name, value)),
        Source::Secret(_) => n,
    });
    PLAIN_ENV.check(|| "plain env names and values of the config and the request together".into(), plain)?;
    Ok(entries)
}

/// Merges `HOME`, the config's env and the request's env (later wins on a name) into the
/// container env; secret values become references to `secret_name`. The merged env is held to
/// the same limits as each part.
pub fn plan_env(
    config_env: &BTreeMap<String, String>,
    request: &[EnvVar],
    secret_name: &str,
) -> Result<EnvPlan, ProviderError> {
    let home = vec![("HOME".to_string(), Source::Plain(HOME_DIR.to_string()))];
    let entries = merge(home, config_env, request, "HOME, the config's and the request's env together")?;
    let mut pod_env = Vec::with_capacity(entries.len());
    let mut secret_data = BTreeMap::new();
    for (name, source) in entries {
        match source {
            Source::Plain(value) => pod_env.push(PodEnvVar { name, value: Some(value), value_from: None }),
            Source::Secret(value) => {
                pod_env.push(PodEnvVar {
                    name: name.clone(),
                    value: None,
                    value_from: Some(EnvVarSource {
                        secret_key_ref: SecretKeySelector {
                            name: secret_name.to_string(),
                            key: name.clone(),
                            optional: false,
                        },
                    }),
                });
                secret_data.insert(name, value);
            }
        }
    }
    Ok(EnvPlan { pod_env, secret_data })
}

/// A claim lease's env as its Secret's data (see the module docs): the config's env and the
/// request's (the request wins on a name), each key prefixed by whether the value is secret.
/// Names of the exec wrapper's own variables are refused, since every command gets this env.
pub fn plan_claim_env(
    config_env: &BTreeMap<String, String>,
    request: &[EnvVar],
) -> Result<BTreeMap<String, String>, ProviderError> {
    let entries = merge(Vec::new(), config_env, request, "the config's and the request's env together")?;
    let mut data = BTreeMap::new();
    for (name, source) in entries {
        if name.starts_with(RESERVED_ENV_PREFIX) {
            return Err(ProviderError::rejected(format!(
                "env var name {} starts with `{RESERVED_ENV_PREFIX}`, which the command wrapper of execute uses \
                 itself; rename it in the config or the host",
                quote(&name)
            )));
        }
        let (key, value) = match source {
            Source::Plain(value) => (format!("{CLAIM_PLAIN_PREFIX}{name}"), value),
            Source::Secret(value) => (format!("{CLAIM_SECRET_PREFIX}{name}"), value),
        };
        data.insert(key, value);
    }
    Ok(data)
}

/// The env a claim lease's Secret holds, as `execute` exports it. No `Debug`: it holds values.
pub struct LeaseEnv {
    /// Every variable, by name.
    pub vars: Vec<(String, String)>,
    /// The values to redact from a command's output.
    pub secret_values: Vec<String>,
}

/// A Secret's data, decoded (lenient: a value that is not base64 is skipped).
pub fn decoded_data(secret: &Value) -> Vec<(String, String)> {
    let data = secret.get("data").and_then(Value::as_object);
    data.into_iter()
        .flatten()
        .filter_map(|(key, v)| Some((key.clone(), STANDARD.decode(v.as_str()?).ok()?)))
        .map(|(key, bytes)| (key, String::from_utf8_lossy(&bytes).into_owned()))
        .collect()
}

/// Reads a claim lease's env back from its Secret (`what` names the Secret). A key the
/// provider would not have written, or a value no process environment can hold, is refused
/// (the key is named, never the value).
pub fn claim_env_of(what: &str, secret: &Value) -> Result<LeaseEnv, ProviderError> {
    let mut env = LeaseEnv { vars: Vec::new(), secret_values: Vec::new() };
    for (key, value) in decoded_data(secret) {
        let (name, secret) = match (key.strip_prefix(CLAIM_PLAIN_PREFIX), key.strip_prefix(CLAIM_SECRET_PREFIX)) {
            (Some(name), _) => (name, false),
            (_, Some(name)) => (name, true),
            (None, None) => ("", false),
        };
        if !is_env_name(name) || name.starts_with(RESERVED_ENV_PREFIX) || value.contains('\0') {
            return Err(ProviderError::rejected(format!(
                "{what} holds the entry {}, which is not an env var this provider wrote, so the lease's env cannot \
                 be passed on; nothing was run. Destroy the lease and acquire a new one.",
                quote(&key)
            )));
        }
        if secret {
            env.secret_values.push(value.clone());
        }
        env.vars.push((name.to_string(), value));
    }
    Ok(env)
}

/// The per-lease Secret (its values as `stringData`; the API server stores them as `data`).
pub fn secret_manifest(
    name: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    data: &BTreeMap<String, String>,
) -> Result<Value, ProviderError> {
    let secret = Secret::opaque(crate::naming::object_meta(name, namespace, labels, annotations), data.clone());
    serde_json::to_value(&secret).map_err(|e| ProviderError::internal(format!("could not encode the Secret: {e}")))
}

/// A merge patch making `owner` the Secret's only owner, so deleting the workload deletes it.
pub fn owner_patch(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({"metadata": {"ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}]}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str, value: &str, secret: bool) -> EnvVar {
        EnvVar { name: name.into(), value: value.into(), secret }
    }

    #[test]
    fn secret_values_become_references() {
        let config_env = BTreeMap::from([("MODE".to_string(), "slow".to_string())]);
        let plan =
            plan_env(&config_env, &[var("MODE", "fast", false), var("API_KEY", "s3cr3t-value", true)], "pc-1-env")
                .unwrap();
        let env = serde_json::to_string(&plan.pod_env).unwrap();
        assert!(!env.contains("s3cr3t-value"), "{env}");
        assert_eq!(plan.pod_env[0].name, "HOME");
        assert_eq!(plan.pod_env[1].value.as_deref(), Some("fast"), "the request wins over config");
        let reference = &plan.pod_env[2].value_from.as_ref().unwrap().secret_key_ref;
        assert_eq!((reference.name.as_str(), reference.key.as_str()), ("pc-1-env", "API_KEY"));
        assert_eq!(plan.secret_data["API_KEY"], "s3cr3t-value");
        assert!(!format!("{plan:?}").contains("s3cr3t-value"));
    }

    #[test]
    fn bad_or_repeated_names_are_refused_without_their_values() {
        let err = plan_env(&BTreeMap::new(), &[var("BAD-NAME", "s3cr3t", true)], "x").unwrap_err();
        assert_eq!(err.kind(), "rejected");
        assert!(!err.message().contains("s3cr3t"));
        let err = plan_env(&BTreeMap::new(), &[var("A", "s3cr3t", true), var("A", "other", true)], "x").unwrap_err();
        assert!(err.message().contains("more than once"));
        assert!(!err.message().contains("s3cr3t"));
    }

    #[test]
    fn a_long_bad_name_is_quoted_by_a_short_prefix() {
        let name = "-".repeat(100_000);
        let err = plan_env(&BTreeMap::new(), &[var(&name, "v", false)], "x").unwrap_err();
        crate::testkit::assert_quotes_a_prefix(err.message(), &name);
    }

    #[test]
    fn a_claim_lease_keeps_its_whole_env_in_the_secret_keyed_by_kind() {
        let config_env = BTreeMap::from([("MODE".to_string(), "slow".to_string())]);
        let request = [var("MODE", "fast", false), var("API_KEY", "s3cr3t-value", true)];
        let data = plan_claim_env(&config_env, &request).unwrap();
        assert_eq!(
            data,
            BTreeMap::from([
                ("plain.MODE".to_string(), "fast".to_string()),
                ("secret.API_KEY".to_string(), "s3cr3t-value".to_string())
            ]),
            "no HOME: the template decides the pod"
        );
        let secret = json!({"data": {"plain.MODE": "ZmFzdA==", "secret.API_KEY": STANDARD.encode("s3cr3t-value")}});
        let env = claim_env_of("Secret ns/x-env", &secret).unwrap();
        assert_eq!(env.vars, vec![("MODE".into(), "fast".into()), ("API_KEY".into(), "s3cr3t-value".into())]);
        assert_eq!(env.secret_values, vec!["s3cr3t-value".to_string()], "only secret values are redacted");
        let err = plan_claim_env(&BTreeMap::new(), &[var("sandbox_exec_pid", "1", false)]).unwrap_err();
        assert!(err.message().contains("command wrapper"), "{err}");
    }

    #[test]
    fn a_claim_secret_entry_the_provider_did_not_write_is_refused_without_its_value() {
        for key in ["API_KEY", "plain.1X", "secret.sandbox_exec_x", "other.A"] {
            let secret = json!({"data": {key: STANDARD.encode("s3cr3t-value")}});
            let err = claim_env_of("Secret ns/x-env", &secret).err().expect("refused");
            assert!(err.message().contains(key) && !err.message().contains("s3cr3t"), "{err}");
        }
    }

    #[test]
    fn secret_manifest_carries_labels_and_data() {
        let labels = BTreeMap::from([("l".to_string(), "v".to_string())]);
        let data = BTreeMap::from([("K".to_string(), "v".to_string())]);
        let s = secret_manifest("pc-1-env", "ns", &labels, &BTreeMap::new(), &data).unwrap();
        assert_eq!(s["kind"], "Secret");
        assert_eq!(s["apiVersion"], "v1");
        assert_eq!(s["metadata"]["labels"]["l"], "v");
        assert_eq!(s["stringData"]["K"], "v");
        assert_eq!(s["type"], "Opaque");
        let p = owner_patch("batch/v1", "Job", "pc-1", "u-1");
        assert_eq!(p["metadata"]["ownerReferences"][0]["uid"], "u-1");
    }
}
