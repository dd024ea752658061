//! Pod specs on create.

use super::*;

#[test]
fn minimal_pod_is_valid_with_or_without_defaults() {
    assert_clean(&validate_create("Pod", &simple_pod()));
    assert_clean(&validate_create("Pod", &created("Pod", simple_pod())));
}

#[test]
fn pod_requires_containers_and_images() {
    let errs = pod_errs(json!({}));
    assert_eq!(find(&errs, "spec.containers", "FieldValueRequired").to_string(), "spec.containers: Required value");
    let errs = pod_errs(json!({"containers": []}));
    find(&errs, "spec.containers", "FieldValueRequired");
    let errs = pod_errs(json!({"containers": [{"name": "a"}]}));
    find(&errs, "spec.containers[0].image", "FieldValueRequired");
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": " nginx"}]}));
    assert_eq!(
        find(&errs, "spec.containers[0].image", "FieldValueInvalid").detail,
        "must not have leading or trailing whitespace"
    );
}

#[test]
fn container_names_are_labels_and_unique_across_init_containers() {
    let errs = pod_errs(json!({
        "initContainers": [{"name": "app", "image": "x"}, {"name": "Bad_Name", "image": "x"}],
        "containers": [{"name": "app", "image": "x"}, {"name": "app", "image": "x"}, {"image": "x"}]
    }));
    assert_eq!(find(&errs, "spec.containers[1].name", "FieldValueDuplicate").message(), "Duplicate value: \"app\"");
    find(&errs, "spec.initContainers[0].name", "FieldValueDuplicate");
    find(&errs, "spec.initContainers[1].name", "FieldValueInvalid");
    find(&errs, "spec.containers[2].name", "FieldValueRequired");
}

#[test]
fn container_ports() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "ports": [
        {"containerPort": 0},
        {"containerPort": 70000, "name": "http"},
        {"containerPort": 80, "name": "http", "protocol": "ICMP"},
        {"containerPort": 81, "name": "Not_Valid"},
        {"containerPort": 82, "hostPort": 8080},
        {"containerPort": 83, "hostPort": 8080}
    ]}]}));
    find(&errs, "spec.containers[0].ports[0].containerPort", "FieldValueRequired");
    assert_eq!(
        find(&errs, "spec.containers[0].ports[1].containerPort", "FieldValueInvalid").to_string(),
        "spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"
    );
    find(&errs, "spec.containers[0].ports[2].name", "FieldValueDuplicate");
    assert_eq!(
        find(&errs, "spec.containers[0].ports[2].protocol", "FieldValueNotSupported").message(),
        "Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
    );
    find(&errs, "spec.containers[0].ports[3].name", "FieldValueInvalid");
    assert_eq!(
        find(&errs, "spec.containers[0].ports[5].hostPort", "FieldValueDuplicate").message(),
        "Duplicate value: \"TCP//8080\""
    );
}

#[test]
fn env_names_and_sources() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "env": [
        {"name": "1_RELAXED_OK", "value": "v"},
        {"name": "A=B"},
        {"name": ""},
        {"name": "NOSRC", "valueFrom": {}},
        {"name": "BOTH", "value": "v", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TWO", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}, "secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "NOKEY", "valueFrom": {"secretKeyRef": {"name": "s"}}},
        {"name": "BADPATH", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}},
        {"name": "LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "RES", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}
    ]}]}));
    let env = "spec.containers[0].env";
    assert!(!errs.iter().any(|e| e.field == format!("{env}[0].name")));
    assert_eq!(
        find(&errs, &format!("{env}[1].name"), "FieldValueInvalid").detail,
        "a valid environment variable name must consist only of printable ASCII characters other than '='"
    );
    find(&errs, &format!("{env}[2].name"), "FieldValueRequired");
    assert_eq!(
        find(&errs, &format!("{env}[3].valueFrom"), "FieldValueInvalid").message(),
        "Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
    );
    assert_eq!(
        find(&errs, &format!("{env}[4].valueFrom"), "FieldValueInvalid").detail,
        "may not be specified when `value` is not empty"
    );
    assert_eq!(
        find(&errs, &format!("{env}[5].valueFrom"), "FieldValueInvalid").detail,
        "may not have more than one field specified at a time"
    );
    find(&errs, &format!("{env}[6].valueFrom.secretKeyRef.key"), "FieldValueRequired");
    find(&errs, &format!("{env}[7].valueFrom.fieldRef.fieldPath"), "FieldValueNotSupported");
    assert!(!errs.iter().any(|e| e.field.starts_with(&format!("{env}[8]"))));
    find(&errs, &format!("{env}[9].valueFrom.resourceFieldRef.resource"), "FieldValueNotSupported");
}

#[test]
fn env_from_sources() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "envFrom": [
        {"prefix": "OK_"},
        {"secretRef": {"name": ""}},
        {"configMapRef": {"name": "cm"}, "secretRef": {"name": "s"}},
        {"configMapRef": {"name": "trailing-"}}
    ]}]}));
    let list = "spec.containers[0].envFrom";
    let at_list: Vec<&FieldError> = errs.iter().filter(|e| e.field == list).collect();
    assert_eq!(at_list.len(), 2);
    assert_eq!(at_list[0].detail, "must specify one of: `configMapRef` or `secretRef`");
    assert_eq!(at_list[1].detail, "may not have more than one field specified at a time");
    find(&errs, &format!("{list}[1].secretRef.name"), "FieldValueRequired");
    assert!(!errs.iter().any(|e| e.field.starts_with(&format!("{list}[3]"))));
}

#[test]
fn volumes_and_mounts() {
    let errs = pod_errs(json!({
        "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "data", "emptyDir": {}},
            {"name": "Bad", "emptyDir": {}},
            {"name": "two", "emptyDir": {}, "secret": {"secretName": "s"}},
            {"name": "nosecret", "secret": {}},
            {"name": "mode", "configMap": {"name": "c", "defaultMode": 512}}
        ],
        "containers": [{"name": "a", "image": "x", "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "x", "mountPath": "/data"},
            {"name": "data", "mountPath": "/other", "subPath": "../etc"},
            {"name": "nosecret", "mountPath": "/s"}
        ]}]
    }));
    assert_eq!(find(&errs, "spec.volumes[1].name", "FieldValueDuplicate").message(), "Duplicate value: \"data\"");
    find(&errs, "spec.volumes[2].name", "FieldValueInvalid");
    assert_eq!(
        find(&errs, "spec.volumes[3].secret", "FieldValueForbidden").detail,
        "may not specify more than 1 volume type"
    );
    find(&errs, "spec.volumes[4].secret.secretName", "FieldValueRequired");
    assert_eq!(
        find(&errs, "spec.volumes[5].configMap.defaultMode", "FieldValueInvalid").detail,
        "must be a number between 0 and 0777 (octal), both inclusive"
    );
    let m = "spec.containers[0].volumeMounts";
    assert_eq!(
        find(&errs, &format!("{m}[1].name"), "FieldValueInvalid").to_string(),
        format!("{m}[1].name: Invalid value: \"x\": not found")
    );
    assert_eq!(find(&errs, &format!("{m}[1].mountPath"), "FieldValueInvalid").detail, "must be unique");
    assert_eq!(find(&errs, &format!("{m}.subPath"), "FieldValueInvalid").detail, "must not contain '..'");
    find(&errs, &format!("{m}[3].name"), "FieldValueInvalid");
}

#[test]
fn restart_and_dns_policies() {
    let errs = pod_errs(
        json!({"restartPolicy": "Sometimes", "dnsPolicy": "Magic", "containers": [{"name": "a", "image": "x"}]}),
    );
    assert_eq!(
        find(&errs, "spec.restartPolicy", "FieldValueNotSupported").message(),
        "Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
    );
    assert_eq!(
        find(&errs, "spec.dnsPolicy", "FieldValueNotSupported").message(),
        "Unsupported value: \"Magic\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\""
    );
    let errs = pod_errs(json!({"dnsPolicy": "None", "containers": [{"name": "a", "image": "x"}]}));
    assert_eq!(
        find(&errs, "spec.dnsConfig", "FieldValueRequired").detail,
        "must provide `dnsConfig` when `dnsPolicy` is None"
    );
    let errs = pod_errs(
        json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1", "nope"]}, "containers": [{"name": "a", "image": "x"}]}),
    );
    find(&errs, "spec.dnsConfig.nameservers[1]", "FieldValueInvalid");
    assert_eq!(errs.len(), 1);
}

#[test]
fn resources_requests_within_limits() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "resources": {
        "limits": {"cpu": "500m", "memory": "1Gi"},
        "requests": {"cpu": "1", "memory": "1024Mi"}
    }}]}));
    let e = find(&errs, "spec.containers[0].resources.requests", "FieldValueInvalid");
    assert_eq!(e.message(), "Invalid value: \"1\": must be less than or equal to cpu limit of 500m");
    assert_eq!(errs.len(), 1);
    assert_clean(&pod_errs(json!({"containers": [{"name": "a", "image": "x", "resources": {
        "limits": {"cpu": "1.5", "memory": "128Mi"}, "requests": {"cpu": "1500m", "memory": "100M"}}}]})));
}

#[test]
fn resource_names_and_quantities() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "resources": {
        "limits": {"cpu": "lots", "memory": "-1", "foo": "1", "example.com/gpu": "2"},
        "requests": {"example.com/gpu": "1", "example.com/fpga": "1", "example.com/half": "0.5"}
    }}]}));
    let lim = "spec.containers[0].resources.limits";
    assert_eq!(
        find(&errs, &format!("{lim}[cpu]"), "FieldValueInvalid").detail,
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    assert_eq!(
        find(&errs, &format!("{lim}[memory]"), "FieldValueInvalid").detail,
        "must be greater than or equal to 0"
    );
    assert_eq!(
        find(&errs, &format!("{lim}[foo]"), "FieldValueInvalid").detail,
        "must be a standard resource for containers"
    );
    let req = "spec.containers[0].resources.requests";
    assert_eq!(find(&errs, req, "FieldValueInvalid").detail, "must be equal to example.com/gpu limit of 2");
    let missing: Vec<&FieldError> =
        errs.iter().filter(|e| e.field == lim && e.reason() == "FieldValueRequired").collect();
    assert_eq!(missing.len(), 2);
    assert_eq!(missing[0].detail, "Limit must be set for non overcommitable resources");
    assert_eq!(find(&errs, &format!("{req}[example.com/half]"), "FieldValueInvalid").detail, "must be an integer");
}

#[test]
fn pod_level_numbers_and_security_context() {
    let errs = pod_errs(json!({
        "activeDeadlineSeconds": 0,
        "terminationGracePeriodSeconds": -1,
        "securityContext": {"runAsUser": -1, "supplementalGroups": [5, -5]},
        "containers": [{"name": "a", "image": "x", "securityContext": {"runAsGroup": 4294967296i64, "privileged": true, "allowPrivilegeEscalation": false}}]
    }));
    assert_eq!(
        find(&errs, "spec.activeDeadlineSeconds", "FieldValueInvalid").message(),
        "Invalid value: 0: must be between 1 and 2147483647, inclusive"
    );
    assert_eq!(
        find(&errs, "spec.terminationGracePeriodSeconds", "FieldValueInvalid").detail,
        "must be greater than or equal to 0"
    );
    assert_eq!(
        find(&errs, "spec.securityContext.runAsUser", "FieldValueInvalid").message(),
        "Invalid value: -1: must be between 0 and 2147483647, inclusive"
    );
    find(&errs, "spec.securityContext.supplementalGroups[1]", "FieldValueInvalid");
    find(&errs, "spec.containers[0].securityContext.runAsGroup", "FieldValueInvalid");
    assert_eq!(
        find(&errs, "spec.containers[0].securityContext", "FieldValueInvalid").detail,
        "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"
    );
}

#[test]
fn tolerations_operators_and_effects() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x"}], "tolerations": [
        {"key": "k", "operator": "Like", "effect": "NoExecute"},
        {"key": "k", "operator": "Equal", "value": "v", "effect": "Sometimes"},
        {"operator": "Equal", "value": "v"},
        {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 10},
        {"key": "k", "operator": "Exists", "value": "v"},
        {"key": "bad key", "operator": "Exists"}
    ]}));
    assert_eq!(
        find(&errs, "spec.tolerations[0].operator", "FieldValueNotSupported").message(),
        "Unsupported value: \"Like\": supported values: \"Equal\", \"Exists\""
    );
    assert_eq!(
        find(&errs, "spec.tolerations[1].effect", "FieldValueNotSupported").message(),
        "Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
    );
    assert_eq!(
        find(&errs, "spec.tolerations[2].operator", "FieldValueInvalid").detail,
        "operator must be Exists when `key` is empty, which means \"match all values and all keys\""
    );
    assert_eq!(
        find(&errs, "spec.tolerations[3].effect", "FieldValueInvalid").detail,
        "effect must be 'NoExecute' when `tolerationSeconds` is set"
    );
    assert_eq!(
        find(&errs, "spec.tolerations[4].operator", "FieldValueInvalid").detail,
        "value must be empty when `operator` is 'Exists'"
    );
    find(&errs, "spec.tolerations[5].key", "FieldValueInvalid");
}

#[test]
fn node_selector_and_names_in_spec() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x"}],
        "nodeSelector": {"disk": "ssd!"}, "nodeName": "Node_1", "serviceAccountName": "SA", "hostname": "a.b",
        "priorityClassName": "high", "preemptionPolicy": "Always"}));
    find(&errs, "spec.nodeSelector", "FieldValueInvalid");
    find(&errs, "spec.nodeName", "FieldValueInvalid");
    find(&errs, "spec.serviceAccountName", "FieldValueInvalid");
    assert_eq!(find(&errs, "spec.hostname", "FieldValueInvalid").detail, "must not contain dots");
    find(&errs, "spec.preemptionPolicy", "FieldValueNotSupported");
    assert_eq!(errs.len(), 5);
}

#[test]
fn pod_create_rejects_ephemeral_containers_and_restart_policy_on_regular_containers() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "restartPolicy": "Always"}],
        "initContainers": [{"name": "side", "image": "x", "restartPolicy": "Never"}],
        "ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}));
    find(&errs, "spec.ephemeralContainers", "FieldValueForbidden");
    assert_eq!(
        find(&errs, "spec.containers[0].restartPolicy", "FieldValueForbidden").detail,
        "may not be set for non-init containers"
    );
    find(&errs, "spec.initContainers[0].restartPolicy", "FieldValueNotSupported");
}
