//! The host's memory of which versions each API group serves, shared by every call of a host:
//! a provider asks on every acquire, resume-check and destroy (to pick the Sandbox version), and
//! the answer changes only when a CRD version is added or removed, which is rare.
//!
//! An answer (a group not served included) is kept for [`DISCOVERY_TTL`], as client-go's
//! cached discovery keeps its documents until they are invalidated. It is forgotten earlier when
//! a request about a whole collection of the group (create, list, watch) answers 404: a served
//! collection never does that unless its version went away (or the namespace is missing, when
//! forgetting costs one extra discovery request and nothing else).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a group's versions are trusted without asking again.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(60);

/// Group -> when its versions were read, and the versions.
type Groups = HashMap<String, (Instant, Vec<String>)>;

/// Versions per group with when they were read; cheap to clone (shared).
#[derive(Clone, Default)]
pub(crate) struct DiscoveryCache {
    groups: Arc<Mutex<Groups>>,
}

impl DiscoveryCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Groups> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The versions of `group` read less than [`DISCOVERY_TTL`] before `now`.
    pub(crate) fn get(&self, group: &str, now: Instant) -> Option<Vec<String>> {
        let groups = self.lock();
        let (read, versions) = groups.get(group)?;
        (now.saturating_duration_since(*read) < DISCOVERY_TTL).then(|| versions.clone())
    }

    /// Remembers the versions of `group` as read at `now`.
    pub(crate) fn put(&self, group: &str, versions: Vec<String>, now: Instant) {
        self.lock().insert(group.to_string(), (now, versions));
    }

    /// Forgets `group`, so the next question asks the cluster.
    pub(crate) fn forget(&self, group: &str) {
        self.lock().remove(group);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_within_the_ttl_and_asks_again_after_it_or_once_forgotten() {
        let cache = DiscoveryCache::default();
        let t0 = Instant::now();
        assert_eq!(cache.get("agents.x-k8s.io", t0), None);
        cache.put("agents.x-k8s.io", vec!["v1beta1".into()], t0);
        let shared = cache.clone();
        assert_eq!(shared.get("agents.x-k8s.io", t0 + Duration::from_secs(59)), Some(vec!["v1beta1".to_string()]));
        assert_eq!(cache.get("agents.x-k8s.io", t0 + DISCOVERY_TTL), None);
        assert_eq!(cache.get("batch", t0), None);
        cache.put("batch", Vec::new(), t0);
        assert_eq!(cache.get("batch", t0), Some(Vec::new()), "a group not served is an answer too");
        shared.forget("batch");
        assert_eq!(cache.get("batch", t0), None);
    }
}
