//! The resource types the embedded cluster serves, and how each one behaves.
//!
//! Discovery, OpenAPI, routing and the per-kind rules all read this one table, so adding a
//! resource is one entry here (plus its validation, if it has special rules).

use contract::k8s::agent_sandbox;

/// Which versions of `agents.x-k8s.io` Sandboxes the cluster serves, to test clients against
/// old (v0.4, v1alpha1 only), transitional (v0.5, both) and new (v1.0, v1beta1 only) controllers.
/// The extensions group (claims, templates, warm pools) follows: see [`Self::extensions_version`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxVersions {
    /// v1beta1 and v1alpha1, one storage (agent-sandbox v0.5.x).
    #[default]
    Both,
    /// v1beta1 only (agent-sandbox v1.0 and later).
    V1beta1Only,
    /// v1alpha1 only (agent-sandbox v0.4.x and earlier).
    V1alpha1Only,
}

impl SandboxVersions {
    /// The one version of `extensions.agents.x-k8s.io` served alongside: v1alpha1 with
    /// agent-sandbox v0.4, v1beta1 from v0.5 on.
    pub fn extensions_version(self) -> &'static str {
        match self {
            Self::V1alpha1Only => "v1alpha1",
            Self::Both | Self::V1beta1Only => "v1beta1",
        }
    }
}

/// The word `--sandbox-versions` takes: `both`, `v1beta1` or `v1alpha1`.
impl std::fmt::Display for SandboxVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Both => "both",
            Self::V1beta1Only => "v1beta1",
            Self::V1alpha1Only => "v1alpha1",
        })
    }
}

impl std::str::FromStr for SandboxVersions {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "both" => Ok(Self::Both),
            "v1beta1" => Ok(Self::V1beta1Only),
            "v1alpha1" => Ok(Self::V1alpha1Only),
            other => Err(format!("unknown Sandbox versions {other:?}: use both, v1beta1 or v1alpha1")),
        }
    }
}

/// How a resource's objects are validated and defaulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// A built-in kind: core validation, defaults, strategic merge patch.
    BuiltIn,
    /// A custom resource: checked against its CRD schema; no strategic merge patch.
    Custom,
}

/// One served resource (one group/version/plural).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Subresources served besides the object itself (`status`, `binding`, `token`).
    pub subresources: &'static [&'static str],
    pub verbs: &'static [&'static str],
    /// Objects of several versions of one resource share this storage key.
    pub storage: &'static str,
    pub flavor: Flavor,
    /// Whether `metadata.generation` is tracked (bumped on spec changes).
    pub has_generation: bool,
    /// Whether a PUT without `metadata.resourceVersion` is accepted (false for custom resources).
    pub unconditional_update: bool,
}

const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

impl ResourceType {
    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// Whether the resource has a `status` subresource (and so keeps status apart from spec).
    pub fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }

    /// The list kind (`PodList`).
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The URL prefix of this group/version (`/api/v1`, `/apis/batch/v1`).
    pub fn gv_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

fn core(plural: &'static str, singular: &'static str, kind: &'static str, namespaced: bool) -> ResourceType {
    ResourceType {
        group: "",
        version: "v1",
        plural,
        singular,
        kind,
        namespaced,
        short_names: &[],
        categories: &[],
        subresources: &[],
        verbs: ALL_VERBS,
        storage: plural,
        flavor: Flavor::BuiltIn,
        has_generation: false,
        unconditional_update: true,
    }
}

/// A kind of `rbac.authorization.k8s.io/v1`; callers set the storage key.
fn rbac(plural: &'static str, singular: &'static str, kind: &'static str, namespaced: bool) -> ResourceType {
    ResourceType { group: crate::rbac::GROUP, ..core(plural, singular, kind, namespaced) }
}

/// The table of served resources for a given Sandbox version setting.
pub fn served(sandbox_versions: SandboxVersions) -> Vec<ResourceType> {
    let mut out = vec![
        ResourceType {
            short_names: &["ns"],
            subresources: &["status", "finalize"],
            verbs: &["create", "delete", "get", "list", "patch", "update", "watch"],
            ..core("namespaces", "namespace", "Namespace", false)
        },
        ResourceType { short_names: &["no"], subresources: &["status"], ..core("nodes", "node", "Node", false) },
        ResourceType {
            short_names: &["po"],
            categories: &["all"],
            subresources: &["status", "binding", "log", "exec"],
            ..core("pods", "pod", "Pod", true)
        },
        core("secrets", "secret", "Secret", true),
        core("configmaps", "configmap", "ConfigMap", true),
        ResourceType {
            short_names: &["svc"],
            categories: &["all"],
            subresources: &["status"],
            ..core("services", "service", "Service", true)
        },
        ResourceType {
            short_names: &["pvc"],
            subresources: &["status"],
            ..core("persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true)
        },
        ResourceType { short_names: &["ev"], ..core("events", "event", "Event", true) },
        ResourceType {
            short_names: &["quota"],
            subresources: &["status"],
            ..core("resourcequotas", "resourcequota", "ResourceQuota", true)
        },
        ResourceType { short_names: &["limits"], ..core("limitranges", "limitrange", "LimitRange", true) },
        ResourceType {
            group: "coordination.k8s.io",
            storage: "leases.coordination.k8s.io",
            ..core("leases", "lease", "Lease", true)
        },
        ResourceType {
            group: "networking.k8s.io",
            short_names: &["netpol"],
            storage: "networkpolicies.networking.k8s.io",
            has_generation: true,
            ..core("networkpolicies", "networkpolicy", "NetworkPolicy", true)
        },
        ResourceType {
            short_names: &["sa"],
            subresources: &["token"],
            ..core("serviceaccounts", "serviceaccount", "ServiceAccount", true)
        },
        ResourceType {
            group: "batch",
            categories: &["all"],
            subresources: &["status"],
            storage: "jobs.batch",
            has_generation: true,
            ..core("jobs", "job", "Job", true)
        },
        ResourceType { storage: crate::rbac::ROLES, ..rbac("roles", "role", "Role", true) },
        ResourceType {
            storage: crate::rbac::ROLE_BINDINGS,
            ..rbac("rolebindings", "rolebinding", "RoleBinding", true)
        },
        ResourceType {
            storage: crate::rbac::CLUSTER_ROLES,
            ..rbac("clusterroles", "clusterrole", "ClusterRole", false)
        },
        ResourceType {
            storage: crate::rbac::CLUSTER_ROLE_BINDINGS,
            ..rbac("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false)
        },
        // Create-only and never stored: answered by `access_review`.
        ResourceType {
            group: crate::access_review::GROUP,
            verbs: &["create"],
            ..core(crate::access_review::SELF_SUBJECT_ACCESS_REVIEWS, "", crate::access_review::KIND, false)
        },
    ];
    let sandbox = |version: &'static str| ResourceType {
        group: agent_sandbox::GROUP,
        version,
        short_names: &["sandbox"],
        subresources: &["status"],
        storage: "sandboxes.agents.x-k8s.io",
        flavor: Flavor::Custom,
        has_generation: true,
        unconditional_update: false,
        ..core(agent_sandbox::SANDBOXES, "sandbox", agent_sandbox::SANDBOX_KIND, true)
    };
    match sandbox_versions {
        SandboxVersions::Both => {
            out.push(sandbox("v1beta1"));
            out.push(sandbox("v1alpha1"));
        }
        SandboxVersions::V1beta1Only => out.push(sandbox("v1beta1")),
        SandboxVersions::V1alpha1Only => out.push(sandbox("v1alpha1")),
    }
    out.extend(extensions(sandbox_versions.extensions_version()));
    out
}

/// The kinds of `extensions.agents.x-k8s.io` in one version. Each CRD file bundled here defines
/// a single version (agent-sandbox v0.4's v1alpha1, or v0.5's v1beta1 without the deprecated
/// v1alpha1 its conversion webhook serves), so one version is served and nothing is converted.
///
/// Warm pools' CRDs also declare the `scale` subresource; the server implements scale for no
/// resource, so it is not served (as `status` is the only subresource custom resources get here).
fn extensions(version: &'static str) -> [ResourceType; 3] {
    let custom =
        |plural: &'static str, singular: &'static str, kind: &'static str, storage: &'static str| ResourceType {
            group: agent_sandbox::EXTENSIONS_GROUP,
            version,
            subresources: &["status"],
            storage,
            flavor: Flavor::Custom,
            has_generation: true,
            unconditional_update: false,
            ..core(plural, singular, kind, true)
        };
    [
        ResourceType {
            short_names: &["sandboxclaim"],
            ..custom(
                agent_sandbox::CLAIMS,
                "sandboxclaim",
                agent_sandbox::CLAIM_KIND,
                "sandboxclaims.extensions.agents.x-k8s.io",
            )
        },
        ResourceType {
            short_names: &["sandboxtemplate"],
            // v1beta1's CRD drops the (always empty) status, and with it the subresource.
            subresources: if version == "v1alpha1" { &["status"] } else { &[] },
            ..custom(
                agent_sandbox::TEMPLATES,
                "sandboxtemplate",
                agent_sandbox::TEMPLATE_KIND,
                "sandboxtemplates.extensions.agents.x-k8s.io",
            )
        },
        ResourceType {
            short_names: &["swp"],
            ..custom(
                agent_sandbox::WARM_POOLS,
                "sandboxwarmpool",
                agent_sandbox::WARM_POOL_KIND,
                "sandboxwarmpools.extensions.agents.x-k8s.io",
            )
        },
    ]
}

/// The groups served, in discovery order, each with its versions (preferred first).
pub fn groups(types: &[ResourceType]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, versions)) if !versions.contains(&t.version) => versions.push(t.version),
            Some(_) => {}
            None => groups.push((t.group, vec![t.version])),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_versions_setting_controls_what_is_served() {
        let count = |v| served(v).iter().filter(|t| t.plural == "sandboxes").count();
        assert_eq!(count(SandboxVersions::Both), 2);
        assert_eq!(count(SandboxVersions::V1beta1Only), 1);
        let alpha = served(SandboxVersions::V1alpha1Only);
        assert!(alpha.iter().any(|t| t.plural == "sandboxes" && t.version == "v1alpha1"));
    }

    #[test]
    fn groups_list_preferred_version_first() {
        let g = groups(&served(SandboxVersions::Both));
        assert_eq!(
            g,
            vec![
                ("coordination.k8s.io", vec!["v1"]),
                ("networking.k8s.io", vec!["v1"]),
                ("batch", vec!["v1"]),
                ("rbac.authorization.k8s.io", vec!["v1"]),
                ("authorization.k8s.io", vec!["v1"]),
                ("agents.x-k8s.io", vec!["v1beta1", "v1alpha1"]),
                ("extensions.agents.x-k8s.io", vec!["v1beta1"]),
            ]
        );
    }

    #[test]
    fn extensions_follow_the_sandbox_versions_setting() {
        let versions = |v| {
            let mut out: Vec<(&str, &str)> = served(v)
                .into_iter()
                .filter(|t| t.group == "extensions.agents.x-k8s.io")
                .map(|t| (t.plural, t.version))
                .collect();
            out.sort();
            out
        };
        let beta = vec![("sandboxclaims", "v1beta1"), ("sandboxtemplates", "v1beta1"), ("sandboxwarmpools", "v1beta1")];
        assert_eq!(versions(SandboxVersions::Both), beta);
        assert_eq!(versions(SandboxVersions::V1beta1Only), beta);
        let alpha =
            vec![("sandboxclaims", "v1alpha1"), ("sandboxtemplates", "v1alpha1"), ("sandboxwarmpools", "v1alpha1")];
        assert_eq!(versions(SandboxVersions::V1alpha1Only), alpha);
        for t in served(SandboxVersions::Both).iter().filter(|t| t.group == "extensions.agents.x-k8s.io") {
            assert_eq!(
                (t.flavor, t.namespaced, t.has_generation, t.unconditional_update),
                (Flavor::Custom, true, true, false)
            );
            assert!(!t.subresources.contains(&"scale"), "scale is not implemented");
        }
    }
}
