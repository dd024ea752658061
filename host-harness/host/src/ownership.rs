//! Ownership: the host proves that an object is this installation's before a provider may read
//! or write it, so a forged or stale lease can never touch a foreign object.
//!
//! An object is **owned** when it carries the managed-by label with the installation's owner
//! id, which the host stamps on every create ([`crate::policy::Policy::label_created`]). It is
//! a **dependent** when its controller `ownerReference` chain (at most [`MAX_CHAIN`] hops, each
//! link's uid checked) leads to an owned object: a Sandbox's or a Job's pod, a Sandbox's
//! workspace claim. Kubernetes' own garbage collection follows the same references, so a
//! dependent is deleted with what the installation created. Anything else is **foreign**.
//!
//! What each verb needs: a read (`get`, and every item or event of `list` and `watch`) needs an
//! owned object or a dependent; a `patch` or `delete` the same, checked on the object the host
//! reads just before, and sent with that object's uid as a precondition (a delete's
//! `preconditions.uid`, a patch's `metadata.uid`, or a JSON patch `test` of it), so an object
//! replaced under the same name in between is never changed or deleted by name. A patch may
//! never change the managed-by label, so an owned object cannot be given away or orphaned.
//! The namespace objects of allowed namespaces are readable without the label: the operator
//! allowed them by name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::bindings::kube::PatchType;
use crate::policy::MANAGED_BY_LABEL;

/// Longest controller chain followed from a dependent to an owned object (pod -> Sandbox ->
/// SandboxClaim is two).
pub const MAX_CHAIN: usize = 3;

/// How an object relates to this installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// It carries the managed-by label with the owner id: the host created it.
    Owned,
    /// Its controller chain leads to an owned object.
    Dependent,
    /// Neither; the text says why, for the denial.
    Foreign(String),
}

impl Owner {
    /// Whether a provider may use the object.
    pub fn allowed(&self) -> bool {
        !matches!(self, Self::Foreign(_))
    }
}

/// The value of the object's managed-by label.
pub fn managed_by(object: &Value) -> Option<&str> {
    object.pointer("/metadata/labels")?.get(MANAGED_BY_LABEL)?.as_str()
}

/// The object's uid.
pub fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid")?.as_str().filter(|u| !u.is_empty())
}

/// The reference of the object's controller (the `ownerReference` with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRef {
    /// `v1` or `group/version`.
    pub api_version: String,
    /// The controller's kind (`Sandbox`).
    pub kind: String,
    /// The controller's name, in the dependent's namespace.
    pub name: String,
    /// The controller's uid: an object of that name with another uid is not the owner.
    pub uid: String,
}

/// The object's controller reference, if it has one.
pub fn controller_ref(object: &Value) -> Option<ControllerRef> {
    let refs = object.pointer("/metadata/ownerReferences")?.as_array()?;
    let r = refs.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    let field = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ControllerRef {
        api_version: field("apiVersion")?,
        kind: field("kind")?,
        name: field("name")?,
        uid: field("uid")?,
    })
}

/// Why an object without the label is not a dependent either, for a denial.
pub fn not_labelled(object: &Value, owner_id: &str) -> String {
    let found = match managed_by(object) {
        Some(value) => format!("its {MANAGED_BY_LABEL} label is {}", crate::policy::quoted(value)),
        None => format!("it has no {MANAGED_BY_LABEL} label"),
    };
    format!(
        "the object was not created by this installation ({found}, not {owner_id:?}) and no controller chain leads \
         to one that was; a provider may only touch what its host created"
    )
}

/// Refuses a patch that would change the managed-by label: an owned object must stay owned
/// and no object may be handed to another owner id.
pub fn check_patch_keeps_owner(patch_type: PatchType, body: &Value, owner_id: &str) -> Result<(), String> {
    let refused =
        || format!("the patch would change or remove the {MANAGED_BY_LABEL} label, which only the host sets on create");
    match patch_type {
        PatchType::Json => {
            let ops = body.as_array().ok_or_else(|| "a JSON patch must be an array of operations".to_string())?;
            let label = format!("/metadata/labels/{}", MANAGED_BY_LABEL.replace('~', "~0").replace('/', "~1"));
            let touches =
                |path: &str| path.is_empty() || path == "/metadata" || path == "/metadata/labels" || path == label;
            for op in ops {
                if op.get("op").and_then(Value::as_str) == Some("test") {
                    continue;
                }
                let paths = ["path", "from"].map(|k| op.get(k).and_then(Value::as_str));
                if paths.into_iter().flatten().any(touches) {
                    return Err(refused());
                }
            }
            Ok(())
        }
        PatchType::Merge | PatchType::Strategic => {
            let root = body.as_object().ok_or_else(|| "a merge patch must be a JSON object".to_string())?;
            if root.contains_key("$patch") {
                return Err(refused());
            }
            let Some(metadata) = root.get("metadata") else {
                return Ok(());
            };
            let metadata = metadata.as_object().ok_or_else(refused)?;
            if metadata.keys().any(|k| k.starts_with('$')) {
                return Err(refused());
            }
            let Some(labels) = metadata.get("labels") else {
                return Ok(());
            };
            let labels = labels.as_object().ok_or_else(refused)?;
            if labels.keys().any(|k| k.starts_with('$')) {
                return Err(refused());
            }
            match labels.get(MANAGED_BY_LABEL) {
                None => Ok(()),
                Some(Value::String(v)) if v == owner_id => Ok(()),
                Some(_) => Err(refused()),
            }
        }
    }
}

/// The patch with the target's uid as a precondition: `metadata.uid` in a merge or strategic
/// patch (the API server refuses to change a uid), a leading `test` operation in a JSON patch.
pub fn guard_patch(patch_type: PatchType, mut body: Value, uid: &str) -> Result<Value, String> {
    match patch_type {
        PatchType::Json => {
            let ops = body.as_array_mut().ok_or_else(|| "a JSON patch must be an array of operations".to_string())?;
            ops.insert(0, json!({"op": "test", "path": "/metadata/uid", "value": uid}));
        }
        PatchType::Merge | PatchType::Strategic => {
            let root = body.as_object_mut().ok_or_else(|| "a merge patch must be a JSON object".to_string())?;
            let metadata = root.entry("metadata").or_insert_with(|| json!({}));
            let metadata =
                metadata.as_object_mut().ok_or_else(|| "the patch's metadata is not an object".to_string())?;
            match metadata.get("uid") {
                Some(Value::String(given)) if given != uid => {
                    return Err(format!("the patch names uid {given:?}, but the object has uid {uid:?}"));
                }
                _ => {
                    metadata.insert("uid".into(), json!(uid));
                }
            }
        }
    }
    Ok(body)
}

/// What one call has learned: verdicts on owner objects by uid (a pod's events all point at
/// the same Sandbox), and the uids already shown to the provider, so that the deletion of an
/// object it saw is shown even when its owner is gone too. Fresh for every call.
#[derive(Debug, Clone, Default)]
pub struct CallMemory {
    inner: Arc<Mutex<Memory>>,
}

#[derive(Debug, Default)]
struct Memory {
    owners: HashMap<String, bool>,
    shown: std::collections::HashSet<String>,
}

impl CallMemory {
    /// A remembered verdict on the owner with this uid.
    pub fn owner(&self, uid: &str) -> Option<bool> {
        self.inner.lock().ok()?.owners.get(uid).copied()
    }

    /// Remembers a verdict on an owner.
    pub fn remember_owner(&self, uid: &str, owned: bool) {
        if let Ok(mut m) = self.inner.lock() {
            m.owners.insert(uid.to_string(), owned);
        }
    }

    /// Whether the provider has been shown the object with this uid in this call.
    pub fn shown(&self, uid: &str) -> bool {
        self.inner.lock().is_ok_and(|m| m.shown.contains(uid))
    }

    /// Remembers that the provider has been shown this object.
    pub fn show(&self, object: &Value) {
        if let (Some(uid), Ok(mut m)) = (uid(object), self.inner.lock()) {
            m.shown.insert(uid.to_string());
        }
    }
}

/// `(apiVersion, kind)` -> plural, or `None` when the kind is not served there.
type Plurals = HashMap<(String, String), Option<String>>;

/// Kind -> plural of every group version asked about, for following controller references;
/// shared by all calls of a host (discovery does not change under it).
#[derive(Debug, Clone, Default)]
pub struct KindCache {
    inner: Arc<Mutex<Plurals>>,
}

impl KindCache {
    /// The cached plural of `kind` in `api_version`: `Some(None)` when known to be unserved.
    pub fn get(&self, api_version: &str, kind: &str) -> Option<Option<String>> {
        self.inner.lock().ok()?.get(&(api_version.to_string(), kind.to_string())).cloned()
    }

    /// Caches every kind of a group version's resource list (`APIResourceList`).
    pub fn fill(&self, api_version: &str, list: &Value) {
        let Ok(mut map) = self.inner.lock() else {
            return;
        };
        for resource in list["resources"].as_array().into_iter().flatten() {
            let (Some(name), Some(kind)) = (resource["name"].as_str(), resource["kind"].as_str()) else {
                continue;
            };
            if !name.contains('/') {
                map.insert((api_version.to_string(), kind.to_string()), Some(name.to_string()));
            }
        }
    }

    /// Remembers that `kind` is not served in `api_version`.
    pub fn absent(&self, api_version: &str, kind: &str) {
        if let Ok(mut map) = self.inner.lock() {
            map.entry((api_version.to_string(), kind.to_string())).or_insert(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: &str = "team-prod";

    #[test]
    fn controller_references_are_read_only_when_complete() {
        let pod = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u0"},
            {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "name": "s", "uid": "u1", "controller": true}
        ]}});
        let r = controller_ref(&pod).expect("a controller");
        assert_eq!((r.kind.as_str(), r.name.as_str(), r.uid.as_str()), ("Sandbox", "s", "u1"));
        assert_eq!(
            controller_ref(&json!({"metadata": {"ownerReferences": [{"kind": "X", "controller": true}]}})),
            None
        );
        assert_eq!(controller_ref(&json!({"metadata": {}})), None);
    }

    #[test]
    fn patches_may_not_touch_the_managed_by_label() {
        let ok = [
            (PatchType::Merge, json!({"spec": {"shutdownTime": "x"}})),
            (PatchType::Merge, json!({"metadata": {"labels": {"a": "b"}}})),
            (PatchType::Merge, json!({"metadata": {"labels": {MANAGED_BY_LABEL: OWNER}}})),
            (PatchType::Strategic, json!({"metadata": {"annotations": {"a": null}}})),
            (PatchType::Json, json!([{"op": "replace", "path": "/spec/x", "value": 1}])),
            (PatchType::Json, json!([{"op": "test", "path": "/metadata/labels", "value": {}}])),
        ];
        for (t, body) in ok {
            assert_eq!(check_patch_keeps_owner(t, &body, OWNER), Ok(()), "{body}");
        }
        let refused = [
            (PatchType::Merge, json!({"metadata": null})),
            (PatchType::Merge, json!({"metadata": {"labels": null}})),
            (PatchType::Merge, json!({"metadata": {"labels": {MANAGED_BY_LABEL: null}}})),
            (PatchType::Merge, json!({"metadata": {"labels": {MANAGED_BY_LABEL: "someone-else"}}})),
            (PatchType::Strategic, json!({"$patch": "replace", "spec": {}})),
            (PatchType::Strategic, json!({"metadata": {"labels": {"$patch": "replace"}}})),
            (PatchType::Json, json!([{"op": "remove", "path": "/metadata/labels"}])),
            (PatchType::Json, json!([{"op": "replace", "path": "/metadata", "value": {}}])),
            (PatchType::Json, json!([{"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"}])),
            (PatchType::Json, json!([{"op": "move", "from": "/metadata/labels", "path": "/spec/x"}])),
            (PatchType::Json, json!([{"op": "replace", "path": "", "value": {}}])),
        ];
        for (t, body) in refused {
            assert!(check_patch_keeps_owner(t, &body, OWNER).is_err(), "{body} must be refused");
        }
        assert!(check_patch_keeps_owner(PatchType::Json, &json!({}), OWNER).is_err());
        assert!(check_patch_keeps_owner(PatchType::Merge, &json!([]), OWNER).is_err());
    }

    #[test]
    fn patches_carry_the_uid_they_were_checked_against() {
        let merge = guard_patch(PatchType::Merge, json!({"spec": {"a": 1}}), "u1").expect("guarded");
        assert_eq!(merge, json!({"spec": {"a": 1}, "metadata": {"uid": "u1"}}));
        let same = guard_patch(PatchType::Strategic, json!({"metadata": {"uid": "u1"}}), "u1").expect("guarded");
        assert_eq!(same["metadata"]["uid"], "u1");
        assert!(guard_patch(PatchType::Merge, json!({"metadata": {"uid": "u2"}}), "u1").is_err());
        let ops = guard_patch(PatchType::Json, json!([{"op": "remove", "path": "/spec/a"}]), "u1").expect("guarded");
        assert_eq!(ops[0], json!({"op": "test", "path": "/metadata/uid", "value": "u1"}));
        assert_eq!(ops.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn denials_say_what_label_was_found() {
        let foreign = json!({"metadata": {"labels": {MANAGED_BY_LABEL: "helm"}}});
        assert!(not_labelled(&foreign, OWNER).contains("label is \"helm\""));
        assert!(not_labelled(&json!({"metadata": {}}), OWNER).contains("has no"));
    }

    #[test]
    fn kinds_are_cached_from_resource_lists() {
        let cache = KindCache::default();
        cache.fill(
            "batch/v1",
            &json!({"resources": [{"name": "jobs", "kind": "Job"}, {"name": "jobs/status", "kind": "Job"}]}),
        );
        assert_eq!(cache.get("batch/v1", "Job"), Some(Some("jobs".to_string())));
        assert_eq!(cache.get("batch/v1", "CronJob"), None);
        cache.absent("batch/v1", "CronJob");
        assert_eq!(cache.get("batch/v1", "CronJob"), Some(None));
    }
}
