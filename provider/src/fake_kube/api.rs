//! The fake's side of the [`Kube`] trait: each call recorded, its faults applied, then served
//! from the store as the API server would; watches from a resourceVersion over the event history.

use std::collections::VecDeque;

use contract::k8s::pod_container::ContainerNames;
use serde_json::json;

use super::store::{base64, fields_match, labels_match, merge, not_found};
use super::*;
use crate::clock::Clock;
use crate::kube_api::{
    DeleteOptions, ExecOutput, Kube, ListOptions, PatchType, Propagation, Watch, WatchEvent, WatchOptions,
};

impl Kube for FakeKube {
    type Watch = FakeWatch;

    fn get(&self, resource: &ResourceType, namespace: Option<&str>, name: &str) -> Result<Value, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::Get, &resource.plural, Some(name))?;
        s.check_served(resource)?;
        let k = key(&resource.group, &resource.plural, namespace, name);
        s.objects.get(&k).map(|o| State::present(resource, o)).ok_or_else(|| not_found(&resource.plural, name))
    }

    fn create(&self, resource: &ResourceType, namespace: Option<&str>, body: &Value) -> Result<Value, KubeError> {
        let mut s = self.state.borrow_mut();
        let name = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        s.record(Verb::Create, &resource.plural, Some(&name))?;
        s.check_served(resource)?;
        if name.is_empty() {
            return Err(KubeError::Invalid("metadata.name: Required value".to_string()));
        }
        if let Some(ns) = namespace
            && !s.objects.contains_key(&key("", "namespaces", None, ns))
        {
            return Err(KubeError::NotFound(format!("namespaces \"{ns}\" not found")));
        }
        let k = key(&resource.group, &resource.plural, namespace, &name);
        if s.objects.contains_key(&k) {
            return Err(KubeError::AlreadyExists(format!("{} \"{name}\" already exists", resource.plural)));
        }
        let stored = s.insert_new(&k, body.clone());
        s.fault(Verb::Create, &resource.plural, true)?;
        Ok(State::present(resource, &stored))
    }

    fn patch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &Value,
        subresource: Option<&str>,
    ) -> Result<Value, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::Patch, &resource.plural, Some(name))?;
        s.check_served(resource)?;
        if patch_type != PatchType::Merge {
            return Err(KubeError::Invalid("the fake API server supports merge patches only".to_string()));
        }
        let k = key(&resource.group, &resource.plural, namespace, name);
        let before = s.objects.get(&k).cloned().ok_or_else(|| not_found(&resource.plural, name))?;
        if let Some(rv) = body.pointer("/metadata/resourceVersion")
            && Some(rv) != before.pointer("/metadata/resourceVersion")
        {
            return Err(KubeError::Conflict("the object has been modified".to_string()));
        }
        let mut after = before.clone();
        if subresource == Some("status") {
            merge(&mut after["status"], body.get("status").unwrap_or(&Value::Null));
        } else {
            let mut body = body.clone();
            if let Some(o) = body.as_object_mut() {
                o.remove("status");
            }
            merge(&mut after, &body);
            after["metadata"] = before["metadata"].clone();
            if let Some(meta) = body.get("metadata") {
                for field in ["labels", "annotations", "ownerReferences", "finalizers"] {
                    if let Some(v) = meta.get(field) {
                        merge(&mut after["metadata"][field], v);
                    }
                }
            }
            if let Some(data) = after.get("stringData").and_then(Value::as_object).cloned() {
                for (key, v) in data {
                    after["data"][key] = json!(base64(v.as_str().unwrap_or("").as_bytes()));
                }
                if let Some(o) = after.as_object_mut() {
                    o.remove("stringData");
                }
            }
            if after.get("spec") != before.get("spec") {
                let generation = before.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                after["metadata"]["generation"] = json!(generation + 1);
            }
        }
        let stored = s.update(&k, after);
        s.react_patched(&k, &before);
        Ok(State::present(resource, &stored))
    }

    fn delete(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::Delete, &resource.plural, Some(name))?;
        s.check_served(resource)?;
        let k = key(&resource.group, &resource.plural, namespace, name);
        let current = s.objects.get(&k).cloned().ok_or_else(|| not_found(&resource.plural, name))?;
        if let Some(uid) = &options.precondition_uid
            && current.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str())
        {
            return Err(KubeError::Conflict(format!("Precondition failed: UID in precondition: {uid}")));
        }
        if let Some(rv) = &options.precondition_resource_version
            && current.pointer("/metadata/resourceVersion").and_then(Value::as_str) != Some(rv.as_str())
        {
            return Err(KubeError::Conflict("Precondition failed: resourceVersion".to_string()));
        }
        let has_finalizers =
            current.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if current.pointer("/metadata/deletionTimestamp").is_none() {
                let mut marked = current;
                marked["metadata"]["deletionTimestamp"] = json!(s.now_rfc3339());
                s.update(&k, marked);
            }
            return Ok(());
        }
        s.remove(&k, options.propagation != Some(Propagation::Orphan));
        Ok(())
    }

    fn list(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<Value, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::List, &resource.plural, None)?;
        s.check_served(resource)?;
        let matching: Vec<Value> = s
            .objects
            .iter()
            .filter(|(k, _)| k.0 == resource.group && k.1 == resource.plural && namespace.is_none_or(|ns| k.2 == ns))
            .map(|(_, o)| o)
            .filter(|o| labels_match(o, options.label_selector.as_deref()))
            .filter(|o| fields_match(o, options.field_selector.as_deref()))
            .map(|o| State::present(resource, o))
            .collect();
        let start: usize = options.continue_token.as_deref().and_then(|t| t.parse().ok()).unwrap_or(0);
        let limit = options.limit.map_or(usize::MAX, |l| l as usize);
        let page: Vec<Value> = matching.iter().skip(start).take(limit).cloned().collect();
        let mut metadata = json!({"resourceVersion": s.rv.to_string()});
        if start + page.len() < matching.len() {
            metadata["continue"] = json!((start + page.len()).to_string());
        }
        Ok(json!({"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": page}))
    }

    fn watch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<FakeWatch, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::Watch, &resource.plural, None)?;
        s.check_served(resource)?;
        let mut initial = VecDeque::new();
        let cursor = match options.resource_version.as_deref() {
            Some(rv) => {
                let rv: u64 = rv.parse().map_err(|_| KubeError::Invalid(format!("resourceVersion {rv:?}")))?;
                if rv < s.compacted {
                    return Err(KubeError::Gone("too old resource version".to_string()));
                }
                rv
            }
            None => {
                for (k, o) in &s.objects {
                    if k.0 == resource.group
                        && k.1 == resource.plural
                        && namespace.is_none_or(|ns| k.2 == ns)
                        && labels_match(o, options.label_selector.as_deref())
                        && fields_match(o, options.field_selector.as_deref())
                    {
                        initial.push_back(State::present(resource, o));
                    }
                }
                s.rv
            }
        };
        Ok(FakeWatch {
            state: Rc::clone(&self.state),
            resource: resource.clone(),
            namespace: namespace.map(str::to_string),
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            cursor,
            initial,
        })
    }

    fn served_versions(&self, group: &str) -> Result<Vec<String>, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::ServedVersions, group, None)?;
        Ok(s.served.get(group).cloned().unwrap_or_default())
    }

    fn exec(&self, namespace: &str, pod: &str, options: &ExecOptions) -> Result<ExecOutput, KubeError> {
        let clock = {
            let mut s = self.state.borrow_mut();
            s.record(Verb::Exec, "pods", Some(pod))?;
            s.execs.push(options.clone());
            let found = s.objects.get(&key("", "pods", Some(namespace), pod)).ok_or_else(|| not_found("pods", pod))?;
            // As `pods/exec` refuses an unknown container, or none in a pod with several.
            ContainerNames::of(found).addressed(pod, options.container.as_deref()).map_err(KubeError::Invalid)?;
            s.clock.clone()
        };
        // The fake clock moves by the time the process really ran, as a cluster's would.
        let started = std::time::Instant::now();
        let output = crate::fake_exec::run(options);
        clock.advance(started.elapsed());
        output
    }

    fn check_namespace(&self, namespace: &str) -> Result<(), String> {
        match &self.state.borrow().allowed_namespaces {
            Some(allowed) if !allowed.iter().any(|n| n == namespace) => {
                Err(format!("the host's policy does not allow namespace {namespace:?} (allowed: {allowed:?})"))
            }
            _ => Ok(()),
        }
    }
}

/// An open watch on the fake.
pub struct FakeWatch {
    state: Rc<RefCell<State>>,
    resource: ResourceType,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    cursor: u64,
    initial: VecDeque<Value>,
}

impl Watch for FakeWatch {
    fn next(&mut self, timeout: Duration) -> Result<Option<WatchEvent>, KubeError> {
        let mut s = self.state.borrow_mut();
        s.record(Verb::WatchNext, &self.resource.plural, None)?;
        let until = s.clock.monotonic() + timeout;
        loop {
            s.run_due();
            if s.lost() {
                return Err(KubeError::Transport("connection reset by peer".to_string()));
            }
            if let Some(object) = self.initial.pop_front() {
                return Ok(Some(WatchEvent::Added(object)));
            }
            let found = s.history.iter().find(|e| {
                e.rv > self.cursor
                    && e.group == self.resource.group
                    && e.plural == self.resource.plural
                    && self.namespace.as_deref().is_none_or(|ns| e.namespace == ns)
                    && labels_match(&e.object, self.label_selector.as_deref())
                    && fields_match(&e.object, self.field_selector.as_deref())
            });
            if let Some(event) = found {
                self.cursor = event.rv;
                let object = State::present(&self.resource, &event.object);
                return Ok(Some(match event.kind {
                    EventKind::Added => WatchEvent::Added(object),
                    EventKind::Modified => WatchEvent::Modified(object),
                    EventKind::Deleted => WatchEvent::Deleted(object),
                }));
            }
            match s.next_timer_at().into_iter().chain(s.lost_at).min() {
                Some(at) if at <= until => s.clock.advance_to(at),
                _ => {
                    s.clock.advance_to(until);
                    return Ok(None);
                }
            }
        }
    }
}
