//! Lenient reads of a small JSON object: the keys a reader asks for, each kept only when its
//! value has the type the reader wants, and nothing else built.
//!
//! A lease's metadata is read this way on every call that takes a lease, and a lease's
//! metadata is the host's to keep: it may come back mangled, and a mangled field must read as
//! absent without failing the call or its other fields. `serde_json::Value` reads it so but
//! builds the whole tree first; a derived `Deserialize` builds nothing extra but fails the whole
//! object on one field of the wrong type or a key given twice. The terms:
//!
//! - **schema**: the keys of an object to keep, each a scalar or an object with its own schema.
//! - **field**: what one of those keys held: text, an integer, a boolean, the fields of an
//!   object (when the schema asks for one), `Other` for any other value (skipped as it is read,
//!   never built), or `Absent` when the key is not there.
//!
//! A key given twice reads as its last value, as `serde_json::Value` reads it. An integer is one
//! that fits an `i64` (as `Value::as_i64` has it). Text that is not one JSON object reads as no
//! fields at all.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The keys of an object a reader keeps, and what each holds.
#[derive(Debug)]
pub struct Schema(pub &'static [(&'static str, Kind)]);

/// What a reader wants under a key.
#[derive(Debug)]
pub enum Kind {
    /// Text, a number or a boolean, whichever is there.
    Scalar,
    /// An object, read by its own schema.
    Object(&'static Schema),
}

/// What one key of a schema held (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// The key is not there (or was taken already).
    Absent,
    /// A JSON string.
    Text(String),
    /// A JSON number that is an integer and fits an `i64`.
    Int(i64),
    /// `true` or `false`.
    Bool(bool),
    /// An object, read by the nested schema its key names.
    Object(Fields),
    /// Any other value: `null`, a float, a list, an object where a scalar was asked for.
    Other,
}

impl Field {
    /// The text, when the value was text.
    pub fn into_text(self) -> Option<String> {
        match self {
            Self::Text(text) => Some(text),
            _ => None,
        }
    }

    /// The integer, when the value was one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The boolean, when the value was one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The object's fields, when the value was an object and its schema asked for one.
    pub fn into_object(self) -> Option<Fields> {
        match self {
            Self::Object(fields) => Some(fields),
            _ => None,
        }
    }
}

/// The fields of one object, one per key of its schema.
#[derive(Debug, Clone)]
pub struct Fields {
    schema: &'static Schema,
    values: Vec<Field>,
}

/// The same values read by the same schema.
impl PartialEq for Fields {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.schema, other.schema) && self.values == other.values
    }
}

impl Eq for Fields {}

impl Fields {
    fn absent(schema: &'static Schema) -> Self {
        Self { schema, values: vec![Field::Absent; schema.0.len()] }
    }

    /// The field of `key`, taken out (`Absent` after, and for a key the schema does not name).
    pub fn take(&mut self, key: &str) -> Field {
        match self.schema.0.iter().position(|(name, _)| *name == key) {
            Some(at) => std::mem::replace(&mut self.values[at], Field::Absent),
            None => Field::Absent,
        }
    }
}

/// The fields `schema` names of the JSON object `text`; `None` when `text` is not one object.
pub fn read(text: &str, schema: &'static Schema) -> Option<Fields> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let fields = ObjectOf(schema).deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(fields)
}

/// Reads an object by a schema.
struct ObjectOf(&'static Schema);

impl<'de> DeserializeSeed<'de> for ObjectOf {
    type Value = Fields;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Fields, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectOf {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut fields = Fields::absent(self.0);
        while let Some(key) = map.next_key_seed(KeyOf(self.0))? {
            match key {
                Some(at) => {
                    let nested = match self.0.0[at].1 {
                        Kind::Scalar => None,
                        Kind::Object(schema) => Some(schema),
                    };
                    fields.values[at] = map.next_value_seed(ValueOf(nested))?;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }
}

/// Reads a key as its position in a schema (`None`: a key nobody asked for), without keeping it.
struct KeyOf(&'static Schema);

impl<'de> DeserializeSeed<'de> for KeyOf {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyOf {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.0.iter().position(|(name, _)| *name == key))
    }
}

/// Reads a value as a [`Field`]: an object by its schema when there is one, anything else that
/// is not a scalar skipped.
struct ValueOf(Option<&'static Schema>);

impl<'de> DeserializeSeed<'de> for ValueOf {
    type Value = Field;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Field, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueOf {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Field, E> {
        Ok(Field::Text(text.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Field, E> {
        Ok(Field::Text(text))
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Field, E> {
        Ok(Field::Int(n))
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Field, E> {
        Ok(i64::try_from(n).map_or(Field::Other, Field::Int))
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Field, E> {
        Ok(Field::Other)
    }

    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Field, E> {
        Ok(Field::Bool(b))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Field, E> {
        Ok(Field::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Field::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Field, A::Error> {
        match self.0 {
            Some(schema) => ObjectOf(schema).visit_map(map).map(Field::Object),
            None => {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Field::Other)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static INNER: Schema = Schema(&[("name", Kind::Scalar)]);
    static OUTER: Schema = Schema(&[
        ("text", Kind::Scalar),
        ("count", Kind::Scalar),
        ("flag", Kind::Scalar),
        ("inner", Kind::Object(&INNER)),
    ]);

    #[test]
    fn each_key_asked_for_is_read_with_its_type() {
        let mut f = read(
            r#"{"text":"a\"b","count":-7,"flag":true,"inner":{"name":"n","x":[1]},"other":{"deep":[{}]}}"#,
            &OUTER,
        )
        .expect("an object");
        assert_eq!(f.take("text").into_text().as_deref(), Some("a\"b"));
        assert_eq!(f.take("count").as_int(), Some(-7));
        assert_eq!(f.take("flag").as_bool(), Some(true));
        let mut inner = f.take("inner").into_object().expect("the inner object");
        assert_eq!(inner.take("name").into_text().as_deref(), Some("n"));
        assert_eq!(f.take("text"), Field::Absent, "taken once");
        assert_eq!(f.take("other"), Field::Absent, "not in the schema");
    }

    #[test]
    fn a_field_of_another_type_reads_as_absent_and_leaves_the_others() {
        let mut f = read(r#"{"text":7,"count":"7","flag":null,"inner":"n"}"#, &OUTER).expect("an object");
        assert_eq!(f.take("text").into_text(), None);
        assert_eq!(f.take("count").as_int(), None);
        assert_eq!(f.take("flag").as_bool(), None);
        assert_eq!(f.take("inner").into_object(), None);
        let mut f = read(r#"{"text":{"a":1},"count":1.5,"flag":[true]}"#, &OUTER).expect("an object");
        assert_eq!(
            (f.take("text"), f.take("count"), f.take("flag")),
            (Field::Other, Field::Other, Field::Other),
            "an object, a float and a list where a scalar was asked for"
        );
        let mut f = read(r#"{"count":9223372036854775808}"#, &OUTER).expect("an object");
        assert_eq!(f.take("count").as_int(), None, "past i64, as Value::as_i64 reads it");
    }

    #[test]
    fn a_key_given_twice_reads_as_its_last_value() {
        let mut f = read(r#"{"text":"first","text":"second","count":1,"count":"x"}"#, &OUTER).expect("an object");
        assert_eq!(f.take("text").into_text().as_deref(), Some("second"));
        assert_eq!(f.take("count").as_int(), None);
    }

    #[test]
    fn what_is_not_one_object_reads_as_nothing() {
        for text in ["", "null", "[1]", "\"text\"", "{not json", r#"{"text":"a"} trailing"#, r#"{"text":"a""#] {
            assert_eq!(read(text, &OUTER), None, "{text}");
        }
    }

    #[test]
    fn deep_nesting_where_nothing_is_asked_for_is_skipped_without_recursing() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let mut f = read(&format!(r#"{{"other":{deep},"flag":[{deep}],"text":"kept"}}"#), &OUTER).expect("an object");
        assert_eq!(f.take("text").into_text().as_deref(), Some("kept"));
        assert_eq!(f.take("flag"), Field::Other);
    }
}
