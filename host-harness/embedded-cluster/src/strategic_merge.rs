//! Strategic merge patch (`application/strategic-merge-patch+json`) for the
//! built-in kinds the test double serves.
//!
//! The algorithm follows `k8s.io/apimachinery/pkg/util/strategicpatch`
//! (`StrategicMergeMapPatch` with `MergeParallelList` and
//! `IgnoreUnmatchedNulls`), including its list ordering rules, so that
//! clients observe the same list order as against a real apiserver: items
//! named by the patch (or by `$setElementOrder`) come first in patch order,
//! interleaved with the server-only items by their live order. A merged item
//! that is new to the list therefore lands *before* the untouched ones, as in
//! Go.
//!
//! Go gets patch strategies from struct tags; here they come from a table of
//! dotted field paths (list items are transparent in a path, so
//! `spec.containers.env` is the `env` field of every container).
//!
//! Deliberate differences from Go, all on inputs that Go either panics on,
//! leaks directives for, or that no real client sends:
//! * directives inside values that are *added* (the key was absent from the
//!   live object) are processed against an empty value instead of being
//!   stored verbatim, so no `$patch`/`$setElementOrder`/... key can ever reach
//!   the stored object;
//! * `$patch: delete` on a nested map removes the field (Go stores `{}`,
//!   which decodes to the same typed object for maps and optional structs);
//!   at the top level it yields `{}` like Go;
//! * `$patch: merge` on a map is accepted as the explicit default (Go rejects
//!   it as an unknown patch type); on a list item it is rejected like Go;
//! * a patch that is JSON `null` is rejected (Go treats it as a no-op).

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Number, Value};

/// A patch the apiserver would refuse; the message mirrors the text the real
/// server puts in its `BadRequest` status so client-side assertions carry over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError(pub String);

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PatchError {}

/// Applies a strategic merge patch to `original` the way the apiserver does
/// for `kind`, so PATCH requests from kubectl and client-go behave as they
/// would against a real cluster.
///
/// Known kinds: `Pod`, `Job`, `Service`, `Secret`, `Namespace`, `Node`,
/// `PersistentVolumeClaim`, `Event`, `ServiceAccount` and the RBAC kinds.
/// Any other kind gets JSON-merge-like semantics (maps merge, `null` deletes,
/// lists are replaced) while the `$`-directives keep working.
pub fn apply(kind: &str, original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let patch = match patch {
        Value::Object(m) => m.clone(),
        other => {
            return Err(PatchError(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                crate::json::go_kind(other)
            )));
        }
    };
    let original = match original {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(PatchError(format!(
                "the object to patch must be a JSON object, got {}",
                crate::json::go_kind(other)
            )));
        }
    };
    let merger = Merger { rules: rules_for_kind(kind) };
    let merged = merger.merge_map(original, patch, "")?;
    Ok(Value::Object(merged.unwrap_or_default()))
}

const DIRECTIVE_MARKER: &str = "$patch";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";

const ERR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
const ERR_LIST_OF_LISTS: &str = "lists of lists are not supported";

/// How a field combines with its live value; mirrors the Go
/// `patchStrategy`/`patchMergeKey` tags. Fields absent from the table merge
/// if they are maps and are replaced if they are lists, as untagged Go
/// fields do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// `patchStrategy:"merge" patchMergeKey:"<key>"`: list items are objects
    /// identified by this key and merged pairwise.
    MergeByKey(&'static str),
    /// `patchStrategy:"merge"` without a key: a list of scalars kept as a set.
    MergeSet,
    /// No strategy (atomic) or `patchStrategy:"replace"`: the patch value
    /// wins wholesale. It is the default for lists; table entries with it
    /// record atomic lists clients commonly patch (tolerations, args, ...).
    Replace,
}

use Strategy::{MergeByKey, MergeSet, Replace};

/// Rules for one Go struct, relative to where it is mounted in an object.
type Rules = &'static [(&'static str, Strategy)];

/// `metav1.ObjectMeta`.
const OBJECT_META: Rules =
    &[("finalizers", MergeSet), ("ownerReferences", MergeByKey("uid")), ("managedFields", Replace)];

/// `core/v1.Container` and `EphemeralContainerCommon` (same tags).
/// `resizePolicy` is `+listType=atomic` without a patch strategy in the Go
/// type, so it is replaced, not merged by `resourceName`.
const CONTAINER: Rules = &[
    ("ports", MergeByKey("containerPort")),
    ("env", MergeByKey("name")),
    ("volumeMounts", MergeByKey("mountPath")),
    ("volumeDevices", MergeByKey("devicePath")),
    ("envFrom", Replace),
    ("args", Replace),
    ("command", Replace),
    ("resizePolicy", Replace),
];

/// `core/v1.PodSpec`. `volumes` and `resourceClaims` also carry the
/// `retainKeys` strategy, which only matters when computing patches; applying
/// honours whatever `$retainKeys` directive the patch carries.
/// `topologySpreadConstraints` is keyed by `topologyKey` only, as its
/// `patchMergeKey` tag is (the second list-map key is ignored by SMP).
const POD_SPEC: Rules = &[
    ("containers", MergeByKey("name")),
    ("initContainers", MergeByKey("name")),
    ("ephemeralContainers", MergeByKey("name")),
    ("volumes", MergeByKey("name")),
    ("imagePullSecrets", MergeByKey("name")),
    ("hostAliases", MergeByKey("ip")),
    ("topologySpreadConstraints", MergeByKey("topologyKey")),
    ("resourceClaims", MergeByKey("name")),
    ("schedulingGates", MergeByKey("name")),
    ("tolerations", Replace),
    ("readinessGates", Replace),
];

/// `core/v1.PodStatus`.
const POD_STATUS: Rules = &[
    ("conditions", MergeByKey("type")),
    ("podIPs", MergeByKey("ip")),
    ("hostIPs", MergeByKey("ip")),
    ("resourceClaimStatuses", MergeByKey("name")),
    ("containerStatuses", Replace),
    ("initContainerStatuses", Replace),
    ("ephemeralContainerStatuses", Replace),
];

/// Status structs whose only tagged list is `conditions`, keyed by `type`
/// (`JobStatus`, `ServiceStatus`, `NamespaceStatus`,
/// `PersistentVolumeClaimStatus`).
const CONDITIONS_BY_TYPE: Rules = &[("conditions", MergeByKey("type"))];

/// `core/v1.ServiceSpec`.
const SERVICE_SPEC: Rules = &[("ports", MergeByKey("port"))];

/// `core/v1.NodeSpec`.
const NODE_SPEC: Rules = &[("podCIDRs", MergeSet), ("taints", Replace)];

/// `core/v1.ServiceAccount` (its own fields, mounted at the root).
const SERVICE_ACCOUNT: Rules = &[("secrets", MergeByKey("name"))];

/// `core/v1.NodeStatus`.
const NODE_STATUS: Rules = &[("conditions", MergeByKey("type")), ("addresses", MergeByKey("type"))];

/// Where each struct's rules sit inside a pod spec rooted at `prefix`.
fn pod_spec_mounts(prefix: &'static str) -> [(String, Rules); 4] {
    [
        (prefix.to_string(), POD_SPEC),
        (format!("{prefix}.containers"), CONTAINER),
        (format!("{prefix}.initContainers"), CONTAINER),
        (format!("{prefix}.ephemeralContainers"), CONTAINER),
    ]
}

/// The (path prefix, struct rules) mounts that make up each known kind.
fn kind_mounts(kind: &str) -> Vec<(String, Rules)> {
    let mut mounts = vec![("metadata".to_string(), OBJECT_META)];
    match kind {
        "Pod" => {
            mounts.extend(pod_spec_mounts("spec"));
            mounts.push(("status".to_string(), POD_STATUS));
        }
        "Job" => {
            mounts.push(("spec.template.metadata".to_string(), OBJECT_META));
            mounts.extend(pod_spec_mounts("spec.template.spec"));
            mounts.push(("status".to_string(), CONDITIONS_BY_TYPE));
        }
        "Service" => {
            mounts.push(("spec".to_string(), SERVICE_SPEC));
            mounts.push(("status".to_string(), CONDITIONS_BY_TYPE));
        }
        "Node" => {
            mounts.push(("spec".to_string(), NODE_SPEC));
            mounts.push(("status".to_string(), NODE_STATUS));
        }
        "Namespace" | "PersistentVolumeClaim" => {
            mounts.push(("status".to_string(), CONDITIONS_BY_TYPE));
        }
        "ServiceAccount" => mounts.push((String::new(), SERVICE_ACCOUNT)),
        // Rules, subjects and selectors are atomic lists; only metadata has strategies.
        "Secret" | "Event" | "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => {}
        _ => return Vec::new(),
    }
    mounts
}

/// Known kinds, so their flattened tables can be built once.
const KNOWN_KINDS: &[&str] = &[
    "Pod",
    "Job",
    "Service",
    "Secret",
    "Namespace",
    "Node",
    "PersistentVolumeClaim",
    "Event",
    "ServiceAccount",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
];

type PathRules = HashMap<String, Strategy>;

/// The flattened `path -> strategy` table for `kind` (empty for unknown kinds).
fn rules_for_kind(kind: &str) -> &'static PathRules {
    static TABLES: OnceLock<HashMap<&'static str, PathRules>> = OnceLock::new();
    static EMPTY: OnceLock<PathRules> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        KNOWN_KINDS
            .iter()
            .map(|&k| {
                let mut flat = PathRules::new();
                for (prefix, rules) in kind_mounts(k) {
                    for (field, strategy) in rules {
                        flat.insert(child_path(&prefix, field), *strategy);
                    }
                }
                (k, flat)
            })
            .collect()
    });
    tables.get(kind).unwrap_or_else(|| EMPTY.get_or_init(PathRules::new))
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

/// Carries the per-kind strategy table through the recursion.
struct Merger {
    rules: &'static PathRules,
}

impl Merger {
    /// Strategy for a list at `path`: untagged lists are atomic.
    fn strategy(&self, path: &str) -> Strategy {
        self.rules.get(path).copied().unwrap_or(Replace)
    }

    /// Whether a map at `path` is replaced instead of merged; untagged maps
    /// (and struct fields) merge.
    fn replaces_map(&self, path: &str) -> bool {
        self.rules.get(path) == Some(&Replace)
    }

    fn merge_key(&self, path: &str) -> Option<&'static str> {
        match self.strategy(path) {
            MergeByKey(key) => Some(key),
            MergeSet | Replace => None,
        }
    }

    /// Merges `patch` into `original`; `None` means the patch deleted the map.
    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        path: &str,
    ) -> Result<Option<Map<String, Value>>, PatchError> {
        if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
            match directive.as_str() {
                Some("replace") => {
                    patch.remove(DIRECTIVE_MARKER);
                    original = Map::new();
                }
                Some("delete") => return Ok(None),
                Some("merge") => {
                    patch.remove(DIRECTIVE_MARKER);
                }
                _ => return Err(bad_patch_type(directive, &patch)),
            }
        }

        apply_retain_keys(&mut original, &mut patch)?;
        self.apply_set_element_order(&mut original, &mut patch, path)?;

        let mut deletions = Vec::new();
        for (key, patch_value) in patch {
            if key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
                let field = extract_key(&key, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?;
                deletions.push((field, patch_value));
                continue;
            }
            if patch_value.is_null() {
                original.remove(&key);
                continue;
            }
            let child = child_path(path, &key);
            let merged = match (original.remove(&key), patch_value) {
                (Some(Value::Object(live)), Value::Object(p)) if !self.replaces_map(&child) => {
                    self.merge_map(live, p, &child)?.map(Value::Object)
                }
                (Some(Value::Array(live)), Value::Array(p)) => Some(Value::Array(self.merge_list(live, p, &child)?)),
                (_, p) => self.materialize(p, &child)?,
            };
            if let Some(value) = merged {
                original.insert(key, value);
            }
        }

        for (field, values) in deletions {
            delete_from_primitive_list(&mut original, &field, values)?;
        }
        Ok(Some(original))
    }

    /// Turns a patch value that has no live counterpart into a stored value:
    /// directives are applied against emptiness and `null`s dropped, so
    /// nothing patch-only leaks into the object.
    fn materialize(&self, value: Value, path: &str) -> Result<Option<Value>, PatchError> {
        match value {
            Value::Object(m) => Ok(self.merge_map(Map::new(), m, path)?.map(Value::Object)),
            Value::Array(items) => Ok(Some(Value::Array(self.merge_list(Vec::new(), items, path)?))),
            scalar => Ok(Some(scalar)),
        }
    }

    fn merge_list(&self, original: Vec<Value>, patch: Vec<Value>, path: &str) -> Result<Vec<Value>, PatchError> {
        let key = match self.strategy(path) {
            Replace => {
                let mut out = Vec::with_capacity(patch.len());
                for item in patch {
                    if let Some(v) = self.materialize(item, path)? {
                        out.push(v);
                    }
                }
                return Ok(out);
            }
            MergeByKey(key) => Some(key),
            MergeSet => None,
        };
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        if element_kind(&[&original, &patch])? != ElementKind::Object {
            let mut merged = original.clone();
            merged.extend(patch.iter().cloned());
            let merged = dedupe(merged);
            let (patch_items, server_only) = partition_primitives(merged, &patch);
            return normalize_element_order(patch_items, server_only, &patch, &original, None);
        }
        let Some(key) = key else {
            return Err(PatchError(format!("cannot merge lists without merge key for {path}")));
        };
        let (original, patch) = self.apply_list_directives(original, patch, key, path)?;
        let merged = self.merge_items_by_key(original.clone(), &patch, key, path)?;
        let (patch_items, server_only) = partition_maps(merged, &patch, key)?;
        normalize_element_order(patch_items, server_only, &patch, &original, Some(key))
    }

    /// Handles `$patch` items of a keyed list (`mergeSliceWithSpecialElements`):
    /// deletes matching live items, or switches to replacing the whole list.
    /// Returns the live list to merge into and the plain patch items.
    fn apply_list_directives(
        &self,
        mut original: Vec<Value>,
        patch: Vec<Value>,
        key: &str,
        path: &str,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        let mut plain = Vec::with_capacity(patch.len());
        let mut replace = false;
        for item in patch {
            let Value::Object(map) = &item else {
                plain.push(item);
                continue;
            };
            let Some(directive) = map.get(DIRECTIVE_MARKER) else {
                plain.push(item);
                continue;
            };
            match directive.as_str() {
                Some("delete") => {
                    let target = merge_key_value(map, key)?;
                    original.retain(|live| !item_has_key_value(live, key, target));
                }
                Some("replace") => replace = true,
                Some("merge") => {
                    return Err(PatchError("merging lists cannot yet be specified in the patch".to_string()));
                }
                _ => return Err(bad_patch_type(directive, map)),
            }
        }
        if !replace {
            return Ok((original, plain));
        }
        let mut replacement = Vec::with_capacity(plain.len());
        for item in plain {
            if let Value::Object(map) = &item {
                merge_key_value(map, key)?;
            }
            if let Some(v) = self.materialize(item, path)? {
                replacement.push(v);
            }
        }
        Ok((replacement, Vec::new()))
    }

    /// Merges each patch item into the live item with the same key value,
    /// appending items the live list lacks (`mergeSliceWithoutSpecialElements`).
    fn merge_items_by_key(
        &self,
        mut original: Vec<Value>,
        patch: &[Value],
        key: &str,
        path: &str,
    ) -> Result<Vec<Value>, PatchError> {
        for item in patch {
            let Value::Object(item_map) = item else {
                return Err(bad_arg_type("map", item));
            };
            let wanted = merge_key_value(item_map, key)?;
            let position = original.iter().position(|live| item_has_key_value(live, key, wanted));
            match position {
                Some(index) => {
                    let live = match std::mem::take(&mut original[index]) {
                        Value::Object(m) => m,
                        other => return Err(bad_arg_type("map", &other)),
                    };
                    let merged = self.merge_map(live, item_map.clone(), path)?;
                    original[index] = Value::Object(merged.unwrap_or_default());
                }
                None => {
                    if let Some(v) = self.materialize(item.clone(), path)? {
                        original.push(v);
                    }
                }
            }
        }
        Ok(original)
    }

    /// Processes every `$setElementOrder/<field>` of this map
    /// (`mergePatchIntoOriginal`): merges the field's list right away and
    /// orders it as the directive says, then removes both from the patch.
    fn apply_set_element_order(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        path: &str,
    ) -> Result<(), PatchError> {
        let directive_keys: Vec<String> =
            patch.keys().filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX)).cloned().collect();
        for directive_key in directive_keys {
            let Some(order_value) = patch.remove(&directive_key) else {
                continue;
            };
            let Value::Array(order) = order_value else {
                return Err(bad_arg_type("slice", &order_value));
            };
            let field = extract_key(&directive_key, SET_ELEMENT_ORDER_PREFIX)?;
            let child = child_path(path, &field);

            let live_list = match original.get(&field) {
                None | Some(Value::Null) => None,
                Some(Value::Array(items)) => Some(items.clone()),
                Some(other) => return Err(bad_arg_type("slice", other)),
            };
            let patch_list = match patch.get(&field) {
                None | Some(Value::Null) => None,
                Some(Value::Array(items)) => Some(items.clone()),
                Some(other) => return Err(bad_arg_type("slice", other)),
            };
            let strategy = self.strategy(&child);
            let key = self.merge_key(&child);
            validate_patch_with_set_order_list(patch_list.as_deref().unwrap_or(&[]), &order, key)?;

            let server_order = live_list.clone().unwrap_or_default();
            let merged = match (live_list, patch_list) {
                (Some(live), None) => live,
                (live, Some(p)) => self.merge_list(live.unwrap_or_default(), p, &child)?,
                (None, None) => continue,
            };
            let ordered = if strategy == Replace {
                merged
            } else {
                let (patch_items, server_only) = match key {
                    Some(k) => partition_maps(merged, &order, k)?,
                    None => partition_primitives(merged, &order),
                };
                normalize_element_order(patch_items, server_only, &order, &server_order, key)?
            };
            original.insert(field.clone(), Value::Array(ordered));
            patch.remove(&field);
        }
        Ok(())
    }
}

/// `$retainKeys`: the live map keeps only the listed keys, and the patch may
/// only set listed keys (Go's `applyRetainKeysDirective`).
fn apply_retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let Value::Array(list) = retain else {
        return Err(PatchError(ERR_RETAIN_KEYS.to_string()));
    };
    let keep: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    let violates = patch.iter().any(|(k, v)| {
        !v.is_null()
            && !k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            && !k.starts_with(SET_ELEMENT_ORDER_PREFIX)
            && !keep.contains(&k.as_str())
    });
    if violates {
        return Err(PatchError(ERR_RETAIN_KEYS.to_string()));
    }
    original.retain(|k, _| keep.contains(&k.as_str()));
    Ok(())
}

/// `$deleteFromPrimitiveList/<field>`: drops the given scalars from a live
/// scalar list; absent lists are left absent.
fn delete_from_primitive_list(original: &mut Map<String, Value>, field: &str, values: Value) -> Result<(), PatchError> {
    let Value::Array(to_delete) = values else {
        return Err(PatchError(ERR_PRIMITIVE_LIST.to_string()));
    };
    match original.get_mut(field) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(live)) => {
            if live.iter().chain(&to_delete).any(is_container) {
                return Err(PatchError(ERR_PRIMITIVE_LIST.to_string()));
            }
            live.retain(|v| !to_delete.iter().any(|d| values_equal(v, d)));
            Ok(())
        }
        Some(other) => Err(bad_arg_type("slice", other)),
    }
}

/// Checks that the patch list names its items in the same relative order as
/// `$setElementOrder` (Go's `validatePatchWithSetOrderList`).
fn validate_patch_with_set_order_list(
    patch_list: &[Value],
    order: &[Value],
    key: Option<&str>,
) -> Result<(), PatchError> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let mut items = Vec::with_capacity(patch_list.len());
    for item in patch_list {
        match (key, item) {
            (Some(_), Value::Object(m)) if m.contains_key(DIRECTIVE_MARKER) => {}
            (Some(_), Value::Object(_)) | (None, _) => items.push(item),
            (Some(_), other) => return Err(bad_arg_type("map", other)),
        }
    }
    let (mut patch_index, mut order_index) = (0, 0);
    while patch_index < items.len() && order_index < order.len() {
        if merge_key_values_equal(items[patch_index], &order[order_index], key)? {
            patch_index += 1;
        }
        order_index += 1;
    }
    if patch_index < items.len() {
        return Err(PatchError(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER_PREFIX} list:\n{}\n",
            go_fmt_list(patch_list),
            go_fmt_list(order)
        )));
    }
    Ok(())
}

fn merge_key_values_equal(left: &Value, right: &Value, key: Option<&str>) -> Result<bool, PatchError> {
    let Some(key) = key else {
        return Ok(values_equal(left, right));
    };
    let Value::Object(l) = left else {
        return Err(bad_arg_type("map", left));
    };
    let Value::Object(r) = right else {
        return Err(bad_arg_type("map", right));
    };
    Ok(values_equal(merge_key_value(l, key)?, merge_key_value(r, key)?))
}

/// The JSON shape of list elements; SMP requires one shape per list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ElementKind {
    Null,
    Bool,
    Number,
    String,
    Object,
}

/// Go's `sliceElementType`: all elements share a type and none is a list.
fn element_kind(lists: &[&[Value]]) -> Result<ElementKind, PatchError> {
    let mut kind = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let this = match item {
            Value::Array(_) => return Err(PatchError(ERR_LIST_OF_LISTS.to_string())),
            Value::Null => ElementKind::Null,
            Value::Bool(_) => ElementKind::Bool,
            Value::Number(_) => ElementKind::Number,
            Value::String(_) => ElementKind::String,
            Value::Object(_) => ElementKind::Object,
        };
        match kind {
            None => kind = Some(this),
            Some(k) if k != this => {
                let shown: Vec<String> = lists.iter().map(|l| go_fmt_list(l)).collect();
                return Err(PatchError(format!("list element types are not identical: [{}]", shown.join(" "))));
            }
            Some(_) => {}
        }
    }
    kind.ok_or_else(|| PatchError("no elements in any of the given slices".to_string()))
}

/// Splits `merged` into items named in `by` and server-only items, keeping
/// `merged` order in both.
fn partition_primitives(merged: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    merged.into_iter().partition(|v| by.iter().any(|b| values_equal(v, b)))
}

/// Like [`partition_primitives`] but matching objects on their merge key.
fn partition_maps(merged: Vec<Value>, by: &[Value], key: &str) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut by_values = Vec::with_capacity(by.len());
    for (index, item) in by.iter().enumerate() {
        let Value::Object(m) = item else {
            return Err(PatchError(format!("value for key {index} is not a map.")));
        };
        by_values.push(m.get(key));
    }
    let (mut named, mut server_only) = (Vec::new(), Vec::new());
    for item in merged {
        let Value::Object(m) = &item else {
            return Err(bad_arg_type("map", &item));
        };
        let value = merge_key_value(m, key)?;
        if by_values.iter().flatten().any(|b| values_equal(b, value)) {
            named.push(item);
        } else {
            server_only.push(item);
        }
    }
    Ok((named, server_only))
}

/// Go's `normalizeElementOrder`: patch-named items in patch order, server-only
/// items in live order, then interleaved by live order where both are known.
fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Result<Vec<Value>, PatchError> {
    let patch_items = normalize_slice_order(patch_items, patch_order, key)?;
    let server_only = normalize_slice_order(server_only, server_order, key)?;
    Ok(merge_sorted(server_only, patch_items, server_order, key))
}

/// Stable-sorts `items` by their position in `order`; items `order` does not
/// mention keep their relative order at the end.
fn normalize_slice_order(items: Vec<Value>, order: &[Value], key: Option<&str>) -> Result<Vec<Value>, PatchError> {
    if let Some(key) = key {
        for item in items.iter().chain(order) {
            let Value::Object(m) = item else {
                return Err(bad_arg_type("map", item));
            };
            merge_key_value(m, key)?;
        }
    }
    let mut indexed: Vec<(usize, Value)> =
        items.into_iter().map(|item| (index_in(order, &item, key).unwrap_or(usize::MAX), item)).collect();
    indexed.sort_by_key(|(index, _)| *index);
    Ok(indexed.into_iter().map(|(_, item)| item).collect())
}

/// Go's `mergeSortedSlice`: inserts server-only items into the patch items
/// before the first patch item that comes later in the live list.
fn merge_sorted(left: Vec<Value>, right: Vec<Value>, server_order: &[Value], key: Option<&str>) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_in(server_order, l, key), index_in(server_order, r, key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// Position of `item` in `list`, comparing merge-key values for objects.
fn index_in(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    match key {
        Some(key) => {
            let wanted = item.get(key)?;
            list.iter().position(|v| v.get(key).is_some_and(|x| values_equal(x, wanted)))
        }
        None => list.iter().position(|v| values_equal(v, item)),
    }
}

fn dedupe(items: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for item in items {
        if !out.iter().any(|seen| values_equal(seen, &item)) {
            out.push(item);
        }
    }
    out
}

fn is_container(v: &Value) -> bool {
    matches!(v, Value::Array(_) | Value::Object(_))
}

/// The merge-key value of a list item; a missing or `null` key makes the
/// item unaddressable, which Go reports as `ErrNoMergeKey`.
fn merge_key_value<'a>(item: &'a Map<String, Value>, key: &str) -> Result<&'a Value, PatchError> {
    match item.get(key) {
        Some(v) if !v.is_null() => Ok(v),
        _ => Err(PatchError(format!("map: {} does not contain declared merge key: {key}", go_fmt_map(item)))),
    }
}

fn item_has_key_value(item: &Value, key: &str, wanted: &Value) -> bool {
    item.get(key).is_some_and(|v| values_equal(v, wanted))
}

/// JSON equality where `80` and `80.0` are the same number, as they are once
/// Go decodes both to `float64`.
fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(l, r)| values_equal(l, r)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

fn numbers_equal(x: &Number, y: &Number) -> bool {
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return a == b;
    }
    match (x.as_f64(), y.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Go's `extractKey`: `<prefix>/<field>` or the directive's format error.
fn extract_key(key: &str, prefix: &str) -> Result<String, PatchError> {
    match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field.to_string()),
        _ if prefix == SET_ELEMENT_ORDER_PREFIX => Err(PatchError(ERR_SET_ELEMENT_ORDER.to_string())),
        _ => Err(PatchError(ERR_PRIMITIVE_LIST.to_string())),
    }
}

fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> PatchError {
    PatchError(format!("unknown patch type: {} in map: {}", go_fmt(directive), go_fmt_map(map)))
}

fn bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    PatchError(format!("expected a {expected}, but received a {}", go_kind_name(actual)))
}

fn go_kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

/// Renders a decoded JSON value the way Go's `%v` does, so error texts match
/// what the apiserver prints for the same patch.
fn go_fmt(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_fmt_number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => go_fmt_list(items),
        Value::Object(m) => go_fmt_map(m),
    }
}

fn go_fmt_list(items: &[Value]) -> String {
    let parts: Vec<String> = items.iter().map(go_fmt).collect();
    format!("[{}]", parts.join(" "))
}

fn go_fmt_map(m: &Map<String, Value>) -> String {
    let mut parts: Vec<(&String, String)> = m.iter().map(|(k, v)| (k, go_fmt(v))).collect();
    parts.sort_by(|a, b| a.0.cmp(b.0));
    let parts: Vec<String> = parts.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", parts.join(" "))
}

/// `%v` of a `float64`: shortest digits, exponent form outside [1e-4, 1e6).
fn go_fmt_number(n: &Number) -> String {
    let Some(f) = n.as_f64() else {
        return n.to_string();
    };
    if f == 0.0 {
        return "0".to_string();
    }
    let scientific = format!("{f:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return f.to_string();
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return f.to_string();
    };
    if (-4..6).contains(&exponent) {
        f.to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patch(kind: &str, original: Value, p: Value) -> Value {
        match apply(kind, &original, &p) {
            Ok(v) => v,
            Err(e) => panic!("patch failed: {e}"),
        }
    }

    fn patch_err(kind: &str, original: Value, p: Value) -> String {
        match apply(kind, &original, &p) {
            Ok(v) => panic!("expected an error, got {v}"),
            Err(e) => e.0,
        }
    }

    fn pod(containers: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web", "tier": "fe"}},
            "spec": {"containers": containers}
        })
    }

    fn names(list: &Value) -> Vec<&str> {
        list.as_array().map(|items| items.iter().filter_map(|i| i["name"].as_str()).collect()).unwrap_or_default()
    }

    #[test]
    fn containers_merge_by_name_and_keep_others() {
        let original = pod(json!([
            {"name": "app", "image": "app:1", "args": ["--a"]},
            {"name": "sidecar", "image": "side:1"}
        ]));
        let out = patch("Pod", original, json!({"spec": {"containers": [{"name": "app", "image": "app:2"}]}}));
        let containers = &out["spec"]["containers"];
        assert_eq!(names(containers), ["app", "sidecar"]);
        assert_eq!(containers[0]["image"], "app:2");
        assert_eq!(containers[0]["args"], json!(["--a"]));
        assert_eq!(containers[1]["image"], "side:1");
        assert_eq!(out["metadata"]["name"], "p");
    }

    #[test]
    fn new_container_is_placed_before_untouched_ones_like_go() {
        let original = pod(json!([{"name": "app", "image": "app:1"}]));
        let out = patch("Pod", original, json!({"spec": {"containers": [{"name": "redis", "image": "redis"}]}}));
        assert_eq!(names(&out["spec"]["containers"]), ["redis", "app"]);
    }

    #[test]
    fn env_merges_by_name_within_a_container() {
        let original = pod(json!([{
            "name": "app",
            "image": "app:1",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
        }]));
        let out = patch(
            "Pod",
            original,
            json!({"spec": {"containers": [{"name": "app", "env": [
                {"name": "B", "value": "3"},
                {"name": "C", "value": "4"}
            ]}]}}),
        );
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([
                {"name": "A", "value": "1"},
                {"name": "B", "value": "3"},
                {"name": "C", "value": "4"}
            ])
        );
        assert_eq!(out["spec"]["containers"][0]["image"], "app:1");
    }

    #[test]
    fn ports_merge_on_numeric_container_port() {
        let original = pod(json!([{"name": "app", "ports": [
            {"containerPort": 80, "name": "http"},
            {"containerPort": 443, "name": "https"}
        ]}]));
        let out = patch(
            "Pod",
            original,
            json!({"spec": {"containers": [{"name": "app", "ports": [
                {"containerPort": 80.0, "protocol": "TCP"}
            ]}]}}),
        );
        let ports = &out["spec"]["containers"][0]["ports"];
        assert_eq!(ports.as_array().map(Vec::len), Some(2));
        assert_eq!(ports[0]["name"], "http");
        assert_eq!(ports[0]["protocol"], "TCP");
    }

    #[test]
    fn patch_delete_removes_a_container() {
        let original = pod(json!([
            {"name": "app", "image": "app:1"},
            {"name": "sidecar", "image": "side:1"}
        ]));
        let out = patch("Pod", original, json!({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}));
        assert_eq!(out["spec"]["containers"], json!([{"name": "app", "image": "app:1"}]));
    }

    #[test]
    fn patch_replace_in_list_item_replaces_the_list() {
        let original = pod(json!([
            {"name": "app", "image": "app:1"},
            {"name": "sidecar", "image": "side:1"}
        ]));
        let out = patch(
            "Pod",
            original,
            json!({"spec": {"containers": [
                {"name": "only", "image": "only:1"},
                {"$patch": "replace"}
            ]}}),
        );
        assert_eq!(out["spec"]["containers"], json!([{"name": "only", "image": "only:1"}]));
    }

    #[test]
    fn patch_replace_in_map_replaces_the_map() {
        let out = patch("Pod", pod(json!([])), json!({"metadata": {"labels": {"$patch": "replace", "new": "x"}}}));
        assert_eq!(out["metadata"]["labels"], json!({"new": "x"}));
    }

    #[test]
    fn patch_delete_in_map_removes_the_field() {
        let out = patch("Pod", pod(json!([])), json!({"metadata": {"labels": {"$patch": "delete"}}}));
        assert!(out["metadata"].get("labels").is_none());
        assert_eq!(out["metadata"]["name"], "p");
    }

    #[test]
    fn patch_merge_on_map_is_the_default() {
        let out = patch("Pod", pod(json!([])), json!({"metadata": {"labels": {"$patch": "merge", "new": "x"}}}));
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "tier": "fe", "new": "x"}));
    }

    #[test]
    fn set_element_order_orders_merged_list() {
        let original = pod(json!([
            {"name": "a", "image": "a:1"},
            {"name": "b", "image": "b:1"},
            {"name": "c", "image": "c:1"}
        ]));
        let out = patch(
            "Pod",
            original,
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
                "containers": [{"name": "a", "image": "a:2"}]
            }}),
        );
        let containers = &out["spec"]["containers"];
        assert_eq!(names(containers), ["c", "a", "b"]);
        assert_eq!(containers[1]["image"], "a:2");
        assert!(out["spec"].get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn set_element_order_interleaves_server_only_items_by_live_order() {
        let order = json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}});
        let trailing = pod(json!([{"name": "a"}, {"name": "b"}, {"name": "x"}]));
        let out = patch("Pod", trailing, order.clone());
        assert_eq!(names(&out["spec"]["containers"]), ["b", "a", "x"]);

        // Go's mergeSortedSlice puts a server-only item before the first
        // listed item that follows it in the live list.
        let between = pod(json!([{"name": "a"}, {"name": "x"}, {"name": "b"}]));
        let out = patch("Pod", between, order);
        assert_eq!(names(&out["spec"]["containers"]), ["x", "b", "a"]);
    }

    #[test]
    fn set_element_order_rejects_patch_list_out_of_order() {
        let err = patch_err(
            "Pod",
            pod(json!([{"name": "a"}, {"name": "b"}])),
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b"}, {"name": "a"}]
            }}),
        );
        assert!(err.starts_with("The order in patch list:"), "{err}");
    }

    #[test]
    fn retain_keys_drops_unlisted_fields() {
        let original = json!({"spec": {"containers": [], "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "cfg", "configMap": {"name": "c"}}
        ]}});
        let out = patch(
            "Pod",
            original,
            json!({"spec": {"volumes": [{
                "name": "data",
                "$retainKeys": ["hostPath", "name"],
                "hostPath": {"path": "/data"}
            }]}}),
        );
        let volumes = &out["spec"]["volumes"];
        assert_eq!(volumes[0], json!({"name": "data", "hostPath": {"path": "/data"}}));
        assert_eq!(volumes[1], json!({"name": "cfg", "configMap": {"name": "c"}}));
    }

    #[test]
    fn retain_keys_rejects_patch_fields_it_does_not_list() {
        let err = patch_err(
            "Pod",
            json!({"spec": {"volumes": [{"name": "data", "emptyDir": {}}]}}),
            json!({"spec": {"volumes": [{
                "name": "data",
                "$retainKeys": ["name"],
                "hostPath": {"path": "/data"}
            }]}}),
        );
        assert_eq!(err, "invalid patch format of retainKeys");
    }

    #[test]
    fn delete_from_primitive_list_removes_finalizers() {
        let original = json!({"metadata": {"name": "p", "finalizers": ["a", "b", "c"]}});
        let out = patch("Pod", original, json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zzz"]}}));
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
        assert!(out["metadata"].get("$deleteFromPrimitiveList/finalizers").is_none());
    }

    #[test]
    fn finalizers_union_and_kubectl_style_set_list_patch() {
        let original = json!({"metadata": {"name": "p", "finalizers": ["a", "b"]}});
        let out = patch("Pod", original.clone(), json!({"metadata": {"finalizers": ["b", "c"]}}));
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));

        let out = patch(
            "Pod",
            original,
            json!({"metadata": {
                "$deleteFromPrimitiveList/finalizers": ["b"],
                "$setElementOrder/finalizers": ["a", "c"],
                "finalizers": ["c"]
            }}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "c"]));
    }

    #[test]
    fn owner_references_merge_by_uid() {
        let original = json!({"metadata": {"ownerReferences": [
            {"uid": "1", "kind": "Job", "name": "j"}
        ]}});
        let out = patch("Pod", original, json!({"metadata": {"ownerReferences": [{"uid": "1", "controller": true}]}}));
        assert_eq!(
            out["metadata"]["ownerReferences"],
            json!([{"uid": "1", "kind": "Job", "name": "j", "controller": true}])
        );
    }

    #[test]
    fn null_deletes_a_label_and_unmatched_null_is_ignored() {
        let out =
            patch("Pod", pod(json!([])), json!({"metadata": {"labels": {"tier": null, "missing": null, "new": "v"}}}));
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "new": "v"}));
    }

    #[test]
    fn tolerations_are_replaced_wholesale() {
        let original = json!({"spec": {"containers": [], "tolerations": [
            {"key": "a", "operator": "Exists"},
            {"key": "b", "operator": "Exists"}
        ]}});
        let out = patch("Pod", original, json!({"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}}));
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "c", "operator": "Exists"}]));
    }

    #[test]
    fn args_are_replaced_not_unioned() {
        let original = pod(json!([{"name": "app", "args": ["a", "b"]}]));
        let out = patch("Pod", original, json!({"spec": {"containers": [{"name": "app", "args": ["c"]}]}}));
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["c"]));
    }

    #[test]
    fn job_template_containers_merge_by_name() {
        let original = json!({
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {
                "selector": {"matchLabels": {"controller-uid": "u"}},
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox:1", "env": [{"name": "X", "value": "1"}]},
                        {"name": "helper", "image": "helper:1"}
                    ]
                }}
            }
        });
        let out = patch(
            "Job",
            original,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "main", "env": [{"name": "Y", "value": "2"}]}
            ]}}}}),
        );
        let containers = &out["spec"]["template"]["spec"]["containers"];
        assert_eq!(names(containers), ["main", "helper"]);
        assert_eq!(containers[0]["image"], "busybox:1");
        // Y is new to the list, so (as in Go) it goes before untouched X.
        assert_eq!(containers[0]["env"], json!([{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}]));
        assert_eq!(out["spec"]["template"]["spec"]["restartPolicy"], "Never");
        assert_eq!(out["spec"]["selector"], json!({"matchLabels": {"controller-uid": "u"}}));
    }

    #[test]
    fn job_status_conditions_merge_by_type() {
        let original = json!({"status": {"conditions": [
            {"type": "Suspended", "status": "True"}
        ]}});
        let out = patch(
            "Job",
            original,
            json!({"status": {"conditions": [
                {"type": "Suspended", "status": "False"},
                {"type": "Complete", "status": "True"}
            ]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([
                {"type": "Suspended", "status": "False"},
                {"type": "Complete", "status": "True"}
            ])
        );
    }

    #[test]
    fn pod_status_conditions_merge_but_container_statuses_replace() {
        let original = json!({"status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "Initialized", "status": "True"}],
            "containerStatuses": [{"name": "a", "ready": false}, {"name": "b", "ready": false}]
        }});
        let out = patch(
            "Pod",
            original,
            json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "a", "ready": true}]
            }}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}])
        );
        assert_eq!(out["status"]["containerStatuses"], json!([{"name": "a", "ready": true}]));
    }

    #[test]
    fn service_ports_merge_by_port_and_node_lists_by_type() {
        let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
        let out = patch("Service", svc, json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}));
        assert_eq!(out["spec"]["ports"], json!([{"port": 80, "targetPort": 9090}, {"port": 443}]));

        let node = json!({"status": {
            "conditions": [{"type": "Ready", "status": "False"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]
        }});
        let out = patch(
            "Node",
            node,
            json!({"status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "Hostname", "address": "n1"}]
            }}),
        );
        assert_eq!(out["status"]["conditions"], json!([{"type": "Ready", "status": "True"}]));
        assert_eq!(out["status"]["addresses"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn service_account_secrets_merge_by_name_and_binding_subjects_replace() {
        let sa = json!({"secrets": [{"name": "a"}], "imagePullSecrets": [{"name": "p"}]});
        let out = patch("ServiceAccount", sa, json!({"secrets": [{"name": "b"}], "imagePullSecrets": [{"name": "q"}]}));
        assert_eq!(out["secrets"], json!([{"name": "b"}, {"name": "a"}]));
        assert_eq!(out["imagePullSecrets"], json!([{"name": "q"}]));

        let rb = json!({"metadata": {"finalizers": ["x"]}, "subjects": [{"kind": "User", "name": "a"}]});
        let out = patch(
            "RoleBinding",
            rb,
            json!({"metadata": {"finalizers": ["y"]}, "subjects": [{"kind": "User", "name": "b"}]}),
        );
        assert_eq!(out["subjects"], json!([{"kind": "User", "name": "b"}]));
        assert_eq!(out["metadata"]["finalizers"], json!(["y", "x"]));
    }

    #[test]
    fn unknown_kind_merges_maps_and_replaces_lists() {
        let original = json!({"spec": {"items": [1, 2], "cfg": {"a": 1, "b": 2}}});
        let out = patch("Widget", original, json!({"spec": {"items": [3], "cfg": {"b": null, "c": 3}}}));
        assert_eq!(out, json!({"spec": {"items": [3], "cfg": {"a": 1, "c": 3}}}));
    }

    #[test]
    fn secret_data_merges_and_event_fields_replace() {
        let secret = json!({"data": {"a": "YQ==", "b": "Yg=="}, "type": "Opaque"});
        let out = patch("Secret", secret, json!({"data": {"b": null, "c": "Yw=="}}));
        assert_eq!(out["data"], json!({"a": "YQ==", "c": "Yw=="}));

        let event = json!({"reason": "Started", "count": 1});
        let out = patch("Event", event, json!({"count": 2}));
        assert_eq!(out, json!({"reason": "Started", "count": 2}));
    }

    #[test]
    fn directives_are_stripped_from_added_subtrees() {
        let original = json!({"metadata": {"name": "p"}});
        let out = patch(
            "Pod",
            original,
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [
                    {"name": "a", "image": "a:1", "$setElementOrder/env": [{"name": "X"}], "env": [{"name": "X", "value": "1"}]},
                    {"name": "gone", "$patch": "delete"}
                ],
                "securityContext": {"$patch": "delete"},
                "nodeSelector": {"$patch": "replace", "disk": "ssd", "none": null}
            }}),
        );
        assert_eq!(
            out["spec"],
            json!({
                "containers": [{"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]}],
                "nodeSelector": {"disk": "ssd"}
            })
        );
    }

    #[test]
    fn kubectl_client_side_apply_patch() {
        let last_applied = concat!(
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"labels":{"app":"web"},"#,
            r#""name":"p","namespace":"default"},"spec":{"containers":[{"image":"nginx:1.26","name":"web"},"#,
            r#"{"image":"busybox:1.36","name":"sidecar"}]}}"#,
            "\n"
        );
        let original = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "namespace": "default",
                "uid": "123",
                "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"}
            },
            "spec": {
                "containers": [
                    {"name": "web", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent"},
                    {"name": "sidecar", "image": "busybox:1.36"}
                ],
                "restartPolicy": "Always"
            }
        });
        let p = json!({
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}},
            "spec": {
                "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
                "containers": [{"image": "nginx:1.26", "name": "web"}]
            }
        });
        let out = patch("Pod", original, p);
        assert_eq!(out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"], last_applied);
        assert_eq!(out["metadata"]["uid"], "123");
        assert_eq!(
            out["spec"]["containers"],
            json!([
                {"name": "web", "image": "nginx:1.26", "imagePullPolicy": "IfNotPresent"},
                {"name": "sidecar", "image": "busybox:1.36"}
            ])
        );
        assert_eq!(out["spec"]["restartPolicy"], "Always");
        assert!(!out.to_string().contains("$setElementOrder"), "directive leaked: {out}");
    }

    #[test]
    fn kubectl_client_side_apply_patch_with_nested_order_on_job() {
        let original = json!({
            "kind": "Job",
            "metadata": {"name": "j", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"template": {"spec": {"containers": [{
                "name": "main",
                "image": "busybox:1.36",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "INJECTED", "value": "x"}]
            }]}}}
        });
        let p = json!({
            "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Job\"}\n"}},
            "spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "main"}],
                "containers": [{
                    "$setElementOrder/env": [{"name": "C"}, {"name": "A"}],
                    "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "B"}],
                    "name": "main"
                }]
            }}}
        });
        let out = patch("Job", original, p);
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{
                "name": "main",
                "image": "busybox:1.36",
                "env": [
                    {"name": "C", "value": "3"},
                    {"name": "A", "value": "1"},
                    {"name": "INJECTED", "value": "x"}
                ]
            }])
        );
        assert_eq!(
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{\"kind\":\"Job\"}\n"
        );
    }

    #[test]
    fn top_level_replace_and_delete() {
        let out = patch("Pod", pod(json!([])), json!({"$patch": "replace", "kind": "Pod"}));
        assert_eq!(out, json!({"kind": "Pod"}));
        let out = patch("Pod", pod(json!([])), json!({"$patch": "delete"}));
        assert_eq!(out, json!({}));
    }

    #[test]
    fn malformed_patches_are_rejected() {
        let original = pod(json!([{"name": "app"}]));
        assert_eq!(
            patch_err("Pod", original.clone(), json!({"metadata": {"$patch": "explode"}})),
            "unknown patch type: explode in map: map[$patch:explode]"
        );
        assert_eq!(
            patch_err("Pod", original.clone(), json!({"spec": {"containers": [{"image": "x"}]}})),
            "map: map[image:x] does not contain declared merge key: name"
        );
        assert_eq!(
            patch_err("Pod", original.clone(), json!({"spec": {"containers": [{"image": "x", "$patch": "delete"}]}})),
            "map: map[$patch:delete image:x] does not contain declared merge key: name"
        );
        assert_eq!(
            patch_err("Pod", original.clone(), json!({"spec": {"containers": [{"name": "app", "$patch": "merge"}]}})),
            "merging lists cannot yet be specified in the patch"
        );
        assert_eq!(
            patch_err(
                "Pod",
                original.clone(),
                json!({"spec": {"containers": [{"name": "app", "$patch": "sideways"}]}})
            ),
            "unknown patch type: sideways in map: map[$patch:sideways name:app]"
        );
        assert_eq!(
            patch_err("Pod", original.clone(), json!({"spec": {"$setElementOrderX": []}})),
            "invalid patch format of setElementOrder list"
        );
        assert_eq!(
            patch_err("Pod", original.clone(), json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}})),
            "invalid patch format of primitive list"
        );
        assert_eq!(
            patch_err("Pod", original.clone(), json!({"metadata": {"finalizers": [["a"]]}})),
            "lists of lists are not supported"
        );
        assert_eq!(
            patch_err("Pod", original.clone(), json!([{"op": "add"}])),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(
            patch_err("Pod", original, json!("x")),
            "json: cannot unmarshal string into Go value of type map[string]interface {}"
        );
    }

    #[test]
    fn error_values_render_like_go() {
        assert_eq!(go_fmt(&json!(80)), "80");
        assert_eq!(go_fmt(&json!(1.5)), "1.5");
        assert_eq!(go_fmt(&json!(1_000_000)), "1e+06");
        assert_eq!(go_fmt(&json!(null)), "<nil>");
        assert_eq!(go_fmt(&json!({"b": [1, "x"], "a": true})), "map[a:true b:[1 x]]");
    }
}
