//! ServiceAccounts and RBAC through kube-rs: the objects are served, defaulted and validated
//! like kube-apiserver's, and ServiceAccount tokens are allowed exactly what RBAC grants, with
//! kube-apiserver's Forbidden body for everything else.

use crate::common::rbac::{
    NS, ROBOT, api_error, binding, cluster, code_of, forbidden, grant_robot, pod, robot, robot_cannot, robot_rules,
    role, typed,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Discovery;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use serde_json::json;

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
        ["cluster-admin", "system:basic-user", "system:discovery", "system:public-info-viewer"]
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

// ---------------------------------------------------------------------------------------------
// ServiceAccount tokens, authorized by RBAC.

#[tokio::test]
async fn a_token_is_allowed_what_its_role_binding_grants() {
    let c = cluster().await;
    grant_robot(&c).await;
    let admin = c.client().await.expect("client");
    let configmaps: Api<ConfigMap> = Api::namespaced(admin, NS);
    configmaps.create(&PostParams::default(), &typed(json!({"metadata": {"name": "allowed"}}))).await.expect("cm");

    let client = robot(&c).await;
    let mark = c.requests().mark();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod("p")).await.expect("create a pod");
    assert_eq!(pods.list(&ListParams::default()).await.expect("list pods").items.len(), 1);
    pods.get("p").await.expect("get a pod");
    pods.get_status("p").await.expect("get a pod's status");
    let mine: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    mine.get("allowed").await.expect("get the named configmap");
    let one = ListParams::default().fields("metadata.name=allowed");
    assert_eq!(mine.list(&one).await.expect("a list of the named configmap only").items.len(), 1);
    let namespaces: Api<Namespace> = Api::all(client);
    namespaces.get(NS).await.expect("a namespace object is in its own namespace");

    let entries = c.requests().since(mark);
    assert_eq!(entries.len(), 7);
    assert!(entries.iter().all(|e| e.user == ROBOT && e.code < 300), "{entries:?}");
}

#[tokio::test]
async fn every_kind_of_denial_has_the_real_forbidden_body() {
    let c = cluster().await;
    grant_robot(&c).await;
    let client = robot(&c).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    let raw = http::Request::delete(format!("/api/v1/namespaces/{NS}/pods/p")).body(Vec::new()).expect("request");
    let answer = client.send(raw.map(kube::client::Body::from)).await.expect("an answer");
    assert_eq!(answer.status(), 403);
    let body = answer.into_body().collect_bytes().await.expect("body");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&body).expect("a JSON Status"),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
            "code": 403, "details": {"name": "p", "kind": "pods"},
            "message": format!("pods \"p\" is forbidden: User \"{ROBOT}\" cannot delete resource \"pods\" in API group \"\" in the namespace \"team\"")}),
        "the whole Status, as kube-apiserver sends it"
    );
    let (message, details) = forbidden(pods.delete("p", &Default::default()).await);
    assert_eq!(
        message,
        format!(
            "pods \"p\" is forbidden: {} in the namespace \"team\"",
            robot_cannot("delete resource \"pods\" in API group \"\"")
        )
    );
    assert_eq!((details.name.as_str(), details.group.as_str(), details.kind.as_str()), ("p", "", "pods"));

    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let (message, details) = forbidden(secrets.list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!(
            "secrets is forbidden: {} in the namespace \"team\"",
            robot_cannot("list resource \"secrets\" in API group \"\"")
        )
    );
    assert_eq!((details.name.as_str(), details.kind.as_str()), ("", "secrets"));

    let (message, _) = forbidden(
        pods.patch_status("p", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running"}}))).await,
    );
    assert_eq!(
        message,
        format!(
            "pods \"p\" is forbidden: {} in the namespace \"team\"",
            robot_cannot("patch resource \"pods/status\" in API group \"\"")
        )
    );

    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let (message, details) = forbidden(jobs.list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!(
            "jobs.batch is forbidden: {} in the namespace \"team\"",
            robot_cannot("list resource \"jobs\" in API group \"batch\"")
        )
    );
    assert_eq!((details.group.as_str(), details.kind.as_str()), ("batch", "jobs"));

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let (message, _) = forbidden(configmaps.get("other").await);
    assert_eq!(
        message,
        format!(
            "configmaps \"other\" is forbidden: {} in the namespace \"team\"",
            robot_cannot("get resource \"configmaps\" in API group \"\"")
        )
    );
    let (message, _) = forbidden(configmaps.list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!(
            "configmaps is forbidden: {} in the namespace \"team\"",
            robot_cannot("list resource \"configmaps\" in API group \"\"")
        ),
        "a rule with resourceNames does not allow an unnamed list"
    );

    let elsewhere: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (message, _) = forbidden(elsewhere.list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!(
            "pods is forbidden: {} in the namespace \"default\"",
            robot_cannot("list resource \"pods\" in API group \"\"")
        )
    );

    let all_pods: Api<Pod> = Api::all(client.clone());
    let (message, _) = forbidden(all_pods.list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!("pods is forbidden: {} at the cluster scope", robot_cannot("list resource \"pods\" in API group \"\""))
    );
    let nodes: Api<Node> = Api::all(client.clone());
    let (message, details) = forbidden(nodes.get("node-1").await);
    assert_eq!(
        message,
        format!(
            "nodes \"node-1\" is forbidden: {} at the cluster scope",
            robot_cannot("get resource \"nodes\" in API group \"\"")
        )
    );
    assert_eq!(details.name, "node-1");

    let unserved = http::Request::get(format!("/api/v1/namespaces/{NS}/widgets")).body(Vec::new()).expect("request");
    let (message, _) = forbidden(client.request_text(unserved).await);
    assert_eq!(
        message,
        format!(
            "widgets is forbidden: {} in the namespace \"team\"",
            robot_cannot("list resource \"widgets\" in API group \"\"")
        ),
        "authorization comes before routing"
    );

    let admin_only = http::Request::get("/embedded-cluster/requests").body(Vec::new()).expect("request");
    let err = api_error(client.request_text(admin_only).await.expect_err("admin only"));
    assert_eq!((err.code, err.message.as_str()), (403, "the embedded cluster's admin endpoints need the admin token"));

    let entries = c.requests().entries();
    let denied: Vec<_> = entries.iter().filter(|e| e.user == ROBOT && e.code == 403).collect();
    assert_eq!(denied.len(), 12, "{denied:?}");
}

#[tokio::test]
async fn a_binding_to_a_group_or_a_cluster_role_grants_too() {
    let c = cluster().await;
    grant_robot(&c).await;
    let client = robot(&c).await;
    let admin = c.client().await.expect("client");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    forbidden(secrets.list(&ListParams::default()).await);

    let roles: Api<Role> = Api::namespaced(admin.clone(), NS);
    roles
        .create(
            &PostParams::default(),
            &role("secrets", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}])),
        )
        .await
        .expect("role");
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), NS);
    let group = json!([{"kind": "Group", "name": "system:serviceaccounts:team"}]);
    bindings
        .create(&PostParams::default(), &binding("all-accounts", json!({"kind": "Role", "name": "secrets"}), group))
        .await
        .expect("binding");
    secrets.list(&ListParams::default()).await.expect("every ServiceAccount of the namespace may list secrets");

    let nodes: Api<Node> = Api::all(client);
    forbidden(nodes.list(&ListParams::default()).await);
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    cluster_roles
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "node-reader"},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]})),
        )
        .await
        .expect("cluster role");
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(admin);
    cluster_bindings
        .create(
            &PostParams::default(),
            &typed(
                json!({"metadata": {"name": "robot-nodes"}, "roleRef": {"kind": "ClusterRole", "name": "node-reader"},
                "subjects": [{"kind": "User", "name": ROBOT}]}),
            ),
        )
        .await
        .expect("cluster binding");
    nodes.list(&ListParams::default()).await.expect("a ClusterRoleBinding grants at the cluster scope");
}

#[tokio::test]
async fn deleting_the_binding_or_the_role_revokes_at_once() {
    let c = cluster().await;
    grant_robot(&c).await;
    let client = robot(&c).await;
    let pods: Api<Pod> = Api::namespaced(client, NS);
    pods.list(&ListParams::default()).await.expect("allowed");

    let admin = c.client().await.expect("client");
    let roles: Api<Role> = Api::namespaced(admin.clone(), NS);
    roles.delete("robot", &Default::default()).await.expect("delete the role");
    let (message, _) = forbidden(pods.list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!(
            "pods is forbidden: {} in the namespace \"team\": RBAC: role.rbac.authorization.k8s.io \"robot\" not found",
            robot_cannot("list resource \"pods\" in API group \"\"")
        ),
        "a binding to a missing role is the reason"
    );

    roles.create(&PostParams::default(), &role("robot", robot_rules())).await.expect("recreate the role");
    pods.list(&ListParams::default()).await.expect("allowed again");
    let bindings: Api<RoleBinding> = Api::namespaced(admin, NS);
    bindings.delete("robot", &Default::default()).await.expect("delete the binding");
    let (message, _) = forbidden(pods.list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!(
            "pods is forbidden: {} in the namespace \"team\"",
            robot_cannot("list resource \"pods\" in API group \"\"")
        )
    );
}

#[tokio::test]
async fn discovery_works_with_a_token_that_grants_nothing_else() {
    let c = cluster().await;
    let admin = c.client().await.expect("client");
    let sas: Api<ServiceAccount> = Api::namespaced(admin, NS);
    sas.create(&PostParams::default(), &typed(json!({"metadata": {"name": "nobody"}}))).await.expect("sa");
    let token = c.service_account_token(NS, "nobody").await.expect("token");
    let client = c.client_for_token("nobody", &token).await.expect("client");
    let discovery = Discovery::new(client.clone()).run().await.expect("discovery through system:discovery");
    assert!(discovery.groups().any(|g| g.name() == "rbac.authorization.k8s.io"));
    client.apiserver_version().await.expect("version");
    let openapi = http::Request::get("/openapi/v3").body(Vec::new()).expect("request");
    client.request_text(openapi).await.expect("openapi");
    assert_eq!(code_of(&client).await, 403);
}

#[tokio::test]
async fn a_token_may_grant_only_what_it_holds_unless_it_may_escalate_or_bind() {
    let c = cluster().await;
    grant_robot(&c).await;
    let admin = c.client().await.expect("client");
    let writes = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
        "verbs": ["create", "update", "patch"]}]);
    Api::<Role>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &role("rbac-writer", writes))
        .await
        .expect("role");
    let subjects = json!([{"kind": "ServiceAccount", "name": "robot"}]);
    let admin_bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), NS);
    admin_bindings
        .create(
            &PostParams::default(),
            &binding("rbac-writer", json!({"kind": "Role", "name": "rbac-writer"}), subjects),
        )
        .await
        .expect("binding");

    let client = robot(&c).await;
    let roles: Api<Role> = Api::namespaced(client.clone(), NS);
    let held = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
    roles.create(&PostParams::default(), &role("pods", held)).await.expect("a role with rules the robot holds");
    let more = json!([{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "delete"]}]);
    let (message, details) = forbidden(roles.create(&PostParams::default(), &role("more", more.clone())).await);
    assert_eq!(
        message,
        format!(
            "roles.rbac.authorization.k8s.io \"more\" is forbidden: user \"{ROBOT}\" (groups=[\"system:serviceaccounts\" \
             \"system:serviceaccounts:team\" \"system:authenticated\"]) is attempting to grant RBAC permissions not \
             currently held:\n{{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}}\n\
             {{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}}"
        )
    );
    assert_eq!(
        (details.name.as_str(), details.group.as_str(), details.kind.as_str()),
        ("more", "rbac.authorization.k8s.io", "roles")
    );

    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), NS);
    let to_admin = binding(
        "admin",
        json!({"kind": "ClusterRole", "name": "cluster-admin"}),
        json!([{"kind": "User", "name": "x"}]),
    );
    let (message, _) = forbidden(bindings.create(&PostParams::default(), &to_admin).await);
    assert!(
        message.starts_with("rolebindings.rbac.authorization.k8s.io \"admin\" is forbidden: user \"system:serviceaccount:team:robot\"")
            && message.ends_with(
                "not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}\n{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"
            ),
        "{message}"
    );
    let to_ghost = binding("ghost", json!({"kind": "Role", "name": "ghost"}), json!([{"kind": "User", "name": "x"}]));
    let err = api_error(bindings.create(&PostParams::default(), &to_ghost).await.expect_err("no such role"));
    assert_eq!((err.code, err.message.as_str()), (404, "roles.rbac.authorization.k8s.io \"ghost\" not found"));

    let special = json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["cluster-admin"], "verbs": ["bind"]}
    ]);
    Api::<Role>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &role("special", special))
        .await
        .expect("role");
    let subjects = json!([{"kind": "ServiceAccount", "name": "robot"}]);
    admin_bindings
        .create(&PostParams::default(), &binding("special", json!({"kind": "Role", "name": "special"}), subjects))
        .await
        .expect("binding");
    roles.create(&PostParams::default(), &role("more", more)).await.expect("escalate allows any rules");
    bindings.create(&PostParams::default(), &to_admin).await.expect("bind allows binding that role");
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb_and_then_acts_as_the_named_user() {
    let c = cluster().await;
    grant_robot(&c).await;
    let token = c.service_account_token(NS, "robot").await.expect("token");
    let impersonating = |user: &str| {
        let token = token.clone();
        let user = user.to_string();
        let c = &c;
        async move {
            let yaml = c.kubeconfig_for_token("robot", &token).expect("kubeconfig");
            let mut config = embedded_cluster::tls::config_from_kubeconfig(&yaml).await.expect("config");
            config.auth_info.impersonate = Some(user);
            kube::Client::try_from(config).expect("client")
        }
    };
    let (message, _) =
        forbidden(Api::<Pod>::namespaced(impersonating("alice").await, NS).list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!(
            "users \"alice\" is forbidden: {} resource \"users\" in API group \"\" at the cluster scope",
            robot_cannot("impersonate")
        )
    );

    let admin = c.client().await.expect("client");
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    roles
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "impersonator"}, "rules": [
            {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice"]}]})),
        )
        .await
        .expect("role");
    let bindings: Api<ClusterRoleBinding> = Api::all(admin);
    bindings
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "impersonator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "impersonator"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": NS}]})),
        )
        .await
        .expect("binding");
    let mark = c.requests().mark();
    // Now the robot acts as alice, who holds no grant of her own.
    let (message, _) =
        forbidden(Api::<Pod>::namespaced(impersonating("alice").await, NS).list(&ListParams::default()).await);
    assert_eq!(
        message,
        format!(
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"{NS}\""
        )
    );
    assert!(c.requests().since(mark).iter().all(|e| e.user == "alice"), "the request log names the impersonated user");
}

/// A SelfSubjectAccessReview answers what RBAC would for a request by the reviewer, as
/// kube-apiserver's does: any authenticated user may ask (`system:basic-user`), nothing is
/// stored, and a spec describing no request is invalid.
#[tokio::test]
async fn a_self_subject_access_review_answers_for_the_reviewer() {
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    let c = cluster().await;
    grant_robot(&c).await;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(robot(&c).await);
    let ask = |verb: &str, resource: &str| {
        typed::<SelfSubjectAccessReview>(json!({"spec": {"resourceAttributes":
            {"namespace": NS, "verb": verb, "group": "", "resource": resource}}}))
    };
    let allowed = |review: SelfSubjectAccessReview| review.status.expect("a status").allowed;
    let answer = reviews.create(&PostParams::default(), &ask("create", "pods")).await.expect("review");
    assert!(allowed(answer), "the Role grants create on pods");
    let answer = reviews.create(&PostParams::default(), &ask("delete", "pods")).await.expect("review");
    assert!(!allowed(answer), "not delete");
    let answer = reviews.create(&PostParams::default(), &ask("get", "secrets")).await.expect("review");
    assert!(!allowed(answer), "nothing about secrets");
    let err = api_error(
        reviews.create(&PostParams::default(), &typed(json!({"spec": {}}))).await.expect_err("no attributes"),
    );
    assert_eq!(err.code, 422, "{}", err.message);
    assert!(err.message.contains("exactly one of nonResourceAttributes or resourceAttributes"), "{}", err.message);
    let listed = reviews.list(&ListParams::default()).await.expect_err("not the robot's to list");
    assert_eq!(api_error(listed).code, 403, "authorized before anything else, as kube-apiserver does");
    let as_admin: Api<SelfSubjectAccessReview> = Api::all(c.client().await.expect("client"));
    let listed = as_admin.list(&ListParams::default()).await.expect_err("create only");
    assert_eq!(api_error(listed).code, 405);
    let discovery = Discovery::new(c.client().await.expect("client")).run().await.expect("discovery");
    let served =
        discovery.groups().flat_map(|g| g.recommended_resources()).any(|(r, _)| r.plural == "selfsubjectaccessreviews");
    assert!(served, "discovery lists selfsubjectaccessreviews");
}
