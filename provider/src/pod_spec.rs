//! The sandbox pod: one container under hardened defaults that a config loosens only
//! explicitly (non-root, no privilege escalation, every capability dropped, RuntimeDefault
//! seccomp, read-only root filesystem with writable emptyDir volumes, no service-account token).
//!
//! The pod shares its process namespace (`shareProcessNamespace: true`), so PID 1 is the pause
//! container's process, not the sandbox's main command. On a real node a main command such as
//! `sleep infinity` as PID 1 neither reaps the orphans every `execute` leaves (each a zombie
//! holding a pid of the pod's limit, until forks fail) nor has a SIGTERM handler (so every
//! delete waits out the whole grace period and ends in SIGKILL). Pause reaps and exits on
//! SIGTERM, and the main command, no longer PID 1, ends on SIGTERM by default: this works for
//! any image and any `command`, where a reaping entrypoint would need a shell or an init
//! binary in the image and would replace the image's own entrypoint. The cost: the pod's
//! containers see each other's processes, and the sandbox is the only container.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::k8s_types::{
    Capabilities, Container, EnvVar, LocalObjectReference, ObjectMeta, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use crate::naming::{CONTAINER_NAME, WORKSPACE_VOLUME};

/// Where the workspace volume is mounted (and the default working directory).
pub const WORKSPACE_DIR: &str = "/workspace";
/// The writable home directory (`HOME`), an emptyDir.
pub const HOME_DIR: &str = "/home/sandbox";
/// The writable `/tmp`, an emptyDir.
pub const TMP_DIR: &str = "/tmp";

fn non_empty_map(map: &BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    if map.is_empty() { None } else { Some(map.clone()) }
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    if items.is_empty() { None } else { Some(items) }
}

/// What the pod needs beyond the config.
pub struct PodInputs {
    /// Labels of the pod (provider labels plus config labels).
    pub labels: BTreeMap<String, String>,
    /// Annotations of the pod (config annotations plus the raw ids).
    pub annotations: BTreeMap<String, String>,
    /// The container's env, secret values only as `secretKeyRef`s.
    pub env: Vec<EnvVar>,
    /// The workspace comes from a claim template (the Sandbox controller adds the volume).
    pub workspace_claim: bool,
    /// `restartPolicy: Never` (Jobs); `None` keeps the default (Always) for Sandboxes.
    pub restart_never: bool,
}

/// The pod template of a sandbox.
pub fn pod_template(config: &Config, inputs: PodInputs) -> PodTemplateSpec {
    let security = &config.security;
    let container = Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(config.image.clone()),
        image_pull_policy: config.image_pull_policy.clone(),
        command: non_empty(config.command.clone()),
        args: non_empty(config.args.clone()),
        working_dir: Some(config.working_dir.clone()),
        env: non_empty(inputs.env),
        resources: Some(ResourceRequirements {
            requests: non_empty_map(&config.resources.requests),
            limits: non_empty_map(&config.resources.limits),
        }),
        security_context: Some(SecurityContext {
            run_as_non_root: security.run_as_non_root,
            run_as_user: security.run_as_user,
            run_as_group: security.run_as_group,
            allow_privilege_escalation: security.allow_privilege_escalation,
            read_only_root_filesystem: security.read_only_root_filesystem,
            capabilities: Capabilities {
                drop: non_empty(security.capabilities.drop.clone()),
                add: non_empty(security.capabilities.add.clone()),
            },
        }),
        volume_mounts: Some(vec![
            VolumeMount { name: WORKSPACE_VOLUME.to_string(), mount_path: WORKSPACE_DIR.to_string() },
            VolumeMount { name: "home".to_string(), mount_path: HOME_DIR.to_string() },
            VolumeMount { name: "tmp".to_string(), mount_path: TMP_DIR.to_string() },
        ]),
    };
    let mut volumes = vec![Volume::empty_dir("home"), Volume::empty_dir("tmp")];
    if !inputs.workspace_claim {
        volumes.insert(0, Volume::empty_dir(WORKSPACE_VOLUME));
    }
    let spec = PodSpec {
        containers: vec![container],
        restart_policy: inputs.restart_never.then(|| "Never".to_string()),
        automount_service_account_token: Some(security.automount_service_account_token),
        service_account_name: config.service_account_name.clone(),
        runtime_class_name: config.runtime_class_name.clone(),
        node_selector: if config.node_selector.is_empty() { None } else { Some(config.node_selector.clone()) },
        tolerations: non_empty(config.tolerations.clone()),
        image_pull_secrets: non_empty(
            config.image_pull_secrets.iter().map(|n| LocalObjectReference { name: n.clone() }).collect(),
        ),
        security_context: Some(PodSecurityContext {
            run_as_non_root: security.run_as_non_root,
            run_as_user: security.run_as_user,
            run_as_group: security.run_as_group,
            fs_group: security.fs_group,
            seccomp_profile: SeccompProfile { type_: security.seccomp_profile.as_str().to_string() },
        }),
        volumes: Some(volumes),
        share_process_namespace: Some(true),
    };
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(inputs.labels),
            annotations: if inputs.annotations.is_empty() { None } else { Some(inputs.annotations) },
            ..Default::default()
        }),
        spec: Some(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;
    use serde_json::{Value, json};

    fn inputs(workspace_claim: bool, restart_never: bool) -> PodInputs {
        PodInputs {
            labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
            annotations: BTreeMap::new(),
            env: vec![EnvVar { name: "HOME".into(), value: Some(HOME_DIR.into()), ..Default::default() }],
            workspace_claim,
            restart_never,
        }
    }

    fn render(config: &Value, workspace_claim: bool, restart_never: bool) -> Value {
        let config = config::parse(&config.to_string()).unwrap();
        serde_json::to_value(pod_template(&config, inputs(workspace_claim, restart_never))).unwrap()
    }

    #[test]
    fn defaults_are_hardened() {
        let t = render(&json!({"namespace": "ns", "image": "img"}), false, false);
        let spec = &t["spec"];
        let c = &spec["containers"][0];
        assert_eq!(c["securityContext"]["runAsNonRoot"], true);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
        assert!(c["securityContext"]["capabilities"].get("add").is_none());
        assert_eq!(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(spec["automountServiceAccountToken"], false);
        assert!(spec.get("restartPolicy").is_none());
        let volumes: Vec<&str> =
            spec["volumes"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(volumes, vec!["workspace", "home", "tmp"]);
        assert!(spec["volumes"].as_array().unwrap().iter().all(|v| v.get("emptyDir").is_some()));
        assert_eq!(c["command"], json!(["sleep", "infinity"]));
        assert_eq!(spec["shareProcessNamespace"], json!(true), "pause is PID 1: it reaps and stops on SIGTERM");
        assert_eq!(c["resources"]["requests"], json!({"cpu": "250m", "memory": "512Mi"}));
        assert_eq!(c["workingDir"], "/workspace");
        assert_eq!(t["metadata"]["labels"], json!({"a": "b"}));
    }

    #[test]
    fn config_settings_reach_the_pod() {
        let t = render(
            &json!({
                "namespace": "ns", "image": "img", "command": [], "args": ["--serve"],
                "nodeSelector": {"pool": "sbx"}, "runtimeClassName": "gvisor", "serviceAccountName": "runner",
                "imagePullSecrets": ["regcred"],
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "sbx", "effect": "NoSchedule"}],
                "security": {"readOnlyRootFilesystem": false, "automountServiceAccountToken": true}
            }),
            true,
            true,
        );
        let spec = &t["spec"];
        assert!(spec["containers"][0].get("command").is_none(), "[] uses the image's entrypoint");
        assert_eq!(spec["containers"][0]["args"], json!(["--serve"]));
        assert_eq!(spec["nodeSelector"], json!({"pool": "sbx"}));
        assert_eq!(spec["runtimeClassName"], "gvisor");
        assert_eq!(spec["serviceAccountName"], "runner");
        assert_eq!(spec["imagePullSecrets"], json!([{"name": "regcred"}]));
        assert_eq!(spec["tolerations"][0]["effect"], "NoSchedule");
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["automountServiceAccountToken"], true);
        assert_eq!(spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"], false);
        let volumes: Vec<&str> =
            spec["volumes"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(volumes, vec!["home", "tmp"], "the claim template provides the workspace volume");
    }

    /// A template as the version before this one wrote it (with k8s-openapi's types), for a
    /// config that sets every field the template takes. The adoption fingerprint hashes this
    /// JSON: any change to it makes a retried acquire refuse a workload an older host made.
    const EARLIER_TEMPLATE: &str = r#"{"metadata":{"annotations":{"c":"d"},"labels":{"a":"b"}},"spec":{"automountServiceAccountToken":true,"containers":[{"args":["--serve"],"command":["a"],"env":[{"name":"HOME","value":"/home/sandbox"},{"name":"X","value":"y"}],"image":"img","imagePullPolicy":"Always","name":"sandbox","resources":{"requests":{"cpu":"1"}},"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"add":["NET_ADMIN"]},"readOnlyRootFilesystem":false,"runAsGroup":1000,"runAsNonRoot":true,"runAsUser":1000},"volumeMounts":[{"mountPath":"/workspace","name":"workspace"},{"mountPath":"/home/sandbox","name":"home"},{"mountPath":"/tmp","name":"tmp"}],"workingDir":"/workspace"}],"imagePullSecrets":[{"name":"regcred"}],"nodeSelector":{"pool":"sbx"},"runtimeClassName":"gvisor","securityContext":{"fsGroup":1000,"runAsGroup":1000,"runAsNonRoot":true,"runAsUser":1000,"seccompProfile":{"type":"RuntimeDefault"}},"serviceAccountName":"runner","shareProcessNamespace":true,"tolerations":[{"effect":"NoExecute","key":"dedicated","operator":"Equal","tolerationSeconds":5,"value":"sbx"}],"volumes":[{"emptyDir":{},"name":"workspace"},{"emptyDir":{},"name":"home"},{"emptyDir":{},"name":"tmp"}]}}"#;

    #[test]
    fn the_template_s_json_is_what_earlier_versions_wrote() {
        let config = config::parse(
            &json!({
                "namespace": "ns", "image": "img", "command": ["a"], "args": ["--serve"],
                "nodeSelector": {"pool": "sbx"}, "runtimeClassName": "gvisor", "serviceAccountName": "runner",
                "imagePullSecrets": ["regcred"], "imagePullPolicy": "Always",
                "resources": {"requests": {"cpu": "1"}, "limits": {}},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "sbx", "effect": "NoExecute",
                                 "tolerationSeconds": 5}],
                "security": {"readOnlyRootFilesystem": false, "automountServiceAccountToken": true,
                             "capabilities": {"add": ["NET_ADMIN"], "drop": []}}
            })
            .to_string(),
        )
        .unwrap();
        let env = crate::secret::plan_env(&BTreeMap::from([("X".to_string(), "y".to_string())]), &[], "sec").unwrap();
        let inputs = PodInputs {
            labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
            annotations: BTreeMap::from([("c".to_string(), "d".to_string())]),
            env: env.pod_env,
            workspace_claim: false,
            restart_never: false,
        };
        assert_eq!(serde_json::to_value(pod_template(&config, inputs)).unwrap().to_string(), EARLIER_TEMPLATE);
    }
}
