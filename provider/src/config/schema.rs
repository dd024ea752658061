//! The JSON Schema (draft 2020-12) of the config, which `describe` publishes.
//!
//! The schema is text (`schema.json`) built into the component as is: building it as a JSON
//! value at run time cost the component 55 KiB of code and every `describe` the time to build and
//! print it. The test beside it makes the same schema from the limits it states
//! ([`crate::input_limits`], the defaults) and fails when the file differs, so the limits stay
//! the one source.

/// The JSON Schema of the config, for `describe`. It states the size limits of
/// [`crate::input_limits`] where JSON Schema can (`maxLength`, `maxItems`, `maxProperties`) and
/// the totals in the descriptions.
pub const SCHEMA: &str = include_str!("schema.json");

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::*;
    use super::*;
    use crate::input_limits::{
        COMMAND_BYTES, COMMAND_WORDS, CONFIG_ANNOTATIONS, CONFIG_TEXT, DNS1123_LABEL_MAX_LEN,
        DNS1123_SUBDOMAIN_MAX_LEN, ENV_NAME, ENV_VARS, EXEC_STRING, IMAGE_REF, LABEL_VALUE_MAX_LEN, Unit, WORKING_DIR,
        show,
    };

    fn schema() -> Value {
        serde_json::from_str(SCHEMA).expect("schema.json is JSON")
    }

    /// The schema from the limits it states: what `schema.json` must hold.
    fn generated() -> Value {
        let key_max = DNS1123_SUBDOMAIN_MAX_LEN + 1 + LABEL_VALUE_MAX_LEN;
        let label_map = |description: &str| json!({"type": "object", "propertyNames": {"maxLength": key_max}, "additionalProperties": {"type": "string", "maxLength": LABEL_VALUE_MAX_LEN}, "description": description});
        let quantity_map = |description: &str| json!({"type": "object", "additionalProperties": {"type": ["string", "number"]}, "description": description});
        let bytes = |n: usize| show(n, Unit::Bytes);
        let command_limits = format!(
            "The command and args together: at most {} words and {}; each word at most {}.",
            COMMAND_WORDS.max,
            bytes(COMMAND_BYTES.max),
            bytes(EXEC_STRING.max)
        );
        let command_list = |description: &str| json!({"type": "array", "maxItems": COMMAND_WORDS.max, "items": {"type": "string", "maxLength": EXEC_STRING.max}, "description": format!("{description} {command_limits}")});
        let name_list = |description: &str| json!({"type": "array", "items": {"type": "string", "maxLength": DNS1123_SUBDOMAIN_MAX_LEN}, "description": description});
        let tolerations = json!({
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "maxLength": key_max},
                    "operator": {"enum": ["Equal", "Exists"]},
                    "value": {"type": "string", "maxLength": LABEL_VALUE_MAX_LEN},
                    "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
                    "tolerationSeconds": {"type": "integer"}
                }
            }
        });
        let job = json!({
            "type": "object",
            "properties": {
                "backoffLimit": {"type": "integer", "minimum": 0, "maximum": 100, "default": 0},
                "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0, "default": 900}
            }
        });
        let sandbox = json!({
            "type": "object",
            "properties": {
                "workspaceVolume": {
                    "type": "object",
                    "required": ["size"],
                    "description": "A persistent workspace claim; reusable leases need it (release suspends the Sandbox and keeps the disk).",
                    "properties": {"size": {"type": "string"}, "storageClassName": {"type": "string", "maxLength": DNS1123_SUBDOMAIN_MAX_LEN}}
                }
            }
        });
        let security = json!({
            "type": "object",
            "description": "Hardened defaults; each loosening must be explicit and is reported as a warning.",
            "properties": {
                "runAsNonRoot": {"type": "boolean", "default": true},
                "runAsUser": {"type": "integer", "default": 1000},
                "runAsGroup": {"type": "integer", "default": 1000},
                "fsGroup": {"type": "integer", "default": 1000},
                "allowPrivilegeEscalation": {"type": "boolean", "default": false},
                "capabilities": {
                    "type": "object",
                    "properties": {"drop": {"type": "array", "items": {"type": "string"}, "default": ["ALL"]}, "add": {"type": "array", "items": {"type": "string"}, "default": []}}
                },
                "seccompProfile": {"enum": ["RuntimeDefault", "Unconfined"], "default": "RuntimeDefault"},
                "readOnlyRootFilesystem": {"type": "boolean", "default": true},
                "automountServiceAccountToken": {"type": "boolean", "default": false}
            }
        });
        let claim = json!({
            "type": "object",
            "description": "Backend claim: what the SandboxClaim names, at least one of the two. A cluster serving SandboxClaim v1beta1 (agent-sandbox v0.5 and later) needs warmPool and takes the template from the pool; one serving only v1alpha1 (v0.4) needs template, and warmPool is then optional (default: any pool of the template; none: never adopt).",
            "anyOf": [{"required": ["warmPool"]}, {"required": ["template"]}],
            "properties": {
                "warmPool": {"type": "string", "maxLength": DNS1123_SUBDOMAIN_MAX_LEN, "description": "The SandboxWarmPool to adopt a ready Sandbox from; when none is ready, the claim makes one from the pool's template."},
                "template": {"type": "string", "maxLength": DNS1123_SUBDOMAIN_MAX_LEN, "description": "The SandboxTemplate that makes the Sandbox (v1alpha1 claims)."}
            }
        });
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Kubernetes sandbox provider config",
            "description": format!(
                "Unknown keys are reported as warnings and ignored. Every default is filled in by validate-config. The config's \
                 JSON text is at most {}. maxLength counts characters; the provider's limits count UTF-8 bytes.",
                bytes(CONFIG_TEXT.max)
            ),
            "type": "object",
            "required": ["namespace"],
            "if": {"required": ["backend"], "properties": {"backend": {"const": "claim"}}},
            "then": {"required": ["claim"]},
            "else": {"required": ["image"]},
            "properties": {
                "namespace": {"type": "string", "maxLength": DNS1123_LABEL_MAX_LEN, "description": "Namespace the sandboxes are created in (must exist)."},
                "backend": {"enum": ["sandbox", "job", "claim"], "default": "sandbox", "description": "sandbox: an agent-sandbox Sandbox (agents.x-k8s.io); job: a batch/v1 Job; claim: an agent-sandbox SandboxClaim (extensions.agents.x-k8s.io) on a warm pool, whose template decides the pod (the keys that shape the pod do not apply to it)."},
                "sandboxApiVersion": {"enum": ["auto", "v1beta1", "v1alpha1"], "default": "auto", "description": "auto discovers what the cluster serves and prefers v1beta1."},
                "image": {"type": "string", "minLength": 1, "maxLength": IMAGE_REF.max, "description": "Container image of the sandbox: a reference as the kubelet parses it ([registry[:port]/]path[:tag][@sha256:digest], lowercase path). Required unless backend is claim."},
                "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                "command": command_list("Container command; default [\"sleep\", \"infinity\"] keeps the sandbox alive; [] uses the image's entrypoint."),
                "args": command_list("Container arguments."),
                "workingDir": {"type": "string", "maxLength": WORKING_DIR.max, "default": "/workspace", "description": "Absolute working directory."},
                "resources": {
                    "type": "object",
                    "description": "Requests and limits; when absent: requests cpu 250m, memory 512Mi; limits cpu 2, memory 4Gi.",
                    "properties": {"requests": quantity_map("Resource requests."), "limits": quantity_map("Resource limits.")}
                },
                "env": {
                    "type": "object",
                    "maxProperties": ENV_VARS.max - 1,
                    "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "maxLength": ENV_NAME.max},
                    "additionalProperties": {"type": "string", "maxLength": EXEC_STRING.max},
                    "description": format!(
                        "Non-secret environment variables; the request's env wins on the same name. With HOME and the \
                         request's env at most {} variables; each NAME=value at most {}; names and values together at \
                         most {}. With backend claim the env (the request's secret values too) is kept in the \
                         lease's Secret and exported into every command execute runs, not set on the template's pod.",
                        ENV_VARS.max,
                        bytes(EXEC_STRING.max),
                        bytes(crate::input_limits::PLAIN_ENV.max)
                    )
                },
                "nodeSelector": label_map("Node labels the pod must match."),
                "tolerations": tolerations,
                "runtimeClassName": {"type": "string", "maxLength": DNS1123_SUBDOMAIN_MAX_LEN, "description": "RuntimeClass (gVisor, Kata) for stronger isolation."},
                "serviceAccountName": {"type": "string", "maxLength": DNS1123_SUBDOMAIN_MAX_LEN},
                "imagePullSecrets": name_list("Names of Secrets in the namespace for pulling the image; the host lets a pod use only those its operator names (the policy's pod-secrets)."),
                "labels": label_map("Extra labels on every object (keys under sandbox.paperclip.io/ are reserved); with backend claim, on the claim and the lease's Secret (the template labels the pod)."),
                "annotations": {
                    "type": "object",
                    "propertyNames": {"maxLength": key_max},
                    "additionalProperties": {"type": "string"},
                    "description": format!(
                        "Extra annotations on every object and the pod; keys and values together at most {} (Kubernetes' \
                         256 KiB per object, less what the provider adds).",
                        bytes(CONFIG_ANNOTATIONS.max)
                    )
                },
                "namePrefix": {"type": "string", "minLength": 1, "maxLength": 20, "default": "pc-", "description": "Object names are this prefix plus the acquisition id, unchanged."},
                "leaseTtlSeconds": {"type": "integer", "minimum": 60, "maximum": 604800, "default": DEFAULT_LEASE_TTL_SECONDS, "description": "Longest life of a lease without renewal; the cluster deletes the sandbox then, whatever happens to the host."},
                "readinessTimeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 600, "default": DEFAULT_READINESS_TIMEOUT_SECONDS, "description": "One deadline over a whole acquire (or a resume's wait). The default 20 s stays well inside a host's default 30 s call budget, leaving room for clean-up after a failure; above 25 s, raise the host's timeout too."},
                "job": job,
                "sandbox": sandbox,
                "security": security,
                "claim": claim
            }
        })
    }

    /// The published schema is the one the limits make; `UPDATE_SCHEMA=1 cargo test -p
    /// provider schema` rewrites it after a limit or a description changed.
    #[test]
    fn schema_json_is_what_the_limits_make() {
        let want = generated();
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            let text = serde_json::to_string_pretty(&want).expect("serializable") + "\n";
            std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/src/config/schema.json"), text).expect("write");
            return;
        }
        assert_eq!(schema(), want, "src/config/schema.json is stale: rerun with UPDATE_SCHEMA=1");
    }

    #[test]
    fn schema_names_every_key_validation_knows() {
        let schema = schema();
        let keys = |pointer: &str| -> Vec<String> {
            let mut k: Vec<String> =
                schema.pointer(pointer).and_then(Value::as_object).unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let sorted = |list: &[&str]| {
            let mut k: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        assert_eq!(keys("/properties"), sorted(TOP_KEYS));
        assert_eq!(keys("/properties/resources/properties"), sorted(RESOURCES_KEYS));
        assert_eq!(keys("/properties/tolerations/items/properties"), sorted(TOLERATION_KEYS));
        assert_eq!(keys("/properties/job/properties"), sorted(JOB_KEYS));
        assert_eq!(keys("/properties/sandbox/properties"), sorted(SANDBOX_KEYS));
        assert_eq!(keys("/properties/sandbox/properties/workspaceVolume/properties"), sorted(WORKSPACE_VOLUME_KEYS));
        assert_eq!(keys("/properties/security/properties"), sorted(SECURITY_KEYS));
        assert_eq!(keys("/properties/security/properties/capabilities/properties"), sorted(CAPABILITIES_KEYS));
        assert_eq!(keys("/properties/claim/properties"), sorted(CLAIM_KEYS));
        for key in POD_KEYS {
            assert!(TOP_KEYS.contains(key), "{key}");
        }
        assert!(schema["properties"]["readinessTimeoutSeconds"]["description"].as_str().unwrap().contains("30 s"));
    }

    #[test]
    fn schema_states_the_size_limits() {
        let schema = schema();
        let at =
            |pointer: &str| schema.pointer(pointer).cloned().unwrap_or_else(|| panic!("no {pointer} in the schema"));
        assert_eq!(at("/properties/namespace/maxLength"), DNS1123_LABEL_MAX_LEN);
        assert_eq!(at("/properties/image/maxLength"), IMAGE_REF.max);
        assert_eq!(at("/properties/env/maxProperties"), ENV_VARS.max - 1, "HOME is one of them");
        assert_eq!(at("/properties/env/propertyNames/maxLength"), ENV_NAME.max);
        assert_eq!(at("/properties/command/maxItems"), COMMAND_WORDS.max);
        assert_eq!(at("/properties/args/items/maxLength"), EXEC_STRING.max);
        assert_eq!(at("/properties/workingDir/maxLength"), WORKING_DIR.max);
        assert_eq!(at("/properties/labels/additionalProperties/maxLength"), LABEL_VALUE_MAX_LEN);
        assert_eq!(at("/properties/imagePullSecrets/items/maxLength"), DNS1123_SUBDOMAIN_MAX_LEN);
        assert!(at("/properties/annotations/description").as_str().unwrap().contains("252 KiB"));
        assert!(at("/description").as_str().unwrap().contains("512 KiB"));
    }
}
