//! Acquire with backend claim, against the fake cluster's claim and warm pool controllers: warm
//! adoption, cold start, idempotency, the version rule, fail-fast reasons, the deadline, clean-up,
//! and the lease's env kept in its Secret.

use std::time::Duration;

use serde_json::json;

use crate::acquire::AcquireRequest;
use crate::config::Backend;
use crate::fake_kube::{PodBehaviour, Verb};
use crate::kube_api::KubeError;
use crate::lease::LeaseMetadata;
use crate::naming::{self, LABEL_ACQUISITION_ID};
use crate::rfc3339;
use crate::testkit::{Env, NS, POOL, SECRET_VALUE, TEMPLATE, assert_no_secret, claim_config, request};
use crate::{Clock, ProviderError};

fn claimed(metadata: &str) -> crate::lease::ClaimedSandbox {
    LeaseMetadata::parse_lenient(metadata).sandbox.expect("the lease records the claimed Sandbox")
}

#[test]
fn a_ready_pool_member_is_adopted_at_once() {
    let env = Env::new();
    env.with_pool(2);
    let members = env.kube.pool_members(NS, POOL);
    let (started, now) = (env.clock.monotonic(), env.clock.now_millis());
    let lease = env.provider().acquire(request(&claim_config(json!({})), "c-1")).unwrap();
    assert!(env.clock.monotonic() - started < Duration::from_millis(100), "warm: no pod start waited for");

    assert_eq!(lease.provider_lease_id, "k8s:claim:sandboxes:pc-c-1");
    assert_eq!((lease.backend, lease.api_version.as_str()), (Backend::Claim, "extensions.agents.x-k8s.io/v1beta1"));
    assert!(!lease.reusable);
    assert_eq!(lease.expires_at, Some(now + 3_600_000));
    let claim = env.kube.object("sandboxclaims", NS, "pc-c-1").unwrap();
    assert_eq!(lease.workload_uid, claim["metadata"]["uid"], "the lease's workload is the claim");
    assert_eq!(claim["spec"]["warmPoolRef"]["name"], POOL);
    assert_eq!(claim["spec"]["lifecycle"]["shutdownTime"], rfc3339::format_seconds(now + 3_600_000));
    assert_eq!(claim["spec"]["lifecycle"]["shutdownPolicy"], "Delete");
    assert_eq!(claim["metadata"]["labels"][LABEL_ACQUISITION_ID], "c-1");
    assert!(claim["metadata"]["labels"].get(naming::LABEL_MANAGED_BY).is_none(), "the host stamps it");

    let sandbox = claimed(&lease.metadata);
    assert!(sandbox.warm && members.contains(&sandbox.name), "{sandbox:?} not one of {members:?}");
    assert_eq!(sandbox.api_version, "agents.x-k8s.io/v1beta1");
    let adopted = env.kube.object("sandboxes", NS, &sandbox.name).unwrap();
    assert_eq!(adopted["metadata"]["uid"], json!(sandbox.uid));
    assert_eq!(adopted["metadata"]["ownerReferences"][0]["uid"], claim["metadata"]["uid"], "ownership moved");
    assert_eq!(lease.pod_name.as_deref(), Some(sandbox.name.as_str()), "the member's pod");
    assert!(lease.pod_uid.is_some() && lease.pod_ip.is_some());
    assert_eq!(env.kube.pool_members(NS, POOL).len(), 2, "the pool made another member");
    assert_eq!(env.kube.count(Verb::Watch, "sandboxclaims"), 1, "readiness came by watch");
    assert!(env.log_text().contains("warm (adopted from the pool)"), "{}", env.log_text());
}

#[test]
fn without_a_ready_member_the_claim_cold_starts_from_the_template() {
    let env = Env::new();
    env.with_pool(0);
    let started = env.clock.monotonic();
    let lease = env.provider().acquire(request(&claim_config(json!({})), "c-2")).unwrap();
    let sandbox = claimed(&lease.metadata);
    assert!(!sandbox.warm, "{sandbox:?}");
    assert_eq!(sandbox.name, "pc-c-2", "a cold start is named like the claim");
    assert_eq!(lease.pod_name.as_deref(), Some("pc-c-2"));
    let waited = env.clock.monotonic() - started;
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(2), "waited {waited:?} for the pod");
    let made = env.kube.object("sandboxes", NS, "pc-c-2").unwrap();
    assert_eq!(made["spec"]["podTemplate"]["spec"]["containers"][0]["name"], "main", "the template's pod");
}

#[test]
fn a_retried_acquire_adopts_its_own_claim_and_nothing_else() {
    let env = Env::new();
    env.with_pool(2);
    let provider = env.provider();
    let config = claim_config(json!({}));
    let first = provider.acquire(request(&config, "c-3")).unwrap();
    let second = provider.acquire(request(&config, "c-3")).unwrap();
    assert_eq!(second.provider_lease_id, first.provider_lease_id);
    assert_eq!(second.workload_uid, first.workload_uid, "the same claim");
    assert_eq!(second.pod_uid, first.pod_uid, "the same sandbox");
    assert_eq!(second.expires_at, first.expires_at, "the adopted claim's own expiry");
    assert_eq!(claimed(&second.metadata), claimed(&first.metadata));
    assert!(LeaseMetadata::parse_lenient(&second.metadata).adopted);
    assert_eq!(env.kube.count(Verb::Create, "sandboxclaims"), 2, "the second create met the first claim (409)");
    let claims: Vec<String> = env.kube.names_in(NS).into_iter().filter(|n| n.starts_with("sandboxclaims/")).collect();
    assert_eq!(claims, vec!["sandboxclaims/pc-c-3"]);
}

#[test]
fn a_claim_of_another_acquisition_or_spec_is_not_adopted() {
    let env = Env::new();
    env.with_pool(1);
    let provider = env.provider();
    provider.acquire(request(&claim_config(json!({})), "c-4")).unwrap();
    let other_pool = claim_config(json!({"claim": {"warmPool": "go"}}));
    let err = provider.acquire(request(&other_pool, "c-4")).unwrap_err();
    assert_eq!(err.kind(), "conflict");
    assert!(err.message().contains("different spec"), "{err}");
    let mut other_env = request(&claim_config(json!({})), "c-4");
    other_env.env.push(crate::acquire::EnvVar { name: "MORE".into(), value: "x".into(), secret: false });
    assert!(provider.acquire(other_env).unwrap_err().message().contains("different spec"));
    assert!(env.kube.object("sandboxclaims", NS, "pc-c-4").is_some(), "the first attempt's claim is kept");

    let env = Env::new();
    env.with_pool(1);
    let claims = crate::api_versions::ClaimVersion::V1beta1.resource();
    env.kube.put(&claims, NS, json!({"metadata": {"name": "pc-c-5", "labels": {"team": "other"}}, "spec": {}}));
    let err = env.provider().acquire(request(&claim_config(json!({})), "c-5")).unwrap_err();
    assert_eq!(err.kind(), "conflict");
    assert!(
        err.message().contains("SandboxClaim sandboxes/pc-c-5 already exists and is not this acquisition's"),
        "{err}"
    );
    assert_eq!(env.kube.count(Verb::Create, "secrets"), 0, "nothing of ours written");
}

#[test]
fn terminal_reasons_fail_fast_say_what_to_fix_and_leave_nothing() {
    // No pool at all.
    let env = Env::new();
    env.kube.add_template(NS, TEMPLATE);
    let err = env.provider().acquire(request(&claim_config(json!({})), "c-6")).unwrap_err();
    assert_eq!((err.kind(), err.retryable()), ("rejected", false), "{err}");
    assert!(err.message().contains("Create the pool or fix claim.warmPool"), "{err}");
    assert!(err.message().contains("Everything this acquire created was deleted"), "{err}");
    assert!(env.clock.monotonic() < Duration::from_secs(1), "failed fast, not at the deadline");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());

    // A pool whose template is missing.
    let env = Env::new();
    env.kube.add_warm_pool(NS, POOL, "no-such-template", 1);
    let err = env.provider().acquire(request(&claim_config(json!({})), "c-7")).unwrap_err();
    assert_eq!(err.kind(), "rejected");
    assert!(err.message().contains("SandboxTemplate of warm pool \"python\" does not exist"), "{err}");
    assert!(env.clock.monotonic() < Duration::from_secs(1));
    assert_no_secret(&env, &err.to_string());
}

#[test]
fn a_claim_that_never_gets_ready_times_out_and_is_cleaned_up() {
    let env = Env::new();
    env.with_pool(0);
    env.kube.set_behaviour(PodBehaviour::NeverReady);
    let started = env.clock.monotonic();
    let err = env.provider().acquire(request(&claim_config(json!({})), "c-8")).unwrap_err();
    assert_eq!((err.kind(), err.retryable()), ("timeout", true), "{err}");
    assert!(err.message().contains("SandboxClaim sandboxes/pc-c-8 was not ready within 20 s"), "{err}");
    assert!(err.message().contains("readinessTimeoutSeconds"), "{err}");
    assert!(err.message().contains("Everything this acquire created was deleted"), "{err}");
    assert!(env.clock.monotonic() - started >= Duration::from_secs(20));
    assert!(env.leftovers().is_empty(), "garbage collection took the Sandbox and pod: {:?}", env.leftovers());
}

#[test]
fn a_pod_that_cannot_pull_its_image_fails_fast() {
    let env = Env::new();
    env.with_pool(0);
    env.kube.set_behaviour(PodBehaviour::ImagePull);
    let err = env.provider().acquire(request(&claim_config(json!({})), "c-9")).unwrap_err();
    assert_eq!(err.kind(), "image-pull", "{err}");
    assert!(env.clock.monotonic() < Duration::from_secs(3), "not waited out");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn clean_up_that_cannot_delete_the_claim_says_the_claim_controller_deletes_it() {
    let env = Env::new();
    env.with_pool(0);
    env.kube.set_behaviour(PodBehaviour::NeverReady);
    let unavailable = KubeError::Unavailable { message: "etcd".into(), retry_after_seconds: None };
    env.kube.fail_always(Verb::Delete, "sandboxclaims", unavailable);
    let err = env.provider().acquire(request(&claim_config(json!({})), "c-10")).unwrap_err();
    for text in
        ["Clean-up could not delete: SandboxClaim sandboxes/pc-c-10", "lifecycle.shutdownTime", "claim controller"]
    {
        assert!(err.message().contains(text), "{text:?} missing in: {err}");
    }
}

#[test]
fn a_v1alpha1_cluster_gets_a_claim_that_names_the_template() {
    let env = Env::new();
    env.kube.serve_claim_versions(&["v1alpha1"]);
    env.with_pool(1);
    let config = claim_config(json!({"claim": {"template": TEMPLATE}}));
    let lease = env.provider().acquire(request(&config, "c-11")).unwrap();
    assert_eq!(lease.api_version, "extensions.agents.x-k8s.io/v1alpha1");
    let claim = env.kube.object("sandboxclaims", NS, "pc-c-11").unwrap();
    assert_eq!(claim["apiVersion"], "extensions.agents.x-k8s.io/v1alpha1");
    assert_eq!(claim["spec"]["sandboxTemplateRef"]["name"], TEMPLATE);
    assert_eq!(claim["spec"]["warmpool"], "default", "any pool of the template");
    assert!(claim["spec"].get("warmPoolRef").is_none());
    assert!(claimed(&lease.metadata).warm, "the default pool's member was adopted");
}

#[test]
fn the_served_version_decides_what_the_config_must_name_before_anything_is_written() {
    for (served, claim, path) in [
        ("v1beta1", json!({"template": TEMPLATE}), "/claim/warmPool"),
        ("v1alpha1", json!({"warmPool": POOL}), "/claim/template"),
    ] {
        let env = Env::new();
        env.kube.serve_claim_versions(&[served]);
        env.with_pool(1);
        let err = env.provider().acquire(request(&claim_config(json!({"claim": claim})), "c-12")).unwrap_err();
        match &err {
            ProviderError::InvalidConfig(d) => {
                assert_eq!(d.path, path, "{served}");
                assert!(d.message.contains(served), "{served}: {}", d.message);
            }
            other => panic!("{served}: {other:?}"),
        }
        assert_eq!(env.kube.count(Verb::Create, "sandboxclaims") + env.kube.count(Verb::Create, "secrets"), 0);
    }
    let env = Env::new();
    env.kube.serve_claim_versions(&[]);
    let err = env.provider().acquire(request(&claim_config(json!({})), "c-13")).unwrap_err();
    assert_eq!(err.kind(), "rejected");
    assert!(err.message().contains("extensions") && err.message().contains("not installed"), "{err}");
}

#[test]
fn the_lease_env_lives_only_in_its_secret_and_does_not_force_a_cold_start() {
    let env = Env::new();
    env.with_pool(1);
    let config = claim_config(json!({"env": {"LEVEL": "debug"}}));
    let lease = env.provider().acquire(request(&config, "c-14")).unwrap();
    assert!(claimed(&lease.metadata).warm, "env does not cost the warm pool");
    let claim = env.kube.object("sandboxclaims", NS, "pc-c-14").unwrap();
    assert!(claim["spec"].get("env").is_none(), "{claim}");
    let text = claim.to_string();
    for value in [SECRET_VALUE, "debug", "fast"] {
        assert!(!text.contains(value), "{value} in the claim: {text}");
    }
    let sandbox = env.kube.object("sandboxes", NS, &claimed(&lease.metadata).name).unwrap();
    assert_no_secret(&env, &sandbox.to_string());
    assert_no_secret(&env, &serde_json::to_string(&lease).unwrap());

    let secret = env.kube.object("secrets", NS, "pc-c-14-env").unwrap();
    let mut keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, vec!["plain.LEVEL", "plain.MODE", "secret.API_KEY"]);
    assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], "SandboxClaim");
    assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], claim["metadata"]["uid"]);
    assert_eq!(LeaseMetadata::parse_lenient(&lease.metadata).secret_name.as_deref(), Some("pc-c-14-env"));
}

#[test]
fn a_reusable_claim_lease_is_refused_and_logged() {
    let env = Env::new();
    env.with_pool(1);
    let req = AcquireRequest { reusable: true, ..request(&claim_config(json!({})), "c-15") };
    let lease = env.provider().acquire(req).unwrap();
    assert!(!lease.reusable);
    assert!(env.log_text().contains("a claimed Sandbox is not kept after release"), "{}", env.log_text());
}

#[test]
fn a_sandbox_deleted_under_a_waiting_claim_fails_retryably_and_a_retry_gets_its_replacement() {
    let env = Env::new();
    env.with_pool(0);
    env.kube.set_behaviour(PodBehaviour::NeverReady);
    env.kube.schedule_remove(Duration::from_millis(500), "sandboxes", NS, "pc-c-16");
    let config = claim_config(json!({}));
    let err = env.provider().acquire(request(&config, "c-16")).unwrap_err();
    assert_eq!((err.kind(), err.retryable()), ("conflict", true), "{err}");
    assert!(err.message().contains("Sandbox sandboxes/pc-c-16 was deleted"), "{err}");
    assert!(env.clock.monotonic() < Duration::from_secs(20), "noticed at once, not at the deadline");
    env.kube.set_behaviour(PodBehaviour::Ready { after: Duration::from_secs(1) });
    let lease = env.provider().acquire(request(&config, "c-16")).unwrap();
    assert!(!claimed(&lease.metadata).warm);
}
