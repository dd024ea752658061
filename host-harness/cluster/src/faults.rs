//! Fault injection: make chosen requests fail, stall, lose their connection, or end a watch.
//!
//! A rule matches requests by verb, resource, subresource, namespace, name (exact, or a `*`
//! glob) and user; it then fires for the next `times` matches, or with a probability drawn from
//! a seeded generator so a failing run can be replayed. Rules are reachable from Rust tests
//! ([`Faults::add`]) and over HTTP (`/embedded-cluster/faults`) for clients in other processes.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which requests a rule applies to; `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Match {
    pub verb: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    /// An exact name or a glob with `*`.
    pub name: Option<String>,
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
    /// Close the connection without an answer.
    DropConnection,
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
    /// Fire for the next N matching requests only.
    #[serde(default)]
    pub times: Option<u32>,
    /// Fire with this probability (0..=1) per matching request.
    #[serde(default)]
    pub probability: Option<f64>,
}

/// The request facts a rule is matched against.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    pub verb: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub user: &'a str,
}

/// The active rules of a cluster.
pub struct Faults {
    state: Mutex<State>,
}

struct State {
    rules: Vec<(u64, Rule)>,
    next_id: u64,
    rng: fastrand::Rng,
}

fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, tail)) => s
            .strip_prefix(head)
            .is_some_and(|rest| (0..=rest.len()).filter(|i| rest.is_char_boundary(*i)).any(|i| glob(tail, &rest[i..]))),
    }
}

impl Match {
    fn accepts(&self, f: &RequestFacts<'_>) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        eq(&self.verb, f.verb)
            && eq(&self.resource, f.resource)
            && eq(&self.subresource, f.subresource)
            && eq(&self.namespace, f.namespace)
            && eq(&self.user, f.user)
            && self.name.as_deref().is_none_or(|p| glob(p, f.name))
    }
}

impl Faults {
    /// No rules; `seed` drives probabilistic rules reproducibly.
    pub fn new(seed: u64) -> Self {
        Self { state: Mutex::new(State { rules: Vec::new(), next_id: 1, rng: fastrand::Rng::with_seed(seed) }) }
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

    /// Removes one rule.
    pub fn remove(&self, id: u64) -> bool {
        let mut s = self.lock();
        let before = s.rules.len();
        s.rules.retain(|(i, _)| *i != id);
        s.rules.len() != before
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// The active rules with their ids.
    pub fn list(&self) -> Vec<(u64, Rule)> {
        self.lock().rules.clone()
    }

    /// The actions that fire for a request, in rule order (a delay may precede an error).
    /// Rules whose `times` ran out are dropped.
    pub fn check(&self, facts: &RequestFacts<'_>) -> Vec<Action> {
        let mut s = self.lock();
        let State { rules, rng, .. } = &mut *s;
        let mut fired = Vec::new();
        for (_, rule) in rules.iter_mut() {
            if !rule.matches.accepts(facts) {
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
            fired.push(rule.action.clone());
        }
        rules.retain(|(_, r)| r.times != Some(0));
        fired
    }
}

/// Convenience: the delay an action asks for.
pub fn delay_of(action: &Action) -> Option<Duration> {
    match action {
        Action::Delay { millis } => Some(Duration::from_millis(*millis)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(verb: &'a str, name: &'a str) -> RequestFacts<'a> {
        RequestFacts { verb, resource: "pods", subresource: "", namespace: "a", name, user: "admin" }
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
            times,
            probability,
        }
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
    }

    #[test]
    fn rules_round_trip_as_json() {
        let text = r#"{"match":{"verb":"watch","resource":"pods"},"action":{"type":"endWatch","code":410,"afterEvents":1},"times":1}"#;
        let rule: Rule = serde_json::from_str(text).expect("parses");
        assert_eq!(rule.action, Action::EndWatch { code: Some(410), after_events: 1 });
    }
}
