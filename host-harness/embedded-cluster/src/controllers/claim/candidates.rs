//! Which warm pool members a claim may adopt: members of the claim's pool (v1beta1), or of any
//! or one pool of its template (v1alpha1), that are Ready with a pod IP. Others still starting
//! are counted, so a young claim can wait a moment for them instead of starting cold.

use std::collections::HashSet;

use contract::k8s::agent_sandbox::{TEMPLATE_REF_HASH_LABEL, WARM_POOL_KIND, WARM_POOL_LABEL};

use super::model::{Source, WarmPoolPolicy};
use crate::controllers::extensions::blueprint::Template;
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::extensions::{TEMPLATE_HASH_LABEL, is_extension_kind, name_hash};
use crate::controllers::warm_pool::model::Pool;

/// The adoptable members, oldest first, and how many more are still starting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Candidates {
    /// Ready members with a pod IP that no other claim is adopting, oldest first.
    pub ready: Vec<SandboxView>,
    /// Members that may become adoptable soon (not Ready, or no pod IP yet).
    pub starting: usize,
}

/// The pool that controls a member, if it is one of `pools` and still labels it as its own.
fn member_pool<'a>(member: &SandboxView, pools: &'a [Pool]) -> Option<&'a Pool> {
    let owner = member.controller.as_ref().filter(|r| is_extension_kind(r, WARM_POOL_KIND))?;
    let pool = pools.iter().find(|p| p.uid == owner.uid)?;
    member.has_label(WARM_POOL_LABEL, &name_hash(&pool.name)).then_some(pool)
}

/// The members a claim of `source` with `template` could adopt; `reserved` are the uids other
/// claims are adopting right now, which count for nothing.
pub fn candidates(
    source: &Source,
    template: &Template,
    pools: &[Pool],
    members: &[SandboxView],
    reserved: &HashSet<String>,
) -> Candidates {
    let usable: Vec<Pool> = pools
        .iter()
        .filter(|p| !p.deleting)
        .filter(|p| match source {
            Source::Pool(name) => p.name == *name,
            Source::Template { warm_pool: WarmPoolPolicy::Default, template: t } => p.template == *t,
            Source::Template { warm_pool: WarmPoolPolicy::Named(name), template: t } => {
                p.name == *name && p.template == *t
            }
            Source::Template { warm_pool: WarmPoolPolicy::None, .. } => false,
        })
        .cloned()
        .collect();
    let template_hash = name_hash(&template.name);
    let blueprint_hash = template.blueprint_hash();
    let mut out = Candidates::default();
    for member in members {
        let Some(pool) = member_pool(member, &usable) else {
            continue;
        };
        if member.deleting
            || !member.has_label(TEMPLATE_REF_HASH_LABEL, &template_hash)
            || reserved.contains(&member.uid)
        {
            continue;
        }
        // Under Recreate the pool is replacing members of an older template: never hand one out.
        if pool.recreate && !member.has_label(TEMPLATE_HASH_LABEL, &blueprint_hash) {
            continue;
        }
        if member.is_ready() && !member.pod_ips().is_empty() {
            out.ready.push(member.clone());
        } else {
            out.starting += 1;
        }
    }
    out.ready.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    out
}
