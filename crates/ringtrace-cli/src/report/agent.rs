//! `stat` of a `ringtrace-ship` agent's state file (`ringtrace-ship ship --state`):
//! what each source shipped, could not ship and had refused by its ring, as text or
//! the JSON object `ringtrace-ship stat --format json` prints.

use crate::failure::Failure;
use crate::output::{print, print_json, ReportFormat};

/// `stat` of an agent's state file.
pub fn agent_state(path: &std::path::Path, format: ReportFormat) -> Result<(), Failure> {
    let state = match ringtrace_ship::state::State::load(path) {
        Ok(Some(s)) => s,
        Ok(None) => return Err(Failure::msg(format!("{}: no such file", path.display()))),
        Err(e) => return Err(Failure::msg(e.to_string())),
    };
    if format == ReportFormat::Text {
        return print(&format!("{}: a ringtrace-ship agent's state\n{state}", path.display()));
    }
    // The object `ringtrace-ship stat --format json` prints.
    print_json(&state.to_json())
}
