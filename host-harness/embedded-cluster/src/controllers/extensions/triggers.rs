//! Which owners a Sandbox's watch event concerns.
//!
//! A claim that adopts a pool member moves the member's controller reference from the pool to
//! itself; the event then names only the claim, yet the pool must hear of it to replenish
//! (controller-runtime's owner handler sees the old object too; a kube-rs watch shows only the
//! new one). So the last owner of every Sandbox is remembered, and an event concerns both the
//! owner it names and the one it names no more.

use std::collections::HashMap;

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::{controller_of, is_extension_kind};

/// The owners of one kind (`SandboxWarmPool`) that Sandbox events concern.
pub struct OwnerTriggers {
    kind: &'static str,
    owners: ApiResource,
    /// Sandbox uid -> (namespace, owner name) as last seen.
    last_owner: HashMap<String, (String, String)>,
}

impl OwnerTriggers {
    /// Triggers for owners of `kind`, as objects of `owners` (the controller's own resource).
    pub fn new(kind: &'static str, owners: ApiResource) -> Self {
        Self { kind, owners, last_owner: HashMap::new() }
    }

    fn owner(&self, obj: &DynamicObject) -> Option<(String, String)> {
        let reference = controller_of(&obj.metadata).filter(|r| is_extension_kind(r, self.kind))?;
        Some((obj.metadata.namespace.clone()?, reference.name.clone()))
    }

    /// The owners one event concerns: the current and the previous one (once each).
    pub fn on_event(&mut self, event: &watcher::Event<DynamicObject>) -> Vec<ObjectRef<DynamicObject>> {
        let mut out: Vec<(String, String)> = Vec::new();
        match event {
            watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => {
                let Some(uid) = obj.metadata.uid.clone() else {
                    return Vec::new();
                };
                let current = self.owner(obj);
                let previous = match &current {
                    Some(owner) => self.last_owner.insert(uid, owner.clone()),
                    None => self.last_owner.remove(&uid),
                };
                out.extend(current);
                out.extend(previous);
            }
            watcher::Event::Delete(obj) => {
                out.extend(self.owner(obj));
                if let Some(uid) = &obj.metadata.uid {
                    out.extend(self.last_owner.remove(uid));
                }
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
        out.sort();
        out.dedup();
        out.into_iter().map(|(ns, name)| ObjectRef::new_with(&name, self.owners.clone()).within(&ns)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::GroupVersionKind;
    use serde_json::json;

    fn sandbox(uid: &str, owner: Option<(&str, &str)>) -> DynamicObject {
        let mut meta = json!({"name": uid, "namespace": "ns", "uid": uid});
        if let Some((kind, name)) = owner {
            meta["ownerReferences"] = json!([{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": kind,
                "name": name, "uid": "o", "controller": true}]);
        }
        serde_json::from_value(json!({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": meta}))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn names(refs: Vec<ObjectRef<DynamicObject>>) -> Vec<String> {
        refs.into_iter().map(|r| r.name).collect()
    }

    #[test]
    fn an_adopted_member_still_concerns_the_pool_it_left() {
        let gvk = GroupVersionKind::gvk("extensions.agents.x-k8s.io", "v1beta1", "SandboxWarmPool");
        let mut triggers = OwnerTriggers::new("SandboxWarmPool", ApiResource::from_gvk(&gvk));
        let member = sandbox("m", Some(("SandboxWarmPool", "pool")));
        assert_eq!(names(triggers.on_event(&watcher::Event::Apply(member.clone()))), ["pool"]);
        assert_eq!(names(triggers.on_event(&watcher::Event::Apply(member))), ["pool"], "each change, once");
        let adopted = sandbox("m", Some(("SandboxClaim", "claim")));
        assert_eq!(names(triggers.on_event(&watcher::Event::Apply(adopted.clone()))), ["pool"], "the pool it left");
        assert!(triggers.on_event(&watcher::Event::Apply(adopted.clone())).is_empty(), "then no pool's");
        assert!(triggers.on_event(&watcher::Event::Delete(adopted)).is_empty());
        let other = sandbox("x", Some(("SandboxWarmPool", "pool")));
        triggers.on_event(&watcher::Event::InitApply(other.clone()));
        assert_eq!(names(triggers.on_event(&watcher::Event::Delete(other))), ["pool"]);
        assert!(triggers.last_owner.is_empty(), "deleted Sandboxes are forgotten");
    }
}
