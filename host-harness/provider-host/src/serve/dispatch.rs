//! One request, run: its method looked up, its params read into the contract's records, the
//! provider called through [`ProviderHost`], and the answer as JSON.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::protocol::{PROTOCOL_VERSION, WireError};
use crate::records::{AcquireRequest, ExecRequest, Lease, LeaseRef};
use crate::runner::ProviderHost;
use contract::quote;
use contract::quote::shorten;

/// The methods, in the order `hello` lists them.
pub const METHODS: &[&str] = &[
    "hello",
    "describe",
    "validate-config",
    "probe",
    "acquire",
    "resume-check",
    "renew",
    "release",
    "destroy",
    "execute",
];

/// The refusal of a method that does not exist, so it is answered before it is queued.
pub fn refuse_unknown(method: &str) -> Option<WireError> {
    (!METHODS.contains(&method)).then(|| {
        WireError::protocol(
            "unknown-method",
            format!("there is no method {}; the methods are {}", quote(method), METHODS.join(", ")),
        )
    })
}

/// Runs `method` with `params` on `host`: the result's JSON, or the error to reply with.
/// `max_line_bytes` is what `hello` tells a client about the longest request line taken.
pub async fn run(host: &ProviderHost, method: &str, params: Value, max_line_bytes: usize) -> Result<Value, WireError> {
    match method {
        "hello" => {
            no_params(method, &params)?;
            let limits = host.limits();
            Ok(serde_json::json!({
                "protocol": PROTOCOL_VERSION,
                "host-version": env!("CARGO_PKG_VERSION"),
                "contract-version": host.contract_version(),
                "methods": METHODS,
                "max-line-bytes": max_line_bytes,
                "call-timeout-ms": limits.call_timeout_ms,
                "exec-timeout-ms": limits.exec_timeout_ms,
                "max-concurrent-calls": limits.max_concurrent_calls,
                "max-executes-per-lease": limits.max_executes_per_lease,
            }))
        }
        "describe" => {
            no_params(method, &params)?;
            to_json(host.describe().await?)
        }
        "validate-config" => {
            let p: ConfigParams = read(method, params, &["config"])?;
            to_json(host.validate_config(&p.config.0).await?)
        }
        "probe" => {
            let p: ConfigParams = read(method, params, &["config"])?;
            to_json(host.probe(&p.config.0).await?)
        }
        "acquire" => {
            let fields = ["config", "run-id", "acquisition-id", "agent-id", "requested-expires-at", "env", "reusable"];
            let params = config_as_text(method, params)?;
            let request: AcquireRequest = read(method, params, &fields)?;
            to_json(host.acquire(request).await?)
        }
        "resume-check" => to_json(host.resume_check(lease_ref(method, params, &[])?.0).await?),
        "renew" => {
            let (lease, expires_at) = lease_ref(method, params, &["expires-at"])?;
            let expires_at = expires_at.ok_or_else(|| {
                WireError::protocol("invalid-params", "renew needs expires-at (epoch milliseconds of the new expiry)")
            })?;
            to_json(host.renew(lease, expires_at).await?)
        }
        "release" => {
            host.release(lease_ref(method, params, &[])?.0).await?;
            Ok(Value::Null)
        }
        "destroy" => to_json(host.destroy(lease_ref(method, params, &[])?.0).await?),
        "execute" => {
            let p: ExecuteParams = read(method, params, &["lease", "config", "request"])?;
            to_json(host.execute(LeaseRef { lease: p.lease, config: p.config.0 }, p.request).await?)
        }
        other => Err(refuse_unknown(other).unwrap_or_else(|| {
            WireError::protocol("unknown-method", format!("{} is listed but not served", quote(other)))
        })),
    }
}

/// A provider config: JSON text as the WIT carries it, or the JSON itself (an object), which
/// the host turns into text.
#[cfg_attr(test, derive(Debug))]
struct ConfigText(String);

impl<'de> Deserialize<'de> for ConfigText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(text) => {
                serde_json::from_str::<Value>(&text)
                    .map_err(|e| serde::de::Error::custom(format!("config is a string but not JSON text ({e})")))?;
                Ok(Self(text))
            }
            object @ Value::Object(_) => Ok(Self(object.to_string())),
            _ => Err(serde::de::Error::custom("config must be a JSON object, or JSON text in a string")),
        }
    }
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct ConfigParams {
    config: ConfigText,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct LeaseParams {
    lease: Lease,
    config: ConfigText,
    #[serde(default)]
    expires_at: Option<i64>,
}

#[derive(Deserialize)]
struct ExecuteParams {
    lease: Lease,
    config: ConfigText,
    request: ExecRequest,
}

/// The `lease-ref` of a call on a stored lease, and its `expires-at` (renew's only).
fn lease_ref(method: &str, params: Value, extra: &[&str]) -> Result<(LeaseRef, Option<i64>), WireError> {
    let mut fields = vec!["lease", "config"];
    fields.extend_from_slice(extra);
    let p: LeaseParams = read(method, params, &fields)?;
    Ok((LeaseRef { lease: p.lease, config: p.config.0 }, p.expires_at))
}

/// `acquire`'s params with `config` as text, as [`AcquireRequest`] takes it.
fn config_as_text(method: &str, mut params: Value) -> Result<Value, WireError> {
    if let Some(config) = params.get_mut("config") {
        let text = ConfigText::deserialize(config.take())
            .map_err(|e| WireError::protocol("invalid-params", format!("{method}: {e}")))?;
        *config = Value::String(text.0);
    }
    Ok(params)
}

fn no_params(method: &str, params: &Value) -> Result<(), WireError> {
    match params.as_object().and_then(|o| o.keys().next()) {
        None => Ok(()),
        Some(key) => {
            Err(WireError::protocol("invalid-params", format!("{method} takes no params; got {}", quote(key))))
        }
    }
}

/// Reads params into `T`, refusing members outside `fields`. A mistake under `env` is reported
/// by its path alone: serde's own words would quote the value, which may be a secret.
fn read<T: DeserializeOwned>(method: &str, params: Value, fields: &[&str]) -> Result<T, WireError> {
    if let Some(unknown) = params.as_object().and_then(|o| unknown_member(o, fields)) {
        return Err(WireError::protocol(
            "invalid-params",
            format!("{method} has no param {}; its params are {}", quote(unknown), fields.join(", ")),
        ));
    }
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        // serde's words quote the value they refused: cut short, as every echo of input is.
        let message = if path.starts_with("env") || path.starts_with("request.env") {
            format!("{method}: params.{path} is not an env var {{name, value, secret}} (the value is not shown)")
        } else {
            format!("{method}: params.{path}: {}", shorten(&e.inner().to_string()))
        };
        WireError::protocol("invalid-params", message)
    })
}

fn unknown_member<'a>(object: &'a Map<String, Value>, fields: &[&str]) -> Option<&'a str> {
    object.keys().map(String::as_str).find(|k| !fields.contains(k))
}

fn to_json<T: serde::Serialize>(value: T) -> Result<Value, WireError> {
    serde_json::to_value(value)
        .map_err(|e| WireError::internal(format!("the host could not encode the provider's answer: {e}"), false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_config_is_taken_as_an_object_or_as_json_text() {
        let object: ConfigParams = read("probe", json!({"config": {"image": "x"}}), &["config"]).expect("object");
        let text: ConfigParams = read("probe", json!({"config": "{\"image\":\"x\"}"}), &["config"]).expect("text");
        assert_eq!(object.config.0, text.config.0);
        let bad = read::<ConfigParams>("probe", json!({"config": "{nope"}), &["config"]).expect_err("refused");
        assert_eq!(bad.kind, "invalid-params");
        let bad = read::<ConfigParams>("probe", json!({"config": 3}), &["config"]).expect_err("refused");
        assert!(bad.message.contains("params.config"), "{}", bad.message);
    }

    #[test]
    fn unknown_params_are_refused_by_name() {
        let e = read::<ConfigParams>("probe", json!({"config": {}, "confg": 1}), &["config"]).expect_err("refused");
        assert!(e.message.contains("\"confg\"") && e.message.contains("config"), "{}", e.message);
    }

    #[test]
    fn a_refused_value_is_echoed_by_a_short_prefix() {
        let long = "B".repeat(3000);
        let params = json!({"lease": {"provider-lease-id": "x", "backend": long, "namespace": "n", "api-version": "v",
            "workload-uid": "u", "metadata": "{}"}, "config": {}});
        let e = lease_ref("destroy", params, &[]).expect_err("refused");
        assert!(e.message.contains("params.lease.backend"), "{}", e.message);
        assert!(e.message.len() < 300, "{} bytes: {}", e.message.len(), e.message);
    }

    #[test]
    fn a_malformed_env_var_never_shows_its_value() {
        let fields = ["config", "run-id", "acquisition-id", "env"];
        let params = json!({"config": "{}", "run-id": "r", "acquisition-id": "a",
            "env": [{"name": "TOKEN", "value": 918_273_645, "secret": true}]});
        let e = read::<AcquireRequest>("acquire", params, &fields).expect_err("refused");
        assert!(e.message.contains("params.env[0]"), "{}", e.message);
        assert!(!e.message.contains("918273645"), "{}", e.message);
        // A misspelt `secret` is refused, never taken for a plain value.
        let params = json!({"config": "{}", "run-id": "r", "acquisition-id": "a",
            "env": [{"name": "TOKEN", "value": "s3cr3t-value", "secert": true}]});
        let e = read::<AcquireRequest>("acquire", params, &fields).expect_err("refused");
        assert!(e.message.contains("params.env[0]") && !e.message.contains("s3cr3t"), "{}", e.message);
    }
}
