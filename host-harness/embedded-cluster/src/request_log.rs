//! The request log: every request the API server answered, who sent it, and how it went.
//!
//! Tests use it to count API calls and to prove that an operation wrote nothing; benchmarks use
//! it to report calls per operation. Controllers authenticate as their own users, so their
//! traffic is told apart from a provider's. Each entry names its request completely (kind,
//! verb, group, version, resource, namespace, name, path, user), so that a test can list every
//! request an operation made, discovery included, and aim a fault rule at any one of them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a request asks for, from the shape of its path alone (served or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RequestKind {
    /// Objects of an API resource: `/api/{version}/...` or `/apis/{group}/{version}/...`.
    Resource,
    /// A discovery document: `/api`, `/api/{version}`, `/apis`, `/apis/{group}`,
    /// `/apis/{group}/{version}`.
    Discovery,
    /// `/version`.
    Version,
    /// `/openapi/v2`, `/openapi/v3` and the OpenAPI v3 documents of a group version.
    OpenApi,
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// The embedded cluster's own `/embedded-cluster/` endpoints.
    Admin,
    /// Any other path.
    Other,
}

impl RequestKind {
    /// The kind of a path that is not a resource path, with the API group and version it names
    /// (empty when it names none), so that discovery of one group version can be told apart.
    pub fn of_non_resource(path: &str) -> (Self, String, String) {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (kind, group, version) = match segs.as_slice() {
            ["api"] | ["apis"] => (Self::Discovery, "", ""),
            ["api", version] => (Self::Discovery, "", *version),
            ["apis", group] => (Self::Discovery, *group, ""),
            ["apis", group, version] => (Self::Discovery, *group, *version),
            ["version"] => (Self::Version, "", ""),
            ["openapi", "v3", "api", version] => (Self::OpenApi, "", *version),
            ["openapi", "v3", "apis", group, version] => (Self::OpenApi, *group, *version),
            ["openapi", ..] => (Self::OpenApi, "", ""),
            ["healthz" | "livez" | "readyz", ..] => (Self::Health, "", ""),
            ["embedded-cluster", ..] => (Self::Admin, "", ""),
            _ => (Self::Other, "", ""),
        };
        (kind, group.to_string(), version.to_string())
    }
}

/// One answered request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Position in the log since the cluster started (survives `clear`).
    pub seq: u64,
    /// The authenticated user, or `system:anonymous`.
    pub user: String,
    /// Whether this was about objects, discovery, OpenAPI, ...
    pub kind: RequestKind,
    /// The Kubernetes verb of a resource request; the lowercase HTTP method of any other.
    pub verb: String,
    /// The API group (empty for the core group and for paths that name none).
    pub group: String,
    /// The API version (empty for paths that name none).
    pub version: String,
    /// The resource's plural, also for resources the cluster does not serve; empty for
    /// non-resource requests.
    pub resource: String,
    pub subresource: String,
    /// Empty for cluster-scoped requests (a namespace object is not in a namespace here).
    pub namespace: String,
    /// The object's name: from the path, or from the body of a create (`generateName` if it
    /// has no name); empty for collections and non-resource requests.
    pub name: String,
    /// The URL path as sent, without the query.
    pub path: String,
    /// The ids of the fault rules that acted on this request, in the order they acted; an
    /// error or a dropped connection ends a request, so no rule acts after one.
    pub faults: Vec<u64>,
    /// The status code sent, 0 when the connection was closed without an answer.
    pub code: u16,
    pub latency_micros: u64,
}

impl Entry {
    /// Whether the request could have changed something (create, update, patch, delete); an
    /// access review is created but never stored, so it changes nothing.
    pub fn is_write(&self) -> bool {
        let review = self.group == crate::access_review::GROUP && self.resource.ends_with("accessreviews");
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection") && !review
    }
}

/// A bounded, shared request log.
pub struct RequestLog {
    inner: Mutex<(u64, VecDeque<Entry>)>,
    cap: usize,
}

impl RequestLog {
    /// Keeps the last `cap` entries.
    pub fn new(cap: usize) -> Self {
        Self { inner: Mutex::new((0, VecDeque::new())), cap: cap.max(1) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, VecDeque<Entry>)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends an entry (its `seq` is assigned here).
    pub fn record(&self, mut entry: Entry, latency: Duration) {
        let mut g = self.lock();
        g.0 += 1;
        entry.seq = g.0;
        entry.latency_micros = latency.as_micros().min(u128::from(u64::MAX)) as u64;
        g.1.push_back(entry);
        while g.1.len() > self.cap {
            g.1.pop_front();
        }
    }

    /// The sequence number of the last entry: a mark to read "everything since" later.
    pub fn mark(&self) -> u64 {
        self.lock().0
    }

    /// Entries after a mark.
    pub fn since(&self, mark: u64) -> Vec<Entry> {
        self.lock().1.iter().filter(|e| e.seq > mark).cloned().collect()
    }

    /// Every retained entry.
    pub fn entries(&self) -> Vec<Entry> {
        self.since(0)
    }

    /// Forgets every entry.
    pub fn clear(&self) {
        self.lock().1.clear();
    }

    /// Counts by `verb resource[/subresource]` (`verb path` for non-resource requests, so that
    /// discovery is counted per document), optionally for one user only.
    pub fn counts(entries: &[Entry], user: Option<&str>) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for e in entries.iter().filter(|e| user.is_none_or(|u| e.user == u)) {
            let what = match (e.kind, e.subresource.is_empty()) {
                (RequestKind::Resource, true) => e.resource.clone(),
                (RequestKind::Resource, false) => format!("{}/{}", e.resource, e.subresource),
                _ => e.path.clone(),
            };
            *out.entry(format!("{} {what}", e.verb)).or_insert(0) += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(verb: &str, user: &str) -> Entry {
        Entry {
            seq: 0,
            user: user.into(),
            kind: RequestKind::Resource,
            verb: verb.into(),
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
            subresource: String::new(),
            namespace: "a".into(),
            name: "p".into(),
            path: "/api/v1/namespaces/a/pods/p".into(),
            faults: Vec::new(),
            code: 200,
            latency_micros: 0,
        }
    }

    #[test]
    fn marks_select_later_entries_and_counts_group() {
        let log = RequestLog::new(10);
        log.record(entry("get", "admin"), Duration::ZERO);
        let mark = log.mark();
        log.record(entry("create", "admin"), Duration::ZERO);
        log.record(entry("create", "kubelet"), Duration::ZERO);
        let since = log.since(mark);
        assert_eq!(since.len(), 2);
        assert!(since.iter().all(Entry::is_write));
        assert_eq!(RequestLog::counts(&since, Some("admin")).get("create pods"), Some(&1));
    }

    #[test]
    fn non_resource_requests_are_counted_per_path() {
        let log = RequestLog::new(10);
        let discovery = Entry {
            kind: RequestKind::Discovery,
            resource: String::new(),
            namespace: String::new(),
            name: String::new(),
            path: "/apis/batch/v1".into(),
            ..entry("get", "admin")
        };
        log.record(discovery, Duration::ZERO);
        log.record(entry("get", "admin"), Duration::ZERO);
        let counts = RequestLog::counts(&log.entries(), None);
        assert_eq!(counts.get("get /apis/batch/v1"), Some(&1));
        assert_eq!(counts.get("get pods"), Some(&1));
    }

    #[test]
    fn non_resource_paths_are_classified_by_shape() {
        let kind = |path| RequestKind::of_non_resource(path);
        let named = |k, g: &str, v: &str| (k, g.to_string(), v.to_string());
        assert_eq!(kind("/api"), named(RequestKind::Discovery, "", ""));
        assert_eq!(kind("/api/v1/"), named(RequestKind::Discovery, "", "v1"));
        assert_eq!(kind("/apis"), named(RequestKind::Discovery, "", ""));
        assert_eq!(kind("/apis/agents.x-k8s.io"), named(RequestKind::Discovery, "agents.x-k8s.io", ""));
        assert_eq!(kind("/apis/nope/v9"), named(RequestKind::Discovery, "nope", "v9"), "unserved: same shape");
        assert_eq!(kind("/version"), named(RequestKind::Version, "", ""));
        assert_eq!(kind("/openapi/v2"), named(RequestKind::OpenApi, "", ""));
        assert_eq!(kind("/openapi/v3/apis/batch/v1"), named(RequestKind::OpenApi, "batch", "v1"));
        assert_eq!(kind("/openapi/v3/api/v1"), named(RequestKind::OpenApi, "", "v1"));
        assert_eq!(kind("/readyz/ping"), named(RequestKind::Health, "", ""));
        assert_eq!(kind("/embedded-cluster/faults"), named(RequestKind::Admin, "", ""));
        assert_eq!(kind("/"), named(RequestKind::Other, "", ""));
        assert_eq!(kind("/metrics"), named(RequestKind::Other, "", ""));
    }

    #[test]
    fn the_log_is_bounded() {
        let log = RequestLog::new(2);
        for _ in 0..5 {
            log.record(entry("get", "a"), Duration::ZERO);
        }
        assert_eq!(log.entries().len(), 2);
        assert_eq!(log.mark(), 5);
    }
}
