//! The objects a provider asked the host to create, for a caller that must say what an
//! interrupted call left in the cluster (`sandbox-host acquire` stopped by Ctrl-C: the call is
//! dropped mid-way, so the provider never gets to clean up, and nothing else would name them).
//!
//! An object is recorded when its create is sent, not when the answer comes: a create cut off
//! in flight may still have reached the API server. Recording is off unless a caller asks for
//! it ([`crate::runner::ProviderHost::record_created`]), so a long-running `serve` keeps no list.

use std::sync::{Arc, Mutex, PoisonError};

/// One create the host sent for the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedObject {
    /// API group (empty for the core group).
    pub group: String,
    /// Resource plural (`jobs`, `sandboxes`, `secrets`).
    pub plural: String,
    /// Namespace, for a namespaced object.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

/// As kubectl names an object: `jobs.batch default/pc-1`, `secrets default/pc-1-env`.
impl std::fmt::Display for CreatedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.plural)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        f.write_str(" ")?;
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        f.write_str(&self.name)
    }
}

/// The creates sent so far, shared by every call of the host that records them; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct CreatedObjects(Arc<Mutex<Vec<CreatedObject>>>);

impl CreatedObjects {
    /// Records a create about to be sent.
    pub(crate) fn record(&self, object: CreatedObject) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(object);
    }

    /// Every create recorded, in the order they were sent.
    pub fn list(&self) -> Vec<CreatedObject> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_list_in_send_order() {
        let objects = CreatedObjects::default();
        let seen_by_a_call = objects.clone();
        for name in ["pc-1", "pc-1-env"] {
            seen_by_a_call.record(CreatedObject {
                group: String::new(),
                plural: "secrets".into(),
                namespace: Some("default".into()),
                name: name.into(),
            });
        }
        let shown: Vec<String> = objects.list().iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["secrets default/pc-1", "secrets default/pc-1-env"]);
    }
}
