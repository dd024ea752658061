//! Values printed as Go prints them in the server's messages (`%v`, `%#v`, floats, JSON).

use super::*;

/// A bad value as `field.Error` prints it: strings quoted, numbers and booleans bare, `null`
/// for nil, and Go's `%#v` for maps and slices.
pub(super) fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match num(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        },
        Value::String(s) => quoted(s),
        Value::Array(_) | Value::Object(_) => go_sharp(v),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{"a":1}`), keys sorted as fmt does.
pub(super) fn go_sharp(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(go_sharp).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let items: Vec<String> = entries.iter().map(|(k, v)| format!("{}:{}", quoted(k), go_sharp(v))).collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
        _ => go_value(v),
    }
}

/// Go's `%v` of a float64: shortest digits, exponent form below 1e-4 and from 1e6 (`1e+06`).
pub(super) fn go_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// Go's `json.Marshal` of a decoded JSON value: sorted keys, integers bare, floats in `%f` form
/// between 1e-6 and 1e21 and `1e+21`/`1e-7` outside.
pub(super) fn go_json(v: &Value) -> String {
    match v {
        Value::Number(n) => match num(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => {
                let abs = f.abs();
                if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
                    let sci = format!("{f:e}");
                    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
                    let exp: i32 = exp.parse().unwrap_or(0);
                    let sign = if exp < 0 { '-' } else { '+' };
                    format!("{mantissa}e{sign}{}", exp.abs())
                } else {
                    format!("{f}")
                }
            }
        },
        Value::Array(a) => format!("[{}]", a.iter().map(go_json).collect::<Vec<_>>().join(",")),
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let items: Vec<String> =
                entries.iter().map(|(k, v)| format!("{}:{}", Value::String((*k).clone()), go_json(v))).collect();
            format!("{{{}}}", items.join(","))
        }
        _ => v.to_string(),
    }
}
