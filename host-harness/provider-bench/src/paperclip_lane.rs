//! The Paperclip lane's figures: agent runs in the real Paperclip server, each in a sandbox of
//! ours on the embedded cluster (`paperclip-plugin/lane/`). This section runs the lane's test
//! file itself, on what `make bench` prepared (Paperclip and Node 24 installed, both plugin
//! packages built in release as operators install them, the lane compiled), with the cluster
//! from the release `sandbox-dev`; the lane measures its runs as it goes and writes
//! `target/paperclip-lane/figures.json`, which this section reads back. Figures the lane did not
//! write during this section are refused, so the report never carries an earlier run's as this
//! run's.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context;
use serde_json::Value;

use crate::table::Table;
use crate::world::workspace_root;

/// The lane's figures file, relative to the workspace root.
pub const FIGURES: &str = "target/paperclip-lane/figures.json";

/// The lane's output of the last bench run, relative to the workspace root.
const LOG: &str = "target/paperclip-lane/bench-lane.log";

/// What the lane needs before it can start, relative to the workspace root, with what makes
/// each. The plugin packages are not listed: the lane installs them from its default paths and
/// says which one is missing and how to build it.
const NEEDS: [(&str, &str); 3] = [
    ("paperclip-plugin/dist/lane/paperclip.test.js", "the lane compiled"),
    ("target/paperclip-lane/server/.lane-installed", "Paperclip, by paperclip-plugin/lane/install.sh"),
    ("target/release/sandbox-dev", "the release sandbox-dev"),
];

/// Runs the lane and tabulates its figures (see the module docs).
pub fn measure() -> anyhow::Result<Table> {
    let root = workspace_root();
    for (path, what) in NEEDS {
        anyhow::ensure!(
            root.join(path).exists(),
            "the Paperclip lane cannot run: no {path} ({what}); `make bench` prepares it, `cargo bench` alone does not"
        );
    }
    let started = jiff::Timestamp::now();
    let log = root.join(LOG);
    let status = Command::new("node")
        .args(["--test", "--test-concurrency=1", "--test-reporter=spec", "dist/lane/"])
        .current_dir(root.join("paperclip-plugin"))
        .env("SANDBOX_DEV_BIN", root.join("target/release/sandbox-dev"))
        .stdin(Stdio::null())
        .stdout(File::create(&log).with_context(|| format!("cannot write {LOG}"))?)
        .stderr(Stdio::inherit())
        .status()
        .context("cannot start `node` to run the Paperclip lane")?;
    anyhow::ensure!(
        status.success(),
        "the Paperclip lane failed ({status}), so it has no figures for this run; its output is in {LOG}:\n{}",
        tail(&log, 40)
    );
    let figures = read(&root.join(FIGURES)).map_err(anyhow::Error::msg)?;
    written_since(&figures, started).map_err(|why| anyhow::anyhow!("{FIGURES}: {why}"))?;
    let mut t = table();
    fill(&mut t, &figures);
    Ok(t)
}

fn table() -> Table {
    Table::new(
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
    )
}

/// Whether `figures` say they were measured at or after `since`: the lane writes its figures at
/// its end, so older ones are an earlier run's.
fn written_since(figures: &Value, since: jiff::Timestamp) -> Result<(), String> {
    let at = figures["measuredAt"].as_str().ok_or("the figures carry no measuredAt")?;
    let at: jiff::Timestamp = at.parse().map_err(|e| format!("measuredAt {at:?} is not a time ({e})"))?;
    // measuredAt is cut to the second, so `since` is compared cut the same way.
    if at.as_second() < since.as_second() {
        return Err(format!("measured {at}, before this run of the lane started ({since}): an earlier run's figures"));
    }
    Ok(())
}

/// The last `lines` lines of the file at `path`, for an error message.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
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
    let when = figures["measuredAt"].as_str().unwrap_or("?");
    t.note(format!(
        "The lane, run by this section ({server}, measured {when}; the release plugin package, the cluster from the \
         release `sandbox-dev`); its wall time was {wall}. \
         Each run is a `claude_local` agent whose CLI is a stand-in script (no LLM): run start -> agent is the sandbox's \
         set-up (acquire, realize, workspace upload, the callback bridge), executes are the run's environmentExecute \
         calls as the plugin timed them (the serve round trip included)."
    ));
    for note in figures["notes"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        t.note(note.to_string());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().expect("a time")
    }

    #[test]
    fn figures_of_this_run_are_taken() {
        let figures = json!({"measuredAt": "2026-12-05T04:30:12Z"});
        assert_eq!(written_since(&figures, at("2026-12-05T04:29:00Z")), Ok(()));
        // Cut to the second: a lane that ended within the second it started still counts.
        assert_eq!(written_since(&figures, at("2026-12-05T04:30:12.400Z")), Ok(()));
        assert_eq!(written_since(&figures, at("2026-12-05T04:30:12.700Z")), Ok(()));
    }

    #[test]
    fn figures_of_an_earlier_run_are_refused() {
        let figures = json!({"measuredAt": "2026-12-04T21:14:04Z"});
        let why = written_since(&figures, at("2026-12-05T04:29:00Z")).expect_err("an earlier run's figures");
        assert!(why.contains("earlier run"), "{why}");
    }

    #[test]
    fn figures_without_a_time_are_refused() {
        assert!(written_since(&json!({}), at("2026-12-05T04:29:00Z")).is_err());
        let why = written_since(&json!({"measuredAt": "yesterday"}), at("2026-12-05T04:29:00Z")).expect_err("no time");
        assert!(why.contains("not a time"), "{why}");
    }
}
