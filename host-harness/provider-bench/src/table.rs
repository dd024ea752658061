//! The report: sections of rows, printed to the terminal and written to `BENCHMARKS.md` as
//! Markdown tables, so what a run prints and what is committed are the same text.

use std::fmt::Write;

/// One section of the report: a table with a heading, and notes saying how to read it.
#[derive(Debug, Clone)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub notes: Vec<String>,
}

impl Table {
    /// An empty table with these column headers.
    pub fn new(title: &str, headers: &[&str]) -> Self {
        Self {
            title: title.to_string(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Adds a row; cells beyond the headers are dropped, missing ones left empty.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut cells: Vec<String> = cells.into_iter().map(Into::into).collect();
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// Adds a line under the table.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// The table as Markdown, columns padded so it reads as well in a terminal.
    pub fn markdown(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([self.headers[i].chars().count(), 3])
                    .max()
                    .unwrap_or(3)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> =
                cells.iter().zip(&widths).map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count()))).collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let mut out = format!("### {}\n\n", self.title);
        out.push_str(&line(&self.headers));
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        out.push_str(&line(&rule));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        for note in &self.notes {
            let _ = write!(out, "\n{note}\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_columns_and_fills_missing_cells() {
        let mut t = Table::new("Sizes", &["component", "bytes"]);
        t.row(["provider", "1,285,222"]);
        t.row(["ref"]);
        t.note("Measured once.");
        let md = t.markdown();
        assert!(md.starts_with("### Sizes\n\n| component | bytes     |\n| --------- | --------- |\n"), "{md}");
        assert!(md.contains("| ref       |           |\n"), "{md}");
        assert!(md.ends_with("\nMeasured once.\n"), "{md}");
    }
}
