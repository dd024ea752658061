//! Image references, parsed as the kubelet parses them before it pulls: a reference it refuses
//! leaves the pod in `InvalidImageName`, so the provider refuses it in the config instead.
//!
//! The kubelet calls distribution/reference's `ParseNormalizedNamed`, whose grammar is:
//!
//! ```text
//! reference      := name [ ":" tag ] [ "@" digest ]
//! name           := [ domain "/" ] path
//! domain         := host [ ":" port-number ]
//! host           := domain-name | "[" ipv6-hex-and-colons "]"
//! domain-name    := component ( "." component )*
//! component      := [a-zA-Z0-9] | [a-zA-Z0-9] [a-zA-Z0-9-]* [a-zA-Z0-9]
//! path           := path-component ( "/" path-component )*
//! path-component := [a-z0-9]+ ( separator [a-z0-9]+ )*
//! separator      := "." | "_" | "__" | "-"+
//! tag            := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
//! digest         := algorithm ":" [0-9a-fA-F]{32,}
//! algorithm      := [A-Za-z][A-Za-z0-9]* ( [-_+.] [A-Za-z][A-Za-z0-9]* )*
//! ```
//!
//! applied after normalising a familiar name: a first part without `.` or `:`, without an
//! uppercase letter and other than `localhost` is not a registry, so the reference is on
//! `docker.io`, where a one-part path gets `library/`. Then the path is at most 255 bytes, a
//! reference of 64 lowercase hex digits alone (an image id) is refused, and the digest, as
//! go-digest checks it, is `sha256`, `sha384` or `sha512` with exactly 64, 96 or 128 lowercase
//! hex digits.
//!
//! Written by hand: the crates that parse references either match a different grammar
//! (Unicode tags, uppercase digests, no IPv6 hosts, unregistered digest algorithms) or bring a
//! regex engine that doubles the component's size.

use contract::k8s::image::split_docker_domain;
use contract::quote;

/// The longest repository path, after normalisation (`RepositoryNameTotalLengthMax`).
pub const PATH_MAX_LEN: usize = 255;
/// The longest tag.
pub const TAG_MAX_LEN: usize = 128;
/// The shortest digest encoding the grammar accepts (128 bits).
const ENCODED_MIN_LEN: usize = 32;

/// A reference as the kubelet normalises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// The registry (`host[:port]`): `docker.io` for a familiar name, empty when the
    /// first part is neither a registry nor the start of a Docker Hub path (`a_b.c/d`).
    pub domain: String,
    /// The repository path, with `library/` for a one-part Docker Hub name.
    pub path: String,
    /// The tag, when the reference has one.
    pub tag: Option<String>,
    /// The digest, `algorithm:hex`, when the reference has one.
    pub digest: Option<String>,
}

/// Why a reference would be refused, precisely enough to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    /// Nothing at all.
    #[error("is empty; name an image such as busybox:1.36")]
    Empty,
    /// A character no part of a reference may hold (NUL, a space, non-ASCII), at byte `at`.
    #[error(
        "has '{}' at byte {at}: an image reference is ASCII letters, digits and . _ - / : @ + [ ]",
        ch.escape_debug()
    )]
    Character { ch: char, at: usize },
    /// 64 lowercase hex digits alone: an image id.
    #[error("is 64 hex digits, which is an image id, not a name; name the repository (with @sha256:<id> to pin it)")]
    Identifier,
    /// An uppercase letter in the repository, as the kubelet sees it after normalising.
    #[error("has the repository {} with an uppercase letter; repository paths are lowercase", quote(.remote))]
    Uppercase { remote: String },
    /// A registry that is no host name or address, or a bad port.
    #[error(
        "has the registry {}, which is not a host name, an IPv4 address or an [IPv6] address, with an optional \
         :port",
        quote(.domain)
    )]
    Domain { domain: String },
    /// A part of the repository path between '/'s outside the path-component grammar.
    #[error(
        "has the path component {}, which is not lowercase letters and digits separated by one '.', one or two '_', \
         or dashes",
        quote(.component)
    )]
    PathComponent { component: String },
    /// A repository path over [`PATH_MAX_LEN`] bytes, after normalising.
    #[error("has a repository path of {len} bytes ({}); at most {PATH_MAX_LEN} are accepted", quote(.path))]
    PathTooLong { path: String, len: usize },
    /// A tag outside the tag grammar.
    #[error(
        "has the tag {}, which is not 1 to {TAG_MAX_LEN} letters, digits, '_', '.' and '-' starting with a letter, \
         digit or '_'",
        quote(.tag)
    )]
    Tag { tag: String },
    /// A digest outside the digest grammar.
    #[error("has the digest {}, which is not <algorithm>:<at least 32 hex digits>", quote(.digest))]
    Digest { digest: String },
    /// A digest algorithm go-digest does not register.
    #[error("has a digest of algorithm {}, which is not supported; use sha256, sha384 or sha512", quote(.algorithm))]
    DigestAlgorithm { algorithm: String },
    /// A digest of the wrong length for its algorithm.
    #[error("has a {algorithm} digest of {len} hex digits; {algorithm} has {expected}")]
    DigestLength { algorithm: &'static str, len: usize, expected: usize },
    /// A digest in uppercase hex.
    #[error("has a digest in uppercase hex digits; write them in lowercase")]
    DigestCase,
}

/// Parses `reference` as the kubelet does (see the module docs).
pub fn parse(reference: &str) -> Result<ImageRef, ImageRefError> {
    if reference.is_empty() {
        return Err(ImageRefError::Empty);
    }
    if let Some((at, ch)) = reference.char_indices().find(|&(_, c)| !is_reference_char(c)) {
        return Err(ImageRefError::Character { ch, at });
    }
    if reference.len() == 64 && reference.bytes().all(is_lower_hex) {
        return Err(ImageRefError::Identifier);
    }
    let (domain, remainder) = split_docker_domain(reference);
    let remote = remainder.split(':').next().unwrap_or_default();
    if remote.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(ImageRefError::Uppercase { remote: remote.to_string() });
    }
    let full = format!("{domain}/{remainder}");
    let (before_digest, digest) = match full.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (full.as_str(), None),
    };
    let (name, tag) = match before_digest.rsplit_once(':') {
        // A port is always followed by the path; what follows the last ':' without a '/' is a tag.
        Some((name, tag)) if !tag.contains('/') => (name, Some(tag)),
        _ => (before_digest, None),
    };
    if let Some(tag) = tag {
        check_tag(tag)?;
    }
    let (domain, path) = split_name(name)?;
    if path.len() > PATH_MAX_LEN {
        return Err(ImageRefError::PathTooLong { path: path.to_string(), len: path.len() });
    }
    if let Some(digest) = digest {
        check_digest(digest)?;
    }
    Ok(ImageRef {
        domain: domain.to_string(),
        path: path.to_string(),
        tag: tag.map(str::to_string),
        digest: digest.map(str::to_string),
    })
}

fn is_reference_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@' | '+' | '[' | ']')
}

fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// The registry and the path of a normalised name: the first part is the registry when it is
/// one and the rest is a path; otherwise the whole name must be a path.
fn split_name(name: &str) -> Result<(&str, &str), ImageRefError> {
    let (first, rest) = name.split_once('/').unwrap_or(("", name));
    if is_domain(first) && is_path(rest) {
        return Ok((first, rest));
    }
    if is_path(name) {
        return Ok(("", name));
    }
    if !is_domain(first) && first.contains([':', '[', ']']) {
        return Err(ImageRefError::Domain { domain: first.to_string() });
    }
    let path = if is_domain(first) { rest } else { name };
    let component = path.split('/').find(|c| !is_path_component(c)).unwrap_or(path);
    Err(ImageRefError::PathComponent { component: component.to_string() })
}

/// `host[:port]`, the host a domain name or a bracketed IPv6 address.
fn is_domain(domain: &str) -> bool {
    let (host, port) = match domain.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ipv6, port)) => {
                let ipv6_ok = !ipv6.is_empty() && ipv6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
                if !ipv6_ok {
                    return false;
                }
                ("", port)
            }
            None => return false,
        },
        None => match domain.find(':') {
            Some(i) => domain.split_at(i),
            None => (domain, ""),
        },
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    let host_ok = domain.starts_with('[') || (!host.is_empty() && host.split('.').all(is_domain_component));
    port_ok && host_ok
}

fn is_domain_component(component: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    let bytes = component.as_bytes();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

fn is_path(path: &str) -> bool {
    path.split('/').all(is_path_component)
}

/// `[a-z0-9]+` runs joined by one `.`, one or two `_`, or any number of `-`.
fn is_path_component(component: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = component.as_bytes();
    if !(bytes.first().is_some_and(alnum) && bytes.last().is_some_and(alnum)) {
        return false;
    }
    bytes
        .split(alnum)
        .filter(|separator| !separator.is_empty())
        .all(|separator| matches!(separator, b"." | b"_" | b"__") || separator.iter().all(|b| *b == b'-'))
}

fn check_tag(tag: &str) -> Result<(), ImageRefError> {
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let bytes = tag.as_bytes();
    let ok = (1..=TAG_MAX_LEN).contains(&bytes.len())
        && bytes.first().is_some_and(word)
        && bytes.iter().all(|b| word(b) || matches!(b, b'.' | b'-'));
    if ok { Ok(()) } else { Err(ImageRefError::Tag { tag: tag.to_string() }) }
}

/// The grammar's digest, then go-digest's check of a registered algorithm.
fn check_digest(digest: &str) -> Result<(), ImageRefError> {
    let bad = || ImageRefError::Digest { digest: digest.to_string() };
    let (algorithm, encoded) = digest.split_once(':').ok_or_else(bad)?;
    let algorithm_ok = algorithm.split(['-', '_', '+', '.']).all(|part| {
        part.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) && part.bytes().all(|b| b.is_ascii_alphanumeric())
    });
    if !algorithm_ok || encoded.len() < ENCODED_MIN_LEN || !encoded.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let (algorithm, expected) = match algorithm {
        "sha256" => ("sha256", 64),
        "sha384" => ("sha384", 96),
        "sha512" => ("sha512", 128),
        other => return Err(ImageRefError::DigestAlgorithm { algorithm: other.to_string() }),
    };
    if encoded.len() != expected {
        return Err(ImageRefError::DigestLength { algorithm, len: encoded.len(), expected });
    }
    if !encoded.bytes().all(is_lower_hex) {
        return Err(ImageRefError::DigestCase);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(reference: &str) -> (String, String, Option<String>, Option<String>) {
        let r = parse(reference).unwrap_or_else(|e| panic!("{reference:?} {e}"));
        (r.domain, r.path, r.tag, r.digest)
    }

    fn refused(reference: &str) -> ImageRefError {
        match parse(reference) {
            Ok(r) => panic!("{reference:?} was accepted as {r:?}"),
            Err(e) => e,
        }
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    const SHA256: &str = "sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa";

    #[test]
    fn familiar_names_are_normalised_to_docker_hub() {
        assert_eq!(parts("busybox"), ("docker.io".into(), "library/busybox".into(), None, None));
        assert_eq!(parts("busybox:1.36"), ("docker.io".into(), "library/busybox".into(), some("1.36"), None));
        assert_eq!(parts("team/agent"), ("docker.io".into(), "team/agent".into(), None, None));
        assert_eq!(parts("docker.io/busybox"), ("docker.io".into(), "library/busybox".into(), None, None));
        assert_eq!(parts("index.docker.io/team/agent"), ("docker.io".into(), "team/agent".into(), None, None));
        // No '/': the part after ':' is a tag, never a port.
        assert_eq!(parts("localhost:5000"), ("docker.io".into(), "library/localhost".into(), some("5000"), None));
        assert_eq!(parts("192.168.0.1:80"), ("docker.io".into(), "library/192.168.0.1".into(), some("80"), None));
    }

    #[test]
    fn registries_hosts_ports_and_ipv6_are_kept() {
        assert_eq!(parts("ghcr.io/acme/agent:1"), ("ghcr.io".into(), "acme/agent".into(), some("1"), None));
        assert_eq!(parts("localhost/agent"), ("localhost".into(), "agent".into(), None, None));
        assert_eq!(parts("localhost:5000/a/b:t"), ("localhost:5000".into(), "a/b".into(), some("t"), None));
        assert_eq!(parts("127.0.0.1:5000/debian"), ("127.0.0.1:5000".into(), "debian".into(), None, None));
        assert_eq!(parts("[fc00::1]:5000/docker"), ("[fc00::1]:5000".into(), "docker".into(), None, None));
        assert_eq!(parts("[fc00:1:2:3:4:5:6:7]/x:y"), ("[fc00:1:2:3:4:5:6:7]".into(), "x".into(), some("y"), None));
        // An uppercase first part is taken for a registry, which may be uppercase.
        assert_eq!(parts("LOCALDOMAIN/debian"), ("LOCALDOMAIN".into(), "debian".into(), None, None));
        assert_eq!(parts("xn--n3h.com/myimage:xn--n3h.com").1, "myimage");
        // A first part that is no registry but a path component makes the whole name a path.
        assert_eq!(parts("a_b.c/d"), (String::new(), "a_b.c/d".into(), None, None));
    }

    #[test]
    fn path_components_take_the_allowed_separators() {
        for ok in ["docker-rules/docker", "docker---rules/docker", "dock__er/docker", "d/docker", "a.b_c/x", "x1/2y"] {
            parse(ok).unwrap_or_else(|e| panic!("{ok:?} {e}"));
        }
        for bad in [
            "-docker/docker",
            "docker-/docker",
            "____/____",
            "_docker/_docker",
            "dock..er/docker",
            "dock_.er/docker",
            "dock-.er/docker",
            "dock___er/docker",
            "docker///docker",
            "docker/",
            "../etc/passwd",
            "a/./b",
        ] {
            assert!(matches!(refused(bad), ImageRefError::PathComponent { .. }), "{bad}: {}", refused(bad));
        }
    }

    #[test]
    fn tags_and_digests() {
        let (_, _, tag, digest) = parts(&format!("registry.example/agent:v1.2-rc_3@{SHA256}"));
        assert_eq!((tag, digest), (some("v1.2-rc_3"), some(SHA256)));
        assert_eq!(parts(&format!("agent@{SHA256}")).3, some(SHA256));
        parse(&format!("agent@sha384:{}", "a".repeat(96))).unwrap();
        parse(&format!("agent@sha512:{}", "0".repeat(128))).unwrap();
        parse(&format!("agent:{}", "t".repeat(128))).unwrap();
        parse("agent:Uppercase_Tag").unwrap();
        for bad in ["agent:", "agent:-x", "agent:.x", &format!("agent:{}", "t".repeat(129)), "agent:ü", "agent:a+b"] {
            let e = parse(bad).expect_err(bad);
            assert!(matches!(e, ImageRefError::Tag { .. } | ImageRefError::Character { .. }), "{bad}: {e}");
        }
        assert!(matches!(refused("agent@sha256:abc"), ImageRefError::Digest { .. }));
        assert!(matches!(refused("agent@"), ImageRefError::Digest { .. }));
        assert!(matches!(refused(&format!("agent@sha256:{}", "g".repeat(64))), ImageRefError::Digest { .. }));
        assert!(matches!(refused(&format!("agent@1sha:{}", "a".repeat(64))), ImageRefError::Digest { .. }));
        assert!(matches!(refused(&format!("a@b@{SHA256}")), ImageRefError::Digest { .. }));
        let md5 = refused(&format!("agent@md5:{}", "a".repeat(32)));
        assert!(matches!(md5, ImageRefError::DigestAlgorithm { .. }), "{md5}");
        assert_eq!(
            refused(&format!("agent@sha256:{}", "a".repeat(63))),
            ImageRefError::DigestLength { algorithm: "sha256", len: 63, expected: 64 }
        );
        assert_eq!(refused(&format!("agent@sha256:{}", "A".repeat(64))), ImageRefError::DigestCase);
    }

    #[test]
    fn names_the_kubelet_refuses_are_refused_precisely() {
        assert_eq!(refused(""), ImageRefError::Empty);
        assert_eq!(refused("busybox\0"), ImageRefError::Character { ch: '\0', at: 7 });
        assert_eq!(refused("bu sybox"), ImageRefError::Character { ch: ' ', at: 2 });
        assert_eq!(refused("ünicode"), ImageRefError::Character { ch: 'ü', at: 0 });
        assert_eq!(refused("https://github.com/docker/docker"), ImageRefError::Domain { domain: "https:".into() });
        assert_eq!(refused(&"a".repeat(64)), ImageRefError::Identifier);
        parse(&format!("docker.io/{}", "a".repeat(64))).expect("with a registry, 64 hex digits are a name");
        parse(&"g".repeat(64)).expect("not hex: a name");
        assert_eq!(refused("Busybox"), ImageRefError::Uppercase { remote: "library/Busybox".into() });
        assert_eq!(refused("docker/Docker"), ImageRefError::Uppercase { remote: "docker/Docker".into() });
        refused("[fc00::1]");
        assert!(matches!(refused("[fc00::1]:5000"), ImageRefError::PathComponent { .. }));
        assert!(matches!(refused("fc00::1:5000/debian"), ImageRefError::Domain { .. }));
        assert!(matches!(refused("[fe80::1%eth0]:5000/debian"), ImageRefError::Character { ch: '%', .. }));
        assert!(matches!(refused("[2001:db8::192.0.2.33]:5000/debian"), ImageRefError::Domain { .. }));
        assert!(matches!(refused("-docker.io/docker/docker"), ImageRefError::PathComponent { .. }));
        assert!(matches!(refused("registry:port/x"), ImageRefError::Domain { .. }));
    }

    #[test]
    fn the_path_is_at_most_255_bytes_after_normalisation() {
        parse(&format!("x/{}", "a".repeat(253))).expect("255 bytes");
        let long = format!("x/{}", "a".repeat(254));
        assert_eq!(refused(&long), ImageRefError::PathTooLong { len: 256, path: long.clone() });
        parse(&"a".repeat(247)).expect("library/ and 247 bytes make 255");
        assert!(matches!(refused(&"a".repeat(248)), ImageRefError::PathTooLong { len: 256, .. }));
        parse(&format!("{}.example/a", "h".repeat(300))).expect("the registry does not count");
    }

    #[test]
    fn no_input_panics() {
        let alphabet = ["a", "A", "0", ".", "_", "-", "/", ":", "@", "+", "[", "]", "é", "\0", "f"];
        let mut inputs = vec![String::new()];
        for _ in 0..4 {
            inputs = inputs.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            for input in &inputs {
                let _ = parse(input);
                let _ = parse(&format!("{input}/x:y@{SHA256}"));
                let _ = parse(&format!("reg.io/{input}"));
            }
        }
    }
}
