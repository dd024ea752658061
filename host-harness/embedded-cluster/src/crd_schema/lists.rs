//! `x-kubernetes-list-type` uniqueness: sets and maps.

use super::*;

/// The key under which a list item is compared for uniqueness: scalars by Go type and value,
/// compound values by their JSON (as the server does).
pub(super) fn set_key(v: &Value) -> String {
    match v {
        Value::Null => "n".into(),
        Value::Bool(b) => format!("b{b}"),
        Value::Number(n) => match num(n) {
            Num::Int(i) => format!("i{i}"),
            Num::Float(f) => format!("f{f}"),
        },
        Value::String(s) => format!("s{s}"),
        Value::Array(_) | Value::Object(_) => format!("j{}", go_json(v)),
    }
}

/// The indices of second occurrences (later repeats are not reported again), as the server's
/// `validateListSet` returns them.
pub(super) fn second_occurrences(keys: &[String]) -> Vec<usize> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let times = seen.entry(k).or_insert(0);
        *times += 1;
        if *times == 2 {
            out.push(i);
        }
    }
    out
}

pub(super) fn check_list_set(items: &[Value], path: &mut Vec<Seg<'_>>, out: &mut Vec<FieldError>) {
    let keys: Vec<String> = items.iter().map(set_key).collect();
    for (i, item) in second_occurrences(&keys).into_iter().filter_map(|i| Some((i, items.get(i)?))) {
        path.push(Seg::Index(i));
        out.push(FieldError::duplicate(field_path(path), go_value(item)));
        path.pop();
    }
}

pub(super) fn check_list_map(
    key_fields: &[String],
    items: &[Value],
    path: &mut Vec<Seg<'_>>,
    out: &mut Vec<FieldError>,
) {
    if let Some((i, bad)) = items.iter().enumerate().find(|(_, x)| !x.is_object() && !x.is_null()) {
        path.push(Seg::Index(i));
        out.push(FieldError::invalid(
            field_path(path),
            go_value(bad),
            "must be an object for an array of list-type map",
        ));
        path.pop();
        return;
    }
    if items.len() <= 1 {
        return;
    }
    let key_maps: Vec<Map<String, Value>> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            for f in key_fields {
                if let Some(v) = x.get(f) {
                    key.insert(f.clone(), v.clone());
                }
            }
            key
        })
        .collect();
    let keys: Vec<String> = if let [single] = key_fields {
        key_maps.iter().map(|m| m.get(single).map(set_key).unwrap_or_else(|| "u".into())).collect()
    } else {
        key_maps.iter().map(|m| format!("j{}", go_json(&Value::Object(m.clone())))).collect()
    };
    for (i, key) in second_occurrences(&keys).into_iter().filter_map(|i| Some((i, key_maps.get(i)?))) {
        path.push(Seg::Index(i));
        out.push(FieldError::duplicate(field_path(path), go_sharp(&Value::Object(key.clone()))));
        path.pop();
    }
}

// ---------------------------------------------------------------------------------------------
// Formats and names.
