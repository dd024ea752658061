use serde_json::{Value, json};

use super::*;

/// A pod that meets the restricted level, as the provider's default pod does.
fn restricted_pod() -> Value {
    json!({
        "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "busybox",
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
        "volumes": [{"name": "w", "emptyDir": {}}, {"name": "p", "persistentVolumeClaim": {"claimName": "x"}}]
    })
}

/// `restricted_pod` with `patch` merged into the container (`c`), or into the pod.
fn with(container: Value, pod: Value) -> Value {
    let mut spec = restricted_pod();
    merge(&mut spec["containers"][0], container);
    merge(&mut spec, pod);
    spec
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

fn checks(level: Level, spec: &Value) -> Vec<&'static str> {
    evaluate(level, spec).into_iter().map(|v| v.check).collect()
}

#[test]
fn a_restricted_pod_passes_every_level() {
    for level in [Level::Privileged, Level::Baseline, Level::Restricted] {
        assert_eq!(evaluate(level, &restricted_pod()), [], "{level:?}");
    }
}

#[test]
fn a_bare_pod_fails_only_restricted_with_upstreams_words() {
    let bare = json!({"containers": [{"name": "c", "image": "busybox"}]});
    assert_eq!(evaluate(Level::Baseline, &bare), []);
    let violations = evaluate(Level::Restricted, &bare);
    let message = forbidden_message("x", Level::Restricted, "latest", &violations);
    assert_eq!(
        message,
        "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false \
         (container \"c\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities \
         (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or \
         container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must \
         set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
}

#[test]
fn the_testers_config_fails_at_both_levels() {
    let hostile = with(
        json!({"securityContext": {"runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": true,
            "capabilities": {"add": ["ALL"], "drop": null}}}),
        json!({"securityContext": {"runAsUser": 0, "runAsNonRoot": false, "seccompProfile": {"type": "Unconfined"}}}),
    );
    assert_eq!(checks(Level::Baseline, &hostile), ["capabilities_baseline", "seccompProfile_baseline"]);
    assert_eq!(
        checks(Level::Restricted, &hostile),
        [
            "allowPrivilegeEscalation",
            "capabilities_restricted",
            "runAsNonRoot",
            "runAsUser",
            "seccompProfile_restricted"
        ]
    );
    let reasons: Vec<String> = evaluate(Level::Restricted, &hostile).into_iter().map(|v| v.reason).collect();
    assert!(reasons.contains(&"runAsUser=0 (pod and container \"c\" must not set runAsUser=0)".into()));
    assert!(reasons.contains(
        &"runAsNonRoot != true (pod and container \"c\" must not set securityContext.runAsNonRoot=false)".into()
    ));
    assert!(reasons.iter().any(|r| r.contains("must not include \"ALL\" in securityContext.capabilities.add")));
    assert!(
        reasons.contains(
            &"seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")".into()
        )
    );
    assert_eq!(checks(Level::Privileged, &hostile), Vec::<&str>::new());
}

#[test]
fn each_baseline_check_finds_its_field() {
    let cases = [
        (
            json!({}),
            json!({"hostNetwork": true, "hostPID": true}),
            "hostNamespaces",
            "host namespaces (hostNetwork=true, hostPID=true)",
        ),
        (
            json!({"securityContext": {"privileged": true}}),
            json!({}),
            "privileged",
            "privileged (container \"c\" must not set securityContext.privileged=true)",
        ),
        (
            json!({"securityContext": {"capabilities": {"add": ["SYS_ADMIN", "NET_ADMIN", "CHOWN"]}}}),
            json!({}),
            "capabilities_baseline",
            "non-default capabilities (container \"c\" must not include \"SYS_ADMIN\", \"NET_ADMIN\" in securityContext.capabilities.add)",
        ),
        (
            json!({}),
            json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
            "hostPathVolumes",
            "hostPath volumes (volume \"root\")",
        ),
        (
            json!({"ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 1}]}),
            json!({}),
            "hostPorts",
            "hostPort (container \"c\" uses hostPort 80)",
        ),
        (
            json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
            json!({}),
            "appArmorProfile",
            "forbidden AppArmor profile (container \"c\" must not set securityContext.appArmorProfile.type to \"Unconfined\")",
        ),
        (
            json!({}),
            json!({"securityContext": {"seLinuxOptions": {"type": "spc_t", "user": "root"}}}),
            "seLinuxOptions",
            "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user \"root\")",
        ),
        (
            json!({"securityContext": {"procMount": "Unmasked"}}),
            json!({}),
            "procMount",
            "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")",
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
            json!({}),
            "seccompProfile_baseline",
            "seccompProfile (container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")",
        ),
        (
            json!({}),
            json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"},
            {"name": "net.ipv4.tcp_syncookies", "value": "1"}]}}),
            "sysctls",
            "forbidden sysctls (kernel.msgmax)",
        ),
        (
            json!({"securityContext": {"windowsOptions": {"hostProcess": true}}}),
            json!({}),
            "windowsHostProcess",
            "hostProcess (container \"c\" must not set securityContext.windowsOptions.hostProcess=true)",
        ),
    ];
    for (container, pod, check, reason) in cases {
        let spec = with(container, pod);
        let found = evaluate(Level::Baseline, &spec);
        assert_eq!(found, [Violation { check, reason: reason.to_string() }], "{spec}");
        assert!(evaluate(Level::Privileged, &spec).is_empty());
        let restricted = checks(Level::Restricted, &spec);
        let replaced = match check {
            "capabilities_baseline" => "capabilities_restricted",
            "hostPathVolumes" => "restrictedVolumes",
            "seccompProfile_baseline" => "seccompProfile_restricted",
            other => other,
        };
        assert!(restricted.contains(&replaced), "{check} at restricted: {restricted:?}");
        assert!(!restricted.contains(&check) || check == replaced, "{check} is replaced at restricted");
    }
}

#[test]
fn apparmor_annotations_are_read_from_the_metadata() {
    let meta = json!({"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined",
        "container.apparmor.security.beta.kubernetes.io/d": "localhost/mine", "other": "x"}});
    let found = evaluate_pod(Level::Baseline, Some(&meta), &restricted_pod(), &[] as &[&str]);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].reason,
        "forbidden AppArmor profile (container.apparmor.security.beta.kubernetes.io/c=\"unconfined\")"
    );
}

#[test]
fn each_restricted_check_finds_its_field() {
    let cases = [
        (
            json!({"securityContext": {"allowPrivilegeEscalation": null}}),
            json!({}),
            "allowPrivilegeEscalation",
            "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)",
        ),
        (
            json!({"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"]}}}),
            json!({}),
            "capabilities_restricted",
            "unrestricted capabilities (container \"c\" must not include \"CHOWN\" in securityContext.capabilities.add)",
        ),
        (
            json!({"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}),
            json!({}),
            "capabilities_restricted",
            "unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"])",
        ),
        (
            json!({}),
            json!({"volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}]}),
            "restrictedVolumes",
            "restricted volume types (volume \"n\" uses restricted volume type \"nfs\")",
        ),
        (
            json!({}),
            json!({"securityContext": {"runAsNonRoot": null}}),
            "runAsNonRoot",
            "runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true)",
        ),
        (
            json!({"securityContext": {"runAsUser": 0}}),
            json!({}),
            "runAsUser",
            "runAsUser=0 (container \"c\" must not set runAsUser=0)",
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "Other"}}}),
            json!({}),
            "seccompProfile_restricted",
            "seccompProfile (container \"c\" must not set securityContext.seccompProfile.type to \"Other\")",
        ),
    ];
    for (container, pod, check, reason) in cases {
        let spec = with(container, pod);
        assert_eq!(evaluate(Level::Restricted, &spec), [Violation { check, reason: reason.to_string() }], "{spec}");
        assert_eq!(checks(Level::Baseline, &spec), Vec::<&str>::new(), "{check} is restricted only");
    }
}

#[test]
fn containers_may_satisfy_what_the_pod_leaves_unset() {
    let spec = json!({
        "initContainers": [{"name": "i", "securityContext": {"runAsNonRoot": true,
            "seccompProfile": {"type": "Localhost", "localhostProfile": "p"}, "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}],
        "containers": [{"name": "a", "securityContext": {"runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"}, "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]}}}, {"name": "b"}]
    });
    let found = evaluate(Level::Restricted, &spec);
    assert!(found.iter().all(|v| v.reason.contains("container \"b\"") && !v.reason.contains("\"a\"")), "{found:?}");
    assert_eq!(found.len(), 4);
}

#[test]
fn an_exempt_restricted_check_brings_back_its_baseline_check() {
    let spec = with(json!({"securityContext": {"capabilities": {"drop": [], "add": ["SYS_ADMIN"]}}}), json!({}));
    let exempt = |ids: &[&str]| {
        evaluate_pod(Level::Restricted, None, &spec, ids).into_iter().map(|v| v.check).collect::<Vec<_>>()
    };
    assert_eq!(exempt(&[]), ["capabilities_restricted"]);
    assert_eq!(exempt(&["capabilities_restricted"]), ["capabilities_baseline"]);
    assert_eq!(exempt(&["capabilities_restricted", "capabilities_baseline"]), Vec::<&str>::new());
    assert!(check_ids().any(|id| id == "runAsNonRoot"));
    assert_eq!(check_ids().count(), 17);
}
