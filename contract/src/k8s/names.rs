//! Name, label and key validators from `k8s.io/apimachinery/pkg/util/validation`.
//!
//! Each returns the list of messages apimachinery would return (empty when valid), word for word,
//! because clients and tests match on them; callers wrap each message in a `FieldError`.

/// `DNS1123LabelMaxLength`: hostnames and most short names are limited to one DNS label.
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// `DNS1123SubdomainMaxLength`: the limit of a full DNS name, used by most object names.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// `LabelValueMaxLength`: label values and the name part of qualified names share this limit.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const ENV_VAR_NAME_ERR: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const RELAXED_ENV_VAR_NAME_ERR: &str =
    "a valid environment variable name must consist only of printable ASCII characters other than '='";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_KEY_ERR: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// `MaxLenError`: the shared wording for length limits.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `InclusiveRangeError`: the shared wording for numeric ranges (ports, ids, deadlines).
pub fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

/// `EmptyError`: the shared wording for empty parts of composite names.
pub fn empty_error() -> String {
    "must be non-empty".to_string()
}

/// `RegexError`: the message names the regex and examples, as kubectl users see it.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let quoted: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!("{msg} (e.g. {}regex used for validation is '{fmt}')", quoted.join(" or "))
}

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_lower_alnum(f) && is_lower_alnum(l) && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

fn matches_dns1035_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            f.is_ascii_lowercase() && is_lower_alnum(l) && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

fn matches_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `IsDNS1123Label`: container, volume, port and namespace names.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1123_label(s) {
        if matches_dns1123_subdomain(s) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`: the name rule of most objects (pods, secrets, nodes, ...).
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(s) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// `IsDNS1035Label`: service names, which become DNS labels that must start with a letter.
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns1035_label(s) {
        errs.push(regex_error(DNS1035_LABEL_ERR, DNS1035_LABEL_FMT, &["my-name", "abc-123"]));
    }
    errs
}

/// `IsQualifiedName`: label keys, annotation keys and finalizers (`[prefix/]name`).
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(LABEL_VALUE_MAX_LENGTH)));
    }
    if !matches_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// `IsValidLabelValue`: label values, which may be empty.
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !s.is_empty() && !matches_qualified_name_part(s) {
        errs.push(regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

fn chdir_prefix(s: &str) -> Vec<String> {
    match s {
        "." => vec!["must not be '.'".to_string()],
        ".." => vec!["must not be '..'".to_string()],
        _ if s.starts_with("..") => vec!["must not start with '..'".to_string()],
        _ => Vec::new(),
    }
}

/// `IsEnvVarName`: the strict (C-identifier-like) rule, in force before Kubernetes 1.32.
pub fn env_var_name(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let head_ok = |c: u8| c.is_ascii_alphabetic() || matches!(c, b'-' | b'.' | b'_');
    let ok = b.first().is_some_and(|&c| head_ok(c)) && b.iter().all(|&c| head_ok(c) || c.is_ascii_digit());
    let mut errs = Vec::new();
    if !ok {
        errs.push(regex_error(ENV_VAR_NAME_ERR, ENV_VAR_NAME_FMT, &["my.env-name", "MY_ENV.NAME", "MyEnvName1"]));
    }
    errs.extend(chdir_prefix(s));
    errs
}

/// `IsRelaxedEnvVarName`: the rule kube-apiserver 1.32+ applies by default
/// (feature `RelaxedEnvironmentVariableValidation`): printable ASCII except '='.
pub fn relaxed_env_var_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.is_empty() {
        errs.push(format!("environment variable name {}", empty_error()));
    }
    if s.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(RELAXED_ENV_VAR_NAME_ERR.to_string());
    }
    errs
}

/// `IsConfigMapKey`: keys of Secret and ConfigMap data, which become file names in volumes.
pub fn config_map_key(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let ok = !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !ok {
        errs.push(regex_error(CONFIG_KEY_ERR, CONFIG_KEY_FMT, &["key.name", "KEY_NAME", "key-name"]));
    }
    errs.extend(chdir_prefix(s));
    errs
}

/// `IsValidPortName`: named container ports and string target ports (IANA service names).
pub fn port_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 15 {
        errs.push(max_len_error(15));
    }
    if s.is_empty() || !s.bytes().all(|c| is_lower_alnum(c) || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string());
    }
    if !s.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if s.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if s.starts_with('-') || s.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// `IsValidPortNum`: TCP/UDP port numbers.
pub fn port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) { Vec::new() } else { vec![inclusive_range_error(1, 65535)] }
}

/// `IsValidUserID` / `IsValidGroupID`: Linux ids accepted in security contexts.
pub fn user_or_group_id(id: i64) -> Vec<String> {
    if (0..=i64::from(i32::MAX)).contains(&id) {
        Vec::new()
    } else {
        vec![inclusive_range_error(0, i64::from(i32::MAX))]
    }
}

/// `IsValidPathSegmentName`: the loosest object-name rule, for kinds without a DNS rule.
/// With `prefix` (a generateName) the whole-name checks are skipped.
pub fn path_segment_name(s: &str, prefix: bool) -> Vec<String> {
    if !prefix && (s == "." || s == "..") {
        return vec![format!("may not be '{s}'")];
    }
    ["/", "%"].iter().filter(|bad| s.contains(**bad)).map(|bad| format!("may not contain '{bad}'")).collect()
}

/// `maskTrailingDash`: a generateName may end in '-', since random characters follow it.
/// Mirrors apimachinery exactly, including dropping the character before the dash.
pub fn mask_trailing_dash(s: &str) -> String {
    if s.len() > 1 && s.ends_with('-') {
        let cut = s.len() - 2;
        match s.get(..cut) {
            Some(head) => format!("{head}a"),
            None => s.to_string(),
        }
    } else {
        s.to_string()
    }
}

/// `IsValidIP`: cluster IPs and the like, as the server would parse them.
pub fn ip_address(s: &str) -> Vec<String> {
    if s.parse::<std::net::IpAddr>().is_ok() {
        Vec::new()
    } else {
        vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_message_is_apimachinery_wording() {
        assert_eq!(
            dns1123_subdomain("Foo_bar"),
            vec!["a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string()]
        );
        assert!(dns1123_subdomain("a.b-c.d1").is_empty());
        assert!(!dns1123_subdomain("a..b").is_empty());
        assert!(!dns1123_subdomain("-a").is_empty());
        assert!(!dns1123_subdomain("").is_empty());
    }

    #[test]
    fn subdomain_too_long_reports_both_length_and_nothing_else_when_pattern_ok() {
        let long = "a".repeat(254);
        assert_eq!(dns1123_subdomain(&long), vec!["must be no more than 253 characters".to_string()]);
    }

    #[test]
    fn label_rejects_dots_with_its_own_message() {
        assert_eq!(dns1123_label("a.b"), vec!["must not contain dots".to_string()]);
        assert_eq!(
            dns1123_label("A"),
            vec!["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
        assert!(dns1123_label("123-abc").is_empty());
        assert_eq!(dns1123_label(&"a".repeat(64)), vec!["must be no more than 63 characters".to_string()]);
    }

    #[test]
    fn dns1035_requires_leading_letter() {
        assert!(dns1035_label("my-svc").is_empty());
        assert_eq!(
            dns1035_label("1svc"),
            vec!["a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string()]
        );
    }

    #[test]
    fn qualified_name_prefix_and_name_parts() {
        assert!(qualified_name("example.com/My_Name.1").is_empty());
        assert!(qualified_name("app").is_empty());
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty".to_string()]);
        assert_eq!(
            qualified_name("Example.com/x"),
            vec![format!("prefix part {}", dns1123_subdomain("Example.com")[0])]
        );
        let empty = qualified_name("");
        assert_eq!(empty.len(), 2);
        assert_eq!(empty[0], "name part must be non-empty");
        assert!(empty[1].starts_with("name part must consist of alphanumeric characters"));
        assert_eq!(
            qualified_name("a/b/c"),
            vec!["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string()]
        );
        assert_eq!(qualified_name(&"a".repeat(64)), vec!["name part must be no more than 63 characters".to_string()]);
    }

    #[test]
    fn label_values_may_be_empty() {
        assert!(label_value("").is_empty());
        assert!(label_value("v1.2_x-Y").is_empty());
        assert_eq!(
            label_value("-x"),
            vec!["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()]
        );
        assert_eq!(label_value(&"a".repeat(64)), vec!["must be no more than 63 characters".to_string()]);
    }

    #[test]
    fn env_names_strict_and_relaxed() {
        assert!(env_var_name("MY_VAR.x-1").is_empty());
        assert_eq!(env_var_name("1X").len(), 1);
        assert_eq!(env_var_name("..x"), vec!["must not start with '..'".to_string()]);
        assert_eq!(env_var_name("..1x").len(), 1);
        assert!(relaxed_env_var_name("1X y").is_empty());
        assert_eq!(
            relaxed_env_var_name("A=B"),
            vec!["a valid environment variable name must consist only of printable ASCII characters other than '='"]
        );
        assert_eq!(relaxed_env_var_name(""), vec!["environment variable name must be non-empty".to_string()]);
    }

    #[test]
    fn config_keys() {
        assert!(config_map_key("tls.crt").is_empty());
        assert_eq!(
            config_map_key("a/b"),
            vec!["a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string()]
        );
        assert_eq!(config_map_key(".."), vec!["must not be '..'".to_string()]);
    }

    #[test]
    fn port_names_and_numbers() {
        assert!(port_name("http-web").is_empty());
        assert_eq!(port_name("8080"), vec!["must contain at least one letter (a-z)".to_string()]);
        assert_eq!(
            port_name("-a--b"),
            vec!["must not contain consecutive hyphens".to_string(), "must not begin or end with a hyphen".to_string()]
        );
        assert_eq!(port_num(0), vec!["must be between 1 and 65535, inclusive".to_string()]);
        assert!(port_num(65535).is_empty());
    }

    #[test]
    fn path_segments_and_prefix_masking() {
        assert_eq!(path_segment_name("..", false), vec!["may not be '..'".to_string()]);
        assert!(path_segment_name("..", true).is_empty());
        assert_eq!(
            path_segment_name("a/b%", false),
            vec!["may not contain '/'".to_string(), "may not contain '%'".to_string()]
        );
        assert_eq!(mask_trailing_dash("web-"), "wea");
        assert_eq!(mask_trailing_dash("-"), "-");
        assert!(dns1123_subdomain(&mask_trailing_dash("web-")).is_empty());
    }

    #[test]
    fn ids_and_ips() {
        assert!(user_or_group_id(0).is_empty());
        assert_eq!(user_or_group_id(-1), vec!["must be between 0 and 2147483647, inclusive".to_string()]);
        assert!(ip_address("10.96.0.1").is_empty());
        assert!(ip_address("fd00::1").is_empty());
        assert_eq!(ip_address("10.0.0.300").len(), 1);
    }
}
