//! The cluster a suite runs against: a simulated one (with its request log and holds, so every
//! scenario runs; [`Simulator`]) or a real one through a kubeconfig (the scenarios that need a
//! simulator's hooks are skipped, and say so).

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::simulator::{Identity, Simulator};

/// Where the suite runs.
#[derive(Clone, Copy)]
pub enum Cluster<'a> {
    /// A simulated cluster; the host talks to it as the provider's own identity.
    Simulated(&'a dyn Simulator),
    /// A real cluster; the host and the suite's own checks use the configuration's identity.
    Real {
        /// How to reach it ([`provider_host::kubeconfig`]).
        config: &'a kube::Config,
    },
}

impl<'a> Cluster<'a> {
    /// The simulator's hooks, when the target is simulated.
    pub fn simulator(&self) -> Option<&'a dyn Simulator> {
        match self {
            Self::Simulated(s) => Some(*s),
            Self::Real { .. } => None,
        }
    }

    /// A client for the suite's own reads and writes (checks, objects made "behind the
    /// provider's back").
    pub async fn admin(&self) -> anyhow::Result<kube::Client> {
        match self {
            Self::Simulated(s) => Ok(provider_host::kubeconfig::client(&s.kubeconfig(Identity::Admin)?).await?),
            Self::Real { config } => Ok(kube::Client::try_from((*config).clone())?),
        }
    }

    /// The host's client: no transparent retries, so the provider sees every answer.
    pub async fn host_client(&self) -> anyhow::Result<kube::Client> {
        let config = match self {
            Self::Simulated(s) => provider_host::kubeconfig::config(&s.kubeconfig(Identity::Provider)?).await?,
            Self::Real { config } => (*config).clone(),
        };
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
