//! Turns API server answers and client failures into the contract's `kube-error`.
//!
//! The provider decides from these what to do (adopt on `already-exists`, re-list on `gone`,
//! back off on `unavailable`), so the mapping follows the `Status` conventions of
//! kube-apiserver: the code first, and the `reason` where one code means two things (409).

use std::error::Error as StdError;
use std::time::Duration;

use http::HeaderMap;
use serde_json::Value;

use contract::kube_error::NOT_SENT;

use crate::bindings::kube::{KubeError, OtherDetail, UnavailableDetail};

/// Longest piece of a non-`Status` error body passed on (a proxy's HTML page, say).
const MAX_RAW_MESSAGE: usize = 512;

/// Maps an error response (status code, headers, body) to a `kube-error`.
pub(crate) fn from_response(code: u16, headers: &HeaderMap, body: &[u8]) -> KubeError {
    let status: Option<Value> = serde_json::from_slice(body).ok().filter(|v: &Value| v["kind"] == "Status");
    let retry_after = retry_after_header(headers);
    match status {
        Some(status) => from_status(code, &status, retry_after),
        None => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            let message = if text.is_empty() {
                format!("HTTP {code} without a body")
            } else {
                format!("HTTP {code}: {}", truncate(text, MAX_RAW_MESSAGE))
            };
            classify(code, "", message, retry_after)
        }
    }
}

/// Maps a `Status` object (an error response, or the object of a watch ERROR event).
pub(crate) fn from_status(http_code: u16, status: &Value, retry_after_header: Option<u32>) -> KubeError {
    let code = status["code"].as_u64().and_then(|c| u16::try_from(c).ok()).filter(|c| *c != 0).unwrap_or(http_code);
    let reason = status["reason"].as_str().unwrap_or_default();
    let message =
        status["message"].as_str().filter(|m| !m.is_empty()).map(str::to_string).unwrap_or_else(|| {
            if reason.is_empty() { format!("HTTP {code}") } else { format!("HTTP {code} {reason}") }
        });
    let retry_after = retry_after_header.or_else(|| {
        status["details"]["retryAfterSeconds"].as_u64().and_then(|s| u32::try_from(s).ok()).filter(|s| *s > 0)
    });
    classify(code, reason, message, retry_after)
}

fn classify(code: u16, reason: &str, message: String, retry_after: Option<u32>) -> KubeError {
    match (code, reason) {
        (_, "Timeout" | "ServerTimeout") | (504, _) => KubeError::Timeout(message),
        (404, _) => KubeError::NotFound(message),
        (409, "AlreadyExists") => KubeError::AlreadyExists(message),
        (409, _) => KubeError::Conflict(message),
        (410, _) => KubeError::Gone(message),
        (400 | 422, _) => KubeError::Invalid(message),
        (401, _) => KubeError::Unauthorized(message),
        (403, _) => KubeError::Forbidden(message),
        (429 | 503, _) => KubeError::Unavailable(UnavailableDetail { message, retry_after_seconds: retry_after }),
        _ => KubeError::Other(OtherDetail { code, message }),
    }
}

/// `Retry-After` in seconds (the API server sends delta-seconds, never a date).
fn retry_after_header(headers: &HeaderMap) -> Option<u32> {
    headers.get(http::header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()
}

/// Maps a failure of the client itself (no HTTP answer, or a broken body).
pub(crate) fn from_client_error(err: &kube::Error) -> KubeError {
    from_client_error_at(err, None)
}

/// [`from_client_error`], naming the API server (its URL, as the kubeconfig gives it) when
/// the host knows it, as kubectl names the server it could not reach.
pub(crate) fn from_client_error_at(err: &kube::Error, server: Option<&str>) -> KubeError {
    match err {
        kube::Error::Api(status) => {
            let value = serde_json::to_value(status.as_ref()).unwrap_or(Value::Null);
            from_status(status.code, &value, None)
        }
        kube::Error::Auth(e) => KubeError::Unauthorized(format!("the host could not authenticate to the cluster: {e}")),
        other if chain_has_timeout(other) => KubeError::Timeout(format!("the cluster did not answer in time: {other}")),
        other => {
            let to = server.map(|url| format!("the API server at {url}")).unwrap_or_else(|| "the cluster".to_string());
            let causes = crate::error::with_causes(other);
            if chain_has_connect_failure(other) {
                KubeError::Transport(format!("{NOT_SENT}no connection to {to} could be made: {causes}"))
            } else {
                KubeError::Transport(format!("the request to {to} failed: {causes}"))
            }
        }
    }
}

/// The host's own per-request deadline ran out.
pub(crate) fn request_timed_out(what: &str, after: Duration) -> KubeError {
    KubeError::Timeout(format!(
        "{what}: the cluster did not answer within {} ms (host request timeout)",
        after.as_millis()
    ))
}

/// Whether any error in `err`'s chain of causes satisfies `test`.
fn chain_has(err: &(dyn StdError + 'static), test: impl Fn(&(dyn StdError + 'static)) -> bool) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if test(e) {
            return true;
        }
        current = e.source();
    }
    false
}

/// Whether the connection to the API server was never made (refused, unreachable, not
/// resolved), so the request was not sent; a failure on an open connection may have been.
fn chain_has_connect_failure(err: &(dyn StdError + 'static)) -> bool {
    use std::io::ErrorKind::{AddrNotAvailable, ConnectionRefused, HostUnreachable, NetworkUnreachable};
    chain_has(err, |e| {
        e.downcast_ref::<hyper_util::client::legacy::Error>().is_some_and(|h| h.is_connect())
            || e.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(io.kind(), ConnectionRefused | HostUnreachable | NetworkUnreachable | AddrNotAvailable)
            })
    })
}

fn chain_has_timeout(err: &(dyn StdError + 'static)) -> bool {
    chain_has(err, |e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut))
}

/// Cuts text at a character boundary, marking the cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The host's answer to the component as the contract's plain type, for hosts that run a
/// provider's logic natively (the benchmarks' floor): the one conversion on this side of the
/// WIT, as the component's glue is the one on the other.
impl From<KubeError> for contract::KubeError {
    fn from(e: KubeError) -> Self {
        match e {
            KubeError::NotFound(m) => Self::NotFound(m),
            KubeError::AlreadyExists(m) => Self::AlreadyExists(m),
            KubeError::Conflict(m) => Self::Conflict(m),
            KubeError::Gone(m) => Self::Gone(m),
            KubeError::Invalid(m) => Self::Invalid(m),
            KubeError::Forbidden(m) => Self::Forbidden(m),
            KubeError::Denied(m) => Self::Denied(m),
            KubeError::NotOwned(m) => Self::NotOwned(m),
            KubeError::Unauthorized(m) => Self::Unauthorized(m),
            KubeError::Timeout(m) => Self::Timeout(m),
            KubeError::Unavailable(d) => {
                Self::Unavailable { message: d.message, retry_after_seconds: d.retry_after_seconds }
            }
            KubeError::Transport(m) => Self::Transport(m),
            KubeError::Other(d) => Self::Other { code: d.code, message: d.message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_never_made_is_a_request_never_sent() {
        let io = |kind| kube::Error::Service(Box::new(std::io::Error::new(kind, "cause")));
        let refused = contract::KubeError::from(from_client_error_at(
            &io(std::io::ErrorKind::ConnectionRefused),
            Some("https://127.0.0.1:1"),
        ));
        assert!(refused.was_not_sent(), "{refused}");
        assert!(refused.to_string().contains("no connection to the API server at https://127.0.0.1:1"), "{refused}");
        let reset = contract::KubeError::from(from_client_error(&io(std::io::ErrorKind::ConnectionReset)));
        assert!(!reset.was_not_sent(), "a broken connection may have carried the request: {reset}");
    }
    use serde_json::json;

    fn status(code: u16, reason: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": format!("m{code}")}))
        .expect("json")
    }

    #[test]
    fn codes_and_reasons_map_to_the_contract() {
        let none = HeaderMap::new();
        assert!(matches!(from_response(404, &none, &status(404, "NotFound")), KubeError::NotFound(m) if m == "m404"));
        assert!(matches!(from_response(409, &none, &status(409, "AlreadyExists")), KubeError::AlreadyExists(_)));
        assert!(matches!(from_response(409, &none, &status(409, "Conflict")), KubeError::Conflict(_)));
        assert!(matches!(from_response(410, &none, &status(410, "Expired")), KubeError::Gone(_)));
        assert!(matches!(from_response(422, &none, &status(422, "Invalid")), KubeError::Invalid(_)));
        assert!(matches!(from_response(400, &none, &status(400, "BadRequest")), KubeError::Invalid(_)));
        assert!(matches!(from_response(403, &none, &status(403, "Forbidden")), KubeError::Forbidden(_)));
        assert!(matches!(from_response(401, &none, &status(401, "Unauthorized")), KubeError::Unauthorized(_)));
        assert!(matches!(from_response(504, &none, &status(504, "Timeout")), KubeError::Timeout(_)));
        assert!(matches!(from_response(500, &none, &status(500, "ServerTimeout")), KubeError::Timeout(_)));
        assert!(
            matches!(from_response(500, &none, &status(500, "InternalError")), KubeError::Other(d) if d.code == 500)
        );
    }

    #[test]
    fn retry_after_comes_from_the_header_or_the_details() {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("7"));
        let e = from_response(503, &headers, &status(503, "ServiceUnavailable"));
        assert!(matches!(e, KubeError::Unavailable(d) if d.retry_after_seconds == Some(7)));
        let body = serde_json::to_vec(&json!({"kind": "Status", "code": 429, "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 3}}))
        .expect("json");
        let e = from_response(429, &HeaderMap::new(), &body);
        assert!(
            matches!(e, KubeError::Unavailable(d) if d.retry_after_seconds == Some(3) && d.message.contains("429"))
        );
    }

    #[test]
    fn non_status_bodies_are_cut_and_still_classified() {
        let page = format!("<html>{}</html>", "x".repeat(2000));
        let e = from_response(502, &HeaderMap::new(), page.as_bytes());
        assert!(matches!(&e, KubeError::Other(d) if d.code == 502 && d.message.len() < 600), "{e:?}");
        assert!(matches!(from_response(404, &HeaderMap::new(), b""), KubeError::NotFound(m) if m.contains("404")));
    }

    #[test]
    fn watch_error_events_use_the_code_inside_the_status() {
        let gone = json!({"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"});
        assert!(matches!(from_status(200, &gone, None), KubeError::Gone(m) if m.contains("too old")));
    }
}
