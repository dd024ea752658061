//! The documents a command line names (a config, a lease, a policy, limits): JSON or YAML, from
//! a file or (`-`) standard input, once per command.

use std::path::Path;

use anyhow::{Context, bail};

/// Reads a document the command line names (a config, a lease, a policy, limits) as JSON text:
/// the file in JSON, or in YAML (a mapping, as kubectl takes either), or with `-` standard
/// input. JSON is passed on as written; YAML as the JSON it stands for.
pub fn read_document(path: &Path, what: &str) -> anyhow::Result<String> {
    let (text, shown) = if path == Path::new("-") {
        if STDIN_READ.swap(true, std::sync::atomic::Ordering::SeqCst) {
            bail!("the {what} cannot come from standard input too: only one file can be `-`");
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .with_context(|| format!("read the {what} from standard input"))?;
        (text, "from standard input".to_string())
    } else {
        let text = std::fs::read_to_string(path).with_context(|| format!("read the {what} file {}", path.display()))?;
        (text, format!("file {}", path.display()))
    };
    let json_error = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(_) => return Ok(text),
        Err(e) => e,
    };
    match serde_yaml_ng::from_str::<serde_json::Value>(&text) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value.to_string()),
        // Text that starts like JSON is meant as JSON: its error says more than YAML's.
        _ if text.trim_start().starts_with(['{', '[']) => {
            Err(anyhow::Error::new(json_error).context(format!("the {what} {shown} is not JSON")))
        }
        Ok(_) => bail!("the {what} {shown} is neither a JSON object nor a YAML mapping"),
        Err(e) => Err(anyhow::Error::new(e).context(format!("the {what} {shown} is neither JSON nor YAML"))),
    }
}

/// Whether standard input was read already (by a `-` argument).
static STDIN_READ: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
