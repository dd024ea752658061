//! The provider's logic compiled natively, over the same host transport the component uses
//! (`KubeHost`: policy, ownership checks, the same `kube::Client`): what a call would cost
//! without WebAssembly, so the table can give the ratio WASM / native per operation.
//!
//! The provider is synchronous (WIT imports block the guest), so a native call runs on a
//! blocking thread and each `kube` request is driven to completion on the runtime, as the
//! component's fiber is suspended while the host serves its import.
//!
//! A call's time splits three ways ([`Spent`]): the host serving its requests, parsing the
//! host's answers (`response_body::parse`, the code the guest runs on them), and the rest of the
//! provider's logic. The first is the same work for the component; the other two are what the
//! component runs as WebAssembly.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use provider::SystemClock;
use provider::kube_api::{self, DeleteOptions, Kube, KubeError, ListOptions, PatchType, WatchOptions};
use provider::log::NoLog;
use provider::response_body;
use provider_host::bindings::kube as wit;
use provider_host::{KubeHost, WatchStream};
use serde_json::Value;
use tokio::runtime::Handle;

/// Where a native provider's time went besides its own logic, summed over its calls: the host
/// serving its requests, and parsing the host's answers.
#[derive(Debug, Default)]
pub struct Spent {
    serving_nanos: AtomicU64,
    parsing_nanos: AtomicU64,
}

impl Spent {
    /// The host's time serving requests (each one driven to completion on the runtime).
    pub fn serving(&self) -> Duration {
        Duration::from_nanos(self.serving_nanos.load(Ordering::Relaxed))
    }

    /// The time parsing the host's answers into what the provider reads.
    pub fn parsing(&self) -> Duration {
        Duration::from_nanos(self.parsing_nanos.load(Ordering::Relaxed))
    }

    fn add(counter: &AtomicU64, since: Instant) {
        counter.fetch_add(u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// The runtime a native call's requests are driven on, and where their time is counted.
#[derive(Clone)]
struct Driver {
    runtime: Handle,
    spent: Arc<Spent>,
}

impl Driver {
    /// Drives one request of the host to completion, counting it as serving.
    fn serve<T>(&self, request: impl std::future::Future<Output = T>) -> T {
        let started = Instant::now();
        let out = self.runtime.block_on(request);
        Spent::add(&self.spent.serving_nanos, started);
        out
    }

    /// Parses an answer as the component does, counting it as parsing.
    fn parse(&self, answer: &str, r: &kube_api::ResourceType) -> Result<Value, KubeError> {
        let started = Instant::now();
        let parsed = response_body::parse(answer, r);
        Spent::add(&self.spent.parsing_nanos, started);
        parsed
    }
}

/// `Kube` over a host's access for one call.
pub struct NativeKube {
    host: KubeHost,
    driver: Driver,
}

/// A watch opened through the host.
pub struct NativeWatch {
    host: KubeHost,
    stream: WatchStream,
    driver: Driver,
    /// What the watch is of, for parsing its events as the component does.
    resource: kube_api::ResourceType,
}

/// The provider compiled for the host.
pub type Provider = provider::Provider<NativeKube, SystemClock, NoLog>;

/// The native provider for one call that must end by `deadline`, as the component's would;
/// `spent` sums where its time went besides its own logic.
pub fn provider(host: &KubeHost, runtime: Handle, deadline: Instant, spent: Arc<Spent>) -> Provider {
    let driver = Driver { runtime, spent };
    provider::Provider::new(NativeKube { host: host.for_call(deadline), driver }, SystemClock::new(), NoLog)
}

fn resource(r: &kube_api::ResourceType) -> wit::ResourceType {
    wit::ResourceType { group: r.group.clone(), version: r.version.clone(), plural: r.plural.clone() }
}

impl Kube for NativeKube {
    type Watch = NativeWatch;

    fn get(&self, r: &kube_api::ResourceType, namespace: Option<&str>, name: &str) -> Result<Value, KubeError> {
        let answer = self.driver.serve(self.host.get(&resource(r), namespace, name));
        self.driver.parse(&answer.map_err(KubeError::from)?, r)
    }

    fn create(&self, r: &kube_api::ResourceType, namespace: Option<&str>, body: &Value) -> Result<Value, KubeError> {
        let body = body.to_string();
        let answer = self.driver.serve(self.host.create(&resource(r), namespace, &body));
        self.driver.parse(&answer.map_err(KubeError::from)?, r)
    }

    fn patch(
        &self,
        r: &kube_api::ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &Value,
        subresource: Option<&str>,
    ) -> Result<Value, KubeError> {
        let patch_type = match patch_type {
            PatchType::Merge => wit::PatchType::Merge,
            PatchType::Json => wit::PatchType::Json,
            PatchType::Strategic => wit::PatchType::Strategic,
        };
        let body = body.to_string();
        let answer = self.driver.serve(self.host.patch(&resource(r), namespace, name, patch_type, &body, subresource));
        self.driver.parse(&answer.map_err(KubeError::from)?, r)
    }

    fn delete(
        &self,
        r: &kube_api::ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), KubeError> {
        let options = wit::DeleteOptions {
            propagation: options.propagation.map(|p| match p {
                kube_api::Propagation::Background => wit::Propagation::Background,
                kube_api::Propagation::Foreground => wit::Propagation::Foreground,
                kube_api::Propagation::Orphan => wit::Propagation::Orphan,
            }),
            precondition_uid: options.precondition_uid.clone(),
            precondition_resource_version: options.precondition_resource_version.clone(),
            grace_period_seconds: options.grace_period_seconds,
        };
        self.driver.serve(self.host.delete(&resource(r), namespace, name, &options)).map_err(KubeError::from)
    }

    fn list(
        &self,
        r: &kube_api::ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<Value, KubeError> {
        let options = wit::ListOptions {
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            limit: options.limit,
            continue_token: options.continue_token.clone(),
            resource_version: options.resource_version.clone(),
        };
        let answer = self.driver.serve(self.host.list(&resource(r), namespace, &options));
        self.driver.parse(&answer.map_err(KubeError::from)?, r)
    }

    fn watch(
        &self,
        r: &kube_api::ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<NativeWatch, KubeError> {
        let options = wit::WatchOptions {
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            resource_version: options.resource_version.clone(),
            timeout_seconds: options.timeout_seconds,
            allow_bookmarks: options.allow_bookmarks,
        };
        let stream = self.driver.serve(self.host.watch(&resource(r), namespace, &options)).map_err(KubeError::from)?;
        Ok(NativeWatch { host: self.host.clone(), stream, driver: self.driver.clone(), resource: r.clone() })
    }

    fn served_versions(&self, group: &str) -> Result<Vec<String>, KubeError> {
        self.driver.serve(self.host.served_versions(group)).map_err(KubeError::from)
    }

    fn check_namespace(&self, namespace: &str) -> Result<(), String> {
        self.host.check_namespace(namespace)
    }

    fn exec(&self, namespace: &str, pod: &str, o: &kube_api::ExecOptions) -> Result<kube_api::ExecOutput, KubeError> {
        let options = wit::ExecOptions {
            container: o.container.clone(),
            command: o.command.clone(),
            stdin: o.stdin.clone(),
            timeout_ms: u32::try_from(o.timeout.as_millis()).unwrap_or(u32::MAX),
            max_output_bytes: o.max_output_bytes,
        };
        let out = self.driver.serve(self.host.exec(namespace, pod, options)).map_err(KubeError::from)?;
        Ok(kube_api::ExecOutput {
            exit_code: out.exit_code,
            timed_out: out.timed_out,
            stdout: out.stdout,
            stderr: out.stderr,
            stdout_truncated: out.stdout_truncated,
            stderr_truncated: out.stderr_truncated,
        })
    }
}

impl kube_api::Watch for NativeWatch {
    fn next(&mut self, timeout: Duration) -> Result<Option<kube_api::WatchEvent>, KubeError> {
        let event = self.driver.serve(self.host.next_event(&mut self.stream, timeout)).map_err(KubeError::from)?;
        Ok(match event {
            None => None,
            Some(wit::WatchEvent::Added(o)) => {
                Some(kube_api::WatchEvent::Added(self.driver.parse(&o, &self.resource)?))
            }
            Some(wit::WatchEvent::Modified(o)) => {
                Some(kube_api::WatchEvent::Modified(self.driver.parse(&o, &self.resource)?))
            }
            Some(wit::WatchEvent::Deleted(o)) => {
                Some(kube_api::WatchEvent::Deleted(self.driver.parse(&o, &self.resource)?))
            }
            Some(wit::WatchEvent::Bookmark(rv)) => Some(kube_api::WatchEvent::Bookmark(rv)),
        })
    }
}
