//! Containers of a pod spec: ports, env, mounts, resources and security contexts.

use super::*;

pub(super) fn containers(
    spec: &Value,
    path: &str,
    list: &str,
    volumes: &HashSet<String>,
    is_pod: bool,
    seen_names: &mut HashSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let init = list == "initContainers";
    let list_path = child(path, list);
    let items = t_obj_list(spec, list, path, errs);
    if !init && arr_at(spec, list).is_empty() {
        errs.push(FieldError::required(list_path, ""));
        return;
    }
    let mut host_ports = HashSet::new();
    for (_, c, cp) in items {
        container_common(c, &cp, volumes, errs);
        let name = str_at(c, "name").unwrap_or("");
        if seen_names.contains(name) {
            errs.push(FieldError::duplicate(child(&cp, "name"), quoted(name)));
        } else if !init || !name.is_empty() {
            seen_names.insert(name.to_string());
        }
        match (init, str_at(c, "restartPolicy")) {
            (false, Some(_)) => {
                errs.push(FieldError::forbidden(child(&cp, "restartPolicy"), "may not be set for non-init containers"));
            }
            (true, Some(p)) if p != "Always" => errs.push(not_supported(child(&cp, "restartPolicy"), p, &["Always"])),
            _ => {}
        }
        for (pi, port) in arr_at(c, "ports").iter().enumerate() {
            let Some(hp) = int_at(port, "hostPort").filter(|p| *p != 0) else { continue };
            let key =
                format!("{}/{}/{hp}", str_at(port, "protocol").unwrap_or(""), str_at(port, "hostIP").unwrap_or(""));
            if !host_ports.insert(key.clone()) {
                errs.push(FieldError::duplicate(child(&idx(&child(&cp, "ports"), pi), "hostPort"), quoted(&key)));
            }
        }
        if is_pod {
            let image = str_at(c, "image").unwrap_or("");
            if image.trim() != image {
                errs.push(invalid_str(child(&cp, "image"), image, "must not have leading or trailing whitespace"));
            }
        }
    }
}

/// `validateContainerCommon`.
pub(super) fn container_common(c: &Value, path: &str, volumes: &HashSet<String>, errs: &mut Vec<FieldError>) {
    match t_str(c, "name", path, errs).unwrap_or("") {
        "" => errs.push(FieldError::required(child(path, "name"), "")),
        name => msgs_invalid(errs, &child(path, "name"), name, names::dns1123_label(name)),
    }
    if t_str(c, "image", path, errs).unwrap_or("").is_empty() {
        errs.push(FieldError::required(child(path, "image"), ""));
    }
    let policy = t_str(c, "terminationMessagePolicy", path, errs);
    one_of(errs, &child(path, "terminationMessagePolicy"), policy, &["File", "FallbackToLogsOnError"]);
    container_ports(c, path, errs);
    env(c, path, errs);
    env_from(c, path, errs);
    volume_mounts(c, path, volumes, errs);
    let pull = t_str(c, "imagePullPolicy", path, errs);
    one_of(errs, &child(path, "imagePullPolicy"), pull, &["Always", "IfNotPresent", "Never"]);
    if let Some(res) = t_obj(c, "resources", path, errs) {
        resources(res, &child(path, "resources"), errs);
    }
    if let Some(sc) = t_obj(c, "securityContext", path, errs) {
        security_context(sc, &child(path, "securityContext"), errs);
    }
}

pub(super) fn container_ports(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let mut seen = HashSet::new();
    for (_, port, pp) in t_obj_list(c, "ports", path, errs) {
        if let Some(name) = t_str(port, "name", &pp, errs).filter(|n| !n.is_empty()) {
            let msgs = names::port_name(name);
            if !msgs.is_empty() {
                msgs_invalid(errs, &child(&pp, "name"), name, msgs);
            } else if !seen.insert(name) {
                errs.push(FieldError::duplicate(child(&pp, "name"), quoted(name)));
            }
        }
        match t_int(port, "containerPort", &pp, errs).unwrap_or(0) {
            0 => errs.push(FieldError::required(child(&pp, "containerPort"), "")),
            n => errs.extend(names::port_num(n).into_iter().map(|m| invalid_int(child(&pp, "containerPort"), n, m))),
        }
        if let Some(n) = t_int(port, "hostPort", &pp, errs).filter(|n| *n != 0) {
            errs.extend(names::port_num(n).into_iter().map(|m| invalid_int(child(&pp, "hostPort"), n, m)));
        }
        let protocol = t_str(port, "protocol", &pp, errs);
        one_of(errs, &child(&pp, "protocol"), protocol, &["SCTP", "TCP", "UDP"]);
    }
}

const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const ENV_RESOURCE_FIELDS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// `ValidateEnv`, with the relaxed name rule kube-apiserver 1.32+ uses by default.
pub(super) fn env(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (_, ev, ep) in t_obj_list(c, "env", path, errs) {
        match t_str(ev, "name", &ep, errs).unwrap_or("") {
            "" => errs.push(FieldError::required(child(&ep, "name"), "")),
            name => msgs_invalid(errs, &child(&ep, "name"), name, names::relaxed_env_var_name(name)),
        }
        let value = t_str(ev, "value", &ep, errs).unwrap_or("");
        let Some(vf) = t_obj(ev, "valueFrom", &ep, errs) else { continue };
        let vp = child(&ep, "valueFrom");
        let mut sources = 0;
        if let Some(fr) = t_obj(vf, "fieldRef", &vp, errs) {
            sources += 1;
            field_selector(fr, &child(&vp, "fieldRef"), errs);
        }
        if let Some(rf) = t_obj(vf, "resourceFieldRef", &vp, errs) {
            sources += 1;
            let rp = child(&vp, "resourceFieldRef");
            match t_str(rf, "resource", &rp, errs).unwrap_or("") {
                "" => errs.push(FieldError::required(child(&rp, "resource"), "")),
                r if !ENV_RESOURCE_FIELDS.contains(&r)
                    && !r.starts_with("limits.hugepages-")
                    && !r.starts_with("requests.hugepages-") =>
                {
                    errs.push(not_supported(child(&rp, "resource"), r, ENV_RESOURCE_FIELDS));
                }
                _ => {}
            }
        }
        for src in ["configMapKeyRef", "secretKeyRef"] {
            if let Some(sel) = t_obj(vf, src, &vp, errs) {
                sources += 1;
                let sp = child(&vp, src);
                let name = t_str(sel, "name", &sp, errs).unwrap_or("");
                msgs_invalid(errs, &child(&sp, "name"), name, names::dns1123_subdomain(name));
                match t_str(sel, "key", &sp, errs).unwrap_or("") {
                    "" => errs.push(FieldError::required(child(&sp, "key"), "")),
                    k => msgs_invalid(errs, &child(&sp, "key"), k, names::config_map_key(k)),
                }
            }
        }
        if sources == 0 {
            errs.push(invalid_str(
                &vp,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if !value.is_empty() {
            errs.push(invalid_str(&vp, "", "may not be specified when `value` is not empty"));
        } else if sources > 1 {
            errs.push(invalid_str(&vp, "", "may not have more than one field specified at a time"));
        }
    }
}

/// `validateObjectFieldSelector` for env: pod fields, or a label/annotation by key.
pub(super) fn field_selector(fs: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if t_str(fs, "apiVersion", path, errs).unwrap_or("").is_empty() {
        errs.push(FieldError::required(child(path, "apiVersion"), ""));
        return;
    }
    let field_path = t_str(fs, "fieldPath", path, errs).unwrap_or("");
    if field_path.is_empty() {
        errs.push(FieldError::required(child(path, "fieldPath"), ""));
        return;
    }
    let subscripted = field_path.strip_suffix("']").and_then(|p| p.split_once("['"));
    match subscripted {
        Some(("metadata.annotations", sub)) => {
            msgs_invalid(errs, path, sub, names::qualified_name(&sub.to_lowercase()))
        }
        Some(("metadata.labels", sub)) => msgs_invalid(errs, path, sub, names::qualified_name(sub)),
        Some((other, _)) => errs.push(invalid_str(path, other, "does not support subscript")),
        None if !ENV_FIELD_PATHS.contains(&field_path) => {
            errs.push(not_supported(child(path, "fieldPath"), field_path, ENV_FIELD_PATHS));
        }
        None => {}
    }
}

pub(super) fn env_from(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let list_path = child(path, "envFrom");
    for (_, ef, ep) in t_obj_list(c, "envFrom", path, errs) {
        if let Some(prefix) = t_str(ef, "prefix", &ep, errs).filter(|p| !p.is_empty()) {
            msgs_invalid(errs, &child(&ep, "prefix"), prefix, names::relaxed_env_var_name(prefix));
        }
        let mut sources = 0;
        for src in ["configMapRef", "secretRef"] {
            if let Some(r) = t_obj(ef, src, &ep, errs) {
                sources += 1;
                let rp = child(&ep, src);
                match t_str(r, "name", &rp, errs).unwrap_or("") {
                    "" => errs.push(FieldError::required(child(&rp, "name"), "")),
                    name => msgs_invalid(
                        errs,
                        &child(&rp, "name"),
                        name,
                        names::dns1123_subdomain(&names::mask_trailing_dash(name)),
                    ),
                }
            }
        }
        if sources == 0 {
            errs.push(invalid_str(&list_path, "", "must specify one of: `configMapRef` or `secretRef`"));
        } else if sources > 1 {
            errs.push(invalid_str(&list_path, "", "may not have more than one field specified at a time"));
        }
    }
}

pub(super) fn volume_mounts(c: &Value, path: &str, volumes: &HashSet<String>, errs: &mut Vec<FieldError>) {
    let list_path = child(path, "volumeMounts");
    let mut mount_points = HashSet::new();
    for (_, m, mp) in t_obj_list(c, "volumeMounts", path, errs) {
        let name = t_str(m, "name", &mp, errs).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(child(&mp, "name"), ""));
        }
        if !volumes.contains(name) {
            errs.push(not_found(child(&mp, "name"), name));
        }
        let mount_path = t_str(m, "mountPath", &mp, errs).unwrap_or("");
        if mount_path.is_empty() {
            errs.push(FieldError::required(child(&mp, "mountPath"), ""));
        }
        if !mount_points.insert(mount_path) {
            errs.push(invalid_str(child(&mp, "mountPath"), mount_path, "must be unique"));
        }
        if let Some(sub) = t_str(m, "subPath", &mp, errs).filter(|s| !s.is_empty()) {
            let sp = child(&list_path, "subPath");
            if sub.starts_with('/') {
                errs.push(invalid_str(&sp, sub, "must be a relative path"));
            }
            if sub.split('/').any(|part| part == "..") {
                errs.push(invalid_str(&sp, sub, "must not contain '..'"));
            }
        }
    }
}

pub(super) fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

pub(super) fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `ValidateResourceRequirements` for containers: names, non-negative quantities, and requests
/// within limits (equal to them for resources that cannot be overcommitted).
pub(super) fn resources(res: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let lim_path = child(path, "limits");
    let req_path = child(path, "requests");
    let mut limits: BTreeMap<&str, (i128, String)> = BTreeMap::new();
    for (name, q) in t_obj(res, "limits", path, errs).and_then(Value::as_object).into_iter().flatten() {
        let kp = key(&lim_path, name);
        container_resource_name(name, &kp, errs);
        if let Some(parsed) = resource_quantity(name, q, &kp, errs) {
            limits.insert(name, parsed);
        }
    }
    for (name, q) in t_obj(res, "requests", path, errs).and_then(Value::as_object).into_iter().flatten() {
        let kp = key(&req_path, name);
        container_resource_name(name, &kp, errs);
        let Some((req, req_text)) = resource_quantity(name, q, &kp, errs) else { continue };
        let overcommit = is_native_resource(name) && !is_hugepages(name);
        match limits.get(name.as_str()) {
            Some((lim, lim_text)) if !overcommit && req != *lim => {
                errs.push(invalid_str(&req_path, &req_text, format!("must be equal to {name} limit of {lim_text}")));
            }
            Some((lim, lim_text)) if req > *lim => {
                errs.push(invalid_str(
                    &req_path,
                    &req_text,
                    format!("must be less than or equal to {name} limit of {lim_text}"),
                ));
            }
            None if !overcommit => {
                errs.push(FieldError::required(&lim_path, "Limit must be set for non overcommitable resources"));
            }
            _ => {}
        }
    }
}

pub(super) fn container_resource_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    msgs_invalid(errs, path, name, names::qualified_name(name));
    if !name.contains('/') {
        if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !is_hugepages(name) {
            errs.push(invalid_str(path, name, "must be a standard resource for containers"));
        }
    } else if !is_native_resource(name)
        && (name.starts_with("requests.") || !names::qualified_name(&format!("requests.{name}")).is_empty())
    {
        errs.push(invalid_str(path, name, "doesn't follow extended resource name standard"));
    }
}

pub(super) fn resource_quantity(
    name: &str,
    q: &Value,
    path: &str,
    errs: &mut Vec<FieldError>,
) -> Option<(i128, String)> {
    let (nanos, text) = t_quantity(q, path, errs)?;
    if nanos < 0 {
        errs.push(invalid_str(path, &text, NON_NEGATIVE));
    }
    if !is_native_resource(name) && nanos % 1_000_000_000 != 0 {
        errs.push(invalid_str(path, &text, "must be an integer"));
    }
    Some((nanos, text))
}

pub(super) fn security_context(sc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for field in ["runAsUser", "runAsGroup"] {
        if let Some(id) = t_int(sc, field, path, errs) {
            errs.extend(names::user_or_group_id(id).into_iter().map(|m| invalid_int(child(path, field), id, m)));
        }
    }
    if t_bool(sc, "allowPrivilegeEscalation", path, errs) == Some(false) {
        if t_bool(sc, "privileged", path, errs) == Some(true) {
            errs.push(FieldError::invalid(
                path,
                shown(sc),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let adds = sc.pointer("/capabilities/add").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        if adds.iter().any(|c| c.as_str() == Some("CAP_SYS_ADMIN")) {
            errs.push(FieldError::invalid(
                path,
                shown(sc),
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            ));
        }
    }
}

pub(super) fn pod_security_context(sc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for field in ["fsGroup", "runAsUser", "runAsGroup"] {
        if let Some(id) = t_int(sc, field, path, errs) {
            errs.extend(names::user_or_group_id(id).into_iter().map(|m| invalid_int(child(path, field), id, m)));
        }
    }
    let groups_path = child(path, "supplementalGroups");
    for (i, g) in t_arr(sc, "supplementalGroups", path, errs).iter().enumerate() {
        match g.as_i64() {
            Some(id) => {
                errs.extend(names::user_or_group_id(id).into_iter().map(|m| invalid_int(idx(&groups_path, i), id, m)));
            }
            None => errs.push(type_error(idx(&groups_path, i), g, "integer")),
        }
    }
}
