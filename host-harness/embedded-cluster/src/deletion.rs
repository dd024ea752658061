//! DELETE: preconditions, graceful pod deletion, finalizers and propagation policies.
//!
//! The API server's part of deletion only: it stamps `deletionTimestamp`, adds the `orphan` or
//! `foregroundDeletion` finalizer the policy asks for, and removes an object once it has no
//! finalizers left. Following ownerReferences is the garbage collector's job (a controller).
//! Namespace contents are removed here, as kube-apiserver's namespace lifecycle does.

use serde_json::{Value, json};

use crate::apiserver::{ApiServer, Ctx, Filter, Reply};
use crate::resources::ResourceType;
use crate::status::{self, ApiError};
use crate::store::{Txn, object_rv};
use crate::strategy::string_list;

/// How dependents are treated when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

/// The options of one DELETE (body `DeleteOptions` and query parameters).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub grace_period: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads the options from the body (if any) and the query.
    pub fn parse(body: &[u8], query: &crate::request::Query) -> Result<Self, ApiError> {
        let doc: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
        };
        let policy = doc["propagationPolicy"].as_str().or(query.get("propagationPolicy"));
        let propagation = match policy {
            None => {
                match doc["orphanDependents"].as_bool().or_else(|| query.get("orphanDependents").map(|v| v == "true")) {
                    Some(true) => Some(Propagation::Orphan),
                    Some(false) => Some(Propagation::Background),
                    None => None,
                }
            }
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                return Err(ApiError::invalid(
                    crate::status::Subject {
                        group: "meta.k8s.io",
                        resource: "deleteoptions",
                        kind: "DeleteOptions",
                        name: "",
                    },
                    &[crate::field_error::FieldError::not_supported(
                        "propagationPolicy",
                        format!("{other:?}"),
                        &["Foreground", "Background", "Orphan", "nil"],
                    )],
                ));
            }
        };
        let grace_period = match doc["gracePeriodSeconds"].as_i64() {
            Some(g) => Some(g),
            None => query.int("gracePeriodSeconds")?,
        };
        let dry_run = doc["dryRun"].as_array().is_some_and(|a| a.iter().any(|v| v == "All"))
            || query.get("dryRun") == Some("All");
        Ok(Self {
            propagation,
            grace_period,
            uid: doc.pointer("/preconditions/uid").and_then(Value::as_str).map(String::from),
            resource_version: doc.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(String::from),
            dry_run,
        })
    }
}

/// The policy used when a client names none: Jobs orphan their pods (batch/v1 keeps that old
/// default), everything else is collected in the background.
fn default_propagation(rt: &ResourceType) -> Propagation {
    if rt.kind == "Job" { Propagation::Orphan } else { Propagation::Background }
}

/// What a delete did to one object.
enum Outcome {
    /// Still there, terminating (grace period or finalizers).
    Terminating(Value),
    /// Gone from the store.
    Removed(Value),
}

impl ApiServer {
    /// DELETE of one object.
    pub fn delete(&self, ctx: &Ctx<'_>, body: &[u8]) -> Result<Reply, ApiError> {
        let name = ctx.name.ok_or_else(|| ApiError::method_not_allowed("a resource name is required"))?;
        let opts = DeleteOptions::parse(body, ctx.query)?;
        let outcome =
            self.store.write(|txn| self.delete_in(txn, ctx.rt, ctx.namespace.unwrap_or_default(), name, &opts))?;
        Ok(match outcome {
            Outcome::Terminating(obj) => {
                Reply { code: 200, body: crate::conversion::from_storage(ctx.rt, &obj), warnings: Vec::new() }
            }
            Outcome::Removed(obj) => {
                let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
                Reply {
                    code: 200,
                    body: status::delete_success(ctx.rt.group, ctx.rt.plural, name, uid),
                    warnings: Vec::new(),
                }
            }
        })
    }

    /// DELETE of a collection (with selectors): every selected object, as if deleted one by one.
    pub fn delete_collection(&self, ctx: &Ctx<'_>, body: &[u8]) -> Result<Reply, ApiError> {
        let opts = DeleteOptions::parse(body, ctx.query)?;
        let filter = Filter::from_query(ctx.rt, ctx.query)?;
        let (_, items) = self.store.list(ctx.rt.storage, ctx.namespace);
        let mut deleted = Vec::new();
        for obj in items.iter().filter(|o| filter.matches(o)) {
            let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
            let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            match self.store.write(|txn| self.delete_in(txn, ctx.rt, ns, name, &opts)) {
                Ok(Outcome::Removed(o) | Outcome::Terminating(o)) => {
                    deleted.push(crate::conversion::from_storage(ctx.rt, &o))
                }
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Reply {
            code: 200,
            body: json!({"kind": ctx.rt.list_kind(), "apiVersion": ctx.rt.api_version(), "metadata": {"resourceVersion": self.store.current_rv().to_string()}, "items": deleted}),
            warnings: Vec::new(),
        })
    }

    fn delete_in(
        &self,
        txn: &mut Txn<'_>,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Outcome, ApiError> {
        let subject = status::Subject { group: rt.group, resource: rt.plural, kind: rt.kind, name };
        let current = txn.get(rt.storage, ns, name).ok_or_else(|| ApiError::not_found(subject))?;
        let meta = &current["metadata"];
        let uid = meta["uid"].as_str().unwrap_or_default();
        if let Some(want) = &opts.uid
            && want != uid
        {
            return Err(ApiError::uid_precondition_failed(subject, want, uid));
        }
        if let Some(want) = &opts.resource_version {
            let have = object_rv(&current).to_string();
            if *want != have {
                return Err(ApiError::resource_version_precondition_failed(subject, want, &have));
            }
        }
        if opts.dry_run {
            return Ok(Outcome::Terminating((*current).clone()));
        }
        let mut obj = (*current).clone();
        let now = self.clock.now();
        let already_deleting = meta.get("deletionTimestamp").is_some();

        if rt.kind == "Namespace" {
            return Ok(self.delete_namespace(txn, name, obj));
        }

        let mut finalizers = string_list(&meta["finalizers"]);
        let wanted = match opts.propagation.unwrap_or_else(|| default_propagation(rt)) {
            Propagation::Orphan => Some("orphan"),
            Propagation::Foreground => Some("foregroundDeletion"),
            Propagation::Background => None,
        };
        if let Some(f) = wanted
            && !finalizers.iter().any(|x| x == f)
            && !already_deleting
        {
            finalizers.push(f.to_string());
        }

        if rt.kind == "Pod" {
            let bound = current.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
            let terminal =
                matches!(current.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
            let spec_grace =
                current.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(30);
            let grace = if bound && !terminal { opts.grace_period.unwrap_or(spec_grace).max(0) } else { 0 };
            if grace > 0 {
                let current_grace = meta["deletionGracePeriodSeconds"].as_i64();
                if already_deleting && current_grace.is_some_and(|g| g <= grace) {
                    return Ok(Outcome::Terminating(obj));
                }
                let at = now.saturating_add(jiff::SignedDuration::from_secs(grace)).unwrap_or(now);
                if !already_deleting {
                    bump_generation(&mut obj);
                }
                obj["metadata"]["deletionTimestamp"] = json!(crate::clock::format_time(at));
                obj["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
                if !finalizers.is_empty() {
                    obj["metadata"]["finalizers"] = json!(finalizers);
                }
                return Ok(Outcome::Terminating((*txn.put(rt.storage, obj)).clone()));
            }
        }

        if !finalizers.is_empty() {
            if !already_deleting {
                bump_generation(&mut obj);
            }
            // A grace period still pending is cut to nothing (a pod's kubelet deleting it with
            // grace period 0): the finalizers' removal then removes the object.
            if !already_deleting || meta["deletionGracePeriodSeconds"].as_i64().is_some_and(|g| g > 0) {
                obj["metadata"]["deletionTimestamp"] = json!(crate::clock::format_time(now));
                obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            }
            obj["metadata"]["finalizers"] = json!(finalizers);
            if obj == *current {
                return Ok(Outcome::Terminating(obj));
            }
            return Ok(Outcome::Terminating((*txn.put(rt.storage, obj)).clone()));
        }
        let removed = txn.remove(rt.storage, ns, name).map(|o| (*o).clone()).unwrap_or(obj);
        after_removal(self, txn, ns);
        Ok(Outcome::Removed(removed))
    }

    /// Marks a namespace Terminating and deletes its contents; it disappears once they are gone.
    fn delete_namespace(&self, txn: &mut Txn<'_>, name: &str, mut ns_obj: Value) -> Outcome {
        if ns_obj.pointer("/metadata/deletionTimestamp").is_none() {
            ns_obj["metadata"]["deletionTimestamp"] = json!(self.clock.now_rfc3339());
            ns_obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            ns_obj["status"]["phase"] = json!("Terminating");
            ns_obj = (*txn.put("namespaces", ns_obj)).clone();
        }
        let opts =
            DeleteOptions { propagation: Some(Propagation::Background), grace_period: Some(0), ..Default::default() };
        let namespaced: Vec<&ResourceType> = self.types.iter().filter(|t| t.namespaced).collect();
        let mut seen = Vec::new();
        for rt in namespaced {
            if seen.contains(&rt.storage) {
                continue;
            }
            seen.push(rt.storage);
            for obj in txn.list(rt.storage, Some(name)) {
                let obj_name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
                // Errors here are per-object (e.g. raced away) and must not stop the sweep.
                let _ = self.delete_in(txn, rt, name, &obj_name, &opts);
            }
        }
        match finish_namespace(self, txn, name) {
            Some(removed) => Outcome::Removed(removed),
            None => Outcome::Terminating(ns_obj),
        }
    }
}

/// The first deletionTimestamp changes what the object's controllers must do, so kube-apiserver
/// bumps a set `metadata.generation` with it (`rest.BeforeDelete` for graceful deletion, the
/// registry's `updateForGracefulDeletionAndFinalizers` for finalizers).
fn bump_generation(obj: &mut Value) {
    if let Some(generation) = obj.pointer("/metadata/generation").and_then(Value::as_i64).filter(|g| *g > 0) {
        obj["metadata"]["generation"] = json!(generation.saturating_add(1));
    }
}

/// Called after an object is removed: a terminating namespace that is now empty goes away.
pub fn after_removal(server: &ApiServer, txn: &mut Txn<'_>, ns: &str) {
    if !ns.is_empty() {
        crate::admission::quota::refresh(txn, &server.types, ns);
        finish_namespace(server, txn, ns);
    }
}

fn finish_namespace(server: &ApiServer, txn: &mut Txn<'_>, ns: &str) -> Option<Value> {
    let obj = txn.get("namespaces", "", ns)?;
    obj.pointer("/metadata/deletionTimestamp")?;
    let empty = server.types.iter().filter(|t| t.namespaced).all(|t| txn.list(t.storage, Some(ns)).is_empty());
    if !empty {
        return None;
    }
    txn.remove("namespaces", "", ns).map(|o| (*o).clone())
}
