//! Which registry an image reference pulls from, as distribution's `splitDockerDomain` reads
//! it: the provider normalises references with it, and the host holds pods to the registries
//! the operator allows with it, so both name the same registry for the same reference.

/// Docker Hub, the registry of a reference that names none.
pub const DEFAULT_DOMAIN: &str = "docker.io";

/// The registry, and the rest with `library/` added to a one-part Docker Hub path.
pub fn split_docker_domain(reference: &str) -> (&str, String) {
    let (domain, remote) = match reference.split_once('/') {
        None => (DEFAULT_DOMAIN, reference),
        Some(("localhost", rest)) => ("localhost", rest),
        Some(("index.docker.io", rest)) => (DEFAULT_DOMAIN, rest),
        Some((first, rest)) if first.contains(['.', ':']) || first.bytes().any(|b| b.is_ascii_uppercase()) => {
            (first, rest)
        }
        Some(_) => (DEFAULT_DOMAIN, reference),
    };
    if domain == DEFAULT_DOMAIN && !remote.contains('/') {
        (domain, format!("library/{remote}"))
    } else {
        (domain, remote.to_string())
    }
}

/// The registry `reference` pulls from.
pub fn registry(reference: &str) -> &str {
    split_docker_domain(reference).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_read_as_the_kubelet_reads_them() {
        assert_eq!(split_docker_domain("busybox:1.36"), ("docker.io", "library/busybox:1.36".to_string()));
        assert_eq!(split_docker_domain("index.docker.io/team/app"), ("docker.io", "team/app".to_string()));
        assert_eq!(registry("team/app:1"), "docker.io");
        assert_eq!(registry("ghcr.io/team/app"), "ghcr.io");
        assert_eq!(registry("localhost/app"), "localhost");
        assert_eq!(registry("registry:5000/app"), "registry:5000");
        assert_eq!(registry("[::1]:5000/app"), "[::1]:5000");
        assert_eq!(registry("Upper/app"), "Upper");
    }
}
