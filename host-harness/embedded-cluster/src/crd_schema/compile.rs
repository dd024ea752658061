//! Compiling a schema once: each node's keywords interpreted (types, formats the server keeps, patterns shared by slot).

use super::*;

/// Turns schema JSON into [`Node`]s, interning patterns so each distinct one compiles once.
#[derive(Default)]
pub(super) struct Builder {
    pub(super) patterns: Vec<PatternSlot>,
    pub(super) pattern_index: HashMap<String, usize>,
}

impl Builder {
    pub(super) fn node(&mut self, v: &Value) -> Node {
        let Some(o) = v.as_object() else {
            return Node::default();
        };
        let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
        let float = |k: &str| o.get(k).and_then(Value::as_f64);
        let int = |k: &str| o.get(k).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)));
        let mut n = Node::default();
        match o.get("type") {
            Some(Value::String(t)) if !t.is_empty() => n.types = vec![t.clone()],
            Some(Value::Array(ts)) => n.types = ts.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => {}
        }
        if flag("x-kubernetes-int-or-string") {
            n.types = vec!["integer".into(), "string".into()];
        }
        n.nullable = flag("nullable");
        n.format = supported_format(o.get("format").and_then(Value::as_str).unwrap_or(""), &n.types);
        n.enum_values = o.get("enum").and_then(Value::as_array).cloned();
        n.default = o.get("default").filter(|d| !d.is_null()).cloned();
        n.maximum = float("maximum");
        n.exclusive_maximum = flag("exclusiveMaximum");
        n.minimum = float("minimum");
        n.exclusive_minimum = flag("exclusiveMinimum");
        n.multiple_of = float("multipleOf");
        n.max_length = int("maxLength");
        n.min_length = int("minLength");
        n.max_items = int("maxItems");
        n.min_items = int("minItems");
        n.max_properties = int("maxProperties");
        n.min_properties = int("minProperties");
        if let Some(p) = o.get("pattern").and_then(Value::as_str).filter(|p| !p.is_empty()) {
            n.pattern = Some(self.intern(p));
        }
        n.required = strings(o.get("required"));
        if let Some(props) = o.get("properties").and_then(Value::as_object) {
            n.properties = props.iter().map(|(k, v)| (k.clone(), self.node(v))).collect();
        }
        n.additional = match o.get("additionalProperties") {
            Some(Value::Bool(b)) => Additional::Allows(*b),
            Some(s @ Value::Object(_)) => Additional::Schema(Box::new(self.node(s))),
            _ => Additional::Absent,
        };
        n.items = o.get("items").filter(|i| i.is_object()).map(|i| Box::new(self.node(i)));
        let mut list = |k: &str| -> Vec<Node> {
            o.get(k).and_then(Value::as_array).map(|a| a.iter().map(|s| self.node(s)).collect()).unwrap_or_default()
        };
        n.any_of = list("anyOf");
        n.all_of = list("allOf");
        n.one_of = list("oneOf");
        n.not = o.get("not").filter(|v| v.is_object()).map(|v| Box::new(self.node(v)));
        n.preserve_unknown = flag("x-kubernetes-preserve-unknown-fields");
        n.embedded = flag("x-kubernetes-embedded-resource");
        n.list = match o.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(strings(o.get("x-kubernetes-list-map-keys"))),
            _ => ListType::Other,
        };
        n
    }

    pub(super) fn intern(&mut self, pattern: &str) -> usize {
        if let Some(&i) = self.pattern_index.get(pattern) {
            return i;
        }
        let i = self.patterns.len();
        self.patterns.push(PatternSlot { source: pattern.to_string(), compiled: OnceLock::new() });
        self.pattern_index.insert(pattern.to_string(), i);
        i
    }
}

pub(super) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The format apiserver keeps after `StripUnsupportedFormatsPostProcess`: unknown formats are
/// ignored rather than enforced, so only these ever reach validation.
pub(super) fn supported_format(format: &str, types: &[String]) -> String {
    let schema_type = match types {
        [only] => only.as_str(),
        _ => "",
    };
    let keep = match schema_type {
        "" | "string" => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    if keep { format.to_string() } else { String::new() }
}

// ---------------------------------------------------------------------------------------------
// Decoding: pruning, nulls, embedded metadata, defaults.
