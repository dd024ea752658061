//! ServiceAccount tokens through kube-rs: TokenRequests are validated and defaulted like
//! kube-apiserver's, and a token authenticates (else 401) only while its ServiceAccount (and
//! bound object) lives with the same uid and the cluster clock has not passed its expiry.

use crate::common::rbac::{NS, api_error, cluster, code_of, grant_robot, pod, robot, typed};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

#[tokio::test]
async fn a_token_dies_with_its_service_account() {
    let c = cluster().await;
    grant_robot(&c).await;
    let client = robot(&c).await;
    assert_eq!(code_of(&client).await, 200);
    let sas: Api<ServiceAccount> = Api::namespaced(c.client().await.expect("client"), NS);
    sas.delete("robot", &Default::default()).await.expect("delete the sa");
    assert_eq!(code_of(&client).await, 401);
    let err = api_error(Api::<ServiceAccount>::namespaced(client.clone(), NS).get("robot").await.expect_err("401"));
    assert_eq!((err.code, err.reason.as_str(), err.message.as_str()), (401, "Unauthorized", "Unauthorized"));

    sas.create(&PostParams::default(), &typed(json!({"metadata": {"name": "robot"}}))).await.expect("recreate");
    assert_eq!(code_of(&client).await, 401, "a recreated ServiceAccount has another uid");
    assert_eq!(code_of(&robot(&c).await).await, 200, "its new tokens work");
}

#[tokio::test]
async fn a_token_expires_by_the_cluster_clock() {
    let c = cluster().await;
    grant_robot(&c).await;
    let sas: Api<ServiceAccount> = Api::namespaced(c.client().await.expect("client"), NS);
    let request: TokenRequest = typed(json!({"spec": {"expirationSeconds": 600}}));
    let answer = sas.create_token_request("robot", &PostParams::default(), &request).await.expect("token");
    assert_eq!(answer.spec.expiration_seconds, Some(600));
    assert_eq!(answer.spec.audiences, ["https://kubernetes.default.svc.cluster.local"]);
    let status = answer.status.expect("status");
    let created = answer.metadata.creation_timestamp.expect("creationTimestamp").0;
    assert_eq!(status.expiration_timestamp.0.duration_since(created).as_secs(), 600);
    let client = c.client_for_token("robot", &status.token).await.expect("client");

    c.clock().advance(std::time::Duration::from_secs(600 + 59));
    assert_eq!(code_of(&client).await, 200, "within the minute of leeway");
    c.clock().advance(std::time::Duration::from_secs(2));
    assert_eq!(code_of(&client).await, 401);
}

#[tokio::test]
async fn token_requests_are_validated_like_the_real_server() {
    let c = cluster().await;
    grant_robot(&c).await;
    let sas: Api<ServiceAccount> = Api::namespaced(c.client().await.expect("client"), NS);
    let request = |v: Value| -> TokenRequest { typed(v) };

    let err = api_error(
        sas.create_token_request("robot", &PostParams::default(), &request(json!({"spec": {"expirationSeconds": 60}})))
            .await
            .expect_err("too short"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        )
    );
    let err = api_error(
        sas.create_token_request("ghost", &PostParams::default(), &request(json!({})))
            .await
            .expect_err("no such ServiceAccount"),
    );
    assert_eq!((err.code, err.message.as_str()), (404, "serviceaccounts \"ghost\" not found"));
    let err = api_error(
        sas.create_token_request("robot", &PostParams::default(), &request(json!({"metadata": {"name": "other"}})))
            .await
            .expect_err("names must match"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            "TokenRequest.authentication.k8s.io \"robot\" is invalid: metadata.name: Invalid value: \"other\": must match the service account name if specified"
        )
    );

    let answer = sas
        .create_token_request("robot", &PostParams::default(), &request(json!({"spec": {"audiences": ["vault"]}})))
        .await
        .expect("a token for another audience");
    let vault = c.client_for_token("vault", &answer.status.expect("status").token).await.expect("client");
    assert_eq!(code_of(&vault).await, 401, "a token for another audience does not authenticate here");

    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), NS);
    pods.create(&PostParams::default(), &pod("p")).await.expect("pod");
    let bound = request(json!({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}}));
    let err = api_error(sas.create_token_request("robot", &PostParams::default(), &bound).await.expect_err("wrong sa"));
    assert_eq!(
        (err.code, err.message.as_str()),
        (400, "cannot bind token for serviceaccount \"robot\" to pod running with different serviceaccount name.")
    );
    let bound = request(json!({"spec": {"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}}}));
    let err = api_error(sas.create_token_request("robot", &PostParams::default(), &bound).await.expect_err("kind"));
    assert_eq!((err.code, err.message.as_str()), (400, "cannot bind token to object of type /v1, Kind=ConfigMap"));
}

#[tokio::test]
async fn a_token_bound_to_a_pod_dies_with_the_pod() {
    let c = cluster().await;
    grant_robot(&c).await;
    let admin = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let mut p = pod("worker");
    p.spec.as_mut().expect("spec").service_account_name = Some("robot".into());
    pods.create(&PostParams::default(), &p).await.expect("pod");
    let sas: Api<ServiceAccount> = Api::namespaced(admin, NS);
    let request: TokenRequest =
        typed(json!({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "worker"}}}));
    let answer = sas.create_token_request("robot", &PostParams::default(), &request).await.expect("token");
    let client = c.client_for_token("robot", &answer.status.expect("status").token).await.expect("client");
    assert_eq!(code_of(&client).await, 200);
    pods.delete("worker", &Default::default()).await.expect("delete the pod");
    assert_eq!(code_of(&client).await, 401);
}
