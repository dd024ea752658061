//! What the matrix fails: the operations, the faults, and the rule that aims a fault at one
//! request of a clean run when a cell repeats it.

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::request_log::{Entry, RequestKind};
use serde::Serialize;

/// An operation of the contract the matrix fails requests of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    Acquire,
    ResumeCheck,
    Renew,
    Release,
    Destroy,
}

/// What every matrix record's scenario name starts with.
pub const PREFIX: &str = "matrix ";

impl std::str::FromStr for Operation {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|o| o.as_str()).collect();
            let shown: String = s.chars().take(40).collect();
            anyhow::anyhow!("no operation {shown:?} in the matrix; choose from {}", names.join(", "))
        })
    }
}

impl Operation {
    /// Every operation, in lifecycle order.
    pub const ALL: [Self; 5] = [Self::Acquire, Self::ResumeCheck, Self::Renew, Self::Release, Self::Destroy];

    /// The WIT name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::ResumeCheck => "resume-check",
            Self::Renew => "renew",
            Self::Release => "release",
            Self::Destroy => "destroy",
        }
    }
}

/// A way a request fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// The API server answers this status (404, 409, 410, 422, 500, 503).
    Status(u16),
    /// 429 with `Retry-After: 1`.
    TooManyRequests,
    /// The answer comes later than the request may wait.
    Late,
    /// The connection drops before the request is applied.
    DroppedBefore,
    /// The request is applied (the create happens), then its answer is lost.
    AnswerLost,
    /// A watch ends with an ERROR event, 410 (re-list).
    WatchGone,
}

impl Fault {
    /// Every fault, as the issue that asked for the matrix lists them.
    pub const ALL: [Self; 11] = [
        Self::Status(404),
        Self::Status(409),
        Self::Status(410),
        Self::Status(422),
        Self::TooManyRequests,
        Self::Status(500),
        Self::Status(503),
        Self::Late,
        Self::DroppedBefore,
        Self::AnswerLost,
        Self::WatchGone,
    ];

    /// The short name in the table.
    pub fn label(self) -> String {
        match self {
            Self::Status(code) => code.to_string(),
            Self::TooManyRequests => "429".to_string(),
            Self::Late => "late".to_string(),
            Self::DroppedBefore => "drop".to_string(),
            Self::AnswerLost => "lost".to_string(),
            Self::WatchGone => "w410".to_string(),
        }
    }

    /// Whether the cluster would answer the same request normally a moment later: a provider
    /// may then fail the call, but only retryably, or a host gives a sandbox up for a blip.
    pub(super) fn transient(self) -> bool {
        !matches!(self, Self::Status(404 | 409 | 422))
    }

    /// Whether it applies to a request: the ERROR event only to watches, a lost answer only to
    /// writes (a read that is not answered changed nothing, which `drop` already covers),
    /// everything else to every request.
    pub(super) fn applies(self, entry: &Entry) -> bool {
        match self {
            Self::WatchGone => entry.verb == "watch",
            Self::AnswerLost => entry.is_write(),
            _ => true,
        }
    }

    fn action(self, late_millis: u64) -> Action {
        let status = |code: u16, reason: &str, retry: Option<u64>| Action::Error {
            code,
            reason: reason.to_string(),
            message: Some(format!("injected {code}")),
            retry_after_seconds: retry,
        };
        match self {
            Self::Status(404) => status(404, "NotFound", None),
            Self::Status(409) => status(409, "Conflict", None),
            Self::Status(410) => status(410, "Gone", None),
            Self::Status(422) => status(422, "Invalid", None),
            Self::Status(503) => status(503, "ServiceUnavailable", Some(1)),
            Self::Status(code) => status(code, "InternalError", None),
            Self::TooManyRequests => status(429, "TooManyRequests", Some(1)),
            Self::Late => Action::Delay { millis: late_millis },
            Self::DroppedBefore => Action::DropBeforeApply,
            Self::AnswerLost => Action::DropAfterApply,
            Self::WatchGone => Action::EndWatch { code: Some(410), after_events: 0 },
        }
    }
}

/// How late a late answer is: past the per-request deadline of [`cell_limits`].
const LATE_MILLIS: u64 = 3_000;

/// What a rule matches of a request the clean run made: everything the log records but the
/// object's name (and the path, which holds it), since every cell acquires under an id of its
/// own. The cell's operation is the only client of its cluster while the rule is set, so the
/// request's place among the run's requests of the same shape is all that tells it apart.
fn shape(entry: &Entry) -> Match {
    let resource = entry.kind == RequestKind::Resource;
    Match { name: None, path: (!resource).then(|| entry.path.clone()), ..Match::exactly(entry) }
}

/// A rule that fails the `index`-th request of a clean run, and only it, when a cell repeats
/// the run.
pub(super) fn rule_for(clean: &[Entry], index: usize, fault: Fault) -> Option<Rule> {
    let entry = clean.get(index)?;
    let matches = shape(entry);
    let earlier = clean[..index].iter().filter(|e| matches.accepts(e)).count();
    Some(Rule {
        matches,
        action: fault.action(LATE_MILLIS),
        after: u32::try_from(earlier).unwrap_or(u32::MAX),
        times: Some(1),
        probability: None,
    })
}

/// How a request is named in the table: its verb and what it reaches.
pub(super) fn describe(entry: &Entry) -> String {
    match entry.kind {
        RequestKind::Resource => {
            let sub = if entry.subresource.is_empty() { String::new() } else { format!("/{}", entry.subresource) };
            format!("{} {}{sub}", entry.verb, entry.resource)
        }
        _ => format!("{} {}", entry.verb, entry.path),
    }
}

#[cfg(test)]
mod tests {
    use embedded_cluster::PROVIDER_USER;

    use super::*;

    fn entry(verb: &str, resource: &str, name: &str) -> Entry {
        Entry {
            seq: 0,
            user: PROVIDER_USER.into(),
            kind: RequestKind::Resource,
            verb: verb.into(),
            group: "agents.x-k8s.io".into(),
            version: "v1beta1".into(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: "contract".into(),
            name: name.into(),
            path: format!("/apis/agents.x-k8s.io/v1beta1/namespaces/contract/{resource}/{name}"),
            faults: Vec::new(),
            code: 200,
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
            name: String::new(),
            path: path.into(),
            ..entry("get", "", "")
        }
    }

    fn run(name: &str) -> Vec<Entry> {
        vec![
            discovery("/apis/agents.x-k8s.io"),
            entry("get", "sandboxes", name),
            entry("create", "secrets", name),
            entry("create", "sandboxes", name),
            entry("get", "sandboxes", name),
            discovery("/apis/agents.x-k8s.io/v1beta1"),
            entry("watch", "sandboxes", ""),
            entry("get", "sandboxes", name),
        ]
    }

    #[test]
    fn a_cell_rule_fires_on_its_request_alone_when_a_cell_repeats_the_run_under_other_names() {
        let clean = run("c1a2b3c-1");
        let replay = run("c9f8e7d-1");
        for index in 0..clean.len() {
            let faults = embedded_cluster::faults::Faults::new(1);
            faults.add(rule_for(&clean, index, Fault::Status(500)).expect("in range"));
            let fired: Vec<usize> = (0..replay.len()).filter(|i| !faults.check(&replay[*i]).is_empty()).collect();
            assert_eq!(fired, [index], "request #{index}");
        }
        assert!(rule_for(&clean, clean.len(), Fault::Status(500)).is_none());
    }

    #[test]
    fn watch_errors_go_to_watches_and_lost_answers_to_writes() {
        let [get, create, watch] =
            [entry("get", "sandboxes", "a"), entry("create", "sandboxes", "a"), entry("watch", "sandboxes", "")];
        assert!(Fault::WatchGone.applies(&watch) && !Fault::WatchGone.applies(&get));
        assert!(Fault::AnswerLost.applies(&create) && !Fault::AnswerLost.applies(&get));
        assert!([get, create, watch].iter().all(|e| Fault::Status(503).applies(e) && Fault::Late.applies(e)));
    }

    #[test]
    fn an_unknown_operation_names_the_known_ones() {
        assert_eq!("renew".parse::<Operation>().ok(), Some(Operation::Renew));
        let err = "x".repeat(500).parse::<Operation>().map(drop).unwrap_err().to_string();
        assert!(err.contains("acquire, resume-check") && err.len() < 200, "{err}");
    }
}
