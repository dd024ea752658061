//! The config's size limits ([`crate::input_limits`]), each problem at the field's path.

use std::collections::BTreeMap;

use super::checker::{Checker, ptr};
use crate::input_limits::{
    COMMAND_BYTES, COMMAND_WORDS, CONFIG_ANNOTATIONS, CONFIG_TEXT, ENV_NAME, ENV_VARS, EXEC_STRING, PLAIN_ENV,
    env_entry_len, word_len,
};

/// Whether the config's text is short enough to parse at all.
pub(super) fn text(c: &mut Checker, text: &str) -> bool {
    match CONFIG_TEXT.check(|| "the config".into(), text.len()) {
        Ok(()) => true,
        Err(e) => {
            c.error("", e.to_string());
            false
        }
    }
}

/// Annotation keys and values together, as kube-apiserver counts them.
pub(super) fn annotations(c: &mut Checker, annotations: &BTreeMap<String, String>) {
    let total = annotations.iter().fold(0usize, |n, (k, v)| n.saturating_add(k.len()).saturating_add(v.len()));
    if let Err(e) = CONFIG_ANNOTATIONS.check(|| "keys and values together".into(), total) {
        c.error("/annotations", e.to_string());
    }
}

/// The number of variables (`HOME` included), each name and entry, and their total.
pub(super) fn env(c: &mut Checker, env: &BTreeMap<String, String>) {
    let count = env.len().saturating_add(usize::from(!env.contains_key("HOME")));
    if let Err(e) = ENV_VARS.check(|| "HOME and the config's env".into(), count) {
        c.error("/env", e.to_string());
    }
    let mut total = 0usize;
    for (name, value) in env {
        let at = ptr("/env", name);
        if let Err(e) = ENV_NAME.check(|| "a variable's name".into(), name.len()) {
            c.error("/env", e.to_string());
            continue;
        }
        if let Err(e) = EXEC_STRING.check(|| "NAME=value".into(), env_entry_len(name, value)) {
            c.error(&at, e.to_string());
        }
        total = total.saturating_add(env_entry_len(name, value));
    }
    if let Err(e) = PLAIN_ENV.check(|| "names and values together".into(), total) {
        c.error("/env", e.to_string());
    }
}

/// Each word of the command and its arguments, their number, and their bytes together (at the
/// word where the running total crosses the limit).
pub(super) fn command(c: &mut Checker, command: &[String], args: &[String]) {
    let path = |i: usize| match i.checked_sub(command.len()) {
        None => format!("/command/{i}"),
        Some(j) => format!("/args/{j}"),
    };
    let words = || command.iter().chain(args);
    for (i, word) in words().enumerate() {
        if let Err(e) = EXEC_STRING.check(|| "the word".into(), word_len(word)) {
            c.error(&path(i), e.to_string());
        }
    }
    let count = command.len().saturating_add(args.len());
    if let Err(e) = COMMAND_WORDS.check(|| "the command and its arguments".into(), count) {
        c.error(if args.is_empty() { "/command" } else { "/args" }, e.to_string());
    }
    let total = words().fold(0usize, |n, w| n.saturating_add(word_len(w)));
    if let Err(e) = COMMAND_BYTES.check(|| "the command and its arguments together".into(), total) {
        let mut running = 0usize;
        let crossing = words().position(|w| {
            running = running.saturating_add(word_len(w));
            running > COMMAND_BYTES.max
        });
        c.error(&crossing.map_or_else(|| "/command".to_string(), path), e.to_string());
    }
}
