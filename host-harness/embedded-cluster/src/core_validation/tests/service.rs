//! Services.

use super::*;

fn service(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

#[test]
fn service_names_are_dns1035_labels() {
    assert_clean(&validate_create("Service", &service(json!({"ports": [{"port": 80}]}))));
    let errs =
        validate_create("Service", &with(service(json!({"ports": [{"port": 80}]})), "/metadata/name", json!("1web")));
    assert!(find(&errs, "metadata.name", "FieldValueInvalid").detail.starts_with("a DNS-1035 label must consist of"));
}

#[test]
fn service_ports() {
    let errs = validate_create(
        "Service",
        &service(json!({"ports": [
            {"port": 0, "protocol": "ICMP"},
            {"port": 80, "name": "web", "targetPort": "8080"},
            {"port": 81, "name": "web", "targetPort": 70000},
            {"port": 80, "name": "dup-port", "nodePort": 30080}
        ]})),
    );
    find(&errs, "spec.ports[0].name", "FieldValueRequired");
    assert_eq!(
        find(&errs, "spec.ports[0].port", "FieldValueInvalid").message(),
        "Invalid value: 0: must be between 1 and 65535, inclusive"
    );
    find(&errs, "spec.ports[0].protocol", "FieldValueNotSupported");
    assert_eq!(
        find(&errs, "spec.ports[1].targetPort", "FieldValueInvalid").detail,
        "must contain at least one letter (a-z)"
    );
    find(&errs, "spec.ports[2].name", "FieldValueDuplicate");
    find(&errs, "spec.ports[2].targetPort", "FieldValueInvalid");
    assert_eq!(
        find(&errs, "spec.ports[3].nodePort", "FieldValueForbidden").detail,
        "may not be used when `type` is 'ClusterIP'"
    );
    find(&errs, "spec.ports[3]", "FieldValueDuplicate");
    let errs = validate_create("Service", &service(json!({})));
    find(&errs, "spec.ports", "FieldValueRequired");
}

#[test]
fn service_types_and_ips() {
    let errs = validate_create("Service", &service(json!({"type": "Magic", "ports": [{"port": 80}]})));
    assert_eq!(
        find(&errs, "spec.type", "FieldValueNotSupported").message(),
        "Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
    );
    let errs = validate_create("Service", &service(json!({"type": "ExternalName"})));
    find(&errs, "spec.externalName", "FieldValueRequired");
    assert_clean(&validate_create(
        "Service",
        &service(json!({"type": "ExternalName", "externalName": "db.example.com."})),
    ));
    let errs =
        validate_create("Service", &service(json!({"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]})));
    assert_eq!(
        find(&errs, "spec.clusterIPs[0]", "FieldValueInvalid").detail,
        "may not be set to 'None' for NodePort services"
    );
    let errs = validate_create("Service", &service(json!({"clusterIP": "10.0.0.300", "ports": [{"port": 80}]})));
    find(&errs, "spec.clusterIPs[0]", "FieldValueInvalid");
    assert_clean(&validate_create("Service", &service(json!({"clusterIP": "None"}))));
    let errs = validate_create("Service", &service(json!({"externalTrafficPolicy": "Local", "ports": [{"port": 80}]})));
    assert_eq!(
        find(&errs, "spec.externalTrafficPolicy", "FieldValueInvalid").detail,
        "may only be set for externally-accessible services"
    );
}

#[test]
fn service_cluster_ip_is_immutable() {
    let old = created("Service", service(json!({"ports": [{"port": 80}]})));
    assert_clean(&validate_update(
        "Service",
        &service(json!({"ports": [{"port": 80}, {"port": 81, "name": "b"}]})).pipe_names(),
        &old,
    ));
    let moved =
        with(with(old.clone(), "/spec/clusterIP", json!("10.96.0.99")), "/spec/clusterIPs", json!(["10.96.0.99"]));
    let errs = validate_update("Service", &moved, &old);
    assert_eq!(
        find(&errs, "spec.clusterIPs[0]", "FieldValueInvalid").message(),
        "Invalid value: []string{\"10.96.0.99\"}: may not change once set"
    );
    let headless = created("Service", service(json!({"clusterIP": "None"})));
    assert_clean(&validate_update("Service", &headless.clone(), &headless));
    let errs = validate_update(
        "Service",
        &with(with(headless.clone(), "/spec/clusterIP", json!("10.96.0.5")), "/spec/clusterIPs", json!(["10.96.0.5"])),
        &headless,
    );
    find(&errs, "spec.clusterIPs[0]", "FieldValueInvalid");
}

trait PipeNames {
    fn pipe_names(self) -> Value;
}

impl PipeNames for Value {
    /// Names the first port too, since services with several ports need named ports.
    fn pipe_names(self) -> Value {
        with(self, "/spec/ports/0/name", json!("a"))
    }
}
