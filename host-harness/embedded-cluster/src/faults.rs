//! Fault injection: make chosen requests fail, stall, lose their connection before or after
//! they are applied, or end a watch.
//!
//! A rule matches requests on what the request log records of them ([`Entry`]): kind, verb,
//! group, version, resource, subresource, namespace, name and path (exact, or a `*` glob) and
//! user, so any logged request can be matched back. It lets the first `after` matches through,
//! then fires for the next `times` matches, or with a probability drawn from a seeded generator
//! so a failing run can be replayed; [`Rule::targeting`] aims one at the N-th request of a
//! recorded run. Rules reach resource requests, discovery, `/version`, OpenAPI and health
//! checks, never the cluster's own admin endpoints. They are reachable from Rust tests
//! ([`Faults::add`]) and over HTTP (`/embedded-cluster/faults`) for clients in other processes.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::request_log::{Entry, RequestKind};

/// Which requests a rule applies to; `None` matches anything, except that a rule with neither
/// `kind` nor `path` matches resource requests only, so that a rule about verbs or users never
/// catches discovery unawares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Match {
    /// Resource, discovery, version, OpenAPI, health or other requests.
    pub kind: Option<RequestKind>,
    /// A Kubernetes verb, or the lowercase HTTP method of a non-resource request.
    pub verb: Option<String>,
    /// The API group (`""` for the core group).
    pub group: Option<String>,
    pub version: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    /// An exact name or a glob with `*`.
    pub name: Option<String>,
    /// The URL path without the query: exact, or a glob with `*`.
    pub path: Option<String>,
    pub user: Option<String>,
}

/// What a matching request gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "type")]
pub enum Action {
    /// Answer with this status code and Status reason (and `Retry-After` when set).
    Error {
        code: u16,
        reason: String,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        retry_after_seconds: Option<u64>,
    },
    /// Wait this long, then serve the request normally.
    Delay { millis: u64 },
    /// Hold the request until the rule is removed ([`Faults::remove`], or the admin endpoint's
    /// delete), for at most this long, then serve it normally: a test can change the cluster
    /// while a request is known to be in flight ([`Faults::holding`]) and then let it go, with
    /// no guess at how long the change takes.
    Hold { millis: u64 },
    /// Close the connection before the request is applied: nothing changes, and the client
    /// sees its connection reset.
    DropBeforeApply,
    /// Apply the request in full (the create, the update, the delete happens) and then close
    /// the connection instead of answering: the client sees its connection reset, as with
    /// [`Action::DropBeforeApply`], yet the change was made, as when a response is lost on the
    /// way. A read or a watch changes nothing, so for them the two are alike.
    DropAfterApply,
    /// For watches: after `afterEvents` events, send an ERROR event with `code` (or just close
    /// the stream when `code` is absent).
    EndWatch {
        #[serde(default)]
        code: Option<u16>,
        #[serde(default)]
        after_events: usize,
    },
}

/// One fault rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    #[serde(default, rename = "match")]
    pub matches: Match,
    pub action: Action,
    /// Let this many matching requests through untouched first, so that a later one (the
    /// second GET of an object, say) can be failed alone: `after: 1, times: Some(1)` fires on
    /// the second match only. Counted down as matches pass (see [`Faults::check`] for the order
    /// racing requests are counted in); `probability` is drawn only once it is zero.
    #[serde(default)]
    pub after: u32,
    /// Fire for the next N matching requests only (after the `after` ones).
    #[serde(default)]
    pub times: Option<u32>,
    /// Fire with this probability (0..=1) per matching request.
    #[serde(default)]
    pub probability: Option<f64>,
}

impl Rule {
    /// Holds the next exec into pod `namespace/name` (its `pods/exec` request) until the rule is
    /// removed, for at most `longest`: a test replaces the pod while the exec is known to be in
    /// flight, then lets it go.
    pub fn hold_exec(namespace: &str, name: &str, longest: std::time::Duration) -> Self {
        Self {
            matches: Match {
                resource: Some("pods".into()),
                subresource: Some("exec".into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..Match::default()
            },
            action: Action::Hold { millis: u64::try_from(longest.as_millis()).unwrap_or(u64::MAX) },
            after: 0,
            times: Some(1),
            probability: None,
        }
    }

    /// A rule that fires once, on the request `entries[index]` records, when a run makes the
    /// same requests in the same order again: it matches that request exactly and lets through
    /// the earlier entries it also matches. `entries` is one run's log (one user's requests,
    /// say); `None` if `index` is past its end or names an admin request, which no rule reaches.
    pub fn targeting(entries: &[Entry], index: usize, action: Action) -> Option<Self> {
        let target = entries.get(index)?;
        let matches = Match::exactly(target);
        if !matches.accepts(target) {
            return None;
        }
        let earlier = entries[..index].iter().filter(|e| matches.accepts(e)).count();
        let after = u32::try_from(earlier).unwrap_or(u32::MAX);
        Some(Self { matches, action, after, times: Some(1), probability: None })
    }
}

/// The active rules of a cluster.
pub struct Faults {
    state: Mutex<State>,
}

struct State {
    rules: Vec<(u64, Rule)>,
    /// Hold rules that fired and have not been removed: their requests wait.
    holding: std::collections::HashSet<u64>,
    next_id: u64,
    rng: fastrand::Rng,
}

/// Whether `s` matches `pattern`, where `*` stands for any run of characters. Patterns come
/// from clients and paths are long, so this backtracks only to the last `*`: at most
/// pattern × text steps, whatever the pattern.
fn glob(pattern: &str, s: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), s.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                last_star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match last_star {
                Some((star, from)) => {
                    last_star = Some((star, from + 1));
                    pi = star + 1;
                    ti = from + 1;
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

impl Match {
    /// A match for exactly the request a log entry records (and for any request just like it),
    /// to aim a rule at one request of a recorded run.
    pub fn exactly(e: &Entry) -> Self {
        Self {
            kind: Some(e.kind),
            verb: Some(e.verb.clone()),
            group: Some(e.group.clone()),
            version: Some(e.version.clone()),
            resource: Some(e.resource.clone()),
            subresource: Some(e.subresource.clone()),
            namespace: Some(e.namespace.clone()),
            name: Some(e.name.clone()),
            path: Some(e.path.clone()),
            user: Some(e.user.clone()),
        }
    }

    /// Whether a request, as the log records it, is one this rule is about. Admin requests
    /// never are.
    pub fn accepts(&self, e: &Entry) -> bool {
        let kind = match self.kind {
            Some(kind) => kind == e.kind,
            None => self.path.is_some() || e.kind == RequestKind::Resource,
        };
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        e.kind != RequestKind::Admin
            && kind
            && eq(&self.verb, &e.verb)
            && eq(&self.group, &e.group)
            && eq(&self.version, &e.version)
            && eq(&self.resource, &e.resource)
            && eq(&self.subresource, &e.subresource)
            && eq(&self.namespace, &e.namespace)
            && eq(&self.user, &e.user)
            && self.name.as_deref().is_none_or(|p| glob(p, &e.name))
            && self.path.as_deref().is_none_or(|p| glob(p, &e.path))
    }
}

impl Faults {
    /// No rules; `seed` drives probabilistic rules reproducibly.
    pub fn new(seed: u64) -> Self {
        Self {
            state: Mutex::new(State {
                rules: Vec::new(),
                holding: Default::default(),
                next_id: 1,
                rng: fastrand::Rng::with_seed(seed),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a rule; returns its id for [`Faults::remove`].
    pub fn add(&self, rule: Rule) -> u64 {
        let mut s = self.lock();
        let id = s.next_id;
        s.next_id += 1;
        s.rules.push((id, rule));
        id
    }

    /// Removes one rule, and lets the requests it holds go.
    pub fn remove(&self, id: u64) -> bool {
        let mut s = self.lock();
        let before = s.rules.len();
        s.rules.retain(|(i, _)| *i != id);
        let held = s.holding.remove(&id);
        s.rules.len() != before || held
    }

    /// Whether a [`Action::Hold`] rule has fired and holds its request (until removed).
    pub fn holding(&self, id: u64) -> bool {
        self.lock().holding.contains(&id)
    }

    /// Removes every rule.
    pub fn clear(&self) {
        let mut s = self.lock();
        s.rules.clear();
        s.holding.clear();
    }

    /// The active rules with their ids.
    pub fn list(&self) -> Vec<(u64, Rule)> {
        self.lock().rules.clone()
    }

    /// The actions that fire for a request, with their rules' ids, in rule order (a delay may
    /// precede an error). Rules whose `times` ran out are dropped.
    ///
    /// Requests are checked one at a time, under one lock, when they reach the handler (after
    /// authentication, authorization and reading the body), and each check counts down every
    /// rule it matches. So the N-th match of a rule is the N-th matching request to get there:
    /// for requests a client sends one after another, the N-th it sends; for requests in flight
    /// together, the order they arrive in, which the scheduler decides. Either way exactly one
    /// request is the N-th, and its log entry lists the rule in `faults`.
    pub fn check(&self, request: &Entry) -> Vec<(u64, Action)> {
        let mut s = self.lock();
        let State { rules, rng, holding, .. } = &mut *s;
        let mut fired = Vec::new();
        for (id, rule) in rules.iter_mut() {
            if !rule.matches.accepts(request) {
                continue;
            }
            if rule.after > 0 {
                rule.after -= 1;
                continue;
            }
            if let Some(p) = rule.probability
                && rng.f64() >= p
            {
                continue;
            }
            if let Some(times) = rule.times.as_mut() {
                if *times == 0 {
                    continue;
                }
                *times -= 1;
            }
            if matches!(rule.action, Action::Hold { .. }) {
                holding.insert(*id);
            }
            fired.push((*id, rule.action.clone()));
        }
        rules.retain(|(_, r)| r.times != Some(0));
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn facts(verb: &str, name: &str) -> Entry {
        Entry {
            seq: 0,
            user: "admin".into(),
            kind: RequestKind::Resource,
            verb: verb.into(),
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
            subresource: String::new(),
            namespace: "a".into(),
            name: name.into(),
            path: format!("/api/v1/namespaces/a/pods/{name}"),
            faults: Vec::new(),
            code: 0,
            latency_micros: 0,
        }
    }

    fn discovery(path: &str) -> Entry {
        let (kind, group, version) = RequestKind::of_non_resource(path);
        Entry {
            kind,
            group,
            version,
            resource: String::new(),
            namespace: String::new(),
            name: String::new(),
            path: path.into(),
            ..facts("get", "")
        }
    }

    fn error_rule(times: Option<u32>, probability: Option<f64>) -> Rule {
        Rule {
            matches: Match { verb: Some("create".into()), name: Some("sb-*".into()), ..Default::default() },
            action: Action::Error {
                code: 500,
                reason: "InternalError".into(),
                message: None,
                retry_after_seconds: None,
            },
            after: 0,
            times,
            probability,
        }
    }

    #[test]
    fn a_hold_holds_from_its_firing_until_its_rule_is_removed() {
        let f = Faults::new(1);
        let rule = Rule {
            matches: Match { verb: Some("get".into()), ..Match::default() },
            action: Action::Hold { millis: 60_000 },
            after: 0,
            times: Some(1),
            probability: None,
        };
        let id = f.add(rule);
        assert!(!f.holding(id), "not before a request came");
        assert_eq!(f.check(&facts("get", "a")), vec![(id, Action::Hold { millis: 60_000 })]);
        assert!(f.holding(id), "the request is held although the rule's one time is spent");
        assert!(f.list().is_empty());
        assert!(f.remove(id), "removing lets it go");
        assert!(!f.holding(id));
    }
    #[test]
    fn fires_for_the_next_k_matches_only() {
        let f = Faults::new(1);
        f.add(error_rule(Some(2), None));
        assert!(f.check(&facts("get", "sb-1")).is_empty());
        assert!(f.check(&facts("create", "other")).is_empty());
        assert_eq!(f.check(&facts("create", "sb-1")).len(), 1);
        assert_eq!(f.check(&facts("create", "sb-2")).len(), 1);
        assert!(f.check(&facts("create", "sb-3")).is_empty());
        assert!(f.list().is_empty());
    }

    #[test]
    fn after_lets_matches_through_then_fires_on_the_next() {
        let f = Faults::new(1);
        f.add(Rule { after: 1, ..error_rule(Some(1), None) });
        assert!(f.check(&facts("create", "sb-1")).is_empty(), "the first match passes");
        assert!(f.check(&facts("get", "sb-1")).is_empty(), "a request it does not match is not counted");
        assert_eq!(f.check(&facts("create", "sb-1")).len(), 1, "the second match fails");
        assert!(f.check(&facts("create", "sb-1")).is_empty(), "and only it");
        assert!(f.list().is_empty());
    }

    #[test]
    fn after_counts_matches_before_any_probability_is_drawn() {
        let f = Faults::new(7);
        let id = f.add(Rule { after: 2, ..error_rule(None, Some(1.0)) });
        let fired: Vec<bool> = (0..4).map(|_| !f.check(&facts("create", "sb-1")).is_empty()).collect();
        assert_eq!(fired, [false, false, true, true]);
        assert_eq!(f.list().first().map(|(i, r)| (*i, r.after)), Some((id, 0)));
    }

    #[test]
    fn racing_requests_count_each_match_once() {
        let f = std::sync::Arc::new(Faults::new(1));
        f.add(Rule { after: 57, ..error_rule(Some(1), None) });
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let f = f.clone();
                std::thread::spawn(move || (0..25).filter(|_| !f.check(&facts("create", "sb-1")).is_empty()).count())
            })
            .collect();
        let fired: usize = threads.into_iter().map(|t| t.join().unwrap_or_default()).sum();
        assert_eq!(fired, 1, "exactly one of 200 racing matches is the 58th");
    }

    #[test]
    fn a_targeting_rule_fires_on_its_entry_alone_in_a_replay() {
        let run = vec![
            facts("get", "a"),
            facts("get", "b"),
            facts("get", "a"),
            facts("create", "a"),
            discovery("/apis/batch/v1"),
            facts("get", "a"),
        ];
        for index in 0..run.len() {
            let f = Faults::new(1);
            let rule = Rule::targeting(&run, index, Action::DropBeforeApply).expect("in range");
            f.add(rule);
            let fired: Vec<usize> = (0..run.len()).filter(|i| !f.check(&run[*i]).is_empty()).collect();
            assert_eq!(fired, [index]);
        }
        assert_eq!(Rule::targeting(&run, 2, Action::DropBeforeApply).map(|r| r.after), Some(1));
        assert!(Rule::targeting(&run, run.len(), Action::DropBeforeApply).is_none());
        let admin = [discovery("/embedded-cluster/requests")];
        assert!(Rule::targeting(&admin, 0, Action::DropBeforeApply).is_none(), "admin requests are out of reach");
    }

    #[test]
    fn probability_is_reproducible_from_the_seed() {
        let run = || {
            let f = Faults::new(42);
            f.add(error_rule(None, Some(0.5)));
            (0..64).map(|_| !f.check(&facts("create", "sb-x")).is_empty()).collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        let hits = a.iter().filter(|h| **h).count();
        assert!((16..=48).contains(&hits), "{hits}");
    }

    #[test]
    fn globs_match_like_shells() {
        assert!(glob("sb-*", "sb-1"));
        assert!(glob("*-x", "a-x"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("sb-*", "pod"));
        assert!(glob("*", ""));
        assert!(glob("", "") && !glob("", "a") && !glob("a", ""));
        assert!(glob("*a*", "bab") && !glob("*a*", "bbb"));
        assert!(glob("/apis/*/v1*", "/apis/batch/v1/jobs") && !glob("/apis/*/v1", "/apis/batch/v1/jobs"));
        assert!(glob("ä*ö", "äxyö") && !glob("ä*ö", "äxy"));
    }

    #[test]
    fn hostile_globs_finish_quickly() {
        let pattern = format!("{}b", "*a".repeat(40));
        let text = "a".repeat(4_000);
        let started = std::time::Instant::now();
        assert!(!glob(&pattern, &text));
        assert!(glob(&format!("{pattern}*"), &format!("{text}b")));
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }

    #[test]
    fn rules_without_kind_or_path_leave_non_resource_requests_alone() {
        let any_get = Match { verb: Some("get".into()), ..Default::default() };
        assert!(any_get.accepts(&facts("get", "p")));
        assert!(!any_get.accepts(&discovery("/apis/batch/v1")));
        let by_path = Match { path: Some("/apis/batch*".into()), ..Default::default() };
        assert!(by_path.accepts(&discovery("/apis/batch")) && by_path.accepts(&discovery("/apis/batch/v1")));
        assert!(!by_path.accepts(&discovery("/apis/agents.x-k8s.io")));
    }

    #[test]
    fn discovery_of_one_group_is_matched_by_kind_and_group() {
        let m =
            Match { kind: Some(RequestKind::Discovery), group: Some("agents.x-k8s.io".into()), ..Default::default() };
        assert!(m.accepts(&discovery("/apis/agents.x-k8s.io")));
        assert!(m.accepts(&discovery("/apis/agents.x-k8s.io/v1beta1")));
        assert!(!m.accepts(&discovery("/apis/batch/v1")));
        assert!(!m.accepts(&discovery("/apis")));
        let sandbox = Entry { group: "agents.x-k8s.io".into(), resource: "sandboxes".into(), ..facts("get", "s") };
        assert!(!m.accepts(&sandbox), "a resource request is not discovery");
    }

    #[test]
    fn admin_requests_are_never_matched() {
        let admin = discovery("/embedded-cluster/faults");
        assert_eq!(admin.kind, RequestKind::Admin);
        assert!(!Match { path: Some("*".into()), ..Default::default() }.accepts(&admin));
        assert!(!Match { kind: Some(RequestKind::Admin), ..Default::default() }.accepts(&admin));
    }

    #[test]
    fn an_exact_match_matches_its_entry_and_nothing_it_differs_from() {
        let e = Entry { group: "agents.x-k8s.io".into(), version: "v1beta1".into(), ..facts("get", "s") };
        let m = Match::exactly(&e);
        assert!(m.accepts(&e));
        assert!(!m.accepts(&Entry { version: "v1alpha1".into(), ..e.clone() }));
        assert!(!m.accepts(&Entry { user: "viewer".into(), ..e.clone() }));
        assert!(!m.accepts(&Entry { verb: "watch".into(), ..e.clone() }));
        let d = discovery("/apis/agents.x-k8s.io/v1beta1");
        assert!(Match::exactly(&d).accepts(&d));
        assert!(!Match::exactly(&d).accepts(&discovery("/apis/agents.x-k8s.io/v1alpha1")));
    }

    #[test]
    fn fired_actions_name_their_rules() {
        let f = Faults::new(1);
        let delay = f.add(Rule { action: Action::Delay { millis: 1 }, ..error_rule(None, None) });
        let error = f.add(error_rule(None, None));
        let ids: Vec<u64> = f.check(&facts("create", "sb-1")).into_iter().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![delay, error]);
    }

    #[test]
    fn both_drops_have_their_own_names() {
        let before: Action = serde_json::from_str(r#"{"type":"dropBeforeApply"}"#).expect("parses");
        let after: Action = serde_json::from_str(r#"{"type":"dropAfterApply"}"#).expect("parses");
        assert_eq!((before, after), (Action::DropBeforeApply, Action::DropAfterApply));
    }

    #[test]
    fn rules_round_trip_as_json() {
        let text = r#"{"match":{"verb":"watch","resource":"pods"},"action":{"type":"endWatch","code":410,"afterEvents":1},"times":1}"#;
        let rule: Rule = serde_json::from_str(text).expect("parses");
        assert_eq!(rule.action, Action::EndWatch { code: Some(410), after_events: 1 });
        let text =
            r#"{"match":{"kind":"discovery","group":"batch","path":"/apis/*"},"action":{"type":"delay","millis":5}}"#;
        let rule: Rule = serde_json::from_str(text).expect("parses");
        assert_eq!(rule.matches.kind, Some(RequestKind::Discovery));
        assert_eq!((rule.matches.group.as_deref(), rule.matches.path.as_deref()), (Some("batch"), Some("/apis/*")));
    }
}
