//! Validation: kube-openapi's schema validator with the server's paths and messages, then embedded resources.

use super::*;

/// One step of a field path; rendered differently by kube-openapi and by `field.Path`.
#[derive(Clone, Copy)]
pub(super) enum Seg<'a> {
    Field(&'a str),
    Key(&'a str),
    Index(usize),
}

/// kube-openapi's path: names and map keys joined with dots, indices in brackets.
pub(super) fn dotted(path: &[Seg<'_>]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Field(n) | Seg::Key(n) => push_name(&mut s, n),
            Seg::Index(i) => push_index(&mut s, *i),
        }
    }
    s
}

/// `field.Path`'s rendering: fields dotted, map keys and indices in brackets, `<nil>` for none.
pub(super) fn field_path(path: &[Seg<'_>]) -> String {
    if path.is_empty() {
        return "<nil>".into();
    }
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Field(n) => push_field(&mut s, n),
            Seg::Key(k) => push_key(&mut s, k),
            Seg::Index(i) => push_index(&mut s, *i),
        }
    }
    s
}

/// The field and the name used in messages of a kube-openapi error at `path`; the server turns
/// an empty path into a nil `field.Path`, printed `<nil>`.
pub(super) fn at(path: &[Seg<'_>]) -> (String, String) {
    let name = dotted(path);
    let field = if name.is_empty() { "<nil>".to_string() } else { name.clone() };
    (field, name)
}

/// A JSON number as Go holds it after decoding: int64 when it is written as an integer that
/// fits, float64 otherwise.
#[derive(Clone, Copy)]
pub(super) enum Num {
    Int(i64),
    Float(f64),
}

pub(super) fn num(n: &Number) -> Num {
    match n.as_i64() {
        Some(i) => Num::Int(i),
        None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

impl CrdSchema {
    /// kube-openapi's `SchemaValidator.Validate` for one node: type, anyOf/allOf/oneOf/not,
    /// string, format, number, array, enum and object checks, in that order.
    pub(super) fn check<'a>(
        &'a self,
        node: &'a Node,
        value: &'a Value,
        path: &mut Vec<Seg<'a>>,
        out: &mut Vec<FieldError>,
    ) {
        if let Some(e) = type_error(node, value, path) {
            out.push(e);
        }
        if value.is_null() {
            check_enum(node, value, path, out);
            return;
        }
        self.check_combinators(node, value, path, out);
        if let Value::String(s) = value {
            self.check_string(node, s, path, out);
            check_format(node, s, path, out);
        }
        if let Value::Number(n) = value {
            check_number(node, num(n), path, out);
        }
        if let Value::Array(items) = value {
            self.check_array(node, items, path, out);
        }
        check_enum(node, value, path, out);
        if let Value::Object(map) = value {
            self.check_object(node, map, path, out);
        }
    }

    /// anyOf/oneOf/allOf/not. A composite failure is reported as the server does, at the nil
    /// path (`<nil>`), followed by one failing branch's errors; kube-openapi picks the branch with
    /// the most passed checks, this picks the first failing one (the same for int-or-string).
    pub(super) fn check_combinators<'a>(
        &'a self,
        node: &'a Node,
        value: &'a Value,
        path: &mut Vec<Seg<'a>>,
        out: &mut Vec<FieldError>,
    ) {
        let composite = |path: &[Seg<'_>], what: &str| {
            FieldError::invalid("<nil>", "\"\"", format!("{} {what}", quoted(&dotted(path))))
        };
        if !node.any_of.is_empty() {
            let mut first_failure = None;
            let mut ok = false;
            for branch in &node.any_of {
                let mut errs = Vec::new();
                self.check(branch, value, path, &mut errs);
                if errs.is_empty() {
                    ok = true;
                    break;
                }
                first_failure.get_or_insert(errs);
            }
            if !ok {
                out.push(composite(path, "must validate at least one schema (anyOf)"));
                out.extend(first_failure.unwrap_or_default());
            }
        }
        if !node.one_of.is_empty() {
            let mut valid = 0;
            let mut first_failure = None;
            for branch in &node.one_of {
                let mut errs = Vec::new();
                self.check(branch, value, path, &mut errs);
                if errs.is_empty() {
                    valid += 1;
                    first_failure = None;
                } else if valid == 0 {
                    first_failure.get_or_insert(errs);
                }
            }
            if valid != 1 {
                let found = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                out.push(composite(path, &format!("must validate one and only one schema (oneOf). {found}")));
                out.extend(first_failure.unwrap_or_default());
            }
        }
        if !node.all_of.is_empty() {
            let mut valid = 0;
            for branch in &node.all_of {
                let mut errs = Vec::new();
                self.check(branch, value, path, &mut errs);
                if errs.is_empty() {
                    valid += 1;
                }
                out.extend(errs);
            }
            if valid != node.all_of.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                out.push(composite(path, &format!("must validate all the schemas (allOf){none}")));
            }
        }
        if let Some(not) = &node.not {
            let mut errs = Vec::new();
            self.check(not, value, path, &mut errs);
            if errs.is_empty() {
                out.push(composite(path, "must not validate the schema (not)"));
            }
        }
    }

    /// maxLength, then minLength, then pattern; the first failure ends the checks, as in
    /// kube-openapi. Lengths count Unicode characters.
    pub(super) fn check_string(&self, node: &Node, s: &str, path: &[Seg<'_>], out: &mut Vec<FieldError>) {
        if node.max_length.is_some() || node.min_length.is_some() {
            let len = i64::try_from(s.chars().count()).unwrap_or(i64::MAX);
            if let Some(max) = node.max_length.filter(|&max| len > max) {
                out.push(FieldError::too_long(at(path).0, usize::try_from(max).unwrap_or(0)));
                return;
            }
            if let Some(min) = node.min_length.filter(|&min| len < min) {
                let (field, name) = at(path);
                out.push(FieldError::invalid(
                    field,
                    quoted(s),
                    format!("{name} in body should be at least {min} chars long"),
                ));
                return;
            }
        }
        let Some(slot) = node.pattern else {
            return;
        };
        if let Some(re) = self.regex(slot).filter(|re| !re.is_match(s)) {
            let (field, name) = at(path);
            let source = self.patterns.get(slot).map_or(re.as_str(), |p| p.source.as_str());
            out.push(FieldError::invalid(field, quoted(s), format!("{name} in body should match '{source}'")));
        }
    }

    pub(super) fn check_array<'a>(
        &'a self,
        node: &'a Node,
        items: &'a [Value],
        path: &mut Vec<Seg<'a>>,
        out: &mut Vec<FieldError>,
    ) {
        if let Some(item_schema) = &node.items {
            for (i, v) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                self.check(item_schema, v, path, out);
                path.pop();
            }
        }
        let size = i64::try_from(items.len()).unwrap_or(i64::MAX);
        if let Some(min) = node.min_items.filter(|&min| size < min) {
            let (field, name) = at(path);
            out.push(FieldError::invalid(
                field,
                size.to_string(),
                format!("{name} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = node.max_items.filter(|&max| size > max) {
            out.push(FieldError::too_many(at(path).0, usize::try_from(max).unwrap_or(0)));
        }
    }

    /// min/maxProperties (which end the object's checks when they fail, as in kube-openapi),
    /// then each field, then `required`. The root `metadata` is left to the server.
    pub(super) fn check_object<'a>(
        &'a self,
        node: &'a Node,
        map: &'a Map<String, Value>,
        path: &mut Vec<Seg<'a>>,
        out: &mut Vec<FieldError>,
    ) {
        let count = i64::try_from(map.len()).unwrap_or(i64::MAX);
        if let Some(min) = node.min_properties.filter(|&min| count < min) {
            let (field, name) = at(path);
            let detail = format!("{name} in body should have at least {min} properties");
            out.push(FieldError::invalid(field, count.to_string(), detail));
            return;
        }
        if let Some(max) = node.max_properties.filter(|&max| count > max) {
            out.push(FieldError::too_many(at(path).0, usize::try_from(max).unwrap_or(0)));
            return;
        }
        if matches!(node.additional, Additional::Allows(false)) {
            for k in map.keys().filter(|k| !node.properties.contains_key(*k)) {
                let (field, name) = at(path);
                out.push(FieldError::invalid(field, quoted(k), format!("{name}.{k} in body is a forbidden property")));
            }
        }
        let at_root = path.is_empty();
        for (k, v) in map {
            if at_root && k == "metadata" {
                continue;
            }
            if let Some(prop) = node.properties.get(k) {
                path.push(Seg::Field(k));
                self.check(prop, v, path, out);
                path.pop();
            } else if let Additional::Schema(addl) = &node.additional {
                path.push(Seg::Key(k));
                self.check(addl, v, path, out);
                path.pop();
            }
        }
        for r in node.required.iter().filter(|r| !map.contains_key(*r)) {
            path.push(Seg::Field(r));
            out.push(FieldError::required(dotted(path), ""));
            path.pop();
        }
    }

    /// The checks apiserver runs after schema validation, both following only the structural
    /// schema: embedded resources (`objectmeta.Validate`) and list-type uniqueness
    /// (`listtype.ValidateListSetsAndMaps`), with `field.Path` paths.
    pub(super) fn check_structural<'a>(
        &'a self,
        node: &'a Node,
        value: &'a Value,
        path: &mut Vec<Seg<'a>>,
        embedded: &mut Vec<FieldError>,
        lists: &mut Vec<FieldError>,
    ) {
        match value {
            Value::Object(map) => {
                if node.embedded {
                    check_embedded(map, path, embedded);
                }
                let at_root = path.is_empty();
                for (k, v) in map {
                    if at_root && k == "metadata" {
                        continue;
                    }
                    if let Some(prop) = node.properties.get(k) {
                        path.push(Seg::Field(k));
                        self.check_structural(prop, v, path, embedded, lists);
                        path.pop();
                    } else if let Additional::Schema(addl) = &node.additional {
                        path.push(Seg::Key(k));
                        self.check_structural(addl, v, path, embedded, lists);
                        path.pop();
                    }
                }
            }
            Value::Array(items) => {
                match &node.list {
                    ListType::Set => check_list_set(items, path, lists),
                    ListType::Map(keys) => check_list_map(keys, items, path, lists),
                    ListType::Other => {}
                }
                if let Some(item_schema) = &node.items {
                    for (i, v) in items.iter().enumerate() {
                        path.push(Seg::Index(i));
                        self.check_structural(item_schema, v, path, embedded, lists);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }
}

/// kube-openapi's type validator, including its treatment of formats on non-string values
/// (a float in an `int32` field is "must be of type int32: \"float64\"") and its value, which is
/// the JSON type it found rather than the value itself.
pub(super) fn type_error(node: &Node, value: &Value, path: &[Seg<'_>]) -> Option<FieldError> {
    if node.types.is_empty() && node.format.is_empty() {
        return None;
    }
    let has = |t: &str| node.types.iter().any(|x| x == t);
    let fail = |actual: &str, expected: &str| Some(FieldError::type_invalid(at(path).0, quoted(actual), expected));
    let (found, found_format) = match value {
        Value::Null => {
            if !node.types.is_empty() && !has("null") && !node.nullable {
                return fail("null", &node.types.join(","));
            }
            return None;
        }
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match num(n) {
            Num::Int(_) => ("integer", "int64"),
            Num::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    };
    let float_int =
        matches!(value, Value::Number(n) if matches!(num(n), Num::Float(f) if is_json_integer(f))) && has("integer");
    let int_float = found == "integer" && has("number");
    let string_or_array = matches!(value, Value::String(_) | Value::Array(_));
    let has_format = !node.format.is_empty();
    let type_or_format_matches = has(found) || found_format == node.format || float_int || int_float;
    if has_format && !string_or_array && !type_or_format_matches {
        return fail(found_format, &node.format);
    }
    let numeric = has("number") || has("integer");
    if has_format && string_or_array && !numeric {
        return None;
    }
    if !(has(found) || float_int || int_float) {
        return fail(found, &node.types.join(","));
    }
    None
}

/// go-openapi's `swag.IsFloat64AJSONInteger`: integral (or within 1e-9 relative of it, for
/// positive values) and within ±(2^53-1).
pub(super) fn is_json_integer(f: f64) -> bool {
    const MAX_JSON_INT: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX_JSON_INT..=MAX_JSON_INT).contains(&f) {
        return false;
    }
    if f == f.trunc() {
        return true;
    }
    let g = f.trunc();
    if f < 0.0 || g == 0.0 {
        return false;
    }
    (f - g).abs() / (f.abs() + g.abs()) < 1e-9
}

/// multipleOf, minimum, maximum. Integers are compared with integer bounds (truncated, as Go's
/// `int64(bound)`), floats with float bounds.
pub(super) fn check_number(node: &Node, n: Num, path: &[Seg<'_>], out: &mut Vec<FieldError>) {
    let value = || match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => go_float(f),
    };
    if let Some(factor) = node.multiple_of {
        let (positive, multiple, shown) = match n {
            Num::Int(i) => {
                let f = factor as i64;
                (f > 0, f > 0 && i % f == 0, f.to_string())
            }
            Num::Float(x) => {
                let mult = if factor < 1.0 { 1.0 / factor * x } else { x / factor };
                (factor > 0.0, is_json_integer(mult), go_float(factor))
            }
        };
        let (field, name) = at(path);
        if !positive {
            let detail = format!("factor MultipleOf declared for {name} must be positive: {shown}");
            out.push(FieldError::invalid(field, shown, detail));
        } else if !multiple {
            out.push(FieldError::invalid(field, value(), format!("{name} in body should be a multiple of {shown}")));
        }
    }
    let against = |bound: f64| match n {
        Num::Int(i) => ((bound as i64).to_string(), Some(i.cmp(&(bound as i64)))),
        Num::Float(x) => (go_float(bound), x.partial_cmp(&bound)),
    };
    let mut bound_error = |shown: String, relation: &str| {
        let (field, name) = at(path);
        out.push(FieldError::invalid(field, value(), format!("{name} in body should be {relation} {shown}")));
    };
    if let Some(min) = node.minimum {
        let (shown, ord) = against(min);
        if node.exclusive_minimum && matches!(ord, Some(Ordering::Less | Ordering::Equal)) {
            bound_error(shown, "greater than");
        } else if !node.exclusive_minimum && ord == Some(Ordering::Less) {
            bound_error(shown, "greater than or equal to");
        }
    }
    if let Some(max) = node.maximum {
        let (shown, ord) = against(max);
        if node.exclusive_maximum && matches!(ord, Some(Ordering::Greater | Ordering::Equal)) {
            bound_error(shown, "less than");
        } else if !node.exclusive_maximum && ord == Some(Ordering::Greater) {
            bound_error(shown, "less than or equal to");
        }
    }
}

/// `enum`, compared as Go does after converting the value to the enum entry's type.
pub(super) fn check_enum(node: &Node, value: &Value, path: &[Seg<'_>], out: &mut Vec<FieldError>) {
    let Some(allowed) = node.enum_values.as_ref().filter(|e| !e.is_empty()) else {
        return;
    };
    if allowed.iter().any(|e| enum_matches(value, e)) {
        return;
    }
    let shown: Vec<String> =
        allowed.iter().map(|a| if let Value::String(s) = a { s.clone() } else { go_json(a) }).collect();
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    out.push(FieldError::not_supported(at(path).0, go_value(value), &shown));
}

pub(super) fn enum_matches(value: &Value, allowed: &Value) -> bool {
    match (value, allowed) {
        (Value::Number(v), Value::Number(a)) => match (num(v), num(a)) {
            (Num::Int(v), Num::Int(a)) => v == a,
            (Num::Float(v), Num::Int(a)) => v as i64 == a,
            (Num::Int(v), Num::Float(a)) => v as f64 == a,
            (Num::Float(v), Num::Float(a)) => v == a,
        },
        (Value::Null, _) | (_, Value::Null) => false,
        _ => value == allowed,
    }
}

/// apiserver's checks of an embedded resource: apiVersion and kind required and well formed,
/// metadata decodable as ObjectMeta. ObjectMeta's own rules (name, labels, ...) are not run.
pub(super) fn check_embedded(map: &Map<String, Value>, path: &mut Vec<Seg<'_>>, out: &mut Vec<FieldError>) {
    let child = |path: &mut Vec<Seg<'_>>, name: &'static str| {
        path.push(Seg::Field(name));
        let p = field_path(path);
        path.pop();
        p
    };
    for k in ["apiVersion", "kind"] {
        if !map.contains_key(k) {
            out.push(FieldError::required(child(path, k), ""));
        }
    }
    match map.get("apiVersion") {
        Some(Value::String(v)) if v.is_empty() => out.push(FieldError::required(child(path, "apiVersion"), "")),
        Some(Value::String(v)) if v != "/" && v.matches('/').count() > 1 => out.push(FieldError::invalid(
            child(path, "apiVersion"),
            quoted(v),
            format!("unexpected GroupVersion string: {v}"),
        )),
        Some(Value::String(_)) | None => {}
        Some(v) => out.push(FieldError::invalid(child(path, "apiVersion"), go_value(v), "must be a string")),
    }
    match map.get("kind") {
        Some(Value::String(k)) if k.is_empty() => out.push(FieldError::required(child(path, "kind"), "")),
        Some(Value::String(k)) => {
            let errs = names::dns1035_label(&k.to_lowercase());
            if !errs.is_empty() {
                out.push(FieldError::invalid(
                    child(path, "kind"),
                    quoted(k),
                    format!("may have mixed case, but should otherwise match: {}", errs.join(",")),
                ));
            }
        }
        None => {}
        Some(v) => out.push(FieldError::invalid(child(path, "kind"), go_value(v), "must be a string")),
    }
    if let Some(err) = map.get("metadata").and_then(object_meta_error) {
        let v = map.get("metadata").map(go_value).unwrap_or_default();
        out.push(FieldError::invalid(child(path, "metadata"), v, err));
    }
}
