//! What a scenario works with: the component loaded in a host under the scenario's own owner
//! id, the provider config, the cluster (when the component uses one) with the audit watching
//! it, and helpers that keep every lease a scenario made, so the suite destroys them all after
//! it and the leak audit can hold the provider to having cleaned up.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ApiResource;
use provider_host::HostError;
use provider_host::ProviderHost;
use provider_host::policy::MANAGED_BY_LABEL;
use provider_host::records::{AcquireRequest, EnvVar, Lease, LeaseRef};

use crate::audit::Observer;
use crate::cluster::Cluster;

/// A secret value every acquire carries; it must never show anywhere but the provider's store.
pub const SECRET_VALUE: &str = "contract-s3cret-9d41";

/// The workload object a lease names, as the cluster has it.
pub struct Workload {
    pub resource: ApiResource,
    pub object: DynamicObject,
}

/// One scenario's world.
pub struct Ctx<'a> {
    pub host: ProviderHost,
    pub cluster: &'a Cluster<'a>,
    /// The provider config (JSON text), as given.
    pub config: String,
    pub namespace: String,
    /// The owner id every object of this scenario carries.
    pub owner_id: String,
    /// The component's driver key, for the few checks that know a provider's lease ids.
    pub driver: String,
    /// `Some` when the component uses the cluster (it declares `kube` access).
    pub observer: Option<Observer>,
    pub admin: Option<kube::Client>,
    tag: String,
    leases: Mutex<Vec<LeaseRef>>,
    backend: Mutex<Option<String>>,
    next: AtomicU32,
}

impl<'a> Ctx<'a> {
    /// The world of one scenario; `tag` makes its acquisition ids unique.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        host: ProviderHost,
        cluster: &'a Cluster<'a>,
        config: String,
        namespace: String,
        owner_id: String,
        driver: String,
        observer: Option<Observer>,
        admin: Option<kube::Client>,
        tag: String,
    ) -> Self {
        Self {
            host,
            cluster,
            config,
            namespace,
            owner_id,
            driver,
            observer,
            admin,
            tag,
            leases: Mutex::new(Vec::new()),
            backend: Mutex::new(None),
            next: AtomicU32::new(1),
        }
    }

    /// A fresh acquisition id for this scenario (lowercase, a valid object name part).
    pub fn acquisition_id(&self) -> String {
        format!("{}-{}", self.tag, self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// An acquire request for `acquisition_id`, expiring within the hour, with one plain and
    /// one secret env var.
    pub fn request(&self, acquisition_id: &str) -> AcquireRequest {
        AcquireRequest {
            config: self.config.clone(),
            run_id: format!("run-{}", self.tag),
            acquisition_id: acquisition_id.to_string(),
            agent_id: Some("contract-agent".to_string()),
            requested_expires_at: Some(now_millis() + 3_600_000),
            env: vec![
                EnvVar { name: "CONTRACT".into(), value: "suite".into(), secret: false },
                EnvVar { name: "CONTRACT_TOKEN".into(), value: SECRET_VALUE.into(), secret: true },
            ],
            reusable: false,
        }
    }

    /// Acquires through the host and keeps the lease for the clean-up after the scenario.
    pub async fn acquire(&self, request: AcquireRequest) -> Result<Lease, HostError> {
        let lease = self.host.acquire(request).await?;
        self.keep(&lease);
        Ok(lease)
    }

    /// Keeps a lease for the clean-up (one the scenario got another way).
    pub fn keep(&self, lease: &Lease) {
        if let Ok(mut backend) = self.backend.lock() {
            backend.get_or_insert_with(|| format!("{:?}", lease.backend).to_lowercase());
        }
        if let Ok(mut leases) = self.leases.lock() {
            leases.push(LeaseRef { lease: lease.clone(), config: self.config.clone() });
        }
    }

    /// The lease and config as a host stores them.
    pub fn stored(&self, lease: &Lease) -> LeaseRef {
        LeaseRef { lease: lease.clone(), config: self.config.clone() }
    }

    /// Every lease the scenario made.
    pub fn leases(&self) -> Vec<LeaseRef> {
        self.leases.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The backend of the first lease, `-` before any.
    pub fn backend(&self) -> String {
        self.backend.lock().ok().and_then(|b| b.clone()).unwrap_or_else(|| "-".to_string())
    }

    /// The cluster client, for scenarios that need one (they are skipped for a component
    /// without `kube` access).
    pub fn admin(&self) -> Result<&kube::Client, String> {
        self.admin.as_ref().ok_or_else(|| "this scenario needs the cluster".to_string())
    }

    /// The object with the lease's workload uid, if it still exists.
    pub async fn workload(&self, lease: &Lease) -> Result<Option<Workload>, String> {
        let (Some(observer), Ok(admin)) = (&self.observer, self.admin()) else {
            return Ok(None);
        };
        let selector = format!("{MANAGED_BY_LABEL}={}", self.owner_id);
        for resource in observer.types() {
            let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &lease.namespace, resource);
            let listed = api.list(&ListParams::default().labels(&selector)).await.map_err(|e| e.to_string())?;
            if let Some(object) =
                listed.items.into_iter().find(|o| o.metadata.uid.as_deref() == Some(lease.workload_uid.as_str()))
            {
                return Ok(Some(Workload { resource: resource.clone(), object }));
            }
        }
        Ok(None)
    }

    /// Whether the sandbox a lease describes can be used now, as the cluster says: its workload
    /// exists and is not being deleted, and its pod is the lease's, Running, Ready and not
    /// being deleted.
    pub async fn usable(&self, lease: &Lease) -> Result<bool, String> {
        let Some(workload) = self.workload(lease).await? else {
            return Ok(false);
        };
        if workload.object.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let Some(pod_name) = &lease.pod_name else {
            return Ok(false);
        };
        let pods: Api<Pod> = Api::namespaced(self.admin()?.clone(), &lease.namespace);
        let Some(pod) = pods.get_opt(pod_name).await.map_err(|e| e.to_string())? else {
            return Ok(false);
        };
        let status = pod.status.unwrap_or_default();
        let ready = status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True");
        Ok(pod.metadata.deletion_timestamp.is_none()
            && lease.pod_uid.as_deref().is_none_or(|uid| pod.metadata.uid.as_deref() == Some(uid))
            && status.phase.as_deref() == Some("Running")
            && ready)
    }
}

/// Milliseconds since the epoch, now.
pub fn now_millis() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}
