//! Helpers shared by the ServiceAccount and RBAC scenarios: a cluster with a namespace, the
//! `robot` ServiceAccount with its Role and RoleBinding, and readers of API errors.

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use kube::core::response::{StatusDetails, StatusSummary};
use serde_json::{Value, json};

/// The namespace the scenarios work in.
pub const NS: &str = "team";
/// The user name of the `robot` ServiceAccount's tokens.
pub const ROBOT: &str = "system:serviceaccount:team:robot";

/// A cluster without controllers (nothing else writes) and with the namespace [`NS`].
pub async fn cluster() -> EmbeddedCluster {
    let c = EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() })
        .await
        .expect("start the embedded cluster");
    let namespaces: Api<Namespace> = Api::all(c.client().await.expect("client"));
    namespaces.create(&PostParams::default(), &typed(json!({"metadata": {"name": NS}}))).await.expect("namespace");
    c
}

/// A typed object from JSON.
pub fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a well-typed object")
}

/// The Status of an API error.
pub fn api_error(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A Role with these rules.
pub fn role(name: &str, rules: Value) -> Role {
    typed(json!({"metadata": {"name": name}, "rules": rules}))
}

/// A RoleBinding of this role to these subjects.
pub fn binding(name: &str, role_ref: Value, subjects: Value) -> RoleBinding {
    typed(json!({"metadata": {"name": name}, "roleRef": role_ref, "subjects": subjects}))
}

/// A minimal pod.
pub fn pod(name: &str) -> Pod {
    typed(json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
}

/// The robot's grants; `jobs` are granted in the core group on purpose (a group mismatch).
pub fn robot_rules() -> Value {
    json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["allowed"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["jobs"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}
    ])
}

/// As the admin: ServiceAccount `robot`, Role `robot` with [`robot_rules`], RoleBinding `robot`.
pub async fn grant_robot(c: &EmbeddedCluster) {
    let admin = c.client().await.expect("client");
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    sas.create(&PostParams::default(), &typed(json!({"metadata": {"name": "robot"}}))).await.expect("sa");
    let roles: Api<Role> = Api::namespaced(admin.clone(), NS);
    roles.create(&PostParams::default(), &role("robot", robot_rules())).await.expect("role");
    let bindings: Api<RoleBinding> = Api::namespaced(admin, NS);
    let subjects = json!([{"kind": "ServiceAccount", "name": "robot", "namespace": NS}]);
    bindings
        .create(&PostParams::default(), &binding("robot", json!({"kind": "Role", "name": "robot"}), subjects))
        .await
        .expect("binding");
}

/// A client with a fresh token of the robot, requested through the API.
pub async fn robot(c: &EmbeddedCluster) -> kube::Client {
    let token = c.service_account_token(NS, "robot").await.expect("token");
    c.client_for_token("robot", &token).await.expect("robot client")
}

/// The message and details of a 403, checking that it is one.
pub fn forbidden(result: Result<impl std::fmt::Debug, kube::Error>) -> (String, StatusDetails) {
    let status = api_error(result.expect_err("forbidden"));
    assert_eq!((status.code, status.reason.as_str(), status.status), (403, "Forbidden", Some(StatusSummary::Failure)));
    (status.message, status.details.expect("a Forbidden status has details"))
}

/// `User "<robot>" cannot <what>`, the heart of the robot's Forbidden messages.
pub fn robot_cannot(what: &str) -> String {
    format!("User \"{ROBOT}\" cannot {what}")
}

/// The HTTP status of listing pods in [`NS`] with `client`: 200, 401 or 403.
pub async fn code_of(client: &kube::Client) -> u16 {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    match pods.list(&ListParams::default()).await {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("unexpected {e:?}"),
    }
}
