//! The `kube` import: Kubernetes access for a provider through `kube::Client`, checked by the
//! host before anything is sent: against the operator's [`Policy`] (namespaces, resource types,
//! verbs), against ownership (`crate::ownership`: every object read or written must be this
//! installation's, every delete and patch carries the uid the host checked), and against what
//! a body may reach (`crate::write_guard`). Sending is `crate::kube_transport`.
//!
//! Requests are raw (`Client::send` with URLs from group/version/plural) rather than
//! `Api<DynamicObject>`: the contract moves JSON text both ways, so a typed round trip would
//! only cost a discovery request per resource type (to learn the kind) and re-encode bodies
//! through `ObjectMeta` (dropping or reformatting fields the guest may compare). Raw responses
//! also keep the `Retry-After` header, which `kube`'s typed errors drop.
//!

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderValue, Method};
use serde_json::{Value, json};

use crate::bindings::kube::{DeleteOptions, KubeError, ListOptions, PatchType, ResourceType, WatchEvent, WatchOptions};
use crate::created_objects::{CreatedObject, CreatedObjects};
use crate::discovery_cache::DiscoveryCache;
use crate::kube_transport::{JSON, delete_body, parse, request};
use crate::kube_url;
use crate::kube_watch::WatchStream;
use crate::lease_scope::{self, LeaseScope};
use crate::limits::Limits;
use crate::metrics::HostMetrics;
use crate::ownership::{self, CallMemory, KindCache, Owner};
use crate::policy::{Access, AccessVerb, Policy, quoted};
use crate::proven_pods::ProvenPods;

/// Policy- and ownership-checked Kubernetes access; cheap to clone. [`KubeHost::for_call`]
/// gives each call its own memory of what it was shown.
#[derive(Clone)]
pub struct KubeHost {
    /// `None` for a host loaded without a cluster (`describe`, `policy show`): every call is
    /// then `unavailable`.
    pub(crate) client: Option<kube::Client>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) request_timeout: Duration,
    /// When the host ends the call this access serves: no request may outlive it.
    pub(crate) call_deadline: Option<Instant>,
    pub(crate) kinds: KindCache,
    /// Served versions per API group, shared by all calls ([`crate::discovery_cache`]).
    pub(crate) discovery: DiscoveryCache,
    pub(crate) memory: CallMemory,
    /// What the host proved about the pods it exec'd in, shared by all calls
    /// ([`crate::proven_pods`]).
    pub(crate) proven_pods: ProvenPods,
    /// The lease a call on a stored lease is limited to ([`crate::lease_scope`]).
    pub(crate) scope: Option<Arc<LeaseScope>>,
    /// Largest create or patch body sent for the provider (limits `max-body-bytes`).
    max_body_bytes: usize,
    /// Bytes kept of each stream of an exec (limits `max-exec-output-bytes`).
    pub(crate) max_exec_output: usize,
    /// Where each create is recorded as it is sent, when a caller asked
    /// ([`crate::created_objects`]).
    pub(crate) created: Option<CreatedObjects>,
    /// The API server's URL, for messages about a request that got no answer; `None` when the
    /// client came without one.
    pub(crate) server: Option<Arc<str>>,
    /// Where policy denials are counted, when the host keeps metrics ([`crate::metrics`]).
    pub(crate) metrics: Option<Arc<HostMetrics>>,
}

/// What one request is about, for the policy, messages and log lines.
pub(crate) struct Target<'a> {
    pub(crate) verb: AccessVerb,
    pub(crate) rt: &'a ResourceType,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
    pub(crate) subresource: Option<&'a str>,
}

impl Target<'_> {
    pub(crate) fn describe(&self) -> String {
        let mut out = format!("{} {}", self.verb, qualified(self.rt));
        if let Some(ns) = self.namespace {
            out.push_str(&format!(" in {}", quoted(ns)));
        }
        if let Some(name) = self.name {
            out.push_str(&format!(" {}", quoted(name)));
        }
        if let Some(sub) = self.subresource {
            out.push_str(&format!(" /{}", quoted(sub)));
        }
        out
    }

    /// The same object, read by the host itself (ownership checks before a write).
    fn read(&self) -> Target<'_> {
        Target { verb: AccessVerb::Get, subresource: None, ..*self }
    }
}

pub(crate) fn qualified(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        format!("{}/{}", rt.version, rt.plural)
    } else {
        format!("{}/{}/{}", rt.group, rt.version, rt.plural)
    }
}

/// Namespace objects are checked by name against the policy, not by ownership: the operator
/// allowed them by name, and nobody labels a namespace for a provider.
fn is_namespace_type(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "namespaces"
}

/// Objects per page when the host pages a list.
const LIST_PAGE: u32 = 500;

/// Most objects one list hands a provider; a provider needing more is listing too widely.
const MAX_LISTED: usize = 10_000;

impl KubeHost {
    /// Access through `client`, limited by `policy`, each request bounded by `request_timeout`.
    pub fn new(client: kube::Client, policy: Arc<Policy>, request_timeout: Duration) -> Self {
        Self::with_client(Some(client), policy, request_timeout)
    }

    /// Access through `client`, or none: every call is then `unavailable`.
    pub(crate) fn with_client(client: Option<kube::Client>, policy: Arc<Policy>, request_timeout: Duration) -> Self {
        Self {
            client,
            policy,
            request_timeout,
            call_deadline: None,
            kinds: KindCache::default(),
            discovery: DiscoveryCache::default(),
            memory: CallMemory::default(),
            proven_pods: ProvenPods::default(),
            scope: None,
            max_body_bytes: Limits::default().max_body_bytes_usize(),
            max_exec_output: Limits::default().max_exec_output_usize(),
            created: None,
            server: None,
            metrics: None,
        }
    }

    /// The same access sending create and patch bodies of at most `limits.max_body_bytes`, and
    /// keeping at most `limits.max_exec_output_bytes` of each stream of an exec.
    pub fn with_body_limit(self, limits: &Limits) -> Self {
        Self { max_body_bytes: limits.max_body_bytes_usize(), max_exec_output: limits.max_exec_output_usize(), ..self }
    }

    /// The same access for one call that the host ends at `deadline`: a fresh memory of what
    /// was shown, and requests cut off early enough for the provider to hear of it.
    pub fn for_call(&self, deadline: Instant) -> Self {
        Self { memory: CallMemory::default(), call_deadline: Some(deadline), ..self.clone() }
    }

    /// The same access limited to one lease's workload, for a call on a stored lease.
    pub fn scoped(self, scope: Option<LeaseScope>) -> Self {
        Self { scope: scope.map(Arc::new), ..self }
    }

    /// The same client and caches under another policy (the effective one, once the provider's
    /// declaration is known).
    pub(crate) fn with_policy(&self, policy: Policy) -> Self {
        Self { policy: Arc::new(policy), ..self.clone() }
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether the policy lets the provider work in `namespace` (no request is sent).
    pub fn check_namespace(&self, namespace: &str) -> Result<(), String> {
        self.policy.check_namespace(namespace).map_err(|d| d.0)
    }

    /// Reads one object the installation owns (or a dependent of one); returns its JSON.
    pub async fn get(&self, rt: &ResourceType, namespace: Option<&str>, name: &str) -> Result<String, KubeError> {
        let target = Target { verb: AccessVerb::Get, rt, namespace, name: Some(name), subresource: None };
        self.allow(&target)?;
        let url = kube_url::object(rt, namespace, name, None)?;
        let text = self.text(&target, request(Method::GET, url, None, Vec::new())?).await?;
        if is_namespace_type(rt) {
            return Ok(text);
        }
        let object = parse(&target, &text)?;
        self.require_visible(&target, &object).await?;
        Ok(text)
    }

    /// Creates an object from JSON, stamped with the owner id; returns it.
    pub async fn create(&self, rt: &ResourceType, namespace: Option<&str>, body: &str) -> Result<String, KubeError> {
        let target = Target { verb: AccessVerb::Create, rt, namespace, name: None, subresource: None };
        self.allow(&target)?;
        self.check_body_size(&target, body)?;
        let object: Value = serde_json::from_str(body)
            .map_err(|e| KubeError::Invalid(format!("the request body is not valid JSON: {e}")))?;
        self.check_create(rt, namespace, &object).await?;
        let labelled = self.policy.stamp_created(rt, namespace, object).map_err(KubeError::Invalid)?;
        let url = kube_url::with_query(
            kube_url::collection(rt, namespace)?,
            [("fieldManager", Some(self.policy.owner_id.as_str()))],
        );
        let named = serde_json::from_str::<Value>(&labelled)
            .ok()
            .as_ref()
            .and_then(contract::k8s::object::name)
            .map(str::to_string);
        if let (Some(log), Some(name)) = (&self.created, &named) {
            log.record(CreatedObject {
                group: rt.group.clone(),
                plural: rt.plural.clone(),
                namespace: namespace.map(str::to_string),
                name: name.clone(),
            });
        }
        let created = self.text(&target, request(Method::POST, url, Some(JSON), labelled.into_bytes())?).await?;
        // What this call created is owned: an ownerReference to it later in the call (the lease's
        // Secret to its workload) needs no read to prove it.
        if let Some(uid) = serde_json::from_str::<Value>(&created).ok().as_ref().and_then(ownership::uid) {
            self.memory.remember_owner(uid, true);
        }
        Ok(created)
    }

    /// Patches an owned object (or its `status`), guarded by the uid the host just read.
    pub async fn patch(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &str,
        subresource: Option<&str>,
    ) -> Result<String, KubeError> {
        let target = Target { verb: AccessVerb::Patch, rt, namespace, name: Some(name), subresource };
        self.allow(&target)?;
        self.check_body_size(&target, body)?;
        let patch: Value =
            serde_json::from_str(body).map_err(|e| KubeError::Invalid(format!("the patch is not valid JSON: {e}")))?;
        ownership::check_patch_keeps_owner(
            patch_type,
            &patch,
            &self.policy.owner_id,
            self.policy.ownership_keys.is_some(),
        )
        .map_err(|why| self.deny(&target, why))?;
        crate::write_guard::check_patch(patch_type, &patch).map_err(|why| self.deny(&target, why))?;
        let current = self.read_for_write(&target).await?;
        let uid = object_uid(&target, &current)?;
        let guarded = ownership::guard_patch(patch_type, patch, uid).map_err(KubeError::Conflict)?;
        let content_type = match patch_type {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
        };
        let url = kube_url::with_query(
            kube_url::object(rt, namespace, name, subresource)?,
            [("fieldManager", Some(self.policy.owner_id.as_str()))],
        );
        let body = guarded.to_string().into_bytes();
        self.text(&target, request(Method::PATCH, url, Some(content_type), body)?).await
    }

    /// Deletes an owned object, with the uid the host just read as a precondition.
    pub async fn delete(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), KubeError> {
        let target = Target { verb: AccessVerb::Delete, rt, namespace, name: Some(name), subresource: None };
        self.allow(&target)?;
        let current = self.read_for_write(&target).await?;
        let uid = object_uid(&target, &current)?;
        if let Some(given) = options.precondition_uid.as_deref().filter(|given| *given != uid) {
            return Err(KubeError::Conflict(format!(
                "the UID in the precondition ({}) does not match the UID in record ({uid}): the object was deleted and then recreated under the same name",
                quoted(given)
            )));
        }
        let options = DeleteOptions { precondition_uid: Some(uid.to_string()), ..options.clone() };
        let url = kube_url::object(rt, namespace, name, None)?;
        let body = delete_body(&options);
        self.text(&target, request(Method::DELETE, url, Some(JSON), body.into_bytes())?).await.map(drop)
    }

    /// Lists objects; returns one List JSON holding only what the installation owns and its
    /// dependents (namespace objects: only allowed namespaces), with the `resourceVersion` to
    /// watch from. The host pages through the cluster itself and hands the provider no
    /// `continue` token and no count: a page boundary or a count would reveal foreign objects
    /// (a real API server's token names the last key it scanned). `limit` is therefore not
    /// passed on, and a `continue` token is refused.
    pub async fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<String, KubeError> {
        let target = Target { verb: AccessVerb::List, rt, namespace, name: None, subresource: None };
        self.allow(&target)?;
        if options.continue_token.is_some() {
            return Err(KubeError::Invalid(
                "the host pages lists itself and hands out no continue tokens; list again without one".to_string(),
            ));
        }
        let mut kept = Vec::new();
        let mut first: Option<Value> = None;
        let mut token: Option<String> = None;
        let mut hidden = 0usize;
        loop {
            let page_size = LIST_PAGE.to_string();
            let url = kube_url::with_query(
                kube_url::collection(rt, namespace)?,
                [
                    ("labelSelector", options.label_selector.as_deref()),
                    ("fieldSelector", options.field_selector.as_deref()),
                    ("limit", Some(page_size.as_str())),
                    ("continue", token.as_deref()),
                    ("resourceVersion", if token.is_none() { options.resource_version.as_deref() } else { None }),
                ],
            );
            let mut page = match self.text(&target, request(Method::GET, url, None, Vec::new())?).await {
                Ok(text) => parse(&target, &text)?,
                // The continue token expired between pages: the list starts over.
                Err(KubeError::Gone(_)) if token.is_some() => {
                    (kept, first, token, hidden) = (Vec::new(), None, None, 0);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let items = page.get_mut("items").and_then(Value::as_array_mut).map(std::mem::take).unwrap_or_default();
            for item in items {
                if self.visible(rt, &item).await? {
                    self.memory.show(&item);
                    kept.push(item);
                } else {
                    hidden += 1;
                }
            }
            if kept.len() > MAX_LISTED {
                return Err(KubeError::Invalid(format!(
                    "{}: more than {MAX_LISTED} objects match; narrow the label or field selector",
                    target.describe()
                )));
            }
            token = page
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            first.get_or_insert(page);
            if token.is_none() {
                break;
            }
        }
        if hidden > 0 {
            tracing::debug!(target: "provider_host::ownership", call = %target.describe(), hidden,
                "list items hidden: not this installation's");
        }
        let mut list = first.unwrap_or_else(|| json!({}));
        list["items"] = Value::Array(kept);
        if let Some(meta) = list.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("continue");
            meta.remove("remainingItemCount");
        }
        Ok(list.to_string())
    }

    /// Whether the provider may see `object` of type `rt`: an allowed namespace (for namespace
    /// objects), or an object of the installation or a dependent of one.
    async fn visible(&self, rt: &ResourceType, object: &Value) -> Result<bool, KubeError> {
        if is_namespace_type(rt) {
            let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            return Ok(self.policy.allows_namespace(name));
        }
        if self.out_of_scope(rt, object).is_some() {
            return Ok(false);
        }
        Ok(self.ownership(rt, object).await?.allowed())
    }

    /// Why `object` is not the scoped lease's ([`crate::lease_scope`]); `None` when it may be.
    fn out_of_scope(&self, rt: &ResourceType, object: &Value) -> Option<String> {
        self.scope.as_ref()?.outside(rt, object)
    }

    /// Refuses an object outside the lease's scope, whoever owns it.
    pub(crate) fn require_in_scope(&self, target: &Target<'_>, object: &Value) -> Result<(), KubeError> {
        match self.out_of_scope(target.rt, object) {
            Some(why) => Err(self.not_the_leases(target, why)),
            None => Ok(()),
        }
    }

    /// A refusal for an object outside the lease's scope: the reason goes to the operator's
    /// log, the provider learns that the object is not its lease's.
    fn not_the_leases(&self, target: &Target<'_>, why: String) -> KubeError {
        tracing::warn!(target: "provider_host::ownership", call = %target.describe(), reason = %why,
            "kube call refused: not the object the lease was made for");
        KubeError::NotOwned(format!("host refuses {}: {}", target.describe(), lease_scope::NOT_THE_LEASES))
    }

    /// Opens a watch; events are read with [`KubeHost::next_event`], which hides foreign objects.
    pub async fn watch(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<WatchStream, KubeError> {
        let target = Target { verb: AccessVerb::Watch, rt, namespace, name: None, subresource: None };
        self.allow(&target)?;
        let timeout = options.timeout_seconds.map(|t| t.to_string());
        let url = kube_url::with_query(
            kube_url::collection(rt, namespace)?,
            [
                ("watch", Some("true")),
                ("labelSelector", options.label_selector.as_deref()),
                ("fieldSelector", options.field_selector.as_deref()),
                ("resourceVersion", options.resource_version.as_deref()),
                ("timeoutSeconds", timeout.as_deref()),
                ("allowWatchBookmarks", options.allow_bookmarks.then_some("true")),
            ],
        );
        let mut req = request(Method::GET, url, None, Vec::new())?;
        req.headers_mut().insert(http::header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        let body = self.open(&target, req).await?;
        Ok(WatchStream::new(body, target.describe(), rt.clone()))
    }

    /// The next event of a watch the provider may see, waiting at most `timeout` in all: events
    /// of foreign objects are skipped, and the deletion of an object the provider was shown in
    /// this call is always passed on (its owner may be gone by then).
    pub async fn next_event(
        &self,
        stream: &mut WatchStream,
        timeout: Duration,
    ) -> Result<Option<WatchEvent>, KubeError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(event) = stream.next(left).await? else {
                return Ok(None);
            };
            let (text, deleted) = match &event {
                WatchEvent::Bookmark(_) => return Ok(Some(event)),
                WatchEvent::Added(t) | WatchEvent::Modified(t) => (t, false),
                WatchEvent::Deleted(t) => (t, true),
            };
            let object: Value = serde_json::from_str(text).map_err(|e| {
                KubeError::Transport(format!("{}: unreadable watch event ({e}); resume the watch", stream.what()))
            })?;
            let shown_before = deleted && ownership::uid(&object).is_some_and(|u| self.memory.shown(u));
            if shown_before || self.visible(stream.resource(), &object).await? {
                self.memory.show(&object);
                return Ok(Some(event));
            }
            tracing::debug!(target: "provider_host::ownership", watch = %stream.what(),
                "watch event hidden: not this installation's");
            if left.is_zero() {
                return Ok(None);
            }
        }
    }

    /// The versions of an API group, preferred first; empty when the group is not served.
    /// Answered from the host's cache for a while ([`crate::discovery_cache`]).
    pub async fn served_versions(&self, group: &str) -> Result<Vec<String>, KubeError> {
        if let Err(denial) = self.policy.check_discovery(group) {
            tracing::warn!(target: "provider_host::policy", verb = "discovery", group = %quoted(group),
                reason = %denial, "kube call denied by host policy");
            if let Some(metrics) = &self.metrics {
                metrics.denied("discovery");
            }
            return Err(KubeError::Denied(denial.0));
        }
        if let Some(versions) = self.discovery.get(group, Instant::now()) {
            return Ok(versions);
        }
        let asked = Instant::now();
        let url = kube_url::group_discovery(group)?;
        let what = format!("discovery of API group {}", quoted(group));
        let versions = match self.discovery(&what, url).await? {
            Some(text) => {
                let doc: Value = serde_json::from_str(&text)
                    .map_err(|e| KubeError::Transport(format!("{what}: the answer is not JSON: {e}")))?;
                versions_of(group, &doc)
            }
            None => Vec::new(),
        };
        self.discovery.put(group, versions.clone(), asked);
        Ok(versions)
    }

    pub(crate) fn allow(&self, target: &Target<'_>) -> Result<(), KubeError> {
        let access = Access {
            verb: target.verb,
            group: &target.rt.group,
            version: &target.rt.version,
            plural: &target.rt.plural,
            namespace: target.namespace,
            name: target.name,
            subresource: target.subresource,
        };
        self.policy.check(&access).map_err(|denial| {
            tracing::warn!(
                target: "provider_host::policy",
                verb = %target.verb,
                resource = %qualified(target.rt),
                namespace = %target.namespace.map(|n| quoted(n).to_string()).unwrap_or_default(),
                name = %target.name.map(|n| quoted(n).to_string()).unwrap_or_default(),
                reason = %denial,
                "kube call denied by host policy"
            );
            if let Some(metrics) = &self.metrics {
                metrics.denied(target.verb.as_str());
            }
            KubeError::Denied(denial.0)
        })
    }

    /// Reads an object as the host (for its own checks, not the provider's): `None` on 404.
    pub(crate) async fn read_as_host(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, KubeError> {
        let target = Target { verb: AccessVerb::Get, rt, namespace, name: Some(name), subresource: None };
        let url = kube_url::object(rt, namespace, name, None)?;
        match self.text(&target, request(Method::GET, url, None, Vec::new())?).await {
            Ok(text) => parse(&target, &text).map(Some),
            Err(KubeError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A refusal for an object that is not the installation's: the reason goes to the
    /// operator's log, the provider learns only that it is not its.
    fn not_owned(&self, target: &Target<'_>, why: String) -> KubeError {
        tracing::warn!(target: "provider_host::ownership", call = %target.describe(), reason = %why,
            "kube call refused: not this installation's object");
        KubeError::NotOwned(format!("host refuses {}: {}", target.describe(), ownership::NOT_OWNED))
    }

    /// Refuses a body over `max-body-bytes` before it is parsed: the API server would refuse
    /// it anyway, and parsing, labelling and sending it would hold several copies in the host.
    fn check_body_size(&self, target: &Target<'_>, body: &str) -> Result<(), KubeError> {
        if body.len() <= self.max_body_bytes {
            return Ok(());
        }
        Err(self.deny(
            target,
            format!(
                "the body is {} bytes and the host sends at most {} (limits max-body-bytes; kube-apiserver refuses \
                 request bodies over 3 MiB too)",
                body.len(),
                self.max_body_bytes
            ),
        ))
    }

    /// A refusal of a request the policy would allow but the host will not send as asked.
    fn deny(&self, target: &Target<'_>, why: String) -> KubeError {
        tracing::warn!(target: "provider_host::policy", call = %target.describe(), reason = %why,
            "kube call denied by the host");
        KubeError::Denied(format!("host denies {}: {why}", target.describe()))
    }

    /// Fails unless the provider may see `object`; remembers that it saw it.
    pub(crate) async fn require_visible(&self, target: &Target<'_>, object: &Value) -> Result<(), KubeError> {
        self.require_in_scope(target, object)?;
        match self.ownership(target.rt, object).await? {
            Owner::Foreign(why) => Err(self.not_owned(target, why)),
            Owner::Owned | Owner::Dependent => {
                self.memory.show(object);
                Ok(())
            }
        }
    }

    /// Reads the target of a patch or delete as the host and proves it is the installation's.
    async fn read_for_write(&self, target: &Target<'_>) -> Result<Value, KubeError> {
        let read = target.read();
        let name = target.name.unwrap_or_default();
        let url = kube_url::object(target.rt, target.namespace, name, None)?;
        let text = self.text(&read, request(Method::GET, url, None, Vec::new())?).await?;
        let object = parse(&read, &text)?;
        if let Some(why) = self.out_of_scope(target.rt, &object) {
            return Err(self.not_the_leases(target, why));
        }
        match self.ownership(target.rt, &object).await? {
            Owner::Foreign(why) => Err(self.not_owned(target, why)),
            Owner::Owned | Owner::Dependent => Ok(object),
        }
    }
}

fn object_uid<'v>(target: &Target<'_>, object: &'v Value) -> Result<&'v str, KubeError> {
    ownership::uid(object).ok_or_else(|| {
        KubeError::Transport(format!("{}: the API server returned an object without a uid", target.describe()))
    })
}

/// Versions from `/api` (APIVersions) or `/apis/{group}` (APIGroup), preferred first.
fn versions_of(group: &str, doc: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if group.is_empty() {
        out.extend(doc["versions"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string));
        return out;
    }
    if let Some(preferred) = doc["preferredVersion"]["version"].as_str() {
        out.push(preferred.to_string());
    }
    for version in doc["versions"].as_array().into_iter().flatten().filter_map(|v| v["version"].as_str()) {
        if !out.iter().any(|o| o == version) {
            out.push(version.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions_put_the_preferred_one_first() {
        let doc = json!({"kind": "APIGroup", "name": "g", "versions": [{"version": "v1alpha1"}, {"version": "v1beta1"}],
            "preferredVersion": {"version": "v1beta1"}});
        assert_eq!(versions_of("g", &doc), vec!["v1beta1", "v1alpha1"]);
        assert_eq!(versions_of("", &json!({"kind": "APIVersions", "versions": ["v1"]})), vec!["v1"]);
    }
}
