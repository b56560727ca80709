//! Plain values in sentences: durations and quoted texts. Parsed here so
//! that a step gets a `Duration` or the strings themselves, never the
//! sentence's spelling of them.
use std::str::FromStr;
use std::time::Duration;

use super::quoted_list;

/// A duration like `20s`, `2m`, `500ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "duration", regex = r"\d+(?:ms|s|m|h)")]
pub struct Dur(pub Duration);

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s)
            .map(Dur)
            .map_err(|e| format!("bad duration {s:?}: {e}"))
    }
}

/// One or more quoted strings: `"a"`, `"a", "b" and "c"`.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "strings", regex = r#"".+""#)]
pub struct Strings(pub Vec<String>);

impl FromStr for Strings {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Strings(quoted_list(s)))
    }
}

/// A quoted text that may itself hold quotes (a CEL expression):
/// everything between the first and the last quote.
#[derive(Debug, Clone, PartialEq, Eq, cucumber::Parameter)]
#[param(name = "quoted", regex = r#"".+""#)]
pub struct Quoted(pub String);

impl FromStr for Quoted {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .map(|t| Quoted(t.to_owned()))
            .ok_or_else(|| format!("expected a quoted text, got {s:?}"))
    }
}
