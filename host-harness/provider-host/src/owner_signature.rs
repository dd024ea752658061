//! Signed ownership: with the operator's key, the host signs every object it creates, so an
//! object someone else made with the managed-by label is not the installation's.
//!
//! The managed-by label ([`crate::ownership`]) is a claim anyone who may create objects in the
//! namespace can make. The operator's **ownership key** (a secret of at least 32 bytes in a
//! file, see [`OwnershipKeys::parse`]) turns it into proof: on every create the host writes the
//! **signature annotation**, an HMAC-SHA-256 under the key over the object's **subject** (its
//! API group and resource, namespace, name, the owner id and the lease's acquisition-id label),
//! and an object is owned only when its signature verifies under one of the operator's keys.
//! The subject holds no uid (the API server assigns it after the signature is written), so a
//! signature copied onto another object verifies only for an object of the same type, namespace,
//! name and lease: one that can exist only once the signed object is gone. The lease's uid
//! scope ([`crate::lease_scope`]) then refuses it for every call on that lease, and a patch or
//! delete carries the uid the host read.
//!
//! Keys rotate: the file's first key signs, every key in it verifies, so an operator adds the
//! new key first, keeps the old one below it until the objects signed with it are gone, then
//! drops it. Without a key the label alone is ownership, as before, and `probe` and
//! `policy show` say so.
//!
//! What a signature does not cover: objects the cluster's controllers create (a Job's or a
//! Sandbox's pod, a claim's Sandbox) are dependents, proved by their controller chain, and an
//! `ownerReference` is written by whoever creates the object; someone who may create pods in the
//! namespace can make one that names a signed Job as its controller. Grant nobody else `create`
//! on pods in the sandboxes' namespaces (the README's threat model says more).

use std::fmt;
use std::path::Path;

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::bindings::kube::ResourceType;
use crate::compile_cache::hex;
use crate::records::{Diagnostic, Severity};
use contract::labels::LABEL_ACQUISITION_ID;

/// The annotation that carries an object's signature.
pub const SIGNATURE_ANNOTATION: &str = "sandbox.paperclip.io/owner-signature";

/// The probe warning of a host that runs without an ownership key.
pub const UNSIGNED_OWNERSHIP: &str = "unsigned-ownership";

/// Shortest key accepted: HMAC-SHA-256's own block of security.
pub const MIN_KEY_BYTES: usize = 32;

/// The version tag of the signed message and of the annotation's value: a later format gets a
/// new tag and verifies beside this one.
const VERSION: &str = "v1";

/// What a signature is over: everything that names an object and its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject<'a> {
    /// The API group (`""` for the core group).
    pub group: &'a str,
    /// The resource's plural (`jobs`).
    pub plural: &'a str,
    /// The object's namespace (`""` for a cluster-scoped one).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The installation's owner id.
    pub owner_id: &'a str,
    /// The object's acquisition-id label (`""` when it has none).
    pub acquisition_id: &'a str,
}

impl<'a> Subject<'a> {
    /// The subject of an object of type `rt` as the API server returns it.
    pub fn of(rt: &'a ResourceType, object: &'a Value, owner_id: &'a str) -> Self {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
        Subject {
            group: &rt.group,
            plural: &rt.plural,
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name"),
            owner_id,
            acquisition_id: object
                .pointer("/metadata/labels")
                .and_then(|labels| labels.get(LABEL_ACQUISITION_ID))
                .and_then(Value::as_str)
                .unwrap_or_default(),
        }
    }

    /// The signed bytes: a tag, then every field with its length, so no two subjects share them.
    fn message(&self) -> Vec<u8> {
        let mut out = format!("paperclip-sandbox-host ownership {VERSION}\n").into_bytes();
        for field in [self.group, self.plural, self.namespace, self.name, self.owner_id, self.acquisition_id] {
            out.extend_from_slice(format!("{}:", field.len()).as_bytes());
            out.extend_from_slice(field.as_bytes());
            out.push(b'\n');
        }
        out
    }
}

/// The operator's ownership keys: the first signs, all verify. Never printed: its `Debug` and
/// `Display` show a fingerprint only.
#[derive(Clone, PartialEq, Eq)]
pub struct OwnershipKeys {
    keys: Vec<Vec<u8>>,
}

impl OwnershipKeys {
    /// Keys from a key file's text: one key per line (its bytes as written, surrounding
    /// whitespace removed), blank lines and `#` comments skipped; the first signs. Each key
    /// needs [`MIN_KEY_BYTES`] bytes (`openssl rand -base64 48` makes one). The error never
    /// quotes a line: it is a secret.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut keys = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.len() < MIN_KEY_BYTES {
                return Err(format!(
                    "the ownership key on line {} is {} bytes; a key needs at least {MIN_KEY_BYTES} (make one with \
                     `openssl rand -base64 48`)",
                    index + 1,
                    line.len()
                ));
            }
            keys.push(line.as_bytes().to_vec());
        }
        if keys.is_empty() {
            return Err("the ownership key file holds no key: put one per line, the signing key first".to_string());
        }
        Ok(Self { keys })
    }

    /// Keys from a file (see [`OwnershipKeys::parse`]); a key file others may read is refused,
    /// as ssh refuses such a private key.
    pub fn read_file(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let metadata =
            std::fs::metadata(path).map_err(|e| format!("cannot read the ownership key file {shown}: {e}"))?;
        refuse_shared_file(&metadata, path)?;
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read the ownership key file {shown}: {e}"))?;
        Self::parse(&text).map_err(|why| format!("{shown}: {why}"))
    }

    /// The annotation value that proves `subject` was created by this installation.
    pub fn sign(&self, subject: &Subject<'_>) -> String {
        let tag = mac(&self.keys[0], &subject.message()).finalize().into_bytes();
        format!("{VERSION}.{}", hex(&tag))
    }

    /// Whether `signature` proves `subject` under one of the keys (compared in constant time).
    pub fn verify(&self, subject: &Subject<'_>, signature: &str) -> bool {
        let Some(tag) = signature.strip_prefix(VERSION).and_then(|rest| rest.strip_prefix('.')).and_then(unhex) else {
            return false;
        };
        let message = subject.message();
        self.keys.iter().any(|key| mac(key, &message).verify_slice(&tag).is_ok())
    }

    /// How many keys verify.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Never true: [`OwnershipKeys::parse`] refuses an empty file.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Names the signing key without revealing it: the start of its HMAC over a fixed text, so
    /// operators can tell which key each replica runs with.
    pub fn fingerprint(&self) -> String {
        let tag = mac(&self.keys[0], b"paperclip-sandbox-host key fingerprint").finalize().into_bytes();
        hex(&tag[..6])
    }
}

impl fmt::Debug for OwnershipKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnershipKeys({self})")
    }
}

impl fmt::Display for OwnershipKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "signing key {}, {} verifying", self.fingerprint(), self.keys.len())
    }
}

fn mac(key: &[u8], message: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac
}

#[cfg(unix)]
fn refuse_shared_file(metadata: &std::fs::Metadata, path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = metadata.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "the ownership key file {} may be read by others (mode {:o}): `chmod 600` it (a Kubernetes Secret volume \
             with `defaultMode: 0400` is fine)",
            path.display(),
            mode & 0o777
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_shared_file(_: &std::fs::Metadata, _: &Path) -> Result<(), String> {
    Ok(())
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

/// The signature annotation's value on `object`, if any.
pub fn signature(object: &Value) -> Option<&str> {
    object.pointer("/metadata/annotations")?.get(SIGNATURE_ANNOTATION)?.as_str()
}

/// The probe warning of a host without a key: the label alone is ownership.
pub fn probe_finding(keys: Option<&OwnershipKeys>) -> Option<Diagnostic> {
    if keys.is_some() {
        return None;
    }
    Some(Diagnostic {
        severity: Severity::Warning,
        code: UNSIGNED_OWNERSHIP.to_string(),
        message: UNSIGNED_MEANS.to_string(),
    })
}

/// What running without a key means, for `probe` and `policy show`.
pub const UNSIGNED_MEANS: &str = "the host has no ownership key, so the managed-by label alone makes an object this \
                                  installation's: anyone who may create objects in the namespace can make one the \
                                  host will renew, exec into and delete. Set `ownership-key-file` in the policy (or \
                                  `--ownership-key-file`)";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "0123456789abcdef0123456789abcdef-first";
    const OLD: &str = "fedcba9876543210fedcba9876543210-older";

    fn subject<'a>(name: &'a str, acquisition_id: &'a str) -> Subject<'a> {
        Subject { group: "batch", plural: "jobs", namespace: "agents", name, owner_id: "team", acquisition_id }
    }

    #[test]
    fn a_signature_verifies_only_for_its_subject() {
        let keys = OwnershipKeys::parse(KEY).expect("a key");
        let signature = keys.sign(&subject("pc-1", "a1"));
        assert!(keys.verify(&subject("pc-1", "a1"), &signature));
        for other in [
            subject("pc-2", "a1"),
            subject("pc-1", "a2"),
            Subject { plural: "secrets", group: "", ..subject("pc-1", "a1") },
            Subject { namespace: "other", ..subject("pc-1", "a1") },
            Subject { owner_id: "team-b", ..subject("pc-1", "a1") },
            // Lengths keep fields apart: moving a character from one field to the next changes the message.
            Subject { name: "pc-1a", acquisition_id: "1", ..subject("", "") },
        ] {
            assert!(!keys.verify(&other, &signature), "{other:?}");
        }
        let stranger = OwnershipKeys::parse(OLD).expect("a key");
        assert!(!stranger.verify(&subject("pc-1", "a1"), &signature), "another key proves nothing");
        for garbage in ["", "v1.", "v1.zz", "v2.00", &signature[..signature.len() - 2], &signature.replace("v1.", "")] {
            assert!(!keys.verify(&subject("pc-1", "a1"), garbage), "{garbage:?}");
        }
    }

    #[test]
    fn the_first_key_signs_and_every_key_verifies() {
        let old = OwnershipKeys::parse(OLD).expect("a key");
        let rotated = OwnershipKeys::parse(&format!("# new first\n{KEY}\n\n  {OLD}  \n")).expect("two keys");
        assert_eq!(rotated.len(), 2);
        let signed_before = old.sign(&subject("pc-1", "a1"));
        assert!(rotated.verify(&subject("pc-1", "a1"), &signed_before), "objects signed with the old key stay owned");
        let signed_now = rotated.sign(&subject("pc-1", "a1"));
        assert_eq!(signed_now, OwnershipKeys::parse(KEY).expect("a key").sign(&subject("pc-1", "a1")));
        assert!(!old.verify(&subject("pc-1", "a1"), &signed_now));
    }

    #[test]
    fn short_or_missing_keys_are_refused_without_quoting_them() {
        let short = "a-short-secret-value";
        let error = OwnershipKeys::parse(&format!("# comment\n{short}\n")).expect_err("too short");
        assert!(error.contains("line 2") && error.contains("20 bytes"), "{error}");
        assert!(!error.contains(short));
        assert!(OwnershipKeys::parse("\n# only a comment\n").is_err());
    }

    #[test]
    fn keys_never_show_in_debug_or_display() {
        let keys = OwnershipKeys::parse(KEY).expect("a key");
        for shown in [format!("{keys:?}"), keys.to_string()] {
            assert!(!shown.contains("0123456789abcdef") && shown.contains(&keys.fingerprint()), "{shown}");
        }
        assert_ne!(keys.fingerprint(), OwnershipKeys::parse(OLD).expect("a key").fingerprint());
    }

    #[test]
    fn a_key_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("owner-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("key");
        std::fs::write(&path, format!("{KEY}\n")).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let error = OwnershipKeys::read_file(&path).expect_err("world-readable");
        assert!(error.contains("chmod 600") && !error.contains(KEY), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(OwnershipKeys::read_file(&path), OwnershipKeys::parse(KEY));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn subjects_are_read_from_objects_as_served() {
        let rt = ResourceType { group: "batch".into(), version: "v1".into(), plural: "jobs".into() };
        let object = json!({"metadata": {"name": "pc-1", "namespace": "agents",
            "labels": {LABEL_ACQUISITION_ID: "a1"}, "annotations": {SIGNATURE_ANNOTATION: "v1.00"}}});
        assert_eq!(Subject::of(&rt, &object, "team"), subject("pc-1", "a1"));
        assert_eq!(signature(&object), Some("v1.00"));
        assert_eq!(Subject::of(&rt, &json!({}), "team").name, "");
    }
}
