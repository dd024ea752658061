//! What the suite found: one record per scenario (and, in the fault matrix, per cell), each
//! with a verdict and the reason, printed as a table for people and as JSON for machines.

use std::fmt;

use serde::Serialize;

/// A scenario's (or a cell's) outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The component kept the contract.
    Pass,
    /// It did not; `why` says how.
    Fail,
    /// Not run here, and `why` says why (a Kubernetes-only check against a provider that uses
    /// no cluster, a fault cell against a real cluster).
    Skip,
}

impl Verdict {
    /// The JSON name, also shown in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Skip => "skip",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Record {
    /// The scenario's name (`lifecycle`, `concurrent-acquire`), or a cell's
    /// (`matrix acquire #3 503`).
    pub scenario: String,
    /// The backend the leases came from (`sandbox`, `job`), `-` when none was acquired.
    pub backend: String,
    pub verdict: Verdict,
    /// What was checked, or what went wrong.
    pub why: String,
}

/// Every record of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub records: Vec<Record>,
}

impl Report {
    /// Whether nothing failed.
    pub fn passed(&self) -> bool {
        self.records.iter().all(|r| r.verdict != Verdict::Fail)
    }

    /// How many records have `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.records.iter().filter(|r| r.verdict == verdict).count()
    }

    /// One JSON record per line.
    pub fn to_json_lines(&self) -> String {
        self.records.iter().filter_map(|r| serde_json::to_string(r).ok()).map(|l| l + "\n").collect()
    }
}

impl fmt::Display for Report {
    /// A table: scenario, backend, verdict, why; then the totals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.records.iter().map(|r| r.scenario.len()).max().unwrap_or(8).max(8);
        writeln!(f, "{:<width$}  {:<8}  {:<7}  why", "scenario", "backend", "verdict")?;
        for r in &self.records {
            writeln!(f, "{:<width$}  {:<8}  {:<7}  {}", r.scenario, r.backend, r.verdict.as_str(), r.why)?;
        }
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.count(Verdict::Pass),
            self.count(Verdict::Fail),
            self.count(Verdict::Skip)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, verdict: Verdict) -> Record {
        Record { scenario: name.into(), backend: "job".into(), verdict, why: "because".into() }
    }

    #[test]
    fn a_report_passes_unless_something_failed() {
        let mut report = Report { records: vec![record("a", Verdict::Pass), record("b", Verdict::Skip)] };
        assert!(report.passed());
        report.records.push(record("c", Verdict::Fail));
        assert!(!report.passed());
        let table = report.to_string();
        assert!(table.contains("c         job       fail     because"), "{table}");
        assert!(table.ends_with("1 passed, 1 failed, 1 skipped"), "{table}");
    }

    #[test]
    fn json_has_one_record_per_line_with_verdict_and_why() {
        let report = Report { records: vec![record("a", Verdict::Pass), record("b", Verdict::Fail)] };
        let lines: Vec<serde_json::Value> =
            report.to_json_lines().lines().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["verdict"], "fail");
        assert_eq!(lines[1]["why"], "because");
        assert_eq!(lines[0]["scenario"], "a");
    }
}
