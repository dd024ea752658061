//! Ownership: the host proves that an object is this installation's before a provider may read
//! or write it, so a forged or stale lease can never touch a foreign object.
//!
//! An object is **owned** when it carries the managed-by label with the installation's owner
//! id, which the host stamps on every create ([`crate::policy::Policy::stamp_created`]). It is
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

use http::Method;
use serde_json::{Value, json};

use crate::bindings::kube::{KubeError, PatchType, ResourceType};
use crate::kube_host::{KubeHost, Target};
use crate::kube_transport::{parse, request};
use crate::kube_url;
use crate::owner_signature::{self, SIGNATURE_ANNOTATION, Subject};
use crate::policy::{AccessVerb, MANAGED_BY_LABEL, quoted};
use contract::labels::LABEL_ACQUISITION_ID;

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

pub use contract::k8s::object::{ControllerRef, controller_ref, uid};

/// The value of the object's managed-by label.
pub fn managed_by(object: &Value) -> Option<&str> {
    contract::k8s::object::label(object, MANAGED_BY_LABEL)
}

/// Why an object without the label is not a dependent either, for the operator's log (the
/// provider is told only that it is not this installation's: the label of a foreign object is
/// not its business).
pub fn not_labelled(object: &Value, owner_id: &str) -> String {
    let found = match managed_by(object) {
        Some(value) => format!("its {MANAGED_BY_LABEL} label is {}", quoted(value)),
        None => format!("it has no {MANAGED_BY_LABEL} label"),
    };
    format!("{found}, not {owner_id:?}, and no controller chain leads to an object that has it")
}

/// What the provider is told about a foreign object: that it is one, nothing of its contents.
pub const NOT_OWNED: &str = "the object was not created by this installation, and no controller chain leads to one \
                             that was; a provider may only touch what its host created";

/// The metadata that proves ownership, which no patch may change: the managed-by label (an
/// owned object must stay owned, and no object may be handed to another owner id) and, when the
/// host signs, what the ownership signature is over and is (the acquisition-id label, the
/// signature annotation). `Some(value)`: a merge patch may set the entry to that value, which
/// changes nothing.
fn proof_entries(owner_id: &str, signed: bool) -> Vec<(&'static str, &'static str, Option<&str>)> {
    let mut entries = vec![("labels", MANAGED_BY_LABEL, Some(owner_id))];
    if signed {
        entries.push(("labels", LABEL_ACQUISITION_ID, None));
        entries.push(("annotations", SIGNATURE_ANNOTATION, None));
    }
    entries
}

/// Refuses a patch that would change the metadata that proves ownership (`proof_entries`).
pub fn check_patch_keeps_owner(
    patch_type: PatchType,
    body: &Value,
    owner_id: &str,
    signed: bool,
) -> Result<(), String> {
    let refused = |map: &str, key: &str| {
        let what = if map == "labels" { "label" } else { "annotation" };
        format!("the patch would change or remove the {key} {what}, which only the host sets on create")
    };
    let entries = proof_entries(owner_id, signed);
    match patch_type {
        PatchType::Json => {
            let ops = body.as_array().ok_or_else(|| "a JSON patch must be an array of operations".to_string())?;
            for op in ops {
                if op.get("op").and_then(Value::as_str) == Some("test") {
                    continue;
                }
                let paths = ["path", "from"].map(|k| op.get(k).and_then(Value::as_str));
                for path in paths.into_iter().flatten() {
                    let touches = |(map, key, _): &(&str, &str, Option<&str>)| {
                        let pointer = format!("/metadata/{map}/{}", key.replace('~', "~0").replace('/', "~1"));
                        path.is_empty() || path == "/metadata" || path == format!("/metadata/{map}") || path == pointer
                    };
                    if let Some((map, key, _)) = entries.iter().find(|e| touches(e)) {
                        return Err(refused(map, key));
                    }
                }
            }
            Ok(())
        }
        PatchType::Merge | PatchType::Strategic => {
            let root = body.as_object().ok_or_else(|| "a merge patch must be a JSON object".to_string())?;
            let label = || refused("labels", MANAGED_BY_LABEL);
            if root.contains_key("$patch") {
                return Err(label());
            }
            let Some(metadata) = root.get("metadata") else {
                return Ok(());
            };
            let metadata = metadata.as_object().ok_or_else(label)?;
            if metadata.keys().any(|k| k.starts_with('$')) {
                return Err(label());
            }
            for (map, key, same) in entries {
                let Some(patched) = metadata.get(map) else {
                    continue;
                };
                let patched = patched.as_object().ok_or_else(|| refused(map, key))?;
                if patched.keys().any(|k| k.starts_with('$')) {
                    return Err(refused(map, key));
                }
                match (patched.get(key), same) {
                    (None, _) => {}
                    (Some(Value::String(v)), Some(same)) if v == same => {}
                    (Some(_), _) => return Err(refused(map, key)),
                }
            }
            Ok(())
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
/// the same Sandbox), kinds found unserved, and the uids already shown to the provider, so that
/// the deletion of an object it saw is shown even when its owner is gone too. Fresh for every
/// call, so nothing a co-tenant does outlives it.
#[derive(Debug, Clone, Default)]
pub struct CallMemory {
    inner: Arc<Mutex<Memory>>,
}

#[derive(Debug, Default)]
struct Memory {
    owners: HashMap<String, bool>,
    shown: std::collections::HashSet<String>,
    unserved: std::collections::HashSet<(String, String)>,
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

    /// Whether discovery said in this call that `kind` is not served in `api_version`.
    pub fn unserved(&self, api_version: &str, kind: &str) -> bool {
        self.inner.lock().is_ok_and(|m| m.unserved.contains(&(api_version.to_string(), kind.to_string())))
    }

    /// Remembers, for this call only, that `kind` is not served in `api_version` (a CRD may be
    /// installed a moment later).
    pub fn remember_unserved(&self, api_version: &str, kind: &str) {
        if let Ok(mut m) = self.inner.lock() {
            m.unserved.insert((api_version.to_string(), kind.to_string()));
        }
    }
}

/// `(apiVersion, kind)` -> plural.
type Plurals = HashMap<(String, String), String>;

/// Kind -> plural of the group versions of the policy's groups that controller references
/// named; shared by all calls of a host (a served kind keeps its plural). Bounded: only groups
/// the policy covers are ever looked up, and only their kinds are kept.
#[derive(Debug, Clone, Default)]
pub struct KindCache {
    inner: Arc<Mutex<Plurals>>,
}

impl KindCache {
    /// The cached plural of `kind` in `api_version`.
    pub fn get(&self, api_version: &str, kind: &str) -> Option<String> {
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
                map.insert((api_version.to_string(), kind.to_string()), name.to_string());
            }
        }
    }
}

/// How a followed link ended.
pub(crate) enum Link {
    /// The owner, read and uid-checked, and its type.
    Read(Value, ResourceType),
    /// It cannot prove anything (not covered by the policy, malformed, gone, replaced); the
    /// text is for the operator's log.
    Proves(String),
}

impl KubeHost {
    /// Whether `object`, of type `rt`, is the installation's, its dependent, or foreign (see the
    /// module docs). An error means "could not tell" (a read of an owner failed).
    pub(crate) async fn ownership(&self, rt: &ResourceType, object: &Value) -> Result<Owner, KubeError> {
        let owner_id = self.policy.owner_id.as_str();
        let unowned = match self.owned(rt, object) {
            Ok(()) => {
                // Its dependents seen later in the call (a Sandbox's pod) need no read of it.
                if let Some(uid) = uid(object) {
                    self.memory.remember_owner(uid, true);
                }
                return Ok(Owner::Owned);
            }
            Err(why) => why,
        };
        let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str);
        let mut link = controller_ref(object);
        let mut followed: Vec<String> = Vec::new();
        loop {
            let Some(reference) = link else {
                break self.settle(&followed, Owner::Foreign(unowned));
            };
            if followed.len() >= MAX_CHAIN {
                // Only this object's chain is too long; the links followed may still be
                // dependents of their own, so nothing is remembered of them.
                return Ok(Owner::Foreign(format!(
                    "its controller chain is longer than {MAX_CHAIN} links before reaching an object of this \
                     installation"
                )));
            }
            if let Some(known) = self.memory.owner(&reference.uid) {
                let verdict = if known { Owner::Dependent } else { Owner::Foreign(not_labelled(object, owner_id)) };
                break self.settle(&followed, verdict);
            }
            followed.push(reference.uid.clone());
            let (owner, owner_type) = match self.read_owner(&reference, namespace).await? {
                Link::Read(owner, owner_type) => (owner, owner_type),
                Link::Proves(why) => break self.settle(&followed, Owner::Foreign(why)),
            };
            if self.owned(&owner_type, &owner).is_ok() {
                break self.settle(&followed, Owner::Dependent);
            }
            link = controller_ref(&owner);
        }
    }

    /// Whether `object` itself is the installation's: it has the managed-by label with the owner
    /// id and, when the operator gave a key, a signature that verifies for it
    /// ([`crate::owner_signature`]). `Err` says why not, for the operator's log.
    pub(crate) fn owned(&self, rt: &ResourceType, object: &Value) -> Result<(), String> {
        let owner_id = self.policy.owner_id.as_str();
        if managed_by(object) != Some(owner_id) {
            return Err(not_labelled(object, owner_id));
        }
        let Some(keys) = &self.policy.ownership_keys else {
            return Ok(());
        };
        match owner_signature::signature(object) {
            None => Err(format!(
                "it has the {MANAGED_BY_LABEL} label but no {SIGNATURE_ANNOTATION} annotation: whoever made it does \
                 not hold the installation's ownership key"
            )),
            Some(signature) if keys.verify(&Subject::of(rt, object, owner_id), signature) => Ok(()),
            Some(_) => Err(format!(
                "its {SIGNATURE_ANNOTATION} annotation does not verify for this object under the ownership keys: it \
                 was copied from another object, altered, or signed with a key the host no longer has"
            )),
        }
    }

    /// Remembers the verdict for every owner followed, and returns it.
    fn settle(&self, followed: &[String], verdict: Owner) -> Result<Owner, KubeError> {
        for uid in followed {
            self.memory.remember_owner(uid, verdict.allowed());
        }
        Ok(verdict)
    }

    /// Reads the controller a reference names, as the host. Only a type the policy lets the
    /// provider read can prove anything, and the policy is checked before any discovery, so a
    /// reference a co-tenant made up costs no request; a reference that cannot even be named
    /// in a URL proves nothing, and is no error.
    pub(crate) async fn read_owner(
        &self,
        reference: &ControllerRef,
        namespace: Option<&str>,
    ) -> Result<Link, KubeError> {
        let controller = format!("its controller {} {}", quoted(&reference.kind), quoted(&reference.name));
        let (group, version) = match reference.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", reference.api_version.as_str()),
        };
        let readable = |r: &&crate::policy::AccessRule| r.group == group && r.versions.iter().any(|v| v == version);
        if !self.policy.resources.iter().any(|r| readable(&r)) {
            return Ok(Link::Proves(format!("{controller} is of a group the host's policy does not cover")));
        }
        let Some(plural) = self.plural_of(&reference.api_version, &reference.kind).await? else {
            return Ok(Link::Proves(format!("{controller} is of a kind the cluster does not serve")));
        };
        let Some(rule) = self.policy.rule(group, &plural).filter(readable) else {
            return Ok(Link::Proves(format!("{controller} is of a type the host's policy does not cover")));
        };
        let rt = ResourceType { group: group.to_string(), version: version.to_string(), plural };
        let namespace = if rule.namespaced { namespace } else { None };
        let Ok(url) = kube_url::object(&rt, namespace, &reference.name, None) else {
            return Ok(Link::Proves(format!("{controller} cannot be a Kubernetes object")));
        };
        let target =
            Target { verb: AccessVerb::Get, rt: &rt, namespace, name: Some(&reference.name), subresource: None };
        let owner = match self.text(&target, request(Method::GET, url, None, Vec::new())?).await {
            Ok(text) => parse(&target, &text)?,
            Err(KubeError::NotFound(_)) => return Ok(Link::Proves(format!("{controller} is gone"))),
            Err(e) => return Err(e),
        };
        if uid(&owner) != Some(reference.uid.as_str()) {
            return Ok(Link::Proves(format!("{controller} was replaced by another object of that name")));
        }
        Ok(Link::Read(owner, rt))
    }

    /// The plural of `kind` in `api_version`, from discovery: cached for the host's life when
    /// served, remembered for the call when not.
    async fn plural_of(&self, api_version: &str, kind: &str) -> Result<Option<String>, KubeError> {
        if let Some(known) = self.kinds.get(api_version, kind) {
            return Ok(Some(known));
        }
        if self.memory.unserved(api_version, kind) {
            return Ok(None);
        }
        let Ok(url) = kube_url::group_version_discovery(api_version) else {
            return Ok(None);
        };
        let what = format!("discovery of {}", quoted(api_version));
        if let Some(text) = self.discovery(&what, url).await? {
            let list: Value = serde_json::from_str(&text)
                .map_err(|e| KubeError::Transport(format!("{what}: the answer is not JSON: {e}")))?;
            self.kinds.fill(api_version, &list);
        }
        let plural = self.kinds.get(api_version, kind);
        if plural.is_none() {
            self.memory.remember_unserved(api_version, kind);
        }
        Ok(plural)
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
    fn patches_may_not_touch_what_proves_ownership() {
        let ok = [
            (PatchType::Merge, json!({"spec": {"shutdownTime": "x"}})),
            (PatchType::Merge, json!({"metadata": {"labels": {"a": "b"}}})),
            (PatchType::Merge, json!({"metadata": {"labels": {MANAGED_BY_LABEL: OWNER}}})),
            (PatchType::Strategic, json!({"metadata": {"annotations": {"a": null}}})),
            (PatchType::Json, json!([{"op": "add", "path": "/metadata/annotations/a", "value": "b"}])),
            (PatchType::Json, json!([{"op": "replace", "path": "/spec/x", "value": 1}])),
            (PatchType::Json, json!([{"op": "test", "path": "/metadata/labels", "value": {}}])),
        ];
        for (t, body) in ok {
            assert_eq!(check_patch_keeps_owner(t, &body, OWNER, true), Ok(()), "{body}");
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
            (PatchType::Merge, json!({"metadata": {"annotations": {SIGNATURE_ANNOTATION: "v1.00"}}})),
            (PatchType::Merge, json!({"metadata": {"annotations": null}})),
            (PatchType::Strategic, json!({"metadata": {"labels": {LABEL_ACQUISITION_ID: "other"}}})),
            (PatchType::Json, json!([{"op": "remove", "path": "/metadata/annotations"}])),
            (
                PatchType::Json,
                json!([{"op": "add", "path": "/metadata/annotations/sandbox.paperclip.io~1owner-signature", "value": "x"}]),
            ),
            (
                PatchType::Json,
                json!([{"op": "replace", "path": "/metadata/labels/sandbox.paperclip.io~1acquisition-id", "value": "x"}]),
            ),
        ];
        for (t, body) in refused {
            assert!(check_patch_keeps_owner(t, &body, OWNER, true).is_err(), "{body} must be refused");
        }
        assert!(check_patch_keeps_owner(PatchType::Json, &json!({}), OWNER, true).is_err());
        assert!(check_patch_keeps_owner(PatchType::Merge, &json!([]), OWNER, true).is_err());
        // Without a key nothing is signed, so only the label is the host's.
        let annotate = json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]);
        assert_eq!(check_patch_keeps_owner(PatchType::Json, &annotate, OWNER, false), Ok(()));
        assert!(check_patch_keeps_owner(PatchType::Json, &annotate, OWNER, true).is_err());
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
    fn the_operators_log_says_what_label_was_found() {
        let foreign = json!({"metadata": {"labels": {MANAGED_BY_LABEL: "helm"}}});
        assert!(not_labelled(&foreign, OWNER).contains("label is \"helm\""));
        assert!(not_labelled(&json!({"metadata": {}}), OWNER).contains("has no"));
        assert!(!NOT_OWNED.contains("helm"), "the provider is told nothing of the foreign object");
    }

    #[test]
    fn kinds_are_cached_from_resource_lists() {
        let cache = KindCache::default();
        cache.fill(
            "batch/v1",
            &json!({"resources": [{"name": "jobs", "kind": "Job"}, {"name": "jobs/status", "kind": "Job"}]}),
        );
        assert_eq!(cache.get("batch/v1", "Job"), Some("jobs".to_string()));
        assert_eq!(cache.get("batch/v1", "CronJob"), None);
        let memory = CallMemory::default();
        memory.remember_unserved("batch/v1", "CronJob");
        assert!(memory.unserved("batch/v1", "CronJob") && !CallMemory::default().unserved("batch/v1", "CronJob"));
    }
}
