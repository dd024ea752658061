//! Which versions of `extensions.agents.x-k8s.io` and of the Sandbox the cluster serves, found
//! by discovery (the CRDs may be installed after a controller starts, so it waits for them).

use std::time::Duration;

use anyhow::Context as _;
use contract::k8s::agent_sandbox as names;
use kube::api::{ApiResource, GroupVersionKind};
use kube::{Client, discovery};
use tracing::warn;

use super::EXTENSIONS_GROUP;
use crate::controllers::sandbox::model::SandboxVersion;
use crate::controllers::served_sandbox_resource;

/// Real time between discovery attempts while a group is not served yet.
const DISCOVERY_RETRY: Duration = Duration::from_secs(1);

/// The served version of the extensions group: it decides the spec's shape (v1beta1 claims
/// name a warm pool, v1alpha1 claims a template) and the owner references' `apiVersion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExtensionsVersion {
    /// agent-sandbox v0.5 and later.
    V1beta1,
    /// agent-sandbox v0.4.
    V1alpha1,
}

impl ExtensionsVersion {
    /// Versions in order of preference.
    pub const PREFERENCE: [ExtensionsVersion; 2] = [ExtensionsVersion::V1beta1, ExtensionsVersion::V1alpha1];

    /// The bare version (`v1beta1`).
    pub fn version(self) -> &'static str {
        match self {
            ExtensionsVersion::V1beta1 => "v1beta1",
            ExtensionsVersion::V1alpha1 => "v1alpha1",
        }
    }

    /// The `apiVersion` of the group's objects and of owner references to them.
    pub fn api_version(self) -> String {
        format!("{EXTENSIONS_GROUP}/{}", self.version())
    }
}

/// The resources an extension controller drives, in the versions the cluster serves.
#[derive(Clone, Debug)]
pub struct Apis {
    /// The served version of the extensions group.
    pub version: ExtensionsVersion,
    /// `sandboxclaims`.
    pub claims: ApiResource,
    /// `sandboxtemplates`.
    pub templates: ApiResource,
    /// `sandboxwarmpools`.
    pub pools: ApiResource,
    /// The served version of the Sandbox (v1beta1 preferred).
    pub sandbox_version: SandboxVersion,
    /// `sandboxes`.
    pub sandboxes: ApiResource,
}

/// Finds the served versions, retrying while either group is missing; `controller` names the
/// waiting controller in the log.
pub async fn discover(client: &Client, controller: &str) -> Apis {
    let mut attempts: u64 = 0;
    loop {
        match try_discover(client).await {
            Ok(found) => return found,
            Err(error) => {
                if attempts.is_multiple_of(30) {
                    warn!(%controller, error = %format!("{error:#}"), "waiting for agent-sandbox's API groups");
                }
                attempts += 1;
                tokio::time::sleep(DISCOVERY_RETRY).await;
            }
        }
    }
}

/// The extensions group's resources in the preferred served version, or why there are none.
pub async fn served_extensions(client: &Client) -> anyhow::Result<(ExtensionsVersion, [ApiResource; 3])> {
    let group = discovery::group(client, EXTENSIONS_GROUP)
        .await
        .with_context(|| format!("discovering API group {EXTENSIONS_GROUP}"))?;
    let served: Vec<&str> = group.versions().collect();
    let version = ExtensionsVersion::PREFERENCE
        .into_iter()
        .find(|v| served.contains(&v.version()))
        .with_context(|| format!("{EXTENSIONS_GROUP} serves neither v1beta1 nor v1alpha1 (serves {served:?})"))?;
    let listed = group.versioned_resources(version.version());
    let resource = |kind: &str, plural: &str| {
        listed.iter().map(|(r, _)| r.clone()).find(|r| r.kind == kind).unwrap_or_else(|| {
            let gvk = GroupVersionKind::gvk(EXTENSIONS_GROUP, version.version(), kind);
            ApiResource::from_gvk_with_plural(&gvk, plural)
        })
    };
    Ok((
        version,
        [
            resource(names::CLAIM_KIND, names::CLAIMS),
            resource(names::TEMPLATE_KIND, names::TEMPLATES),
            resource(names::WARM_POOL_KIND, names::WARM_POOLS),
        ],
    ))
}

async fn try_discover(client: &Client) -> anyhow::Result<Apis> {
    let (version, [claims, templates, pools]) = served_extensions(client).await?;
    let sandboxes = served_sandbox_resource(client)
        .await
        .with_context(|| format!("{} serves no Sandbox resource", names::GROUP))?;
    let sandbox_version = SandboxVersion::parse(&sandboxes.version)
        .with_context(|| format!("unsupported Sandbox version {:?}", sandboxes.version))?;
    Ok(Apis { version, claims, templates, pools, sandbox_version, sandboxes })
}
