//! How long each scenario took in the last runs on the same kind of
//! cluster, so a run starts the longest scenarios first: a scenario that
//! starts last cannot end sooner than its own length after it started,
//! however many run beside it. Kept as `path<TAB>line<TAB>seconds` lines in
//! the user's state directory (not the cache: it cannot be rebuilt, and a
//! test run with its own home keeps its fixtures' times to itself); a
//! missing or unreadable file only means file order.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cucumber::gherkin::{Feature, Scenario};

use crate::report::{Record, ScenarioId};

/// `$DRA_E2E_STATE_DIR`, else `$XDG_STATE_HOME/dra-e2e`, else
/// `~/.local/state/dra-e2e`.
fn state_dir(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    match env("DRA_E2E_STATE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => env("XDG_STATE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env("HOME").unwrap_or_default()).join(".local/state"))
            .join("dra-e2e"),
    }
}

#[derive(Debug, Default)]
pub struct History {
    path: Option<PathBuf>,
    /// Seconds by feature path and scenario (or example row) line.
    seconds: BTreeMap<String, BTreeMap<usize, f64>>,
}

impl History {
    /// The history of runs on `cluster` (a file name: `local-simulated`…).
    pub fn load(cluster: &str) -> History {
        let path = state_dir(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
            .join("durations")
            .join(format!("{cluster}.tsv"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        History {
            path: Some(path),
            ..History::parse(&text)
        }
    }

    fn parse(text: &str) -> History {
        let mut seconds: BTreeMap<String, BTreeMap<usize, f64>> = BTreeMap::new();
        for line in text.lines() {
            let mut parts = line.split('\t');
            if let (Some(path), Some(Ok(n)), Some(Ok(s))) = (
                parts.next(),
                parts.next().map(str::parse::<usize>),
                parts.next().map(str::parse::<f64>),
            ) {
                seconds.entry(path.to_owned()).or_default().insert(n, s);
            }
        }
        History {
            path: None,
            seconds,
        }
    }

    /// Orders scenarios longest first: features by their longest scenario,
    /// the scenarios (and rules) of each by their own. A scenario never
    /// timed counts as longest, so a new one is not started last; ties keep
    /// file order.
    pub fn longest_first(&self, mut features: Vec<Feature>) -> Vec<Feature> {
        let mut keyed: Vec<(f64, Feature)> = features
            .drain(..)
            .map(|mut f| {
                let known = self.seconds.get(&feature_path(&f));
                let spans = spans(&f);
                let expect = |s: &Scenario| expected(known, &spans, s.position.line);
                sort_desc(&mut f.scenarios, expect);
                for rule in &mut f.rules {
                    sort_desc(&mut rule.scenarios, expect);
                }
                sort_desc(&mut f.rules, |r| {
                    r.scenarios.iter().map(expect).fold(0.0, f64::max)
                });
                let longest = f
                    .scenarios
                    .iter()
                    .chain(f.rules.iter().flat_map(|r| &r.scenarios))
                    .map(expect)
                    .fold(0.0, f64::max);
                (longest, f)
            })
            .collect();
        keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
        keyed.into_iter().map(|(_, f)| f).collect()
    }

    /// Takes the durations of the run's scenarios (a skipped one took no
    /// time, which places it last) and writes the file.
    pub fn save(mut self, records: &BTreeMap<ScenarioId, Record>) -> std::io::Result<()> {
        for (id, r) in records {
            self.seconds
                .entry(id.path.clone())
                .or_default()
                .insert(id.line, r.own_duration().as_secs_f64());
        }
        let Some(path) = &self.path else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut text = String::new();
        for (feature, lines) in &self.seconds {
            for (line, s) in lines {
                text.push_str(&format!("{feature}\t{line}\t{s:.2}\n"));
            }
        }
        // Whole or not at all: a run killed while writing leaves the old file.
        let tmp = path.with_extension(format!("tsv.{}", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

fn feature_path(f: &Feature) -> String {
    f.path
        .as_deref()
        .map(Path::display)
        .map(|p| p.to_string())
        .unwrap_or_default()
}

/// The first line of every scenario of the feature, sorted: a scenario's
/// example rows lie between its line and the next scenario's.
fn spans(f: &Feature) -> Vec<usize> {
    let mut lines: Vec<usize> = f
        .scenarios
        .iter()
        .chain(f.rules.iter().flat_map(|r| &r.scenarios))
        .map(|s| s.position.line)
        .chain(f.rules.iter().map(|r| r.position.line))
        .collect();
    lines.sort_unstable();
    lines
}

/// The longest time recorded for the scenario at `line` or one of its
/// example rows; infinite when none was.
fn expected(known: Option<&BTreeMap<usize, f64>>, spans: &[usize], line: usize) -> f64 {
    let end = spans
        .iter()
        .find(|&&l| l > line)
        .copied()
        .unwrap_or(usize::MAX);
    known
        .map(|k| k.range(line..end).map(|(_, s)| *s).fold(f64::NAN, f64::max))
        .filter(|s| !s.is_nan())
        .unwrap_or(f64::INFINITY)
}

fn sort_desc<T>(items: &mut [T], key: impl Fn(&T) -> f64) {
    items.sort_by(|a, b| key(b).total_cmp(&key(a)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_dir_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            state_dir(env(&[("HOME", "/h")])),
            PathBuf::from("/h/.local/state/dra-e2e")
        );
        assert_eq!(
            state_dir(env(&[("HOME", "/h"), ("XDG_STATE_HOME", "/s")])),
            PathBuf::from("/s/dra-e2e")
        );
        assert_eq!(
            state_dir(env(&[
                ("XDG_STATE_HOME", "/s"),
                ("DRA_E2E_STATE_DIR", "/d")
            ])),
            PathBuf::from("/d")
        );
    }

    fn feature(path: &str, text: &str) -> Feature {
        let mut f = Feature::parse(text, cucumber::gherkin::GherkinEnv::default()).unwrap();
        f.path = Some(path.into());
        f
    }

    const A: &str = "Feature: a

  Scenario: quick
    Given x

  Scenario Outline: slow <n>
    Given x

    Examples:
      | n |
      | 1 |
      | 2 |

  Scenario: never timed
    Given x
";

    const B: &str = "Feature: b

  Scenario: middling
    Given x
";

    #[test]
    fn longest_first_by_the_slowest_example_row_and_unknown_first() {
        // Line 11 is the second example row of the outline at line 6.
        let h = History::parse("a.feature\t3\t1.0\na.feature\t11\t20.0\nb.feature\t3\t5.0\n");
        let mut fs = h.longest_first(vec![feature("b.feature", B), feature("a.feature", A)]);
        // a has a scenario never timed: it counts as longest, so a goes first.
        assert_eq!(fs[0].name, "a");
        let names: Vec<&str> = fs[0].scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["never timed", "slow <n>", "quick"]);
        // Without the unknown scenario, b's 5 s come after a's 20 s.
        fs[0].scenarios.retain(|s| s.name != "never timed");
        let fs = h.longest_first(fs);
        assert_eq!(fs[0].name, "a");
        assert_eq!(fs[1].name, "b");
    }

    #[test]
    fn without_history_the_file_order_stays() {
        let fs = History::default()
            .longest_first(vec![feature("b.feature", B), feature("a.feature", A)]);
        assert_eq!(fs[0].name, "b");
        let names: Vec<&str> = fs[1].scenarios.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["quick", "slow <n>", "never timed"]);
    }

    #[test]
    fn saved_durations_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d/local-simulated.tsv");
        let h = History {
            path: Some(path.clone()),
            ..Default::default()
        };
        let mut records = BTreeMap::new();
        let id = ScenarioId {
            path: "a.feature".into(),
            line: 3,
            name: "quick".into(),
        };
        records.insert(
            id,
            Record {
                duration: std::time::Duration::from_millis(1500),
                ..Record::new(crate::report::Outcome::Passed)
            },
        );
        h.save(&records).unwrap();
        let back = History::parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(back.seconds["a.feature"][&3], 1.5);
    }
}
