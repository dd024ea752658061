//! The thin I/O loop: watch templates and the NetworkPolicies they own, read, plan, act.
//! Templates are few and change rarely, so a reconcile reads the policy from the API server.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use contract::k8s::agent_sandbox::TEMPLATE_KIND;
use futures::StreamExt;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use tracing::{debug, info, warn};

use super::plan::{Action, network_policy_name, plan};
use crate::controllers::extensions::blueprint::Template;
use crate::controllers::extensions::caches::{is_conflict, is_not_found, key_of, request};
use crate::controllers::extensions::discovery::{Apis, discover};
use crate::controllers::extensions::{controller_of, is_extension_kind};

/// Real time before retrying a reconcile that failed.
const ERROR_RETRY: Duration = Duration::from_secs(1);

struct Context {
    client: Client,
    apis: Apis,
}

/// A reconcile failure, in the shape kube's controller wants.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct ReconcileError(anyhow::Error);

/// Runs until the future is dropped: waits for agent-sandbox's groups, then keeps every
/// template's label and NetworkPolicy.
pub async fn run(client: Client) -> anyhow::Result<()> {
    let apis = discover(&client, "template").await;
    info!(extensions = apis.version.version(), "template controller started");
    let templates = apis.templates.clone();
    let policies = watcher(Api::<NetworkPolicy>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .touched_objects();
    let controller = Controller::new_with(
        Api::<DynamicObject>::all_with(client.clone(), &apis.templates),
        watcher::Config::default(),
        apis.templates.clone(),
    )
    .watches_stream(policies, move |policy: NetworkPolicy| {
        let owner = controller_of(&policy.metadata).filter(|r| is_extension_kind(r, TEMPLATE_KIND)).cloned();
        owner.zip(policy.namespace()).map(|(owner, ns)| request(&templates, &ns, &owner.name))
    });
    controller
        .run(reconcile, error_policy, Arc::new(Context { client, apis }))
        .for_each(|result| async move {
            match result {
                Ok((template, _)) => debug!(template = %template, "reconciled"),
                Err(kube::runtime::controller::Error::ObjectNotFound(template)) => {
                    debug!(template = %template, "a NetworkPolicy changed after its template was deleted")
                }
                Err(error) => warn!(%error, "template controller error"),
            }
        })
        .await;
    Ok(())
}

fn error_policy(template: Arc<DynamicObject>, error: &ReconcileError, _: Arc<Context>) -> Requeue {
    warn!(template = %key_of(&template), %error, "reconcile failed");
    Requeue::requeue(ERROR_RETRY)
}

async fn reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Requeue, ReconcileError> {
    let Some(namespace) = object.namespace() else {
        return Ok(Requeue::await_change());
    };
    reconcile_template(&context, &namespace, &object)
        .await
        .with_context(|| format!("reconciling SandboxTemplate {}", key_of(&object)))
        .map_err(ReconcileError)
}

async fn reconcile_template(context: &Context, namespace: &str, object: &DynamicObject) -> anyhow::Result<Requeue> {
    if object.metadata.deletion_timestamp.is_some() {
        return Ok(Requeue::await_change());
    }
    let template = Template::from_dynamic(object).map_err(anyhow::Error::msg)?;
    let policies: Api<NetworkPolicy> = Api::namespaced(context.client.clone(), namespace);
    let policy_name = network_policy_name(&template.name);
    let policy = policies.get_opt(&policy_name).await.context("reading the NetworkPolicy")?;
    let actions =
        plan(&template, namespace, &context.apis.version.api_version(), policy.as_ref()).map_err(anyhow::Error::msg)?;
    for action in actions {
        match action {
            Action::LabelTemplate(patch) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(context.client.clone(), namespace, &context.apis.templates);
                match api.patch(&template.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Ok(_) => {}
                    Err(error) if is_not_found(&error) => return Ok(Requeue::await_change()),
                    Err(error) => return Err(error).context("labelling the template"),
                }
            }
            Action::Create(policy) => {
                info!(%namespace, template = %template.name, policy = %policy_name, "creating NetworkPolicy");
                match policies.create(&PostParams::default(), &policy).await {
                    Ok(_) => {}
                    // Someone else's create won: the policy's event brings the template back.
                    Err(error) if is_conflict(&error) => {}
                    Err(error) => return Err(error).context("creating the NetworkPolicy"),
                }
            }
            Action::ReplaceSpec(spec) => {
                info!(%namespace, template = %template.name, policy = %policy_name, "updating NetworkPolicy");
                let patch = json!([{"op": "replace", "path": "/spec", "value": spec}]);
                let patch: json_patch::Patch = serde_json::from_value(patch).context("building the patch")?;
                policies
                    .patch(&policy_name, &PatchParams::default(), &Patch::Json::<()>(patch))
                    .await
                    .context("updating the NetworkPolicy")?;
            }
            Action::Delete { uid } => {
                info!(%namespace, template = %template.name, policy = %policy_name, "deleting unmanaged NetworkPolicy");
                let params = DeleteParams {
                    preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
                    ..DeleteParams::default()
                };
                match policies.delete(&policy_name, &params).await {
                    Ok(_) => {}
                    Err(error) if is_not_found(&error) || is_conflict(&error) => {}
                    Err(error) => return Err(error).context("deleting the NetworkPolicy"),
                }
            }
            Action::Refuse(why) => {
                warn!(%namespace, template = %template.name, %why, "NetworkPolicy left alone");
                return Ok(Requeue::requeue(Duration::from_secs(30)));
            }
        }
    }
    Ok(Requeue::await_change())
}
