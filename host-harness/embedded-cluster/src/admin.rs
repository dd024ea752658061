//! The embedded cluster's own endpoints under `/embedded-cluster/`: fault rules, the request
//! log and the clock, so that tests in another process (or the CLI) can steer the cluster.

use std::time::Duration;

use http::Method;
use serde_json::{Value, json};

use crate::apiserver::ApiServer;
use crate::faults::Rule;
use crate::request::Query;
use crate::status::ApiError;

/// Dispatches one admin request.
pub fn handle(
    api: &ApiServer,
    method: &Method,
    segs: &[String],
    query: &Query,
    body: &[u8],
) -> Result<Value, ApiError> {
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    match (method, segs.as_slice()) {
        (&Method::GET, ["faults"]) => {
            let rules: Vec<Value> = api.faults.list().into_iter().map(|(id, r)| json!({"id": id, "rule": r})).collect();
            Ok(json!({"rules": rules}))
        }
        (&Method::POST, ["faults"]) => {
            let rule: Rule =
                serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid fault rule: {e}")))?;
            Ok(json!({"id": api.faults.add(rule)}))
        }
        (&Method::DELETE, ["faults"]) => {
            api.faults.clear();
            Ok(json!({"cleared": true}))
        }
        (&Method::DELETE, ["faults", id]) => {
            let id: u64 = id.parse().map_err(|_| ApiError::bad_request("fault ids are numbers"))?;
            Ok(json!({"removed": api.faults.remove(id)}))
        }
        (&Method::GET, ["requests"]) => {
            let since = query.int("since")?.unwrap_or(0).max(0) as u64;
            let entries = api.log.since(since);
            let counts = crate::request_log::RequestLog::counts(&entries, query.get("user"));
            Ok(json!({"mark": api.log.mark(), "entries": entries, "counts": counts}))
        }
        (&Method::DELETE, ["requests"]) => {
            api.log.clear();
            Ok(json!({"cleared": true}))
        }
        (&Method::GET, ["clock"]) => Ok(json!({"now": api.clock.now_rfc3339(), "scale": api.clock.scale()})),
        (&Method::POST, ["clock", "advance"]) => {
            let doc: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("expected {{\"seconds\": N}}: {e}")))?;
            let secs = doc["seconds"]
                .as_f64()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| ApiError::bad_request("\"seconds\" must be a non-negative number"))?;
            api.clock.advance(Duration::from_secs_f64(secs));
            Ok(json!({"now": api.clock.now_rfc3339()}))
        }
        _ => Err(ApiError::not_found_path()),
    }
}
