//! The hardened pod defaults of a config: each loosening must be explicit and is warned.

use serde_json::Value;

use contract::quote;

use super::checker::{Checker, ptr};
use super::{CAPABILITIES_KEYS, SECURITY_KEYS, SeccompProfile, Security};

pub(super) fn check_security(c: &mut Checker, value: &Value, security: &mut Security) {
    let path = "/security";
    let Some(map) = c.object(value, path, SECURITY_KEYS) else {
        return;
    };
    let loosened = |c: &mut Checker, key: &str, what: &str| {
        c.warn(&ptr(path, key), format!("loosens a hardened default: {what}"));
    };
    if let Some(b) = c.boolean(map, path, "runAsNonRoot") {
        security.run_as_non_root = b;
        if !b {
            loosened(c, "runAsNonRoot", "the container may run as root");
        }
    }
    for (key, slot) in [
        ("runAsUser", &mut security.run_as_user),
        ("runAsGroup", &mut security.run_as_group),
        ("fsGroup", &mut security.fs_group),
    ] {
        if let Some(id) = c.integer(map, path, key, 0, i64::from(i32::MAX)) {
            *slot = id;
        }
    }
    if security.run_as_user == 0 {
        if security.run_as_non_root {
            c.error(
                &ptr(path, "runAsUser"),
                "is 0 (root) while runAsNonRoot is true; the kubelet would refuse the pod",
            );
        } else {
            loosened(c, "runAsUser", "the container runs as root");
        }
    }
    if let Some(b) = c.boolean(map, path, "allowPrivilegeEscalation") {
        security.allow_privilege_escalation = b;
        if b {
            loosened(c, "allowPrivilegeEscalation", "processes may gain privileges (setuid binaries)");
        }
    }
    if let Some(caps) = Checker::field(map, "capabilities") {
        let caps_path = ptr(path, "capabilities");
        if let Some(caps_map) = c.object(caps, &caps_path, CAPABILITIES_KEYS) {
            for key in ["drop", "add"] {
                if let Some(list) = c.string_list(caps_map, &caps_path, key) {
                    for (i, cap) in list.iter().enumerate() {
                        if cap.is_empty() || !cap.chars().all(|ch| ch.is_ascii_uppercase() || ch == '_') {
                            c.error(
                                &format!("{caps_path}/{key}/{i}"),
                                format!("{} is not a capability name (NET_BIND_SERVICE, ALL)", quote(cap)),
                            );
                        }
                    }
                    if key == "drop" {
                        security.capabilities.drop = list;
                    } else {
                        security.capabilities.add = list;
                    }
                }
            }
            if !security.capabilities.drop.iter().any(|d| d == "ALL") {
                loosened(c, "capabilities", "not every capability is dropped");
            }
            if !security.capabilities.add.is_empty() {
                loosened(c, "capabilities", "capabilities are added");
            }
        }
    }
    if c.one_of(map, path, "seccompProfile", &["RuntimeDefault", "Unconfined"]).as_deref() == Some("Unconfined") {
        security.seccomp_profile = SeccompProfile::Unconfined;
        loosened(c, "seccompProfile", "no seccomp filter");
    }
    if let Some(b) = c.boolean(map, path, "readOnlyRootFilesystem") {
        security.read_only_root_filesystem = b;
        if !b {
            loosened(c, "readOnlyRootFilesystem", "the image's filesystem is writable");
        }
    }
    if let Some(b) = c.boolean(map, path, "automountServiceAccountToken") {
        security.automount_service_account_token = b;
        if b {
            loosened(c, "automountServiceAccountToken", "the sandbox gets a Kubernetes API token");
        }
    }
}
