//! Field-level validation errors, shaped like kube-apiserver's `field.Error`.
//!
//! Every validator (core objects, CRD schemas, patches) returns these, so that the API server can
//! turn them into one `Invalid` (422) Status with one cause per problem, exactly as a real server does.

use std::fmt;

/// What is wrong with one field; maps to the `reason` of a `metav1.StatusCause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// A required field is absent or empty.
    Required,
    /// The value is present but malformed; carries the offending value as the server prints it.
    Invalid(String),
    /// The value is not one of an enumerated set; carries the value and the allowed values.
    NotSupported { value: String, allowed: Vec<String> },
    /// A string or list is longer than its limit (bytes or items).
    TooLong { max: usize },
    /// A list has more items than allowed.
    TooMany { max: usize },
    /// A value that must be unique appears twice.
    Duplicate(String),
    /// The field may not be set or changed (immutable fields, forbidden combinations).
    Forbidden,
    /// The JSON type is wrong (a string where an integer belongs, ...).
    TypeInvalid { value: String, expected: String },
}

/// One invalid field: its JSON path (`spec.containers[0].image`), what is wrong, and a detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: FieldErrorKind,
    pub field: String,
    pub detail: String,
}

impl FieldError {
    /// A missing required field.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { kind: FieldErrorKind::Required, field: field.into(), detail: detail.into() }
    }

    /// A malformed value; `value` is printed as the server would print it (quoted for strings).
    pub fn invalid(field: impl Into<String>, value: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { kind: FieldErrorKind::Invalid(value.into()), field: field.into(), detail: detail.into() }
    }

    /// A value outside an enumeration.
    pub fn not_supported(field: impl Into<String>, value: impl Into<String>, allowed: &[&str]) -> Self {
        Self {
            kind: FieldErrorKind::NotSupported {
                value: value.into(),
                allowed: allowed.iter().map(|s| s.to_string()).collect(),
            },
            field: field.into(),
            detail: String::new(),
        }
    }

    /// A value longer than `max`.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self { kind: FieldErrorKind::TooLong { max }, field: field.into(), detail: String::new() }
    }

    /// A list with more than `max` items.
    pub fn too_many(field: impl Into<String>, max: usize) -> Self {
        Self { kind: FieldErrorKind::TooMany { max }, field: field.into(), detail: String::new() }
    }

    /// A repeated value that must be unique.
    pub fn duplicate(field: impl Into<String>, value: impl Into<String>) -> Self {
        Self { kind: FieldErrorKind::Duplicate(value.into()), field: field.into(), detail: String::new() }
    }

    /// A field that may not be set or changed.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { kind: FieldErrorKind::Forbidden, field: field.into(), detail: detail.into() }
    }

    /// A value of the wrong JSON type.
    pub fn type_invalid(field: impl Into<String>, value: impl Into<String>, expected: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::TypeInvalid { value: value.into(), expected: expected.into() },
            field: field.into(),
            detail: String::new(),
        }
    }

    /// The `reason` of the `metav1.StatusCause` for this error.
    pub fn reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid(_) => "FieldValueInvalid",
            FieldErrorKind::NotSupported { .. } => "FieldValueNotSupported",
            FieldErrorKind::TooLong { .. } => "FieldValueTooLong",
            FieldErrorKind::TooMany { .. } => "FieldValueTooMany",
            FieldErrorKind::Duplicate(_) => "FieldValueDuplicate",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TypeInvalid { .. } => "FieldValueTypeInvalid",
        }
    }

    /// The message without the field path, as in a StatusCause's `message`.
    pub fn message(&self) -> String {
        let base = match &self.kind {
            FieldErrorKind::Required => "Required value".to_string(),
            FieldErrorKind::Invalid(v) => format!("Invalid value: {v}"),
            FieldErrorKind::NotSupported { value, allowed } => {
                let allowed: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
                format!("Unsupported value: {value}: supported values: {}", allowed.join(", "))
            }
            FieldErrorKind::TooLong { max } => format!("Too long: may not be more than {max} bytes"),
            FieldErrorKind::TooMany { max } => format!("Too many: must have at most {max} items"),
            FieldErrorKind::Duplicate(v) => format!("Duplicate value: {v}"),
            FieldErrorKind::Forbidden => "Forbidden".to_string(),
            FieldErrorKind::TypeInvalid { value, expected } => {
                format!("Invalid value: {value}: {} in body must be of type {expected}", self.field)
            }
        };
        if self.detail.is_empty() { base } else { format!("{base}: {}", self.detail) }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// Quotes a string value the way field errors print it (`"Foo_bar"`).
pub fn quoted(value: &str) -> String {
    format!("{value:?}")
}
