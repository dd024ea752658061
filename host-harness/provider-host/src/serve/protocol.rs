//! The wire types of the JSON-lines protocol (see the [module docs](super)): one request per
//! line in, one reply per line out, and the errors a reply can carry.

use serde::Serialize;
use serde_json::Value;

use crate::error::HostError;
use crate::records::ProviderError;
use contract::quote;

/// The protocol's version, which `hello` reports; it changes only when a client must change.
pub const PROTOCOL_VERSION: u32 = 1;

/// A request's id as the client sent it (a string or an integer), echoed in its reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum RequestId {
    /// `"id": 7`
    Number(i64),
    /// `"id": "acq-1"`
    Text(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::Text(t) => write!(f, "{}", quote(t)),
        }
    }
}

/// One parsed request line.
#[derive(Debug)]
pub struct Request {
    /// Echoed in the reply.
    pub id: RequestId,
    /// The call, with its params checked.
    pub method: String,
    /// The params object (`{}` when absent).
    pub params: Value,
}

/// Where an error came from, so a client can tell the provider's answer from the host's
/// failure and from its own mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorSource {
    /// The provider answered with its `provider-error`.
    Provider,
    /// The host could not run the call (trap, deadline, memory, input size) or shut down.
    Host,
    /// The request itself is wrong; nothing was called.
    Protocol,
}

/// The `error` member of a failed reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct WireError {
    /// Who failed.
    pub source: ErrorSource,
    /// Stable and machine-readable: the WIT case name of a `provider-error` (`image-pull`), or
    /// the host's or the protocol's own (`timeout`, `cancelled`, `unknown-method`, ...).
    pub kind: String,
    /// What happened, what it means, and what to do; never a secret value.
    pub message: String,
    /// Whether the same request may succeed later.
    pub retryable: bool,
    /// The config field at fault, for `invalid-config`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl WireError {
    /// A mistake of the client's: never retryable as it is.
    pub fn protocol(kind: &str, message: impl Into<String>) -> Self {
        Self {
            source: ErrorSource::Protocol,
            kind: kind.to_string(),
            message: message.into(),
            retryable: false,
            path: None,
        }
    }

    /// The host failed around the call (not the provider): an answer it could not encode.
    pub fn internal(message: String, retryable: bool) -> Self {
        Self { source: ErrorSource::Host, kind: "internal".into(), message, retryable, path: None }
    }

    /// The call's task ended without an answer: a bug of the host's, not the provider's.
    pub fn host_bug(method: &str) -> Self {
        Self::internal(
            format!(
                "{method} ended in the host without an answer (a bug of the host's; its log says more); its outcome is \
                 unknown: send it again"
            ),
            true,
        )
    }

    /// The host did not take the request, to bound what it holds; the same request may be sent
    /// again once a call in flight has answered.
    pub fn busy(message: String) -> Self {
        Self { source: ErrorSource::Host, kind: "busy".into(), message, retryable: true, path: None }
    }

    /// The call was ended by the host's shutdown before it answered.
    pub fn cancelled(method: &str, why: &str) -> Self {
        let advice = if method == "acquire" {
            "it may have created a sandbox: send the acquire again with the same acquisition-id to a running host (it \
             adopts what this one made and returns its lease), then release that lease if it is not wanted"
        } else {
            "its outcome is unknown: send it again to a running host"
        };
        Self {
            source: ErrorSource::Host,
            kind: "cancelled".into(),
            message: format!("{method} was cancelled: the host shut down ({why}) before it finished; {advice}"),
            retryable: true,
            path: None,
        }
    }
}

impl From<HostError> for WireError {
    fn from(e: HostError) -> Self {
        match e {
            HostError::Provider(p) => p.into(),
            other => Self {
                source: ErrorSource::Host,
                kind: other.kind().to_string(),
                retryable: other.retryable(),
                message: other.to_string(),
                path: None,
            },
        }
    }
}

impl From<ProviderError> for WireError {
    fn from(e: ProviderError) -> Self {
        let path = match &e {
            ProviderError::InvalidConfig(d) => Some(d.path.clone()),
            _ => None,
        };
        Self {
            source: ErrorSource::Provider,
            kind: e.kind().to_string(),
            retryable: e.retryable(),
            message: e.message().to_string(),
            path,
        }
    }
}

/// One reply line: `{"id": .., "result": ..}` or `{"id": .., "error": {..}}`. The id is
/// `null` only when the request's own could not be read.
#[derive(Debug, Serialize)]
pub struct Reply {
    id: Option<RequestId>,
    #[serde(flatten)]
    outcome: Outcome,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Outcome {
    Result(Value),
    Error(WireError),
}

impl Reply {
    /// A successful reply.
    pub fn result(id: RequestId, value: Value) -> Self {
        Self { id: Some(id), outcome: Outcome::Result(value) }
    }

    /// A failed reply; `id` is `None` when the request's could not be read.
    pub fn error(id: Option<RequestId>, error: WireError) -> Self {
        Self { id, outcome: Outcome::Error(error) }
    }

    /// The reply as one line of JSON, without the newline.
    pub fn to_line(&self) -> String {
        // A reply is built from strings, numbers and `Value`s only, whose serialization cannot
        // fail; the fallback keeps the protocol intact if that ever changes.
        serde_json::to_string(self).unwrap_or_else(|e| {
            let error = WireError::internal(format!("the host could not encode its reply: {e}"), false);
            let id = serde_json::to_string(&self.id).unwrap_or_else(|_| "null".into());
            let error = serde_json::to_string(&error).unwrap_or_else(|_| "null".into());
            format!(r#"{{"id":{id},"error":{error}}}"#)
        })
    }
}

/// Parses one request line; the error is the reply to send (with the id when it could be read).
pub fn parse_request(line: &str) -> Result<Request, Box<Reply>> {
    let fail = |id: Option<RequestId>, kind: &str, message: String| {
        Box::new(Reply::error(id, WireError::protocol(kind, message)))
    };
    let value: Value = serde_json::from_str(line).map_err(|e| {
        fail(
            None,
            "parse-error",
            format!(
                "a request line is not JSON ({e}); send one JSON object per line: {{\"id\":1,\"method\":\"describe\"}}"
            ),
        )
    })?;
    let Value::Object(mut object) = value else {
        return Err(fail(
            None,
            "invalid-request",
            "a request line is not a JSON object; send {\"id\":..,\"method\":..,\"params\":{..}}".into(),
        ));
    };
    let id = match object.remove("id") {
        Some(Value::Number(n)) if n.is_i64() => RequestId::Number(n.as_i64().unwrap_or_default()),
        Some(Value::String(s)) => RequestId::Text(s),
        _ => {
            return Err(fail(
                None,
                "invalid-request",
                "a request has no id, or one that is neither a string nor an integer; give each request its own".into(),
            ));
        }
    };
    let method = match object.remove("method") {
        Some(Value::String(m)) => m,
        _ => {
            return Err(fail(
                Some(id),
                "invalid-request",
                "the request has no method (a string such as \"acquire\")".into(),
            ));
        }
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err(fail(
                Some(id),
                "invalid-params",
                format!("the params of {} are not a JSON object", quote(&method)),
            ));
        }
    };
    if let Some(extra) = object.keys().next() {
        return Err(fail(
            Some(id),
            "invalid-request",
            format!(
                "the request has a member {} the protocol does not know; send only id, method and params",
                quote(extra)
            ),
        ));
    }
    Ok(Request { id, method, params })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reply_json(reply: &Reply) -> Value {
        serde_json::from_str(&reply.to_line()).expect("a reply line is JSON")
    }

    #[test]
    fn a_request_keeps_its_id_method_and_params() {
        let r = parse_request(r#"{"id":"a-1","method":"probe","params":{"config":{}}}"#).expect("parses");
        assert_eq!(
            (r.id, r.method.as_str(), r.params),
            (RequestId::Text("a-1".into()), "probe", json!({"config": {}}))
        );
        let r = parse_request(r#"{"id":7,"method":"describe"}"#).expect("parses");
        assert_eq!((r.id, r.params), (RequestId::Number(7), json!({})));
    }

    #[test]
    fn a_bad_line_is_answered_with_what_is_wrong_and_the_id_when_known() {
        let cases = [
            ("not json", None, "parse-error"),
            ("[1]", None, "invalid-request"),
            (r#"{"method":"describe"}"#, None, "invalid-request"),
            (r#"{"id":1.5,"method":"describe"}"#, None, "invalid-request"),
            (r#"{"id":3}"#, Some(json!(3)), "invalid-request"),
            (r#"{"id":3,"method":"probe","params":[1]}"#, Some(json!(3)), "invalid-params"),
            (r#"{"id":"x","method":"probe","extra":1}"#, Some(json!("x")), "invalid-request"),
        ];
        for (line, id, kind) in cases {
            let reply = reply_json(&parse_request(line).expect_err(line));
            assert_eq!(reply["id"], id.unwrap_or(Value::Null), "{line}");
            assert_eq!(
                (reply["error"]["kind"].as_str(), reply["error"]["source"].as_str()),
                (Some(kind), Some("protocol")),
                "{line}"
            );
        }
    }

    #[test]
    fn replies_mirror_the_wit_records_and_errors_keep_their_case() {
        let ok = reply_json(&Reply::result(RequestId::Number(1), json!({"expired": "gone"})));
        assert_eq!(ok, json!({"id": 1, "result": {"expired": "gone"}}));
        let error = WireError::from(HostError::Provider(ProviderError::invalid_config("/image", "empty")));
        let failed = reply_json(&Reply::error(Some(RequestId::Text("r".into())), error));
        assert_eq!(
            failed,
            json!({"id": "r", "error": {"source": "provider", "kind": "invalid-config", "message": "empty", "retryable": false, "path": "/image"}})
        );
        let timeout = WireError::from(HostError::Timeout { call: "acquire", limit_ms: 5 });
        assert_eq!((timeout.source, timeout.kind.as_str(), timeout.retryable), (ErrorSource::Host, "timeout", true));
    }
}
