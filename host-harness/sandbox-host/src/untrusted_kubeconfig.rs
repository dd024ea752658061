//! A kubeconfig from someone the operator trusts less than itself (a Paperclip environment's
//! config, which company admins edit), checked before kube-rs loads it.
//!
//! kube-rs loads a kubeconfig as `kubectl` does: it runs a user's `exec` plugin and
//! `auth-provider` command, reads the files a user or cluster names (`tokenFile`,
//! `client-certificate`, `client-key`, `certificate-authority`) and sends requests through a
//! `proxy-url`. From an untrusted kubeconfig each of those runs a program on the host's machine
//! or sends the host's own files (a service-account token) wherever the kubeconfig says. So an
//! untrusted kubeconfig may hold inline credentials only; anything else is refused by its
//! place in the file, and no message quotes its contents (they are secrets).

use contract::quote;

/// Why an untrusted kubeconfig was refused. The messages name fields, never values.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Refused {
    /// Not YAML of a kubeconfig; the parser's own words would quote the text.
    #[error(
        "the kubeconfig is not a kubeconfig (YAML with clusters, users and contexts); its contents are not shown: \
         they may hold credentials"
    )]
    NotAKubeconfig,
    /// A field that would run a program, read a file or route requests elsewhere.
    #[error(
        "the kubeconfig's {place}.{field} is refused: {why}. An untrusted kubeconfig may hold inline credentials \
         only (token, client-certificate-data, client-key-data, certificate-authority-data)"
    )]
    Field {
        /// `users[dev]` or `clusters[prod]`.
        place: String,
        /// The field's name as kubeconfig spells it.
        field: &'static str,
        /// What it would make the host do.
        why: &'static str,
    },
}

const RUNS_A_PROGRAM: &str = "it runs a program on the host's machine";
const READS_A_FILE: &str = "it makes the host read a file of its own machine";
const ROUTES_ELSEWHERE: &str = "it sends the host's requests through a proxy";

/// Checks an untrusted kubeconfig; `Ok` when kube-rs may load it.
pub fn check(yaml: &str) -> Result<(), Refused> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).map_err(|_| Refused::NotAKubeconfig)?;
    let refuse =
        |kind: &str, name: &str, field, why| Refused::Field { place: format!("{kind}[{}]", quote(name)), field, why };
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else { continue };
        let checks: [(bool, &'static str, &'static str); 5] = [
            (user.exec.is_some(), "exec", RUNS_A_PROGRAM),
            (user.auth_provider.is_some(), "auth-provider", RUNS_A_PROGRAM),
            (user.token_file.is_some(), "tokenFile", READS_A_FILE),
            (user.client_certificate.is_some(), "client-certificate", READS_A_FILE),
            (user.client_key.is_some(), "client-key", READS_A_FILE),
        ];
        if let Some((_, field, why)) = checks.into_iter().find(|(present, ..)| *present) {
            return Err(refuse("users", &named.name, field, why));
        }
    }
    for named in &kubeconfig.clusters {
        let Some(cluster) = &named.cluster else { continue };
        if cluster.certificate_authority.is_some() {
            return Err(refuse("clusters", &named.name, "certificate-authority", READS_A_FILE));
        }
        if cluster.proxy_url.is_some() {
            return Err(refuse("clusters", &named.name, "proxy-url", ROUTES_ELSEWHERE));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(user: &str, cluster: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\n\
             clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:6443\n{cluster}users:\n- name: u\n  user:\n{user}"
        )
    }

    #[test]
    fn inline_credentials_pass() {
        let inline = "    token: hunter2\n    client-certificate-data: Y2VydA==\n    client-key-data: a2V5\n";
        assert_eq!(check(&kubeconfig(inline, "    certificate-authority-data: Y2E=\n")), Ok(()));
    }

    #[test]
    fn programs_files_and_proxies_are_refused_by_place_without_values() {
        let cases = [
            (
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh-secret\n",
                "",
                "exec",
            ),
            ("    auth-provider:\n      name: oidc\n      config: {cmd-path: /bin/secret}\n", "", "auth-provider"),
            ("    tokenFile: /var/run/secrets/token\n", "", "tokenFile"),
            ("    client-certificate: /etc/secret.crt\n", "", "client-certificate"),
            ("    client-key: /etc/secret.key\n", "", "client-key"),
            ("    token: t\n", "    certificate-authority: /etc/secret-ca.crt\n", "certificate-authority"),
            ("    token: t\n", "    proxy-url: http://secret-proxy:3128\n", "proxy-url"),
        ];
        for (user, cluster, field) in cases {
            let refused = check(&kubeconfig(user, cluster)).expect_err(field);
            let message = refused.to_string();
            assert!(message.contains(&format!(".{field} is refused")), "{message}");
            assert!(!message.contains("secret"), "no value is shown: {message}");
        }
    }

    #[test]
    fn text_that_is_not_a_kubeconfig_is_refused_without_quoting_it() {
        let refused = check("clusters: [\n  client-key-data: c2VjcmV0LWtleQ==\n").expect_err("not YAML");
        assert_eq!(refused, Refused::NotAKubeconfig);
        assert!(!refused.to_string().contains("c2VjcmV0"), "{refused}");
    }
}
