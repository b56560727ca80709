//! Progress lines of the cluster crate's long first-run work (building the
//! node agent with Cargo), said through whoever drives the crate.
//!
//! The runner keeps a status line at the bottom of the terminal; a line
//! printed straight to stderr from down here lands inside it. So the runner
//! installs its reporter as the sink once, at start, the way a program
//! installs a logger for a library's `log` lines; a program that installs
//! nothing (a test, a tool of its own) gets the lines on stderr.
use std::sync::OnceLock;

static SINK: OnceLock<fn(&str)> = OnceLock::new();

/// Routes this crate's progress lines to `sink` for the rest of the process.
/// The first sink installed stays: returns false when one already was.
pub fn set_sink(sink: fn(&str)) -> bool {
    SINK.set(sink).is_ok()
}

/// Says `line` through the installed sink, else on stderr.
pub(crate) fn say(line: &str) {
    match SINK.get() {
        Some(sink) => sink(line),
        None => eprintln!("{line}"),
    }
}
