//! The request log: every request the API server answered, who sent it, and how it went.
//!
//! Tests use it to count API calls and to prove that an operation wrote nothing; benchmarks use
//! it to report calls per operation. Controllers authenticate as their own users, so their
//! traffic is told apart from a provider's.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One answered request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Position in the log since the cluster started (survives `clear`).
    pub seq: u64,
    pub user: String,
    pub verb: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub code: u16,
    pub latency_micros: u64,
}

impl Entry {
    /// Whether the request could have changed something (create, update, patch, delete).
    pub fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
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

    /// Counts by `verb resource[/subresource]`, optionally for one user only.
    pub fn counts(entries: &[Entry], user: Option<&str>) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for e in entries.iter().filter(|e| user.is_none_or(|u| e.user == u)) {
            let res =
                if e.subresource.is_empty() { e.resource.clone() } else { format!("{}/{}", e.resource, e.subresource) };
            *out.entry(format!("{} {res}", e.verb)).or_insert(0) += 1;
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
            verb: verb.into(),
            resource: "pods".into(),
            subresource: String::new(),
            namespace: "a".into(),
            name: "p".into(),
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
    fn the_log_is_bounded() {
        let log = RequestLog::new(2);
        for _ in 0..5 {
            log.record(entry("get", "a"), Duration::ZERO);
        }
        assert_eq!(log.entries().len(), 2);
        assert_eq!(log.mark(), 5);
    }
}
