//! The matrix as a table: operation and request by fault, with the pass count.

use std::fmt;

use super::faults::Fault;
use contract_suite::report::Verdict;

/// The matrix of one config, printed as operation x request x fault.
#[derive(Debug, Clone, Default)]
pub struct Matrix {
    /// The backend the config chose, as the records name it.
    pub backend: String,
    /// One row per request of an operation's clean run: the row's label and its cells' verdicts
    /// by fault label.
    pub rows: Vec<(String, Vec<(String, Verdict)>)>,
}

impl Matrix {
    /// Cells run, and cells passed.
    pub fn totals(&self) -> (usize, usize) {
        let cells: Vec<&Verdict> = self.rows.iter().flat_map(|(_, c)| c.iter().map(|(_, v)| v)).collect();
        (cells.len(), cells.iter().filter(|v| ***v == Verdict::Pass).count())
    }
}

impl fmt::Display for Matrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<String> = Fault::ALL.iter().map(|f| f.label()).collect();
        let width = self.rows.iter().map(|(r, _)| r.len()).max().unwrap_or(10).max(30);
        writeln!(f, "fault matrix, backend {}", self.backend)?;
        write!(f, "{:<width$}", "operation #request")?;
        for label in &labels {
            write!(f, " {label:>5}")?;
        }
        writeln!(f)?;
        for (row, cells) in &self.rows {
            write!(f, "{row:<width$}")?;
            for label in &labels {
                let shown = match cells.iter().find(|(l, _)| l == label).map(|(_, v)| v) {
                    Some(Verdict::Pass) => "ok",
                    Some(Verdict::Fail) => "FAIL",
                    Some(Verdict::Skip) => "skip",
                    None => "-",
                };
                write!(f, " {shown:>5}")?;
            }
            writeln!(f)?;
        }
        let (cells, passed) = self.totals();
        write!(f, "{passed} of {cells} cells passed")?;
        let skipped = self.rows.iter().flat_map(|(_, c)| c.iter()).filter(|(_, v)| *v == Verdict::Skip).count();
        if skipped > 0 {
            write!(f, " ({skipped} skipped)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_counts_every_cell_and_marks_failures() {
        let matrix = Matrix {
            backend: "sandbox".into(),
            rows: vec![
                ("acquire #0 get sandboxes".into(), vec![("404".into(), Verdict::Pass), ("500".into(), Verdict::Fail)]),
                ("acquire #1 watch sandboxes".into(), vec![("w410".into(), Verdict::Pass)]),
            ],
        };
        assert_eq!(matrix.totals(), (3, 2));
        let shown = matrix.to_string();
        assert!(shown.contains("FAIL") && shown.ends_with("2 of 3 cells passed"), "{shown}");
    }
}
