//! ServiceAccounts and RBAC through kube-rs: the objects are served, defaulted and validated
//! like kube-apiserver's.

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Discovery;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use serde_json::{Value, json};

const NS: &str = "team";

async fn cluster() -> EmbeddedCluster {
    let c = EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() })
        .await
        .expect("start the embedded cluster");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.client().await.expect("client"));
    namespaces.create(&PostParams::default(), &typed(json!({"metadata": {"name": NS}}))).await.expect("namespace");
    c
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a well-typed object")
}

fn api_error(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn role(name: &str, rules: Value) -> Role {
    typed(json!({"metadata": {"name": name}, "rules": rules}))
}

fn binding(name: &str, role_ref: Value, subjects: Value) -> RoleBinding {
    typed(json!({"metadata": {"name": name}, "roleRef": role_ref, "subjects": subjects}))
}

#[tokio::test]
async fn service_accounts_roles_and_bindings_are_stored_with_their_defaults() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    let sa = sas.create(&PostParams::default(), &typed(json!({"metadata": {"name": "robot"}}))).await.expect("sa");
    assert_eq!(sa.metadata.namespace.as_deref(), Some(NS));
    assert!(sa.metadata.uid.is_some());

    let roles: Api<Role> = Api::namespaced(client.clone(), NS);
    let rule = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
    roles.create(&PostParams::default(), &role("reader", rule)).await.expect("role");

    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), NS);
    let created = bindings
        .create(
            &PostParams::default(),
            &binding(
                "read",
                json!({"kind": "Role", "name": "reader"}),
                json!([{"kind": "ServiceAccount", "name": "robot"}, {"kind": "User", "name": "alice"}]),
            ),
        )
        .await
        .expect("binding");
    assert_eq!(created.role_ref.api_group, "rbac.authorization.k8s.io", "roleRef.apiGroup is defaulted");
    let subjects = created.subjects.unwrap_or_default();
    assert_eq!(subjects[0].api_group.as_deref(), None, "a ServiceAccount subject has no API group");
    assert_eq!(subjects[0].namespace.as_deref(), None, "and may leave its namespace to the binding's");
    assert_eq!(subjects[1].api_group.as_deref(), Some("rbac.authorization.k8s.io"));

    let crbs: Api<ClusterRoleBinding> = Api::all(client);
    let err = api_error(
        crbs.create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "c"}, "roleRef": {"kind": "ClusterRole", "name": "x"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot"}]})),
        )
        .await
        .expect_err("a cluster binding's ServiceAccount needs a namespace"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (422, "ClusterRoleBinding.rbac.authorization.k8s.io \"c\" is invalid: subjects[0].namespace: Required value")
    );
}

#[tokio::test]
async fn invalid_roles_and_bindings_are_rejected_like_the_real_server() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let roles: Api<Role> = Api::namespaced(client.clone(), NS);
    let err = api_error(
        roles
            .create(&PostParams::default(), &role("r", json!([{"apiGroups": [""], "resources": ["pods"]}])))
            .await
            .expect_err("a rule needs verbs"),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "Role.rbac.authorization.k8s.io \"r\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"
    );
    let causes = err.details.map(|d| d.causes).unwrap_or_default();
    assert_eq!(causes.len(), 1);
    assert_eq!((causes[0].field.as_str(), causes[0].reason.as_str()), ("rules[0].verbs", "FieldValueRequired"));

    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), NS);
    let raw: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ApiResource::erase::<RoleBinding>(&()));
    let no_ref: DynamicObject = typed(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding", "metadata": {"name": "b"}, "subjects": [{"kind": "Group", "name": "g"}]}));
    let err = api_error(raw.create(&PostParams::default(), &no_ref).await.expect_err("a binding needs a roleRef"));
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: [roleRef.kind: Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\", roleRef.name: Required value]"
        )
    );

    let err = api_error(
        bindings
            .create(&PostParams::default(), &binding("b", json!({"kind": "Role", "name": "r"}), json!([{}])))
            .await
            .expect_err("subjects need kind and name"),
    );
    assert_eq!(
        err.message,
        "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: [subjects[0].name: Required value, subjects[0].kind: Unsupported value: \"\": supported values: \"ServiceAccount\", \"User\", \"Group\"]"
    );

    let body = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "t"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "verb": ["list"]}]});
    let req =
        http::Request::post(format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles?fieldValidation=Strict"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).expect("json"))
            .expect("request");
    let err = api_error(client.request_text(req).await.expect_err("unknown fields are rejected under Strict"));
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            400,
            "Role in version \"v1\" cannot be handled as a Role: strict decoding error: unknown field \"rules[0].verb\""
        )
    );
}

#[tokio::test]
async fn a_binding_keeps_its_role_ref() {
    let c = cluster().await;
    let bindings: Api<RoleBinding> = Api::namespaced(c.client().await.expect("client"), NS);
    bindings
        .create(&PostParams::default(), &binding("b", json!({"kind": "Role", "name": "r"}), json!([])))
        .await
        .expect("binding");
    let patched = bindings
        .patch("b", &PatchParams::default(), &Patch::Merge(json!({"subjects": [{"kind": "Group", "name": "devs"}]})))
        .await
        .expect("subjects may change");
    assert_eq!(patched.subjects.map(|s| s.len()), Some(1));
    let err = api_error(
        bindings
            .patch("b", &PatchParams::default(), &Patch::Merge(json!({"roleRef": {"name": "other"}})))
            .await
            .expect_err("roleRef is immutable"),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"other\"}: cannot change roleRef"
    );
}

#[tokio::test]
async fn discovery_lists_service_accounts_and_the_rbac_group() {
    let c = cluster().await;
    let discovery = Discovery::new(c.client().await.expect("client")).run().await.expect("discovery");
    let mut found = Vec::new();
    for group in discovery.groups() {
        for (ar, _) in group.recommended_resources() {
            found.push(format!("{}/{}", ar.api_version, ar.plural));
        }
    }
    for key in [
        "v1/serviceaccounts",
        "rbac.authorization.k8s.io/v1/roles",
        "rbac.authorization.k8s.io/v1/rolebindings",
        "rbac.authorization.k8s.io/v1/clusterroles",
        "rbac.authorization.k8s.io/v1/clusterrolebindings",
    ] {
        assert!(found.iter().any(|f| f == key), "{key} missing from {found:?}");
    }
}

#[tokio::test]
async fn the_cluster_starts_with_the_bootstrap_policy() {
    let c = cluster().await;
    let client = c.client().await.expect("client");
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let listed = roles.list(&ListParams::default()).await.expect("cluster roles");
    assert_eq!(
        listed.items.iter().filter_map(|r| r.metadata.name.clone()).collect::<Vec<_>>(),
        ["cluster-admin", "system:discovery", "system:public-info-viewer"]
    );
    let discovery = roles.get("system:discovery").await.expect("system:discovery");
    let rule = &discovery.rules.unwrap_or_default()[0];
    assert_eq!(rule.verbs, ["get"]);
    assert!(rule.non_resource_urls.as_ref().is_some_and(|u| u.iter().any(|u| u == "/apis/*")));
    let bindings: Api<ClusterRoleBinding> = Api::all(client);
    let binding = bindings.get("system:discovery").await.expect("binding");
    let subjects = binding.subjects.unwrap_or_default();
    assert_eq!((subjects[0].kind.as_str(), subjects[0].name.as_str()), ("Group", "system:authenticated"));
    assert_eq!(
        binding.metadata.labels.and_then(|l| l.get("kubernetes.io/bootstrapping").cloned()).as_deref(),
        Some("rbac-defaults")
    );
}
