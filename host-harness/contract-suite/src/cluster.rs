//! The cluster a suite runs against: the embedded one (with its fault injection, request log
//! and clock, so every scenario and fault cell runs) or a real one through a kubeconfig (the
//! fault cells and the clock-driven scenarios are skipped, and say so).

use anyhow::Context;
use embedded_cluster::{EmbeddedCluster, PROVIDER_USER};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

/// Where the suite runs.
pub enum Cluster<'a> {
    /// The embedded cluster; the host talks to it as the provider's own identity.
    Embedded(&'a EmbeddedCluster),
    /// A real cluster; the host and the suite's own checks use the kubeconfig's identity.
    Real {
        /// The kubeconfig (YAML).
        kubeconfig: String,
    },
}

impl Cluster<'_> {
    /// The same target, borrowed again (a real cluster's kubeconfig is copied).
    pub fn borrowed(&self) -> Cluster<'_> {
        match self {
            Self::Embedded(c) => Cluster::Embedded(c),
            Self::Real { kubeconfig } => Cluster::Real { kubeconfig: kubeconfig.clone() },
        }
    }

    /// The embedded cluster, when that is the target.
    pub fn embedded(&self) -> Option<&EmbeddedCluster> {
        match self {
            Self::Embedded(c) => Some(c),
            Self::Real { .. } => None,
        }
    }

    /// A client for the suite's own reads and writes (checks, objects made "behind the
    /// provider's back").
    pub async fn admin(&self) -> anyhow::Result<kube::Client> {
        match self {
            Self::Embedded(c) => c.client().await,
            Self::Real { kubeconfig } => embedded_cluster::tls::client_from_kubeconfig(kubeconfig).await,
        }
    }

    /// The host's client: no transparent retries, so the provider sees every answer.
    pub async fn host_client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = match self {
            Self::Embedded(c) => c.kubeconfig(PROVIDER_USER)?,
            Self::Real { kubeconfig } => kubeconfig.clone(),
        };
        let config = embedded_cluster::tls::config_from_kubeconfig(&kubeconfig).await?;
        Ok(provider_host::client_from_config(config)?)
    }

    /// Creates `namespace` when it does not exist yet.
    pub async fn ensure_namespace(&self, namespace: &str) -> anyhow::Result<()> {
        let api: Api<Namespace> = Api::all(self.admin().await?);
        if api.get_opt(namespace).await.context("read the suite's namespace")?.is_some() {
            return Ok(());
        }
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
        api.create(&PostParams::default(), &object).await.with_context(|| format!("create namespace {namespace}"))?;
        Ok(())
    }
}
