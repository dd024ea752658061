//! Services: ports, cluster IPs and updates.

use super::*;

pub(super) fn cluster_ips(spec: &Value) -> Vec<String> {
    let list: Vec<String> = arr_at(spec, "clusterIPs").iter().filter_map(Value::as_str).map(str::to_string).collect();
    if !list.is_empty() {
        return list;
    }
    nonempty_str_at(spec, "clusterIP").map(|ip| vec![ip.to_string()]).unwrap_or_default()
}

pub(super) fn validate_service(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Service", errs);
    let spec = t_obj(obj, "spec", "", errs).unwrap_or(&Value::Null);
    let path = "spec";
    let service_type = t_str(spec, "type", path, errs).unwrap_or("");
    let ips = cluster_ips(spec);
    let headless = ips.first().is_some_and(|ip| ip == "None");
    let ports = t_obj_list(spec, "ports", path, errs);
    if ports.is_empty() && !headless && service_type != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    match service_type {
        "LoadBalancer" | "NodePort" => {
            if headless {
                errs.push(invalid_str(
                    "spec.clusterIPs[0]",
                    "None",
                    format!("may not be set to 'None' for {service_type} services"),
                ));
            }
            if service_type == "LoadBalancer" {
                for (i, port, _) in &ports {
                    if int_at(port, "port") == Some(10250) {
                        errs.push(invalid_int(
                            idx("spec.ports", *i),
                            10250,
                            "may not expose port 10250 externally since it is used by kubelet",
                        ));
                    }
                }
            }
        }
        "ExternalName" => {
            if !arr_at(spec, "clusterIPs").is_empty() {
                errs.push(FieldError::forbidden("spec.clusterIPs", "may not be set for ExternalName services"));
            }
            if !arr_at(spec, "ipFamilies").is_empty() {
                errs.push(FieldError::forbidden("spec.ipFamilies", "may not be set for ExternalName services"));
            }
            if present(spec, "ipFamilyPolicy") {
                errs.push(FieldError::forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"));
            }
            let external = t_str(spec, "externalName", path, errs).unwrap_or("");
            let cname = external.strip_suffix('.').unwrap_or(external);
            if cname.is_empty() {
                errs.push(FieldError::required("spec.externalName", ""));
            } else {
                msgs_invalid(errs, "spec.externalName", cname, names::dns1123_subdomain(cname));
            }
        }
        _ => {}
    }
    let mut port_names = HashSet::new();
    let mut seen_ports = HashSet::new();
    for (i, port, pp) in &ports {
        service_port(port, pp, ports.len() > 1, &mut port_names, errs);
        if service_type == "ClusterIP" && int_at(port, "nodePort").unwrap_or(0) != 0 {
            errs.push(FieldError::forbidden(child(pp, "nodePort"), "may not be used when `type` is 'ClusterIP'"));
        }
        let protocol = str_at(port, "protocol").unwrap_or("");
        let number = int_at(port, "port").unwrap_or(0);
        if !seen_ports.insert((protocol, number)) {
            errs.push(FieldError::duplicate(
                idx("spec.ports", *i),
                serde_json::json!({"port": number, "protocol": protocol}).to_string(),
            ));
        }
    }
    let selector = t_str_map(spec, "selector", path, errs);
    validate_labels(&selector, "spec.selector", errs);
    let affinity = t_str(spec, "sessionAffinity", path, errs);
    one_of(errs, "spec.sessionAffinity", affinity, &["ClientIP", "None"]);
    one_of(errs, "spec.type", Some(service_type), &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]);
    service_cluster_ips(spec, errs);
    if let Some(p) = t_str(spec, "ipFamilyPolicy", path, errs) {
        one_of(errs, "spec.ipFamilyPolicy", Some(p), &["PreferDualStack", "RequireDualStack", "SingleStack"]);
    }
    for (i, family) in t_str_list(spec, "ipFamilies", path, errs).iter().enumerate() {
        one_of(errs, &idx("spec.ipFamilies", i), Some(family), &["IPv4", "IPv6"]);
    }
    if let Some(p) = t_str(spec, "internalTrafficPolicy", path, errs) {
        one_of(errs, "spec.internalTrafficPolicy", Some(p), &["Cluster", "Local"]);
    }
    let externally_accessible = matches!(service_type, "LoadBalancer" | "NodePort")
        || (service_type == "ClusterIP" && !arr_at(spec, "externalIPs").is_empty());
    if let Some(p) = t_str(spec, "externalTrafficPolicy", path, errs).filter(|p| !p.is_empty()) {
        if !externally_accessible {
            errs.push(invalid_str(
                "spec.externalTrafficPolicy",
                p,
                "may only be set for externally-accessible services",
            ));
        } else {
            one_of(errs, "spec.externalTrafficPolicy", Some(p), &["Cluster", "Local"]);
        }
    }
}

pub(super) fn service_port(
    port: &Value,
    path: &str,
    require_name: bool,
    names_seen: &mut HashSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let name = t_str(port, "name", path, errs).unwrap_or("");
    if require_name && name.is_empty() {
        errs.push(FieldError::required(child(path, "name"), ""));
    } else if !name.is_empty() {
        msgs_invalid(errs, &child(path, "name"), name, names::dns1123_label(name));
        if !names_seen.insert(name.to_string()) {
            errs.push(FieldError::duplicate(child(path, "name"), quoted(name)));
        }
    }
    let number = t_int(port, "port", path, errs).unwrap_or(0);
    errs.extend(names::port_num(number).into_iter().map(|m| invalid_int(child(path, "port"), number, m)));
    let protocol = t_str(port, "protocol", path, errs);
    one_of(errs, &child(path, "protocol"), protocol, &["SCTP", "TCP", "UDP"]);
    match port.get("targetPort") {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(t) => {
                errs.extend(names::port_num(t).into_iter().map(|m| invalid_int(child(path, "targetPort"), t, m)))
            }
            None => errs.push(type_error(child(path, "targetPort"), &Value::Number(n.clone()), "integer")),
        },
        Some(Value::String(s)) => msgs_invalid(errs, &child(path, "targetPort"), s, names::port_name(s)),
        Some(Value::Null) | None => {}
        Some(other) => errs.push(type_error(child(path, "targetPort"), other, "integer")),
    }
    if let Some(p) = t_str(port, "appProtocol", path, errs) {
        msgs_invalid(errs, &child(path, "appProtocol"), p, names::qualified_name(p));
    }
}

pub(super) fn service_cluster_ips(spec: &Value, errs: &mut Vec<FieldError>) {
    let list = t_str_list(spec, "clusterIPs", "spec", errs);
    let cluster_ip = str_at(spec, "clusterIP").unwrap_or("");
    let shown_list = shown(&Value::from(list.iter().map(|s| Value::from(*s)).collect::<Vec<_>>()));
    if let Some(first) = list.first()
        && *first != cluster_ip
    {
        errs.push(FieldError::invalid("spec.clusterIPs", shown_list.clone(), "first value must match `clusterIP`"));
    }
    for (i, ip) in list.iter().enumerate() {
        if i == 0 && *ip == "None" {
            if list.len() > 1 {
                errs.push(FieldError::invalid(
                    "spec.clusterIPs",
                    shown_list.clone(),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        msgs_invalid(errs, &idx("spec.clusterIPs", i), ip, names::ip_address(ip));
    }
    if list.is_empty() && !cluster_ip.is_empty() && cluster_ip != "None" {
        msgs_invalid(errs, "spec.clusterIP", cluster_ip, names::ip_address(cluster_ip));
    }
}

pub(super) fn service_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    if str_at(ns, "type") == Some("ExternalName") || str_at(os, "type") == Some("ExternalName") {
        return;
    }
    let new_ips = cluster_ips(ns);
    let old_ips = cluster_ips(os);
    let headless = |ips: &[String]| ips.first().is_some_and(|ip| ip == "None");
    if headless(&new_ips) && headless(&old_ips) {
        return;
    }
    let listed = shown(&Value::from(new_ips.iter().map(|s| Value::from(s.as_str())).collect::<Vec<_>>()));
    let changed = |i: usize| FieldError::invalid(idx("spec.clusterIPs", i), listed.clone(), "may not change once set");
    use std::cmp::Ordering;
    match old_ips.len().cmp(&new_ips.len()) {
        Ordering::Equal => {
            for (i, (o, n)) in old_ips.iter().zip(&new_ips).enumerate() {
                if o != n {
                    errs.push(changed(i));
                }
            }
        }
        Ordering::Greater => {
            if new_ips.is_empty() {
                errs.push(FieldError::invalid(
                    "spec.clusterIPs[0]",
                    listed.clone(),
                    "primary clusterIP can not be unset",
                ));
            } else if new_ips[0] != old_ips[0] {
                errs.push(changed(0));
            }
            if new_ips.len() == 1 && str_at(ns, "ipFamilyPolicy") != Some("SingleStack") {
                errs.push(FieldError::invalid(
                    "spec.clusterIPs[0]",
                    listed.clone(),
                    "`ipFamilyPolicy` must be set to 'SingleStack' when releasing the secondary clusterIP",
                ));
            }
        }
        Ordering::Less => {
            if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
                errs.push(changed(0));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Namespaces, Nodes, PVCs and Events.
