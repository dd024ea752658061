//! The Paperclip lane's figures: agent runs in the real Paperclip server, each in a sandbox of
//! ours on the embedded cluster (`make paperclip-lane`, `paperclip-plugin/lane/`). The lane
//! measures them as it runs and writes `target/paperclip-lane/figures.json`; this section puts
//! the last run's figures in the report. It measures nothing itself: a Paperclip server takes
//! minutes to install and its runs are the lane's to drive.

use std::path::Path;

use serde_json::Value;

use crate::table::Table;
use crate::world::workspace_root;

/// The lane's figures file, relative to the workspace root.
pub const FIGURES: &str = "target/paperclip-lane/figures.json";

/// The table of the last lane run's figures, or a note saying how to get them.
pub fn table() -> Table {
    let path = workspace_root().join(FIGURES);
    let mut t = Table::new(
        "Paperclip lane: agent runs in the real Paperclip server",
        &[
            "run",
            "backend",
            "lease",
            "run start -> lease",
            "run start -> agent",
            "run",
            "executes",
            "execute p50",
            "execute p99",
            "released after run",
        ],
    );
    match read(&path) {
        Ok(figures) => fill(&mut t, &figures),
        Err(why) => t.note(format!("No figures: {why}. Run `make paperclip-lane` (or `make test`) first.")),
    }
    t
}

fn read(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {FIGURES} ({e})"))?;
    serde_json::from_str(&text).map_err(|e| format!("{FIGURES} is not JSON ({e})"))
}

fn fill(t: &mut Table, figures: &Value) {
    let ms = |v: &Value| v.as_f64().map_or_else(|| "-".to_string(), |n| format!("{n} ms"));
    for run in figures["runs"].as_array().into_iter().flatten() {
        t.row([
            run["label"].as_str().unwrap_or("?").to_string(),
            run["backend"].as_str().unwrap_or("?").to_string(),
            run["leaseOutcome"].as_str().unwrap_or("?").to_string(),
            ms(&run["runStartToLeaseMs"]),
            ms(&run["runStartToAdapterMs"]),
            ms(&run["runMs"]),
            run["executes"].as_u64().map_or_else(|| "-".to_string(), |n| n.to_string()),
            ms(&run["executeP50Ms"]),
            ms(&run["executeP99Ms"]),
            ms(&run["releaseAfterRunMs"]),
        ]);
    }
    let wall = figures["laneWallMs"].as_f64().map_or_else(|| "-".to_string(), |n| format!("{:.0} s", n / 1000.0));
    let server = figures["paperclip"].as_str().unwrap_or("Paperclip");
    let when = figures["measuredAt"].as_str().unwrap_or("its last run");
    t.note(format!(
        "From `make paperclip-lane` ({server}, measured {when}), not from this bench run; the lane's wall time was {wall}. \
         Each run is a `claude_local` agent whose CLI is a stand-in script (no LLM): run start -> agent is the sandbox's \
         set-up (acquire, realize, workspace upload, the callback bridge), executes are the run's environmentExecute \
         calls as the plugin timed them (the serve round trip included)."
    ));
    for note in figures["notes"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        t.note(note.to_string());
    }
}
