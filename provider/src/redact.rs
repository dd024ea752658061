//! Keeps secret env values out of everything that leaves the provider except the Secret body.
//!
//! The provider never formats a secret value on purpose; this is the second line: any text
//! that could carry a server's echo of a request (error messages, log lines) passes through
//! [`Redactor::scrub`] first.
//!
//! A value is looked for as it was sent and in the forms a server may echo it in: base64,
//! standard and URL-safe, padded and not (a Secret's `data` is base64, and the API server
//! answers with it), and JSON-escaped (a value with quotes, backslashes or control characters
//! is quoted that way in JSON and in Go's `%q`). Not covered: the value encoded inside a longer
//! base64 string, whose encoding depends on where in it the value starts.
//!
//! A form of at least [`WHOLE_TOKEN_BELOW`] characters is replaced wherever it occurs: it is
//! very unlikely to occur by chance, and a server may embed it without separators (in a URL, a
//! blob, a quoted string). A shorter one is replaced only where it stands as a whole token,
//! between non-alphanumeric characters or the ends of the text, which is how an echo of the
//! value reads (`value "x" is invalid`). Replacing a short value everywhere would garble every
//! message (`TOKEN=x` made `Sandbo[redacted]`), and would also give the value away: where the
//! marker appears shows which letters were secret.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

use crate::errors::ProviderError;
use crate::log::{Level, Log};

/// The same marker the contract's `Debug` of secret env values shows.
pub use contract::REDACTED;

/// Forms shorter than this many characters are replaced only as whole tokens (see the module
/// docs): a random value of eight characters or more almost never turns up in a message by
/// chance, a shorter one may well be part of a word.
pub const WHOLE_TOKEN_BELOW: usize = 8;

/// The shortest start of a secret form that [`Redactor::scrub_cut`] replaces at a cut end.
pub const CUT_PREFIX: usize = 4;

/// One form of a secret value to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    text: String,
    whole_token: bool,
}

/// Replaces known secret values, and their encoded forms, in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    patterns: Vec<Pattern>,
}

/// The forms a server may echo `value` in: itself, its four base64 encodings and its JSON escape.
fn forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = vec![
        value.to_string(),
        STANDARD.encode(bytes),
        STANDARD_NO_PAD.encode(bytes),
        URL_SAFE.encode(bytes),
        URL_SAFE_NO_PAD.encode(bytes),
    ];
    if let Ok(quoted) = serde_json::to_string(value)
        && let Some(escaped) = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"'))
    {
        forms.push(escaped.to_string());
    }
    forms
}

/// Whether `text[start..end]` stands between non-alphanumeric characters or the text's ends.
fn is_whole_token(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
}

impl Redactor {
    /// A redactor for these values (empty ones are ignored: they reveal nothing).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut patterns: Vec<Pattern> = values
            .into_iter()
            .filter(|v| !v.is_empty())
            .flat_map(forms)
            .map(|text| Pattern { whole_token: text.chars().count() < WHOLE_TOKEN_BELOW, text })
            .collect();
        patterns.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then_with(|| a.text.cmp(&b.text)));
        patterns.dedup();
        Self { patterns }
    }

    /// [`Self::scrub`] for text cut short at its end (capped output): a tail of at least
    /// [`CUT_PREFIX`] characters that could be the start of a secret form is replaced too, since
    /// the rest of the value was cut away. Short (whole-token) values are left to `scrub`: a
    /// tail of one or two letters is no secret, and replacing it would garble output ends.
    pub fn scrub_cut(&self, text: &str) -> String {
        let mut scrubbed = self.scrub(text);
        let tail = self
            .patterns
            .iter()
            .filter(|p| !p.whole_token)
            .filter_map(|p| {
                (CUT_PREFIX..p.text.len())
                    .rev()
                    .filter(|&n| p.text.is_char_boundary(n))
                    .find(|&n| scrubbed.ends_with(&p.text[..n]))
            })
            .max();
        if let Some(n) = tail {
            scrubbed.truncate(scrubbed.len() - n);
            scrubbed.push_str(REDACTED);
        }
        scrubbed
    }

    /// `text` with every occurrence of a secret form replaced by [`REDACTED`]; overlapping
    /// occurrences become one marker.
    pub fn scrub(&self, text: &str) -> String {
        let mut spans: Vec<(usize, usize)> = self
            .patterns
            .iter()
            .flat_map(|p| {
                text.match_indices(p.text.as_str())
                    .map(|(start, found)| (start, start + found.len()))
                    .filter(|&(start, end)| !p.whole_token || is_whole_token(text, start, end))
            })
            .collect();
        if spans.is_empty() {
            return text.to_string();
        }
        spans.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for (start, end) in spans {
            if end <= copied {
                continue;
            }
            if start >= copied {
                out.push_str(&text[copied..start]);
                out.push_str(REDACTED);
            }
            copied = end;
        }
        out.push_str(&text[copied..]);
        out
    }

    /// The error with its message scrubbed.
    pub fn scrub_error(&self, error: ProviderError) -> ProviderError {
        if self.patterns.is_empty() {
            return error;
        }
        error.map_message(|m| self.scrub(&m))
    }
}

/// A log that scrubs messages and field values before passing them on.
pub struct RedactingLog<'a, L: Log> {
    inner: &'a L,
    redactor: &'a Redactor,
}

impl<'a, L: Log> RedactingLog<'a, L> {
    /// Wraps `inner`.
    pub fn new(inner: &'a L, redactor: &'a Redactor) -> Self {
        Self { inner, redactor }
    }
}

impl<L: Log> Log for RedactingLog<'_, L> {
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let message = self.redactor.scrub(message);
        let values: Vec<String> = fields.iter().map(|(_, v)| self.redactor.scrub(v)).collect();
        let fields: Vec<(&str, &str)> = fields.iter().zip(&values).map(|((k, _), v)| (*k, v.as_str())).collect();
        self.inner.emit(level, &message, &fields);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquire::{AcquireRequest, EnvVar};
    use crate::fake_kube::Verb;
    use crate::kube_api::KubeError;
    use crate::testkit::{Env, SECRET_VALUE, config, request};

    #[test]
    fn output_cut_inside_a_secret_keeps_none_of_it() {
        let r = Redactor::new(["s3cr3t-value"]);
        assert_eq!(r.scrub_cut("token: s3cr3t-va"), format!("token: {REDACTED}"));
        assert_eq!(r.scrub_cut("token: s3cr3t-value and"), format!("token: {REDACTED} and"));
        assert_eq!(r.scrub_cut("nothing secret"), "nothing secret");
    }

    #[test]
    fn scrubs_longest_value_first() {
        let r = Redactor::new(["abc", "abcdef", ""]);
        assert_eq!(r.scrub("x abcdef y abc"), "x [redacted] y [redacted]");
    }

    #[test]
    fn base64_forms_are_redacted() {
        let r = Redactor::new(["s3cr3t-value??>??"]);
        for encoded in [
            "czNjcjN0LXZhbHVlPz8+Pz8=",
            "czNjcjN0LXZhbHVlPz8+Pz8",
            "czNjcjN0LXZhbHVlPz8-Pz8=",
            "czNjcjN0LXZhbHVlPz8-Pz8",
        ] {
            let text = format!("data.API_KEY: Invalid value: \"{encoded}\": bad");
            assert_eq!(r.scrub(&text), "data.API_KEY: Invalid value: \"[redacted]\": bad", "{encoded}");
        }
    }

    #[test]
    fn json_escaped_forms_are_redacted() {
        let r = Redactor::new(["quote\"d\\value\n"]);
        assert_eq!(r.scrub(r#"invalid: "quote\"d\\value\n""#), r#"invalid: "[redacted]""#);
    }

    #[test]
    fn short_secrets_are_redacted_only_as_whole_tokens() {
        let r = Redactor::new(["x", "ab1"]);
        let untouched = "Sandbox sandboxes/pc-max-1 is not ready (xab1)";
        assert_eq!(r.scrub(untouched), untouched);
        assert_eq!(r.scrub("value x is invalid; \"ab1\" too"), "value [redacted] is invalid; \"[redacted]\" too");
        assert_eq!(r.scrub("x"), "[redacted]");
        assert_eq!(r.scrub("eA== is x in base64"), "[redacted] is [redacted] in base64");
    }

    #[test]
    fn acquire_hides_plain_and_base64_echoes_and_short_secrets_garble_nothing() {
        let env = Env::new();
        let echo = format!("data.API_KEY: \"c2stbGl2ZS03ZjNhOWMxZTViMmQ=\", stringData.API_KEY: \"{SECRET_VALUE}\"");
        env.kube.fail(Verb::Create, "secrets", 1, KubeError::Invalid(echo));
        let err = env.provider().acquire(request(&config("sandbox"), "red-1")).unwrap_err();
        let shown = format!("{err} {}", env.log_text());
        for leaked in [SECRET_VALUE, "c2stbGl2ZS03ZjNhOWMxZTViMmQ"] {
            assert!(!shown.contains(leaked), "{leaked} in: {shown}");
        }

        let env = Env::new();
        let short = vec![EnvVar { name: "TOKEN".into(), value: "x".into(), secret: true }];
        env.kube.fail(Verb::Create, "sandboxes", 1, KubeError::Invalid("spec.podTemplate: Sandbox is invalid".into()));
        let req = AcquireRequest { env: short, ..request(&config("sandbox"), "red-2") };
        let err = env.provider().acquire(req).unwrap_err();
        assert!(err.message().starts_with("create Sandbox sandboxes/pc-red-2 was rejected as invalid"), "{err}");
        assert!(!err.message().contains(REDACTED), "{err}");
        assert!(!env.log_text().contains(REDACTED), "{}", env.log_text());
    }

    #[test]
    fn scrubs_error_messages() {
        let r = Redactor::new(["hunter2"]);
        let e = r.scrub_error(ProviderError::rejected("the server said hunter2 is invalid"));
        assert_eq!(e.message(), "the server said [redacted] is invalid");
    }
}
