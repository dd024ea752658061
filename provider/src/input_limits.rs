//! Every size limit on what a caller sends, defined once, each with where its number comes
//! from, and the checks that apply them before the provider calls the cluster.
//!
//! Where Kubernetes (or Linux, which runs the sandbox's process) has a limit, the provider uses
//! it, so an input it accepts is one the cluster accepts too; elsewhere the numbers are the
//! provider's own, chosen so that the objects it writes stay under etcd's request limit:
//! a workload carries the config's labels and annotations twice (its own metadata and its pod
//! template's), which 512 KiB of config text bounds, and the request's env is bounded apart.
//! What is sent as JSON is also measured as JSON before it is sent ([`check_object`]), since
//! JSON writes a control character as six bytes.
//!
//! The config's limits are checked by `validate-config` (with the field's path) and again by
//! every lifecycle call that parses a config; the request's and the lease's by [`crate::Provider`]
//! before a call starts, and so before any text over a limit is parsed or copied.

use std::fmt;

use contract::k8s::names;

use contract::quote;
use serde_json::Value;

use crate::acquire::AcquireRequest;
use crate::config::is_env_name;
use crate::errors::ProviderError;
use crate::lease::Lease;

/// What a [`Limit`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// UTF-8 bytes, as Kubernetes and Linux count them.
    Bytes,
    /// Environment variables.
    Variables,
    /// Words of a command and its arguments.
    Words,
}

/// One limit: the largest accepted size, where the number comes from, and what a caller over
/// it should do instead, so every refusal explains itself the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The largest size accepted.
    pub max: usize,
    /// What `max` counts.
    pub unit: Unit,
    /// Why this number: the Kubernetes or Linux limit it mirrors, or the provider's reason.
    pub source: &'static str,
    /// What to do instead.
    pub fix: &'static str,
}

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Kubernetes' DNS-1123 label (`DNS1123LabelMaxLength`): namespaces, and every object name
/// the provider derives, since a Sandbox's pod and Service and a Job's `job-name` label take it.
pub const DNS1123_LABEL_MAX_LEN: usize = names::DNS1123_LABEL_MAX_LENGTH;
/// Kubernetes' DNS-1123 subdomain (`DNS1123SubdomainMaxLength`): most object names (Secrets,
/// ServiceAccounts, StorageClasses) and the prefix of a label key.
pub const DNS1123_SUBDOMAIN_MAX_LEN: usize = names::DNS1123_SUBDOMAIN_MAX_LENGTH;
/// Kubernetes' label value (`LabelValueMaxLength`), which is also the name part of a label key.
pub const LABEL_VALUE_MAX_LEN: usize = names::LABEL_VALUE_MAX_LENGTH;

/// The config's JSON text. The provider's own number: the largest config whose labels and
/// annotations, written twice into a workload, still leave room under [`OBJECT_JSON`].
pub const CONFIG_TEXT: Limit = Limit {
    max: 512 * KIB,
    unit: Unit::Bytes,
    source: "the provider's bound, which keeps the objects made from a config under etcd's 1.5 MiB request limit",
    fix: "Shrink the config; large data belongs in the image or a volume, not in the config.",
};

/// What the provider adds to a config's annotations on every object: the raw run, acquisition
/// and agent ids (at most 253 bytes each, with their keys) and the spec hash, well under 4 KiB.
pub const PROVIDER_ANNOTATIONS_RESERVE: usize = 4 * KIB;

/// The config's annotations, keys and values together: kube-apiserver's total per object
/// (`TotalAnnotationSizeLimitB`, 256 KiB) less what the provider adds.
pub const CONFIG_ANNOTATIONS: Limit = Limit {
    max: 256 * KIB - PROVIDER_ANNOTATIONS_RESERVE,
    unit: Unit::Bytes,
    source: "kube-apiserver accepts 256 KiB of annotation keys and values per object, and the provider adds up to \
             4 KiB of its own",
    fix: "Shorten or drop annotations; keep large data out of annotations.",
};

/// Variables in a sandbox's environment: `HOME`, the config's and the request's together. The
/// provider's own number; Kubernetes sets none but the size of the pod spec.
pub const ENV_VARS: Limit = Limit {
    max: 256,
    unit: Unit::Variables,
    source: "the provider's bound on one sandbox's environment, HOME included",
    fix: "Merge variables, or pass the data as a file in the image or a volume.",
};

/// An env var's name: secret values are keys of the lease's Secret, which Kubernetes limits to
/// a DNS-1123 subdomain's length.
pub const ENV_NAME: Limit = Limit {
    max: DNS1123_SUBDOMAIN_MAX_LEN,
    unit: Unit::Bytes,
    source: "env names are keys of the lease's Secret, which Kubernetes limits to 253 characters",
    fix: "Use a shorter name.",
};

/// One string the container's process is started with: a command word, an argument, or an
/// env entry `NAME=value`, with its terminating NUL. Linux's `MAX_ARG_STRLEN` (32 pages):
/// past it `exec` fails with E2BIG and the sandbox never starts.
pub const EXEC_STRING: Limit = Limit {
    max: 128 * KIB,
    unit: Unit::Bytes,
    source: "Linux starts no process with a longer argument or environment string (MAX_ARG_STRLEN), so the sandbox \
             would never start",
    fix: "Pass large data as a file in the image or a volume instead.",
};

/// Plain env names and values of a sandbox, config and request together. The provider's own
/// number: with [`SECRET_ENV`] and [`COMMAND_BYTES`] it stays under Linux's default 2 MiB
/// `ARG_MAX` for a process's arguments and environment together.
pub const PLAIN_ENV: Limit = Limit {
    max: 256 * KIB,
    unit: Unit::Bytes,
    source: "the provider's bound, which with the secret values and the command stays under Linux's 2 MiB limit on \
             a process's arguments and environment",
    fix: "Pass large data as a file in the image or a volume instead.",
};

/// Secret env values of a request, which become the data of the lease's Secret: Kubernetes
/// refuses a Secret with more than 1 MiB of data (`MaxSecretSize`).
pub const SECRET_ENV: Limit = Limit {
    max: MIB,
    unit: Unit::Bytes,
    source: "Kubernetes refuses a Secret with more than 1 MiB of data",
    fix: "Send fewer or smaller secret values; mount large secrets from a Secret of their own.",
};

/// The command and its arguments, bytes of every word together (see [`PLAIN_ENV`]).
pub const COMMAND_BYTES: Limit = Limit {
    max: 256 * KIB,
    unit: Unit::Bytes,
    source: "the provider's bound, which with the env stays under Linux's 2 MiB limit on a process's arguments and \
             environment",
    fix: "Shorten the command; put long scripts in the image or a volume.",
};

/// Words of the command and its arguments together. The provider's own number.
pub const COMMAND_WORDS: Limit = Limit {
    max: 1024,
    unit: Unit::Words,
    source: "the provider's bound on a sandbox's command line",
    fix: "Shorten the command; put long scripts in the image or a volume.",
};

/// The working directory: Linux's `PATH_MAX`.
pub const WORKING_DIR: Limit = Limit {
    max: 4096,
    unit: Unit::Bytes,
    source: "Linux resolves no longer path (PATH_MAX)",
    fix: "Use a shorter path.",
};

/// An image reference: distribution's 255-byte repository path, a 253-byte host with its port,
/// a 128-byte tag and a sha512 digest all fit.
pub const IMAGE_REF: Limit = Limit {
    max: 1024,
    unit: Unit::Bytes,
    source: "the longest host, repository, tag and digest an image reference can have fit in it",
    fix: "Use the image's usual reference, such as registry.example/team/agent:1.2.",
};

/// The acquisition id, before the name prefix is known: object names derive from it and are
/// DNS-1123 labels.
pub const ACQUISITION_ID: Limit = Limit {
    max: DNS1123_LABEL_MAX_LEN,
    unit: Unit::Bytes,
    source: "object names are the name prefix and the acquisition id, at most 63 characters (a DNS-1123 label)",
    fix: "Use a shorter id, such as a lowercase ULID or UUID.",
};

/// The run id and the agent id: stored raw in annotations and hashed into labels, and bounded
/// like Kubernetes' longest object names.
pub const HOST_ID: Limit = Limit {
    max: DNS1123_SUBDOMAIN_MAX_LEN,
    unit: Unit::Bytes,
    source: "the provider's bound, Kubernetes' longest object name",
    fix: "Use a shorter id.",
};

/// The longest provider lease id this provider writes: `k8s:sandbox:<namespace>:<name>:pvc`
/// with both parts DNS-1123 labels.
pub const LEASE_ID: Limit = Limit {
    max: contract::lease_id::MAX_LEN,
    unit: Unit::Bytes,
    source: "the longest id this provider writes",
    fix: "Pass the lease as acquire returned it.",
};

/// Each other typed field of a lease (namespace, API version, workload and pod uid, pod name
/// and IP): Kubernetes names, uids, versions and addresses, none longer than a DNS-1123 subdomain.
pub const LEASE_FIELD: Limit = Limit {
    max: DNS1123_SUBDOMAIN_MAX_LEN,
    unit: Unit::Bytes,
    source: "the longest name, uid, version or address this provider writes",
    fix: "Pass the lease as acquire returned it.",
};

/// Lease metadata the provider reads. What acquire writes is under 2 KiB (three ids of at most
/// 253 bytes, names of at most 63); larger metadata is not this provider's and reads as empty,
/// since metadata is informational and never fails a call.
pub const LEASE_METADATA: Limit = Limit {
    max: 16 * KIB,
    unit: Unit::Bytes,
    source: "the provider's bound: what acquire writes is under 2 KiB",
    fix: "Pass the lease as acquire returned it.",
};

/// An object the provider writes, as the JSON it sends: etcd's default request limit
/// (`--max-request-bytes`, 1.5 MiB), which a custom resource such as a Sandbox is stored as JSON
/// against.
pub const OBJECT_JSON: Limit = Limit {
    max: 3 * MIB / 2,
    unit: Unit::Bytes,
    source: "that is etcd's default request limit, so the API server would refuse the write",
    fix: "Shrink the env values (JSON writes each control character as six bytes), the config's labels and \
          annotations, or the command.",
};

/// A size for a message: bytes as `63 bytes`, `252 KiB`, `1.5 MiB`; counts as themselves.
pub fn show(size: usize, unit: Unit) -> String {
    match unit {
        Unit::Variables => format!("{size} variables"),
        Unit::Words => format!("{size} words"),
        Unit::Bytes if size < KIB => format!("{size} bytes"),
        Unit::Bytes if size < MIB && size.is_multiple_of(KIB) => format!("{} KiB", size / KIB),
        Unit::Bytes if size < MIB => format!("{:.1} KiB", size as f64 / KIB as f64),
        Unit::Bytes if size.is_multiple_of(MIB) => format!("{} MiB", size / MIB),
        Unit::Bytes => format!("{:.1} MiB", size as f64 / MIB as f64),
    }
}

/// A value over a [`Limit`]: what it was, how large, and the limit with its reason and remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    /// What was measured (`secret env values together`), without the value itself.
    pub what: String,
    /// Its size, in the limit's unit.
    pub size: usize,
    /// The limit it is over.
    pub limit: Limit,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.limit;
        write!(
            f,
            "{}: {}, over the limit of {}; {}. {}",
            self.what,
            show(self.size, l.unit),
            show(l.max, l.unit),
            l.source,
            l.fix
        )
    }
}

impl std::error::Error for TooLarge {}

impl From<TooLarge> for ProviderError {
    fn from(e: TooLarge) -> Self {
        ProviderError::rejected(e.to_string())
    }
}

impl Limit {
    /// `Err` when `size` is over the limit; `what` names the value for the message.
    pub fn check(&self, what: impl FnOnce() -> String, size: usize) -> Result<(), TooLarge> {
        if size > self.max { Err(TooLarge { what: what(), size, limit: *self }) } else { Ok(()) }
    }
}

/// The bytes of one env entry as the process gets it: `NAME=value` and its NUL.
pub fn env_entry_len(name: &str, value: &str) -> usize {
    name.len().saturating_add(value.len()).saturating_add(2)
}

/// The bytes of one command word as the process gets it, with its NUL.
pub fn word_len(word: &str) -> usize {
    word.len().saturating_add(1)
}

/// Why an env var cannot reach the sandbox's processes, or `None` when it can. Its name must be
/// one a shell can export and Kubernetes takes as a Secret key (a C identifier,
/// [`is_env_name`]); its value may hold any UTF-8 but NUL: Linux passes a process's
/// environment as NUL-terminated strings, and the command wrapper of execute exports it through
/// `sh`, so a NUL would fail every command of the lease, not its acquire. Said without the
/// value, which may be a secret.
pub fn env_fault(name: &str, value: &str) -> Option<&'static str> {
    if !is_env_name(name) {
        Some("its name is not one a shell can export (use letters, digits and `_`, not starting with a digit)")
    } else if value.contains('\0') {
        Some(
            "its value holds a NUL byte, which no process environment can carry (Linux passes the environment as \
             NUL-terminated strings); the value is not shown",
        )
    } else {
        None
    }
}

/// An env entry named by its position in its list, and by its name when that is a valid one
/// (a name that is not may hold anything): `env[2] ("TOKEN")`.
pub fn env_entry(list: &str, index: usize, name: &str) -> String {
    if is_env_name(name) { format!("{list}[{index}] ({})", quote(name)) } else { format!("{list}[{index}]") }
}

/// Checks an acquire request's own fields, before its config is parsed or anything is sent:
/// the ids, the config text's length, and the env's count, sizes and contents ([`env_fault`]:
/// `invalid-config`, so a host shows it as the input's mistake, and nothing is created). The env merged with the
/// config's is checked again once the config is read (`secret::plan_env`).
pub fn check_request(request: &AcquireRequest) -> Result<(), ProviderError> {
    ACQUISITION_ID.check(|| "acquisition id".into(), request.acquisition_id.len())?;
    HOST_ID.check(|| "run id".into(), request.run_id.len())?;
    if let Some(agent) = &request.agent_id {
        HOST_ID.check(|| "agent id".into(), agent.len())?;
    }
    CONFIG_TEXT
        .check(|| "the config".into(), request.config.len())
        .map_err(|e| ProviderError::invalid_config("", e.to_string()))?;
    ENV_VARS.check(|| "the request's env".into(), request.env.len())?;
    let (mut plain, mut secret) = (0usize, 0usize);
    for (index, var) in request.env.iter().enumerate() {
        if let Some(fault) = env_fault(&var.name, &var.value) {
            return Err(ProviderError::invalid_config(
                "",
                format!(
                    "the request's {} cannot be passed to a sandbox: {fault}. Fix that entry of the env the host \
                     sends; nothing was created.",
                    env_entry("env", index, &var.name)
                ),
            ));
        }
        ENV_NAME.check(|| format!("env var name {}", quote(&var.name)), var.name.len())?;
        EXEC_STRING.check(|| format!("env var {}", quote(&var.name)), env_entry_len(&var.name, &var.value))?;
        if var.secret {
            secret = secret.saturating_add(var.value.len());
            SECRET_ENV.check(|| "secret env values together".into(), secret)?;
        } else {
            plain = plain.saturating_add(env_entry_len(&var.name, &var.value));
            PLAIN_ENV.check(|| "plain env names and values together".into(), plain)?;
        }
    }
    Ok(())
}

/// Checks a stored lease's fields, before any is parsed or echoed. Its config is checked when
/// it is parsed; its metadata is read leniently and only up to [`LEASE_METADATA`].
pub fn check_lease(lease: &Lease) -> Result<(), ProviderError> {
    LEASE_ID.check(|| "the lease's provider-lease-id".into(), lease.provider_lease_id.len())?;
    let fields = [
        ("namespace", Some(&lease.namespace)),
        ("api-version", Some(&lease.api_version)),
        ("workload-uid", Some(&lease.workload_uid)),
        ("pod-name", lease.pod_name.as_ref()),
        ("pod-uid", lease.pod_uid.as_ref()),
        ("pod-ip", lease.pod_ip.as_ref()),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            LEASE_FIELD.check(|| format!("the lease's {name}"), value.len())?;
        }
    }
    Ok(())
}

/// Counts the bytes written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The size of `object` as the JSON sent to the API server, checked against [`OBJECT_JSON`];
/// `what` names it (`Secret team-a/pc-1-env`).
pub fn check_object(what: &str, object: &Value) -> Result<(), ProviderError> {
    let mut count = ByteCount(0);
    serde_json::to_writer(&mut count, object)
        .map_err(|e| ProviderError::internal(format!("could not encode {what}: {e}")))?;
    Ok(OBJECT_JSON.check(|| format!("{what}, as JSON"), count.0)?)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::acquire::{AcquireRequest, EnvVar};
    use crate::config;
    use crate::lease::{Lease, LeaseRef};
    use crate::testkit::{Env, config as test_config, config_with, request};

    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;

    fn assert_untouched(env: &Env) {
        assert!(env.kube.calls().is_empty(), "the cluster was called: {:?}", env.kube.calls());
    }

    fn errors_at(text: &str, path: &str) -> Vec<String> {
        let v = config::validate(text);
        assert!(!v.ok, "accepted: {}", &text[..text.len().min(200)]);
        v.errors.into_iter().filter(|p| p.path == path).map(|p| p.message).collect()
    }

    fn secret(name: &str, value: String) -> EnvVar {
        EnvVar { name: name.into(), value, secret: true }
    }

    fn plain(name: &str, value: String) -> EnvVar {
        EnvVar { name: name.into(), value, secret: false }
    }

    /// A config as a host would send it without validating it first.
    fn raw_config(extra: serde_json::Value) -> String {
        let mut c = json!({"namespace": crate::testkit::NS, "image": "ghcr.io/acme/agent:1", "backend": "job"});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c.to_string()
    }

    #[test]
    fn a_config_over_the_text_limit_is_refused_before_parsing() {
        let text = raw_config(json!({"annotations": {"example.com/big": "a".repeat(5 * MIB)}}));
        let messages = errors_at(&text, "");
        assert!(messages.iter().any(|m| m.contains("512 KiB")), "{messages:?}");
        let env = Env::new();
        let err = env.provider().acquire(AcquireRequest { config: text, ..request(&test_config("job"), "big-1") });
        assert_eq!(err.unwrap_err().kind(), "invalid-config");
        assert_untouched(&env);
    }

    #[test]
    fn annotations_over_the_kubernetes_limit_are_refused_with_their_path() {
        let text = raw_config(json!({"annotations": {"example.com/big": "a".repeat(300 * KIB)}}));
        let messages = errors_at(&text, "/annotations");
        assert!(messages.iter().any(|m| m.contains("256 KiB")), "{messages:?}");
        let env = Env::new();
        let err = env.provider().acquire(AcquireRequest { config: text, ..request(&test_config("job"), "big-2") });
        match err.unwrap_err() {
            crate::ProviderError::InvalidConfig(d) => assert_eq!(d.path, "/annotations"),
            other => panic!("{other:?}"),
        }
        assert_untouched(&env);
    }

    #[test]
    fn env_a_process_cannot_carry_is_refused_at_acquire_by_its_position_and_never_shown() {
        let configs = [test_config("job"), test_config("sandbox"), crate::testkit::claim_config(json!({}))];
        for config in configs {
            let backend = config.as_str();
            let cases = [
                (vec![plain("A", "ok".into()), secret("TOKEN", "s3cr3t\0tail".into())], "env[1] (\"TOKEN\")", "NUL"),
                (vec![plain("PLAIN", "pl\0ain-value".into())], "env[0] (\"PLAIN\")", "NUL"),
                (vec![plain("A", "x".into()), plain("B", "y".into()), secret("1-bad\0", "v".into())], "env[2]", "name"),
            ];
            for (vars, entry, fault) in cases {
                let env = Env::new();
                let req = AcquireRequest { env: vars, ..request(&config, "nul-1") };
                let err = env.provider().acquire(req).expect_err("refused");
                let crate::ProviderError::InvalidConfig(detail) = &err else { panic!("{backend}: {err:?}") };
                assert!(detail.message.contains(entry) && detail.message.contains(fault), "{backend}: {err}");
                assert!(!detail.message.contains("s3cr3t") && !detail.message.contains("ain-value"), "{err}");
                assert!(!detail.message.contains("1-bad"), "a name that is not one is not echoed: {err}");
                assert_untouched(&env);
            }
        }
    }

    #[test]
    fn a_config_env_value_with_nul_is_refused_at_its_path() {
        let text = raw_config(json!({"env": {"GREETING": "hi\0there-value"}}));
        let messages = errors_at(&text, "/env/GREETING");
        assert!(messages.iter().any(|m| m.contains("NUL")), "{messages:?}");
        assert!(messages.iter().all(|m| !m.contains("there-value")), "{messages:?}");
        let env = Env::new();
        let err = env.provider().acquire(AcquireRequest { config: text, ..request(&test_config("job"), "nul-2") });
        match err.unwrap_err() {
            crate::ProviderError::InvalidConfig(d) => assert_eq!(d.path, "/env/GREETING"),
            other => panic!("{other:?}"),
        }
        assert_untouched(&env);
    }

    #[test]
    fn config_env_command_and_paths_over_the_limits_are_refused_with_their_path() {
        let many: serde_json::Map<String, serde_json::Value> =
            (0..300).map(|i| (format!("V{i}"), json!("x"))).collect();
        let cases = [
            (json!({"env": {"BIG": "x".repeat(200 * KIB)}}), "/env/BIG"),
            (json!({"env": {"A".repeat(300): "x"}}), "/env"),
            (json!({"env": many}), "/env"),
            (json!({"args": vec!["x"; 2000]}), "/args"),
            (json!({"args": ["x".repeat(200 * KIB)]}), "/args/0"),
            (
                json!({"command": ["x".repeat(100 * KIB)], "args": ["x".repeat(100 * KIB), "x".repeat(100 * KIB)]}),
                "/args/1",
            ),
            (json!({"workingDir": format!("/{}", "d".repeat(5000))}), "/workingDir"),
        ];
        for (extra, path) in cases {
            let text = raw_config(extra);
            let v = config::validate(&text);
            assert!(!v.ok, "accepted at {path}");
            let found = v.errors.iter().any(|p| p.path == path || p.path.starts_with(&format!("{path}/")));
            assert!(found, "no error at {path}: {:?}", v.errors.iter().map(|p| &p.path).collect::<Vec<_>>());
        }
    }

    #[test]
    fn env_over_the_limits_is_refused_before_any_call() {
        let cases: Vec<(&str, Vec<EnvVar>)> = vec![
            ("a 5 MiB secret value", vec![secret("API_KEY", "s".repeat(5 * MIB))]),
            ("a 5 MiB plain value", vec![plain("MODE", "p".repeat(5 * MIB))]),
            ("a 200 KiB secret value", vec![secret("API_KEY", "s".repeat(200 * KIB))]),
            ("1.1 MiB of secret values", (0..9).map(|i| secret(&format!("S{i}"), "s".repeat(120 * KIB))).collect()),
            ("300 variables", (0..300).map(|i| plain(&format!("V{i}"), "v".into())).collect()),
            ("a 300 character name", vec![plain(&"N".repeat(300), "v".into())]),
        ];
        for (what, vars) in cases {
            let env = Env::new();
            let req = AcquireRequest { env: vars, ..request(&test_config("sandbox"), "env-1") };
            let err = env.provider().acquire(req).unwrap_err();
            assert_eq!(err.kind(), "rejected", "{what}: {err}");
            assert!(err.message().len() < 1_000, "{what}: a {} byte message", err.message().len());
            assert_untouched(&env);
        }
    }

    #[test]
    fn the_merged_env_is_held_to_the_same_limits() {
        let from_config: serde_json::Map<String, serde_json::Value> =
            (0..200).map(|i| (format!("C{i}"), json!("c".repeat(1000)))).collect();
        let config = config_with("sandbox", json!({"env": from_config}));
        let cases: Vec<(&str, Vec<EnvVar>)> = vec![
            ("301 variables", (0..100).map(|i| plain(&format!("R{i}"), "r".into())).collect()),
            ("260 KiB of plain env", vec![plain("BIG", "p".repeat(100 * KIB))]),
        ];
        for (what, vars) in cases {
            let env = Env::new();
            let err = env.provider().acquire(AcquireRequest { env: vars, ..request(&config, "env-2") }).unwrap_err();
            assert_eq!(err.kind(), "rejected", "{what}: {err}");
            assert!(
                err.message().contains("config and the request") || err.message().contains("together"),
                "{what}: {err}"
            );
            assert_untouched(&env);
        }
    }

    #[test]
    fn an_object_over_etcds_limit_is_refused_before_any_call() {
        let env = Env::new();
        // Within every per-value limit, but JSON writes each control character as six bytes.
        let vars = (0..8).map(|i| secret(&format!("S{i}"), "\u{1}".repeat(127 * KIB))).collect();
        let err = env.provider().acquire(AcquireRequest { env: vars, ..request(&test_config("job"), "obj-1") });
        let err = err.unwrap_err();
        assert_eq!(err.kind(), "rejected", "{err}");
        assert!(err.message().contains("1.5 MiB"), "{err}");
        assert_untouched(&env);
    }

    #[test]
    fn ids_over_their_limits_are_refused_before_the_config_is_read() {
        let long = "a".repeat(100_000);
        let base = AcquireRequest { config: "not json".into(), ..request(&test_config("job"), "id-1") };
        for req in [
            AcquireRequest { acquisition_id: long.clone(), ..base.clone() },
            AcquireRequest { run_id: long.clone(), ..base.clone() },
            AcquireRequest { agent_id: Some(long.clone()), ..base.clone() },
        ] {
            let env = Env::new();
            let err = env.provider().acquire(req).unwrap_err();
            assert_eq!(err.kind(), "rejected", "{err}");
            assert!(err.message().len() < 1_000, "a {} byte message", err.message().len());
            assert_untouched(&env);
        }
    }

    fn lease() -> Lease {
        Lease {
            provider_lease_id: "k8s:sandbox:sandboxes:pc-l-1".into(),
            backend: crate::Backend::Sandbox,
            namespace: "sandboxes".into(),
            api_version: "agents.x-k8s.io/v1beta1".into(),
            workload_uid: "u-1".into(),
            pod_name: Some("pc-l-1".into()),
            pod_uid: None,
            pod_ip: None,
            claimed_sandbox: None,
            expires_at: None,
            reusable: false,
            metadata: "{}".into(),
        }
    }

    #[test]
    fn lease_fields_over_their_limits_are_refused_before_any_call() {
        let long = "u".repeat(100_000);
        let config = test_config("sandbox");
        let leases = [
            Lease { provider_lease_id: format!("k8s:sandbox:sandboxes:{long}"), ..lease() },
            Lease { workload_uid: long.clone(), ..lease() },
            Lease { api_version: long.clone(), ..lease() },
            Lease { pod_name: Some(long.clone()), ..lease() },
        ];
        for lease in leases {
            let lease_ref = LeaseRef { lease, config: config.clone() };
            let env = Env::new();
            let p = env.provider();
            for err in [
                p.resume_check(lease_ref.clone()).unwrap_err(),
                p.renew(lease_ref.clone(), crate::testkit::NOW + 60_000).unwrap_err(),
                p.release(lease_ref.clone()).unwrap_err(),
                p.destroy(lease_ref.clone()).unwrap_err(),
            ] {
                assert_eq!(err.kind(), "rejected", "{err}");
                assert!(err.message().len() < 1_000, "a {} byte message", err.message().len());
            }
            assert_untouched(&env);
        }
        let text = raw_config(json!({"annotations": {"example.com/big": "a".repeat(5 * MIB)}}));
        let env = Env::new();
        let err = env.provider().renew(LeaseRef { lease: lease(), config: text }, crate::testkit::NOW + 60_000);
        assert_eq!(err.unwrap_err().kind(), "invalid-config");
        assert_untouched(&env);
    }

    #[test]
    fn a_config_within_every_limit_is_accepted() {
        let text = config_with("job", json!({"annotations": {"example.com/note": "a".repeat(200 * KIB)}}));
        let env = Env::new();
        env.provider().acquire(request(&text, "ok-1")).unwrap();
        let long_id = "a".repeat(60);
        let lease = env.provider().acquire(request(&test_config("job"), &long_id)).unwrap();
        assert!(lease.provider_lease_id.ends_with(&long_id));
    }
}
