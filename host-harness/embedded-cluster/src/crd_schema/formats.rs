//! The string formats the server checks (`date-time`, `uuid`, `cidr`, ...) and Go regular expressions in Rust.

use super::*;

/// The string formats that are checked; the other formats apiserver keeps are accepted as is.
pub(super) fn format_ok(format: &str, s: &str) -> bool {
    match format.replace('-', "").as_str() {
        "datetime" => is_date_time(s),
        "date" => is_date(s),
        "byte" => is_base64(s),
        "uuid" => is_uuid(s, None),
        "uuid3" => is_uuid(s, Some('3')),
        "uuid4" => is_uuid(s, Some('4')),
        "uuid5" => is_uuid(s, Some('5')),
        "ipv4" => s.parse::<IpAddr>().is_ok() && s.contains('.'),
        "ipv6" => s.parse::<IpAddr>().is_ok() && s.contains(':'),
        "cidr" => is_cidr(s),
        "k8sshortname" => names::dns1123_label(s).is_empty(),
        "k8slongname" => names::dns1123_subdomain(s).is_empty(),
        _ => true,
    }
}

/// A bad format is reported as `FieldError::invalid` whose message reads exactly like the
/// server's (`... in body must be of type date-time: "tomorrow"`).
pub(super) fn check_format(node: &Node, s: &str, path: &[Seg<'_>], out: &mut Vec<FieldError>) {
    if node.format.is_empty() || format_ok(&node.format, s) {
        return;
    }
    let (field, name) = at(path);
    out.push(FieldError::invalid(
        field,
        quoted(s),
        format!("{name} in body must be of type {}: {}", node.format, quoted(s)),
    ));
}

/// go-openapi's `IsDateTime`: a valid calendar date, a `t`, then `hh:mm:ss[.frac](z|±hh:mm)`
/// with hour <= 23 and minute, second <= 59 (case-insensitive; leap seconds rejected).
pub(super) fn is_date_time(s: &str) -> bool {
    static TIME: OnceLock<Option<Regex>> = OnceLock::new();
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let re = TIME
        .get_or_init(|| Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$").ok());
    let Some(c) = re.as_ref().and_then(|re| re.captures(time)) else {
        return false;
    };
    let part = |i: usize| c.get(i).map_or("", |m| m.as_str());
    part(1) <= "23" && part(2) <= "59" && part(3) <= "59"
}

/// Go's `time.Parse("2006-01-02", s)`: four-digit year, two-digit month and day, a real date.
pub(super) fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r.clone()).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) || !digits(5..7) || !digits(8..10) {
        return false;
    }
    let n = |r: std::ops::Range<usize>| s.get(r).and_then(|d| d.parse::<i16>().ok());
    match (n(0..4), n(5..7), n(8..10)) {
        (Some(y), Some(m), Some(d)) => jiff::civil::Date::new(y, m as i8, d as i8).is_ok(),
        _ => false,
    }
}

/// Go's `base64.StdEncoding.DecodeString` acceptance (newlines ignored, padding required).
pub(super) fn is_base64(s: &str) -> bool {
    let b: Vec<u8> = s.bytes().filter(|c| *c != b'\r' && *c != b'\n').collect();
    if !b.len().is_multiple_of(4) {
        return false;
    }
    let pad = b.iter().rev().take_while(|c| **c == b'=').count();
    pad <= 2 && b[..b.len() - pad].iter().all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
}

/// The go-openapi UUID regexes: 8-4-4-4-12 hex digits with optional dashes, a version digit
/// and (for versions 4 and 5) the RFC 4122 variant.
pub(super) fn is_uuid(s: &str, version: Option<char>) -> bool {
    let mut groups: Vec<String> = Vec::new();
    let mut chars = s.chars().peekable();
    for (i, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 && chars.peek() == Some(&'-') {
            chars.next();
        }
        let g: String = chars.by_ref().take(len).collect();
        if g.len() != len || !g.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
        groups.push(g);
    }
    if chars.next().is_some() {
        return false;
    }
    let first = |i: usize| groups.get(i).and_then(|g| g.chars().next()).map(|c| c.to_ascii_lowercase());
    match version {
        None => true,
        Some('3') => first(2) == Some('3'),
        Some(v) => first(2) == Some(v) && matches!(first(3), Some('8' | '9' | 'a' | 'b')),
    }
}

/// Go's `net.ParseCIDR`: an address, a slash, a decimal prefix within the address size.
pub(super) fn is_cidr(s: &str) -> bool {
    let Some((addr, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(ip) = addr.parse::<IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty() && bits.bytes().all(|c| c.is_ascii_digit()) && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// Rewrites a Go (RE2) pattern for Rust's `regex`: Go's `\d`, `\w`, `\s`, `\b` are ASCII-only
/// where Rust's are Unicode, and Rust reads `[` and `&&`/`~~` inside classes as set syntax.
pub(super) fn go_regex_to_rust(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d') => out.push_str("[0-9]"),
                Some('D') => out.push_str("[^0-9]"),
                Some('w') => out.push_str("[0-9A-Za-z_]"),
                Some('W') => out.push_str("[^0-9A-Za-z_]"),
                Some('s') => out.push_str(r"[\t\n\x0C\r ]"),
                Some('S') => out.push_str(r"[^\t\n\x0C\r ]"),
                Some('b') if !in_class => out.push_str(r"(?-u:\b)"),
                Some('B') if !in_class => out.push_str(r"(?-u:\B)"),
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                if chars.peek() == Some(&']') {
                    chars.next();
                    out.push_str(r"\]");
                }
            }
            '[' if chars.peek() == Some(&':') => {
                out.push('[');
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
            }
            '[' | '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Printing values the way the Go server does.
