//! How every message shows a value it was given: a short prefix, never the whole value.
//!
//! Messages echo what a caller sent (an id, a config field, an argument) so the caller can find
//! it, but a value can be megabytes long: shown whole it would flood the error, the log line
//! and whatever stores them. [`quote`] shows enough to recognise the value, and its length.

use std::fmt;

/// How many characters of a value a message shows.
pub const QUOTE_PREFIX_CHARS: usize = 64;

/// `text` for a message: quoted and escaped like `{:?}` (so control characters show), and when
/// longer than [`QUOTE_PREFIX_CHARS`] characters, cut at a character boundary and followed by
/// `…` and the value's whole length in bytes: `"aaaa…aaaa"… (100000 bytes)`.
pub fn quote(text: &str) -> Quoted<'_> {
    Quoted(text)
}

/// A value as a message shows it (see [`quote`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.char_indices().nth(QUOTE_PREFIX_CHARS) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(f, "{:?}… ({} bytes)", &self.0[..cut], self.0.len()),
        }
    }
}

/// `text` cut like [`quote`] but not quoted, for places that are not prose, such as one key of
/// a JSON pointer: the value itself when short, else its prefix and `…`.
pub fn shorten(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(QUOTE_PREFIX_CHARS) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..cut])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_quoted_whole() {
        assert_eq!(quote("busybox:1.36").to_string(), "\"busybox:1.36\"");
        assert_eq!(quote("").to_string(), "\"\"");
        assert_eq!(quote("a\0b\n").to_string(), "\"a\\0b\\n\"");
        let exactly = "x".repeat(QUOTE_PREFIX_CHARS);
        assert_eq!(quote(&exactly).to_string(), format!("{exactly:?}"));
        assert_eq!(shorten(&exactly), exactly);
    }

    #[test]
    fn long_values_show_a_prefix_and_their_length() {
        let long = "a".repeat(100_000);
        let shown = quote(&long).to_string();
        assert_eq!(shown, format!("\"{}\"… (100000 bytes)", "a".repeat(QUOTE_PREFIX_CHARS)));
        assert_eq!(shorten(&long), format!("{}…", "a".repeat(QUOTE_PREFIX_CHARS)));
    }

    #[test]
    fn the_cut_falls_on_a_character_boundary() {
        let long = "ü".repeat(100);
        let shown = quote(&long).to_string();
        assert_eq!(shown, format!("\"{}\"… (200 bytes)", "ü".repeat(QUOTE_PREFIX_CHARS)));
        assert_eq!(shorten(&long).chars().count(), QUOTE_PREFIX_CHARS + 1);
    }
}
