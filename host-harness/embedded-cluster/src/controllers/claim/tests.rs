//! The claim controller's decisions, without a cluster.

use std::collections::HashSet;

use contract::k8s::agent_sandbox::{
    ASSIGNED_SANDBOX_ANNOTATION, CLAIM_UID_LABEL, LAUNCH_TYPE_LABEL, POD_NAME_ANNOTATION, TEMPLATE_REF_HASH_LABEL,
    WARM_POOL_LABEL,
};
use jiff::Timestamp;
use serde_json::{Value, json};

use super::build::{Refusal, merge_volumes};
use super::model::{Claim, ClaimStatus, SandboxRef, parse_spec};
use super::plan::{Observed, Step, WARM_RETRY, plan};
use crate::clock::parse_time;
use crate::controllers::extensions::blueprint::{Template, VolumePolicy};
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::extensions::{TEMPLATE_HASH_LABEL, controller_reference, name_hash};
use crate::controllers::sandbox::model::Condition;
use crate::controllers::warm_pool::model::Pool;
use crate::controllers::warm_pool::tests::{apis, member, template};

const CREATED: &str = "2026-01-01T00:00:00Z";

fn at(second: u32) -> Timestamp {
    parse_time(&format!("2026-01-01T00:{:02}:{:02}Z", second / 60, second % 60)).unwrap_or_else(|| panic!("time"))
}

fn claim_with(spec: Value, alpha: bool) -> Claim {
    Claim {
        name: "claim".into(),
        namespace: "ns".into(),
        uid: "cu".into(),
        resource_version: "1".into(),
        generation: 1,
        created: parse_time(CREATED),
        deleting: false,
        annotations: Default::default(),
        spec: parse_spec(Some(&spec), alpha),
        status: ClaimStatus::default(),
    }
}

fn claim(extra: Value) -> Claim {
    let mut spec = json!({"warmPoolRef": {"name": "pool"}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    claim_with(spec, false)
}

fn pool() -> Pool {
    Pool {
        name: "pool".into(),
        namespace: "ns".into(),
        uid: "pu".into(),
        replicas: 2,
        template: "tmpl".into(),
        ..Pool::default()
    }
}

fn observed(claim: Claim, members: Vec<SandboxView>, now: Timestamp) -> Observed {
    Observed {
        claim,
        pool: Some(pool()),
        pools: vec![pool()],
        template: Some(template("busybox")),
        recorded: None,
        assigned: None,
        same_name: None,
        members,
        reserved: HashSet::new(),
        now,
    }
}

fn ready_member(name: &str, second: u32) -> SandboxView {
    let mut m = member(name, "pu", second, true, &template("busybox").blueprint_hash());
    m.annotations.insert(POD_NAME_ANNOTATION.into(), name.into());
    m
}

fn step(o: &Observed) -> Step {
    plan(o, &apis()).step
}

fn ready_reason(step: &Step) -> (String, String) {
    let Step::Status(status) = step else { panic!("expected a status, got {step:?}") };
    let ready = status.condition("Ready").unwrap_or_else(|| panic!("Ready"));
    (ready.reason.clone(), ready.message.clone())
}

fn ours(name: &str) -> SandboxView {
    SandboxView {
        name: name.into(),
        namespace: "ns".into(),
        uid: format!("{name}-uid"),
        controller: Some(controller_reference("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", "claim", "cu")),
        ..SandboxView::default()
    }
}

#[test]
fn a_ready_member_with_an_ip_is_adopted_oldest_first() {
    let members = vec![ready_member("pool-new", 9), ready_member("pool-old", 1)];
    let Step::Adopt(candidates) = step(&observed(claim(json!({})), members, at(1))) else { panic!("adopt") };
    assert_eq!(candidates.iter().map(|c| c.member.name.as_str()).collect::<Vec<_>>(), ["pool-old", "pool-new"]);
    let patch = &candidates[0].patch;
    assert_eq!(patch["metadata"]["resourceVersion"], "5", "locked on the member's version");
    assert_eq!(patch["metadata"]["labels"][WARM_POOL_LABEL], Value::Null, "leaves the pool");
    assert_eq!(patch["metadata"]["labels"][TEMPLATE_HASH_LABEL], Value::Null);
    assert_eq!(patch["metadata"]["labels"][LAUNCH_TYPE_LABEL], "warm");
    assert_eq!(patch["metadata"]["labels"][CLAIM_UID_LABEL], "cu");
    assert_eq!(patch["metadata"]["labels"][TEMPLATE_REF_HASH_LABEL], name_hash("tmpl"));
    assert_eq!(patch["metadata"]["annotations"][POD_NAME_ANNOTATION], "pool-old", "keeps its pod");
    assert_eq!(
        patch["metadata"]["ownerReferences"],
        json!([{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim", "name": "claim", "uid": "cu",
            "controller": true, "blockOwnerDeletion": true}])
    );
    let pod_labels = &patch["spec"]["podTemplate"]["metadata"]["labels"];
    assert_eq!((pod_labels[WARM_POOL_LABEL].clone(), pod_labels[CLAIM_UID_LABEL].clone()), (Value::Null, json!("cu")));
}

#[test]
fn members_without_readiness_or_an_ip_are_waited_for_briefly_then_skipped() {
    let mut no_ip = ready_member("pool-noip", 0);
    no_ip.status.pod_ips = None;
    let starting = member("pool-starting", "pu", 0, false, &template("busybox").blueprint_hash());
    let members = vec![no_ip, starting];
    assert_eq!(
        step(&observed(claim(json!({})), members.clone(), at(0))),
        Step::Wait(WARM_RETRY),
        "a young claim waits"
    );
    let Step::Create(sandbox) = step(&observed(claim(json!({})), members, at(3))) else { panic!("then starts cold") };
    assert_eq!(sandbox["metadata"]["name"], "claim");
    let Step::Create(_) = step(&observed(claim(json!({})), Vec::new(), at(0))) else {
        panic!("no members: cold at once")
    };
}

#[test]
fn members_reserved_by_other_claims_stale_ones_and_foreign_ones_are_not_offered() {
    let mut o = observed(claim(json!({})), vec![ready_member("pool-a", 1), ready_member("pool-b", 2)], at(5));
    o.reserved.insert("pool-a-uid".into());
    let Step::Adopt(candidates) = step(&o) else { panic!("adopt") };
    assert_eq!(candidates.iter().map(|c| c.member.name.as_str()).collect::<Vec<_>>(), ["pool-b"]);

    let mut o = observed(claim(json!({})), vec![member("pool-old", "pu", 1, true, "oldhash")], at(5));
    let Some(pool) = o.pool.as_mut() else { panic!("pool") };
    pool.recreate = true;
    o.pools[0].recreate = true;
    assert!(matches!(step(&o), Step::Create(_)), "under Recreate a stale member is never handed out");

    let o = observed(
        claim(json!({})),
        vec![member("other", "another-pool", 1, true, &template("busybox").blueprint_hash())],
        at(5),
    );
    assert!(matches!(step(&o), Step::Create(_)));
}

#[test]
fn env_forces_a_cold_start_named_like_the_claim() {
    let mut o =
        observed(claim(json!({"env": [{"name": "TOKEN", "value": "s"}]})), vec![ready_member("pool-a", 1)], at(5));
    let Some(t) = o.template.as_mut() else { panic!("template") };
    t.env_policy = crate::controllers::extensions::blueprint::EnvPolicy::Allowed;
    let Step::Create(sandbox) = step(&o) else { panic!("cold") };
    let meta = &sandbox["metadata"];
    assert_eq!(meta["name"], "claim");
    assert_eq!(meta["labels"][LAUNCH_TYPE_LABEL], "cold");
    assert_eq!(meta["labels"][CLAIM_UID_LABEL], "cu");
    assert_eq!(meta["labels"][TEMPLATE_REF_HASH_LABEL], name_hash("tmpl"));
    assert_eq!(meta["annotations"]["agents.x-k8s.io/sandbox-template-ref"], "tmpl");
    assert_eq!(meta["ownerReferences"][0]["kind"], "SandboxClaim");
    assert_eq!(meta["ownerReferences"][0]["uid"], "cu");
    assert_eq!(
        sandbox["spec"]["podTemplate"]["spec"]["containers"][0]["env"],
        json!([{"name": "TOKEN", "value": "s"}])
    );
    assert_eq!(sandbox["spec"]["podTemplate"]["metadata"]["labels"][CLAIM_UID_LABEL], "cu");
}

fn env_outcome(policy: &str, container: Value, env: Value) -> Result<Value, (String, String)> {
    let mut o = observed(claim(json!({"env": env})), Vec::new(), at(5));
    let obj: kube::api::DynamicObject = serde_json::from_value(json!({"apiVersion": "x/v1", "kind": "SandboxTemplate",
        "metadata": {"name": "tmpl"}, "spec": {"envVarsInjectionPolicy": policy,
        "podTemplate": {"spec": {"initContainers": [{"name": "init", "image": "i"}], "containers": [container, {"name": "side", "image": "i"}]}}}}))
    .unwrap_or_else(|e| panic!("{e}"));
    o.template = Some(Template::from_dynamic(&obj).unwrap_or_else(|e| panic!("{e}")));
    match step(&o) {
        Step::Create(sandbox) => Ok(sandbox["spec"]["podTemplate"]["spec"].clone()),
        other => Err(ready_reason(&other)),
    }
}

#[test]
fn env_injection_follows_the_templates_policy() {
    let main = json!({"name": "main", "image": "i", "env": [{"name": "A", "value": "template"}]});
    let add = json!([{"name": "B", "value": "claim"}]);
    let change = json!([{"name": "A", "value": "claim"}]);
    let rejected = |r: Result<Value, (String, String)>| r.err().map(|(reason, _)| reason);
    assert_eq!(
        rejected(env_outcome("Disallowed", main.clone(), add.clone())).as_deref(),
        Some("EnvVarsInjectionRejected")
    );
    let spec = env_outcome("Allowed", main.clone(), add.clone()).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        spec["containers"][0]["env"],
        json!([{"name": "A", "value": "template"}, {"name": "B", "value": "claim"}])
    );
    assert_eq!(
        rejected(env_outcome("Allowed", main.clone(), change.clone())).as_deref(),
        Some("EnvVarsInjectionRejected")
    );
    let with_env_from = json!({"name": "main", "image": "i", "envFrom": [{"configMapRef": {"name": "cm"}}]});
    assert_eq!(
        rejected(env_outcome("Allowed", with_env_from, add.clone())).as_deref(),
        Some("EnvVarsInjectionRejected")
    );
    let spec = env_outcome("Overrides", main.clone(), change).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(spec["containers"][0]["env"], json!([{"name": "A", "value": "claim"}]));
    let targeted = json!([{"name": "S", "value": "1", "containerName": "side"}, {"name": "I", "value": "2", "containerName": "init"}]);
    let spec = env_outcome("Allowed", main.clone(), targeted).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(spec["containers"][1]["env"], json!([{"name": "S", "value": "1"}]));
    assert_eq!(spec["initContainers"][0]["env"], json!([{"name": "I", "value": "2"}]));
    let nowhere = json!([{"name": "X", "value": "1", "containerName": "ghost"}]);
    let (reason, message) = env_outcome("Allowed", main, nowhere).err().unwrap_or_else(|| panic!("refused"));
    assert_eq!(reason, "ReconcilerError");
    assert!(message.contains("\"ghost\" not found"), "{message}");
}

#[test]
fn a_missing_pool_or_template_is_reported_by_name() {
    let mut o = observed(claim(json!({})), Vec::new(), at(5));
    o.pool = None;
    assert_eq!(ready_reason(&step(&o)), ("WarmPoolNotFound".into(), "SandboxWarmPool \"pool\" not found".into()));
    let mut o = observed(claim(json!({})), Vec::new(), at(5));
    o.template = None;
    assert_eq!(ready_reason(&step(&o)), ("TemplateNotFound".into(), "SandboxTemplate \"tmpl\" not found".into()));
    assert!(step(&o).needs_confirmation(), "absence is confirmed with fresh reads");
}

#[test]
fn additional_pod_metadata_is_validated_then_merged_into_the_pod_template() {
    let with = |metadata: Value| {
        step(&observed(claim(json!({"additionalPodMetadata": metadata})), vec![ready_member("pool-a", 1)], at(5)))
    };
    for bad in [
        json!({"labels": {"team": "x"}}),
        json!({"labels": {"example.com/team": "x"}}),
        json!({"labels": {"sandbox.users.io/team": "not a value!"}}),
        json!({"annotations": {"kubernetes.io/change-cause": "x"}}),
        json!({"annotations": {"sub.agents.x-k8s.io/x": "x"}}),
    ] {
        assert_eq!(ready_reason(&with(bad.clone())).0, "InvalidMetadata", "{bad}");
    }
    let fine = json!({"labels": {"team.sandbox.users.io/name": "a"}, "annotations": {"example.com/note": "n"}});
    let Step::Adopt(candidates) = with(fine) else { panic!("adopt") };
    let pod = &candidates[0].patch["spec"]["podTemplate"]["metadata"];
    assert_eq!(
        (pod["labels"]["team.sandbox.users.io/name"].clone(), pod["annotations"]["example.com/note"].clone()),
        (json!("a"), json!("n"))
    );

    let clash = json!({"annotations": {"example.com/note": "claim"}});
    let mut o = observed(claim(json!({"additionalPodMetadata": clash})), Vec::new(), at(5));
    let Some(t) = o.template.as_mut() else { panic!("template") };
    t.pod_template["metadata"]["annotations"] = json!({"example.com/note": "template"});
    let (reason, message) = ready_reason(&step(&o));
    assert_eq!(reason, "ReconcilerError");
    assert!(message.contains("metadata override conflict"), "{message}");
}

#[test]
fn a_sandbox_the_claim_already_has_is_tracked() {
    let mut o = observed(claim(json!({})), vec![ready_member("pool-a", 1)], at(5));
    let mut mine = ours("pool-z");
    mine.status.conditions.push(Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "DependenciesReady".into(),
        ..Condition::default()
    });
    o.claim.status.sandbox = SandboxRef { name: "pool-z".into(), pod_ips: Vec::new() };
    o.recorded = Some(mine);
    let Step::Status(status) = step(&o) else { panic!("tracked") };
    assert_eq!(status.sandbox.name, "pool-z");
    assert_eq!(
        status.condition("Ready").map(|c| (c.status.clone(), c.observed_generation)),
        Some(("True".into(), Some(1)))
    );

    let mut o = observed(claim(json!({})), Vec::new(), at(5));
    o.same_name = Some(ours("claim"));
    assert!(matches!(step(&o), Step::Status(s) if s.sandbox.name == "claim"));
}

#[test]
fn a_sandbox_named_like_the_claim_that_is_not_its_own_is_an_error() {
    let mut o = observed(claim(json!({})), vec![ready_member("pool-a", 1)], at(5));
    o.same_name = Some(SandboxView { name: "claim".into(), uid: "x".into(), ..SandboxView::default() });
    let (reason, message) = ready_reason(&step(&o));
    assert_eq!(reason, "ReconcilerError");
    assert!(message.contains("is not controlled by claim \"claim\""), "{message}");
}

#[test]
fn a_recorded_adoption_is_finished_never_replaced_by_another_member() {
    let mut o = observed(claim(json!({})), vec![ready_member("pool-a", 1), ready_member("pool-b", 2)], at(5));
    o.claim.annotations.insert(ASSIGNED_SANDBOX_ANNOTATION.into(), "pool-b".into());
    o.assigned = Some(ready_member("pool-b", 2));
    let Step::Finish(candidate) = step(&o) else { panic!("finish") };
    assert_eq!(candidate.member.name, "pool-b");

    o.assigned = Some(ours("pool-b"));
    assert!(matches!(step(&o), Step::Status(s) if s.sandbox.name == "pool-b"), "already moved: tracked");

    o.assigned = None;
    assert_eq!(step(&o), Step::ClearAssignment, "gone: the annotation goes first");
    let mut elsewhere = ours("pool-b");
    elsewhere.controller =
        Some(controller_reference("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", "other", "ou"));
    o.assigned = Some(elsewhere);
    assert_eq!(step(&o), Step::ClearAssignment, "another claim's: the annotation goes");
}

#[test]
fn an_annotation_naming_a_member_the_claim_may_not_pick_is_dropped_not_finished() {
    // The claim's annotation is writable by whoever can patch the claim: a member of another
    // pool, another template, a stale or unready one, or one another claim holds, is not adopted.
    let mut other_pool = pool();
    other_pool.name = "other".into();
    other_pool.uid = "opu".into();
    let mut foreign = member("other-a", "opu", 1, true, &template("busybox").blueprint_hash());
    foreign.labels.insert(WARM_POOL_LABEL.into(), name_hash("other"));
    let mut o = observed(claim(json!({})), vec![ready_member("pool-a", 2), foreign.clone()], at(5));
    o.pools.push(other_pool);
    o.claim.annotations.insert(ASSIGNED_SANDBOX_ANNOTATION.into(), "other-a".into());
    o.assigned = Some(foreign);
    assert_eq!(step(&o), Step::ClearAssignment, "another pool's member: the annotation goes");
    // Once it is gone the claim picks from its own pool.
    o.claim.annotations.clear();
    o.assigned = None;
    let Step::Adopt(candidates) = step(&o) else { panic!("adopt") };
    assert_eq!(candidates.iter().map(|c| c.member.name.as_str()).collect::<Vec<_>>(), ["pool-a"]);

    let annotated = |member: SandboxView| {
        let mut o = observed(claim(json!({})), vec![member.clone()], at(5));
        o.claim.annotations.insert(ASSIGNED_SANDBOX_ANNOTATION.into(), member.name.clone());
        o.assigned = Some(member);
        o
    };
    let unready = member("pool-starting", "pu", 1, false, &template("busybox").blueprint_hash());
    assert_eq!(step(&annotated(unready)), Step::ClearAssignment, "not Ready");
    let mut no_ip = ready_member("pool-noip", 1);
    no_ip.status.pod_ips = None;
    assert_eq!(step(&annotated(no_ip)), Step::ClearAssignment, "no pod IP");
    let mut other_template = ready_member("pool-t", 1);
    other_template.labels.insert(TEMPLATE_REF_HASH_LABEL.into(), name_hash("another-template"));
    assert_eq!(step(&annotated(other_template)), Step::ClearAssignment, "another template's");
    let mut o = annotated(member("pool-old", "pu", 1, true, "oldhash"));
    o.pools[0].recreate = true;
    assert_eq!(step(&o), Step::ClearAssignment, "stale under Recreate");
    let mut o = annotated(ready_member("pool-held", 1));
    o.reserved.insert("pool-held-uid".into());
    assert_eq!(step(&o), Step::ClearAssignment, "another claim is adopting it");
    let mut o = annotated(ready_member("pool-env", 1));
    o.claim = claim(json!({"env": [{"name": "A", "value": "1"}]}));
    o.claim.annotations.insert(ASSIGNED_SANDBOX_ANNOTATION.into(), "pool-env".into());
    assert_eq!(step(&o), Step::ClearAssignment, "a claim that must start cold adopts nothing");
    assert!(matches!(step(&annotated(ready_member("pool-ok", 1))), Step::Finish(c) if c.member.name == "pool-ok"));
}

#[test]
fn a_sandbox_that_disappeared_is_reported_missing_before_it_is_replaced() {
    let mut o = observed(claim(json!({})), Vec::new(), at(5));
    o.claim.status.sandbox = SandboxRef { name: "pool-a".into(), pod_ips: vec!["10.0.0.1".into()] };
    let Step::Status(status) = step(&o) else { panic!("status") };
    assert_eq!(status.condition("Ready").map(|c| c.reason.as_str()), Some("SandboxMissing"));
    assert_eq!(status.sandbox, SandboxRef::default());
    assert!(Step::Status(status).needs_confirmation());
}

#[test]
fn lifecycle_deadlines_delete_or_retain() {
    let expiring =
        |policy: &str| claim(json!({"lifecycle": {"shutdownTime": "2026-01-01T00:00:10Z", "shutdownPolicy": policy}}));
    let before = plan(&observed(expiring("Delete"), Vec::new(), at(4)), &apis());
    assert_eq!(before.expires_in, Some(std::time::Duration::from_secs(6)), "requeued at the deadline");
    assert!(matches!(before.step, Step::Create(_)));
    assert_eq!(step(&observed(expiring("Delete"), Vec::new(), at(10))), Step::DeleteClaim { foreground: false });
    assert_eq!(
        step(&observed(expiring("DeleteForeground"), Vec::new(), at(11))),
        Step::DeleteClaim { foreground: true }
    );
    let mut o = observed(expiring("Retain"), Vec::new(), at(12));
    o.same_name = Some(ours("claim"));
    let Step::Expire { sandbox, status } = step(&o) else { panic!("expire") };
    assert_eq!(sandbox, Some(("claim".into(), "claim-uid".into())));
    assert_eq!(status.condition("Ready").map(|c| c.reason.as_str()), Some("ClaimExpired"));
    o.same_name = None;
    let Step::Expire { sandbox: None, status } = step(&o) else { panic!("expire") };
    assert_eq!(status.sandbox, SandboxRef::default(), "cleared once the Sandbox is gone");
}

#[test]
fn ttl_after_finished_counts_from_the_finished_condition() {
    let mut c = claim(json!({"lifecycle": {"ttlSecondsAfterFinished": 30, "shutdownPolicy": "Delete"}}));
    c.status.conditions.push(Condition {
        type_: "Finished".into(),
        status: "True".into(),
        last_transition_time: "2026-01-01T00:00:20Z".into(),
        reason: "PodSucceeded".into(),
        ..Condition::default()
    });
    let mut o = observed(c, Vec::new(), at(40));
    o.same_name = Some(ours("claim"));
    assert_eq!(plan(&o, &apis()).expires_in, Some(std::time::Duration::from_secs(10)));
    o.now = at(50);
    assert_eq!(step(&o), Step::DeleteClaim { foreground: false });
}

#[test]
fn v1alpha1_claims_pick_pools_by_template_or_name_or_none() {
    let alpha =
        |warmpool: &str| claim_with(json!({"sandboxTemplateRef": {"name": "tmpl"}, "warmpool": warmpool}), true);
    let other_pool = Pool { name: "other".into(), uid: "ou".into(), template: "tmpl".into(), ..pool() };
    let wrong_template = Pool { name: "wrong".into(), uid: "wu".into(), template: "elsewhere".into(), ..pool() };
    let mut in_other = member("other-a", "ou", 1, true, &template("busybox").blueprint_hash());
    in_other.labels.insert(WARM_POOL_LABEL.into(), name_hash("other"));
    let mut in_wrong = member("wrong-a", "wu", 0, true, "");
    in_wrong.labels.insert(WARM_POOL_LABEL.into(), name_hash("wrong"));
    let members = vec![ready_member("pool-a", 2), in_other, in_wrong];
    let run = |c: Claim| {
        let mut o = observed(c, members.clone(), at(5));
        o.pool = None;
        o.pools = vec![pool(), other_pool.clone(), wrong_template.clone()];
        step(&o)
    };
    let names = |s: Step| match s {
        Step::Adopt(c) => c.into_iter().map(|c| c.member.name).collect::<Vec<_>>(),
        other => panic!("adopt, not {other:?}"),
    };
    assert_eq!(names(run(alpha("default"))), ["other-a", "pool-a"], "any pool of the template, oldest first");
    assert_eq!(names(run(alpha("pool"))), ["pool-a"]);
    assert!(matches!(run(alpha("none")), Step::Create(_)));
    assert!(matches!(run(alpha("missing-pool")), Step::Create(_)), "a pool that does not exist gives nothing warm");
}

#[test]
fn volume_claim_templates_merge_as_the_policy_says() {
    let vct = |name: &str, size: &str| json!({"metadata": {"name": name}, "spec": {"resources": {"requests": {"storage": size}}}});
    let template = [vct("data", "1Gi")];
    assert_eq!(merge_volumes(&template, &[], VolumePolicy::Disallowed), Ok(template.to_vec()));
    assert!(matches!(
        merge_volumes(&template, &[vct("more", "1Gi")], VolumePolicy::Disallowed),
        Err(Refusal::VolumeClaimTemplates(_))
    ));
    assert_eq!(
        merge_volumes(&template, &[vct("more", "2Gi")], VolumePolicy::Allowed),
        Ok(vec![vct("data", "1Gi"), vct("more", "2Gi")])
    );
    assert!(matches!(
        merge_volumes(&template, &[vct("data", "2Gi")], VolumePolicy::Allowed),
        Err(Refusal::VolumeClaimTemplates(_))
    ));
    assert_eq!(
        merge_volumes(&template, &[vct("data", "5Gi"), vct("x", "1Gi")], VolumePolicy::Overrides),
        Ok(vec![vct("data", "5Gi"), vct("x", "1Gi")])
    );
    assert!(matches!(
        merge_volumes(&template, &[vct("a", "1Gi"), vct("a", "1Gi")], VolumePolicy::Overrides),
        Err(Refusal::VolumeClaimTemplates(_))
    ));
    let mut o = observed(
        claim(json!({"volumeClaimTemplates": [vct("scratch", "1Gi")]})),
        vec![ready_member("pool-a", 1)],
        at(5),
    );
    assert_eq!(
        ready_reason(&step(&o)).0,
        "VolumeClaimTemplatesError",
        "volumes force a cold start, then meet the policy"
    );
    let Some(t) = o.template.as_mut() else { panic!("template") };
    t.volume_policy = VolumePolicy::Allowed;
    let Step::Create(sandbox) = step(&o) else { panic!("cold") };
    assert_eq!(sandbox["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "scratch");
}

#[test]
fn a_claim_being_deleted_or_unreadable_does_nothing_or_says_why() {
    let mut o = observed(claim(json!({})), vec![ready_member("pool-a", 1)], at(5));
    o.claim.deleting = true;
    assert_eq!(step(&o), Step::Nothing);
    let o = observed(claim_with(json!({"warmPoolRef": {}}), false), Vec::new(), at(5));
    assert_eq!(ready_reason(&step(&o)).0, "ReconcilerError");
}
