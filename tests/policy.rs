//! The host's default policy grants the provider exactly what it uses: every verb on every
//! resource type the policy allows is exercised by a full set of lifecycles, and nothing the
//! provider does falls outside it.

use std::collections::BTreeSet;

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ControllerKind, PROVIDER_USER, SandboxVersions};
use provider_e2e::*;
use provider_host::Policy;
use serde_json::json;

#[tokio::test]
async fn the_default_policy_is_exactly_what_the_provider_uses() {
    let h = Harness::start(SandboxVersions::Both).await;
    // Make the provider take its slower paths too: the Sandbox turns Ready a little after its
    // pod (so the provider watches the Sandbox), and that watch is cut with 410 once (so it
    // re-lists).
    let faults = h.cluster.faults();
    faults.add(Rule {
        matches: Match {
            verb: Some("patch".into()),
            resource: Some("sandboxes".into()),
            subresource: Some("status".into()),
            user: Some(ControllerKind::Sandbox.user().into()),
            ..Default::default()
        },
        action: Action::Delay { millis: 300 },
        times: None,
        probability: None,
    });
    faults.add(Rule {
        matches: Match {
            verb: Some("watch".into()),
            resource: Some("sandboxes".into()),
            user: Some(PROVIDER_USER.into()),
            ..Default::default()
        },
        action: Action::EndWatch { code: Some(410), after_events: 0 },
        times: Some(1),
        probability: None,
    });
    let mark = h.cluster.requests().mark();
    for backend in ["sandbox", "job"] {
        let cfg = config(backend, json!({}));
        assert!(h.host.probe(&cfg).await.expect("probe").ok);
        let lease = h.host.acquire(request(&cfg, &format!("least-{backend}"))).await.expect("acquire");
        // A retried acquire adopts what the first made and brings the Secret's values up to date.
        let again = h.host.acquire(request(&cfg, &format!("least-{backend}"))).await.expect("retried acquire");
        assert_eq!(again.workload_uid, lease.workload_uid);
        let r = lease_ref(&lease, &cfg);
        h.host.resume_check(r.clone()).await.expect("resume-check");
        h.host.renew(r.clone(), jiff::Timestamp::now().as_millisecond() + 1_800_000).await.expect("renew");
        h.host.release(r.clone()).await.expect("release");
        h.host.destroy(r).await.expect("destroy");
    }
    let cfg = config("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
    let mut req = request(&cfg, "least-reuse");
    req.reusable = true;
    let lease = h.host.acquire(req).await.expect("acquire reusable");
    let r = lease_ref(&lease, &cfg);
    h.host.release(r.clone()).await.expect("suspend");
    h.host.resume_check(r.clone()).await.expect("resume");
    h.host.destroy(r).await.expect("destroy");

    let used: BTreeSet<(String, String)> = h
        .provider_calls_since(mark)
        .into_iter()
        .filter(|e| !e.resource.is_empty())
        .map(|e| (e.resource, e.verb))
        .collect();
    let granted: BTreeSet<(String, String)> = Policy::kubernetes_default([NAMESPACE])
        .resources
        .iter()
        .flat_map(|rule| rule.verbs.iter().map(move |v| (rule.plural.clone(), v.as_str().to_string())))
        .filter(|(_, verb)| verb != "discovery")
        .collect();
    let unused: Vec<_> = granted.difference(&used).collect();
    let outside: Vec<_> = used.difference(&granted).collect();
    assert!(outside.is_empty(), "the provider made calls the policy does not grant: {outside:?}");
    assert!(unused.is_empty(), "the default policy grants verbs the provider never uses: {unused:?} (used: {used:?})");
}
