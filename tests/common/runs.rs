//! A finished run of the runner as the tests read it, and the checks many
//! of them make of it: how it ended, what it said, which scenarios failed
//! with which message, what its JUnit report holds; and the test driver a
//! run of upstream's driver needs built.
use std::borrow::BorrowMut;
use std::path::Path;
use std::process::Command;

/// A run of the runner, ended. Every check shows all the run printed when
/// it fails.
pub struct Ran {
    pub code: Option<i32>,
    /// Stdout and stderr, one after the other.
    pub text: String,
    pub stderr: String,
}

impl Ran {
    /// Runs `command` (owned or borrowed from a builder chain) to its end.
    pub fn of(mut command: impl BorrowMut<Command>) -> Ran {
        let o = command.borrow_mut().output().unwrap();
        Ran {
            code: o.status.code(),
            text: super::text(&o),
            stderr: super::stderr(&o),
        }
    }

    #[track_caller]
    pub fn exits(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "{}", self.text);
        self
    }

    /// Ended other than with success.
    #[track_caller]
    pub fn fails(&self) -> &Self {
        assert_ne!(self.code, Some(0), "{}", self.text);
        self
    }

    #[track_caller]
    pub fn says(&self, part: &str) -> &Self {
        assert!(self.text.contains(part), "no {part:?} in\n{}", self.text);
        self
    }

    #[track_caller]
    pub fn never_says(&self, part: &str) -> &Self {
        assert!(!self.text.contains(part), "{part:?} in\n{}", self.text);
        self
    }

    #[track_caller]
    pub fn error_says(&self, part: &str) -> &Self {
        assert!(
            self.stderr.contains(part),
            "no {part:?} on stderr\n{}",
            self.text
        );
        self
    }

    /// Exited 1 with an error on stderr that starts with `start`.
    #[track_caller]
    pub fn fails_with(&self, start: &str) -> &Self {
        self.exits(1);
        assert!(
            self.stderr.starts_with(start),
            "stderr does not start with {start:?}\n{}",
            self.text
        );
        self
    }

    /// Exited 1 with exactly the error `line` on stderr.
    #[track_caller]
    pub fn fails_with_only(&self, line: &str) -> &Self {
        self.exits(1);
        assert_eq!(self.stderr.trim(), line, "{}", self.text);
        self
    }

    /// Exited 1 with an error of one line on stderr that says `part`.
    #[track_caller]
    pub fn fails_in_one_line_saying(&self, part: &str) -> &Self {
        self.exits(1);
        assert_eq!(self.stderr.trim().lines().count(), 1, "{}", self.text);
        self.error_says(part)
    }

    /// The run's own leak check found nothing in the cluster.
    #[track_caller]
    pub fn leak_check_clean(&self) -> &Self {
        self.says("leak check: nothing left behind")
    }

    /// Nothing of the run is left on the host under `home`.
    #[track_caller]
    pub fn left_nothing(&self, home: &Path) -> &Self {
        super::assert_nothing_left(home, &self.text);
        self
    }
}

/// The run of a fixture whose every scenario is wrong on purpose failed each
/// scenario of `expected`, its output saying every message given, and left
/// nothing behind: (scenario, messages).
#[track_caller]
pub fn assert_each_scenario_caught(home: &Path, run: &Ran, expected: &[(&str, &[&str])]) {
    run.exits(1)
        .says(&format!("0 passed, {} failed", expected.len()));
    for (name, messages) in expected {
        let out = super::scenario_output(&run.text, name);
        assert!(out.contains('✘'), "scenario {name:?} did not fail\n{out}");
        for m in *messages {
            assert!(out.contains(m), "scenario {name:?} lacks {m:?}\n{out}");
        }
    }
    run.leak_check_clean().left_nothing(home);
}

/// The case of JUnit suite `suite` named `name` (the scenario's title).
#[track_caller]
pub fn junit_case<'a>(
    suite: &'a junit_parser::TestSuite,
    name: &str,
) -> &'a junit_parser::TestCase {
    let found = suite.cases.iter().find(|c| c.original_name == name);
    found.unwrap_or_else(|| {
        let names: Vec<_> = suite.cases.iter().map(|c| &c.original_name).collect();
        panic!("no case {name:?} in suite {:?}: {names:?}", suite.name)
    })
}

/// Upstream's test driver is built where its profiles look for it.
#[track_caller]
pub fn assert_test_driver_built() {
    let program =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/dra-test-driver/dra-test-driver");
    assert!(
        program.exists(),
        "{} is missing: `make test-driver` builds upstream's test driver (make test does)",
        program.display()
    );
}
