//! The API server's REST semantics: create, get, list, update, patch and binding, with the
//! object rules of kube-apiserver (uids, generateName, resourceVersion checks, status kept apart,
//! selectors, pagination, field validation). Deletion lives in `deletion.rs`, watch in `watch.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};

use crate::admission;
use crate::clock::Clock;
use crate::controllers::kubelet::exec::{DEFAULT_EXEC_LIMIT, ExecHost};
use crate::conversion;
use crate::faults::Faults;
use crate::patch;
use crate::rbac;
use crate::rbac::authorizer::User;
use crate::request::Query;
use crate::request_log::RequestLog;
use crate::resources::{Flavor, ResourceType, SandboxVersions};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Subject};
use crate::store::{Store, Txn, object_rv};
use crate::strategy::{self, Findings, Schemas};
use crate::tokens::ServiceAccountTokens;
use crate::typed::{self, Decoded};

/// The API server's state, shared by every connection.
pub struct ApiServer {
    pub types: Vec<ResourceType>,
    pub store: Store,
    pub clock: Arc<Clock>,
    pub faults: Faults,
    pub log: RequestLog,
    pub schemas: Schemas,
    /// The ServiceAccount tokens issued so far.
    pub sa_tokens: ServiceAccountTokens,
    /// The minor version `/version` reports.
    pub reported_minor: AtomicU32,
    /// The processes of `pods/exec` and their per-pod directories.
    pub exec: Arc<ExecHost>,
    next_ip: AtomicU32,
}

/// One resource request, resolved.
pub struct Ctx<'a> {
    pub rt: &'a ResourceType,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub subresource: Option<&'a str>,
    pub query: &'a Query,
    /// The RBAC-authorized user making the request, whose own grants bound the Roles and
    /// bindings it may write (`rbac::escalation`); None for the built-in users, which hold all.
    pub grants_of: Option<User<'a>>,
}

impl Ctx<'_> {
    /// The subject of error messages about the named object.
    pub fn subject<'b>(&'b self, name: &'b str) -> Subject<'b> {
        Subject { group: self.rt.group, resource: self.rt.plural, kind: self.rt.kind, name }
    }

    fn ns(&self) -> &str {
        self.namespace.unwrap_or_default()
    }

    fn require_name(&self) -> Result<&str, ApiError> {
        self.name.ok_or_else(|| ApiError::method_not_allowed("a resource name is required"))
    }

    fn require_namespace(&self) -> Result<(), ApiError> {
        if self.rt.namespaced && self.namespace.is_none() {
            return Err(ApiError::method_not_allowed(format!(
                "{} must be created in a namespace: use /namespaces/{{namespace}}/{}",
                self.rt.plural, self.rt.plural
            )));
        }
        Ok(())
    }
}

/// A successful answer: status code, body, and `Warning` headers.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

impl Reply {
    fn ok(body: Value) -> Self {
        Self { code: 200, body, warnings: Vec::new() }
    }
}

/// How unknown fields are treated (`fieldValidation`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

fn field_validation(query: &Query) -> Result<FieldValidation, ApiError> {
    match query.get("fieldValidation") {
        None | Some("Warn") => Ok(FieldValidation::Warn),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some(other) => Err(ApiError::bad_request(format!(
            "fieldValidation parameter unsupported: {other}, expected Ignore, Warn, or Strict"
        ))),
    }
}

const NAME_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl ApiServer {
    /// A server with the `default`, `kube-system`, `kube-public` and `kube-node-lease` namespaces
    /// and the bootstrap RBAC policy.
    pub fn new(
        sandbox_versions: SandboxVersions,
        clock: Arc<Clock>,
        history: usize,
        fault_seed: u64,
    ) -> anyhow::Result<Self> {
        let server = Self {
            types: crate::resources::served(sandbox_versions),
            store: Store::new(history),
            clock,
            faults: Faults::new(fault_seed),
            log: RequestLog::new(100_000),
            schemas: Schemas::load()?,
            sa_tokens: ServiceAccountTokens::default(),
            reported_minor: AtomicU32::new(crate::discovery::MINOR_VERSION),
            exec: Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT, None)),
            next_ip: AtomicU32::new(10),
        };
        let namespaces = ["default", "kube-system", "kube-public", "kube-node-lease"]
            .map(|ns| ("", "namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})));
        let policy = crate::rbac::bootstrap::policy().into_iter().map(|(plural, obj)| (rbac::GROUP, plural, obj));
        for (group, plural, body) in namespaces.into_iter().chain(policy) {
            let rt = server
                .type_of(group, plural)
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("bootstrap objects need {plural} to be served"))?;
            let query = Query::default();
            let ctx = Ctx { rt: &rt, namespace: None, name: None, subresource: None, query: &query, grants_of: None };
            server.create(&ctx, body.to_string().as_bytes()).map_err(|e| anyhow::anyhow!("bootstrap {body}: {e}"))?;
        }
        server.store.start_watch_cache();
        Ok(server)
    }

    /// The served type for a group and plural (its first, preferred version).
    pub fn type_of(&self, group: &str, plural: &str) -> Option<&ResourceType> {
        self.types.iter().find(|t| t.group == group && t.plural == plural)
    }

    fn alloc_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }

    /// Parses a request body as a JSON object.
    pub fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json: {e}"
            ))
        })?;
        if !v.is_object() {
            return Err(ApiError::bad_request("the body of the request must be a JSON object"));
        }
        Ok(v)
    }

    fn check_kind(ctx: &Ctx<'_>, obj: &mut Value, expect_kind: &str) -> Result<(), ApiError> {
        Self::check_type(obj, &ctx.rt.api_version(), expect_kind)
    }

    /// Checks (or fills in) a body's `apiVersion` and `kind`.
    fn check_type(obj: &mut Value, expected: &str, expect_kind: &str) -> Result<(), ApiError> {
        match obj.get("apiVersion").and_then(Value::as_str) {
            Some(v) if v != expected => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({expected})"
                )));
            }
            Some(_) => {}
            None => obj["apiVersion"] = json!(expected),
        }
        match obj.get("kind").and_then(Value::as_str) {
            Some(k) if k != expect_kind => Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({expect_kind})"
            ))),
            Some(_) => Ok(()),
            None => {
                obj["kind"] = json!(expect_kind);
                Ok(())
            }
        }
    }

    fn check_namespace(ctx: &Ctx<'_>, obj: &mut Value) -> Result<(), ApiError> {
        if !ctx.rt.namespaced {
            if let Some(m) = obj["metadata"].as_object_mut() {
                m.remove("namespace");
            }
            return Ok(());
        }
        match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != ctx.ns() => Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
            _ => {
                obj["metadata"]["namespace"] = json!(ctx.ns());
                Ok(())
            }
        }
    }

    /// Decodes a built-in object through its type and applies `fieldValidation` to what it finds.
    fn decode_findings(ctx: &Ctx<'_>, obj: &Value) -> Result<Findings, ApiError> {
        if ctx.rt.flavor != Flavor::BuiltIn {
            return Ok(Findings::default());
        }
        match typed::decode(ctx.rt.kind, obj) {
            Decoded::Ok { unknown } => Ok(Findings { unknown_fields: unknown }),
            Decoded::Malformed(msg) => Err(ApiError::bad_request(msg)),
        }
    }

    /// Parses and decodes the body of a request for a kind other than the resource's own (a
    /// subresource's, such as TokenRequest), applying `fieldValidation`: the object with its
    /// `apiVersion` and `kind` filled in, and the warnings to send.
    pub fn decode_body_as(
        kind: &str,
        group: &str,
        version: &str,
        body: &[u8],
        query: &Query,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let mode = field_validation(query)?;
        let mut obj = Self::parse_body(body)?;
        let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        Self::check_type(&mut obj, &api_version, kind)?;
        let findings = match typed::decode(kind, &obj) {
            Decoded::Ok { unknown } => Findings { unknown_fields: unknown },
            Decoded::Malformed(msg) => return Err(ApiError::bad_request(msg)),
        };
        let warnings = Self::apply_field_validation(kind, version, mode, &findings)?;
        Ok((obj, warnings))
    }

    fn apply_field_validation(
        kind: &str,
        version: &str,
        mode: FieldValidation,
        findings: &Findings,
    ) -> Result<Vec<String>, ApiError> {
        if findings.unknown_fields.is_empty() || mode == FieldValidation::Ignore {
            return Ok(Vec::new());
        }
        let msgs: Vec<String> = findings.unknown_fields.iter().map(|f| format!("unknown field \"{f}\"")).collect();
        match mode {
            FieldValidation::Strict => Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                msgs.join(", "),
            ))),
            _ => Ok(msgs),
        }
    }

    fn namespace_usable(&self, txn: &Txn<'_>, ns: &str) -> Result<(), ApiError> {
        let Some(obj) = txn.get("namespaces", "", ns) else {
            return Err(ApiError::not_found(Subject {
                group: "",
                resource: "namespaces",
                kind: "Namespace",
                name: ns,
            }));
        };
        if obj.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            )));
        }
        Ok(())
    }

    /// POST: create an object.
    pub fn create(&self, ctx: &Ctx<'_>, body: &[u8]) -> Result<Reply, ApiError> {
        ctx.require_namespace()?;
        let mode = field_validation(ctx.query)?;
        let mut obj = Self::parse_body(body)?;
        Self::check_kind(ctx, &mut obj, ctx.rt.kind)?;
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        Self::check_namespace(ctx, &mut obj)?;
        let mut findings = Self::decode_findings(ctx, &obj)?;
        let uid = uuid::Uuid::new_v4().to_string();
        let now = self.clock.now_rfc3339();
        let dry_run = ctx.query.get("dryRun") == Some("All");
        strategy::prepare_create(ctx.rt, &mut obj, &uid, &now, &mut || self.alloc_ip());
        findings.unknown_fields.extend(strategy::default_and_prune(ctx.rt, &self.schemas, &mut obj).unknown_fields);
        let mut stored = conversion::to_storage(ctx.rt, obj);
        let warnings = Self::apply_field_validation(ctx.rt.kind, ctx.rt.version, mode, &findings)?;
        let generate = stored.pointer("/metadata/generateName").and_then(Value::as_str).map(String::from);
        let storage = ctx.rt.storage;
        let (created, admitted) = self.store.write(|txn| {
            if ctx.rt.namespaced {
                self.namespace_usable(txn, ctx.ns())?;
            }
            let given = stored.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
            if given.is_empty()
                && let Some(prefix) = &generate
            {
                let mut rng = fastrand::Rng::new();
                let name = loop {
                    let suffix: String = (0..5).map(|_| NAME_CHARS[rng.usize(..NAME_CHARS.len())] as char).collect();
                    let candidate = format!("{prefix}{suffix}");
                    if txn.get(storage, ctx.ns(), &candidate).is_none() {
                        break candidate;
                    }
                };
                stored["metadata"]["name"] = json!(name);
            }
            let name = stored.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
            if storage == "pods" {
                admission::limit_ranger::default_pod(&*txn, ctx.ns(), &mut stored);
            }
            let served = conversion::from_storage(ctx.rt, &stored);
            if let Some(user) = ctx.grants_of {
                rbac::escalation::check(&*txn, user, ctx.rt.kind, ctx.ns(), &served, None)?;
            }
            let errors = strategy::validate_create(ctx.rt, &self.schemas, &served);
            if !errors.is_empty() {
                return Err(ApiError::invalid(ctx.subject(&name), &errors));
            }
            if txn.get(storage, ctx.ns(), &name).is_some() {
                return Err(ApiError::already_exists(ctx.subject(&name)));
            }
            if storage == "pods" {
                admission::limit_ranger::check_pod(&*txn, ctx.ns(), &served, &name)?;
            }
            let admitted = admission::pod_security::admit(&*txn, ctx.rt, None, ctx.ns(), &name, &served, None)?;
            admission::quota::admit(txn, &self.types, ctx.rt, ctx.ns(), &name, &served)?;
            if storage == "resourcequotas" {
                stored = admission::quota::with_status(&*txn, &self.types, ctx.ns(), &stored);
            }
            if dry_run {
                return Ok((Arc::new(stored.clone()), admitted));
            }
            let created = txn.put(storage, stored.clone());
            admission::quota::refresh(txn, &self.types, ctx.ns());
            Ok((created, admitted))
        })?;
        let warnings = [warnings, admitted].concat();
        Ok(Reply { code: 201, body: conversion::from_storage(ctx.rt, &created), warnings })
    }

    /// GET of one object.
    pub fn get(&self, ctx: &Ctx<'_>) -> Result<Reply, ApiError> {
        let name = ctx.require_name()?;
        let obj =
            self.store.get(ctx.rt.storage, ctx.ns(), name).ok_or_else(|| ApiError::not_found(ctx.subject(name)))?;
        Ok(Reply::ok(conversion::from_storage(ctx.rt, &obj)))
    }

    /// GET of a collection: selectors, `limit` and `continue`.
    pub fn list(&self, ctx: &Ctx<'_>) -> Result<Reply, ApiError> {
        let filter = Filter::from_query(ctx.rt, ctx.query)?;
        let limit = ctx.query.int("limit")?.filter(|l| *l > 0).map(|l| l as usize);
        let (rv, items) = self.store.list(ctx.rt.storage, ctx.namespace);
        let start = match ctx.query.get("continue") {
            Some(token) => Some(decode_continue(token)?),
            None => None,
        };
        let mut out = Vec::new();
        let mut next = None;
        let mut remaining = 0usize;
        for obj in items.iter() {
            let key = object_key(obj);
            if start.as_ref().is_some_and(|(_, after)| key <= *after) {
                continue;
            }
            if !filter.matches(obj) {
                continue;
            }
            if limit.is_some_and(|l| out.len() >= l) {
                if next.is_none() {
                    next = out.last().map(|o: &Value| object_key(o));
                }
                remaining += 1;
                continue;
            }
            out.push(conversion::from_storage(ctx.rt, obj));
        }
        let list_rv = start.map(|(rv, _)| rv).unwrap_or(rv);
        let mut metadata = json!({"resourceVersion": list_rv.to_string()});
        if let Some(after) = next {
            metadata["continue"] = json!(encode_continue(list_rv, &after));
            metadata["remainingItemCount"] = json!(remaining);
        }
        Ok(Reply::ok(json!({
            "kind": ctx.rt.list_kind(),
            "apiVersion": ctx.rt.api_version(),
            "metadata": metadata,
            "items": out,
        })))
    }

    /// PUT: replace an object (or its status), with optimistic concurrency.
    pub fn update(&self, ctx: &Ctx<'_>, body: &[u8]) -> Result<Reply, ApiError> {
        let name = ctx.require_name()?;
        let mode = field_validation(ctx.query)?;
        let mut obj = Self::parse_body(body)?;
        Self::check_kind(ctx, &mut obj, ctx.rt.kind)?;
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        match obj.pointer("/metadata/name").and_then(Value::as_str) {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            Some(_) => {}
            None => obj["metadata"]["name"] = json!(name),
        }
        Self::check_namespace(ctx, &mut obj)?;
        let findings = Self::decode_findings(ctx, &obj)?;
        let mut warnings = Self::apply_field_validation(ctx.rt.kind, ctx.rt.version, mode, &findings)?;
        let requested_rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(String::from);
        let (reply, more) = self.store.write(|txn| {
            let current =
                txn.get(ctx.rt.storage, ctx.ns(), name).ok_or_else(|| ApiError::not_found(ctx.subject(name)))?;
            match &requested_rv {
                Some(rv) if rv.parse::<u64>().ok() != Some(object_rv(&current)) => {
                    return Err(ApiError::conflict(ctx.subject(name), ApiError::STALE));
                }
                None if !ctx.rt.unconditional_update => {
                    return Err(ApiError::invalid(
                        ctx.subject(name),
                        &[crate::field_error::FieldError::invalid(
                            "metadata.resourceVersion",
                            "0x0",
                            "must be specified for an update",
                        )],
                    ));
                }
                _ => {}
            }
            self.apply_update(txn, ctx, name, obj.clone(), &current, mode)
        })?;
        warnings.extend(more);
        Ok(Reply { code: 200, body: reply, warnings })
    }

    /// The common tail of PUT and PATCH: prepare, convert, default, validate, store.
    /// Runs inside the store's transaction so the read-check-write is atomic.
    fn apply_update(
        &self,
        txn: &mut Txn<'_>,
        ctx: &Ctx<'_>,
        name: &str,
        new: Value,
        current: &Arc<Value>,
        mode: FieldValidation,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let status_update = ctx.subresource == Some("status");
        let mut new = new;
        let findings = strategy::default_and_prune(ctx.rt, &self.schemas, &mut new);
        let mut stored = conversion::to_storage(ctx.rt, new);
        strategy::prepare_update(ctx.rt, status_update, &mut stored, current);
        let mut warnings = Self::apply_field_validation(ctx.rt.kind, ctx.rt.version, mode, &findings)?;
        strategy::bump_generation(ctx.rt, &mut stored, current);
        stored["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        let served_new = conversion::from_storage(ctx.rt, &stored);
        let served_old = conversion::from_storage(ctx.rt, current);
        if let Some(user) = ctx.grants_of {
            rbac::escalation::check(&*txn, user, ctx.rt.kind, ctx.ns(), &served_new, Some(&served_old))?;
        }
        let errors = strategy::validate_update(ctx.rt, &self.schemas, &served_new, &served_old);
        if !errors.is_empty() {
            return Err(ApiError::invalid(ctx.subject(name), &errors));
        }
        let (sub, ns) = (ctx.subresource, ctx.ns());
        warnings.extend(admission::pod_security::admit(&*txn, ctx.rt, sub, ns, name, &served_new, Some(&served_old))?);
        if ctx.query.get("dryRun") == Some("All") || stored == **current {
            return Ok((served_new, warnings));
        }
        // Upstream's `ShouldDeleteDuringUpdate` (generic registry store): an update removes an
        // object that is being deleted only once it has no finalizer left and no grace period
        // pending (none, or 0): a pod within its grace period stays until its kubelet deletes
        // it with grace period 0.
        let deleting = current.pointer("/metadata/deletionTimestamp").is_some();
        let no_grace_left =
            current.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).is_none_or(|g| g == 0);
        let no_finalizers = strategy::string_list(&stored["metadata"]["finalizers"]).is_empty();
        if deleting && no_grace_left && no_finalizers {
            let gone = txn.put(ctx.rt.storage, stored);
            txn.remove(ctx.rt.storage, ctx.ns(), name);
            crate::deletion::after_removal(self, txn, ctx.ns());
            return Ok((conversion::from_storage(ctx.rt, &gone), warnings));
        }
        let saved = txn.put(ctx.rt.storage, stored);
        if matches!(ctx.rt.storage, "pods" | "persistentvolumeclaims" | "resourcequotas") {
            // A pod turning terminal, a claim resized or a quota's hard changed: its usage moves.
            admission::quota::refresh(txn, &self.types, ctx.ns());
        }
        Ok((conversion::from_storage(ctx.rt, &saved), warnings))
    }

    /// PATCH: JSON patch, merge patch or strategic merge patch, applied atomically.
    pub fn patch(&self, ctx: &Ctx<'_>, content_type: &str, body: &[u8]) -> Result<Reply, ApiError> {
        let name = ctx.require_name()?;
        let mode = field_validation(ctx.query)?;
        let kind = patch::PatchKind::from_content_type(content_type, ctx.rt)?;
        let patch_doc: Value =
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        let (reply, warnings) = self.store.write(|txn| {
            let current =
                txn.get(ctx.rt.storage, ctx.ns(), name).ok_or_else(|| ApiError::not_found(ctx.subject(name)))?;
            let served = conversion::from_storage(ctx.rt, &current);
            let mut patched = patch::apply(kind, ctx.rt.kind, &served, &patch_doc)?;
            if !patched.is_object() {
                return Err(ApiError::bad_request("the patch produced something that is not an object"));
            }
            let current_rv = current["metadata"]["resourceVersion"].clone();
            match patched.pointer("/metadata/resourceVersion") {
                Some(Value::String(rv)) if Value::String(rv.clone()) != current_rv => {
                    return Err(ApiError::conflict(ctx.subject(name), ApiError::STALE));
                }
                _ => patched["metadata"]["resourceVersion"] = current_rv,
            }
            if patched.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object does not match the name on the URL ({name})"
                )));
            }
            // As kube-apiserver's common metadata validation: a patch naming another uid is
            // refused (clients use this as a precondition: "patch only this object").
            if let Some(uid) = patched.pointer("/metadata/uid").and_then(Value::as_str).filter(|u| !u.is_empty())
                && Some(uid) != current.pointer("/metadata/uid").and_then(Value::as_str)
            {
                return Err(ApiError::invalid(
                    ctx.subject(name),
                    &[crate::field_error::FieldError::invalid(
                        "metadata.uid",
                        format!("{uid:?}"),
                        "field is immutable",
                    )],
                ));
            }
            Self::check_kind(ctx, &mut patched, ctx.rt.kind)?;
            let findings = Self::decode_findings(ctx, &patched)?;
            let mut warnings = Self::apply_field_validation(ctx.rt.kind, ctx.rt.version, mode, &findings)?;
            let (reply, more) = self.apply_update(txn, ctx, name, patched, &current, mode)?;
            warnings.extend(more);
            Ok((reply, warnings))
        })?;
        Ok(Reply { code: 200, body: reply, warnings })
    }

    /// POST pods/{name}/binding: the scheduler assigns a node.
    pub fn bind(&self, ctx: &Ctx<'_>, body: &[u8]) -> Result<Reply, ApiError> {
        let name = ctx.require_name()?;
        let binding = Self::parse_body(body)?;
        let node = binding.pointer("/target/name").and_then(Value::as_str).unwrap_or_default().to_string();
        if node.is_empty() {
            return Err(ApiError::invalid(
                Subject { group: "", resource: "bindings", kind: "Binding", name },
                &[crate::field_error::FieldError::required("target.name", "")],
            ));
        }
        let now = self.clock.now_rfc3339();
        self.store.write(|txn| {
            let current = txn.get("pods", ctx.ns(), name).ok_or_else(|| ApiError::not_found(ctx.subject(name)))?;
            if let Some(existing) = current.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty())
            {
                return Err(ApiError::conflict(
                    ctx.subject(name),
                    &format!("pod {name} is already assigned to node \"{existing}\""),
                ));
            }
            if current.pointer("/metadata/deletionTimestamp").is_some() {
                return Err(ApiError::conflict(
                    ctx.subject(name),
                    &format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            let mut pod = (*current).clone();
            pod["spec"]["nodeName"] = json!(node);
            let mut conditions: Vec<Value> =
                pod.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            conditions.retain(|c| c["type"] != "PodScheduled");
            conditions.push(
                json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
            );
            pod["status"]["conditions"] = json!(conditions);
            txn.put("pods", pod);
            Ok(())
        })?;
        Ok(Reply {
            code: 201,
            body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            warnings: Vec::new(),
        })
    }
}

/// The label and field selectors of a list or watch.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

/// Field selectors the server supports beyond `metadata.name` and `metadata.namespace`.
fn extra_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "Pod" => &[
            "status.phase",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "Secret" => &["type"],
        "Namespace" => &["status.phase"],
        "Node" => &["spec.unschedulable"],
        "Job" => &["status.successful"],
        "Event" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &[],
    }
}

impl Filter {
    /// Parses `labelSelector` and `fieldSelector`; unsupported fields are a 400 as on a real server.
    pub fn from_query(rt: &ResourceType, query: &Query) -> Result<Self, ApiError> {
        let labels =
            LabelSelector::parse(query.get("labelSelector").unwrap_or_default()).map_err(ApiError::bad_request)?;
        let fields =
            FieldSelector::parse(query.get("fieldSelector").unwrap_or_default()).map_err(ApiError::bad_request)?;
        for f in fields.fields() {
            if !matches!(f, "metadata.name" | "metadata.namespace") && !extra_fields(rt.kind).contains(&f) {
                return Err(ApiError::bad_request(format!("field label not supported: {f}")));
            }
        }
        Ok(Self { labels, fields })
    }

    /// The one name a `metadata.name=` term pins the selection to, if any.
    pub fn exact_name(&self) -> Option<&str> {
        self.fields.exact_name()
    }

    /// A label `key=value` every selected object has, if the label selector requires one.
    pub fn required_label(&self) -> Option<(&str, &str)> {
        self.labels.required_label()
    }

    /// Whether a stored object is selected.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches_json(obj.pointer("/metadata/labels"))
            && self.fields.matches(|field| {
                let path = match field {
                    "status.successful" => "/status/succeeded".to_string(),
                    f => format!("/{}", f.replace('.', "/")),
                };
                obj.pointer(&path).map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            })
    }
}

fn object_key(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default(),
        obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    )
}

fn encode_continue(rv: u64, after: &str) -> String {
    format!("{rv}:{after}").bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(u64, String), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: the token was not issued by this server");
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes: Result<Vec<u8>, _> =
        (0..token.len()).step_by(2).map(|i| u8::from_str_radix(&token[i..i + 2], 16)).collect();
    let text = String::from_utf8(bytes.map_err(|_| bad())?).map_err(|_| bad())?;
    let (rv, after) = text.split_once(':').ok_or_else(bad)?;
    Ok((rv.parse().map_err(|_| bad())?, after.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let t = encode_continue(42, "ns/name");
        assert_eq!(decode_continue(&t).ok(), Some((42, "ns/name".to_string())));
        assert!(decode_continue("zz").is_err());
    }
}
