//! Server-side printing: what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, a `meta.k8s.io` Table whose columns
//! and cells are those kube-apiserver prints (`pkg/printers/internalversion/printers.go` for
//! built-in kinds, a CRD's `additionalPrinterColumns` through apiextensions' table convertor,
//! and `rest.DefaultTableConvertor`'s Name / Created At for kinds without a printer), and
//! `as=PartialObjectMetadata(List)` for metadata-only clients.
//!
//! Each row carries the object as `includeObject` asks: `Metadata` (the default, a
//! PartialObjectMetadata), `Object`, or `None`.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::status::ApiError;

mod printers;

use printers::*;

/// What the client asked the server to send instead of the object itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    /// The object (or list) as stored.
    Object,
    /// A `meta.k8s.io` Table of this version (`v1` or `v1beta1`).
    Table(&'static str),
    /// `PartialObjectMetadata` (or its list) of this version.
    Metadata(&'static str),
}

impl Rendering {
    /// Picks the first media range of an `Accept` header the server can satisfy, in the
    /// client's order, as the real content negotiation does; plain JSON when none asks for a
    /// transformation.
    pub fn from_accept(accept: &str) -> Self {
        for range in accept.split(',') {
            let mut params = range.split(';').map(str::trim);
            let media = params.next().unwrap_or_default();
            if !matches!(media, "application/json" | "*/*" | "application/*") {
                continue;
            }
            let (mut as_kind, mut version, mut group) = ("", "", "");
            for p in params {
                match p.split_once('=') {
                    Some(("as", v)) => as_kind = v,
                    Some(("v", v)) => version = v,
                    Some(("g", v)) => group = v,
                    _ => {}
                }
            }
            if as_kind.is_empty() {
                return Self::Object;
            }
            let version = match version {
                "v1" => "v1",
                "v1beta1" => "v1beta1",
                _ => continue,
            };
            if group != "meta.k8s.io" {
                continue;
            }
            match as_kind {
                "Table" => return Self::Table(version),
                "PartialObjectMetadata" | "PartialObjectMetadataList" => return Self::Metadata(version),
                _ => continue,
            }
        }
        Self::Object
    }
}

/// How much of each object a Table row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    /// Parses `includeObject`; an unknown value is a 400 as on the real server.
    pub fn from_query(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("Metadata") | Some("") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(ApiError::bad_request(format!(
                "includeObject: unsupported value {:?}, expected one of None, Metadata, Object",
                other.chars().take(40).collect::<String>()
            ))),
        }
    }
}

/// One column of a Table.
struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
}

impl Column {
    fn new(name: &str, kind: &str, description: &str) -> Self {
        Self {
            name: name.to_string(),
            kind: kind.to_string(),
            format: String::new(),
            description: description.to_string(),
            priority: 0,
        }
    }

    fn wide(self) -> Self {
        Self { priority: 1, ..self }
    }

    fn to_json(&self) -> Value {
        json!({"name": self.name, "type": self.kind, "format": self.format, "description": self.description,
            "priority": self.priority})
    }
}

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn name_column() -> Column {
    Column { format: "name".to_string(), ..Column::new("Name", "string", NAME_DOC) }
}

fn age_column() -> Column {
    Column::new("Age", "string", AGE_DOC)
}

/// A CRD version's `additionalPrinterColumns` entry, as the CRD declares it.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub kind: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    /// The column's `jsonPath`, as an RFC 9535 query (`$` prepended).
    path: Option<serde_json_path::JsonPath>,
}

impl PrinterColumn {
    /// Reads one `additionalPrinterColumns` entry; a path that does not parse prints nothing,
    /// as a column whose path finds nothing.
    pub fn from_crd(column: &Value) -> Self {
        let text = |k: &str| column[k].as_str().unwrap_or_default().to_string();
        let path = column["jsonPath"].as_str().and_then(|p| serde_json_path::JsonPath::parse(&format!("${p}")).ok());
        Self {
            name: text("name"),
            kind: text("type"),
            format: text("format"),
            description: text("description"),
            priority: column["priority"].as_i64().unwrap_or(0),
            path,
        }
    }

    /// The cell: the first match, typed as the column says (apiextensions' `cellForJSONValue`).
    fn cell(&self, obj: &Value, now: Timestamp) -> Value {
        let Some(found) = self.path.as_ref().and_then(|p| p.query(obj).all().first().copied()) else {
            return Value::Null;
        };
        match self.kind.as_str() {
            "string" => match found {
                Value::String(s) => json!(s),
                other => json!(other.to_string()),
            },
            "date" => found.as_str().map_or(Value::Null, |t| json!(age(Some(t), now))),
            "integer" => found.as_i64().map_or(Value::Null, |n| json!(n)),
            "number" => found.as_f64().map_or(Value::Null, |n| json!(n)),
            "boolean" => found.as_bool().map_or(Value::Null, |b| json!(b)),
            _ => found.clone(),
        }
    }
}

/// Renders a GET or LIST reply (an object or a `...List`) as `rendering` asks.
pub fn render(
    rt: &ResourceType,
    printer_columns: &[PrinterColumn],
    body: &Value,
    rendering: Rendering,
    include: Include,
    now: Timestamp,
) -> Value {
    let is_list = body.get("items").is_some_and(Value::is_array);
    let objects: Vec<&Value> =
        if is_list { body["items"].as_array().into_iter().flatten().collect() } else { vec![body] };
    match rendering {
        Rendering::Object => body.clone(),
        Rendering::Metadata(version) if is_list => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": body["metadata"],
            "items": objects.iter().map(|o| partial(o, version)).collect::<Vec<_>>(),
        }),
        Rendering::Metadata(version) => partial(body, version),
        Rendering::Table(version) => {
            let columns = columns(rt, printer_columns);
            let rows: Vec<Value> = objects
                .iter()
                .map(|o| {
                    let mut row = json!({"cells": cells(rt, printer_columns, o, now)});
                    match include {
                        Include::None => {}
                        Include::Metadata => row["object"] = partial(o, version),
                        Include::Object => row["object"] = (*o).clone(),
                    }
                    row
                })
                .collect();
            let mut metadata = json!({});
            for key in ["resourceVersion", "continue", "remainingItemCount"] {
                if let Some(v) = body["metadata"].get(key).filter(|v| !v.is_null()) {
                    metadata[key] = v.clone();
                }
            }
            json!({
                "kind": "Table",
                "apiVersion": format!("meta.k8s.io/{version}"),
                "metadata": metadata,
                "columnDefinitions": columns.iter().map(Column::to_json).collect::<Vec<_>>(),
                "rows": rows,
            })
        }
    }
}

/// An object reduced to its metadata.
fn partial(obj: &Value, version: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": obj["metadata"]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectls_accept_header_asks_for_a_v1_table() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(Rendering::from_accept(kubectl), Rendering::Table("v1"));
        assert_eq!(
            Rendering::from_accept("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            Rendering::Table("v1beta1")
        );
        assert_eq!(
            Rendering::from_accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            Rendering::Metadata("v1")
        );
        assert_eq!(
            Rendering::from_accept("application/json;as=Table;v=v9;g=meta.k8s.io,application/json"),
            Rendering::Object
        );
        assert_eq!(Rendering::from_accept("application/vnd.kubernetes.protobuf,application/json"), Rendering::Object);
        assert_eq!(Rendering::from_accept(""), Rendering::Object);
    }

    #[test]
    fn printer_columns_follow_their_json_paths() {
        let ready = PrinterColumn::from_crd(
            &json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}),
        );
        let age_col =
            PrinterColumn::from_crd(&json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
        let obj = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let now: Timestamp = "2026-01-01T00:00:07Z".parse().unwrap_or_default();
        assert_eq!(ready.cell(&obj, now), json!("True"));
        assert_eq!(age_col.cell(&obj, now), json!("7s"));
        assert_eq!(ready.cell(&json!({}), now), Value::Null, "a path that finds nothing prints nothing");
    }
}
