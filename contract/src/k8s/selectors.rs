//! Label and field selectors with the grammar, validation and error texts of
//! `k8s.io/apimachinery/pkg/labels` and `pkg/fields`, so `?labelSelector=` /
//! `?fieldSelector=` requests and Job `.spec.selector` behave as on a real
//! apiserver. Written here rather than taken from a crate: clients match on those error texts,
//! and the provider (wasm32) checks its selectors with the same code.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::aggregate;

/// How one label requirement compares a label's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One `key op values` term; all terms of a selector must match.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and de-duplicated, as Go's `sets.String` yields them.
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement after the checks of Go's `labels.NewRequirement`.
    fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        let mut errors = Vec::new();
        if let Some(e) = validate_label_key(key, "key") {
            errors.push(e);
        }
        let values: Vec<String> = values.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
        let count_error = match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => {
                Some("exact-match compatibility requires one single value")
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                Some("values set must be empty for exists and does not exist")
            }
            Operator::GreaterThan | Operator::LessThan if values.len() != 1 => {
                Some("for 'Gt', 'Lt' operators, exactly one value is required")
            }
            _ => None,
        };
        if let Some(detail) = count_error {
            errors.push(format!("values: Invalid value: {}: {detail}", go_string_slice(&values)));
        }
        if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errors.push(format!(
                        "values[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                    ));
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let problems = super::names::label_value(v);
            if !problems.is_empty() {
                errors.push(format!("values[{i}][{key}]: Invalid value: {v:?}: {}", problems.join("; ")));
            }
        }
        if !errors.is_empty() {
            return Err(aggregate(errors));
        }
        Ok(Requirement { key: key.to_string(), operator, values })
    }

    /// Whether the object's value for this key (`None`: no such label) satisfies the requirement.
    fn matches(&self, value: Option<&str>) -> bool {
        let listed = |v: &str| self.values.iter().any(|w| w == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(listed),
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !listed(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(actual), [bound]) = (value, self.values.as_slice()) else {
                    return false;
                };
                match (actual.parse::<i64>(), bound.parse::<i64>()) {
                    (Ok(a), Ok(b)) if self.operator == Operator::GreaterThan => a > b,
                    (Ok(a), Ok(b)) => a < b,
                    _ => false,
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        let values = self.values.join(",");
        if matches!(self.operator, Operator::In | Operator::NotIn) {
            write!(f, "{op}({values})")
        } else {
            write!(f, "{op}{values}")
        }
    }
}

/// A parsed label selector, used both for `?labelSelector=` and for objects'
/// own selectors (Job `.spec.selector`), so both paths share one matcher.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// Sorted by key, like Go's `internalSelector`.
    requirements: Vec<Requirement>,
    /// `labels.Nothing()`: what a nil `*metav1.LabelSelector` converts to.
    nothing: bool,
}

impl LabelSelector {
    /// Parses the query-string form exactly as `labels.Parse` does so that
    /// clients get the same accept/reject decisions and messages: `a=b`,
    /// `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, and also the
    /// `a>1` / `a<1` integer comparisons Go accepts; terms are comma
    /// separated, whitespace between tokens is ignored, and an empty string
    /// selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parser = Parser { items: lex(s), position: 0 };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements, nothing: false })
    }

    /// Converts a `metav1.LabelSelector` JSON object the way
    /// `metav1.LabelSelectorAsSelector` does, because workload controllers
    /// (Job) select pods with it: an absent or `null` selector selects
    /// nothing, while `{}` (no matchLabels and no matchExpressions) selects
    /// everything. Operators are `In`, `NotIn`, `Exists`, `DoesNotExist`.
    pub fn from_json(v: Option<&Value>) -> Result<Self, String> {
        let object = match v {
            None | Some(Value::Null) => {
                return Ok(LabelSelector { requirements: Vec::new(), nothing: true });
            }
            Some(Value::Object(m)) => m,
            Some(_) => return Err("label selector must be a JSON object".to_string()),
        };
        let mut requirements = Vec::new();
        match object.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (key, value) in labels {
                    let Some(value) = value.as_str() else {
                        return Err(format!("matchLabels[{key}] must be a string"));
                    };
                    requirements.push(Requirement::new(key, Operator::Equals, vec![value.to_string()])?);
                }
            }
            Some(_) => return Err("matchLabels must be a JSON object".to_string()),
        }
        match object.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(expressions)) => {
                for (i, expression) in expressions.iter().enumerate() {
                    requirements.push(requirement_from_expression(i, expression)?);
                }
            }
            Some(_) => return Err("matchExpressions must be a JSON array".to_string()),
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements, nothing: false })
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
    }

    /// A `key=value` (or `key in (value)`) every selected object must carry, if the selector
    /// has such a term: a server can hand such a watch only the objects with that label.
    pub fn required_label(&self) -> Option<(&str, &str)> {
        if self.nothing {
            return None;
        }
        self.requirements.iter().find_map(|r| match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => {
                Some((r.key.as_str(), value.as_str()))
            }
            _ => None,
        })
    }

    /// [`Self::matches`] on a raw `metadata.labels` value, read in place (a server checks every
    /// event against every watch's selector, so copying the labels would be paid per check);
    /// absent/`null` labels mean no labels and non-string values are ignored.
    pub fn matches_json(&self, labels: Option<&Value>) -> bool {
        let labels = labels.and_then(Value::as_object);
        !self.nothing
            && self.requirements.iter().all(|r| r.matches(labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str)))
    }
}

/// Canonical form (sorted keys, sorted values), as Go's `Selector.String()`
/// prints it; the nothing-selector prints as an empty string, like Go's.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

fn requirement_from_expression(index: usize, expression: &Value) -> Result<Requirement, String> {
    let Some(expr) = expression.as_object() else {
        return Err(format!("matchExpressions[{index}] must be a JSON object"));
    };
    let key = match expr.get("key") {
        Some(Value::String(k)) => k.as_str(),
        None | Some(Value::Null) => "",
        Some(_) => return Err(format!("matchExpressions[{index}].key must be a string")),
    };
    let operator_name = match expr.get("operator") {
        Some(Value::String(o)) => o.as_str(),
        None | Some(Value::Null) => "",
        Some(_) => {
            return Err(format!("matchExpressions[{index}].operator must be a string"));
        }
    };
    let operator = match operator_name {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        other => return Err(format!("{other:?} is not a valid label selector operator")),
    };
    let values = match expr.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                let Some(s) = item.as_str() else {
                    return Err(format!("matchExpressions[{index}].values must be strings"));
                };
                values.push(s.to_string());
            }
            values
        }
        Some(_) => {
            return Err(format!("matchExpressions[{index}].values must be a JSON array"));
        }
    };
    Requirement::new(key, operator, values)
}

/// Lexer tokens of Go's label selector grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// Whether `in`/`notin` are keywords (after a key) or plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_special_symbol(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn literal_token(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

/// Go's `Lexer`: identifiers run until whitespace or a special symbol;
/// symbols are matched greedily against the operator table.
fn lex(s: &str) -> Vec<(Token, String)> {
    let chars: Vec<char> = s.chars().collect();
    let mut items = Vec::new();
    let mut i = 0;
    loop {
        while i < chars.len() && is_whitespace(chars[i]) {
            i += 1;
        }
        let Some(&c) = chars.get(i) else {
            items.push((Token::EndOfString, String::new()));
            return items;
        };
        if is_special_symbol(c) {
            let mut buffer = String::new();
            let mut last: Option<(Token, String)> = None;
            while let Some(&c) = chars.get(i) {
                if !is_special_symbol(c) {
                    break;
                }
                buffer.push(c);
                if let Some(token) = literal_token(&buffer) {
                    last = Some((token, buffer.clone()));
                } else if last.is_some() {
                    break;
                }
                i += 1;
            }
            items.push(last.unwrap_or_else(|| (Token::Error, format!("error expected: keyword found '{buffer}'"))));
        } else {
            let start = i;
            while i < chars.len() && !is_whitespace(chars[i]) && !is_special_symbol(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let token = literal_token(&word).unwrap_or(Token::Identifier);
            items.push((token, word));
        }
    }
}

/// Go's recursive-descent label selector `Parser`.
struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn lookahead(&self, context: Context) -> (Token, String) {
        let (token, literal) = self.items.get(self.position).cloned().unwrap_or((Token::EndOfString, String::new()));
        if context == Context::Values && matches!(token, Token::In | Token::NotIn) {
            (Token::Identifier, literal)
        } else {
            (token, literal)
        }
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        if self.position < self.items.len() {
            self.position += 1;
        }
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement =
                        self.parse_requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, next_literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!("found '{next_literal}', expected: identifier after ','"));
                            }
                        }
                        _ => {
                            return Err(format!("found '{literal}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!("found '{literal}', expected: !, identifier, or 'end of string'"));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = inferred {
            return Requirement::new(&key, operator, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, operator, values)
    }

    /// Reads `[!]key`; the operator is known already for `!key` and for a key
    /// followed by `,` or the end (exists).
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let problems = super::names::qualified_name(&literal);
        if !problems.is_empty() {
            return Err(format!("<nil>: Invalid value: {literal:?}: {}", problems.join("; ")));
        }
        let (next, _) = self.lookahead(Context::Values);
        if operator.is_none() && matches!(next, Token::EndOfString | Token::Comma) {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!("found '{literal}', expected: in, notin, =, ==, !=, gt, lt"));
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let (token, _) = self.consume(Context::Values);
                if token != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{literal}', expected: ',', ')' or identifier")),
        }
    }

    /// The inside of `( ... )`; empty slots (`(,a)`, `(a,,b)`, `(a,)`) stand
    /// for the empty value, as in Go.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut values = Vec::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.push(literal);
                    let (next, next_literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => {
                            return Err(format!("found '{next_literal}', expected: ',' or ')'"));
                        }
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    let (next, _) = self.lookahead(Context::Values);
                    if next == Token::ClosedPar {
                        values.push(String::new());
                        return Ok(values);
                    }
                    if next == Token::Comma {
                        self.consume(Context::Values);
                        values.push(String::new());
                    }
                }
                _ => {
                    return Err(format!("found '{literal}', expected: ',', or identifier"));
                }
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(vec![literal])
        } else {
            Err(format!("found '{literal}', expected: identifier"))
        }
    }
}

/// Field-path error for a key, as `field.Invalid(path.Child(name), ...)`.
fn validate_label_key(key: &str, path: &str) -> Option<String> {
    let problems = super::names::qualified_name(key);
    if problems.is_empty() { None } else { Some(format!("{path}: Invalid value: {key:?}: {}", problems.join("; "))) }
}

/// Go's `%#v` of the `[]string` handed to `field.Invalid` (an empty list is
/// a nil slice by then, as `LabelSelectorAsSelector` copies values with
/// `append([]string(nil), ...)`).
fn go_string_slice(values: &[String]) -> String {
    if values.is_empty() {
        return "[]string(nil)".to_string();
    }
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Comparison of one field-selector term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Equals,
    NotEquals,
}

/// One `field=value` or `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    op: FieldOp,
    value: String,
}

/// A parsed `?fieldSelector=`; field support is per resource, so the
/// selector only parses and matches and leaves vetting of names to the
/// server (see [`FieldSelector::fields`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    /// Sorted by their raw text, as Go's `fields.ParseSelector` sorts them.
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses like `fields.ParseSelector` so that requests the apiserver
    /// accepts are accepted here: `=`, `==` and `!=`; commas separate terms;
    /// `\\`, `\,` and `\=` escape inside values; nothing is trimmed; an empty
    /// string selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, op, raw_value)) = split_term(part) else {
                return Err(format!("invalid selector: '{s}'; can't understand '{part}'"));
            };
            terms.push(FieldTerm { field: field.to_string(), op, value: unescape_value(raw_value)? });
        }
        Ok(FieldSelector { terms })
    }

    /// The field paths the selector names, so the server can reject those it
    /// does not index with `field label not supported: X` (BadRequest).
    pub fn fields(&self) -> Vec<&str> {
        self.terms.iter().map(|t| t.field.as_str()).collect()
    }

    /// Whether an object is selected; `get` yields the object's value for a
    /// field path and an absent field compares as `""`, as in Go's
    /// `fields.Set`.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let actual = get(&t.field).unwrap_or_default();
            match t.op {
                FieldOp::Equals => actual == t.value,
                FieldOp::NotEquals => actual != t.value,
            }
        })
    }

    /// The name pinned by a `metadata.name=` term, so GET-by-name can replace
    /// a full list scan (Go's `RequiresExactMatch("metadata.name")`).
    pub fn exact_name(&self) -> Option<&str> {
        self.terms.iter().find(|t| t.field == "metadata.name" && t.op == FieldOp::Equals).map(|t| t.value.as_str())
    }
}

/// Canonical form with values re-escaped, as Go's `Selector.String()`.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match t.op {
                FieldOp::Equals => "=",
                FieldOp::NotEquals => "!=",
            };
            write!(f, "{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}

/// Go's `splitTerms`: splits on commas not preceded by a backslash, keeping
/// escapes for the later unescape step.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Go's `splitTerm`: the first operator occurrence splits the term, trying
/// `!=` and `==` before `=` so no `=` is left on the value.
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    const OPERATORS: [(&str, FieldOp); 3] =
        [("!=", FieldOp::NotEquals), ("==", FieldOp::Equals), ("=", FieldOp::Equals)];
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in OPERATORS {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, value));
            }
        }
    }
    None
}

/// Go's `fields.UnescapeValue`.
fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if matches!(c, '\\' | ',' | '=') {
                out.push(c);
                in_slash = false;
                continue;
            }
            return Err(format!("invalid field selector: invalid escape sequence: \\{c}"));
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                return Err(format!("invalid field selector: unescaped character in value: {c}"));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

/// Go's `fields.EscapeValue`.
fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a label selector selects every object.
    fn selects_all(s: &LabelSelector) -> bool {
        !s.nothing && s.requirements.is_empty()
    }
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn selector(s: &str) -> LabelSelector {
        match LabelSelector::parse(s) {
            Ok(sel) => sel,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    fn parse_error(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(sel) => panic!("{s:?} should fail, parsed as {sel}"),
            Err(e) => e,
        }
    }

    fn fields(s: &str) -> FieldSelector {
        match FieldSelector::parse(s) {
            Ok(sel) => sel,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    #[test]
    fn empty_label_selector_selects_everything() {
        let sel = selector("");
        assert!(selects_all(&sel));
        assert!(sel.matches(&labels(&[])));
        assert!(sel.matches(&labels(&[("a", "b")])));
        assert_eq!(sel.to_string(), "");
        assert!(selects_all(&selector("  ")));
    }

    #[test]
    fn equality_operators() {
        let web = labels(&[("app", "web")]);
        let db = labels(&[("app", "db")]);
        let none = labels(&[]);
        for s in ["app=web", "app==web", " app = web "] {
            let sel = selector(s);
            assert!(sel.matches(&web), "{s}");
            assert!(!sel.matches(&db), "{s}");
            assert!(!sel.matches(&none), "{s}");
        }
        let sel = selector("app!=web");
        assert!(!sel.matches(&web));
        assert!(sel.matches(&db));
        assert!(sel.matches(&none));
        assert_eq!(selector("app==web").to_string(), "app==web");
    }

    #[test]
    fn set_operators() {
        let sel = selector("env in (prod, staging)");
        assert!(sel.matches(&labels(&[("env", "prod")])));
        assert!(sel.matches(&labels(&[("env", "staging")])));
        assert!(!sel.matches(&labels(&[("env", "dev")])));
        assert!(!sel.matches(&labels(&[])));
        assert_eq!(sel.to_string(), "env in (prod,staging)");

        let sel = selector("env notin (prod)");
        assert!(!sel.matches(&labels(&[("env", "prod")])));
        assert!(sel.matches(&labels(&[("env", "dev")])));
        assert!(sel.matches(&labels(&[])));

        let sel = selector("env in (a,,b)");
        assert!(sel.matches(&labels(&[("env", "")])));
        assert_eq!(sel.to_string(), "env in (,a,b)");

        let sel = selector("x in (in, notin)");
        assert!(sel.matches(&labels(&[("x", "notin")])));
    }

    #[test]
    fn existence_operators() {
        let sel = selector("app");
        assert!(sel.matches(&labels(&[("app", "")])));
        assert!(!sel.matches(&labels(&[("other", "x")])));

        let sel = selector("!app");
        assert!(!sel.matches(&labels(&[("app", "x")])));
        assert!(sel.matches(&labels(&[("other", "x")])));
        assert_eq!(sel.to_string(), "!app");
    }

    #[test]
    fn numeric_comparisons() {
        let sel = selector("rank>5,rank<10");
        assert!(sel.matches(&labels(&[("rank", "7")])));
        assert!(!sel.matches(&labels(&[("rank", "5")])));
        assert!(!sel.matches(&labels(&[("rank", "x")])));
        assert!(parse_error("rank>x").contains("the value must be an integer"));
    }

    #[test]
    fn combined_terms_are_sorted_and_anded() {
        let sel = selector("tier=fe, app in (web),!canary,example.com/team");
        assert_eq!(sel.to_string(), "app in (web),!canary,example.com/team,tier=fe");
        let mut ls = labels(&[("app", "web"), ("tier", "fe"), ("example.com/team", "x")]);
        assert!(sel.matches(&ls));
        ls.insert("canary".into(), "true".into());
        assert!(!sel.matches(&ls));
    }

    #[test]
    fn syntax_errors_have_go_messages() {
        assert_eq!(parse_error("a=b,"), "found '', expected: identifier after ','");
        assert_eq!(
            parse_error("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(parse_error("a in x"), "unable to parse requirement: found 'x' expected: '('");
        assert_eq!(parse_error("a in (x"), "unable to parse requirement: found '', expected: ',' or ')'");
        assert_eq!(parse_error("=a"), "found '=', expected: !, identifier, or 'end of string'");
        assert_eq!(parse_error("!a=b"), "found '=', expected: ',' or 'end of string'");
        assert_eq!(parse_error("a in ()x"), "found 'x', expected: ',' or 'end of string'");
        assert_eq!(parse_error("a in (b)c"), "found 'c', expected: ',' or 'end of string'");
    }

    #[test]
    fn invalid_keys_are_rejected() {
        let name_part = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        assert_eq!(
            parse_error("-bad=x"),
            format!("unable to parse requirement: <nil>: Invalid value: \"-bad\": {name_part}")
        );
        let long = "k".repeat(64);
        assert!(parse_error(&long).contains("name part must be no more than 63 characters"), "{}", parse_error(&long));
        assert!(parse_error("Example.com/a=b").contains("prefix part a lowercase RFC 1123 subdomain"));
        assert!(parse_error("/a").contains("prefix part must be non-empty"));
        assert!(parse_error("a/b/c").contains("a qualified name must consist of"));
        assert!(parse_error("a@b").contains("Invalid value: \"a@b\""));
        assert!(LabelSelector::parse("example.com/My_Key.1=v").is_ok());
    }

    #[test]
    fn invalid_values_are_rejected() {
        assert_eq!(
            parse_error("a=-x"),
            "unable to parse requirement: values[0][a]: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        let long = format!("a={}", "v".repeat(64));
        assert!(parse_error(&long).contains("must be no more than 63 characters"));
        // Values are validated after sorting, as Go does.
        assert!(
            parse_error("a in (ok,b@d)")
                .starts_with("unable to parse requirement: values[0][a]: Invalid value: \"b@d\"")
        );
        let empty = selector("a=");
        assert!(empty.matches(&labels(&[("a", "")])));
        assert!(!empty.matches(&labels(&[("a", "x")])));
    }

    #[test]
    fn from_json_match_labels_and_expressions() {
        let sel = match LabelSelector::from_json(Some(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "staging"]},
                {"key": "tier", "operator": "NotIn", "values": ["db"]},
                {"key": "owner", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []}
            ]
        }))) {
            Ok(sel) => sel,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(sel.to_string(), "app=web,env in (prod,staging),!legacy,owner,tier notin (db)");
        let good = json!({"app": "web", "env": "prod", "owner": "me", "tier": "fe"});
        assert!(sel.matches_json(Some(&good)));
        let mut bad = good.clone();
        bad["tier"] = json!("db");
        assert!(!sel.matches_json(Some(&bad)));
        let mut bad = good.clone();
        bad["legacy"] = json!("1");
        assert!(!sel.matches_json(Some(&bad)));
        assert!(!sel.matches_json(None));
    }

    #[test]
    fn from_json_nil_selects_nothing_and_empty_selects_everything() {
        let any = json!({"a": "b"});
        for v in [None, Some(&Value::Null)] {
            let sel = LabelSelector::from_json(v).unwrap_or_default();
            assert!(!selects_all(&sel));
            assert!(!sel.matches_json(Some(&any)));
            assert!(!sel.matches_json(None));
        }
        let empty = json!({});
        let sel = LabelSelector::from_json(Some(&empty)).unwrap_or_else(|e| panic!("{e}"));
        assert!(selects_all(&sel));
        assert!(sel.matches_json(Some(&any)));
        let empty_lists = json!({"matchLabels": {}, "matchExpressions": []});
        assert!(LabelSelector::from_json(Some(&empty_lists)).is_ok_and(|s| selects_all(&s)));
    }

    #[test]
    fn from_json_rejects_bad_expressions() {
        let bad_op = json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(
            LabelSelector::from_json(Some(&bad_op)),
            Err("\"Gt\" is not a valid label selector operator".to_string())
        );
        let empty_in = json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]});
        assert_eq!(
            LabelSelector::from_json(Some(&empty_in)),
            Err("values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
                .to_string())
        );
        let exists_with_values = json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]});
        assert!(
            LabelSelector::from_json(Some(&exists_with_values)).is_err_and(|e| e.contains("values set must be empty"))
        );
        let bad_key = json!({"matchLabels": {"bad key": "v"}});
        assert!(
            LabelSelector::from_json(Some(&bad_key)).is_err_and(|e| e.starts_with("key: Invalid value: \"bad key\""))
        );
        let bad_value = json!({"matchLabels": {"k": "bad value"}});
        assert!(
            LabelSelector::from_json(Some(&bad_value))
                .is_err_and(|e| e.starts_with("values[0][k]: Invalid value: \"bad value\""))
        );
        assert!(LabelSelector::from_json(Some(&json!("app=web"))).is_err());
    }

    #[test]
    fn a_required_label_is_an_equality_on_one_value() {
        for (s, want) in [
            ("a=1", Some(("a", "1"))),
            ("a==1,b", Some(("a", "1"))),
            ("b,a in (1)", Some(("a", "1"))),
            ("a in (1,2)", None),
            ("a!=1", None),
            ("a", None),
            ("", None),
        ] {
            assert_eq!(selector(s).required_label(), want, "{s}");
        }
    }

    #[test]
    fn matches_json_ignores_non_string_labels() {
        let sel = selector("a");
        assert!(!sel.matches_json(Some(&json!({"a": 1}))));
        assert!(sel.matches_json(Some(&json!({"a": "1"}))));
    }

    fn pod_fields(name: &'static str, phase: Option<&'static str>) -> impl Fn(&str) -> Option<String> {
        move |field| match field {
            "metadata.name" => Some(name.to_string()),
            "status.phase" => phase.map(str::to_string),
            _ => None,
        }
    }

    #[test]
    fn field_selector_equality_and_inequality() {
        let sel = fields("metadata.name=foo,status.phase!=Running");
        assert_eq!(sel.fields(), ["metadata.name", "status.phase"]);
        assert!(sel.matches(pod_fields("foo", Some("Pending"))));
        assert!(sel.matches(pod_fields("foo", None)));
        assert!(!sel.matches(pod_fields("foo", Some("Running"))));
        assert!(!sel.matches(pod_fields("bar", Some("Pending"))));
        assert_eq!(sel.exact_name(), Some("foo"));

        let sel = fields("metadata.name==foo");
        assert_eq!(sel.exact_name(), Some("foo"));
        assert_eq!(sel.to_string(), "metadata.name=foo");
        assert_eq!(fields("metadata.name!=foo").exact_name(), None);
    }

    #[test]
    fn field_selector_absent_field_compares_as_empty() {
        assert!(fields("spec.nodeName=").matches(pod_fields("p", None)));
        assert!(!fields("spec.nodeName!=").matches(pod_fields("p", None)));
    }

    #[test]
    fn field_selector_empty_selects_everything() {
        let sel = fields("");
        assert!(sel.terms.is_empty());
        assert!(sel.fields().is_empty());
        assert!(sel.matches(|_| None));
        assert_eq!(sel.exact_name(), None);
        assert!(fields(",").terms.is_empty());
    }

    #[test]
    fn field_selector_escapes() {
        let sel = fields(r"metadata.name=a\,b\=c\\d,status.phase=x");
        assert_eq!(sel.exact_name(), Some(r"a,b=c\d"));
        assert_eq!(sel.to_string(), r"metadata.name=a\,b\=c\\d,status.phase=x");
        assert!(sel.matches(|f| match f {
            "metadata.name" => Some(r"a,b=c\d".to_string()),
            "status.phase" => Some("x".to_string()),
            _ => None,
        }));
    }

    #[test]
    fn field_selector_errors() {
        assert_eq!(
            FieldSelector::parse("metadata.name"),
            Err("invalid selector: 'metadata.name'; can't understand 'metadata.name'".to_string())
        );
        assert_eq!(
            FieldSelector::parse(r"metadata.name=a\b"),
            Err(r"invalid field selector: invalid escape sequence: \b".to_string())
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=a=b"),
            Err("invalid field selector: unescaped character in value: =".to_string())
        );
        assert_eq!(
            FieldSelector::parse(r"metadata.name=a\"),
            Err(r"invalid field selector: invalid escape sequence: \".to_string())
        );
    }

    #[test]
    fn field_selector_does_not_trim() {
        let sel = fields("metadata.name = foo");
        assert_eq!(sel.fields(), ["metadata.name "]);
        assert!(!sel.matches(pod_fields("foo", None)));
    }
}
